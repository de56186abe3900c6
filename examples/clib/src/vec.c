#include <stdlib.h>
#include "vec.h"

void vec_init(vec *v) { v->items = NULL; v->len = v->cap = 0; }

int vec_push(vec *v, int x) {
    if (v->len == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 4;
        int *items = realloc(v->items, cap * sizeof *items);
        if (!items) return -1;
        v->items = items;
        v->cap = cap;
    }
    v->items[v->len++] = x;
    return 0;
}

int vec_sum(const vec *v) {
    int s = 0;
    for (size_t i = 0; i < v->len; i++) s += v->items[i];
    return s;
}

int vec_max(const vec *v) {
    int m = v->len ? v->items[0] : 0;
    for (size_t i = 1; i < v->len; i++)
        if (v->items[i] > m) m = v->items[i];
    return m;
}

void vec_reverse(vec *v) {
    for (size_t i = 0, j = v->len ? v->len - 1 : 0; i < j; i++, j--) {
        int t = v->items[i];
        v->items[i] = v->items[j];
        v->items[j] = t;
    }
}

void vec_free(vec *v) { free(v->items); vec_init(v); }
