#include <assert.h>
#include <stdio.h>
#include "vec.h"
int main(void) {
    vec v; vec_init(&v);
    for (int i = 0; i < 100; i++) assert(vec_push(&v, i) == 0);
    assert(v.len == 100 && v.cap >= 100);
    vec_free(&v);
    puts("test_push: ok");
    return 0;
}
