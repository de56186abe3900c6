/* memotest shim: turning (dirfd, path) into the absolute, normalized paths
 * of PROTOCOL.md, and the generic "record this outcome" helpers. */
#include "shim.h"

int shim_getcwd(char *out, size_t size)
{
    /* Raw syscall: never cached, threads may chdir at any time. The kernel
     * prefixes "(unreachable)" when the cwd is outside our root. */
    long n = syscall(SYS_getcwd, out, size);
    if (n <= 0 || out[0] != '/')
        return -1;
    return 0;
}

static size_t put_uint(char *out, unsigned v)
{
    char digits[16];
    size_t i = 0, n = 0;
    do {
        digits[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i)
        out[n++] = digits[--i];
    out[n] = '\0';
    return n;
}

int shim_fdpath(int fd, char *out)
{
    char link[64];
    long r;

    if (fd < 0)
        return -1;
    memcpy(link, "/proc/thread-self/fd/", 21);
    put_uint(link + 21, (unsigned)fd);
    r = syscall(SYS_readlinkat, AT_FDCWD, link, out, SHIM_PATHBUF - 1);
    if (r < 0 && errno == ENOENT) { /* kernels before 3.17 have no thread-self */
        memcpy(link, "/proc/self/fd/", 14);
        put_uint(link + 14, (unsigned)fd);
        r = syscall(SYS_readlinkat, AT_FDCWD, link, out, SHIM_PATHBUF - 1);
    }
    if (r <= 0 || r >= SHIM_PATHBUF - 1)
        return -1;
    out[r] = '\0';
    /* pipes, sockets, anon inodes read as "pipe:[123]": no path involved */
    return out[0] == '/' ? 0 : -2;
}

/* Collapse "//" and "." components and strip the trailing '/'; keep "..".
 * p starts with '/'; the result is never longer, so it is done in place. */
void shim_normalize(char *p)
{
    char *r = p, *w = p + 1, *s;
    size_t n;
    while (*r) {
        while (*r == '/')
            r++;
        if (*r == '\0')
            break;
        s = r;
        while (*r && *r != '/')
            r++;
        n = (size_t)(r - s);
        if (n == 1 && s[0] == '.')
            continue;
        if (w[-1] != '/')
            *w++ = '/';
        memmove(w, s, n);
        w += n;
    }
    *w = '\0';
}

static int join(char *out, const char *path)
{
    size_t blen = strlen(out), plen = strlen(path);
    if (blen + 1 + plen >= SHIM_PATHBUF) {
        shim_info("path too long");
        return -1;
    }
    out[blen] = '/';
    memcpy(out + blen + 1, path, plen + 1);
    shim_normalize(out);
    return 0;
}

int shim_abspath(int dirfd, const char *path, char *out)
{
    if (path[0] == '/') {
        size_t plen = strlen(path);
        if (plen >= SHIM_PATHBUF) {
            shim_info("path too long");
            return -1;
        }
        memcpy(out, path, plen + 1);
        shim_normalize(out);
        return 0;
    }
    if (dirfd == AT_FDCWD) {
        if (shim_getcwd(out, SHIM_PATHBUF) != 0) {
            shim_info("cannot resolve the current directory");
            return -1;
        }
    } else {
        int r = shim_fdpath(dirfd, out);
        if (r == -2)
            return -1; /* not a directory: the call looked nothing up */
        if (r != 0) {
            shim_info("cannot resolve a directory descriptor");
            return -1;
        }
    }
    return join(out, path);
}

int shim_abspath_base(const char *base, const char *path, char *out)
{
    size_t blen;
    if (path[0] == '/' || base == NULL || base[0] != '/')
        return shim_abspath(AT_FDCWD, path, out);
    blen = strlen(base);
    if (blen >= SHIM_PATHBUF) {
        shim_info("path too long");
        return -1;
    }
    memcpy(out, base, blen + 1);
    return join(out, path);
}

void shim_rec(char op, int dirfd, const char *path)
{
    char abs[SHIM_PATHBUF];
    if (path == NULL || path[0] == '\0')
        return;
    if (shim_abspath(dirfd, path, abs) == 0)
        shim_emit_path(op, abs);
}

void shim_rec_fd(char op, int fd)
{
    char abs[SHIM_PATHBUF];
    int r = shim_fdpath(fd, abs);
    if (r == 0) {
        shim_normalize(abs);
        shim_emit_path(op, abs);
    } else if (r == -1) {
        shim_info("cannot resolve a file descriptor");
    }
}

/* Errors that mean no lookup happened or tell nothing about the path. */
static int err_tells_nothing(int err)
{
    switch (err) {
    case EBADF: case EFAULT: case EINVAL: case ENOMEM: case EMFILE: case ENFILE:
    case ENAMETOOLONG: case ENOSYS:
        return 1;
    default:
        return 0;
    }
}

void shim_rec_res(int ok, int err, char okop, int dirfd, const char *path)
{
    if (path == NULL || path[0] == '\0')
        return;
    if (ok) {
        if (okop)
            shim_rec(okop, dirfd, path);
    } else if (err == ENOENT || err == ENOTDIR) {
        shim_rec('M', dirfd, path);
    } else if (!err_tells_nothing(err)) {
        shim_rec('S', dirfd, path);
    }
}

int shim_entry_mode(int dirfd, const char *path)
{
    struct stat st;
    int saved = errno, mode;
    long r;

    if (path == NULL || path[0] == '\0')
        return SHIM_ENTRY_UNKNOWN;
    r = shim_raw_fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW);
    if (r == 0)
        mode = (int)(st.st_mode & S_IFMT);
    else
        mode = errno == ENOENT ? SHIM_ENTRY_ABSENT : SHIM_ENTRY_UNKNOWN;
    errno = saved;
    return mode;
}

void shim_rec_no_folder(int dirfd, const char *path)
{
    char abs[SHIM_PATHBUF], *slash;
    struct stat st;
    int saved = errno;
    long r;

    if (path == NULL || path[0] == '\0' || shim_abspath(dirfd, path, abs) != 0)
        return;
    slash = strrchr(abs, '/');
    if (slash == NULL || strcmp(slash, "/..") == 0 || abs[1] == '\0')
        return; /* "/" or ".." last: no folder to name lexically */
    if (slash == abs)
        slash[1] = '\0';
    else
        *slash = '\0';
    r = shim_raw_fstatat(AT_FDCWD, abs, &st, 0);
    if (r != 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            shim_emit_path('M', abs);
    } else if (!S_ISDIR(st.st_mode)) {
        shim_emit_path('S', abs);
    }
    errno = saved;
}

void shim_rec_open(int ok, int err, int dirfd, const char *path, int flags, int pre)
{
    char abs[SHIM_PATHBUF];
    int acc = flags & O_ACCMODE, rd, wr, created, absent = pre == SHIM_ENTRY_ABSENT;

    if (path == NULL || path[0] == '\0' || flags == -1)
        return;
    if (!ok || (flags & O_PATH) || (flags & O_TMPFILE) == O_TMPFILE) {
        /* O_PATH is a lookup; O_TMPFILE names the directory it creates in. */
        shim_rec_res(ok, err, 'S', dirfd, path);
        if (!ok && (flags & O_CREAT) && (err == ENOENT || err == ENOTDIR))
            shim_rec_no_folder(dirfd, path);
        return;
    }
    rd = (acc == O_RDONLY || acc == O_RDWR || acc == O_ACCMODE) && !(flags & O_TRUNC);
    wr = acc != O_RDONLY || (flags & (O_CREAT | O_TRUNC));
    /* Without O_TRUNC an existing file keeps its bytes (O_APPEND, O_WRONLY, O_RDWR,
     * pwrite, fallocate, a shared mapping all go through such an fd): `U`. */
    /* O_CREAT|O_EXCL succeeds only by making the entry; plain O_CREAT made it
     * if the path was absent just before. */
    created = (flags & O_CREAT) && ((flags & O_EXCL) || absent);
    if (shim_abspath(dirfd, path, abs) != 0)
        return;
    if (rd)
        shim_emit_path((flags & O_DIRECTORY) ? 'S' : 'R', abs);
    /* An exclusive create succeeds only where the path was absent: that absence is what
     * it saw (a lock file), held as a lookup that missed before the creation. */
    if (wr && (flags & O_CREAT) && (flags & O_EXCL))
        shim_emit_path('M', abs);
    /* A plain O_CREAT succeeds on a missing path and on a file it may open, so its
     * success saw "absent or a regular file" where the entry was one of these just
     * before (`V`); a path it made without O_TRUNC is `Q`: the bytes of a file there
     * would have survived, which the reader holds where the tree reads the path.
     * Anything else there (a link, a fifo, a device) is left as it was: no record. */
    if (wr && (flags & (O_CREAT | O_EXCL)) == O_CREAT) {
        if (absent)
            shim_emit_path((flags & O_TRUNC) ? 'V' : 'Q', abs);
        else if (pre == S_IFREG)
            shim_emit_path('V', abs);
    }
    if (wr)
        shim_emit_path(created ? 'N' : (flags & O_TRUNC) ? 'W' : 'U', abs);
}

int shim_fopen_flags(const char *mode)
{
    int flags, i;
    if (mode == NULL)
        return -1;
    switch (mode[0]) {
    case 'r': flags = O_RDONLY; break;
    case 'w': flags = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': flags = O_WRONLY | O_CREAT | O_APPEND; break;
    default: return -1;
    }
    for (i = 1; i < 7 && mode[i] && mode[i] != ','; i++) {
        if (mode[i] == '+')
            flags = (flags & ~O_ACCMODE) | O_RDWR;
        else if (mode[i] == 'x')
            flags |= O_EXCL;
    }
    return flags;
}
