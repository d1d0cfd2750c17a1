/* Setting the tcp link up: the listening socket, one connection per pair of
 * ranks (the higher rank connects to the lower), and mutual authentication
 * before anything else crosses a connection:
 *   both: HELLO(rank, fresh nonce)
 *   both: AUTH(HMAC-SHA256(job secret, role | peer's nonce | from | to))
 * The role ("connect"/"accept") keeps a proof from being reflected back. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

void tcp_mac(const struct tcp_link *t, const char *role, const uint8_t nonce[NV_TCP_NONCE_LEN],
             int from, int to, uint8_t out[NV_TCP_MAC_LEN])
{
    char label[64];
    int n = snprintf(label, sizeof label, "netvm-tcp-v1|%s|%d|%d|", role, from, to);
    struct nv_hmac_part parts[2] = { { label, (size_t)n }, { nonce, NV_TCP_NONCE_LEN } };
    if (nv_hmac_sha256(t->secret, t->p.secret_len, parts, 2, out) != 0)
        nv_error("tcp link: HMAC failed; the handshake will fail");
}

int tcp_tune_socket(int fd, int timeout_ms)
{
    int one = 1;
    /* small frames must not wait for Nagle */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* an unreachable peer: the kernel gives up after NETVM_TIMEOUT */
    unsigned uto = (unsigned)timeout_ms;
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof uto);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int idle = timeout_ms / 2000 > 0 ? timeout_ms / 2000 : 1, cnt = 2;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    int fl = fcntl(fd, F_GETFL);
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

struct tcp_conn *tcp_conn_new(struct tcp_link *t, int fd, int rank)
{
    struct tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ev.link = &t->base;
    c->link = t;
    c->fd = fd;
    c->rank = rank;
    atomic_store(&c->state, CONN_AUTH);
    pthread_mutex_init(&c->send_lock, NULL);
    pthread_mutex_init(&c->out_lock, NULL);
    pthread_mutex_init(&c->rx_lock, NULL);
    pthread_mutex_init(&c->arm_lock, NULL);
    c->rx = RX_HDR;
    c->wbuf = malloc(64 * 1024);
    c->stage = malloc(TCP_STAGE_CAP);
    if (!c->wbuf || !c->stage) {
        free(c->wbuf);
        free(c->stage);
        free(c);
        return NULL;
    }
    return c;
}

void tcp_conn_free(struct tcp_conn *c)
{
    if (!c)
        return;
    struct tcp_out *o = c->out_head;
    while (o) {
        struct tcp_out *n = o->next;
        if (o->slot_ref >= 0)
            atomic_fetch_sub(&c->link->slot_refs[o->slot_ref], 1);
        free(o);
        o = n;
    }
    if (c->fd >= 0)
        close(c->fd);
    pthread_mutex_destroy(&c->send_lock);
    pthread_mutex_destroy(&c->out_lock);
    pthread_mutex_destroy(&c->rx_lock);
    pthread_mutex_destroy(&c->arm_lock);
    free(c->wbuf);
    free(c->stage);
    free(c);
}

/* --- blocking helpers for the handshake, bounded by a deadline --------- */

static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = nv_now_ns();
        if (now >= deadline)
            return -1;
        struct pollfd p = { .fd = fd, .events = events };
        int n = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
        if (n > 0)
            return (p.revents & (POLLERR | POLLNVAL)) && !(p.revents & events) ? -1 : 0;
        if (n < 0 && errno != EINTR)
            return -1;
    }
}

static int send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLOUT, deadline))
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
    uint8_t *p = buf;
    while (len) {
        ssize_t n = recv(fd, p, len, 0);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_fd(fd, POLLIN, deadline))
                return -1;
        } else {
            return -1;
        }
    }
    return 0;
}

static int send_frame_blocking(int fd, const struct nv_tcp_hdr *h, const void *payload, uint64_t deadline)
{
    uint8_t hb[NV_TCP_HDR_LEN];
    nv_tcp_hdr_encode(h, hb);
    if (send_all(fd, hb, sizeof hb, deadline))
        return -1;
    return h->len ? send_all(fd, payload, (size_t)h->len, deadline) : 0;
}

/* Receive one frame of the expected kind with a payload of exactly plen. */
static int recv_frame_blocking(int fd, uint8_t kind, struct nv_tcp_hdr *h, void *payload, size_t plen,
                               uint64_t deadline, const char **why)
{
    uint8_t hb[NV_TCP_HDR_LEN];
    if (recv_all(fd, hb, sizeof hb, deadline)) {
        *why = "connection closed or timed out during the handshake";
        return -1;
    }
    if (nv_tcp_hdr_decode(hb, sizeof hb, h, why))
        return -1;
    if (h->kind != kind || h->len != plen) {
        *why = "unexpected frame during the handshake";
        return -1;
    }
    if (recv_all(fd, payload, plen, deadline)) {
        *why = "connection closed or timed out during the handshake";
        return -1;
    }
    return 0;
}

static int send_hello(struct tcp_link *t, struct tcp_conn *c, uint64_t deadline)
{
    if (nv_random_bytes(c->my_nonce, sizeof c->my_nonce))
        return -1;
    struct nv_tcp_hdr h = { .kind = NV_TCP_HELLO, .len = NV_TCP_NONCE_LEN, .operand = (uint64_t)t->base.rank };
    return send_frame_blocking(c->fd, &h, c->my_nonce, deadline);
}

/* Our proof for the peer, and a check of the peer's proof for us. */
static int send_auth(struct tcp_link *t, struct tcp_conn *c, uint64_t deadline)
{
    struct nv_tcp_hdr h = { .kind = NV_TCP_AUTH, .len = NV_TCP_MAC_LEN };
    uint8_t mac[NV_TCP_MAC_LEN];
    tcp_mac(t, c->outgoing ? "connect" : "accept", c->peer_nonce, t->base.rank, c->rank, mac);
    return send_frame_blocking(c->fd, &h, mac, deadline);
}

static int check_auth(struct tcp_link *t, struct tcp_conn *c, uint64_t deadline, const char **why)
{
    struct nv_tcp_hdr h;
    uint8_t got[NV_TCP_MAC_LEN], want[NV_TCP_MAC_LEN];
    if (recv_frame_blocking(c->fd, NV_TCP_AUTH, &h, got, sizeof got, deadline, why))
        return -1;
    tcp_mac(t, c->outgoing ? "accept" : "connect", c->my_nonce, c->rank, t->base.rank, want);
    if (!nv_ct_equal(got, want, sizeof want)) {
        *why = "authentication failed (wrong job secret?)";
        return -1;
    }
    return 0;
}

static int connect_to(const struct nv_tcp_card *card, int timeout_ms, uint64_t deadline)
{
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = card->port, .sin_addr.s_addr = card->ipv4 };
    for (;;) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -1;
        int r = connect(fd, (struct sockaddr *)&a, sizeof a);
        if (r == 0 || (errno == EINPROGRESS && wait_fd(fd, POLLOUT, deadline) == 0)) {
            int err = 0;
            socklen_t el = sizeof err;
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el);
            if (err == 0) {
                tcp_tune_socket(fd, timeout_ms);
                return fd;
            }
        }
        close(fd);
        if (nv_now_ns() >= deadline)
            return -1;
        usleep(10000);   /* the peer's listener is up before the cards are exchanged; retry briefly anyway */
    }
}

/* Phases, ordered so no rank waits on one that waits on it: (1) connect to
 * every lower rank and say HELLO; (2) accept every higher rank, read its
 * HELLO, answer HELLO and AUTH; (3) on our outgoing connections read HELLO,
 * send AUTH, check AUTH; (4) check the AUTH of the incoming ones. */
netvm_status_t tcp_handshake_all(struct tcp_link *t, const struct nv_tcp_card *cards, const uint8_t *use)
{
    int me = t->base.rank, n = t->base.size;
    uint64_t deadline = nv_now_ns() + (uint64_t)t->p.timeout_ms * 1000000ull;
    const char *why = NULL;
    for (int r = 0; r < me; r++) {
        if (!use[r])
            continue;
        int fd = connect_to(&cards[r], t->p.timeout_ms, deadline);
        struct tcp_conn *c = fd >= 0 ? tcp_conn_new(t, fd, r) : NULL;
        if (!c) {
            nv_error("tcp link: cannot connect to rank %d: %s", r, fd < 0 ? strerror(errno) : "no memory");
            if (fd >= 0)
                close(fd);
            return NETVM_ERR_PEER;
        }
        c->outgoing = 1;
        t->conns[r] = c;
        if (send_hello(t, c, deadline)) {
            nv_error("tcp link: rank %d closed the connection", r);
            return NETVM_ERR_PEER;
        }
    }
    int expected = 0;
    for (int r = me + 1; r < n; r++)
        expected += use[r] != 0;
    while (expected > 0) {
        if (wait_fd(t->listen_fd, POLLIN, deadline)) {
            nv_error("tcp link: %d higher rank(s) did not connect within NETVM_TIMEOUT", expected);
            return NETVM_ERR_TIMEOUT;
        }
        int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            continue;
        tcp_tune_socket(fd, t->p.timeout_ms);
        struct nv_tcp_hdr h;
        uint8_t nonce[NV_TCP_NONCE_LEN];
        /* a stranger gets a short deadline, so it cannot stall the job */
        uint64_t dl = nv_now_ns() + 2000000000ull < deadline ? nv_now_ns() + 2000000000ull : deadline;
        if (recv_frame_blocking(fd, NV_TCP_HELLO, &h, nonce, sizeof nonce, dl, &why)) {
            nv_warn("tcp link: rejected a connection: %s", why);
            close(fd);
            continue;
        }
        int r = (int)h.operand;
        if (r <= me || r >= n || !use[r] || t->conns[r]) {
            nv_warn("tcp link: rejected a connection claiming rank %d", r);
            close(fd);
            continue;
        }
        struct tcp_conn *c = tcp_conn_new(t, fd, r);
        if (!c) {
            close(fd);
            return NETVM_ERR_NOMEM;
        }
        memcpy(c->peer_nonce, nonce, sizeof nonce);
        t->conns[r] = c;
        if (send_hello(t, c, deadline) || send_auth(t, c, deadline)) {
            nv_error("tcp link: rank %d closed the connection", r);
            return NETVM_ERR_PEER;
        }
        expected--;
    }
    for (int r = 0; r < me; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        struct nv_tcp_hdr h;
        if (recv_frame_blocking(c->fd, NV_TCP_HELLO, &h, c->peer_nonce, NV_TCP_NONCE_LEN, deadline, &why) ||
            (int)h.operand != r || send_auth(t, c, deadline) || check_auth(t, c, deadline, &why)) {
            nv_error("tcp link: rank %d: %s", r, why ? why : "wrong rank in HELLO");
            return NETVM_ERR_PEER;
        }
        atomic_store(&c->state, CONN_READY);
    }
    for (int r = me + 1; r < n; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        if (check_auth(t, c, deadline, &why)) {
            nv_error("tcp link: rank %d: %s", r, why);
            return NETVM_ERR_PEER;
        }
        atomic_store(&c->state, CONN_READY);
    }
    return NETVM_OK;
}
