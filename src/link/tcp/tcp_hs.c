/* Listeners and the handshake, run by the progress engine as bytes arrive:
 * nothing blocks, and a process that connects and never authenticates holds
 * a socket and a few hundred bytes until NETVM_HANDSHAKE_MS, never a peer.
 *
 *   C -> A  HELLO(C)
 *   A -> C  HELLO(A), AUTH(A) = HMAC(key, "netvm-tcp-v2|accept|"  || HELLO(C) || HELLO(A))
 *   C -> A  AUTH(C)           = HMAC(key, "netvm-tcp-v2|connect|" || HELLO(C) || HELLO(A)),
 *                               C's peer id for A, C's card
 *   A -> C  WELCOME(A's peer id for C, tcp or another link, A's card)
 *   C -> A  ATTACHED(status)  only when they move to another link
 *
 * Both HELLOs carry fresh nonces, so each proof is for this conversation
 * only; the role label keeps a proof from being reflected. The key is the
 * job secret between ranks of a job, the listener's credential otherwise.
 * A MAC that cannot be computed fails the handshake (never a zero MAC). */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/hmac.h"
#include "util/log.h"
#include "util/random.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The handshake's own receive buffer: frames are read exactly (header, then
 * payload), so nothing after the handshake is ever taken by it. */
struct hs_rx {
    uint8_t buf[NV_TCP_HDR_LEN + NV_TCP_HS_MAX];
    size_t  got;
};

struct hs_state {
    struct tcp_hs hs;
    struct hs_rx  rx;
};

static struct hs_rx *rx_of(struct tcp_conn *c) { return &((struct hs_state *)c->hs)->rx; }

/* --- the proofs ---------------------------------------------------------------- */

static int mac(const struct tcp_hs *hs, const char *role, uint8_t out[NV_HS_MAC_LEN])
{
    char label[32];
    size_t n = (size_t)snprintf(label, sizeof label, "netvm-tcp-v2|%s|", role);
    struct nv_hmac_part parts[3] = { { label, n }, { hs->hello_c, NV_HS_HELLO_LEN },
                                     { hs->hello_a, NV_HS_HELLO_LEN } };
    return nv_hmac_sha256(hs->key, hs->key_len, parts, 3, out);
}

/* 0 if the peer's proof for role is right; -1 otherwise, including when our
 * own MAC cannot be computed (fail closed). */
static int check_mac(const struct tcp_hs *hs, const char *role, const uint8_t got[NV_HS_MAC_LEN])
{
    uint8_t want[NV_HS_MAC_LEN];
    if (mac(hs, role, want) != 0) {
        nv_error("tcp link: HMAC failed; the handshake is refused");
        return -1;
    }
    int ok = nv_ct_equal(got, want, sizeof want);
    explicit_bzero(want, sizeof want);
    return ok ? 0 : -1;
}

/* --- sending (handshake frames are small: a fresh socket always has room) ---- */

static int send_frame(struct tcp_conn *c, uint8_t kind, uint16_t status, const void *pay, size_t len)
{
    uint8_t buf[NV_TCP_HDR_LEN + NV_TCP_HS_MAX];
    struct nv_tcp_hdr h = { .kind = kind, .status = status, .len = len };
    nv_tcp_hdr_encode(&h, buf);
    if (len)
        memcpy(buf + NV_TCP_HDR_LEN, pay, len);
    size_t n = NV_TCP_HDR_LEN + len;
    ssize_t w = send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    return w == (ssize_t)n ? 0 : -1;
}

static void make_hello(struct tcp_link *t, struct tcp_conn *c, uint8_t out[NV_HS_HELLO_LEN])
{
    struct nv_hs_hello h = { .proto = NV_HS_PROTO, .purpose = (uint32_t)c->hs->purpose, .uuid = t->p.uuid,
                             .job_hash = c->hs->purpose == NV_HS_JOB ? t->p.job_hash : 0,
                             .rank = c->hs->purpose == NV_HS_JOB ? t->p.rank : -1, .host_id = t->p.host_id };
    if (nv_random_bytes(h.nonce, sizeof h.nonce) != 0)
        memset(h.nonce, 0, sizeof h.nonce);   /* caught: a zero nonce is refused below */
    nv_hs_hello_encode(&h, out);
}

static int nonce_ok(const uint8_t *hello)
{
    static const uint8_t zero[NV_HS_NONCE_LEN];
    return memcmp(hello + 40, zero, NV_HS_NONCE_LEN) != 0;
}

/* --- ending -------------------------------------------------------------------------- */

static void hs_free(struct tcp_conn *c)
{
    if (!c->hs)
        return;
    struct hs_state *s = (struct hs_state *)c->hs;
    if (s->hs.via)
        s->hs.via->pending--;
    explicit_bzero(s, sizeof *s);
    free(s);
    c->hs = NULL;
    atomic_fetch_sub(&c->t->nhs, 1);
}

/* The handshake failed: say why to whoever waits (a connector) and close. */
static void hs_fail(struct tcp_conn *c, netvm_status_t st, const char *why)
{
    struct tcp_link *t = c->t;
    int outgoing = c->hs && c->hs->outgoing;
    void *cookie = c->hs ? c->hs->cookie : NULL;
    if (c->lp) {
        /* core made a peer for this handshake: it goes */
        struct nv_lpeer *lp = c->lp;
        c->lp = NULL;
        t->hs->aborted(t->base.up.arg, lp);
    }
    if (outgoing)
        nv_info("tcp link: connecting failed: %s", why);
    else
        nv_warn("tcp link: refused a connection: %s", why);
    atomic_store(&c->state, CONN_DEAD);
    hs_free(c);
    if (outgoing)
        t->hs->ready(t->base.up.arg, cookie, NULL, 0, st);
    /* freed by the caller, who owns it (tcp_hs_done) */
}

/* The peer is ours: the connection carries its traffic from now on. */
static void hs_ready(struct tcp_conn *c, struct nv_lpeer *lp)
{
    struct tcp_link *t = c->t;
    void *cookie = c->hs->cookie;
    if (tcp_conn_buffers(c) != 0) {
        hs_fail(c, NETVM_ERR_NOMEM, "out of memory");
        return;
    }
    hs_free(c);
    c->lp = lp;
    lp->conn = c;
    lp->link = &t->base;
    atomic_store(&c->state, CONN_READY);
    t->hs->ready(t->base.up.arg, cookie, lp, 0, NETVM_OK);
}

/* The peer moved to another link: this connection is done. */
static void hs_moved(struct tcp_conn *c, struct nv_lpeer *lp)
{
    struct tcp_link *t = c->t;
    void *cookie = c->hs->cookie;
    atomic_store(&c->state, CONN_DEAD);
    hs_free(c);
    t->hs->ready(t->base.up.arg, cookie, lp, 1, NETVM_OK);
}

/* After a handshake step by the connection's owner: a connection that
 * failed (or moved) before it became a peer's is freed; else let go. */
void tcp_hs_done(struct tcp_conn *c)
{
    if (atomic_load(&c->state) == CONN_DEAD && !c->lp)
        tcp_conn_free(c);
    else
        tcp_release(c);
}

/* --- the steps ------------------------------------------------------------------------ */

static void info_of(const struct tcp_hs *hs, struct nv_tcp_hs_info *in)
{
    memset(in, 0, sizeof *in);
    in->hello = hs->peer;
    in->cookie = hs->cookie;
}

/* acceptor: the connector's HELLO */
static void a_hello(struct tcp_conn *c, const uint8_t *pay, size_t len)
{
    struct tcp_hs *hs = c->hs;
    if (nv_hs_hello_decode(pay, len, &hs->peer) != 0 || !nonce_ok(pay))
        return hs_fail(c, NETVM_ERR_INVAL, "malformed HELLO");
    if ((int)hs->peer.purpose != hs->purpose)
        return hs_fail(c, NETVM_ERR_INVAL, "a HELLO for another purpose");
    memcpy(hs->hello_c, pay, NV_HS_HELLO_LEN);
    make_hello(c->t, c, hs->hello_a);
    uint8_t auth[NV_TCP_HS_MAX];
    struct nv_hs_auth a = { .card_len = 0 };
    if (mac(hs, "accept", a.mac) != 0)
        return hs_fail(c, NETVM_ERR_AUTH, "HMAC failed");
    size_t n = nv_hs_auth_encode(&a, auth);
    if (send_frame(c, NV_TCP_HELLO, 0, hs->hello_a, NV_HS_HELLO_LEN) != 0 ||
        send_frame(c, NV_TCP_AUTH, 0, auth, n) != 0)
        return hs_fail(c, NETVM_ERR_PEER, "could not answer HELLO");
    atomic_store(&c->state, CONN_HS_AUTH);
}

/* acceptor: the connector's proof */
static void a_auth(struct tcp_conn *c, const uint8_t *pay, size_t len)
{
    struct tcp_link *t = c->t;
    struct tcp_hs *hs = c->hs;
    struct nv_hs_auth a;
    if (nv_hs_auth_decode(pay, len, &a) != 0)
        return hs_fail(c, NETVM_ERR_INVAL, "malformed AUTH");
    if (check_mac(hs, "connect", a.mac) != 0)
        return hs_fail(c, NETVM_ERR_AUTH, hs->purpose == NV_HS_JOB ? "authentication failed (wrong job secret?)"
                                                                   : "authentication failed (wrong credential?)");
    struct nv_tcp_hs_info in;
    info_of(hs, &in);
    in.card = a.card;
    in.card_len = a.card_len;
    in.their_id = a.peer_id;
    in.cookie = hs->via ? hs->via->cookie : NULL;
    hs->cookie = in.cookie;
    struct nv_lpeer *lp = NULL;
    int upgrade = 0;
    uint8_t card[NV_HS_CARD_MAX];
    uint32_t card_len = 0;
    netvm_status_t st = t->hs->accepted(t->base.up.arg, &in, &lp, &upgrade, card, &card_len);
    if (st != NETVM_OK) {
        send_frame(c, NV_TCP_REFUSE, (uint16_t)st, NULL, 0);
        return hs_fail(c, st, st == NETVM_ERR_AGAIN ? "the listener is full" : "refused by this process");
    }
    /* lp->remote_id is accepted()'s to set (from in.their_id), before the
     * peer has a link anybody sends on: written again here, after, it
     * raced with a sender that already had it */
    struct nv_hs_welcome w = { .peer_id = (uint32_t)lp->id, .link = upgrade ? NV_HS_LINK_UPGRADE : NV_HS_LINK_TCP,
                               .card_len = upgrade ? card_len : 0 };
    memcpy(w.card, card, w.card_len);
    uint8_t buf[NV_TCP_HS_MAX];
    size_t n = nv_hs_welcome_encode(&w, buf);
    if (send_frame(c, NV_TCP_WELCOME, 0, buf, n) != 0) {
        t->hs->aborted(t->base.up.arg, lp);
        return hs_fail(c, NETVM_ERR_PEER, "could not send WELCOME");
    }
    if (upgrade) {
        c->lp = lp;   /* kept for ATTACHED */
        atomic_store(&c->state, CONN_HS_ATTACHED);
        return;
    }
    hs_ready(c, lp);
}

/* acceptor: did the connector move to the other link? */
static void a_attached(struct tcp_conn *c, uint16_t status)
{
    struct tcp_link *t = c->t;
    struct nv_lpeer *lp = c->lp;
    c->lp = NULL;
    netvm_status_t st = status < NETVM_STATUS_COUNT ? (netvm_status_t)status : NETVM_ERR_SYS;
    t->hs->attached(t->base.up.arg, lp, st);
    if (st == NETVM_OK)
        hs_moved(c, lp);
    else
        hs_ready(c, lp);
}

/* connector: the acceptor's HELLO and proof */
static void c_hello_auth(struct tcp_conn *c, uint8_t kind, const uint8_t *pay, size_t len)
{
    struct tcp_link *t = c->t;
    struct tcp_hs *hs = c->hs;
    if (kind == NV_TCP_HELLO) {
        if (hs->hello_a[0] || nv_hs_hello_decode(pay, len, &hs->peer) != 0 || !nonce_ok(pay))
            return hs_fail(c, NETVM_ERR_INVAL, "malformed HELLO");
        if ((int)hs->peer.purpose != hs->purpose ||
            (hs->purpose == NV_HS_JOB && (hs->peer.job_hash != t->p.job_hash || hs->peer.rank != hs->rank)))
            return hs_fail(c, NETVM_ERR_AUTH, "the process listening there is not the one expected");
        memcpy(hs->hello_a, pay, NV_HS_HELLO_LEN);
        return;
    }
    struct nv_hs_auth a;
    if (!hs->hello_a[0] || nv_hs_auth_decode(pay, len, &a) != 0)
        return hs_fail(c, NETVM_ERR_INVAL, "malformed AUTH");
    if (check_mac(hs, "accept", a.mac) != 0)
        return hs_fail(c, NETVM_ERR_AUTH, hs->purpose == NV_HS_JOB ? "authentication failed (wrong job secret?)"
                                                                   : "authentication failed (wrong credential?)");
    struct nv_tcp_hs_info in;
    info_of(hs, &in);
    struct nv_lpeer *lp = NULL;
    struct nv_hs_auth mine = { .card_len = 0 };
    netvm_status_t st = t->hs->authenticated(t->base.up.arg, &in, &lp, mine.card, &mine.card_len);
    if (st != NETVM_OK)
        return hs_fail(c, st, "refused by this process");
    c->lp = lp;   /* ours from now on: a failure below is the peer's failure */
    mine.peer_id = (uint32_t)lp->id;
    if (mac(hs, "connect", mine.mac) != 0) {
        c->lp = NULL;
        t->hs->aborted(t->base.up.arg, lp);
        return hs_fail(c, NETVM_ERR_AUTH, "HMAC failed");
    }
    uint8_t buf[NV_TCP_HS_MAX];
    size_t n = nv_hs_auth_encode(&mine, buf);
    if (send_frame(c, NV_TCP_AUTH, 0, buf, n) != 0) {
        c->lp = NULL;
        t->hs->aborted(t->base.up.arg, lp);
        return hs_fail(c, NETVM_ERR_PEER, "could not send AUTH");
    }
    atomic_store(&c->state, CONN_HS_WELCOME);
}

/* connector: the acceptor's peer id, and the link */
static void c_welcome(struct tcp_conn *c, const uint8_t *pay, size_t len)
{
    struct tcp_link *t = c->t;
    struct nv_lpeer *lp = c->lp;
    struct nv_hs_welcome w;
    if (nv_hs_welcome_decode(pay, len, &w) != 0) {
        c->lp = NULL;
        t->hs->aborted(t->base.up.arg, lp);
        return hs_fail(c, NETVM_ERR_INVAL, "malformed WELCOME");
    }
    lp->remote_id = w.peer_id;
    c->lp = NULL;
    if (w.link == NV_HS_LINK_UPGRADE) {
        struct nv_tcp_hs_info in;
        info_of(c->hs, &in);
        in.card = w.card;
        in.card_len = w.card_len;
        in.their_id = w.peer_id;
        netvm_status_t st = t->hs->welcomed(t->base.up.arg, &in, lp);
        if (send_frame(c, NV_TCP_ATTACHED, (uint16_t)st, NULL, 0) != 0 && st == NETVM_OK) {
            /* it cannot learn we moved: it will see the close and drop us */
            nv_warn("tcp link: could not confirm the move to peer %d", lp->id);
        }
        if (st == NETVM_OK)
            return hs_moved(c, lp);
    }
    hs_ready(c, lp);
}

/* A whole handshake frame arrived. */
static void hs_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const uint8_t *pay)
{
    int st = atomic_load(&c->state);
    int outgoing = c->hs->outgoing;
    if (h->kind == NV_TCP_REFUSE) {
        netvm_status_t why = (netvm_status_t)h->status;
        if (c->lp) {
            struct nv_lpeer *lp = c->lp;
            c->lp = NULL;
            c->t->hs->aborted(c->t->base.up.arg, lp);
        }
        return hs_fail(c, why == NETVM_OK ? NETVM_ERR_PEER : why,
                       why == NETVM_ERR_AGAIN ? "the listener is full" : netvm_strerror(why));
    }
    if (!outgoing && st == CONN_HS_HELLO && h->kind == NV_TCP_HELLO)
        return a_hello(c, pay, (size_t)h->len);
    if (!outgoing && st == CONN_HS_AUTH && h->kind == NV_TCP_AUTH)
        return a_auth(c, pay, (size_t)h->len);
    if (!outgoing && st == CONN_HS_ATTACHED && h->kind == NV_TCP_ATTACHED)
        return a_attached(c, h->status);
    if (outgoing && st == CONN_HS_HELLO && (h->kind == NV_TCP_HELLO || h->kind == NV_TCP_AUTH))
        return c_hello_auth(c, h->kind, pay, (size_t)h->len);
    if (outgoing && st == CONN_HS_WELCOME && h->kind == NV_TCP_WELCOME)
        return c_welcome(c, pay, (size_t)h->len);
    if (c->lp) {
        struct nv_lpeer *lp = c->lp;
        c->lp = NULL;
        c->t->hs->aborted(c->t->base.up.arg, lp);
    }
    hs_fail(c, NETVM_ERR_INVAL, "unexpected frame during the handshake");
}

void tcp_hs_input(struct tcp_conn *c)
{
    while (c->hs && atomic_load(&c->state) != CONN_DEAD && atomic_load(&c->state) != CONN_CONNECTING) {
        struct hs_rx *rx = rx_of(c);
        size_t want = NV_TCP_HDR_LEN;
        struct nv_tcp_hdr h;
        if (rx->got >= NV_TCP_HDR_LEN) {
            const char *why = NULL;
            if (nv_tcp_hdr_decode(rx->buf, NV_TCP_HDR_LEN, &h, &why) != 0)
                return hs_fail(c, NETVM_ERR_INVAL, why);
            if (h.len > NV_TCP_HS_MAX)
                return hs_fail(c, NETVM_ERR_INVAL, "handshake frame too long");
            want += (size_t)h.len;
        }
        if (rx->got == want) {
            rx->got = 0;
            hs_frame(c, &h, rx->buf + NV_TCP_HDR_LEN);
            continue;
        }
        ssize_t r = recv(c->fd, rx->buf + rx->got, want - rx->got, MSG_DONTWAIT);
        if (r == 0)
            return hs_fail(c, NETVM_ERR_PEER, "closed during the handshake");
        if (r < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            return hs_fail(c, NETVM_ERR_PEER, strerror(errno));
        }
        rx->got += (size_t)r;
    }
}

/* connector: connect(2) finished */
void tcp_hs_writable(struct tcp_conn *c)
{
    if (atomic_load(&c->state) != CONN_CONNECTING)
        return;
    int err = 0;
    socklen_t el = sizeof err;
    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
    if (err) {
        char why[96];
        snprintf(why, sizeof why, "%s", strerror(err));
        return hs_fail(c, err == ECONNREFUSED ? NETVM_ERR_PEER : NETVM_ERR_PEER, why);
    }
    tcp_conn_interest(c, EPOLLIN);
    make_hello(c->t, c, c->hs->hello_c);
    atomic_store(&c->state, CONN_HS_HELLO);
    if (send_frame(c, NV_TCP_HELLO, 0, c->hs->hello_c, NV_HS_HELLO_LEN) != 0)
        return hs_fail(c, NETVM_ERR_PEER, "could not send HELLO");
}

/* --- making connections ------------------------------------------------------------------ */

/* A connection in its handshake; the caller finishes setting it up, then
 * tcp_conn_publish makes it visible (to epoll and the deadline scan). */
static struct tcp_conn *hs_conn(struct tcp_link *t, int fd, int outgoing, int purpose, const void *key,
                                size_t key_len)
{
    struct hs_state *s = calloc(1, sizeof *s);
    struct tcp_conn *c = s ? tcp_conn_new(t, fd) : NULL;
    if (!c) {
        free(s);
        close(fd);
        return NULL;
    }
    c->hs = &s->hs;
    s->hs.outgoing = outgoing;
    s->hs.purpose = purpose;
    if (key_len)
        memcpy(s->hs.key, key, key_len);
    s->hs.key_len = key_len;
    c->deadline = nv_now_ns() + (uint64_t)t->p.handshake_ms * 1000000ull;
    atomic_fetch_add(&t->nhs, 1);
    return c;
}

netvm_status_t tcp_dial(struct tcp_link *t, uint32_t ipv4, uint16_t port, int purpose, int rank,
                        const void *key, size_t key_len, void *cookie)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return errno == EMFILE || errno == ENFILE ? NETVM_ERR_NOMEM : NETVM_ERR_SYS;
    tcp_tune_socket(fd, t->p.timeout_ms);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = ipv4 };
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (r != 0 && errno != EINPROGRESS) {
        int e = errno;
        close(fd);
        nv_info("tcp link: cannot connect: %s", strerror(e));
        return NETVM_ERR_PEER;
    }
    struct tcp_conn *c = hs_conn(t, fd, 1, purpose, key, key_len);
    if (!c)
        return NETVM_ERR_NOMEM;
    c->hs->rank = rank;
    c->hs->cookie = cookie;
    /* connect(2) finishes later: EPOLLOUT says so (and the progress
     * engine, not this caller, goes on with the handshake) */
    atomic_store(&c->state, CONN_CONNECTING);
    if (tcp_conn_publish(c, EPOLLOUT) != 0) {
        hs_free(c);
        tcp_conn_free(c);
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

void tcp_accept(struct tcp_link *t, struct tcp_listener_s *l)
{
    if (__atomic_load_n(&l->closed, __ATOMIC_RELAXED))
        return;   /* an event taken before it was closed */
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        if (l->pending >= t->p.handshake_max) {
            /* a crowd that does not authenticate holds no more than this */
            nv_warn("tcp link: %d connections are authenticating on one listener; refused another",
                    l->pending);
            close(fd);
            continue;
        }
        tcp_tune_socket(fd, t->p.timeout_ms);
        struct tcp_conn *c = hs_conn(t, fd, 0, l->purpose, l->key, l->key_len);
        if (!c)
            continue;
        c->hs->via = l;
        l->pending++;
        atomic_store(&c->state, CONN_HS_HELLO);
        if (tcp_conn_publish(c, EPOLLIN) != 0) {
            hs_free(c);
            tcp_conn_free(c);
        }
    }
}

uint64_t tcp_hs_expire(struct tcp_link *t, uint64_t now)
{
    tcp_listeners_reap(t);   /* the pass holder's: no event of theirs is in hand */
    if (!atomic_load(&t->nhs))
        return UINT64_MAX;
    uint64_t next = UINT64_MAX;
    for (;;) {
        struct tcp_conn *late = NULL;
        pthread_mutex_lock(&t->conns_lock);
        for (struct tcp_conn *c = t->conns; c; c = c->next) {
            if (!c->hs || atomic_load(&c->state) == CONN_DEAD || atomic_load(&c->lock))
                continue;
            if (c->deadline <= now) {
                late = c;
                break;
            }
            if (c->deadline < next)
                next = c->deadline;
        }
        pthread_mutex_unlock(&t->conns_lock);
        if (!late)
            return next;
        if (tcp_own(late) != 0)
            continue;
        if (late->lp) {
            struct nv_lpeer *lp = late->lp;
            late->lp = NULL;
            t->hs->aborted(t->base.up.arg, lp);
        }
        hs_fail(late, NETVM_ERR_TIMEOUT, "no authentication within NETVM_HANDSHAKE_MS");
        tcp_hs_done(late);
    }
}

/* --- listeners --------------------------------------------------------------------------------- */

netvm_status_t tcp_listener_open(struct tcp_link *t, uint32_t ipv4, uint16_t port, int purpose,
                                 const void *key, size_t key_len, void *cookie, struct tcp_listener_s **out)
{
    struct tcp_listener_s *l = calloc(1, sizeof *l);
    if (!l)
        return NETVM_ERR_NOMEM;
    l->ev.link = &t->base;
    l->is_listener = 1;
    l->purpose = purpose;
    l->cookie = cookie;
    memcpy(l->key, key, key_len);
    l->key_len = key_len;
    l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (l->fd >= 0)
        setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = port, .sin_addr.s_addr = ipv4 };
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &l->ev };
    if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&a, sizeof a) || listen(l->fd, 128) ||
        epoll_ctl(t->base.pfd, EPOLL_CTL_ADD, l->fd, &ev)) {
        int e = errno;
        char shown[INET_ADDRSTRLEN] = "?";
        inet_ntop(AF_INET, &a.sin_addr, shown, sizeof shown);
        nv_error("tcp link: cannot listen on %s:%u: %s", shown, (unsigned)ntohs(port), strerror(e));
        if (l->fd >= 0)
            close(l->fd);
        explicit_bzero(l, sizeof *l);
        free(l);
        return e == EADDRINUSE ? NETVM_ERR_EXISTS : e == EADDRNOTAVAIL ? NETVM_ERR_INVAL : NETVM_ERR_SYS;
    }
    pthread_mutex_lock(&t->conns_lock);
    l->next = t->listeners;
    t->listeners = l;
    pthread_mutex_unlock(&t->conns_lock);
    *out = l;
    return NETVM_OK;
}

/* Closing runs in the caller's thread while the pass may hold an event of
 * this listener (taken from epoll before it left the set) or run a
 * handshake through it: the struct and its socket stay until the pass's
 * timer reaps them. The socket stops listening at once (new connections
 * are refused) and leaves the epoll set. */
void tcp_listener_close(struct tcp_link *t, struct tcp_listener_s *l)
{
    epoll_ctl(t->base.pfd, EPOLL_CTL_DEL, l->fd, NULL);
    shutdown(l->fd, SHUT_RDWR);   /* a listening socket stops listening: connecting is refused */
    pthread_mutex_lock(&t->conns_lock);
    for (struct tcp_listener_s **pp = &t->listeners; *pp; pp = &(*pp)->next)
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    __atomic_store_n(&l->closed, 1, __ATOMIC_RELAXED);
    l->closed_next = t->closed;
    __atomic_store_n(&t->closed, l, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&t->conns_lock);
}

void tcp_listeners_reap(struct tcp_link *t)
{
    if (!__atomic_load_n(&t->closed, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&t->conns_lock);
    struct tcp_listener_s *l = t->closed;
    t->closed = NULL;
    /* handshakes under way through them go on without them */
    for (struct tcp_conn *c = t->conns; c; c = c->next)
        for (struct tcp_listener_s *d = l; d; d = d->closed_next)
            if (c->hs && c->hs->via == d)
                c->hs->via = NULL;
    pthread_mutex_unlock(&t->conns_lock);
    while (l) {
        struct tcp_listener_s *next = l->closed_next;
        close(l->fd);
        explicit_bzero(l, sizeof *l);
        free(l);
        l = next;
    }
}
