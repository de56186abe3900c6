/* memotest shim: file-system wrappers (open, stat, access, readlink,
 * directories, rename/unlink/mkdir/link, metadata writes, chdir).
 * Each wrapper calls the real function, then records from its outcome. */
#include "shim.h"

#define OPEN_MODE(flags, last)                                                 \
    mode_t mode = 0;                                                           \
    if (__OPEN_NEEDS_MODE(flags)) {                                            \
        va_list ap;                                                            \
        va_start(ap, last);                                                    \
        mode = (mode_t)va_arg(ap, int);                                        \
        va_end(ap);                                                            \
    }

/* Before the real call of an open that may create the path (O_CREAT without
 * O_EXCL): what was there? Declares `pre_` for OPEN_POST. Plain reads and
 * O_EXCL opens (success means created) cost nothing. */
#define OPEN_PRE(dirfd, path, flags)                                           \
    int pre_ = SHIM_ENTRY_UNKNOWN;                                             \
    if (SHIM_UNLIKELY(((flags) & (O_CREAT | O_EXCL)) == O_CREAT) &&            \
        (flags) != -1 && shim_on())                                            \
        pre_ = shim_entry_mode((dirfd), (path))

#define OPEN_POST(ok, dirfd, path, flags)                                      \
    do {                                                                       \
        if (shim_on()) {                                                       \
            int e_ = errno;                                                    \
            shim_rec_open((ok), e_, (dirfd), (path), (flags), pre_);           \
            errno = e_;                                                        \
        }                                                                      \
    } while (0)

/* Record `op` for the file open on fd (AT_EMPTY_PATH-style calls). */
#define FD_POST(ok, op, fd)                                                    \
    do {                                                                       \
        if ((ok) && shim_on()) {                                               \
            int e_ = errno;                                                    \
            shim_rec_fd((op), (fd));                                           \
            errno = e_;                                                        \
        }                                                                      \
    } while (0)

/* ------------------------------------------------------------------- open */

int open(const char *path, int flags, ...)
{
    OPEN_MODE(flags, flags);
    OPEN_PRE(AT_FDCWD, path, flags);
    int fd = REAL(open)(path, flags, mode);
    OPEN_POST(fd >= 0, AT_FDCWD, path, flags);
    return fd;
}

int open64(const char *path, int flags, ...)
{
    OPEN_MODE(flags, flags);
    OPEN_PRE(AT_FDCWD, path, flags);
    int fd = REAL(open64)(path, flags, mode);
    OPEN_POST(fd >= 0, AT_FDCWD, path, flags);
    return fd;
}

int openat(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, flags);
    OPEN_PRE(dirfd, path, flags);
    int fd = REAL(openat)(dirfd, path, flags, mode);
    OPEN_POST(fd >= 0, dirfd, path, flags);
    return fd;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    OPEN_MODE(flags, flags);
    OPEN_PRE(dirfd, path, flags);
    int fd = REAL(openat64)(dirfd, path, flags, mode);
    OPEN_POST(fd >= 0, dirfd, path, flags);
    return fd;
}

int __open_2(const char *path, int flags)
{
    OPEN_PRE(AT_FDCWD, path, flags);
    int fd = REAL(__open_2)(path, flags);
    OPEN_POST(fd >= 0, AT_FDCWD, path, flags);
    return fd;
}

int __open64_2(const char *path, int flags)
{
    OPEN_PRE(AT_FDCWD, path, flags);
    int fd = REAL(__open64_2)(path, flags);
    OPEN_POST(fd >= 0, AT_FDCWD, path, flags);
    return fd;
}

int __openat_2(int dirfd, const char *path, int flags)
{
    OPEN_PRE(dirfd, path, flags);
    int fd = REAL(__openat_2)(dirfd, path, flags);
    OPEN_POST(fd >= 0, dirfd, path, flags);
    return fd;
}

int __openat64_2(int dirfd, const char *path, int flags)
{
    OPEN_PRE(dirfd, path, flags);
    int fd = REAL(__openat64_2)(dirfd, path, flags);
    OPEN_POST(fd >= 0, dirfd, path, flags);
    return fd;
}

int creat(const char *path, mode_t mode)
{
    OPEN_PRE(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
    int fd = REAL(creat)(path, mode);
    OPEN_POST(fd >= 0, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
    return fd;
}

int creat64(const char *path, mode_t mode)
{
    OPEN_PRE(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
    int fd = REAL(creat64)(path, mode);
    OPEN_POST(fd >= 0, AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC);
    return fd;
}

FILE *fopen(const char *path, const char *mode)
{
    int flags = shim_fopen_flags(mode);
    OPEN_PRE(AT_FDCWD, path, flags);
    FILE *f = REAL(fopen)(path, mode);
    OPEN_POST(f != NULL, AT_FDCWD, path, flags);
    return f;
}

FILE *fopen64(const char *path, const char *mode)
{
    int flags = shim_fopen_flags(mode);
    OPEN_PRE(AT_FDCWD, path, flags);
    FILE *f = REAL(fopen64)(path, mode);
    OPEN_POST(f != NULL, AT_FDCWD, path, flags);
    return f;
}

FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    int flags = shim_fopen_flags(mode);
    OPEN_PRE(AT_FDCWD, path, flags);
    FILE *f = REAL(freopen)(path, mode, stream);
    OPEN_POST(f != NULL, AT_FDCWD, path, flags); /* NULL path: nothing */
    return f;
}

FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    int flags = shim_fopen_flags(mode);
    OPEN_PRE(AT_FDCWD, path, flags);
    FILE *f = REAL(freopen64)(path, mode, stream);
    OPEN_POST(f != NULL, AT_FDCWD, path, flags);
    return f;
}

/* ------------------------------------------------------------ stat family */

/* `T`: a lookup that handed the caller the file's times (and size, mode, links).
 * The access family, readlink, realpath and chdir find a path but give no time:
 * they stay `S`, and only `T` paths can be in a run's modification-time order.
 * Inside an untimed call (memotest_shim_untimed, core.c) a stat is `S` too, and inside
 * a yes-or-no probe (memotest_shim_probe) `p`. */

int stat(const char *path, struct stat *buf)
{
    int r = REAL(stat)(path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int stat64(const char *path, struct stat64 *buf)
{
    int r = REAL(stat64)(path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int lstat(const char *path, struct stat *buf)
{
    int r = REAL(lstat)(path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int lstat64(const char *path, struct stat64 *buf)
{
    int r = REAL(lstat64)(path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

/* An empty path (AT_EMPTY_PATH) is an fstat: shim_rec_res records nothing. */
int fstatat(int dirfd, const char *path, struct stat *buf, int flags)
{
    int r = REAL(fstatat)(dirfd, path, buf, flags);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, dirfd, path);
    return r;
}

int fstatat64(int dirfd, const char *path, struct stat64 *buf, int flags)
{
    int r = REAL(fstatat64)(dirfd, path, buf, flags);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, dirfd, path);
    return r;
}

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *buf)
{
    int r = REAL(statx)(dirfd, path, flags, mask, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, dirfd, path);
    return r;
}

/* Binaries linked against glibc < 2.33 call these. */
int __xstat(int ver, const char *path, struct stat *buf)
{
    int r = REAL(__xstat)(ver, path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int __xstat64(int ver, const char *path, struct stat64 *buf)
{
    int r = REAL(__xstat64)(ver, path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int __lxstat(int ver, const char *path, struct stat *buf)
{
    int r = REAL(__lxstat)(ver, path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int __lxstat64(int ver, const char *path, struct stat64 *buf)
{
    int r = REAL(__lxstat64)(ver, path, buf);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, AT_FDCWD, path);
    return r;
}

int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags)
{
    int r = REAL(__fxstatat)(ver, dirfd, path, buf, flags);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, dirfd, path);
    return r;
}

int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags)
{
    int r = REAL(__fxstatat64)(ver, dirfd, path, buf, flags);
    SHIM_LOOKUP(r == 0, SHIM_STAT_OP, dirfd, path);
    return r;
}

/* ---------------------------------------------------------- access family */

int access(const char *path, int mode)
{
    int r = REAL(access)(path, mode);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

int faccessat(int dirfd, const char *path, int mode, int flags)
{
    int r = REAL(faccessat)(dirfd, path, mode, flags);
    SHIM_LOOKUP(r == 0, 'S', dirfd, path);
    return r;
}

int euidaccess(const char *path, int mode)
{
    int r = REAL(euidaccess)(path, mode);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

int eaccess(const char *path, int mode)
{
    int r = REAL(eaccess)(path, mode);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

/* ------------------------------------------------------ readlink, realpath */

/* EINVAL from readlink: the path exists but is not a symbolic link. */
ssize_t readlink(const char *path, char *buf, size_t len)
{
    ssize_t r = REAL(readlink)(path, buf, len);
    SHIM_LOOKUP(r >= 0 || errno == EINVAL, 'S', AT_FDCWD, path);
    return r;
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t len)
{
    ssize_t r = REAL(readlinkat)(dirfd, path, buf, len);
    SHIM_LOOKUP(r >= 0 || errno == EINVAL, 'S', dirfd, path);
    return r;
}

ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen)
{
    ssize_t r = REAL(__readlink_chk)(path, buf, len, buflen);
    SHIM_LOOKUP(r >= 0 || errno == EINVAL, 'S', AT_FDCWD, path);
    return r;
}

ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen)
{
    ssize_t r = REAL(__readlinkat_chk)(dirfd, path, buf, len, buflen);
    SHIM_LOOKUP(r >= 0 || errno == EINVAL, 'S', dirfd, path);
    return r;
}

/* `S` of the path asked for and of the resolved result. */
static void realpath_post(const char *path, const char *res)
{
    int e = errno;
    char abs[SHIM_PATHBUF];
    if (path == NULL || path[0] == '\0')
        return;
    if (res == NULL) {
        shim_rec_res(0, e, 0, AT_FDCWD, path);
    } else if (shim_abspath(AT_FDCWD, path, abs) == 0) {
        shim_emit_path('S', abs);
        if (strcmp(abs, res) != 0)
            shim_rec('S', AT_FDCWD, res);
    }
    errno = e;
}

char *realpath(const char *path, char *resolved)
{
    SHIM_LAUNDER(path);
    char *r = REAL(realpath)(path, resolved);
    if (shim_on())
        realpath_post(path, r);
    return r;
}

char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen)
{
    SHIM_LAUNDER(path);
    char *r = REAL(__realpath_chk)(path, resolved, resolvedlen);
    if (shim_on())
        realpath_post(path, r);
    return r;
}

char *canonicalize_file_name(const char *path)
{
    SHIM_LAUNDER(path);
    char *r = REAL(canonicalize_file_name)(path);
    if (shim_on())
        realpath_post(path, r);
    return r;
}

/* ------------------------------------------------------------ directories */

DIR *opendir(const char *path)
{
    DIR *d = REAL(opendir)(path);
    SHIM_LOOKUP(d != NULL, 'L', AT_FDCWD, path);
    return d;
}

DIR *fdopendir(int fd)
{
    DIR *d = REAL(fdopendir)(fd);
    FD_POST(d != NULL, 'L', fd);
    return d;
}

int scandir(const char *dir, struct dirent ***namelist,
            int (*filter)(const struct dirent *),
            int (*compar)(const struct dirent **, const struct dirent **))
{
    int r = REAL(scandir)(dir, namelist, filter, compar);
    SHIM_LOOKUP(r >= 0, 'L', AT_FDCWD, dir);
    return r;
}

int scandir64(const char *dir, struct dirent64 ***namelist,
              int (*filter)(const struct dirent64 *),
              int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
    int r = REAL(scandir64)(dir, namelist, filter, compar);
    SHIM_LOOKUP(r >= 0, 'L', AT_FDCWD, dir);
    return r;
}

int scandirat(int dirfd, const char *dir, struct dirent ***namelist,
              int (*filter)(const struct dirent *),
              int (*compar)(const struct dirent **, const struct dirent **))
{
    int r = REAL(scandirat)(dirfd, dir, namelist, filter, compar);
    SHIM_LOOKUP(r >= 0, 'L', dirfd, dir);
    return r;
}

int scandirat64(int dirfd, const char *dir, struct dirent64 ***namelist,
                int (*filter)(const struct dirent64 *),
                int (*compar)(const struct dirent64 **, const struct dirent64 **))
{
    int r = REAL(scandirat64)(dirfd, dir, namelist, filter, compar);
    SHIM_LOOKUP(r >= 0, 'L', dirfd, dir);
    return r;
}

ssize_t getdents64(int fd, void *buf, size_t len)
{
    ssize_t r = REAL(getdents64)(fd, buf, len);
    FD_POST(r >= 0, 'L', fd);
    return r;
}

/* -------------------------------------------------- rename, unlink, mkdir */

/* 1 if a lookup of (dirfd, path) fails with ENOENT or ENOTDIR right now
 * (`at_flags`: 0 to follow a last symbolic link, or AT_SYMLINK_NOFOLLOW);
 * errno preserved. */
static int lookup_misses(int dirfd, const char *path, int at_flags)
{
    struct stat st;
    int saved = errno, absent;
    long r;
    r = shim_raw_fstatat(dirfd, path, &st, at_flags);
    absent = r != 0 && (errno == ENOENT || errno == ENOTDIR);
    errno = saved;
    return absent;
}

/* What was at a rename's destination just before the call (shim_entry_mode):
 * RENAME_NOREPLACE succeeds only by making it, RENAME_EXCHANGE never makes it,
 * otherwise it was made if it was absent just before. */
static int rename_pre(int newdirfd, const char *newpath, unsigned flags)
{
    if ((flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)) || !shim_on())
        return SHIM_ENTRY_UNKNOWN;
    return shim_entry_mode(newdirfd, newpath);
}

/* What a plain rename's success saw at its destination (`pre`: what was there just
 * before): a non-directory moves onto a missing path or any non-directory, which it
 * replaces without following (`J`: absent or not a directory); a directory onto a
 * missing path or an empty directory (held as absent: `M`). A directory there before
 * (an empty one, replaced by a directory) is left as it was. */
static void rename_saw(int newdirfd, const char *newpath, int pre)
{
    if (pre == SHIM_ENTRY_ABSENT) {
        int now = shim_entry_mode(newdirfd, newpath); /* what was moved there */
        if (now >= 0)
            shim_rec(now == S_IFDIR ? 'M' : 'J', newdirfd, newpath);
    } else if (pre >= 0 && pre != S_IFDIR) {
        shim_rec('J', newdirfd, newpath);
    }
}

/* A call that fails with ENOTEMPTY or EEXIST only where a folder holds entries (rmdir,
 * a rename onto a folder) saw whether it is empty: written as a listing (`L`) of the
 * folder, after the lookup (`S`) it is too. Nothing for a path that is no folder now. */
static void rec_not_empty(int err, int dirfd, const char *path)
{
    int e = errno;
    if ((err == ENOTEMPTY || err == EEXIST) && shim_entry_mode(dirfd, path) == S_IFDIR)
        shim_rec('L', dirfd, path);
    errno = e;
}

static void rename_post(int r, int olddirfd, const char *oldpath, int newdirfd,
                        const char *newpath, unsigned flags, int pre)
{
    int e = errno;
    if (r == 0) {
        /* RENAME_EXCHANGE swaps two files that both stay. */
        int made = !(flags & RENAME_EXCHANGE) &&
                   ((flags & RENAME_NOREPLACE) || pre == SHIM_ENTRY_ABSENT);
        /* RENAME_EXCHANGE: each name now holds what the other held before the run,
         * which a later read sees (`U`, not a replacement). */
        int x = (flags & RENAME_EXCHANGE) != 0;
        if (!(flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)))
            rename_saw(newdirfd, newpath, pre);
        shim_rec(x ? 'U' : 'D', olddirfd, oldpath);
        if (flags & RENAME_NOREPLACE) /* succeeds only where it was absent: a lock */
            shim_rec('M', newdirfd, newpath);
        shim_rec(made ? 'N' : x ? 'U' : 'W', newdirfd, newpath);
    } else if (e == EEXIST || e == ENOTEMPTY) {
        shim_rec('S', olddirfd, oldpath);
        shim_rec('S', newdirfd, newpath);
        if (!(flags & RENAME_NOREPLACE)) /* NOREPLACE: EEXIST on anything there */
            rec_not_empty(e, newdirfd, newpath);
    } else if ((e == ENOENT || e == ENOTDIR) &&
               !lookup_misses(olddirfd, oldpath, AT_SYMLINK_NOFOLLOW)) {
        /* the source is there: the destination had no folder to go in */
        shim_rec_no_folder(newdirfd, newpath);
    } else {
        shim_rec_res(0, e, 0, olddirfd, oldpath);
    }
    errno = e;
}

int rename(const char *oldpath, const char *newpath)
{
    int pre = rename_pre(AT_FDCWD, newpath, 0);
    int r = REAL(rename)(oldpath, newpath);
    if (shim_on())
        rename_post(r, AT_FDCWD, oldpath, AT_FDCWD, newpath, 0, pre);
    return r;
}

int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    int pre = rename_pre(newdirfd, newpath, 0);
    int r = REAL(renameat)(olddirfd, oldpath, newdirfd, newpath);
    if (shim_on())
        rename_post(r, olddirfd, oldpath, newdirfd, newpath, 0, pre);
    return r;
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
              unsigned int flags)
{
    int pre = rename_pre(newdirfd, newpath, flags);
    int r = REAL(renameat2)(olddirfd, oldpath, newdirfd, newpath, flags);
    if (shim_on())
        rename_post(r, olddirfd, oldpath, newdirfd, newpath, flags, pre);
    return r;
}

/* An unlink inside a removal whose caller drops ENOENT (shim_gone): it ends the same
 * where nothing was and where a non-directory was (EISDIR on a directory, ENOTDIR where
 * no folder is: those stay what they were), written `J` before a success's `D`. */
static void file_removal_post(int r, int dirfd, const char *path)
{
    int e = errno;
    if (shim_gone > 0 && (r == 0 || e == ENOENT)) {
        shim_rec('J', dirfd, path);
        if (r == 0)
            shim_rec('D', dirfd, path);
    } else {
        shim_rec_res(r == 0, e, 'D', dirfd, path);
    }
    errno = e;
}

int unlink(const char *path)
{
    int r = REAL(unlink)(path);
    if (shim_on())
        file_removal_post(r, AT_FDCWD, path);
    return r;
}

int unlinkat(int dirfd, const char *path, int flags)
{
    int r = REAL(unlinkat)(dirfd, path, flags);
    if (shim_on()) {
        if (flags & AT_REMOVEDIR) { /* rmdir: not a file's removal */
            int e = errno;
            shim_rec_res(r == 0, e, 'D', dirfd, path);
            if (r != 0)
                rec_not_empty(e, dirfd, path);
            errno = e;
        } else {
            file_removal_post(r, dirfd, path);
        }
    }
    return r;
}

int remove(const char *path)
{
    int r = REAL(remove)(path);
    SHIM_LOOKUP(r == 0, 'D', AT_FDCWD, path);
    if (r != 0 && shim_on())
        rec_not_empty(errno, AT_FDCWD, path);
    return r;
}

int rmdir(const char *path)
{
    int r = REAL(rmdir)(path);
    SHIM_LOOKUP(r == 0, 'D', AT_FDCWD, path);
    if (r != 0 && shim_on())
        rec_not_empty(errno, AT_FDCWD, path);
    return r;
}

/* This process's umask, from /proc/self/status (umask(2) reads it only by changing it,
 * for every thread); -1 where it cannot be read. */
static int own_umask(void)
{
    char buf[4096], *at;
    long n, got = 0;
    int mask, fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/status", O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    while (got < (long)sizeof buf - 1 &&
           (n = syscall(SYS_read, fd, buf + got, sizeof buf - 1 - (size_t)got)) > 0)
        got += n;
    syscall(SYS_close, fd);
    buf[got > 0 ? got : 0] = '\0';
    at = strstr(buf, "\nUmask:");
    if (at == NULL)
        return -1;
    for (at += 7; *at == '\t' || *at == ' '; at++)
        ;
    if (*at < '0' || *at > '7')
        return -1;
    for (mask = 0; *at >= '0' && *at <= '7'; at++)
        mask = mask * 8 + (*at - '0');
    return mask & 0777;
}

/* The permission bits a mkdir(mode) of `abs` would give the folder it made: mode less
 * the umask (the sticky bit kept), and the set-group-ID bit of a parent that has it;
 * -1 where the umask or the parent cannot be read, the parent has a default ACL, or
 * `found` is not owned as such a folder would be (by this process's effective user,
 * and group, or the parent's group where it has the set-group-ID bit). errno may change. */
static int made_dir_bits(const char *abs, mode_t mode, const struct stat *found)
{
    char parent[SHIM_PATHBUF];
    struct stat st;
    const char *slash = strrchr(abs, '/');
    int mask = own_umask(), bits;
    size_t len;
    if (mask < 0 || slash == NULL)
        return -1;
    len = slash == abs ? 1 : (size_t)(slash - abs);
    memcpy(parent, abs, len);
    parent[len] = '\0';
    if (shim_raw_stat(parent, &st) != 0)
        return -1;
    /* a parent's default ACL, not the umask, masks what is made in it */
    if (syscall(SYS_getxattr, parent, "system.posix_acl_default", NULL, 0) >= 0 ||
        (errno != ENODATA && errno != EOPNOTSUPP))
        return -1;
    if (found->st_uid != (uid_t)syscall(SYS_geteuid) ||
        found->st_gid != ((st.st_mode & S_ISGID) ? st.st_gid : (gid_t)syscall(SYS_getegid)))
        return -1;
    bits = (int)(mode & ~(mode_t)mask & 01777);
    if (st.st_mode & S_ISGID)
        bits |= S_ISGID;
    return bits;
}

/* 1 if the folder at `abs` holds no entry but `.` and `..`, 0 if it holds one, -1 where
 * it cannot be read (raw calls: a descriptor the program never sees as its own). */
static int dir_is_empty(const char *abs)
{
    struct dirent64_raw {
        uint64_t d_ino;
        int64_t d_off;
        unsigned short d_reclen;
        unsigned char d_type;
        char d_name[1];
    };
    char buf[1024];
    long n, at;
    int empty = 1;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, abs,
                          O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    while (empty == 1 && (n = syscall(SYS_getdents64, fd, buf, sizeof buf)) != 0) {
        if (n < 0) {
            empty = -1;
            break;
        }
        for (at = 0; at < n;) {
            const struct dirent64_raw *d = (const struct dirent64_raw *)(buf + at);
            const char *name = buf + at + offsetof(struct dirent64_raw, d_name);
            if (!(name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))))
                empty = 0;
            at += d->d_reclen;
        }
    }
    syscall(SYS_close, fd);
    return empty;
}

/* A mkdir that answered EEXIST: where a directory is at the path (not followed) with
 * the permission bits and owner a folder this call made would have had, `Z` (path,
 * those bits in octal, `empty` or `entries`): inside an exist_ok creation (shim_or_dir)
 * the caller ends the same as where nothing was, and finds the same folder after it
 * (the same stat where it is empty); outside one, a fourth field `lock` (the caller may
 * tell: the reader holds it as found, but for `mkdir -p`).
 * Anything else there (a file, a symbolic link, another folder): `S`, a lookup that
 * found it. */
static void mkdir_found(int dirfd, const char *path, mode_t mode)
{
    char abs[SHIM_PATHBUF], bits[16];
    const char *f[4];
    struct stat st;
    int e = errno, want;
    long r;
    r = shim_raw_fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW);
    if (r != 0 || !S_ISDIR(st.st_mode) || shim_abspath(dirfd, path, abs) != 0 ||
        strncmp(abs, "/proc/", 6) == 0 || strncmp(abs, "/dev/", 5) == 0) {
        shim_rec('S', dirfd, path);
        errno = e;
        return;
    }
    /* once per process, path and scope (the umask read and the parent's lookups are
     * not free, and a program may mkdir an existing folder at every file it writes) */
    if (shim_seen(shim_or_dir > 0 ? 'Z' : 'z', abs)) {
        errno = e;
        return;
    }
    want = made_dir_bits(abs, mode, &st);
    if (want < 0 || (int)(st.st_mode & 07777) != want) {
        shim_emit_path('S', abs);
        errno = e;
        return;
    }
    r = 0;
    do
        bits[r++] = (char)('0' + (want & 7));
    while ((want >>= 3) != 0);
    bits[r] = '\0';
    for (want = 0; want < r / 2; want++) { /* the digits, most significant first */
        char c = bits[want];
        bits[want] = bits[r - 1 - want];
        bits[r - 1 - want] = c;
    }
    f[0] = abs;
    f[1] = bits;
    /* an empty folder's stat (its size, link count) is a made one's too */
    f[2] = dir_is_empty(abs) == 1 ? "empty" : "entries";
    f[3] = "lock"; /* outside the scope: the caller may tell EEXIST from a success */
    shim_emit('Z', 0, shim_or_dir > 0 ? 3 : 4, f);
    errno = e;
}

#define MKDIR_POST(r, dirfd, path, mode)                                       \
    do {                                                                       \
        if ((r) != 0 && errno == EEXIST && shim_on())                          \
            mkdir_found((dirfd), (path), (mode));                              \
        else                                                                   \
            SHIM_MADE((r) == 0, (dirfd), (path));                              \
    } while (0)

int mkdir(const char *path, mode_t mode)
{
    int r = REAL(mkdir)(path, mode);
    MKDIR_POST(r, AT_FDCWD, path, mode);
    return r;
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
    int r = REAL(mkdirat)(dirfd, path, mode);
    MKDIR_POST(r, dirfd, path, mode);
    return r;
}

/* ----------------------------------------------------------- link, symlink */

static void link_post(int r, int olddirfd, const char *oldpath, int newdirfd,
                      const char *newpath, int flags)
{
    int e = errno;
    if (r == 0) {
        /* The new name has the old file's content: that content is read. */
        if ((flags & AT_EMPTY_PATH) && oldpath && oldpath[0] == '\0')
            shim_rec_fd('R', olddirfd);
        else
            shim_rec('R', olddirfd, oldpath);
        shim_rec('M', newdirfd, newpath); /* link(2) never replaces an entry: a lock */
        shim_rec('N', newdirfd, newpath);
    } else if (e == EEXIST) {
        shim_rec('S', newdirfd, newpath);
    } else if ((e == ENOENT || e == ENOTDIR) &&
               ((oldpath != NULL && oldpath[0] == '\0') ||
                !lookup_misses(olddirfd, oldpath,
                               (flags & AT_SYMLINK_FOLLOW) ? 0 : AT_SYMLINK_NOFOLLOW))) {
        /* the source is there (or a descriptor): the new name had no folder */
        shim_rec_no_folder(newdirfd, newpath);
    } else {
        shim_rec_res(0, e, 0, olddirfd, oldpath);
    }
    errno = e;
}

int link(const char *oldpath, const char *newpath)
{
    SHIM_LAUNDER(oldpath);
    int r = REAL(link)(oldpath, newpath);
    if (shim_on())
        link_post(r, AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
    return r;
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
    SHIM_LAUNDER(oldpath);
    int r = REAL(linkat)(olddirfd, oldpath, newdirfd, newpath, flags);
    if (shim_on())
        link_post(r, olddirfd, oldpath, newdirfd, newpath, flags);
    return r;
}

/* The target of a symbolic link is only a string: nothing is looked up. */
int symlink(const char *target, const char *linkpath)
{
    int r = REAL(symlink)(target, linkpath);
    SHIM_MADE(r == 0, AT_FDCWD, linkpath);
    return r;
}

int symlinkat(const char *target, int newdirfd, const char *linkpath)
{
    int r = REAL(symlinkat)(target, newdirfd, linkpath);
    SHIM_MADE(r == 0, newdirfd, linkpath);
    return r;
}

/* -------------------------------------------------------- truncate, temps */

int truncate(const char *path, off_t length)
{
    int r = REAL(truncate)(path, length);
    SHIM_LOOKUP(r == 0, length == 0 ? 'W' : 'U', AT_FDCWD, path);
    return r;
}

int truncate64(const char *path, off64_t length)
{
    int r = REAL(truncate64)(path, length);
    SHIM_LOOKUP(r == 0, length == 0 ? 'W' : 'U', AT_FDCWD, path);
    return r;
}

/* Success: `N` of the file made from the template. A missing directory:
 * `M` of that directory. */
static void tmpl_post(int ok, const char *tmpl)
{
    int e = errno;
    char abs[SHIM_PATHBUF], *slash;
    if (tmpl == NULL || tmpl[0] == '\0')
        return;
    if (ok) {
        shim_rec('N', AT_FDCWD, tmpl);
    } else if ((e == ENOENT || e == ENOTDIR) && shim_abspath(AT_FDCWD, tmpl, abs) == 0) {
        slash = strrchr(abs, '/');
        if (slash == abs)
            slash[1] = '\0';
        else
            *slash = '\0';
        shim_emit_path('M', abs);
    }
    errno = e;
}

#define TMPL_WRAP(name, call, ...)                                             \
    int name(__VA_ARGS__)                                                      \
    {                                                                          \
        SHIM_LAUNDER(tmpl);                                                    \
        int fd = call;                                                         \
        if (shim_on())                                                         \
            tmpl_post(fd >= 0, tmpl);                                          \
        return fd;                                                             \
    }

TMPL_WRAP(mkstemp, REAL(mkstemp)(tmpl), char *tmpl)
TMPL_WRAP(mkstemp64, REAL(mkstemp64)(tmpl), char *tmpl)
TMPL_WRAP(mkostemp, REAL(mkostemp)(tmpl, flags), char *tmpl, int flags)
TMPL_WRAP(mkostemp64, REAL(mkostemp64)(tmpl, flags), char *tmpl, int flags)
TMPL_WRAP(mkstemps, REAL(mkstemps)(tmpl, suffixlen), char *tmpl, int suffixlen)
TMPL_WRAP(mkstemps64, REAL(mkstemps64)(tmpl, suffixlen), char *tmpl, int suffixlen)
TMPL_WRAP(mkostemps, REAL(mkostemps)(tmpl, suffixlen, flags), char *tmpl, int suffixlen,
          int flags)
TMPL_WRAP(mkostemps64, REAL(mkostemps64)(tmpl, suffixlen, flags), char *tmpl,
          int suffixlen, int flags)

char *mkdtemp(char *tmpl)
{
    SHIM_LAUNDER(tmpl);
    char *r = REAL(mkdtemp)(tmpl);
    if (shim_on())
        tmpl_post(r != NULL, tmpl);
    return r;
}

/* -------------------------------------------------------- metadata writes */

int chmod(const char *path, mode_t mode)
{
    int r = REAL(chmod)(path, mode);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int lchmod(const char *path, mode_t mode)
{
    int r = REAL(lchmod)(path, mode);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
    int r = REAL(fchmodat)(dirfd, path, mode, flags);
    SHIM_LOOKUP(r == 0, 'U', dirfd, path);
    return r;
}

int chown(const char *path, uid_t owner, gid_t group)
{
    int r = REAL(chown)(path, owner, group);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int lchown(const char *path, uid_t owner, gid_t group)
{
    int r = REAL(lchown)(path, owner, group);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int fchownat(int dirfd, const char *path, uid_t owner, gid_t group, int flags)
{
    SHIM_LAUNDER(path);
    int r = REAL(fchownat)(dirfd, path, owner, group, flags);
    if (path != NULL && path[0] == '\0' && (flags & AT_EMPTY_PATH))
        FD_POST(r == 0, 'U', dirfd);
    else
        SHIM_LOOKUP(r == 0, 'U', dirfd, path);
    return r;
}

/* A NULL path would name the file open on dirfd (the syscall allows it;
 * glibc 2.36 answers EINVAL, other versions may not). */
int utimensat(int dirfd, const char *path, const struct timespec times[2], int flags)
{
    SHIM_LAUNDER(path);
    int r = REAL(utimensat)(dirfd, path, times, flags);
    if (path == NULL)
        FD_POST(r == 0, 'U', dirfd);
    else
        SHIM_LOOKUP(r == 0, 'U', dirfd, path);
    return r;
}

int futimesat(int dirfd, const char *path, const struct timeval times[2])
{
    SHIM_LAUNDER(path);
    int r = REAL(futimesat)(dirfd, path, times);
    if (path == NULL)
        FD_POST(r == 0, 'U', dirfd);
    else
        SHIM_LOOKUP(r == 0, 'U', dirfd, path);
    return r;
}

int utimes(const char *path, const struct timeval times[2])
{
    int r = REAL(utimes)(path, times);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int lutimes(const char *path, const struct timeval times[2])
{
    int r = REAL(lutimes)(path, times);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int utime(const char *path, const struct utimbuf *times)
{
    int r = REAL(utime)(path, times);
    SHIM_LOOKUP(r == 0, 'U', AT_FDCWD, path);
    return r;
}

int mkfifo(const char *path, mode_t mode)
{
    int r = REAL(mkfifo)(path, mode);
    SHIM_MADE(r == 0, AT_FDCWD, path);
    return r;
}

int mkfifoat(int dirfd, const char *path, mode_t mode)
{
    int r = REAL(mkfifoat)(dirfd, path, mode);
    SHIM_MADE(r == 0, dirfd, path);
    return r;
}

int mknod(const char *path, mode_t mode, dev_t dev)
{
    int r = REAL(mknod)(path, mode, dev);
    SHIM_MADE(r == 0, AT_FDCWD, path);
    return r;
}

int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
    int r = REAL(mknodat)(dirfd, path, mode, dev);
    SHIM_MADE(r == 0, dirfd, path);
    return r;
}

/* ------------------------------------------------------------------ chdir */

/* A relative path is resolved before the call: afterwards the cwd moved. */
int chdir(const char *path)
{
    SHIM_LAUNDER(path);
    char abs[SHIM_PATHBUF];
    int r, e, have = 0;
    if (path != NULL && path[0] != '\0' && shim_on()) {
        e = errno;
        have = shim_abspath(AT_FDCWD, path, abs) == 0;
        errno = e;
    }
    r = REAL(chdir)(path);
    if (have && shim_on()) {
        e = errno;
        shim_rec_res(r == 0, e, 'S', AT_FDCWD, abs);
        errno = e;
    }
    return r;
}

int fchdir(int fd)
{
    int r = REAL(fchdir)(fd);
    FD_POST(r == 0, 'S', fd);
    return r;
}
