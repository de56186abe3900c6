/* memotest-sh's front: what front.c and context.c share. */
#ifndef MEMOTEST_FRONT_H
#define MEMOTEST_FRONT_H
#include <stddef.h>

struct buf {
    char *data;
    size_t len, cap;
};

void put(struct buf *b, const char *s, size_t n);
/* The whole file at path appended to b; -1 when it cannot be read. */
int read_path(const char *path, struct buf *b);
/* The context (front.c): argv and the folder (the stamp's name is their hash: their
 * length is *head), the real folder, then the process state; -1 when it cannot be read. */
int context(int argc, char **argv, const char *cwd, struct buf *ctx, size_t *head);
#endif
