/* The tcp link's operations: the initiator's put, get, flush and active
 * messages; progress; revocation; listeners and connecting; life cycle. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct tcp_conn *ready_conn(struct nv_lpeer *lp)
{
    struct tcp_conn *c = conn_of(lp);
    return c && atomic_load(&c->state) == CONN_READY ? c : NULL;
}

/* --- sending, as the owner or by mail ------------------------------------------- */

/* Own c for sending: 0, or -1 (someone else owns it and this thread must
 * not wait: mail instead). */
static int own_for_send(struct tcp_conn *c, int may_wait)
{
    if (tcp_own(c) == 0)
        return 0;
    if (!may_wait)
        return -1;
    tcp_own_wait(c);
    return 0;
}

/* After queueing as the owner: send now if asked, then let go. A thread
 * inside a receive pass of c (a handler) sends at the pass's end. */
static netvm_status_t done_sending(struct tcp_conn *c, int now)
{
    netvm_status_t st = NETVM_OK;
    if (tcp_owned_here(c))
        return st;
    if (now && tcp_tx_push(c) != 0)
        st = NETVM_ERR_PEER;
    tcp_release(c);
    return st;
}

/* The pending operation an answer will complete. */
static netvm_status_t pending_put(struct tcp_link *t, uint32_t id, uint8_t kind, struct tcp_conn *c, void *token,
                                  void *dst, uint64_t len)
{
    uint32_t i = id & 0xffff;
    if (i >= t->p.max_requests || !token)
        return NETVM_ERR_INVAL;
    struct tcp_pending *p = &t->pending[i];
    p->kind = kind;
    p->c = c;
    p->token = token;
    p->dst = dst;
    p->len = len;
    atomic_store_explicit(&p->id, id | 0x80000000u, memory_order_release);
    return NETVM_OK;
}

static void pending_drop(struct tcp_link *t, uint32_t id)
{
    atomic_store(&t->pending[id & 0xffff].id, 0);
}

/* A request (its answer completes token): queued and sent now. */
static netvm_status_t request(struct tcp_link *t, struct nv_lpeer *lp, struct nv_tcp_hdr *h, uint8_t answer,
                              void *token, uint32_t id, void *dst, uint64_t dlen, const void *pay, size_t plen)
{
    struct tcp_conn *c = ready_conn(lp);
    if (!c)
        return NETVM_ERR_PEER;
    h->req_id = id;
    netvm_status_t st = pending_put(t, id, answer, c, token, dst, dlen);
    if (st != NETVM_OK)
        return st;
    int may_wait = !nv_in_handler;
    if (own_for_send(c, may_wait) != 0) {
        st = tcp_mail(c, h, NULL, 0, pay, plen, NULL);
        if (st != NETVM_OK)
            pending_drop(t, id);
        return st == NETVM_OK ? NV_LINK_PENDING : st;
    }
    int rc = tcp_tx_frame(c, h, NULL, 0, pay, plen, 1);
    st = done_sending(c, 1);
    if (rc != 0) {
        pending_drop(t, id);
        return rc == -2 ? NETVM_ERR_FAULT : NETVM_ERR_NOMEM;
    }
    return st == NETVM_OK ? NV_LINK_PENDING : st;
}

/* --- exporter side ---------------------------------------------------------------- */

static netvm_status_t tcp_seg_publish(struct nv_link *l, const struct nv_seg_desc *d)
{
    return d->slot < tcp_of(l)->p.max_segments ? NETVM_OK : NETVM_ERR_NOMEM;
}

/* The target checks every access against the ATU: nothing of its own to mark. */
static void tcp_seg_revoke(struct nv_link *l, uint32_t slot) { (void)l; (void)slot; }

/* The ATU already refuses new accesses; wait for those in flight: frames
 * being received into memory, and answers queued to be sent from it. */
static void tcp_seg_fence(struct nv_link *l, uint32_t slot)
{
    struct tcp_link *t = tcp_of(l);
    for (;;) {
        struct tcp_conn *busy = NULL;
        uint64_t seq = 0;
        pthread_mutex_lock(&t->conns_lock);
        for (struct tcp_conn *c = t->conns; c && !busy; c = c->next) {
            seq = atomic_load(&c->serve_seq);
            if ((seq & 1) && atomic_load(&c->state) != CONN_DEAD)
                busy = c;
        }
        pthread_mutex_unlock(&t->conns_lock);
        if (!busy)
            break;
        /* a frame is landing: its owner finishes it (or we do) */
        for (unsigned spins = 0; atomic_load(&busy->serve_seq) == seq && atomic_load(&busy->state) != CONN_DEAD;
             spins++) {
            if (tcp_own(busy) == 0) {
                tcp_rx(busy);
                tcp_release(busy);
            }
            if (spins > 1000)
                sched_yield();
        }
    }
    while (slot < t->p.max_segments && atomic_load(&t->slot_refs[slot])) {
        pthread_mutex_lock(&t->conns_lock);
        for (struct tcp_conn *c = t->conns; c; c = c->next)
            if (tcp_own(c) == 0) {
                if (c->tx.n)
                    tcp_tx_push(c);
                tcp_release(c);
            }
        pthread_mutex_unlock(&t->conns_lock);
        if (atomic_load(&t->slot_refs[slot]))
            sched_yield();
    }
}

/* --- initiator side ------------------------------------------------------------------- */

/* A notification the target's side posts: flag and tag in the frame. */
static void set_note(struct nv_tcp_hdr *h, const struct nv_note *note, unsigned kind)
{
    if (note && (note->flags & kind)) {
        h->flags |= NV_TCP_F_NOTIFY;
        h->operand = note->tag;
    }
}

static netvm_status_t tcp_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src,
                              size_t len, int remote, void *token, uint32_t id, const struct nv_note *note)
{
    struct tcp_link *t = tcp_of(l);
    struct nv_tcp_hdr h = { .kind = NV_TCP_PUT, .slot = d->slot, .key = d->key, .off = off, .len = len };
    set_note(&h, note, NV_NOTE_COMPLETER);
    if (len > NV_TCP_MAX_XFER)
        return NETVM_ERR_INVAL;   /* core splits larger transfers */
    if (remote) {
        h.flags |= NV_TCP_F_ACK;
        h.req_id = id;
    } else if (note && (note->flags & NV_NOTE_QUIET)) {
        h.flags |= NV_TCP_F_QUIET;
    }
    if (note && note->gate) {
        if (h.flags & NV_TCP_F_NOTIFY)
            return NETVM_ERR_INVAL;   /* one operand: core never asks for both */
        h.flags |= NV_TCP_F_GATE;
        h.operand = note->gate;
    }
    struct tcp_conn *c = ready_conn(d->peer);
    if (!c)
        return NETVM_ERR_PEER;
    int may_wait = !nv_in_handler;
    if (remote && pending_put(t, id, NV_TCP_PUT_ACK, c, token, NULL, 0) != NETVM_OK)
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    if (len <= TCP_DIRECT_MIN) {
        /* small: copied; a put nobody waits for (and that asks the target
         * for nothing) rides with the next frame */
        int now = remote || (h.flags & NV_TCP_F_NOTIFY);
        if (own_for_send(c, may_wait) != 0) {
            st = tcp_mail(c, &h, NULL, 0, src, len, NULL);
        } else {
            int rc = tcp_tx_frame(c, &h, NULL, 0, src, len, now);
            st = done_sending(c, now);
            if (rc != 0)
                st = rc == -2 ? NETVM_ERR_FAULT : NETVM_ERR_NOMEM;
        }
    } else {
        /* large: sent from the caller's buffer; returns once it is out (local
         * completion), the acknowledgement then says it landed */
        struct tcp_seg how = { .slot_ref = -1, .has_trailer = 1 };
        nv_tcp_trailer_encode(NETVM_OK, how.trailer);
        h.flags |= NV_TCP_F_TRAILER;
        if (own_for_send(c, may_wait) != 0) {
            st = NETVM_ERR_AGAIN;   /* a handler cannot wait for a large put to leave */
        } else if (tcp_tx_frame_ext(c, &h, NULL, 0, src, len, &how) != 0) {
            st = NETVM_ERR_NOMEM;
            tcp_release(c);
        } else if (tcp_owned_here(c)) {
            st = NETVM_ERR_AGAIN;   /* cannot drain from inside its own receive path */
        } else {
            st = tcp_tx_drain(c);
            tcp_release(c);
        }
    }
    if (st != NETVM_OK) {
        if (remote)
            pending_drop(t, id);
        return st;
    }
    return remote ? NV_LINK_PENDING : NETVM_OK;
}

static netvm_status_t tcp_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst,
                              size_t len, void *token, uint32_t id, const struct nv_note *note)
{
    struct nv_tcp_hdr h = { .kind = NV_TCP_GET, .slot = d->slot, .key = d->key, .off = off, .len = len };
    set_note(&h, note, NV_NOTE_RESPONDER);
    if (len > NV_TCP_MAX_XFER)
        return NETVM_ERR_INVAL;
    return request(tcp_of(l), d->peer, &h, NV_TCP_GET_RESP, token, id, dst, len, NULL, 0);
}

static netvm_status_t tcp_flush(struct nv_link *l, struct nv_lpeer *lp, void *token, uint32_t id)
{
    struct nv_tcp_hdr h = { .kind = NV_TCP_FLUSH };
    return request(tcp_of(l), lp, &h, NV_TCP_FLUSH_ACK, token, id, NULL, 0, NULL, 0);
}

static netvm_status_t tcp_am_send(struct nv_link *l, struct nv_lpeer *lp, const uint8_t *hdr, size_t hlen,
                                  const void *payload, size_t plen, unsigned flags, void *token, uint32_t id)
{
    struct tcp_conn *c = ready_conn(lp);
    if (!c)
        return NETVM_ERR_PEER;
    struct nv_tcp_hdr h = { .kind = NV_TCP_AM, .len = hlen + plen };
    int may_wait = !(flags & NV_AMS_REPLY) && !nv_in_handler;
    int large = plen > l->ops->caps.am_eager;
    if (!large || (flags & NV_AMS_COPY)) {
        if (own_for_send(c, may_wait) != 0)
            return tcp_mail(c, &h, hdr, hlen, payload, plen, NULL);
        /* a lazy message waits in the arena for the next flush: a stream
         * of them leaves with one sendmsg, not one each */
        int now = large || !(flags & NV_AMS_LAZY);
        int rc = tcp_tx_frame(c, &h, hdr, hlen, payload, plen, now);
        netvm_status_t st = done_sending(c, now);
        if (rc != 0)
            return rc == -2 ? NETVM_ERR_FAULT : NETVM_ERR_NOMEM;
        return st;
    }
    /* large: sent from the caller's buffer; token completes once it is out */
    if (!token)
        return NETVM_ERR_INVAL;
    struct tcp_seg how = { .slot_ref = -1, .has_trailer = 1, .token = token, .id = id };
    nv_tcp_trailer_encode(NETVM_OK, how.trailer);
    h.flags = NV_TCP_F_TRAILER;
    if (own_for_send(c, may_wait) != 0) {
        netvm_status_t st = tcp_mail(c, &h, hdr, hlen, payload, plen, &how);
        return st == NETVM_OK ? NV_LINK_PENDING : st;
    }
    int rc = tcp_tx_frame_ext(c, &h, hdr, hlen, payload, plen, &how);
    netvm_status_t st = done_sending(c, 1);
    if (rc != 0)
        return NETVM_ERR_NOMEM;
    return st == NETVM_OK ? NV_LINK_PENDING : st;
}

/* --- progress ------------------------------------------------------------------------- */

static int tcp_poll(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)l;
    (void)lp;
    return 0;   /* everything arrives through the epoll set */
}

/* Take in what an owned, ready connection holds, send what that made,
 * and let it go; returns the frames taken in. */
static int serve_owned(struct tcp_conn *c)
{
    int n = tcp_rx(c);
    /* answers leave now; acknowledgements alone wait for the application
     * thread's next frame, if it is one that will call again soon */
    if (c->tx.n && (c->tx.urgent || c->tx.want_out || !nv_hold_acks))
        tcp_tx_push(c);
    tcp_release(c);
    return n;
}

static void serve_conn(struct tcp_conn *c, unsigned events)
{
    if (tcp_own(c) != 0)
        return;   /* its owner takes it in; P reports it again if not */
    int st = atomic_load(&c->state);
    if (st == CONN_CONNECTING) {
        if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
            tcp_hs_writable(c);
        tcp_hs_done(c);
        return;
    }
    if (st != CONN_READY && st != CONN_DEAD) {
        tcp_hs_input(c);
        tcp_hs_done(c);
        return;
    }
    serve_owned(c);
}

/* At most this many connections are read directly by a spinning thread:
 * beyond, one epoll_wait a look costs less than a read each. */
#define TCP_DIRECT_MAX 4

static int tcp_poll_direct(struct nv_link *l)
{
    struct tcp_link *t = tcp_of(l);
    if (atomic_load_explicit(&t->nconns, memory_order_relaxed) > TCP_DIRECT_MAX)
        return -1;
    /* a ready connection is freed only by the peer's reap, which runs in
     * a pass: not while this pass runs, so the pointers stay good */
    struct tcp_conn *cs[TCP_DIRECT_MAX];
    int k = 0;
    pthread_mutex_lock(&t->conns_lock);
    for (struct tcp_conn *c = t->conns; c; c = c->next) {
        if (atomic_load(&c->state) != CONN_READY)
            continue;
        if (k == TCP_DIRECT_MAX) {
            pthread_mutex_unlock(&t->conns_lock);
            return -1;
        }
        cs[k++] = c;
    }
    pthread_mutex_unlock(&t->conns_lock);
    int n = 0;
    for (int i = 0; i < k; i++)
        if (tcp_own(cs[i]) == 0)   /* else its owner takes it in */
            n += serve_owned(cs[i]);
    return n;
}

static void tcp_epoll_event(struct nv_link *l, void *token, unsigned events)
{
    struct tcp_link *t = tcp_of(l);
    /* the listener or connection itself says which it is: the list of
     * listeners changes under other threads (and a closed one's event may
     * still be in hand) */
    if (((struct tcp_listener_s *)token)->is_listener) {
        tcp_accept(t, token);
        return;
    }
    serve_conn((struct tcp_conn *)token, events);
}

static void tcp_flush_tx(struct nv_link *l, int all)
{
    struct tcp_link *t = tcp_of(l);
    (void)all;
    if (!atomic_load_explicit(&t->nlazy, memory_order_relaxed))
        return;
    pthread_mutex_lock(&t->conns_lock);
    for (struct tcp_conn *c = t->conns; c; c = c->next)
        if (atomic_load(&c->state) == CONN_READY && tcp_own(c) == 0) {
            if (c->tx.n)
                tcp_tx_push(c);
            tcp_release(c);
        }
    pthread_mutex_unlock(&t->conns_lock);
}

static uint64_t tcp_timer(struct nv_link *l, uint64_t now)
{
    return tcp_hs_expire(tcp_of(l), now);
}

static int tcp_active(struct nv_link *l)
{
    return atomic_load_explicit(&tcp_of(l)->nconns, memory_order_relaxed) != 0;
}

static void noop(struct nv_link *l) { (void)l; }
static int zero(struct nv_link *l) { (void)l; return 0; }

/* --- peers ------------------------------------------------------------------------------ */

static int tcp_peer_dead(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)l;
    struct tcp_conn *c = conn_of(lp);
    return !c || atomic_load(&c->state) == CONN_DEAD;
}

static void tcp_peer_close(struct nv_link *l, struct nv_lpeer *lp, int graceful)
{
    (void)l;
    struct tcp_conn *c = conn_of(lp);
    if (!c)
        return;
    tcp_own_wait(c);
    if (graceful && atomic_load(&c->state) == CONN_READY) {
        struct nv_tcp_hdr h = { .kind = NV_TCP_BYE };
        if (tcp_tx_frame(c, &h, NULL, 0, NULL, 0, 1) == 0)
            tcp_tx_drain(c);
    }
    if (atomic_exchange(&c->state, CONN_DEAD) != CONN_DEAD) {
        shutdown(c->fd, graceful ? SHUT_WR : SHUT_RDWR);
        tcp_conn_interest(c, 0);
    }
    tcp_release(c);
}

static void tcp_peer_free(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)l;
    struct tcp_conn *c = conn_of(lp);
    if (!c)
        return;
    atomic_store(&c->state, CONN_DEAD);
    lp->conn = NULL;
    tcp_conn_free(c);
}

static void tcp_destroy(struct nv_link *l)
{
    struct tcp_link *t = tcp_of(l);
    while (t->listeners)
        tcp_listener_close(t, t->listeners);
    tcp_listeners_reap(t);
    while (t->conns) {
        struct tcp_conn *c = t->conns;
        if (c->lp)
            c->lp->conn = NULL;
        atomic_store(&c->state, CONN_DEAD);
        tcp_conn_free(c);
    }
    free(t->pending);
    free(t->slot_refs);
    pthread_mutex_destroy(&t->conns_lock);
    pthread_mutex_destroy(&t->watch_lock);
    explicit_bzero(t->secret, sizeof t->secret);
    free(t);
}

static int tcp_gate_failed_op(struct nv_link *l, struct nv_lpeer *lp, uint32_t gate, netvm_status_t *st)
{
    (void)l;
    struct tcp_conn *c = conn_of(lp);
    return c && tcp_gate_failed(c, gate, st);
}

static struct nv_link_ops tcp_ops = {
    .name = "tcp",
    .caps = { .flags = NV_LCAP_ORDERED, .max_xfer = NV_TCP_MAX_XFER, .am_eager = TCP_STAGE_CAP - 1024 },
    .seg_publish = tcp_seg_publish,
    .seg_revoke = tcp_seg_revoke,
    .seg_fence = tcp_seg_fence,
    .peer_close = tcp_peer_close,
    .peer_free = tcp_peer_free,
    .peer_dead = tcp_peer_dead,
    .put = tcp_put,
    .get = tcp_get,
    .am_send = tcp_am_send,
    .flush = tcp_flush,
    .gate_failed = tcp_gate_failed_op,
    .poll = tcp_poll,
    .poll_direct = tcp_poll_direct,
    .watch = tcp_watch,
    .epoll_event = tcp_epoll_event,
    .poll_enter = noop,
    .poll_leave = noop,
    .sleep_prepare = zero,
    .sleep_done = noop,
    .flush_tx = tcp_flush_tx,
    .timer = tcp_timer,
    .active = tcp_active,
    .destroy = tcp_destroy,
};

const struct nv_link_ops *nv_tcp_link_ops(void) { return &tcp_ops; }

/* --- opening, listening, connecting ---------------------------------------------------------- */

int nv_tcp_parse_addr(const char *addr, uint32_t *ipv4, uint16_t *port)
{
    if (!addr || strncmp(addr, "tcp:", 4) != 0)
        return -1;
    const char *host = addr + 4, *colon = strrchr(host, ':');
    if (!colon || colon == host || (size_t)(colon - host) >= INET_ADDRSTRLEN)
        return -1;
    char h[INET_ADDRSTRLEN];
    memcpy(h, host, (size_t)(colon - host));
    h[colon - host] = 0;
    struct in_addr a;
    if (inet_pton(AF_INET, h, &a) != 1)
        return -1;
    char *end;
    errno = 0;
    long p = strtol(colon + 1, &end, 10);
    if (errno || *end || end == colon + 1 || p < 0 || p > 65535)
        return -1;
    *ipv4 = a.s_addr;
    *port = htons((uint16_t)p);
    return 0;
}

static void describe(int fd, char *out, size_t cap)
{
    struct sockaddr_in a;
    socklen_t al = sizeof a;
    char shown[INET_ADDRSTRLEN] = "?";
    if (getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        inet_ntop(AF_INET, &a.sin_addr, shown, sizeof shown);
    snprintf(out, cap, "tcp:%s:%u", shown, (unsigned)ntohs(a.sin_port));
}

netvm_status_t nv_tcp_link_open(struct nv_link **out, int pfd, const struct nv_tcp_params *p,
                                const struct nv_link_upcalls *up, struct nv_tcp_card *card)
{
    struct tcp_link *t = calloc(1, sizeof *t);
    if (!t)
        return NETVM_ERR_NOMEM;
    t->base.ops = &tcp_ops;
    t->base.up = *up;
    t->base.pfd = pfd;
    t->hs = up->hs;
    t->p = *p;
    pthread_mutex_init(&t->conns_lock, NULL);
    pthread_mutex_init(&t->watch_lock, NULL);
    if (p->secret_len > sizeof t->secret) {
        tcp_destroy(&t->base);
        return NETVM_ERR_INVAL;
    }
    if (p->secret_len)
        memcpy(t->secret, p->secret, p->secret_len);
    t->p.secret = t->secret;
    t->pending = calloc(p->max_requests, sizeof *t->pending);
    t->slot_refs = calloc(p->max_segments, sizeof *t->slot_refs);
    if (!t->pending || !t->slot_refs) {
        tcp_destroy(&t->base);
        return NETVM_ERR_NOMEM;
    }
    memset(card, 0, sizeof *card);
    card->version = NV_TCP_VERSION;
    if (p->job_listen) {
        if (!p->secret_len) {
            nv_error("tcp link: no job secret (the launcher sets NETVM_SECRET)");
            tcp_destroy(&t->base);
            return NETVM_ERR_INVAL;
        }
        struct in_addr a;
        if (inet_pton(AF_INET, p->bind_addr, &a) != 1) {
            nv_error("tcp link: NETVM_TCP_ADDR=%s is not an IPv4 address", p->bind_addr);
            tcp_destroy(&t->base);
            return NETVM_ERR_INVAL;
        }
        netvm_status_t st = tcp_listener_open(t, a.s_addr, 0, NV_HS_JOB, t->secret, p->secret_len, NULL, &t->job);
        if (st != NETVM_OK) {
            tcp_destroy(&t->base);
            return st;
        }
        struct sockaddr_in b;
        socklen_t bl = sizeof b;
        getsockname(t->job->fd, (struct sockaddr *)&b, &bl);
        card->ipv4 = b.sin_addr.s_addr;
        card->port = b.sin_port;
        char shown[64];
        describe(t->job->fd, shown, sizeof shown);
        nv_info("tcp link: the job's ranks connect to %s", shown);
    }
    tcp_ops.caps.am_eager = TCP_STAGE_CAP - 1024;
    *out = &t->base;
    return NETVM_OK;
}

netvm_status_t nv_tcp_connect_job(struct nv_link *l, const struct nv_tcp_card *card, int rank, void *cookie)
{
    struct tcp_link *t = tcp_of(l);
    if (card->version != NV_TCP_VERSION) {
        nv_error("tcp link: rank %d runs another tcp protocol version", rank);
        return NETVM_ERR_UNSUPPORTED;
    }
    return tcp_dial(t, card->ipv4, card->port, NV_HS_JOB, rank, t->secret, t->p.secret_len, cookie);
}

netvm_status_t nv_tcp_listen(struct nv_link *l, const char *addr, const void *cred, size_t cred_len,
                             void *cookie, struct nv_tcp_listener **out, char *bound, size_t boundcap)
{
    struct tcp_link *t = tcp_of(l);
    uint32_t ip;
    uint16_t port;
    if (nv_tcp_parse_addr(addr, &ip, &port) != 0 || cred_len > sizeof t->secret)
        return NETVM_ERR_INVAL;
    struct tcp_listener_s *ls;
    netvm_status_t st = tcp_listener_open(t, ip, port, NV_HS_SERVICE, cred, cred_len, cookie, &ls);
    if (st != NETVM_OK)
        return st;
    describe(ls->fd, bound, boundcap);
    *out = (struct nv_tcp_listener *)ls;
    return NETVM_OK;
}

void nv_tcp_listener_close(struct nv_link *l, struct nv_tcp_listener *ls)
{
    tcp_listener_close(tcp_of(l), (struct tcp_listener_s *)ls);
}

netvm_status_t nv_tcp_connect(struct nv_link *l, const char *addr, const void *cred, size_t cred_len, void *cookie)
{
    struct tcp_link *t = tcp_of(l);
    uint32_t ip;
    uint16_t port;
    if (nv_tcp_parse_addr(addr, &ip, &port) != 0 || port == 0 || cred_len > sizeof t->secret)
        return NETVM_ERR_INVAL;
    return tcp_dial(t, ip, port, NV_HS_SERVICE, -1, cred, cred_len, cookie);
}
