/* TCP plumbing for the rendezvous (tcp.h). */
#define _GNU_SOURCE
#include "boot/tcp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEEPALIVE_IDLE_S   5
#define KEEPALIVE_INTVL_S  1
#define KEEPALIVE_COUNT    5
#define USER_TIMEOUT_MS    10000

int nv_boot_tcp_split(const char *hp, char *host, size_t hcap, char *port, size_t pcap, char *err, size_t errcap)
{
    const char *colon, *h = hp;
    size_t hlen;
    if (!hp) {
        snprintf(err, errcap, "no address");
        return -1;
    }
    if (hp[0] == '[') {
        const char *close = strchr(hp, ']');
        if (!close || close[1] != ':') {
            snprintf(err, errcap, "'%s': expected [ADDRESS]:PORT", hp);
            return -1;
        }
        h = hp + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(hp, ':');
        if (!colon) {
            snprintf(err, errcap, "'%s': expected HOST:PORT", hp);
            return -1;
        }
        hlen = (size_t)(colon - hp);
        if (memchr(hp, ':', hlen)) {
            snprintf(err, errcap, "'%s': write an IPv6 address as [ADDRESS]:PORT", hp);
            return -1;
        }
    }
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 1 || p > 65535) {
        snprintf(err, errcap, "'%s': the port must be a number in 1..65535", hp);
        return -1;
    }
    if (hlen >= hcap) {
        snprintf(err, errcap, "'%s': host name too long", hp);
        return -1;
    }
    memcpy(host, h, hlen);
    host[hlen] = 0;
    if (!strcmp(host, "*"))
        host[0] = 0;
    snprintf(port, pcap, "%ld", p);
    return 0;
}

static void ip_text(const struct sockaddr *sa, char *out, size_t cap)
{
    /* an IPv4 peer of a dual-stack socket is an IPv4 address to everyone else */
    if (sa->sa_family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&((const struct sockaddr_in6 *)sa)->sin6_addr)) {
        struct sockaddr_in v4 = { .sin_family = AF_INET };
        memcpy(&v4.sin_addr, ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr + 12, 4);
        ip_text((const struct sockaddr *)&v4, out, cap);
        return;
    }
    const void *a = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                                              : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    if ((sa->sa_family != AF_INET && sa->sa_family != AF_INET6) ||
        !inet_ntop(sa->sa_family, a, out, (socklen_t)cap))
        snprintf(out, cap, "?");
}

static int is_wildcard(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
    if (sa->sa_family == AF_INET6)
        return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    return 0;
}

int nv_boot_tcp_listen(const char *hostport, int *specific, char *ip, size_t ipcap, char *err, size_t errcap)
{
    char host[256], port[8];
    if (nv_boot_tcp_split(hostport, host, sizeof host, port, sizeof port, err, errcap) != 0)
        return -1;
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_PASSIVE | AI_NUMERICSERV }, *res;
    int rc = getaddrinfo(host[0] ? host : NULL, port, &hints, &res);
    if (rc != 0) {
        snprintf(err, errcap, "%s: %s", hostport, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        /* a restarted job may reuse the port of one whose connections linger in TIME_WAIT */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
            continue;
        }
        *specific = !is_wildcard(ai->ai_addr);
        ip_text(ai->ai_addr, ip, ipcap);
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errcap, "cannot listen on %s: %s", hostport, strerror(saved));
    return fd;
}

/* Connect fd to one address within the deadline in ms. */
static int connect_one(int fd, const struct addrinfo *ai, int timeout_ms)
{
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return 0;
    if (errno != EINPROGRESS)
        return -1;
    struct pollfd p = { .fd = fd, .events = POLLOUT };
    int n;
    do
        n = poll(&p, 1, timeout_ms);
    while (n < 0 && errno == EINTR);
    if (n == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (n < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
        return -1;
    if (soerr) {
        errno = soerr;
        return -1;
    }
    return 0;
}

int nv_boot_tcp_connect(const char *hostport, int timeout_ms, int *retry, char *err, size_t errcap)
{
    char host[256], port[8];
    *retry = 0;
    if (nv_boot_tcp_split(hostport, host, sizeof host, port, sizeof port, err, errcap) != 0)
        return -1;
    if (!host[0]) {
        snprintf(err, errcap, "'%s': name the host to connect to", hostport);
        return -1;
    }
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                              .ai_flags = AI_NUMERICSERV }, *res;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        /* a name the resolver does not know yet may be known in a moment */
        *retry = rc == EAI_AGAIN;
        snprintf(err, errcap, "%s: %s", hostport, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        if (connect_one(fd, ai, timeout_ms) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        *retry = saved == ECONNREFUSED || saved == ETIMEDOUT || saved == EHOSTUNREACH ||
                 saved == ENETUNREACH || saved == ECONNRESET || saved == EAGAIN;
        snprintf(err, errcap, "cannot connect to %s: %s", hostport, strerror(saved));
        errno = saved;
    }
    return fd;
}

void nv_boot_tcp_tune(int fd)
{
    int one = 1, idle = KEEPALIVE_IDLE_S, intvl = KEEPALIVE_INTVL_S, cnt = KEEPALIVE_COUNT;
    unsigned ut = USER_TIMEOUT_MS;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    /* unacknowledged data (a message to a host that is gone) */
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof ut);
}

void nv_boot_tcp_local_ip(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
        snprintf(out, cap, "?");
    else
        ip_text((struct sockaddr *)&ss, out, cap);
}

void nv_boot_tcp_peer_name(int fd, char *out, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char ip[INET6_ADDRSTRLEN];
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(out, cap, "?");
        return;
    }
    ip_text((struct sockaddr *)&ss, ip, sizeof ip);
    unsigned port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                                   : ((struct sockaddr_in *)&ss)->sin_port);
    snprintf(out, cap, ss.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip, port);
}
