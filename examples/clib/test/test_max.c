#include <assert.h>
#include <stdio.h>
#include "vec.h"
int main(void) {
    vec v; vec_init(&v);
    int xs[] = {3, -1, 7, 2};
    for (int i = 0; i < 4; i++) vec_push(&v, xs[i]);
    assert(vec_max(&v) == 7);
    vec_free(&v);
    puts("test_max: ok");
    return 0;
}
