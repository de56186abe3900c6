/* memotest-sh's front: its context (front.c says what it is for), and the buffer it
 * is built in. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "front.h"

void put(struct buf *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096);
        while (cap < b->len + n + 1) cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data) abort();
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

/* A string of the context, "<length>:<bytes>\n" (the context has no NUL: it is passed to
 * memotest-sh-py as one argument). */
static void put_string(struct buf *b, const char *s) {
    char len[24];
    put(b, len, (size_t)snprintf(len, sizeof len, "%zu:", strlen(s)));
    put(b, s, strlen(s));
    put(b, "\n", 1);
}

static int read_fd(int fd, struct buf *b) {
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) return 0;
        put(b, chunk, (size_t)n);
    }
}

int read_path(const char *path, struct buf *b) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = read_fd(fd, b);
    close(fd);
    return rc;
}

/* Fields of /proc/self/status that differ between two runs of the same process. */
static const char *const VOLATILE[] = {
    "Name", "State", "Tgid", "Ngid", "Pid", "PPid", "TracerPid", "FDSize", "Threads",
    "SigQ", "SigPnd", "ShdPnd", "NStgid", "NSpid", "NSpgid", "NSsid", "Kthread",
    "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", NULL};
static const char *const VOLATILE_PREFIXES[] = {"Vm", "Rss", "Hugetlb", NULL};

static int volatile_field(const char *line, size_t n) {
    for (const char *const *v = VOLATILE; *v; v++)
        if (strlen(*v) == n && memcmp(line, *v, n) == 0) return 1;
    for (const char *const *p = VOLATILE_PREFIXES; *p; p++)
        if (n >= strlen(*p) && memcmp(line, *p, strlen(*p)) == 0) return 1;
    return 0;
}

/* The context: argv and the folder (the stamp's name is their hash: their length is
 * *head), the real folder, then the process state (see the top). */
int context(int argc, char **argv, const char *cwd, struct buf *ctx, size_t *head) {
    char real[PATH_MAX];
    put(ctx, "argv\n", 5);
    for (int i = 1; i < argc; i++) put_string(ctx, argv[i]);
    put(ctx, "cwd\n", 4);
    put_string(ctx, cwd);
    *head = ctx->len;
    if (!realpath(cwd, real)) return -1;
    put_string(ctx, real);
    put(ctx, "status\n", 7);
    struct buf status = {0};
    if (read_path("/proc/self/status", &status) < 0) return -1;
    int umask_seen = 0;
    for (char *line = status.data; line && *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line + 1) : strlen(line);
        char *colon = memchr(line, ':', len);
        size_t name = colon ? (size_t)(colon - line) : len;
        if (name == 5 && memcmp(line, "Umask", 5) == 0) umask_seen = 1;
        if (!volatile_field(line, name)) put(ctx, line, len);
        line = end ? end + 1 : NULL;
    }
    free(status.data);
    if (!umask_seen) {
        mode_t mask = umask(022);
        umask(mask);
        char text[32];
        put(ctx, text, (size_t)snprintf(text, sizeof text, "Umask:\t%04o\n", (unsigned)mask));
    }
    put(ctx, "limits\n", 7);
    if (read_path("/proc/self/limits", ctx) < 0) return -1;
    put(ctx, "personality\n", 12);
    if (read_path("/proc/self/personality", ctx) < 0) return -1;
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    if (errno) return -1;
    struct utsname u;
    if (uname(&u) < 0) return -1;
    char text[128];
    put(ctx, text, (size_t)snprintf(text, sizeof text, "nice %d\nmachine %s\n", nice, u.machine));
    return 0;
}
