#include <assert.h>
#include <stdio.h>
#include "vec.h"
int main(void) {
    vec v; vec_init(&v);
    for (int i = 1; i <= 10; i++) vec_push(&v, i);
    assert(vec_sum(&v) == 55);
    vec_free(&v);
    puts("test_sum: ok");
    return 0;
}
