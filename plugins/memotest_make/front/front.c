/* memotest-sh's front: replays a recipe line whose stamp still holds, else runs the
 * Python memotest-sh (memotest-sh-py).
 *
 * A replayed line should cost about what `sh -c` costs; a Python start alone costs more.
 * So this program, which make runs as its SHELL, does one thing: it reads the line's
 * stamp (written by Python alone, plugins/memotest_make/stamp.py, which documents the
 * format and why a stamp that holds means the record holds) and, when every check in it
 * holds, writes the stamped log and message and exits with the stamped code. Anything
 * else (no stamp, a check that fails, a stamp it cannot read, a --root option) execs
 * memotest-sh-py, with this process's context and the stamp's path so that the Python
 * side can stamp what it replays.
 *
 * What this program decides on its own is its *context*: the command line, the folder
 * (and its real path) and the process state a recipe inherits (/proc/self/status but
 * for the fields that change from process to process, the resource limits, the
 * personality, the nice value, the machine). The stamp holds the context of the process
 * that stamped it; the line replays only in the same context. Every other check is a
 * list in the stamp that this program evaluates without interpreting it: environment
 * patterns and the variables they matched, file descriptors that must be closed, paths
 * and their stat signatures, paths that must exist.
 *
 * `memotest-sh --front-context` prints the context (the tests compare it with the key),
 * `memotest-sh --front-content FILE` what a content check reads (tested against Python).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "sha256.h"

extern char **environ;

#include "front.h"

#define MAGIC "memotest-sh stamp 2\n"

/* FNV-1a, 64 bits: the stamp's file name (the stamp holds the whole context anyway). */
static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* "SHA256HEX MODE NLINK" of a regular file (read through no link), its signature the
 * same before and after the read; "" when it is not one or changed meanwhile. */
static void content(const char *path, char *out, size_t size) {
    *out = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) return;
    struct stat before, after;
    struct sha256 c;
    unsigned char chunk[65536];
    ssize_t n = 0;
    sha256_init(&c);
    if (fstat(fd, &before) < 0 || !S_ISREG(before.st_mode)) goto out;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) sha256_update(&c, chunk, (size_t)n);
    if (n < 0 || fstat(fd, &after) < 0 || before.st_size != after.st_size ||
        before.st_mtim.tv_sec != after.st_mtim.tv_sec ||
        before.st_mtim.tv_nsec != after.st_mtim.tv_nsec ||
        before.st_ctim.tv_sec != after.st_ctim.tv_sec ||
        before.st_ctim.tv_nsec != after.st_ctim.tv_nsec)
        goto out;
    char hex[65];
    sha256_hex(&c, hex);
    snprintf(out, size, "%s %o %lu", hex, (unsigned)(before.st_mode & 07777),
             (unsigned long)before.st_nlink);
out:
    close(fd);
}

/* -- the stamp: fields are "<decimal length>\n<bytes>\n" -------------------------------- */

struct reader {
    const char *p, *end;
    int bad;
};

static const char *field(struct reader *r, size_t *n) {
    char *stop;
    if (r->bad || r->p >= r->end) goto bad;
    errno = 0;
    unsigned long long len = strtoull(r->p, &stop, 10);
    if (errno || stop == r->p || stop >= r->end || *stop != '\n') goto bad;
    const char *data = stop + 1;
    if (len > (unsigned long long)(r->end - data) || (size_t)(r->end - data) - len < 1 ||
        data[len] != '\n')
        goto bad;
    r->p = data + len + 1;
    *n = (size_t)len;
    return data;
bad:
    r->bad = 1;
    *n = 0;
    return "";
}

static long count(struct reader *r) {
    size_t n;
    const char *f = field(r, &n);
    char text[24];
    if (r->bad || n == 0 || n >= sizeof text) return r->bad = 1, -1;
    memcpy(text, f, n);
    text[n] = '\0';
    char *stop;
    long v = strtol(text, &stop, 10);
    if (*stop) return r->bad = 1, -1;
    return v;
}

static int same(const char *a, size_t an, const char *b, size_t bn) {
    return an == bn && memcmp(a, b, an) == 0;
}

/* "mode ino dev size mtime_ns ctime_ns", "-" when nothing is there, "" on another error. */
static void signature(const char *path, int follow, char *out, size_t size) {
    struct stat st;
    if ((follow ? stat(path, &st) : lstat(path, &st)) < 0) {
        snprintf(out, size, "%s", (errno == ENOENT || errno == ENOTDIR) ? "-" : "");
        return;
    }
    snprintf(out, size, "%u %llu %llu %lld %lld %lld", (unsigned)st.st_mode,
             (unsigned long long)st.st_ino, (unsigned long long)st.st_dev, (long long)st.st_size,
             (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec,
             (long long)st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec);
}

static int env_holds(struct reader *r) {
    long npat = count(r);
    if (npat < 0) return 0;
    const char **pats = calloc((size_t)npat + 1, sizeof *pats);
    for (long i = 0; i < npat; i++) {
        size_t n;
        const char *f = field(r, &n);
        pats[i] = strndup(f, n);
    }
    long nent = count(r);
    if (nent < 0) return 0;
    const char **ents = calloc((size_t)nent + 1, sizeof *ents);
    size_t *lens = calloc((size_t)nent + 1, sizeof *lens);
    for (long i = 0; i < nent; i++) ents[i] = field(r, &lens[i]);
    if (r->bad) return 0;
    long matched = 0;
    for (char **e = environ; *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        char *name = strndup(*e, (size_t)(eq - *e));
        int watched = 0;
        for (long i = 0; i < npat && !watched; i++)
            watched = fnmatch(pats[i], name, FNM_NOESCAPE) == 0;
        free(name);
        if (!watched) continue;
        long i = 0;
        while (i < nent && !same(ents[i], lens[i], *e, strlen(*e))) i++;
        if (i == nent) return 0;
        matched++;
    }
    return matched == nent;
}

static int fds_hold(struct reader *r) {
    long n = count(r);
    for (long i = 0; i < n; i++) {
        long fd = count(r);
        if (r->bad || fd < 0 || fd > INT_MAX || fcntl((int)fd, F_GETFD) != -1) return 0;
    }
    return !r->bad;
}

/* Each path's check; *rehashed: a file held by its content had a new signature. */
static int paths_hold(struct reader *r, int *rehashed) {
    long n = count(r);
    char now[160];
    for (long i = 0; i < n && !r->bad; i++) {
        size_t kn, pn, sn;
        const char *kind = field(r, &kn);
        const char *path = field(r, &pn);
        const char *sig = field(r, &sn);
        if (r->bad || kn != 1 || memchr(path, '\0', pn)) return 0;
        char *p = strndup(path, pn);
        int ok = 0;
        if (*kind == 'E') {
            struct stat st;
            ok = lstat(p, &st) == 0;
        } else if (*kind == 'L' || *kind == 'S') {
            signature(p, *kind == 'S', now, sizeof now);
            ok = *now && same(now, strlen(now), sig, sn);
        } else if (*kind == 'C') {  /* "SIGNATURE\tSHA256 MODE NLINK-or-*" */
            const char *tab = memchr(sig, '\t', sn);
            signature(p, 0, now, sizeof now);
            if (tab && *now && same(now, strlen(now), sig, (size_t)(tab - sig))) {
                ok = 1;
            } else if (tab) {
                const char *want = tab + 1;
                size_t wn = sn - (size_t)(want - sig);
                content(p, now, sizeof now);
                char *last = strrchr(now, ' ');
                if (*now && wn >= 2 && want[wn - 1] == '*' && want[wn - 2] == ' ')
                    ok = last && same(now, (size_t)(last - now + 1), want, wn - 1);
                else
                    ok = *now && same(now, strlen(now), want, wn);
                *rehashed |= ok;
            }
        }
        free(p);
        if (!ok) return 0;
    }
    return !r->bad;
}

/* The record's modification-time orders (memotest/inputs/order.py): each file's mtime
 * keeps its relation to the one before ('<' newer, '=' the same). */
static int orders_hold(struct reader *r, int check) {
    long n = count(r);
    for (long i = 0; i < n && !r->bad; i++) {
        size_t mn;
        const char *marks = field(r, &mn);
        long np = count(r);
        long long prev = 0;
        for (long j = 0; j < np && !r->bad; j++) {
            size_t pn;
            const char *path = field(r, &pn);
            if (!check) continue;
            if ((size_t)np != mn || memchr(path, '\0', pn)) return 0;
            char *p = strndup(path, pn);
            struct stat st;
            int there = stat(p, &st) == 0;
            free(p);
            if (!there) return 0;
            long long m = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
            if (j > 0 && (m < prev || (m > prev) != (marks[j] == '<'))) return 0;
            prev = m;
        }
    }
    return !r->bad;
}

static void write_all(int fd, const char *s, size_t n) {
    while (n) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

/* The stamp replayed (its exit code), or -1: it does not hold. */
static int replay(const struct buf *stamp, const struct buf *ctx) {
    size_t magic = strlen(MAGIC);
    if (stamp->len < magic || memcmp(stamp->data, MAGIC, magic) != 0) return -1;
    struct reader r = {stamp->data + magic, stamp->data + stamp->len, 0};
    size_t n;
    const char *f = field(&r, &n);
    if (r.bad || !same(f, n, ctx->data, ctx->len)) return -1;
    int rehashed = 0;
    if (!env_holds(&r) || !fds_hold(&r) || !paths_hold(&r, &rehashed)) return -1;
    if (!orders_hold(&r, rehashed)) return -1;
    const char *message = field(&r, &n);
    size_t message_len = n;
    long code = count(&r);
    if (r.bad || code < 0 || code > 255) return -1;
    write_all(1, r.p, (size_t)(r.end - r.p));
    write_all(2, message, message_len);
    return (int)code;
}

static void run_python(int argc, char **argv, const char *ctx_arg, const char *stamp_arg) {
    char self[PATH_MAX], py[PATH_MAX + 32];
    char **args = calloc((size_t)argc + 4, sizeof *args);
    int k = 0;
    args[k++] = "memotest-sh-py";
    if (ctx_arg) args[k++] = (char *)ctx_arg;
    if (stamp_arg) args[k++] = (char *)stamp_arg;
    for (int i = 1; i < argc; i++) args[k++] = argv[i];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            snprintf(py, sizeof py, "%s/memotest-sh-py", self);
            execv(py, args);
        }
    }
    execvp("memotest-sh-py", args);
    fprintf(stderr, "memotest-sh: cannot run memotest-sh-py: %s\n", strerror(errno));
    exit(127);
}

int main(int argc, char **argv) {
    char cwd[PATH_MAX];
    struct buf ctx = {0};
    size_t head = 0;
    if (!getcwd(cwd, sizeof cwd)) run_python(argc, argv, NULL, NULL);
    if (argc == 3 && strcmp(argv[1], "--front-content") == 0) {  /* for the tests */
        char out[160];
        content(argv[2], out, sizeof out);
        puts(out);
        return !*out;
    }
    if (argc == 2 && strcmp(argv[1], "--front-context") == 0) {
        if (context(1, argv, cwd, &ctx, &head) < 0) return 1;
        write_all(1, ctx.data, ctx.len);
        return 0;
    }
    for (int i = 1; i < argc - 1; i++)  /* the stamps are in the folder's .memotest/ */
        if (strncmp(argv[i], "--root", 6) == 0) run_python(argc, argv, NULL, NULL);
    if (argc < 2 || context(argc, argv, cwd, &ctx, &head) < 0)
        run_python(argc, argv, NULL, NULL);
    char name[40];
    snprintf(name, sizeof name, "/%016llx.stamp", (unsigned long long)fnv1a(ctx.data, head));
    struct buf path = {0}, stamp = {0}, arg = {0};
    put(&path, "--front-stamp=", 14);
    put(&path, cwd, strlen(cwd));
    put(&path, "/.memotest/make-stamps", 22);
    put(&path, name, strlen(name));
    if (read_path(path.data + 14, &stamp) == 0) {
        int code = replay(&stamp, &ctx);
        if (code >= 0) return code;
    }
    put(&arg, "--front-context=", 16);
    put(&arg, ctx.data, ctx.len);
    run_python(argc, argv, arg.data, path.data);
    return 127;
}
