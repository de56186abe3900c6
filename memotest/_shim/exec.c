/* memotest shim: exec*, posix_spawn*, system, popen.
 *
 * These wrappers run inside vfork children (CPython's _posixsubprocess calls
 * execve/execv there): nothing here allocates or locks. The environment we
 * re-inject lives on the stack (mmap beyond 64 KiB), paths are searched on
 * the stack, records are raw write(2)s. The only thread-local state touched
 * is errno.
 *
 * Every new process image must receive LD_PRELOAD (with the shim),
 * MEMOTEST_TRACE_DIR and MEMOTEST_SHIM, even from `env -i` or env={}.
 */
#include "shim.h"
#include <paths.h>

extern char **environ;

#define ENV_STACK_MAX (64 * 1024)

/* ---------------------------------------------------- environment checks */

static const char k_preload[] = "LD_PRELOAD=";
static const char k_dir[] = "MEMOTEST_TRACE_DIR=";
static const char k_shim[] = "MEMOTEST_SHIM=";
#define KLEN(k) (sizeof(k) - 1)

static int is_sep(char c)
{
    return c == ' ' || c == ':' || c == '\t' || c == '\n';
}

/* Does an LD_PRELOAD value (space or colon separated) name the shim? */
static int preload_has_shim(const char *v)
{
    size_t n = strlen(shim_self_path);
    const char *s;
    if (n == 0)
        return 1; /* we do not know our own path: leave it alone */
    while (*v) {
        while (is_sep(*v))
            v++;
        s = v;
        while (*v && !is_sep(*v))
            v++;
        if ((size_t)(v - s) == n && memcmp(s, shim_self_path, n) == 0)
            return 1;
    }
    return 0;
}

struct envscan {
    size_t envc;         /* entries in envp */
    size_t drop;         /* entries of our three variables */
    const char *preload; /* value of the last LD_PRELOAD (the one ld.so uses) */
    int ok;              /* nothing to change */
};

static void env_scan(char *const envp[], struct envscan *sc)
{
    int nld = 0, ndir = 0, nshim = 0, okld = 0, okdir = 0, okshim = 0;
    const char *s;
    sc->envc = 0;
    sc->preload = NULL;
    if (envp != NULL) {
        for (; (s = envp[sc->envc]) != NULL; sc->envc++) {
            if (s[0] == 'L' && strncmp(s, k_preload, KLEN(k_preload)) == 0) {
                nld++;
                sc->preload = s + KLEN(k_preload);
                okld = preload_has_shim(sc->preload);
            } else if (s[0] == 'M' && strncmp(s, k_dir, KLEN(k_dir)) == 0) {
                ndir++;
                okdir = strcmp(s, shim_env_dir) == 0;
            } else if (s[0] == 'M' && strncmp(s, k_shim, KLEN(k_shim)) == 0) {
                nshim++;
                okshim = strcmp(s, shim_env_shim) == 0;
            }
        }
    }
    sc->drop = (size_t)(nld + ndir + nshim);
    sc->ok = nld == 1 && okld && ndir == 1 && okdir && nshim == 1 && okshim;
}

static size_t env_bytes(const struct envscan *sc)
{
    return (sc->envc + 4) * sizeof(char *) + KLEN(k_preload) +
           (sc->preload ? strlen(sc->preload) + 1 : 0) + strlen(shim_self_path) + 1;
}

/* Build in `mem` (env_bytes() bytes) a copy of envp with our three
 * variables set; the shim is appended to an existing LD_PRELOAD. */
static char **env_build(char *const envp[], const struct envscan *sc, void *mem)
{
    char **ne = (char **)mem;
    char *str = (char *)(ne + sc->envc + 4), *p;
    size_t i, k = 0, n;
    const char *s;

    for (i = 0; i < sc->envc; i++) {
        s = envp[i];
        if ((s[0] == 'L' && strncmp(s, k_preload, KLEN(k_preload)) == 0) ||
            (s[0] == 'M' && (strncmp(s, k_dir, KLEN(k_dir)) == 0 ||
                             strncmp(s, k_shim, KLEN(k_shim)) == 0)))
            continue;
        ne[k++] = (char *)s;
    }
    p = str;
    memcpy(p, k_preload, KLEN(k_preload));
    p += KLEN(k_preload);
    if (sc->preload != NULL && sc->preload[0] != '\0') {
        n = strlen(sc->preload);
        memcpy(p, sc->preload, n);
        p += n;
        if (!preload_has_shim(sc->preload))
            *p++ = ':';
        else
            goto done;
    }
    n = strlen(shim_self_path);
    memcpy(p, shim_self_path, n);
    p += n;
done:
    *p = '\0';
    ne[k++] = str;
    ne[k++] = shim_env_dir;
    ne[k++] = shim_env_shim;
    ne[k] = NULL;
    return ne;
}

typedef int (*env_fn)(void *ctx, char *const envp[]);

/* Call fn(ctx, envp') with envp' = envp carrying our variables. */
static int with_traced_env(char *const envp[], env_fn fn, void *ctx)
{
    struct envscan sc;
    size_t need;
    void *mem;
    int r, e;

    env_scan(envp, &sc);
    if (sc.ok || shim_self_path[0] == '\0')
        return fn(ctx, envp);
    need = env_bytes(&sc);
    if (need <= ENV_STACK_MAX) {
        void *stack[need / sizeof(void *) + 1];
        return fn(ctx, env_build(envp, &sc, stack));
    }
    mem = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) {
        shim_info("cannot propagate the environment");
        return fn(ctx, envp);
    }
    r = fn(ctx, env_build(envp, &sc, mem));
    e = errno;
    munmap(mem, need);
    errno = e;
    return r;
}

/* system()/popen() spawn /bin/sh with `environ` through glibc's internal
 * posix_spawn: put our variables into environ itself (normal context). */
int shim_environ_ensure(void)
{
    struct envscan sc;
    env_scan(environ, &sc);
    if (sc.ok || shim_self_path[0] == '\0')
        return 0;
    shim_guard++;
    if (sc.preload == NULL || sc.preload[0] == '\0') {
        setenv("LD_PRELOAD", shim_self_path, 1);
    } else if (!preload_has_shim(sc.preload)) {
        size_t a = strlen(sc.preload), b = strlen(shim_self_path);
        char val[a + b + 2];
        memcpy(val, sc.preload, a);
        val[a] = ':';
        memcpy(val + a + 1, shim_self_path, b + 1);
        setenv("LD_PRELOAD", val, 1);
    }
    setenv("MEMOTEST_TRACE_DIR", shim_trace_dir, 1);
    setenv("MEMOTEST_SHIM", shim_self_path, 1);
    shim_guard--;
    return 1;
}

/* ------------------------------------------------------------ exec core */

static size_t fmt_int(char *out, int v)
{
    char tmp[16];
    size_t n = 0, i;
    unsigned u = v < 0 ? (unsigned)-v : (unsigned)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    i = 0;
    if (v < 0)
        out[i++] = '-';
    while (n)
        out[i++] = tmp[--n];
    out[i] = '\0';
    return i;
}

enum { X_EXECVE, X_FEXECVE, X_EXECVEAT };

struct xreq {
    int kind;
    int fd;           /* fexecve fd, execveat dirfd */
    const char *path; /* execve path, execveat path */
    int flags;        /* execveat flags */
    char *const *argv;
};

/* The absolute path of the file the kernel is asked to execute. */
static int x_abspath(const struct xreq *q, char *abs)
{
    if (q->kind == X_FEXECVE ||
        (q->kind == X_EXECVEAT && q->path != NULL && q->path[0] == '\0' &&
         (q->flags & AT_EMPTY_PATH))) {
        if (shim_fdpath(q->fd, abs) == 0)
            return 0;
        /* an unreadable link, or a memfd/anonymous file: nothing to name */
        shim_info("cannot resolve the descriptor passed to fexecve/execveat");
        return -1;
    }
    if (q->path == NULL || q->path[0] == '\0')
        return -1;
    return shim_abspath(q->kind == X_EXECVEAT ? q->fd : AT_FDCWD, q->path, abs);
}

/* E, the real call, and F (+ M when the file is missing) if it returned. */
static int x_run(void *ctx, char *const envp[])
{
    const struct xreq *q = (const struct xreq *)ctx;
    char abs[SHIM_PATHBUF], num[16];
    const char *f[2];
    struct stat st;
    int have, e, pe;
    pid_t pid = shim_getpid();

    shim_dl_rescan_final(); /* skipped inside a vfork child */
    have = x_abspath(q, abs) == 0;
    if (have) {
        f[0] = abs;
        if (shim_reachable())
            shim_emit('H', pid, 1, f); /* the new image will find this shim */
        shim_emit('E', pid, 1, f);
    }
    switch (q->kind) {
    case X_FEXECVE:
        REAL(fexecve)(q->fd, q->argv, envp);
        break;
    case X_EXECVEAT:
        REAL(execveat)(q->fd, q->path, q->argv, envp, q->flags);
        break;
    default:
        REAL(execve)(q->path, q->argv, envp);
        break;
    }
    e = errno;
    if (have) {
        fmt_int(num, e);
        f[0] = abs;
        f[1] = num;
        shim_emit('F', pid, 2, f);
        /* ENOENT also means "interpreter missing": check the file itself. */
        if (e == ENOENT || e == ENOTDIR) {
            pe = shim_raw_stat(abs, &st);
            if (pe == ENOENT || pe == ENOTDIR)
                shim_emit_path('M', abs);
        }
    }
    errno = e;
    return -1;
}

static int traced_execve(const char *path, char *const argv[], char *const envp[])
{
    struct xreq q;
    q.kind = X_EXECVE;
    q.fd = AT_FDCWD;
    q.path = path;
    q.flags = 0;
    q.argv = argv;
    return with_traced_env(envp, x_run, &q);
}

/* glibc's maybe_script_execute: run a file without #! with /bin/sh. */
static void script_execute(const char *file, char *const argv[], char *const envp[])
{
    size_t argc = 0, i;
    while (argv != NULL && argv[argc] != NULL)
        argc++;
    {
        char *new_argv[argc + 3];
        new_argv[0] = (char *)_PATH_BSHELL;
        new_argv[1] = (char *)file;
        for (i = 1; i < argc; i++)
            new_argv[i + 1] = argv[i];
        new_argv[argc > 1 ? argc + 1 : 2] = NULL;
        traced_execve(_PATH_BSHELL, new_argv, envp);
    }
}

/* glibc's __execvpe_common, with every candidate visible: a missing
 * candidate is `M` (probed with stat, without an exec attempt); the others go
 * through traced_execve (E/F). */
static int traced_execvpe(const char *file, char *const argv[], char *const envp[])
{
    SHIM_LAUNDER(file);
    SHIM_LAUNDER(argv);
    const char *path, *p, *subp;
    size_t file_len, path_len, dlen;
    int got_eacces = 0, pe;
    struct stat st;

    if (file == NULL || file[0] == '\0') {
        errno = ENOENT;
        return -1;
    }
    if (strchr(file, '/') != NULL) {
        traced_execve(file, argv, envp);
        if (errno == ENOEXEC)
            script_execute(file, argv, envp);
        return -1;
    }
    path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin"; /* _CS_PATH */
    file_len = strnlen(file, NAME_MAX) + 1;
    path_len = strnlen(path, PATH_MAX - 1) + 1;
    if (file_len > NAME_MAX) {
        errno = ENAMETOOLONG;
        return -1;
    }
    {
        char buffer[path_len + file_len + 1];
        for (p = path;; p = subp + 1) {
            subp = strchrnul(p, ':');
            dlen = (size_t)(subp - p);
            if (dlen < path_len) {
                memcpy(buffer, p, dlen);
                buffer[dlen] = '/';
                /* an empty entry means the current directory */
                memcpy(buffer + dlen + (dlen > 0), file, file_len);
                pe = shim_raw_stat(buffer, &st);
                if (pe == ENOENT || pe == ENOTDIR) {
                    shim_rec('M', AT_FDCWD, buffer);
                    errno = pe;
                } else {
                    traced_execve(buffer, argv, envp);
                    if (errno == ENOEXEC)
                        script_execute(buffer, argv, envp);
                }
                switch (errno) {
                case EACCES:
                    got_eacces = 1;
                    break;
                case ENOENT: case ESTALE: case ENOTDIR: case ENODEV: case ETIMEDOUT:
                    break;
                default:
                    return -1;
                }
            }
            if (*subp == '\0')
                break;
        }
    }
    if (got_eacces)
        errno = EACCES;
    return -1;
}

/* ---------------------------------------------------------- exec wrappers */

int execve(const char *path, char *const argv[], char *const envp[])
{
    SHIM_LAUNDER(path);
    if (path == NULL || !shim_on())
        return REAL(execve)(path, argv, envp);
    return traced_execve(path, argv, envp);
}

static int do_execv(const char *path, char *const argv[])
{
    SHIM_LAUNDER(path);
    if (path == NULL || !shim_on())
        return REAL(execve)(path, argv, environ);
    return traced_execve(path, argv, environ);
}

static int do_execvp(const char *file, char *const argv[])
{
    if (!shim_on())
        return REAL(execvpe)(file, argv, environ);
    return traced_execvpe(file, argv, environ);
}

int execv(const char *path, char *const argv[])
{
    return do_execv(path, argv);
}

int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (!shim_on())
        return REAL(execvpe)(file, argv, envp);
    return traced_execvpe(file, argv, envp);
}

int execvp(const char *file, char *const argv[])
{
    return do_execvp(file, argv);
}

/* execl*: collect the arguments on the stack, as glibc does. */
#define COLLECT_ARGS(arg, argv_name, after)                                    \
    ptrdiff_t argc_;                                                           \
    va_list ap_;                                                               \
    va_start(ap_, arg);                                                        \
    for (argc_ = 1; va_arg(ap_, const char *) != NULL; argc_++) {              \
        if (argc_ == INT_MAX) {                                                \
            va_end(ap_);                                                       \
            errno = E2BIG;                                                     \
            return -1;                                                         \
        }                                                                      \
    }                                                                          \
    va_end(ap_);                                                               \
    char *argv_name[argc_ + 1];                                                \
    va_start(ap_, arg);                                                        \
    argv_name[0] = (char *)(arg);                                              \
    for (ptrdiff_t i_ = 1; i_ <= argc_; i_++)                                  \
        argv_name[i_] = va_arg(ap_, char *);                                   \
    after;                                                                     \
    va_end(ap_)

int execl(const char *path, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv, (void)0);
    return do_execv(path, argv);
}

int execle(const char *path, const char *arg, ...)
{
    char *const *envp;
    SHIM_LAUNDER(path);
    COLLECT_ARGS(arg, argv, envp = va_arg(ap_, char *const *));
    if (path == NULL || !shim_on())
        return REAL(execve)(path, argv, envp);
    return traced_execve(path, argv, envp);
}

int execlp(const char *file, const char *arg, ...)
{
    COLLECT_ARGS(arg, argv, (void)0);
    return do_execvp(file, argv);
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
    struct xreq q;
    if (!shim_on())
        return REAL(fexecve)(fd, argv, envp);
    q.kind = X_FEXECVE;
    q.fd = fd;
    q.path = NULL;
    q.flags = 0;
    q.argv = argv;
    return with_traced_env(envp, x_run, &q);
}

int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    SHIM_LAUNDER(path);
    struct xreq q;
    if (path == NULL || !shim_on())
        return REAL(execveat)(dirfd, path, argv, envp, flags);
    q.kind = X_EXECVEAT;
    q.fd = dirfd;
    q.path = path;
    q.flags = flags;
    q.argv = argv;
    return with_traced_env(envp, x_run, &q);
}

/* ------------------------------------------------------------ posix_spawn */

struct sreq {
    pid_t *pid;
    const char *path;
    const posix_spawn_file_actions_t *actions;
    const posix_spawnattr_t *attr;
    char *const *argv;
};

/* Real posix_spawn; `E` with the child's pid on success. Returns an error
 * number like posix_spawn. */
static int s_run(void *ctx, char *const envp[])
{
    const struct sreq *q = (const struct sreq *)ctx;
    pid_t child = 0;
    int r, e, pe;
    struct stat st;

    r = REAL(posix_spawn)(&child, q->path, q->actions, q->attr, q->argv, envp);
    e = errno;
    if (q->pid != NULL && r == 0)
        *q->pid = child;
    if (q->path != NULL && q->path[0] != '\0') {
        if (r == 0) {
            /* The child's P may already be in the log: this E names the
             * spawning parent as its second field (PROTOCOL.md, Pairing). */
            char abs[SHIM_PATHBUF], parent[16];
            const char *f[2];
            if (shim_abspath(AT_FDCWD, q->path, abs) == 0) {
                fmt_int(parent, (int)shim_getpid());
                f[0] = abs;
                f[1] = parent;
                shim_emit('E', child, 2, f);
            }
        } else if (r == ENOENT || r == ENOTDIR) {
            pe = shim_raw_stat(q->path, &st);
            if (pe == ENOENT || pe == ENOTDIR)
                shim_rec('M', AT_FDCWD, q->path);
        } else if (r == EACCES || r == ENOEXEC || r == ETXTBSY || r == ELOOP) {
            shim_rec('S', AT_FDCWD, q->path);
        }
    }
    errno = e;
    return r;
}

static int traced_spawn(pid_t *pid, const char *path,
                        const posix_spawn_file_actions_t *actions,
                        const posix_spawnattr_t *attr, char *const argv[],
                        char *const envp[])
{
    struct sreq q;
    q.pid = pid;
    q.path = path;
    q.actions = actions;
    q.attr = attr;
    q.argv = argv;
    shim_dl_rescan_final();
    return with_traced_env(envp, s_run, &q);
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *actions,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    SHIM_LAUNDER(path);
    int r, e;
    if (!shim_on())
        return REAL(posix_spawn)(pid, path, actions, attr, argv, envp);
    e = errno;
    r = traced_spawn(pid, path, actions, attr, argv, envp);
    errno = e;
    return r;
}

/* The PATH search of glibc's posix_spawnp (the caller's PATH, not envp's),
 * done here so that every candidate is visible. Candidates that cannot
 * be executed (missing, a directory, no x bit) are decided with stat; the
 * first plausible one is spawned; if that spawn fails with an error glibc
 * would search on after, the search goes on. */
int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *actions,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    SHIM_LAUNDER(file);
    const char *path, *p, *subp;
    size_t file_len, path_len, dlen;
    int got_eacces = 0, pe, r, saved;
    struct stat st;

    if (!shim_on())
        return REAL(posix_spawnp)(pid, file, actions, attr, argv, envp);
    saved = errno;
    if (file == NULL || file[0] == '\0')
        return ENOENT;
    if (strchr(file, '/') != NULL) {
        r = traced_spawn(pid, file, actions, attr, argv, envp);
        errno = saved;
        return r;
    }
    path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    file_len = strnlen(file, NAME_MAX) + 1;
    path_len = strnlen(path, PATH_MAX - 1) + 1;
    if (file_len > NAME_MAX)
        return ENAMETOOLONG;
    {
        char buffer[path_len + file_len + 1];
        for (p = path;; p = subp + 1) {
            subp = strchrnul(p, ':');
            dlen = (size_t)(subp - p);
            if (dlen < path_len) {
                memcpy(buffer, p, dlen);
                buffer[dlen] = '/';
                memcpy(buffer + dlen + (dlen > 0), file, file_len);
                pe = shim_raw_stat(buffer, &st);
                if (pe == ENOENT || pe == ENOTDIR) {
                    shim_rec('M', AT_FDCWD, buffer);
                    r = pe;
                } else if (pe == 0 && (!S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0)) {
                    shim_rec('S', AT_FDCWD, buffer);
                    r = EACCES;
                } else {
                    r = traced_spawn(pid, buffer, actions, attr, argv, envp);
                }
                switch (r) {
                case 0:
                    errno = saved;
                    return 0;
                case EACCES:
                    got_eacces = 1;
                    break;
                case ENOENT: case ESTALE: case ENOTDIR: case ENODEV: case ETIMEDOUT:
                    break;
                default:
                    errno = saved;
                    return r;
                }
            }
            if (*subp == '\0')
                break;
        }
    }
    errno = saved;
    return got_eacces ? EACCES : ENOENT;
}

/* --------------------------------------------------------- system, popen */

int system(const char *command)
{
    SHIM_LAUNDER(command);
    if (command != NULL && shim_on()) {
        int e = errno;
        shim_environ_ensure();
        shim_rec('R', AT_FDCWD, _PATH_BSHELL);
        shim_dl_rescan_final();
        errno = e;
    }
    return REAL(system)(command);
}

FILE *popen(const char *command, const char *mode)
{
    SHIM_LAUNDER(command);
    if (command != NULL && shim_on()) {
        int e = errno;
        shim_environ_ensure();
        shim_rec('R', AT_FDCWD, _PATH_BSHELL);
        shim_dl_rescan_final();
        errno = e;
    }
    return REAL(popen)(command, mode);
}

/* ------------------------------------------------------------------ wait: G
 * A child reaped after it ended by a signal: G with the child's pid and the signal.
 * memotest tells by it an image killed before its first interposed call (a pager a test
 * starts and kills at once) from one that ran without the shim (PROTOCOL.md). */
static void note_reaped(pid_t pid, int sig)
{
    char num[16];
    const char *f[1];
    int e;
    if (pid <= 0 || !shim_on())
        return;
    e = errno;
    fmt_int(num, sig);
    f[0] = num;
    shim_emit('G', pid, 1, f);
    errno = e;
}

static pid_t reaped(pid_t r, int st)
{
    if (r > 0 && WIFSIGNALED(st))
        note_reaped(r, WTERMSIG(st));
    return r;
}

pid_t waitpid(pid_t pid, int *status, int options)
{
    int st = 0;
    pid_t r = REAL(waitpid)(pid, &st, options);
    if (r > 0 && status != NULL)
        *status = st;
    return reaped(r, st);
}

pid_t wait(int *status)
{
    int st = 0;
    pid_t r = REAL(wait)(&st);
    if (r > 0 && status != NULL)
        *status = st;
    return reaped(r, st);
}

pid_t wait3(int *status, int options, struct rusage *usage)
{
    int st = 0;
    pid_t r = REAL(wait3)(&st, options, usage);
    if (r > 0 && status != NULL)
        *status = st;
    return reaped(r, st);
}

pid_t wait4(pid_t pid, int *status, int options, struct rusage *usage)
{
    int st = 0;
    pid_t r = REAL(wait4)(pid, &st, options, usage);
    if (r > 0 && status != NULL)
        *status = st;
    return reaped(r, st);
}

int waitid(idtype_t idtype, id_t id, siginfo_t *infop, int options)
{
    int r = REAL(waitid)(idtype, id, infop, options);
    if (r == 0 && infop != NULL && infop->si_pid > 0 &&
        (infop->si_code == CLD_KILLED || infop->si_code == CLD_DUMPED))
        note_reaped(infop->si_pid, infop->si_status);
    return r;
}
