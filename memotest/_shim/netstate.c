/* memotest shim: whether a datagram sent on this machine reached a socket.
 *
 * A datagram sent to a loopback port where no socket is bound is dropped:
 * nothing comes back, not even an error on an unconnected socket. So a send
 * that found nobody observed only that absence (net.c writes it `unbound`),
 * which memotest holds as an input (memotest/inputs/unserved.py). Whether a
 * socket is bound there is read from the kernel's tables, /proc/net/udp and
 * /proc/net/udp6, right after the send: a socket bound later could not have
 * received it.
 */
#include "shim.h"
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

/* 1 if a UDP socket of this machine is bound where a datagram to sa goes, 0
 * if none is, -1 if not known. */
int shim_udp_bound(const struct sockaddr *sa, socklen_t len)
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
