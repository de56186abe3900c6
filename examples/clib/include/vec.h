#ifndef VEC_H
#define VEC_H
#include <stddef.h>

/* A growable array of ints: the library the four test programs check. */
typedef struct {
    int *items;
    size_t len, cap;
} vec;

void vec_init(vec *v);
int vec_push(vec *v, int x);
int vec_sum(const vec *v);
int vec_max(const vec *v);
void vec_reverse(vec *v);
void vec_free(vec *v);

#endif
