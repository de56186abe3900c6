/* memotest shim: dlopen/dlclose, glob, ftw/nftw, fts_read (the network: net.c). */
#include "shim.h"

/* ---------------------------------------------------------- dlopen/dlclose
 *
 * glibc's dlopen looks at its return address to find the calling object:
 * its DT_RUNPATH/DT_RPATH drive the search of a bare name, $ORIGIN expands to
 * its directory, and the new object joins its namespace. A C wrapper that
 * calls the real dlopen would make the shim the caller and change which
 * library gets loaded. So dlopen is a stub that runs shim_dlopen_pre() and
 * then *jumps* to glibc's dlopen with the caller's return address intact.
 * The objects mapped are recorded as `O` later (core.c,
 * shim_dl_rescan_if_pending). */

SHIM_HIDDEN __attribute__((used)) void *shim_dlopen_pre(const char *file, int mode)
{
    void *real = shim_real(SHIM_F_dlopen);
    (void)mode;
    if (file != NULL && shim_on()) {
        int e = errno;
        /* A path (no search, no $ORIGIN): it is read, or it is missing. */
        if (strchr(file, '/') != NULL && strchr(file, '$') == NULL) {
            char abs[SHIM_PATHBUF];
            struct stat st;
            int pe;
            if (shim_abspath(AT_FDCWD, file, abs) == 0) {
                pe = shim_raw_stat(abs, &st);
                if (pe == ENOENT || pe == ENOTDIR)
                    shim_emit_path('M', abs);
                else if (pe == 0)
                    shim_emit_path('R', abs);
            }
        }
        shim_dl_mine = 1;
        __atomic_store_n(&shim_dl_ever, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&shim_dl_pending, 1, __ATOMIC_RELAXED);
        errno = e;
    }
    return real;
}

#if defined(__x86_64__)
__asm__(".pushsection .text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        ".p2align 4\n"
        "dlopen:\n"
        "  .cfi_startproc\n"
        "  endbr64\n"
        "  push %rdi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  push %rsi\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  sub $8, %rsp\n"
        "  .cfi_adjust_cfa_offset 8\n"
        "  call shim_dlopen_pre@PLT\n"
        "  add $8, %rsp\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  pop %rsi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  pop %rdi\n"
        "  .cfi_adjust_cfa_offset -8\n"
        "  jmp *%rax\n"
        "  .cfi_endproc\n"
        ".size dlopen, .-dlopen\n"
        ".popsection\n");
#else
/* Elsewhere rely on the sibling call GCC emits at -O2. */
void *dlopen(const char *file, int mode)
{
    void *(*real)(const char *, int) = (void *(*)(const char *, int))shim_dlopen_pre(file, mode);
    return real(file, mode);
}
#endif

int dlclose(void *handle)
{
    if (shim_on()) {
        int e = errno;
        shim_dl_rescan_final(); /* before the objects may go away */
        errno = e;
    }
    return REAL(dlclose)(handle);
}

/* ------------------------------------------------------------------- glob
 * The real glob runs with GLOB_ALTDIRFUNC and our directory functions, which
 * record `L` for each directory it lists and S/M for its stats. */

static void *glob_opendir(const char *name)
{
    DIR *d = REAL(opendir)(name);
    SHIM_LOOKUP(d != NULL, 'L', AT_FDCWD, name);
    return d;
}

static void glob_closedir(void *d)
{
    REAL(closedir)((DIR *)d);
}

static struct dirent *glob_readdir(void *d)
{
    return REAL(readdir)((DIR *)d);
}

static struct dirent64 *glob_readdir64(void *d)
{
    return REAL(readdir64)((DIR *)d);
}

static int glob_stat(const char *path, struct stat *st)
{
    int r = REAL(stat)(path, st);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

static int glob_lstat(const char *path, struct stat *st)
{
    int r = REAL(lstat)(path, st);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

static int glob_stat64(const char *path, struct stat64 *st)
{
    int r = REAL(stat64)(path, st);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

static int glob_lstat64(const char *path, struct stat64 *st)
{
    int r = REAL(lstat64)(path, st);
    SHIM_LOOKUP(r == 0, 'S', AT_FDCWD, path);
    return r;
}

#define GLOB_BODY(realf, gt, rd, st, lst)                                      \
    gt saved;                                                                  \
    int r, e;                                                                  \
    if (pglob == NULL || (flags & GLOB_ALTDIRFUNC) || !shim_on())              \
        return realf(pattern, flags, errfunc, pglob);                          \
    saved = *pglob;                                                            \
    pglob->gl_opendir = glob_opendir;                                          \
    pglob->gl_readdir = rd;                                                    \
    pglob->gl_closedir = glob_closedir;                                        \
    pglob->gl_stat = st;                                                       \
    pglob->gl_lstat = lst;                                                     \
    r = realf(pattern, flags | GLOB_ALTDIRFUNC, errfunc, pglob);               \
    e = errno;                                                                 \
    pglob->gl_opendir = saved.gl_opendir;                                      \
    pglob->gl_readdir = saved.gl_readdir;                                      \
    pglob->gl_closedir = saved.gl_closedir;                                    \
    pglob->gl_stat = saved.gl_stat;                                            \
    pglob->gl_lstat = saved.gl_lstat;                                          \
    pglob->gl_flags &= ~GLOB_ALTDIRFUNC;                                       \
    errno = e;                                                                 \
    return r

int glob(const char *pattern, int flags, int (*errfunc)(const char *, int), glob_t *pglob)
{
    SHIM_LAUNDER(pglob);
    GLOB_BODY(REAL(glob), glob_t, glob_readdir, glob_stat, glob_lstat);
}

int glob64(const char *pattern, int flags, int (*errfunc)(const char *, int),
           glob64_t *pglob)
{
    SHIM_LAUNDER(pglob);
    GLOB_BODY(REAL(glob64), glob64_t, glob_readdir64, glob_stat64, glob_lstat64);
}

/* -------------------------------------------------------------- ftw, nftw
 * The user's callback is wrapped: `L` for each directory, `S` for each other
 * entry. A thread-local stack of contexts holds the user's callback. */

struct walk_ctx {
    struct walk_ctx *prev;
    union {
        __ftw_func_t ftw;
        __ftw64_func_t ftw64;
        __nftw_func_t nftw;
        __nftw64_func_t nftw64;
    } fn;
    const char *base; /* cwd at the call, when FTW_CHDIR moves it */
    unsigned long calls;
};

static __thread struct walk_ctx *t_walk SHIM_TLS;

static void walk_rec(const char *fpath, int flag)
{
    char abs[SHIM_PATHBUF];
    int e;
    if (fpath == NULL || !shim_on())
        return;
    e = errno;
    if (shim_abspath_base(t_walk->base, fpath, abs) == 0)
        shim_emit_path((flag == FTW_D || flag == FTW_DP) ? 'L' : 'S', abs);
    errno = e;
}

static int ftw_cb(const char *fpath, const struct stat *sb, int flag)
{
    t_walk->calls++;
    walk_rec(fpath, flag);
    return t_walk->fn.ftw(fpath, sb, flag);
}

static int ftw64_cb(const char *fpath, const struct stat64 *sb, int flag)
{
    t_walk->calls++;
    walk_rec(fpath, flag);
    return t_walk->fn.ftw64(fpath, sb, flag);
}

static int nftw_cb(const char *fpath, const struct stat *sb, int flag, struct FTW *info)
{
    t_walk->calls++;
    walk_rec(fpath, flag);
    return t_walk->fn.nftw(fpath, sb, flag, info);
}

static int nftw64_cb(const char *fpath, const struct stat64 *sb, int flag, struct FTW *info)
{
    t_walk->calls++;
    walk_rec(fpath, flag);
    return t_walk->fn.nftw64(fpath, sb, flag, info);
}

/* Runs `call` with ctx pushed; records the root when it could not be read. */
#define WALK_BODY(member, fnarg, chdir_flag, call, passthrough)                \
    struct walk_ctx ctx;                                                       \
    char base[PATH_MAX];                                                       \
    int r, e;                                                                  \
    if (fnarg == NULL || dir == NULL || !shim_on())                            \
        return passthrough;                                                    \
    ctx.prev = t_walk;                                                         \
    ctx.fn.member = fnarg;                                                     \
    ctx.base = NULL;                                                           \
    ctx.calls = 0;                                                             \
    if (chdir_flag) {                                                          \
        e = errno;                                                             \
        if (shim_getcwd(base, sizeof base) == 0)                               \
            ctx.base = base;                                                   \
        errno = e;                                                             \
    }                                                                          \
    t_walk = &ctx;                                                             \
    r = call;                                                                  \
    e = errno;                                                                 \
    t_walk = ctx.prev;                                                         \
    if (r == -1 && ctx.calls == 0 && shim_on())                                \
        shim_rec_res(0, e, 0, AT_FDCWD, dir);                                  \
    errno = e;                                                                 \
    return r

int ftw(const char *dir, __ftw_func_t fn, int nopenfd)
{
    SHIM_LAUNDER(dir);
    SHIM_LAUNDER(fn);
    WALK_BODY(ftw, fn, 0, REAL(ftw)(dir, ftw_cb, nopenfd), REAL(ftw)(dir, fn, nopenfd));
}

int ftw64(const char *dir, __ftw64_func_t fn, int nopenfd)
{
    SHIM_LAUNDER(dir);
    SHIM_LAUNDER(fn);
    WALK_BODY(ftw64, fn, 0, REAL(ftw64)(dir, ftw64_cb, nopenfd),
              REAL(ftw64)(dir, fn, nopenfd));
}

int nftw(const char *dir, __nftw_func_t fn, int nopenfd, int flags)
{
    SHIM_LAUNDER(dir);
    SHIM_LAUNDER(fn);
    WALK_BODY(nftw, fn, (flags & FTW_CHDIR), REAL(nftw)(dir, nftw_cb, nopenfd, flags),
              REAL(nftw)(dir, fn, nopenfd, flags));
}

int nftw64(const char *dir, __nftw64_func_t fn, int nopenfd, int flags)
{
    SHIM_LAUNDER(dir);
    SHIM_LAUNDER(fn);
    WALK_BODY(nftw64, fn, (flags & FTW_CHDIR), REAL(nftw64)(dir, nftw64_cb, nopenfd, flags),
              REAL(nftw64)(dir, fn, nopenfd, flags));
}

/* ------------------------------------------------------------------- fts
 * fts_path is relative to the cwd of fts_open; unless FTS_NOCHDIR, fts has
 * moved since, but keeps that directory open as fts_rfd. */

static void fts_rec(int options, int rfd, unsigned info, const char *path, int err)
{
    char op;
    int e = errno;
    switch (info) {
    case FTS_D:
        op = 'L';
        break;
    case FTS_DP: /* post-order visit of a directory already seen */
    case FTS_ERR:
        return;
    case FTS_NS:
        op = (err == ENOENT || err == ENOTDIR) ? 'M' : 'S';
        break;
    default:
        op = 'S';
        break;
    }
    shim_rec(op, ((options & FTS_NOCHDIR) || rfd < 0) ? AT_FDCWD : rfd, path);
    errno = e;
}

FTSENT *fts_read(FTS *ftsp)
{
    FTSENT *ent = REAL(fts_read)(ftsp);
    if (ent != NULL && shim_on())
        fts_rec(ftsp->fts_options, ftsp->fts_rfd, ent->fts_info, ent->fts_path,
                ent->fts_errno);
    return ent;
}

FTSENT64 *fts64_read(FTS64 *ftsp)
{
    FTSENT64 *ent = REAL(fts64_read)(ftsp);
    if (ent != NULL && shim_on())
        fts_rec(ftsp->fts_options, ftsp->fts_rfd, ent->fts_info, ent->fts_path,
                ent->fts_errno);
    return ent;
}
