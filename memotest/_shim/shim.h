/* memotest tracing shim: shared declarations.
 *
 * The shim is an LD_PRELOAD library that interposes the glibc entry points
 * touching paths and appends records to $MEMOTEST_TRACE_DIR/log following
 * PROTOCOL.md (same folder).  All .c files of this folder are compiled into a
 * single shared object.
 *
 * Rules every file follows:
 *   - A wrapper calls the real function first, then records from its result
 *     and errno, and restores errno before returning. The one thing looked at
 *     before the call: what is at a path a call may create (shim_entry_mode,
 *     a raw fstatat, only for O_CREAT opens without O_EXCL and rename*).
 *   - The shim's own I/O (log, status, /proc readlinks, cwd) uses raw
 *     syscall()s, never interposed symbols.
 *   - No malloc, no locks on the record path: everything is on the stack,
 *     lock-free (dedup table) or a raw syscall, so it is safe in vfork
 *     children, fork children, signal handlers and concurrent threads.
 *     The exceptions run only where that is safe: dlsym at initialization,
 *     dl_iterate_phdr for `O` records (never in a vfork child, see core.c),
 *     setenv in system()/popen().
 *   - A thread-local guard (shim_guard) is raised around those foreign
 *     calls, so that nothing they reach is recorded.
 */
#ifndef MEMOTEST_SHIM_H
#define MEMOTEST_SHIM_H

/* We define open, stat, ... ourselves: the fortify inlines and the
 * 64-bit-offset redirections of the headers must be off. */
#undef _FORTIFY_SOURCE
#undef _FILE_OFFSET_BITS
#undef _TIME_BITS
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#define SHIM_HIDDEN __attribute__((visibility("hidden")))
#define SHIM_TLS __attribute__((tls_model("initial-exec")))
#define SHIM_LIKELY(x) __builtin_expect(!!(x), 1)
#define SHIM_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* glibc declares most path parameters nonnull, so GCC would fold away our
 * NULL checks; programs still pass NULL (the kernel answers EFAULT). Hiding
 * the value behind an empty asm keeps the checks. */
#define SHIM_LAUNDER(p) __asm__("" : "+r"(p))

/* One record is written with one write(2) of at most PIPE_BUF bytes. */
#define SHIM_REC_MAX 4096
/* Scratch buffer for resolving a path (cwd or dirfd + relative path). */
#define SHIM_PATHBUF (PATH_MAX * 2)

/* ---- entry points glibc no longer declares, or declares only when fortifying */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
int __xstat(int ver, const char *path, struct stat *buf);
int __xstat64(int ver, const char *path, struct stat64 *buf);
int __lxstat(int ver, const char *path, struct stat *buf);
int __lxstat64(int ver, const char *path, struct stat64 *buf);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *buf, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *buf, int flags);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
ssize_t __readlink_chk(const char *path, char *buf, size_t len, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t len, size_t buflen);
int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags);

/* ---- the real functions, resolved with dlsym(RTLD_NEXT) in the constructor */
#define SHIM_FUNCS(X)                                                          \
    X(open) X(open64) X(openat) X(openat64) X(__open_2) X(__open64_2)          \
    X(__openat_2) X(__openat64_2) X(creat) X(creat64) X(fopen) X(fopen64)      \
    X(freopen) X(freopen64)                                                    \
    X(stat) X(stat64) X(lstat) X(lstat64) X(fstatat) X(fstatat64) X(statx)     \
    X(access) X(faccessat) X(euidaccess) X(eaccess)                            \
    X(__xstat) X(__xstat64) X(__lxstat) X(__lxstat64) X(__fxstatat)            \
    X(__fxstatat64)                                                            \
    X(readlink) X(readlinkat) X(realpath) X(canonicalize_file_name)            \
    X(__realpath_chk) X(__readlink_chk) X(__readlinkat_chk)                    \
    X(opendir) X(fdopendir) X(scandir) X(scandir64) X(scandirat)               \
    X(scandirat64) X(getdents64) X(readdir) X(readdir64) X(closedir)           \
    X(rename) X(renameat) X(renameat2) X(unlink) X(unlinkat) X(remove)         \
    X(mkdir) X(mkdirat) X(rmdir) X(link) X(linkat) X(symlink) X(symlinkat)     \
    X(truncate) X(truncate64) X(mkstemp) X(mkstemp64) X(mkostemp)              \
    X(mkostemp64) X(mkstemps) X(mkstemps64) X(mkostemps) X(mkostemps64)        \
    X(mkdtemp) X(chmod) X(fchmodat) X(lchmod) X(chown) X(lchown) X(fchownat)   \
    X(utimensat) X(utimes) X(utime) X(lutimes) X(futimesat) X(mkfifo)          \
    X(mkfifoat) X(mknod) X(mknodat)                                            \
    X(execve) X(execvpe) X(fexecve) X(execveat) X(posix_spawn) X(posix_spawnp) \
    X(wait) X(waitpid) X(wait3) X(wait4) X(waitid)                            \
    X(system) X(popen) X(chdir) X(fchdir) X(dlopen) X(dlclose) X(connect)      \
    X(glob) X(glob64) X(ftw) X(ftw64) X(nftw) X(nftw64) X(fts_read)            \
    X(fts64_read)                                                              \
    X(sendto) X(sendmsg) X(sendmmsg) X(bind) X(listen) X(accept) X(accept4)    \
    X(recvfrom) X(recvmsg) X(recvmmsg) X(socket) X(syscall) X(getaddrinfo)     \
    X(setsockopt)                                                              \
    X(shm_open) X(shm_unlink) X(sem_open) X(sem_unlink)                        \
    X(getpwnam) X(getpwuid) X(getpwnam_r) X(getpwuid_r) X(getpwent)            \
    X(getpwent_r) X(getgrnam) X(getgrgid) X(getgrnam_r) X(getgrgid_r)          \
    X(getgrent) X(getgrent_r) X(getgrouplist) X(initgroups) X(getspnam)        \
    X(getspnam_r) X(gethostbyname) X(gethostbyname2) X(gethostbyname_r)        \
    X(gethostbyname2_r) X(gethostbyaddr) X(gethostbyaddr_r) X(gethostent)      \
    X(getnameinfo) X(getservbyname) X(getservbyport)                           \
    X(getservbyname_r) X(getservbyport_r) X(getservent) X(getprotobyname)      \
    X(getprotobynumber) X(getprotoent) X(getnetbyname) X(getnetbyaddr)         \
    X(tzset) X(localtime) X(localtime_r) X(gmtime) X(gmtime_r) X(mktime)       \
    X(timelocal) X(timegm) X(ctime) X(ctime_r) X(strftime) X(strftime_l)       \
    X(wcsftime) X(setlocale) X(newlocale) X(iconv_open)

enum {
#define SHIM_ENUM(f) SHIM_F_##f,
    SHIM_FUNCS(SHIM_ENUM)
#undef SHIM_ENUM
    SHIM_F_COUNT
};

extern void *shim_real_tab[SHIM_F_COUNT] SHIM_HIDDEN;
void *shim_real_slow(int idx) SHIM_HIDDEN;

static inline void *shim_real(int idx)
{
    void *p = __atomic_load_n(&shim_real_tab[idx], __ATOMIC_RELAXED);
    if (SHIM_LIKELY(p != NULL))
        return p;
    return shim_real_slow(idx);
}
/* REAL(open)(path, flags, mode): the next definition of `open` (glibc's). */
#define REAL(f) ((__typeof__(&f))shim_real(SHIM_F_##f))

/* ---- state (core.c) */
extern volatile int shim_state SHIM_HIDDEN;  /* 0 none, 1 initializing, 2 ready */
extern int shim_active SHIM_HIDDEN;          /* tracing (dir set, log opened) */
extern __thread int shim_guard SHIM_TLS SHIM_HIDDEN;
extern pid_t shim_pid SHIM_HIDDEN;           /* pid the constructor/atfork saw */
extern char shim_trace_dir[PATH_MAX] SHIM_HIDDEN;
extern char shim_self_path[PATH_MAX] SHIM_HIDDEN;       /* value for MEMOTEST_SHIM */
int shim_reachable(void) SHIM_HIDDEN; /* this shim is at MEMOTEST_SHIM in this view */
extern char shim_env_dir[PATH_MAX + 32] SHIM_HIDDEN;    /* "MEMOTEST_TRACE_DIR=..." */
extern char shim_env_shim[PATH_MAX + 32] SHIM_HIDDEN;   /* "MEMOTEST_SHIM=..." */
extern volatile int shim_dl_pending SHIM_HIDDEN;        /* a dlopen may have added objects */
extern __thread int shim_dl_mine SHIM_TLS SHIM_HIDDEN;  /* ... this thread's dlopen */
extern int shim_dl_ever SHIM_HIDDEN;                    /* some dlopen happened */
/* > 0 while this thread is inside an untimed probe (memotest_shim_untimed) */
extern __thread int shim_untimed SHIM_TLS SHIM_HIDDEN;
/* > 0 while this thread is inside a yes-or-no probe (memotest_shim_probe) */
extern __thread int shim_probe SHIM_TLS SHIM_HIDDEN;
/* The op of a stat-family lookup that found its path: `T` (it handed the caller the
 * times), `p` inside a yes-or-no probe, whose caller keeps only what the file is (a
 * file, a folder, a link...), or `S` inside another untimed call (no time kept). */
#define SHIM_STAT_OP (shim_probe > 0 ? 'p' : shim_untimed > 0 ? 'S' : 'T')
/* > 0 while this thread is inside an exist_ok creation (memotest_shim_or_dir): an `M` is
 * written `Y` (absent or a directory, the same to its caller) */
extern __thread int shim_or_dir SHIM_TLS SHIM_HIDDEN;
/* > 0 while this thread is inside a removal whose caller drops ENOENT
 * (memotest_shim_gone): an `unlink`'s success or ENOENT is written `J` */
extern __thread int shim_gone SHIM_TLS SHIM_HIDDEN;

int shim_lazy_init(void) SHIM_HIDDEN;

/* True when this call must be recorded: tracing and not inside the shim. */
static inline int shim_on(void)
{
    if (SHIM_UNLIKELY(shim_state != 2))
        return shim_lazy_init();
    return shim_active && !shim_guard;
}

/* ---- raw syscalls (never interposed, never recorded) */
static inline pid_t shim_getpid(void) { return (pid_t)syscall(SYS_getpid); }
static inline pid_t shim_getppid(void) { return (pid_t)syscall(SYS_getppid); }
/* fstatat(2) as a raw syscall, never through our wrappers: 0, or -1 and errno. */
static inline long shim_raw_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
#ifdef SYS_newfstatat
    return syscall(SYS_newfstatat, dirfd, path, st, flags);
#else
    return syscall(SYS_fstatat64, dirfd, path, st, flags);
#endif
}
int shim_raw_stat(const char *path, struct stat *st) SHIM_HIDDEN; /* 0 or errno */

/* ---- records (core.c) */
/* Write one record: OP PID ':' COUNT NUL FIELD{COUNT}. Dedups R W N S M L D O C.
 * pid 0 means this process (looked up only if the record is written). */
void shim_emit(char op, pid_t pid, int nfields, const char *const *fields) SHIM_HIDDEN;
/* 1 if (key, abs) was already seen by this process (or an ancestor before fork), as
 * the dedup of records; otherwise remembers it and returns 0. For records that are not
 * deduplicated by shim_emit (`key` need not be a record's op). */
int shim_seen(char key, const char *abs) SHIM_HIDDEN;
/* One-field record of an already absolute, normalized path, for this pid. */
void shim_emit_path(char op, const char *abs) SHIM_HIDDEN;
/* `I` record (never deduplicated) and the status byte. */
void shim_info(const char *reason) SHIM_HIDDEN;
void shim_status_fail(void) SHIM_HIDDEN;
void shim_dl_rescan(void) SHIM_HIDDEN;      /* `O` for every loaded object */
void shim_dl_rescan_if_pending(void) SHIM_HIDDEN; /* at a record, after a dlopen */
void shim_dl_rescan_final(void) SHIM_HIDDEN;      /* at dlclose, exec, spawn, exit */

/* ---- paths (paths.c) */
/* Resolve `path` relative to dirfd (AT_FDCWD: the cwd) into an absolute,
 * normalized path in out[SHIM_PATHBUF]. Returns 0, or -1 after writing an `I`
 * record (and the status byte) when it cannot. */
int shim_abspath(int dirfd, const char *path, char *out) SHIM_HIDDEN;
/* Same, relative to an absolute directory `base` instead of a dirfd. */
int shim_abspath_base(const char *base, const char *path, char *out) SHIM_HIDDEN;
/* Path of an open descriptor through /proc/thread-self/fd/N: 0, -1 when it
 * cannot be read, -2 when it names no path (pipe, socket, anon inode). */
int shim_fdpath(int fd, char *out) SHIM_HIDDEN;
int shim_getcwd(char *out, size_t size) SHIM_HIDDEN; /* 0 or -1 */
/* Collapse "//" and "." components, strip a trailing '/', keep ".."; in place. */
void shim_normalize(char *p) SHIM_HIDDEN;
/* libcfiles.c: records the files getaddrinfo consults (net.c wraps getaddrinfo). */
void shim_note_getaddrinfo(void) SHIM_HIDDEN;

/* Record `op` for (dirfd, path); nothing for a NULL or empty path. */
void shim_rec(char op, int dirfd, const char *path) SHIM_HIDDEN;
/* Record `op` for the file open on fd. */
void shim_rec_fd(char op, int fd) SHIM_HIDDEN;
/* Record a lookup's outcome: success -> okop (none if 0); ENOENT/ENOTDIR -> M;
 * errors that looked nothing up (EBADF, EFAULT, EINVAL, ...) -> nothing;
 * any other failure -> S (the path exists in some form). */
void shim_rec_res(int ok, int err, char okop, int dirfd, const char *path) SHIM_HIDDEN;
/* Record an open(2)-style call from its flags and outcome. `pre` is what
 * shim_entry_mode said just before the call (SHIM_ENTRY_UNKNOWN if it was not
 * asked): an O_CREAT open that succeeded writes `N` instead of `W` when it
 * made the entry, after `V`/`Q`, what its success saw there. */
void shim_rec_open(int ok, int err, int dirfd, const char *path, int flags,
                   int pre) SHIM_HIDDEN;
/* A call that would have created (dirfd, path) failed with ENOENT or ENOTDIR:
 * it found no folder to make it in, whatever was at the path itself. Records
 * what the parent is now: `M` if a lookup of it fails so, `S` if it is there
 * and no directory; nothing for a directory (a dangling symbolic link followed
 * at the last component, or a race). errno is preserved. */
void shim_rec_no_folder(int dirfd, const char *path) SHIM_HIDDEN;
/* What is at (dirfd, path) right now, by a raw fstatat with AT_SYMLINK_NOFOLLOW:
 * its type (st_mode & S_IFMT), SHIM_ENTRY_ABSENT where it answers ENOENT (no
 * directory entry), SHIM_ENTRY_UNKNOWN for any other failure and a NULL or
 * empty path. errno is preserved. Called before a call that may create the
 * entry (O_CREAT without O_EXCL, rename*). */
int shim_entry_mode(int dirfd, const char *path) SHIM_HIDDEN;
#define SHIM_ENTRY_ABSENT (-1)
#define SHIM_ENTRY_UNKNOWN (-2)
/* 1: a UDP socket got the datagram fd sent to sa; 0: none; -1: not known
 * (netstate.c) */
int shim_udp_bound(int fd, const struct sockaddr *sa, socklen_t len) SHIM_HIDDEN;
int shim_fopen_flags(const char *mode) SHIM_HIDDEN;

/* Records the common wrapper shape: real call done, `ok` computed. */
/* A creation that succeeds only where its path was absent (mkdir, mknod, mkfifo,
 * symlink, link's new name, RENAME_NOREPLACE, O_EXCL): its success is what it saw, the
 * path's absence (a lock), written as a lookup that missed (`M`) before the `N`. */
#define SHIM_MADE(ok, dirfd, path)                                             \
    do {                                                                       \
        if ((ok) && shim_on()) {                                               \
            int e_ = errno;                                                    \
            shim_rec('M', (dirfd), (path));                                    \
            errno = e_;                                                        \
        }                                                                      \
        SHIM_LOOKUP((ok), 'N', (dirfd), (path));                               \
        if (!(ok) && (errno == ENOENT || errno == ENOTDIR) && shim_on())       \
            shim_rec_no_folder((dirfd), (path));                               \
    } while (0)

#define SHIM_LOOKUP(ok, okop, dirfd, path)                                     \
    do {                                                                       \
        if (shim_on()) {                                                       \
            int e_ = errno;                                                    \
            shim_rec_res((ok), e_, (okop), (dirfd), (path));                   \
            errno = e_;                                                        \
        }                                                                      \
    } while (0)

/* ---- /proc and /dev (procfs.c) */
/* shim_emit_path of a path under /proc or /dev: the record names the file a
 * magic link in it names (/proc/self/cwd/x, /proc/PID/fd/N, /dev/fd/N,
 * /dev/stdin...), when there is one. Its own frame: stack only when taken. */
void shim_emit_magic(char op, const char *abs) SHIM_HIDDEN;

/* ---- exec (exec.c) */
int shim_environ_ensure(void) SHIM_HIDDEN; /* setenv our variables if missing */

#endif /* MEMOTEST_SHIM_H */
