#include <assert.h>
#include <stdio.h>
#include "vec.h"
int main(void) {
    vec v; vec_init(&v);
    for (int i = 0; i < 5; i++) vec_push(&v, i);
    vec_reverse(&v);
    for (int i = 0; i < 5; i++) assert(v.items[i] == 4 - i);
    vec_free(&v);
    puts("test_reverse: ok");
    return 0;
}
