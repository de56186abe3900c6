/* memotest shim: the network.
 *
 * What a process can learn from a socket depends on who is at the other end.
 * The shim records every endpoint the tree talks to and every endpoint it
 * serves, and memotest (memotest/run/observe.py, memotest/world/services.py) decides:
 * talking to an endpoint that no process of the tree serves makes the result
 * not reusable, unless the user declared it in `services`.
 *
 *   C  "TYPE[,OUTCOME] ADDRESS": an endpoint the tree talks to: connect(),
 *      and the destination of sendto/sendmsg/sendmmsg (a datagram needs no
 *      connect), with the socket's type; for a Unix path, what a failure
 *      found: `absent` (ENOENT, ENOTDIR) or `refused` (ECONNREFUSED).
 *   B  "TYPE[,FLAG...] ADDRESS": an endpoint the tree serves: bind() that
 *      succeeded (inet addresses read back with getsockname, so port 0 is the
 *      port the kernel chose), listen() (which may bind an ephemeral port
 *      itself), and setsockopt() of the options that decide who else shares
 *      the port; FLAGs `listen`, `reuseport`, `reuseaddr`, `v6only`.
 *      A Unix socket bound to a path is also an `N` of the path: bind made it.
 *   A  a peer outside this machine that reached the tree: accept/accept4 (the
 *      peer, from getpeername), recvfrom/recvmsg/recvmmsg (the source).
 *      Loopback and Unix peers are not written.
 *   X  a socket that reaches the network below addresses: packet and raw
 *      sockets, and every family other than unix, inet, inet6 and netlink
 *      (netlink: "netlink:PROTOCOL", kernel state, recorded for the trace).
 *   C  also `lookup dns:NAME`: a name getaddrinfo() looked up through the resolver.
 *   I  io_uring_setup through syscall(): the ring's operations (connect,
 *      send, open, read...) never pass through glibc.
 *
 * syscall() itself is interposed for the numbers above, since a program can
 * call syscall(SYS_connect, ...) directly. The shim's own raw syscalls go
 * through this wrapper too (the shim is the first definition of `syscall`):
 * the numbers it uses are never recorded.
 */
#include "shim.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>

#define ADDR_MAX (SHIM_PATHBUF + 2 * 108 + 16)

static size_t put_str(char *out, size_t pos, size_t size, const char *s)
{
    size_t n = strlen(s);
    if (pos + n >= size)
        n = pos < size ? size - 1 - pos : 0;
    memcpy(out + pos, s, n);
    out[pos + n] = '\0';
    return pos + n;
}

static size_t put_num(char *out, size_t pos, size_t size, unsigned long v)
{
    char num[24];
    int i = 23;
    num[i] = '\0';
    do {
        num[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v && i > 0);
    return put_str(out, pos, size, num + i);
}

/* The address as PROTOCOL.md writes it (`inet:1.2.3.4:80`, `inet6:[::1]:80`,
 * `unix:/path`, `unix:@abstract`, `other:FAMILY`) into out[ADDR_MAX].
 * Returns 0, or -1 for an address that names nothing (too short, AF_UNSPEC,
 * an unnamed Unix socket). */
static int fmt_addr(const struct sockaddr *sa, socklen_t len, char *out)
{
    char ip[INET6_ADDRSTRLEN];
    size_t pos;

    if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
        return -1;
    switch (sa->sa_family) {
    case AF_UNSPEC:
        return -1; /* connect(AF_UNSPEC) dissolves a datagram association */
    case AF_INET: {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        if (len < (socklen_t)sizeof *in || !inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip))
            return -1;
        pos = put_str(out, 0, ADDR_MAX, "inet:");
        pos = put_str(out, pos, ADDR_MAX, ip);
        pos = put_str(out, pos, ADDR_MAX, ":");
        put_num(out, pos, ADDR_MAX, ntohs(in->sin_port));
        return 0;
    }
    case AF_INET6: {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        if (len < (socklen_t)sizeof *in6 || !inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip))
            return -1;
        pos = put_str(out, 0, ADDR_MAX, "inet6:[");
        pos = put_str(out, pos, ADDR_MAX, ip);
        pos = put_str(out, pos, ADDR_MAX, "]:");
        put_num(out, pos, ADDR_MAX, ntohs(in6->sin6_port));
        return 0;
    }
    case AF_UNIX: {
        const struct sockaddr_un *un = (const struct sockaddr_un *)(const void *)sa;
        size_t off = offsetof(struct sockaddr_un, sun_path), n, i;
        n = (size_t)len > off ? (size_t)len - off : 0;
        if (n > sizeof un->sun_path)
            n = sizeof un->sun_path;
        if (n == 0)
            return -1; /* unnamed */
        pos = put_str(out, 0, ADDR_MAX, "unix:");
        if (un->sun_path[0] == '\0') {
            /* abstract: the name is n-1 bytes after the NUL, NULs allowed:
             * written `\0`, and a backslash `\\`, so that two names never
             * read the same (ADDR_MAX holds twice sun_path) */
            out[pos++] = '@';
            for (i = 1; i < n; i++) {
                char ch = un->sun_path[i];
                if (ch == '\0' || ch == '\\') {
                    out[pos++] = '\\';
                    out[pos++] = ch ? '\\' : '0';
                } else {
                    out[pos++] = ch;
                }
            }
            out[pos] = '\0';
        } else {
            char path[sizeof un->sun_path + 1], abs[SHIM_PATHBUF];
            memcpy(path, un->sun_path, n);
            path[n] = '\0';
            if (shim_abspath(AT_FDCWD, path, abs) == 0)
                put_str(out, pos, ADDR_MAX, abs);
            else /* `?` and the name as given: never one the tree served */
                put_str(out, put_str(out, pos, ADDR_MAX, "?"), ADDR_MAX, path);
        }
        return 0;
    }
    default:
        pos = put_str(out, 0, ADDR_MAX, "other:");
        put_num(out, pos, ADDR_MAX, sa->sa_family);
        return 0;
    }
}

static void rec_addr(char op, const struct sockaddr *sa, socklen_t len)
{
    char addr[ADDR_MAX];
    if (fmt_addr(sa, len, addr) == 0)
        shim_emit_path(op, addr);
}

/* An inet peer that is not on this machine's loopback. */
static int is_remote(const struct sockaddr *sa, socklen_t len)
{
    if (sa == NULL || len < (socklen_t)sizeof(sa_family_t))
        return 0;
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        return (ntohl(in->sin_addr.s_addr) >> 24) != 127;
    }
    if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 0;
        if (IN6_IS_ADDR_V4MAPPED(a))
            return a->s6_addr[12] != 127;
        return 1;
    }
    return 0;
}

static void rec_peer(const struct sockaddr *sa, socklen_t len)
{
    if (is_remote(sa, len))
        rec_addr('A', sa, len);
}

static int sock_opt(int fd, int level, int name)
{
    int v = 0;
    socklen_t n = sizeof v;
    if (syscall(SYS_getsockopt, fd, level, name, &v, &n) != 0)
        return -1;
    return v;
}

/* The socket's type as a word: `stream`, `dgram`, `seqpacket`, or the number
 * (`unknown` when fd is not a socket). */
static size_t put_type(char *out, size_t size, int fd)
{
    int type = sock_opt(fd, SOL_SOCKET, SO_TYPE);
    switch (type) {
    case SOCK_STREAM:
        return put_str(out, 0, size, "stream");
    case SOCK_DGRAM:
        return put_str(out, 0, size, "dgram");
    case SOCK_SEQPACKET:
        return put_str(out, 0, size, "seqpacket");
    case -1:
        return put_str(out, 0, size, "unknown");
    default:
        return put_num(out, 0, size, (unsigned long)type);
    }
}

#ifndef SO_PASSPIDFD
#define SO_PASSPIDFD 76
#endif
#define TALK_SENT 1   /* a send that named its destination (not a connect) */
#define TALK_RIGHTS 2 /* it passed descriptors (SCM_RIGHTS) */

/* A Unix socket nobody can send to: no name (not bound, not autobound) and
 * no option that autobinds it at its next send (SO_PASSCRED, SO_PASSPIDFD). */
static int unix_unnamed(int fd)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    if (syscall(SYS_getsockname, fd, (struct sockaddr *)&ss, &n) != 0 ||
        ss.ss_family != AF_UNIX || n > offsetof(struct sockaddr_un, sun_path))
        return 0;
    return sock_opt(fd, SOL_SOCKET, SO_PASSCRED) == 0 &&
           sock_opt(fd, SOL_SOCKET, SO_PASSPIDFD) <= 0;
}

/* `C` "TYPE[,OUTCOME] ADDRESS" for an endpoint socket fd talked to; `err` is
 * the call's errno (0: it succeeded; -1: not known). For a Unix path, the
 * OUTCOME says what a failure found: `absent` (ENOENT, ENOTDIR: nothing at
 * the path) or `refused` (ECONNREFUSED: nobody listens there); of a datagram
 * socket that got through, `unnamed` (no one can answer it: unix_unnamed)
 * or `rights` (it passed descriptors). For a datagram sent to a loopback
 * port, `unbound`: no socket got it (netstate.c). */
static void rec_talk(int fd, const struct sockaddr *sa, socklen_t len, int err, int how)
{
    char rec[ADDR_MAX + 32];
    size_t pos;

    if (fmt_addr(sa, len, rec + 32) != 0)
        return;
    pos = put_type(rec, 24, fd);
    if (strncmp(rec + 32, "unix:", 5) == 0) {
        int path = rec[32 + 5] == '/';
        if (path && (err == ENOENT || err == ENOTDIR))
            pos = put_str(rec, pos, 32, ",absent");
        else if (path && err == ECONNREFUSED)
            pos = put_str(rec, pos, 32, ",refused");
        else if (how & TALK_RIGHTS)
            pos = put_str(rec, pos, 32, ",rights");
        else if (path && err == 0 && strncmp(rec, "dgram", 5) == 0 && unix_unnamed(fd))
            pos = put_str(rec, pos, 32, ",unnamed");
    } else if ((how & TALK_SENT) && err == 0 && strncmp(rec, "dgram", 5) == 0 &&
               !is_remote(sa, len) && shim_udp_bound(fd, sa, len) == 0) {
        /* a datagram sent to a local port where no socket was bound: dropped */
        pos = put_str(rec, pos, 32, ",unbound");
    }
    rec[pos++] = ' ';
    memmove(rec + pos, rec + 32, strlen(rec + 32) + 1);
    shim_emit_path('C', rec);
}

static int passes_rights(const struct msghdr *m)
{
    struct cmsghdr *c;
    if (m == NULL || m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr))
        return 0;
    for (c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR((struct msghdr *)m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
            return 1;
    return 0;
}

/* One message of sendmsg/sendmmsg: its destination, or, for descriptors
 * passed on a connected Unix socket, its peer (the one that gets them). */
static void rec_message(int fd, const struct msghdr *m, int err)
{
    int rights;
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;

    if (m == NULL)
        return;
    rights = passes_rights(m) ? TALK_RIGHTS : 0;
    if (m->msg_name != NULL && m->msg_namelen > 0)
        rec_talk(fd, m->msg_name, m->msg_namelen, err, TALK_SENT | rights);
    else if (rights && syscall(SYS_getpeername, fd, (struct sockaddr *)&ss, &n) == 0)
        rec_talk(fd, (struct sockaddr *)&ss, n, err, rights);
}

/* `B` "TYPE[,FLAG...] ADDRESS" for the endpoint socket fd serves, with what
 * decides who else reaches it: `listen` (SO_ACCEPTCONN), `reuseport`,
 * `reuseaddr`, `v6only` (an inet6 socket's IPV6_V6ONLY: the option, or the
 * net.ipv6.bindv6only default it took). `given` is the address bind() was
 * passed (NULL after listen or setsockopt): a Unix path is taken from it,
 * resolved against the cwd of the call; an inet address is read back, with
 * its real port. */
static void rec_bound(int fd, const struct sockaddr *given, socklen_t given_len)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    char addr[ADDR_MAX], rec[ADDR_MAX + 64];
    size_t pos;

    if (syscall(SYS_getsockname, fd, (struct sockaddr *)&ss, &n) != 0)
        return;
    if (ss.ss_family == AF_UNIX && given != NULL && fmt_addr(given, given_len, addr) == 0) {
        if (addr[5] == '?')
            return;
        /* bind() made the socket file: the tree created it (it may unlink it). It
         * succeeds only where nothing is at the path (EADDRINUSE, even for a
         * dangling symbolic link): that absence is what it saw, a lock. */
        if (addr[5] == '/') {
            shim_emit_path('M', addr + 5);
            shim_emit_path('N', addr + 5);
        }
    } else if (ss.ss_family == AF_UNIX && n > offsetof(struct sockaddr_un, sun_path) &&
               ((struct sockaddr_un *)&ss)->sun_path[0] != '\0') {
        /* a path bound earlier: its bind() was recorded (an unnamed bind()
         * autobinds an abstract name, written below as getsockname reads it) */
        return;
    } else if (fmt_addr((struct sockaddr *)&ss, n, addr) != 0) {
        return;
    } else if ((ss.ss_family == AF_INET &&
                ((struct sockaddr_in *)&ss)->sin_port == 0) ||
               (ss.ss_family == AF_INET6 &&
                ((struct sockaddr_in6 *)&ss)->sin6_port == 0)) {
        return; /* not bound (a setsockopt before bind) */
    }
    pos = put_type(rec, 16, fd);
    if (sock_opt(fd, SOL_SOCKET, SO_ACCEPTCONN) > 0)
        pos = put_str(rec, pos, sizeof rec, ",listen");
    if (sock_opt(fd, SOL_SOCKET, SO_REUSEPORT) > 0)
        pos = put_str(rec, pos, sizeof rec, ",reuseport");
    if (sock_opt(fd, SOL_SOCKET, SO_REUSEADDR) > 0)
        pos = put_str(rec, pos, sizeof rec, ",reuseaddr");
    if (ss.ss_family == AF_INET6 && sock_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY) > 0)
        pos = put_str(rec, pos, sizeof rec, ",v6only");
    pos = put_str(rec, pos, sizeof rec, " ");
    put_str(rec, pos, sizeof rec, addr);
    shim_emit_path('B', rec);
}

/* After setsockopt: the options that decide who shares a bound socket's port
 * may change after bind and listen (SO_REUSEPORT on a listening socket lets
 * another process join it): the socket's `B` again, with its flags now. */
static int shares_port(int level, int name)
{
    return (level == SOL_SOCKET && (name == SO_REUSEPORT || name == SO_REUSEADDR)) ||
           (level == IPPROTO_IPV6 && name == IPV6_V6ONLY);
}

/* After setsockopt: SO_PASSCRED or SO_PASSPIDFD turned on for a Unix socket
 * autobinds it at its next send, which a peer can then answer: a `B`
 * "TYPE,passcred unix:?" (memotest/world/network.py then trusts no unnamed send). */
static void rec_setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    char rec[32];
    size_t pos;

    if (shares_port(level, name)) {
        rec_bound(fd, NULL, 0);
        return;
    }
    if (level != SOL_SOCKET || (name != SO_PASSCRED && name != SO_PASSPIDFD) || val == NULL ||
        len < (socklen_t)sizeof(int) || *(const int *)val == 0 ||
        syscall(SYS_getsockname, fd, (struct sockaddr *)&ss, &n) != 0 ||
        ss.ss_family != AF_UNIX)
        return;
    pos = put_type(rec, 16, fd);
    put_str(rec, pos, sizeof rec, ",passcred unix:?");
    shim_emit_path('B', rec);
}

static void rec_socket(int domain, int type, int protocol)
{
    char rec[64];
    size_t pos;
    int base = type & 0xf; /* without SOCK_NONBLOCK / SOCK_CLOEXEC */

    if (domain == AF_NETLINK) {
        pos = put_str(rec, 0, sizeof rec, "netlink:");
        put_num(rec, pos, sizeof rec, (unsigned long)(unsigned)protocol);
    } else if (domain == AF_PACKET || base == SOCK_RAW || base == SOCK_PACKET) {
        pos = put_str(rec, 0, sizeof rec, domain == AF_PACKET ? "packet:" : "raw:");
        pos = put_num(rec, pos, sizeof rec, (unsigned long)(unsigned)domain);
        pos = put_str(rec, pos, sizeof rec, ":");
        put_num(rec, pos, sizeof rec, (unsigned long)(unsigned)protocol);
    } else if (domain != AF_UNIX && domain != AF_INET && domain != AF_INET6) {
        pos = put_str(rec, 0, sizeof rec, "family:");
        put_num(rec, pos, sizeof rec, (unsigned long)(unsigned)domain);
    } else {
        return;
    }
    shim_emit_path('X', rec);
}

/* <sys/socket.h> declares these with a transparent union under _GNU_SOURCE. */
#if defined(__USE_GNU) && !defined(__cplusplus)
#define SOCKADDR_PTR(a) ((a).__sockaddr__)
#else
#define SOCKADDR_PTR(a) (a)
#endif

#define NET_RECORD(stmt)                                                       \
    do {                                                                       \
        if (shim_on()) {                                                       \
            int e_ = errno;                                                    \
            stmt;                                                              \
            errno = e_;                                                        \
        }                                                                      \
    } while (0)

/* ---------------------------------------------------------------- clients */

/* Recorded whatever the outcome (EINPROGRESS, ECONNREFUSED...): the
 * attempt is what makes a result depend on the world (a test that skips
 * when nothing answers). */
int connect(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    int r = REAL(connect)(fd, addr, len);
    int e = r == 0 ? 0 : errno;
    if (SOCKADDR_PTR(addr) != NULL)
        NET_RECORD(rec_talk(fd, SOCKADDR_PTR(addr), len, e, 0));
    return r;
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, __CONST_SOCKADDR_ARG addr,
               socklen_t len)
{
    ssize_t r = REAL(sendto)(fd, buf, n, flags, addr, len);
    int e = r >= 0 ? 0 : errno;
    if (SOCKADDR_PTR(addr) != NULL && len > 0)
        NET_RECORD(rec_talk(fd, SOCKADDR_PTR(addr), len, e, 1));
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    ssize_t r = REAL(sendmsg)(fd, msg, flags);
    int e = r >= 0 ? 0 : errno;
    SHIM_LAUNDER(msg);
    NET_RECORD(rec_message(fd, msg, e));
    return r;
}

int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags)
{
    int r = REAL(sendmmsg)(fd, vec, vlen, flags);
    unsigned int i;
    SHIM_LAUNDER(vec);
    if (vec != NULL && shim_on()) {
        int e = errno;
        for (i = 0; i < vlen; i++) /* each message sent (0), or not (-1) */
            rec_message(fd, &vec[i].msg_hdr, r >= 0 && i < (unsigned int)r ? 0 : -1);
        errno = e;
    }
    return r;
}

/* ---------------------------------------------------------------- servers */

/* A bind() to a Unix path that failed looked the path up: EADDRINUSE found
 * something there (`S`), ENOENT/ENOTDIR found no folder for it (`M`, and the
 * folder's state). */
static void rec_bind_failed(const struct sockaddr *given, socklen_t given_len, int err)
{
    char addr[ADDR_MAX];

    if (given == NULL || given->sa_family != AF_UNIX ||
        fmt_addr(given, given_len, addr) != 0 || addr[5] != '/')
        return;
    if (err == ENOENT || err == ENOTDIR) {
        shim_emit_path('M', addr + 5);
        shim_rec_no_folder(AT_FDCWD, addr + 5); /* no folder to make it in */
    }
    else if (err == EADDRINUSE || err == EACCES || err == ELOOP || err == EROFS)
        shim_emit_path('S', addr + 5);
}

int bind(int fd, __CONST_SOCKADDR_ARG addr, socklen_t len)
{
    int r = REAL(bind)(fd, addr, len);
    int e = errno;
    if (r == 0)
        NET_RECORD(rec_bound(fd, SOCKADDR_PTR(addr), len));
    else
        NET_RECORD(rec_bind_failed(SOCKADDR_PTR(addr), len, e));
    return r;
}

int listen(int fd, int backlog)
{
    int r = REAL(listen)(fd, backlog);
    if (r == 0)
        NET_RECORD(rec_bound(fd, NULL, 0));
    return r;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
    int r = REAL(setsockopt)(fd, level, name, val, len);
    if (r == 0)
        NET_RECORD(rec_setsockopt(fd, level, name, val, len));
    return r;
}

static void rec_accepted(int fd)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;
    if (syscall(SYS_getpeername, fd, (struct sockaddr *)&ss, &n) == 0)
        rec_peer((struct sockaddr *)&ss, n);
}

int accept(int fd, __SOCKADDR_ARG addr, socklen_t *len)
{
    int r = REAL(accept)(fd, addr, len);
    if (r >= 0)
        NET_RECORD(rec_accepted(r));
    return r;
}

int accept4(int fd, __SOCKADDR_ARG addr, socklen_t *len, int flags)
{
    int r = REAL(accept4)(fd, addr, len, flags);
    if (r >= 0)
        NET_RECORD(rec_accepted(r));
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, __SOCKADDR_ARG addr, socklen_t *len)
{
    ssize_t r = REAL(recvfrom)(fd, buf, n, flags, addr, len);
    if (r >= 0 && SOCKADDR_PTR(addr) != NULL && len != NULL)
        NET_RECORD(rec_peer(SOCKADDR_PTR(addr), *len));
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
    ssize_t r = REAL(recvmsg)(fd, msg, flags);
    SHIM_LAUNDER(msg);
    if (r >= 0 && msg != NULL && msg->msg_name != NULL)
        NET_RECORD(rec_peer(msg->msg_name, msg->msg_namelen));
    return r;
}

int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen, int flags, struct timespec *tmo)
{
    int r = REAL(recvmmsg)(fd, vec, vlen, flags, tmo);
    int i;
    SHIM_LAUNDER(vec);
    if (r > 0 && vec != NULL && shim_on()) {
        int e = errno;
        for (i = 0; i < r; i++)
            if (vec[i].msg_hdr.msg_name != NULL)
                rec_peer(vec[i].msg_hdr.msg_name, vec[i].msg_hdr.msg_namelen);
        errno = e;
    }
    return r;
}

/* ---------------------------------------------------------------- sockets */

int socket(int domain, int type, int protocol)
{
    int r = REAL(socket)(domain, type, protocol);
    if (r >= 0)
        NET_RECORD(rec_socket(domain, type, protocol));
    return r;
}

/* ---------------------------------------------------------------- names
 * glibc's resolver talks to the DNS server with its internal connect and
 * send, which no wrapper sees. A name looked up is recorded as `C lookup dns:NAME`,
 * the lookup failing too (a test that skips when offline), unless the name is
 * a numeric address or every answer is a loopback address (`localhost`,
 * answered from /etc/hosts). */

static int all_loopback(const struct addrinfo *res)
{
    for (; res != NULL; res = res->ai_next)
        if (res->ai_addr == NULL || res->ai_addr->sa_family == AF_UNIX ||
            is_remote(res->ai_addr, res->ai_addrlen))
            return 0;
    return 1;
}

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints,
                struct addrinfo **res)
{
    int r = REAL(getaddrinfo)(node, service, hints, res);
    unsigned char buf[sizeof(struct in6_addr)];
    shim_note_getaddrinfo(); /* the files glibc consulted: libcfiles.c */
    SHIM_LAUNDER(node);
    if (node == NULL || *node == '\0' || inet_pton(AF_INET, node, buf) == 1 ||
        inet_pton(AF_INET6, node, buf) == 1)
        return r;
    if (r == 0 && res != NULL && all_loopback(*res))
        return r;
    if (shim_on()) {
        int e = errno;
        char rec[ADDR_MAX];
        put_str(rec, put_str(rec, 0, sizeof rec, "lookup dns:"), sizeof rec, node);
        shim_emit_path('C', rec);
        errno = e;
    }
    return r;
}

/* ---------------------------------------------------------------- syscall */

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif

/* An `I` record without the status byte: the log itself is whole. */
static const char *const uring_reason =
    "io_uring_setup: the operations of an io_uring bypass the C library";

static void rec_syscall(long nr, long r, const long *a)
{
    int e = r < 0 ? errno : 0;
    switch (nr) {
    case SYS_connect:
        rec_talk((int)a[0], (const struct sockaddr *)a[1], (socklen_t)a[2], e, 0);
        break;
    case SYS_sendto:
        if (a[4] != 0 && a[5] > 0)
            rec_talk((int)a[0], (const struct sockaddr *)a[4], (socklen_t)a[5], e, 1);
        break;
    case SYS_sendmsg:
        rec_message((int)a[0], (const struct msghdr *)a[1], e);
        break;
    case SYS_sendmmsg: {
        const struct mmsghdr *v = (const struct mmsghdr *)a[1];
        unsigned int i;
        for (i = 0; v != NULL && i < (unsigned int)a[2]; i++)
            rec_message((int)a[0], &v[i].msg_hdr, -1);
        break;
    }
    case SYS_setsockopt:
        if (r == 0)
            rec_setsockopt((int)a[0], (int)a[1], (int)a[2], (const void *)a[3],
                           (socklen_t)a[4]);
        break;
    case SYS_bind:
        if (r == 0)
            rec_bound((int)a[0], (const struct sockaddr *)a[1], (socklen_t)a[2]);
        else
            rec_bind_failed((const struct sockaddr *)a[1], (socklen_t)a[2], e);
        break;
    case SYS_listen:
        if (r == 0)
            rec_bound((int)a[0], NULL, 0);
        break;
    case SYS_accept:
    case SYS_accept4:
        if (r >= 0)
            rec_accepted((int)r);
        break;
    case SYS_recvfrom:
        if (r >= 0 && a[4] != 0 && a[5] != 0)
            rec_peer((const struct sockaddr *)a[4], *(const socklen_t *)a[5]);
        break;
    case SYS_recvmsg: {
        const struct msghdr *m = (const struct msghdr *)a[1];
        if (r >= 0 && m != NULL && m->msg_name != NULL)
            rec_peer(m->msg_name, m->msg_namelen);
        break;
    }
    case SYS_socket:
        if (r >= 0)
            rec_socket((int)a[0], (int)a[1], (int)a[2]);
        break;
    case SYS_io_uring_setup:
        if (r >= 0)
            shim_emit('I', 0, 1, &uring_reason);
        break;
    default:
        break;
    }
}

long syscall(long nr, ...)
{
    long a[6], r;
    va_list ap;
    int i;

    va_start(ap, nr);
    for (i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    r = REAL(syscall)(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    switch (nr) {
    case SYS_connect: case SYS_sendto: case SYS_sendmsg: case SYS_sendmmsg:
    case SYS_bind: case SYS_listen: case SYS_accept: case SYS_accept4:
    case SYS_recvfrom: case SYS_recvmsg: case SYS_socket: case SYS_io_uring_setup:
    case SYS_setsockopt:
        NET_RECORD(rec_syscall(nr, r, a));
        break;
    default:
        break;
    }
    return r;
}
