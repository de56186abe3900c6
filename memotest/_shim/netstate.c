/* memotest shim: whether a datagram sent on this machine reached a socket.
 *
 * A datagram sent to a loopback port where no socket is bound is dropped:
 * nothing comes back, not even an error on an unconnected socket. So a send
 * that found nobody observed only that absence (net.c writes it `unbound`),
 * which memotest holds as an input (memotest/inputs/unserved.py).
 *
 * Asked right after the send: a socket bound later could not have got it.
 * First the kernel's own delivery lookup, through sock_diag (NETLINK_SOCK_DIAG,
 * one exact query: "which UDP socket gets a datagram from S:Q to D:P", the
 * lookup the kernel makes for a packet, v6-only and wildcards included, about
 * 10 us); where that is not available (the udp_diag module missing: checked
 * once per process by looking up the sending socket itself, which must be
 * found), the tables /proc/net/udp and /proc/net/udp6 (any socket on the port
 * at that address or a wildcard counts: about 1 ms, the kernel walks every
 * bucket). The shim's own netlink socket goes through the real syscall(),
 * never recorded.
 */
#include "shim.h"
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* n hex digits at s as a number; -1 when one is not a digit. */
static long long hexnum(const char *s, int n)
{
    long long v = 0;
    int i, d;
    for (i = 0; i < n; i++) {
        d = hexval(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* What the datagram goes to: an IPv4 address (mapped ones included) or an
 * IPv6 one, in the kernel's table form (each 32-bit word as the table
 * prints it), and whether it is the unspecified address. */
struct dest {
    int v4;
    uint32_t w[4]; /* v4: w[0] */
    int any;
    unsigned port;
};

/* Whether the table line's local address can get a datagram sent to d. */
static int line_gets(const char *line, int v6table, const struct dest *d)
{
    const char *p = strchr(line, ':');
    uint32_t w[4];
    long long v;
    int i, words = v6table ? 4 : 1, wild = 1, mapped;

    if (p == NULL)
        return 0;
    p++;
    while (*p == ' ')
        p++;
    for (i = 0; i < words; i++) {
        v = hexnum(p + 8 * i, 8);
        if (v < 0)
            return 1; /* a line we cannot read: taken as bound */
        w[i] = (uint32_t)v;
        if (w[i] != 0)
            wild = 0;
    }
    p += 8 * words;
    if (*p != ':')
        return 1;
    v = hexnum(p + 1, 4);
    if (v < 0)
        return 1;
    if ((unsigned)v != d->port)
        return 0;
    if (d->any || wild)
        return 1;
    if (!v6table)
        return d->v4 && w[0] == d->w[0];
    mapped = w[0] == 0 && w[1] == 0 && w[2] == htonl(0xffff);
    if (d->v4)
        return mapped && w[3] == d->w[0];
    return !mapped && memcmp(w, d->w, sizeof w) == 0;
}

/* 1 if a line of the table at path gets it, 0 if none, -1 if unreadable. */
static int table_gets(const char *path, int v6table, const struct dest *d)
{
    char buf[8192];
    size_t have = 0;
    long n;
    int fd, first = 1, found = 0;
    char *line, *nl;

    fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return v6table && errno == ENOENT ? 0 : -1; /* no IPv6: no such socket */
    for (;;) {
        n = syscall(SYS_read, fd, buf + have, sizeof buf - 1 - have);
        if (n < 0) {
            found = -1;
            break;
        }
        have += (size_t)n;
        buf[have] = '\0';
        line = buf;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            if (!first && line_gets(line, v6table, d))
                found = 1;
            first = 0;
            line = nl + 1;
        }
        if (found || n == 0)
            break;
        have = strlen(line);
        if (have == sizeof buf - 1) { /* a line longer than the buffer */
            found = -1;
            break;
        }
        memmove(buf, line, have);
    }
    syscall(SYS_close, fd);
    return found;
}

/* The tables' answer for a datagram to sa: 1 bound, 0 none, -1 not known. */
static int tables_bound(const struct sockaddr *sa, socklen_t len)
{
    struct dest d;
    int a, b;

    memset(&d, 0, sizeof d);
    if (sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        d.v4 = 1;
        d.w[0] = in->sin_addr.s_addr;
        d.any = in->sin_addr.s_addr == 0;
        d.port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        memcpy(d.w, &in6->sin6_addr, sizeof d.w);
        d.port = ntohs(in6->sin6_port);
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            d.v4 = 1;
            d.w[0] = d.w[3];
            d.any = d.w[0] == 0;
        } else {
            d.any = IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr);
        }
    } else {
        return -1;
    }
    a = table_gets("/proc/net/udp", 0, &d);
    if (a != 0)
        return a;
    b = table_gets("/proc/net/udp6", 1, &d);
    return b;
}

/* sock_diag's delivery lookup of a UDP datagram from src to dst (both of
 * family fam, ports in network order): 1 a socket gets it, 0 none, -1 the
 * lookup failed. */
static int diag_lookup(int fam, const void *src, uint16_t sport, const void *dst, uint16_t dport)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } q;
    struct sockaddr_nl kernel;
    union {
        struct nlmsghdr nlh;
        char buf[1024];
    } a;
    size_t alen = fam == AF_INET ? 4 : 16;
    long fd, n;
    int found = -1;

    memset(&q, 0, sizeof q);
    q.nlh.nlmsg_len = sizeof q;
    q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nlh.nlmsg_flags = NLM_F_REQUEST;
    q.req.sdiag_family = (uint8_t)fam;
    q.req.sdiag_protocol = IPPROTO_UDP;
    q.req.idiag_states = ~0U;
    q.req.id.idiag_sport = sport; /* the sender */
    q.req.id.idiag_dport = dport; /* where it goes: the socket looked up */
    memcpy(q.req.id.idiag_src, src, alen);
    memcpy(q.req.id.idiag_dst, dst, alen);
    q.req.id.idiag_cookie[0] = q.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;

    fd = REAL(syscall)(SYS_socket, AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (fd < 0)
        return -1;
    if (REAL(syscall)(SYS_sendto, fd, &q, sizeof q, 0, &kernel, sizeof kernel) ==
        (long)sizeof q) {
        n = REAL(syscall)(SYS_recvfrom, fd, a.buf, sizeof a.buf, 0, NULL, NULL);
        if (n >= (long)sizeof(struct nlmsghdr) && NLMSG_OK(&a.nlh, (unsigned long)n)) {
            if (a.nlh.nlmsg_type == SOCK_DIAG_BY_FAMILY)
                found = 1;
            else if (a.nlh.nlmsg_type == NLMSG_ERROR &&
                     a.nlh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr)) &&
                     ((struct nlmsgerr *)NLMSG_DATA(&a.nlh))->error == -ENOENT)
                found = 0;
        }
    }
    REAL(syscall)(SYS_close, fd);
    return found;
}

/* The address a datagram from fd to a loopback address leaves from: the
 * socket's own, the wildcard taken as the loopback address of its family. */
static int source_of(int fd, int fam, int mapped, unsigned char *addr, uint16_t *port)
{
    struct sockaddr_storage ss;
    socklen_t n = sizeof ss;

    if (REAL(syscall)(SYS_getsockname, fd, &ss, &n) != 0 || ss.ss_family != fam)
        return -1;
    if (fam == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        if (in->sin_addr.s_addr == 0)
            in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        memcpy(addr, &in->sin_addr, 4);
        *port = in->sin_port;
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr)) {
            in6->sin6_addr = in6addr_loopback;
            if (mapped) { /* ::ffff:127.0.0.1 */
                memset(&in6->sin6_addr, 0, 16);
                in6->sin6_addr.s6_addr[10] = in6->sin6_addr.s6_addr[11] = 0xff;
                in6->sin6_addr.s6_addr[12] = 127;
                in6->sin6_addr.s6_addr[15] = 1;
            }
        }
        memcpy(addr, &in6->sin6_addr, 16);
        *port = in6->sin6_port;
    }
    return 0;
}

/* Whether sock_diag answers in this process: 1, 0, or -1 not asked yet. */
static int diag_works = -1;

/* 1 if a UDP socket of this machine got the datagram fd just sent to sa, 0 if
 * none did, -1 if not known. */
int shim_udp_bound(int fd, const struct sockaddr *sa, socklen_t len)
{
    unsigned char src[16], dst[16];
    uint16_t sport, dport;
    int fam = sa->sa_family, mapped = 0, r;

    if (fam == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        memcpy(dst, &in->sin_addr, 4);
        dport = in->sin_port;
        if (in->sin_addr.s_addr == 0)
            return tables_bound(sa, len); /* to the wildcard: any local address */
    } else if (fam == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        memcpy(dst, &in6->sin6_addr, 16);
        dport = in6->sin6_port;
        if (IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
            return tables_bound(sa, len);
        mapped = IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr);
    } else {
        return -1;
    }
    if (diag_works != 0 && source_of(fd, fam, mapped, src, &sport) == 0) {
        if (diag_works < 0) /* the sending socket itself must be found */
            diag_works = diag_lookup(fam, dst, dport, src, sport) == 1;
        if (diag_works) {
            r = diag_lookup(fam, src, sport, dst, dport);
            if (r >= 0)
                return r;
        }
    }
    return tables_bound(sa, len);
}
