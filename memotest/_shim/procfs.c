/* memotest shim: paths under /proc and /dev that name real files, and the
 * POSIX shared memory and semaphore calls (glibc opens /dev/shm internally).
 *
 * /proc/PID/cwd, /proc/PID/root, /proc/PID/exe, /proc/PID/fd/N and
 * /proc/PID/map_files/RANGE (PID a number, `self`, `thread-self`, or
 * PID/task/TID) are "magic links": the kernel follows them to the process's
 * own working directory, root, executable or open file, whatever its name.
 * /dev/fd is a link to /proc/self/fd, /dev/stdin, /dev/stdout, /dev/stderr to
 * /proc/self/fd/0, 1, 2. A record of such a path is rewritten here, in the
 * process that made the call (its own state is at hand: its cwd, its fds), to
 * the path the link names, so that memotest fingerprints the real file. What
 * the link names no path (a pipe, a socket, an anonymous inode, a deleted
 * file) is left as it is: memotest drops /proc and /dev (but /dev/shm) as
 * truly virtual. A path that goes *through* such a link and whose link cannot
 * be read (another process that has gone, or that we may not look at) names a
 * real file that cannot be fingerprinted: an `I` record, the trace is
 * incomplete. */
#include "shim.h"

/* Length of the magic-link prefix of `p` (a normalized absolute path), or 0.
 * On success *through is set when something follows the link. */
static size_t magic_prefix(const char *p, int *through)
{
    const char *s;
    size_t n;
    if (strncmp(p, "/proc/", 6) != 0)
        return 0;
    s = p + 6;
    if (strncmp(s, "self", 4) == 0 && (s[4] == '/' || s[4] == '\0')) {
        s += 4;
    } else if (strncmp(s, "thread-self", 11) == 0 && (s[11] == '/' || s[11] == '\0')) {
        s += 11;
    } else if (*s >= '0' && *s <= '9') {
        while (*s >= '0' && *s <= '9')
            s++;
        if (*s != '/' && *s != '\0')
            return 0;
    } else {
        return 0;
    }
    if (strncmp(s, "/task/", 6) == 0 && s[6] >= '0' && s[6] <= '9') {
        s += 6;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s != '/')
        return 0;
    s++;
    if ((strncmp(s, "cwd", 3) == 0 || strncmp(s, "exe", 3) == 0) && (s[3] == '/' || !s[3]))
        s += 3;
    else if (strncmp(s, "root", 4) == 0 && (s[4] == '/' || s[4] == '\0'))
        s += 4;
    else if (strncmp(s, "fd/", 3) == 0 && s[3] >= '0' && s[3] <= '9')
        s += 3;
    else if (strncmp(s, "map_files/", 10) == 0 && s[10] && s[10] != '/')
        s += 10;
    else
        return 0;
    while (*s && *s != '/')
        s++;
    n = (size_t)(s - p);
    *through = *s == '/';
    return n;
}

/* /dev/fd/..., /dev/stdin, /dev/stdout, /dev/stderr as /proc/self/fd/... in
 * out[SHIM_PATHBUF]; 0, or -1 when `p` is none of them. */
static int dev_alias(const char *p, char *out)
{
    static const char *const std[3] = {"/dev/stdin", "/dev/stdout", "/dev/stderr"};
    size_t plen = strlen(p);
    int i;
    if (strncmp(p, "/dev/fd/", 8) == 0 && plen + 8 < SHIM_PATHBUF) {
        memcpy(out, "/proc/self/fd/", 14);
        memcpy(out + 14, p + 8, plen - 8 + 1);
        return 0;
    }
    for (i = 0; i < 3; i++) {
        size_t l = strlen(std[i]);
        if (strncmp(p, std[i], l) == 0 && (p[l] == '/' || p[l] == '\0') &&
            plen + 16 < SHIM_PATHBUF) {
            memcpy(out, "/proc/self/fd/", 14);
            out[14] = (char)('0' + i);
            memcpy(out + 15, p + l, plen - l + 1);
            return 0;
        }
    }
    return -1;
}

/* `abs` itself, or the path a magic link in it names, in out[SHIM_PATHBUF]. */
static const char *magic_path(char op, const char *abs, char *out)
{
    char link[160], target[PATH_MAX + 1];
    const char *p = abs;
    size_t n, tlen, rest;
    int through = 0;
    long r;

    if (dev_alias(abs, out) == 0)
        p = out;
    n = magic_prefix(p, &through);
    if (n == 0 || n >= sizeof link)
        return abs;
    memcpy(link, p, n);
    link[n] = '\0';
    r = syscall(SYS_readlinkat, AT_FDCWD, link, target, sizeof target - 1);
    if (r <= 0 || r >= (long)sizeof target - 1) {
        /* The link is there (the call went through it) but cannot be read. */
        if (through && op != 'M' && op != 'D')
            shim_info("a path through /proc names a file the shim cannot resolve");
        return abs;
    }
    target[r] = '\0';
    tlen = (size_t)r;
    if (target[0] != '/' || (tlen > 10 && strcmp(target + tlen - 10, " (deleted)") == 0))
        return abs; /* pipe:[..], socket:[..], anon_inode:..., a deleted file */
    rest = strlen(p + n);
    if (tlen + rest + 1 >= SHIM_PATHBUF)
        return abs;
    memmove(out + tlen, p + n, rest + 1); /* p may be out itself */
    memcpy(out, target, tlen);
    shim_normalize(out);
    return out;
}

void shim_emit_magic(char op, const char *abs)
{
    char out[SHIM_PATHBUF];
    const char *f[1];
    int e = errno;
    f[0] = magic_path(op, abs, out);
    shim_emit(op, 0, 1, f);
    errno = e;
}

/* ------------------------------------------------ POSIX shm and semaphores
 * glibc opens /dev/shm/NAME (sem_open: /dev/shm/sem.NAME) with its internal
 * open: the shim's open never sees it. */

static int shm_name(const char *prefix, const char *name, char *out)
{
    size_t pl = strlen(prefix), nl;
    if (name == NULL)
        return -1;
    while (*name == '/')
        name++;
    nl = strlen(name);
    if (nl == 0 || strchr(name, '/') != NULL || pl + nl + 1 > SHIM_PATHBUF)
        return -1;
    memcpy(out, prefix, pl);
    memcpy(out + pl, name, nl + 1);
    return 0;
}

int shm_open(const char *name, int oflag, mode_t mode)
{
    char path[SHIM_PATHBUF];
    int have = 0, pre = SHIM_ENTRY_UNKNOWN, fd, e;
    if (shim_on() && shm_name("/dev/shm/", name, path) == 0) {
        have = 1;
        if ((oflag & (O_CREAT | O_EXCL)) == O_CREAT)
            pre = shim_entry_mode(AT_FDCWD, path);
    }
    fd = REAL(shm_open)(name, oflag, mode);
    if (have && shim_on()) {
        e = errno;
        shim_rec_open(fd >= 0, e, AT_FDCWD, path, oflag, pre);
        errno = e;
    }
    return fd;
}

/* `D` of the /dev/shm file of a successful unlink. */
static void unlink_post(int r, const char *prefix, const char *name)
{
    char path[SHIM_PATHBUF];
    int e = errno;
    if (shm_name(prefix, name, path) == 0)
        shim_rec_res(r == 0, e, 'D', AT_FDCWD, path);
    errno = e;
}

int shm_unlink(const char *name)
{
    int r = REAL(shm_unlink)(name);
    if (shim_on())
        unlink_post(r, "/dev/shm/", name);
    return r;
}

sem_t *sem_open(const char *name, int oflag, ...)
{
    char path[SHIM_PATHBUF];
    mode_t mode = 0;
    unsigned value = 0;
    int have = 0, pre = SHIM_ENTRY_UNKNOWN, e;
    sem_t *s;
    if (oflag & O_CREAT) {
        va_list ap;
        va_start(ap, oflag);
        mode = (mode_t)va_arg(ap, int);
        value = va_arg(ap, unsigned);
        va_end(ap);
    }
    if (shim_on() && shm_name("/dev/shm/sem.", name, path) == 0) {
        have = 1;
        if ((oflag & (O_CREAT | O_EXCL)) == O_CREAT)
            pre = shim_entry_mode(AT_FDCWD, path);
    }
    s = REAL(sem_open)(name, oflag, mode, value);
    if (have && shim_on()) {
        e = errno;
        /* A semaphore is opened read-write: its value is read. */
        shim_rec_open(s != SEM_FAILED, e, AT_FDCWD, path, (oflag & (O_CREAT | O_EXCL)) | O_RDWR,
                      pre);
        errno = e;
    }
    return s;
}

int sem_unlink(const char *name)
{
    int r = REAL(sem_unlink)(name);
    if (shim_on())
        unlink_post(r, "/dev/shm/sem.", name);
    return r;
}
