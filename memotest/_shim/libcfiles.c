/* memotest shim: files the C library reads by itself.
 *
 * glibc reads the NSS configuration and databases (/etc/nsswitch.conf,
 * /etc/passwd, /etc/hosts...), the time zone (/etc/localtime, $TZ, the
 * zoneinfo files), the locales (locale-archive, $LOCPATH) and the iconv
 * module lists with its own internal open (__open_nocancel, an fopen inside
 * libc): those calls never cross the PLT, so no LD_PRELOAD wrapper of open or
 * fopen can see them. What can be interposed are the public functions that
 * make glibc read them. Each wrapper below calls the real function, then
 * records the files that function family consults, resolved from the same
 * environment glibc uses: `R` for each that exists (and each file a symbolic
 * link on the way names), `M` for each that does not. The list is a superset
 * of what one call reads (it does not parse nsswitch.conf): a spurious re-run
 * when an unrelated database changes is the price of never missing one.
 * NSS modules (libnss_*.so) and iconv modules that glibc loads itself are
 * picked up by the next `O` rescan (shim_dl_pending).
 *
 * What stays out of reach: sources that are not files (nsswitch's systemd,
 * sss, ldap, and DNS: sockets opened inside libc; see docs/limits.md). */
#include "shim.h"
#include <grp.h>
#include <iconv.h>
#include <locale.h>
#include <netdb.h>
#include <pwd.h>
#include <shadow.h>
#include <time.h>
#include <wchar.h>

/* `R` for a file that exists (and each link hop's target), `M` otherwise. */
static void note(const char *path)
{
    char cur[SHIM_PATHBUF], next[SHIM_PATHBUF], *slash;
    struct stat st;
    long n;
    int hops, err;

    if (path == NULL || path[0] != '/' || strlen(path) >= sizeof cur)
        return;
    err = shim_raw_stat(path, &st);
    if (err == ENOENT || err == ENOTDIR) {
        shim_emit_path('M', path);
        return;
    }
    shim_emit_path(err == 0 && !S_ISDIR(st.st_mode) ? 'R' : 'S', path);
    memcpy(cur, path, strlen(path) + 1);
    for (hops = 0; hops < 16; hops++) {
        n = syscall(SYS_readlinkat, AT_FDCWD, cur, next, sizeof next - 1);
        if (n <= 0 || n >= (long)sizeof next - 1)
            return;
        next[n] = '\0';
        if (next[0] != '/') {
            slash = strrchr(cur, '/');
            if (slash == NULL || (size_t)(slash - cur) + 1 + (size_t)n >= sizeof cur)
                return;
            memcpy(slash + 1, next, (size_t)n + 1);
        } else {
            memcpy(cur, next, (size_t)n + 1);
        }
        shim_normalize(cur);
        err = shim_raw_stat(cur, &st);
        shim_emit_path(err == 0 ? 'R' : 'M', cur);
    }
}

/* note(dir + "/" + name) */
static void note_in(const char *dir, const char *name)
{
    char path[SHIM_PATHBUF];
    size_t dl = strlen(dir), nl = strlen(name);
    if (dl + nl + 2 > sizeof path)
        return;
    memcpy(path, dir, dl);
    path[dl] = '/';
    memcpy(path + dl + 1, name, nl + 1);
    note(path);
}

/* ------------------------------------------------------------------- NSS */

enum {
    DB_PASSWD = 1, DB_GROUP = 2, DB_SHADOW = 4, DB_HOSTS = 8, DB_SERVICES = 16,
    DB_PROTOCOLS = 32, DB_NETWORKS = 64, DB_GAI = 128
};

static const struct {
    int db;
    const char *path;
} nss_files[] = {
    {DB_PASSWD, "/etc/passwd"},       {DB_GROUP, "/etc/group"},
    {DB_SHADOW, "/etc/shadow"},       {DB_HOSTS, "/etc/hosts"},
    {DB_HOSTS, "/etc/host.conf"},     {DB_HOSTS, "/etc/resolv.conf"},
    {DB_GAI, "/etc/gai.conf"},        {DB_SERVICES, "/etc/services"},
    {DB_PROTOCOLS, "/etc/protocols"}, {DB_NETWORKS, "/etc/networks"},
};

static void nss_note(int dbs);

void shim_note_getaddrinfo(void)
{
    nss_note(DB_HOSTS | DB_SERVICES | DB_GAI);
}

static void nss_note(int dbs)
{
    const char *aliases;
    unsigned i;
    int e;
    if (!shim_on())
        return;
    e = errno;
    note("/etc/nsswitch.conf");
    for (i = 0; i < sizeof nss_files / sizeof nss_files[0]; i++)
        if (dbs & nss_files[i].db)
            note(nss_files[i].path);
    aliases = getenv("HOSTALIASES");
    if ((dbs & DB_HOSTS) && aliases != NULL && aliases[0] == '/')
        note(aliases);
    /* glibc may have loaded a libnss_*.so itself: rescan at the next record */
    __atomic_store_n(&shim_dl_ever, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&shim_dl_pending, 1, __ATOMIC_RELAXED);
    errno = e;
}

#define NSS(ret, name, dbs, params, args)                                      \
    ret name params                                                            \
    {                                                                          \
        ret r_ = REAL(name) args;                                              \
        nss_note(dbs);                                                         \
        return r_;                                                             \
    }

#define PWR struct passwd *pw, char *buf, size_t len, struct passwd **res
#define GRR struct group *gr, char *buf, size_t len, struct group **res
NSS(struct passwd *, getpwnam, DB_PASSWD, (const char *n), (n))
NSS(struct passwd *, getpwuid, DB_PASSWD, (uid_t u), (u))
NSS(int, getpwnam_r, DB_PASSWD, (const char *n, PWR), (n, pw, buf, len, res))
NSS(int, getpwuid_r, DB_PASSWD, (uid_t u, PWR), (u, pw, buf, len, res))
NSS(struct passwd *, getpwent, DB_PASSWD, (void), ())
NSS(int, getpwent_r, DB_PASSWD, (PWR), (pw, buf, len, res))
NSS(struct group *, getgrnam, DB_GROUP, (const char *n), (n))
NSS(struct group *, getgrgid, DB_GROUP, (gid_t g), (g))
NSS(int, getgrnam_r, DB_GROUP, (const char *n, GRR), (n, gr, buf, len, res))
NSS(int, getgrgid_r, DB_GROUP, (gid_t g, GRR), (g, gr, buf, len, res))
NSS(struct group *, getgrent, DB_GROUP, (void), ())
NSS(int, getgrent_r, DB_GROUP, (GRR), (gr, buf, len, res))
NSS(int, getgrouplist, DB_GROUP, (const char *u, gid_t g, gid_t *gs, int *n), (u, g, gs, n))
NSS(int, initgroups, DB_GROUP, (const char *u, gid_t g), (u, g))
NSS(struct spwd *, getspnam, DB_SHADOW, (const char *n), (n))
NSS(int, getspnam_r, DB_SHADOW,
    (const char *n, struct spwd *sp, char *buf, size_t len, struct spwd **res),
    (n, sp, buf, len, res))

#define HER struct hostent *he, char *buf, size_t len, struct hostent **res, int *herr
NSS(struct hostent *, gethostbyname, DB_HOSTS, (const char *n), (n))
NSS(struct hostent *, gethostbyname2, DB_HOSTS, (const char *n, int af), (n, af))
NSS(int, gethostbyname_r, DB_HOSTS, (const char *n, HER), (n, he, buf, len, res, herr))
NSS(int, gethostbyname2_r, DB_HOSTS, (const char *n, int af, HER),
    (n, af, he, buf, len, res, herr))
NSS(struct hostent *, gethostbyaddr, DB_HOSTS, (const void *a, socklen_t l, int t), (a, l, t))
NSS(int, gethostbyaddr_r, DB_HOSTS, (const void *a, socklen_t l, int t, HER),
    (a, l, t, he, buf, len, res, herr))
NSS(struct hostent *, gethostent, DB_HOSTS, (void), ())
/* getaddrinfo is net.c's: it also records the name looked up (shim_note_getaddrinfo). */
NSS(int, getnameinfo, DB_HOSTS | DB_SERVICES,
    (const struct sockaddr *sa, socklen_t sl, char *h, socklen_t hl, char *s, socklen_t svl,
     int f),
    (sa, sl, h, hl, s, svl, f))

#define SER struct servent *se, char *buf, size_t len, struct servent **res
NSS(struct servent *, getservbyname, DB_SERVICES, (const char *n, const char *p), (n, p))
NSS(struct servent *, getservbyport, DB_SERVICES, (int port, const char *p), (port, p))
NSS(int, getservbyname_r, DB_SERVICES, (const char *n, const char *p, SER),
    (n, p, se, buf, len, res))
NSS(int, getservbyport_r, DB_SERVICES, (int port, const char *p, SER),
    (port, p, se, buf, len, res))
NSS(struct servent *, getservent, DB_SERVICES, (void), ())
NSS(struct protoent *, getprotobyname, DB_PROTOCOLS, (const char *n), (n))
NSS(struct protoent *, getprotobynumber, DB_PROTOCOLS, (int p), (p))
NSS(struct protoent *, getprotoent, DB_PROTOCOLS, (void), ())
NSS(struct netent *, getnetbyname, DB_NETWORKS, (const char *n), (n))
NSS(struct netent *, getnetbyaddr, DB_NETWORKS, (uint32_t a, int t), (a, t))

/* ------------------------------------------------------------ time zones
 * glibc's tzset: TZ unset is /etc/localtime; "" is "Universal"; a leading
 * ':' is dropped; a relative name is under $TZDIR (or /usr/share/zoneinfo).
 * A TZ that names no file is a POSIX rule, whose DST rules may come from
 * "posixrules" in that folder. Calls are frequent (a log line each), so
 * the work is done once per (TZ, TZDIR, trace log); the dedup table would
 * drop the repeats anyway, this saves the stat calls. */

static uint64_t mix(uint64_t h, const char *s)
{
    if (s == NULL)
        return h * 0x100000001B3ULL ^ 0xA5;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 0x100000001B3ULL;
    return (h ^ 0x5A) * 0x100000001B3ULL;
}

static uint64_t g_tz_done;

static void tz_note(void)
{
    const char *tz, *dir;
    uint64_t key;
    int e;
    if (!shim_on())
        return;
    e = errno;
    tz = getenv("TZ");
    dir = getenv("TZDIR");
    key = mix(mix(mix(0xCBF29CE484222325ULL, tz), dir), shim_trace_dir);
    if (__atomic_load_n(&g_tz_done, __ATOMIC_RELAXED) == key) {
        errno = e;
        return;
    }
    if (dir == NULL || dir[0] == '\0')
        dir = "/usr/share/zoneinfo";
    if (tz == NULL) {
        note("/etc/localtime");
    } else {
        struct stat st;
        char path[SHIM_PATHBUF];
        if (tz[0] == '\0')
            tz = "Universal";
        if (tz[0] == ':')
            tz++;
        if (tz[0] == '/') {
            note(tz);
        } else if (tz[0] != '\0') {
            note_in(dir, tz);
        }
        path[0] = '\0';
        if (tz[0] == '/')
            snprintf(path, sizeof path, "%s", tz);
        else
            snprintf(path, sizeof path, "%s/%s", dir, tz);
        if (tz[0] == '\0' || shim_raw_stat(path, &st) != 0)
            note_in(dir, "posixrules");
    }
    __atomic_store_n(&g_tz_done, key, __ATOMIC_RELAXED);
    errno = e;
}

#define TZW(ret, name, params, args)                                           \
    ret name params                                                            \
    {                                                                          \
        ret r_ = REAL(name) args;                                              \
        tz_note();                                                             \
        return r_;                                                             \
    }

void tzset(void)
{
    REAL(tzset)();
    tz_note();
}
TZW(struct tm *, localtime, (const time_t *t), (t))
TZW(struct tm *, localtime_r, (const time_t *t, struct tm *tm), (t, tm))
TZW(struct tm *, gmtime, (const time_t *t), (t))
TZW(struct tm *, gmtime_r, (const time_t *t, struct tm *tm), (t, tm))
TZW(time_t, mktime, (struct tm *tm), (tm))
TZW(time_t, timelocal, (struct tm *tm), (tm))
TZW(time_t, timegm, (struct tm *tm), (tm))
TZW(char *, ctime, (const time_t *t), (t))
TZW(char *, ctime_r, (const time_t *t, char *b), (t, b))
TZW(size_t, strftime, (char *s, size_t m, const char *f, const struct tm *tm), (s, m, f, tm))
TZW(size_t, strftime_l,
    (char *s, size_t m, const char *f, const struct tm *tm, locale_t l), (s, m, f, tm, l))
TZW(size_t, wcsftime, (wchar_t *s, size_t m, const wchar_t *f, const struct tm *tm),
    (s, m, f, tm))

/* --------------------------------------------------------------- locales
 * A locale name (other than C and POSIX) is looked up in locale-archive
 * (unless $LOCPATH is set), through locale.alias, then as folders of
 * $LOCPATH or /usr/lib/locale, whose LC_* files glibc maps. Recorded: the
 * archive and alias file, a listing (`L`) of each locale folder (a locale
 * that appears there changes the answer), and the files under them that
 * are mapped once the call returns (read from /proc/self/maps). */

static int under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return n > 1 && strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* `R` for each file mapped in this process under one of dirs[0..n). */
static void note_mapped(const char *const *dirs, int ndirs)
{
    char buf[4096], line[PATH_MAX + 256];
    size_t ll = 0;
    long got, i;
    int fd, d, f;
    fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    while ((got = syscall(SYS_read, fd, buf, sizeof buf)) > 0) {
        for (i = 0; i < got; i++) {
            char *p = line;
            if (buf[i] != '\n') {
                if (ll < sizeof line - 1)
                    line[ll++] = buf[i];
                continue;
            }
            line[ll] = '\0';
            ll = 0;
            for (f = 0; f < 5 && p != NULL; f++) { /* skip address perms offset dev inode */
                p = strchr(p, ' ');
                while (p != NULL && *p == ' ')
                    p++;
            }
            if (p == NULL || *p != '/')
                continue;
            for (d = 0; d < ndirs; d++)
                if (under(p, dirs[d]))
                    shim_emit_path('R', p);
        }
    }
    syscall(SYS_close, fd);
}

static void locale_note(const char *name)
{
    const char *dirs[8], *lp;
    char copy[PATH_MAX];
    int n = 0, e;
    char *s, *save = NULL;
    if (name == NULL || !shim_on())
        return;
    if (strcmp(name, "C") == 0 || strcmp(name, "POSIX") == 0)
        return;
    e = errno;
    lp = getenv("LOCPATH");
    note("/usr/share/locale/locale.alias");
    if (lp == NULL || lp[0] == '\0') {
        note("/usr/lib/locale/locale-archive");
        dirs[n++] = "/usr/lib/locale";
    } else if (strlen(lp) < sizeof copy) {
        memcpy(copy, lp, strlen(lp) + 1);
        for (s = strtok_r(copy, ":", &save); s != NULL && n < 8; s = strtok_r(NULL, ":", &save))
            if (s[0] == '/')
                dirs[n++] = s;
    }
    for (int i = 0; i < n; i++) {
        struct stat st;
        int err = shim_raw_stat(dirs[i], &st);
        shim_emit_path(err == 0 ? 'L' : 'M', dirs[i]);
    }
    note_mapped(dirs, n);
    errno = e;
}

char *setlocale(int category, const char *locale)
{
    char *r = REAL(setlocale)(category, locale);
    /* "" takes the names from the environment: r says which were found */
    if (locale != NULL)
        locale_note(locale[0] == '\0' ? (r != NULL ? r : "?") : locale);
    return r;
}

locale_t newlocale(int mask, const char *locale, locale_t base)
{
    locale_t r = REAL(newlocale)(mask, locale, base);
    if (locale != NULL)
        locale_note(locale[0] == '\0' ? "?" : locale);
    return r;
}

/* ----------------------------------------------------------------- iconv
 * The module lists of $GCONV_PATH and of glibc's own gconv folder (next to
 * libc.so.6), then the modules themselves (`O`, by the next rescan). */

static char g_gconv_dir[PATH_MAX];

iconv_t iconv_open(const char *to, const char *from)
{
    iconv_t r = REAL(iconv_open)(to, from);
    const char *gp;
    char copy[PATH_MAX], *s, *save = NULL;
    if (!shim_on())
        return r;
    int e = errno;
    if (g_gconv_dir[0] == '\0') {
        Dl_info info;
        shim_guard++;
        if (dladdr(shim_real(SHIM_F_iconv_open), &info) && info.dli_fname &&
            info.dli_fname[0] == '/' && strlen(info.dli_fname) + 8 < sizeof g_gconv_dir) {
            char tmp[PATH_MAX];
            memcpy(tmp, info.dli_fname, strlen(info.dli_fname) + 1);
            *strrchr(tmp, '/') = '\0';
            snprintf(g_gconv_dir, sizeof g_gconv_dir, "%s/gconv", tmp);
        }
        shim_guard--;
    }
    gp = getenv("GCONV_PATH");
    if (gp != NULL && strlen(gp) < sizeof copy) {
        memcpy(copy, gp, strlen(gp) + 1);
        for (s = strtok_r(copy, ":", &save); s != NULL; s = strtok_r(NULL, ":", &save))
            if (s[0] == '/')
                note_in(s, "gconv-modules");
    }
    if (g_gconv_dir[0] != '\0') {
        struct stat st;
        char d[PATH_MAX + 32];
        note_in(g_gconv_dir, "gconv-modules.cache");
        note_in(g_gconv_dir, "gconv-modules");
        snprintf(d, sizeof d, "%s/gconv-modules.d", g_gconv_dir);
        shim_emit_path(shim_raw_stat(d, &st) == 0 ? 'L' : 'M', d);
    }
    __atomic_store_n(&shim_dl_ever, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&shim_dl_pending, 1, __ATOMIC_RELAXED);
    errno = e;
    return r;
}
