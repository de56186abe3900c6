/* memotest shim core: initialization, writing records to the log (and the
 * status byte), the per-process dedup table, and the P / O / K records. */
#include "shim.h"

/* ------------------------------------------------------------------ state */

void *shim_real_tab[SHIM_F_COUNT];
static const char *const shim_names[SHIM_F_COUNT] = {
#define SHIM_NAME(f) #f,
    SHIM_FUNCS(SHIM_NAME)
#undef SHIM_NAME
};

volatile int shim_state;
int shim_active;
__thread int shim_guard SHIM_TLS;
pid_t shim_pid;
char shim_trace_dir[PATH_MAX];
char shim_self_path[PATH_MAX];
/* The shim file this image loaded (device and inode of shim_self_path at start-up). */
static dev_t g_self_dev;
static ino_t g_self_ino;
char shim_env_dir[PATH_MAX + 32];
char shim_env_shim[PATH_MAX + 32];
volatile int shim_dl_pending;
__thread int shim_dl_mine SHIM_TLS;
int shim_dl_ever;
__thread int shim_untimed SHIM_TLS;
__thread int shim_probe SHIM_TLS;
__thread int shim_or_dir SHIM_TLS;
__thread int shim_gone SHIM_TLS;

static char g_log_path[PATH_MAX + 16];
static char g_status_path[PATH_MAX + 16];
static int g_status_done; /* `1` already written by this process */

/* Dedup: open addressing over 64-bit hashes of (op, path), lock-free. */
#define DEDUP_BITS 18
#define DEDUP_SLOTS (1UL << DEDUP_BITS)
#define DEDUP_LIMIT (DEDUP_SLOTS / 10 * 7)
#define DEDUP_PROBES 64
static uint64_t *g_dedup;
static unsigned long g_dedup_count;
static int g_dedup_full;

/* --------------------------------------------------------- real pointers */

static long shim_enosys(void)
{
    errno = ENOSYS;
    return -1;
}

void *shim_real_slow(int idx)
{
    static const char *const versions[] = {"GLIBC_2.2.5", "GLIBC_2.17", "GLIBC_2.0"};
    void *p;
    unsigned i;

    shim_guard++;
    p = dlsym(RTLD_NEXT, shim_names[idx]);
    for (i = 0; p == NULL && i < sizeof versions / sizeof versions[0]; i++)
        p = dlvsym(RTLD_NEXT, shim_names[idx], versions[i]);
    if (p == NULL)
        (void)dlerror(); /* leave no error of ours for the program to find */
    shim_guard--;
    if (p == NULL)
        p = (void *)shim_enosys;
    __atomic_store_n(&shim_real_tab[idx], p, __ATOMIC_RELAXED);
    return p;
}

/* ------------------------------------------------------------ raw helpers */

static size_t fmt_ulong(char *out, unsigned long v)
{
    char tmp[24];
    size_t n = 0, i;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    out[n] = '\0';
    return n;
}

int shim_raw_stat(const char *path, struct stat *st)
{
    if (shim_raw_fstatat(AT_FDCWD, path, st, 0) == 0)
        return 0;
    return errno;
}

/* Raw open, never through our wrappers, never inherited by an exec. */
static int raw_open(const char *path, int flags)
{
    int fd;
    do
        fd = (int)syscall(SYS_openat, AT_FDCWD, path, flags | O_CLOEXEC | O_NOCTTY, 0);
    while (fd < 0 && errno == EINTR);
    return fd;
}

/* ------------------------------------------------------- log and status
 *
 * The log is opened for each record (O_WRONLY|O_APPEND|O_CLOEXEC), written
 * with one write(2) and closed at once. The shim holds no descriptor between
 * records, so a program never sees one: not in /proc/self/fd, not as an
 * earlier EMFILE, not as a number taken from fcntl(F_DUPFD) or dup2, and its
 * close_fds/closefrom cannot take the log away. A single-threaded program
 * gets exactly the descriptor numbers it gets without the shim. */

void shim_status_fail(void)
{
    int saved = errno, fd;
    if (__atomic_load_n(&g_status_done, __ATOMIC_RELAXED) || g_status_path[0] == '\0') {
        errno = saved;
        return;
    }
    fd = raw_open(g_status_path, O_WRONLY);
    if (fd >= 0) {
        if (syscall(SYS_pwrite64, fd, "1", 1, 0) == 1)
            __atomic_store_n(&g_status_done, 1, __ATOMIC_RELAXED);
        syscall(SYS_close, fd);
    }
    errno = saved;
}

static void log_write(const char *buf, size_t len)
{
    long r;
    int fd = raw_open(g_log_path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        shim_status_fail();
        return;
    }
    do
        r = syscall(SYS_write, fd, buf, len);
    while (r < 0 && errno == EINTR);
    syscall(SYS_close, fd);
    if (r != (long)len)
        shim_status_fail();
}

/* ------------------------------------------------------------------ dedup */

static uint64_t hash_rec(char op, const char *s, size_t n)
{
    const uint64_t k1 = 0x9E3779B185EBCA87ULL, k2 = 0xC2B2AE3D27D4EB4FULL;
    uint64_t h = 0x27D4EB2F165667C5ULL ^ ((uint64_t)(unsigned char)op << 56) ^ n;
    uint64_t v;
    while (n >= 8) {
        memcpy(&v, s, 8);
        h ^= v * k2;
        h = ((h << 31) | (h >> 33)) * k1;
        s += 8;
        n -= 8;
    }
    v = 0;
    memcpy(&v, s, n);
    h ^= v * k2;
    h = ((h << 31) | (h >> 33)) * k1;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDULL;
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    h ^= h >> 33;
    return h ? h : 1;
}

/* 1 if (op, s) was already recorded by this process (or an ancestor before
 * fork); otherwise remembers it and returns 0. Past 70% load the table stops
 * taking new entries (those records are then always written) but still
 * answers for the ones it holds. */
static int dedup_seen(char op, const char *s, size_t n)
{
    uint64_t h, cur;
    unsigned long i, probe;
    int full;

    if (g_dedup == NULL)
        return 0;
    full = __atomic_load_n(&g_dedup_full, __ATOMIC_RELAXED);
    h = hash_rec(op, s, n);
    i = (unsigned long)h & (DEDUP_SLOTS - 1);
    for (probe = 0; probe < DEDUP_PROBES; probe++, i = (i + 1) & (DEDUP_SLOTS - 1)) {
        cur = __atomic_load_n(&g_dedup[i], __ATOMIC_ACQUIRE);
        if (cur == h)
            return 1;
        if (cur == 0) {
            uint64_t expected = 0;
            if (full)
                return 0;
            if (__atomic_compare_exchange_n(&g_dedup[i], &expected, h, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                if (__atomic_add_fetch(&g_dedup_count, 1, __ATOMIC_RELAXED) > DEDUP_LIMIT)
                    __atomic_store_n(&g_dedup_full, 1, __ATOMIC_RELAXED);
                return 0;
            }
            if (expected == h)
                return 1;
        }
    }
    return 0; /* crowded: just write it */
}

int shim_seen(char key, const char *abs)
{
    return dedup_seen(key, abs, strlen(abs));
}

static int op_dedups(char op)
{
    switch (op) {
    case 'R': case 'W': case 'N': case 'S': case 'T': case 'M': case 'Y': case 'L': case 'D': case 'O':
    case 'V': case 'Q': case 'J': /* what a plain creation saw: paths.c, fs.c */
    case 'C':
    case 'U':
    case 'p': /* a yes-or-no probe's stat: fs.c */
    case 'B': case 'A': case 'X': /* the network: net.c */
        return 1;
    default:
        return 0;
    }
}

/* ---------------------------------------------------------------- records */

void shim_emit(char op, pid_t pid, int nfields, const char *const *fields)
{
    char buf[SHIM_REC_MAX];
    size_t len, flen;
    int i;

    if (SHIM_UNLIKELY(shim_dl_pending || shim_dl_mine) && !shim_guard)
        shim_dl_rescan_if_pending();
    if (nfields == 1 && op_dedups(op) && dedup_seen(op, fields[0], strlen(fields[0])))
        return;
    if (pid == 0)
        pid = shim_getpid(); /* only now: a deduplicated record costs no syscall */

    buf[0] = op;
    len = 1 + fmt_ulong(buf + 1, (unsigned long)pid);
    buf[len++] = ':';
    len += fmt_ulong(buf + len, (unsigned long)nfields);
    buf[len++] = '\0';
    for (i = 0; i < nfields; i++) {
        flen = strlen(fields[i]);
        if (len + flen + 1 > sizeof buf) {
            if (op != 'I')
                shim_info(op == 'P' ? "record too long" : "path too long");
            else
                shim_status_fail();
            return;
        }
        memcpy(buf + len, fields[i], flen + 1);
        len += flen + 1;
    }
    log_write(buf, len);
}

void shim_emit_path(char op, const char *abs)
{
    const char *f[1];
    if (op == 'M' && shim_or_dir > 0)
        op = 'Y'; /* inside an exist_ok creation: absent or a directory, the same to it */
    if (SHIM_UNLIKELY(abs[0] == '/' && (abs[1] == 'p' || abs[1] == 'd'))) {
        shim_emit_magic(op, abs); /* /proc/self/cwd/x, /dev/fd/N... (procfs.c) */
        return;
    }
    f[0] = abs;
    shim_emit(op, 0, 1, f);
}

void shim_info(const char *reason)
{
    const char *f[1];
    f[0] = reason;
    shim_emit('I', shim_getpid(), 1, f);
    shim_status_fail();
}

/* ------------------------------------------------- loaded objects (`O`) */

static int addr_in_object(const struct dl_phdr_info *info, uintptr_t addr)
{
    int i;
    for (i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && addr >= start && addr < start + ph->p_memsz)
            return 1;
    }
    return 0;
}

static int dl_record_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    const char *name = info->dlpi_name;
    (void)size;
    (void)data;
    /* "" is the main program; a name without '/' is the vdso. */
    if (name == NULL || name[0] == '\0' || strchr(name, '/') == NULL)
        return 0;
    if (addr_in_object(info, (uintptr_t)&dl_record_cb))
        return 0; /* the shim itself */
    shim_rec('O', AT_FDCWD, name);
    return 0;
}

/* fork() and dl_iterate_phdr. glibc's fork resets dl_load_lock in the child
 * but not dl_load_write_lock, which dl_iterate_phdr takes and which dlopen and
 * dlclose hold while they link or unlink an object. If any other thread held
 * it at the moment of fork, a dl_iterate_phdr in the child hangs forever; a
 * bare child that only execs never takes that lock, so the shim must not
 * either. Hence:
 *  - in a fork child that is still single-threaded, the link-map chain is
 *    walked without any lock (nothing else can change it: the thread that
 *    held the lock is gone, and a chain reachable through l_next is never
 *    freed memory);
 *  - a fork waits for the shim's own rescans in flight (atfork prepare) and
 *    rescans do not start while a fork is under way (they stay pending), so
 *    at least the shim never leaves that lock held in a child. Lock-free:
 *    each side announces itself, then looks at the other. */
static int g_forking;  /* forks between their prepare and parent handlers */
static int g_rescans;  /* rescans in flight, all threads */
static __thread int t_rescanning SHIM_TLS;
static int g_fork_child;               /* this process came from fork() */
static struct link_map *g_lm_head;     /* the main program's link map */
static struct link_map *g_lm_self;     /* the shim's */

/* procfs counts a process's threads in the link count of /proc/self/task. */
static int single_threaded(void)
{
    struct stat st;
    return shim_raw_stat("/proc/self/task", &st) == 0 && st.st_nlink == 3;
}

static void walk_link_maps(void)
{
    const struct link_map *lm;
    for (lm = g_lm_head; lm != NULL; lm = lm->l_next) {
        const char *name = lm->l_name;
        if (lm == g_lm_self || name == NULL || name[0] == '\0' || strchr(name, '/') == NULL)
            continue;
        shim_rec('O', AT_FDCWD, name);
    }
}

void shim_dl_rescan(void)
{
    __atomic_add_fetch(&g_rescans, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&g_forking, __ATOMIC_SEQ_CST) > 0) {
        __atomic_sub_fetch(&g_rescans, 1, __ATOMIC_SEQ_CST);
        __atomic_store_n(&shim_dl_pending, 1, __ATOMIC_RELAXED); /* later */
        return;
    }
    t_rescanning++;
    shim_guard++;
    if (g_fork_child && g_lm_head != NULL && single_threaded())
        walk_link_maps();
    else
        dl_iterate_phdr(dl_record_cb, NULL);
    shim_guard--;
    t_rescanning--;
    __atomic_sub_fetch(&g_rescans, 1, __ATOMIC_SEQ_CST);
}

static void atfork_prepare(void)
{
    __atomic_add_fetch(&g_forking, 1, __ATOMIC_SEQ_CST);
    /* A rescan of this very thread (fork from a signal handler) is not waited for. */
    while (__atomic_load_n(&g_rescans, __ATOMIC_SEQ_CST) > t_rescanning)
        syscall(SYS_sched_yield);
}

static void atfork_parent(void)
{
    __atomic_sub_fetch(&g_forking, 1, __ATOMIC_SEQ_CST);
}

/* A dlopen is passed straight to glibc (see misc.c), so what it maps is
 * recorded afterwards: at the next record of the thread that called it
 * (shim_dl_mine: by then glibc's dlopen has returned, or is running the new
 * object's constructors, and the object is listed), at any thread's next
 * record (shim_dl_pending), and unconditionally at dlclose, exec, spawn and
 * exit. Another thread's rescan can run while the dlopen is still in flight
 * and miss the object; the calling thread's own flag covers that. Never in a
 * vfork child: dl_iterate_phdr takes a lock another thread of the parent may
 * hold. */
void shim_dl_rescan_if_pending(void)
{
    if (shim_guard ||
        !(shim_dl_mine || __atomic_load_n(&shim_dl_pending, __ATOMIC_RELAXED)) ||
        shim_getpid() != shim_pid)
        return;
    shim_dl_mine = 0;
    __atomic_store_n(&shim_dl_pending, 0, __ATOMIC_RELAXED);
    shim_dl_rescan();
}

void shim_dl_rescan_final(void)
{
    if (shim_guard || !__atomic_load_n(&shim_dl_ever, __ATOMIC_RELAXED) ||
        shim_getpid() != shim_pid)
        return;
    shim_dl_mine = 0;
    __atomic_store_n(&shim_dl_pending, 0, __ATOMIC_RELAXED);
    shim_dl_rescan();
}

/* ------------------------------------------------------ process records */

static void emit_process(int argc, char **argv)
{
    char body[SHIM_REC_MAX], rec[SHIM_REC_MAX];
    char exe[PATH_MAX], cwd[PATH_MAX], cmd[SHIM_REC_MAX], num[24];
    const size_t limit = SHIM_REC_MAX - 32; /* room for the header and "..." */
    size_t blen = 0, len, cmdlen = 0, off;
    long n;
    int count = 0, truncated = 0, fd, i;

#define ADD_FIELD(s)                                                           \
    do {                                                                       \
        size_t l_ = strlen(s);                                                 \
        if (truncated || blen + l_ + 1 > limit) {                              \
            truncated = 1;                                                     \
        } else {                                                               \
            memcpy(body + blen, (s), l_ + 1);                                  \
            blen += l_ + 1;                                                    \
            count++;                                                           \
        }                                                                      \
    } while (0)

    fmt_ulong(num, (unsigned long)shim_getppid());
    ADD_FIELD(num);
    n = syscall(SYS_readlinkat, AT_FDCWD, "/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        n = 0;
        shim_info("cannot read /proc/self/exe");
    }
    exe[n] = '\0';
    ADD_FIELD(exe);
    if (shim_getcwd(cwd, sizeof cwd) != 0)
        cwd[0] = '\0';
    ADD_FIELD(cwd);

    fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        while (cmdlen < sizeof cmd - 1) {
            n = syscall(SYS_read, fd, cmd + cmdlen, sizeof cmd - 1 - cmdlen);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            cmdlen += (size_t)n;
        }
        syscall(SYS_close, fd);
    }
    if (cmdlen > 0) {
        int cut = cmdlen == sizeof cmd - 1; /* maybe more than we read */
        cmd[cmdlen] = '\0';
        for (off = 0; off < cmdlen;) {
            len = strlen(cmd + off);
            if (off + len >= cmdlen && (cut || cmd[cmdlen - 1] != '\0')) {
                truncated = 1; /* last argument only partially read */
                break;
            }
            ADD_FIELD(cmd + off);
            off += len + 1;
        }
    } else if (argv != NULL) {
        for (i = 0; i < argc && argv[i] != NULL; i++)
            ADD_FIELD(argv[i]);
    }
#undef ADD_FIELD
    if (truncated) {
        memcpy(body + blen, "...", 4);
        blen += 4;
        count++;
    }
    rec[0] = 'P';
    len = 1 + fmt_ulong(rec + 1, (unsigned long)shim_getpid());
    rec[len++] = ':';
    len += fmt_ulong(rec + len, (unsigned long)count);
    rec[len++] = '\0';
    memcpy(rec + len, body, blen);
    log_write(rec, len + blen);
}

static void atfork_child(void)
{
    char num[24];
    const char *f[1];
    __atomic_store_n(&g_forking, 0, __ATOMIC_SEQ_CST); /* the other threads are gone */
    __atomic_store_n(&g_rescans, t_rescanning, __ATOMIC_SEQ_CST);
    g_fork_child = 1;
    shim_pid = shim_getpid();
    if (shim_active) {
        int saved = errno;
        fmt_ulong(num, (unsigned long)shim_getppid());
        f[0] = num;
        shim_emit('K', shim_pid, 1, f);
        errno = saved;
    }
}

/* ---------------------------------------------------------- retargeting
 *
 * memotest_shim_retarget(dir): from now on this process writes its records to
 * DIR/log (and DIR/status), and its children are given DIR: used by a warm
 * worker (memotest/tracer/warm/), which forks one child per run from a
 * process that has already imported what every run needs. The child calls it
 * right after fork, while it is still single-threaded: the records it makes
 * from then on are its run's, and the records its parent made before the fork
 * are the worker's own (memotest adds them to every run's trace). The dedup
 * table starts empty, so the new log holds everything the child does, and the
 * child announces itself (`P`, then `O` for every object already mapped) as
 * the root of the new log. Returns 0, or -1 if the shim is not tracing or DIR
 * is too long (the child must then not run). */
static int copy_str(char *dst, size_t size, const char *a, const char *b);

__attribute__((visibility("default"))) int memotest_shim_retarget(const char *dir)
{
    char log[sizeof g_log_path], status[sizeof g_status_path], envdir[sizeof shim_env_dir];
    int saved = errno;
    void *tab;

    if (!shim_active || dir == NULL || dir[0] != '/' ||
        copy_str(log, sizeof log, dir, "/log") != 0 ||
        copy_str(status, sizeof status, dir, "/status") != 0 ||
        copy_str(envdir, sizeof envdir, "MEMOTEST_TRACE_DIR=", dir) != 0 ||
        strlen(dir) >= sizeof shim_trace_dir)
        return -1;
    shim_guard++;
    memcpy(shim_trace_dir, dir, strlen(dir) + 1);
    memcpy(g_log_path, log, sizeof log);
    memcpy(g_status_path, status, sizeof status);
    memcpy(shim_env_dir, envdir, sizeof envdir);
    __atomic_store_n(&g_status_done, 0, __ATOMIC_RELAXED);
    setenv("MEMOTEST_TRACE_DIR", shim_trace_dir, 1);
    if (g_dedup != NULL) {
        /* fresh zero pages in place of the inherited table */
        tab = mmap(g_dedup, DEDUP_SLOTS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
        if (tab == MAP_FAILED)
            g_dedup = NULL; /* no dedup at all: every record is written */
    }
    __atomic_store_n(&g_dedup_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&g_dedup_full, 0, __ATOMIC_RELAXED);
    shim_pid = shim_getpid();
    emit_process(0, NULL);
    shim_dl_rescan();
    shim_guard--;
    errno = saved;
    return 0;
}

/* ---------------------------------------------------------- untimed probes
 *
 * memotest_shim_untimed(delta): adds delta (+1 entering, -1 leaving) to this thread's
 * depth of untimed probes and returns the new depth (never below 0). While it is above
 * 0, a stat-family call of this thread that finds its path is recorded `S`, not `T`:
 * Python code that asks only "is it there, is it a file" (os.path.exists, isfile,
 * Path.is_dir...) says so around the call (memotest/worker/untimed.py), and the path
 * is kept out of the run's modification-time order. Per thread: another thread's stats
 * during the probe stay `T`. */
__attribute__((visibility("default"))) int memotest_shim_untimed(int delta)
{
    int depth = shim_untimed + delta;
    shim_untimed = depth > 0 ? depth : 0;
    return shim_untimed;
}

/* memotest_shim_probe(delta): the same for this thread's depth of yes-or-no probes
 * (os.path.isfile, Path.exists, Path.is_dir... of a plain path, no Python trace or
 * profile function set: memotest/worker/untimed.py). While it is above 0, a stat-family
 * call of this thread that finds its path is recorded `p`: its caller learnt what is at
 * the path (a file, a folder, a link, nothing), not its size, times or links, so the
 * path is held by that alone (memotest/inputs/probed.py). */
__attribute__((visibility("default"))) int memotest_shim_probe(int delta)
{
    int depth = shim_probe + delta;
    shim_probe = depth > 0 ? depth : 0;
    return shim_probe;
}

/* ---------------------------------------------------------- exist_ok creations
 *
 * memotest_shim_or_dir(delta): the same for this thread's depth of creations that end
 * the same whether their path was absent or already a directory (Python's
 * os.makedirs(exist_ok=True), pathlib.Path.mkdir(exist_ok=True): memotest/worker/
 * untimed.py says so around them). While it is above 0, a lookup of this thread that
 * missed, and a creation's success (mkdir: `M` before its `N`), is written `Y`: the
 * caller learnt that the path was absent or a directory, not which. */
__attribute__((visibility("default"))) int memotest_shim_or_dir(int delta)
{
    int depth = shim_or_dir + delta;
    shim_or_dir = depth > 0 ? depth : 0;
    return shim_or_dir;
}

/* memotest_shim_gone(delta): the same for this thread's depth of removals whose caller
 * drops ENOENT (coverage's file_be_gone: plugins/memotest_pytest/walk_path/): while it
 * is above 0, an `unlink` that succeeded or failed with ENOENT ended the same as on any
 * non-directory or nothing there, and writes `J` (absent or not a directory: fs.c). */
__attribute__((visibility("default"))) int memotest_shim_gone(int delta)
{
    int depth = shim_gone + delta;
    shim_gone = depth > 0 ? depth : 0;
    return shim_gone;
}

/* ---------------------------------------------------------- initialization */

static int copy_str(char *dst, size_t size, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + lb + 1 > size)
        return -1;
    memcpy(dst, a, la);
    memcpy(dst + la, b, lb + 1);
    return 0;
}

static void shim_init(int argc, char **argv)
{
    const char *dir, *self;
    int i, fd, saved = errno;
    Dl_info info;
    void *tab;

    shim_guard++;
    for (i = 0; i < SHIM_F_COUNT; i++)
        (void)shim_real(i);
    shim_pid = shim_getpid();

    dir = getenv("MEMOTEST_TRACE_DIR");
    if (dir == NULL || dir[0] == '\0' ||
        copy_str(shim_trace_dir, sizeof shim_trace_dir, dir, "") != 0 ||
        copy_str(g_log_path, sizeof g_log_path, dir, "/log") != 0 ||
        copy_str(g_status_path, sizeof g_status_path, dir, "/status") != 0)
        goto inert;

    self = getenv("MEMOTEST_SHIM");
    if (self == NULL || self[0] == '\0') {
        char abs[SHIM_PATHBUF];
        self = NULL;
        if (dladdr((void *)&shim_init, &info) && info.dli_fname && info.dli_fname[0]) {
            self = info.dli_fname;
            if (self[0] != '/' && shim_getcwd(abs, sizeof abs) == 0 &&
                strlen(abs) + strlen(self) + 2 < sizeof abs) {
                strcat(abs, "/");
                strcat(abs, self);
                self = abs;
            }
        }
        if (self == NULL || copy_str(shim_self_path, sizeof shim_self_path, self, "") != 0)
            shim_self_path[0] = '\0';
    } else if (copy_str(shim_self_path, sizeof shim_self_path, self, "") != 0) {
        shim_self_path[0] = '\0';
    }
    {
        struct stat self_st;
        if (shim_self_path[0] != '\0' && shim_raw_stat(shim_self_path, &self_st) == 0) {
            g_self_dev = self_st.st_dev;
            g_self_ino = self_st.st_ino;
        }
    }
    if (copy_str(shim_env_dir, sizeof shim_env_dir, "MEMOTEST_TRACE_DIR=", shim_trace_dir) ||
        copy_str(shim_env_shim, sizeof shim_env_shim, "MEMOTEST_SHIM=", shim_self_path))
        goto inert;

    fd = raw_open(g_log_path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        shim_status_fail();
        goto inert;
    }
    syscall(SYS_close, fd);

    tab = mmap(NULL, DEDUP_SLOTS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    g_dedup = tab == MAP_FAILED ? NULL : (uint64_t *)tab;

    {
        struct link_map *lm = NULL;
        if (dladdr1((void *)&shim_init, &info, (void **)&lm, RTLD_DL_LINKMAP) && lm != NULL) {
            g_lm_self = lm;
            while (lm->l_prev != NULL)
                lm = lm->l_prev;
            g_lm_head = lm;
        }
    }
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    shim_active = 1;
    __atomic_store_n(&shim_state, 2, __ATOMIC_RELEASE);

    emit_process(argc, argv);
    shim_dl_rescan();
    shim_guard--;
    errno = saved;
    return;

inert:
    shim_active = 0;
    __atomic_store_n(&shim_state, 2, __ATOMIC_RELEASE);
    shim_guard--;
    errno = saved;
}

int shim_lazy_init(void)
{
    int expected = 0;
    if (shim_guard)
        return 0;
    if (__atomic_compare_exchange_n(&shim_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        shim_init(0, NULL);
    /* Another thread may still be initializing: this call goes unrecorded. */
    return __atomic_load_n(&shim_state, __ATOMIC_ACQUIRE) == 2 && shim_active && !shim_guard;
}

/* glibc passes (argc, argv, envp) to the constructors of shared objects. */
__attribute__((constructor)) static void shim_ctor(int argc, char **argv, char **envp)
{
    int expected = 0;
    (void)envp;
    if (__atomic_compare_exchange_n(&shim_state, &expected, 1, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        shim_init(argc, argv);
}

__attribute__((destructor)) static void shim_dtor(void)
{
    if (shim_state == 2 && shim_active) {
        int saved = errno;
        shim_dl_rescan_final();
        errno = saved;
    }
}

/* Whether the image this process is about to exec will find this same shim at
 * MEMOTEST_SHIM, as its dynamic loader will look it up from here (this process's root
 * and mount namespace, which an exec keeps): see the H record in PROTOCOL.md. */
int shim_reachable(void)
{
    struct stat st;
    if (g_self_ino == 0 || shim_self_path[0] == '\0')
        return 0;
    if (shim_raw_stat(shim_self_path, &st) != 0)
        return 0;
    return st.st_dev == g_self_dev && st.st_ino == g_self_ino;
}
