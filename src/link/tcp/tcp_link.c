/* The tcp link's operations: the initiator's put, get, import, flush and
 * active messages; progress; revocation; life cycle. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

static struct tcp_conn *conn_to(struct tcp_link *t, int rank)
{
    struct tcp_conn *c = t->conns[rank];
    return c && atomic_load(&c->state) == CONN_READY ? c : NULL;
}

/* --- pending operations, named by core's request ids ------------------- */

static netvm_status_t pending_put(struct tcp_link *t, uint32_t id, uint8_t kind, int rank, void *token,
                                  void *dst, uint64_t len, struct nv_rdesc *rd)
{
    struct tcp_pending *p = &t->pending[id & 0xffff];
    if ((id & 0xffff) >= NV_LINK_MAX_PENDING || !token)
        return NETVM_ERR_INVAL;
    pthread_mutex_lock(&t->pending_lock);
    p->kind = kind;
    p->rank = rank;
    p->token = token;
    p->dst = dst;
    p->len = len;
    p->rd = rd;
    p->id = id | 0x80000000u;   /* never 0 */
    pthread_mutex_unlock(&t->pending_lock);
    return NETVM_OK;
}

struct tcp_pending *tcp_pending_take(struct tcp_link *t, uint32_t id, uint8_t kind, int rank)
{
    if ((id & 0xffff) >= NV_LINK_MAX_PENDING)
        return NULL;
    struct tcp_pending *p = &t->pending[id & 0xffff];
    pthread_mutex_lock(&t->pending_lock);
    int ok = p->id == (id | 0x80000000u) && p->kind == kind && p->rank == rank;
    pthread_mutex_unlock(&t->pending_lock);
    return ok ? p : NULL;
}

/* Send a request whose answer completes token. */
static netvm_status_t request(struct tcp_link *t, int rank, struct nv_tcp_hdr *h, const void *payload,
                              uint64_t plen, uint8_t answer, void *token, uint32_t id,
                              void *dst, uint64_t dlen, struct nv_rdesc *rd)
{
    struct tcp_conn *c = conn_to(t, rank);
    if (!c)
        return NETVM_ERR_PEER;
    h->req_id = id;
    netvm_status_t st = pending_put(t, id, answer, rank, token, dst, dlen, rd);
    if (st == NETVM_OK)
        st = tcp_send_frame(c, h, payload, plen, 1);   /* sent at the wait, with its neighbours */
    return st == NETVM_OK ? NV_LINK_PENDING : st;
}

/* --- exporter side ------------------------------------------------------- */

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
    for (int r = 0; r < l->size; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        uint64_t seq = atomic_load(&c->serve_seq);
        unsigned spins = 0;
        while ((seq & 1) && atomic_load(&c->serve_seq) == seq && atomic_load(&c->state) != CONN_DEAD) {
            if (++spins > 1000)
                sched_yield();
            tcp_rx(c);
        }
    }
    while (slot < t->p.max_segments && atomic_load(&t->slot_refs[slot])) {
        for (int r = 0; r < l->size; r++)
            if (t->conns[r])
                tcp_try_flush(t->conns[r]);
        sched_yield();
    }
}

/* --- initiator side ------------------------------------------------------ */

static netvm_status_t tcp_import(struct nv_link *l, int rank, const char *name, uint32_t slot,
                                 uint64_t key, struct nv_rdesc *out, void *token, uint32_t id)
{
    struct tcp_link *t = tcp_of(l);
    memset(out, 0, sizeof *out);
    out->rank = rank;
    struct nv_tcp_hdr h = { .kind = NV_TCP_IMPORT, .slot = slot, .key = key,
                            .len = name ? strlen(name) : 0 };
    if (h.len > NV_TCP_NAME_MAX)
        return NETVM_ERR_INVAL;
    return request(t, rank, &h, name, h.len, NV_TCP_IMPORT_RESP, token, id, NULL, 0, out);
}

static void tcp_release(struct nv_link *l, struct nv_rdesc *d) { (void)l; (void)d; }

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
    if (!remote) {
        struct tcp_conn *c = conn_to(t, d->rank);
        return c ? tcp_send_frame(c, &h, src, len, 1) : NETVM_ERR_PEER;
    }
    h.flags |= NV_TCP_F_ACK;
    return request(t, d->rank, &h, src, len, NV_TCP_PUT_ACK, token, id, NULL, 0, NULL);
}

static netvm_status_t tcp_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst,
                              size_t len, void *token, uint32_t id, const struct nv_note *note)
{
    struct nv_tcp_hdr h = { .kind = NV_TCP_GET, .slot = d->slot, .key = d->key, .off = off, .len = len };
    set_note(&h, note, NV_NOTE_RESPONDER);
    if (len > NV_TCP_MAX_XFER)
        return NETVM_ERR_INVAL;
    return request(tcp_of(l), d->rank, &h, NULL, 0, NV_TCP_GET_RESP, token, id, dst, len, NULL);
}

static netvm_status_t tcp_flush(struct nv_link *l, int rank, void *token, uint32_t id)
{
    struct nv_tcp_hdr h = { .kind = NV_TCP_FLUSH };
    return request(tcp_of(l), rank, &h, NULL, 0, NV_TCP_FLUSH_ACK, token, id, NULL, 0, NULL);
}

static netvm_status_t tcp_am_send(struct nv_link *l, int rank, const uint8_t *msg, unsigned flags)
{
    struct tcp_conn *c = conn_to(tcp_of(l), rank);
    if (!c)
        return NETVM_ERR_PEER;
    struct nv_tcp_hdr h = { .kind = NV_TCP_AM, .len = NV_AM_SIZE };
    if (flags & NV_AM_SEND_REPLY) {
        /* replies are sent from inside the receive path: queue, never block */
        tcp_queue_reply(c, &h, msg, NV_AM_SIZE, 1, -1, NULL);
        return NETVM_OK;
    }
    return tcp_send_frame(c, &h, msg, NV_AM_SIZE, 1);
}

/* --- progress ------------------------------------------------------------- */

static int poll_conn(struct tcp_conn *c)
{
    if (atomic_load(&c->state) == CONN_DEAD)
        return 0;
    if (!nv_is_progress_thread)
        atomic_store_explicit(&c->app_polls, atomic_load_explicit(&c->app_polls, memory_order_relaxed) + 1,
                              memory_order_relaxed);
    tcp_flush_gathered(c);
    if (atomic_load_explicit(&c->want_pollout, memory_order_relaxed))
        tcp_try_flush(c);   /* a large answer waits for room: move it on */
    return tcp_rx(c);
}

/* An application thread that polls picks its messages up itself; waking
 * the progress thread for them as well would only take a core from it. A
 * connection the application polled since the progress thread's last look
 * goes quiet; the thread looks again every APP_LOOK_MS while any is quiet. */
#define APP_LOOK_MS 1

static int tcp_poll(struct nv_link *l, int rank)
{
    struct tcp_link *t = tcp_of(l);
    if (rank >= 0 && t->conns[rank])
        return poll_conn(t->conns[rank]);
    int n = 0;
    for (int r = 0; r < l->size; r++)
        if (t->conns[r])
            n += poll_conn(t->conns[r]);
    return n;
}

static void noop(struct nv_link *l) { (void)l; }
static int zero(struct nv_link *l) { (void)l; return 0; }

static netvm_status_t tcp_epoll_add(struct nv_link *l, int epfd)
{
    struct tcp_link *t = tcp_of(l);
    t->epfd = epfd;
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &t->listen_ev };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, t->listen_fd, &ev) != 0)
        return NETVM_ERR_SYS;
    for (int r = 0; r < l->size; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        ev.events = EPOLLIN | EPOLLET;
        ev.data.ptr = &c->ev;
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
            return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

/* A connection after setup is refused: this link does not reconnect, and a
 * stranger is read only far enough to log why it was closed. */
static void accept_stranger(struct tcp_link *t)
{
    int fd = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    nv_warn("tcp link: refused a connection after setup (no reconnects; unknown peers get nothing)");
    close(fd);
}

static void tcp_epoll_event(struct nv_link *l, void *token)
{
    struct tcp_link *t = tcp_of(l);
    if (token == &t->listen_ev) {
        accept_stranger(t);
        return;
    }
    struct tcp_conn *c = (struct tcp_conn *)token;
    if (atomic_load(&c->state) == CONN_DEAD)
        return;
    uint64_t polls = atomic_load_explicit(&c->app_polls, memory_order_relaxed);
    if (!atomic_load(&t->sleepers) && polls != c->polls_seen && !atomic_exchange(&c->quiet, 1)) {
        /* the application is polling: stop waking for this connection until
         * it stops (tcp_tick turns the wake-ups back on) */
        atomic_fetch_add(&t->nquiet, 1);
        tcp_conn_rearm(c);
    }
    tcp_rx(c);
    if (atomic_load(&c->want_pollout))
        tcp_try_flush(c);
}

static int tcp_sleep_limit_ms(struct nv_link *l)
{
    return atomic_load(&tcp_of(l)->nquiet) ? APP_LOOK_MS : -1;
}

/* Where the application stopped polling a connection (or sleeps, waiting
 * for the progress thread), wake for it again; data that arrived meanwhile
 * is reported at once by the re-arm. */
static void wake_for_quiet(struct tcp_link *t, int all)
{
    for (int r = 0; r < t->base.size; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        int idle = 0;
        if (!all) {
            /* polls_seen belongs to the progress thread (all == 0 is its call) */
            uint64_t polls = atomic_load_explicit(&c->app_polls, memory_order_relaxed);
            idle = polls == c->polls_seen;
            c->polls_seen = polls;
        }
        if (atomic_load(&c->quiet) && (all || idle) && atomic_exchange(&c->quiet, 0)) {
            atomic_fetch_sub(&t->nquiet, 1);
            tcp_conn_rearm(c);
            if (!all)
                tcp_rx(c);
        }
    }
}

static void tcp_tick(struct nv_link *l)
{
    struct tcp_link *t = tcp_of(l);
    uint64_t now = nv_now_ns();
    if (now - t->last_look_ns < APP_LOOK_MS * 1000000ull)
        return;
    t->last_look_ns = now;
    wake_for_quiet(t, 0);
}

static int tcp_reply_wait_enter(struct nv_link *l)
{
    struct tcp_link *t = tcp_of(l);
    atomic_fetch_add(&t->sleepers, 1);
    wake_for_quiet(t, 1);
    /* what this thread gathered must be on its way before it sleeps */
    for (int r = 0; r < l->size; r++)
        if (t->conns[r])
            tcp_flush_gathered(t->conns[r]);
    return 0;
}

static void tcp_reply_wait_leave(struct nv_link *l) { atomic_fetch_sub(&tcp_of(l)->sleepers, 1); }

static int tcp_peer_dead(struct nv_link *l, int rank)
{
    struct tcp_conn *c = tcp_of(l)->conns[rank];
    return !c || atomic_load(&c->state) == CONN_DEAD;
}

static void tcp_destroy(struct nv_link *l)
{
    struct tcp_link *t = tcp_of(l);
    for (int r = 0; t->conns && r < l->size; r++) {
        struct tcp_conn *c = t->conns[r];
        if (!c)
            continue;
        if (atomic_load(&c->state) == CONN_READY) {
            struct nv_tcp_hdr h = { .kind = NV_TCP_BYE };
            tcp_send_frame(c, &h, NULL, 0, 0);
        }
        atomic_store(&c->state, CONN_DEAD);
        tcp_conn_free(c);
    }
    free(t->conns);
    free(t->slot_refs);
    if (t->listen_fd >= 0)
        close(t->listen_fd);
    pthread_mutex_destroy(&t->pending_lock);
    free(t);
}

static const struct nv_link_ops tcp_ops = {
    .name = "tcp",
    .caps = NV_LINK_CAP_ASYNC,
    .seg_publish = tcp_seg_publish,
    .seg_revoke = tcp_seg_revoke,
    .seg_fence = tcp_seg_fence,
    .import = tcp_import,
    .release = tcp_release,
    .put = tcp_put,
    .get = tcp_get,
    .atomic = NULL,
    .am_send = tcp_am_send,
    .poll = tcp_poll,
    .poll_enter = noop,
    .poll_leave = noop,
    .epoll_add = tcp_epoll_add,
    .epoll_event = tcp_epoll_event,
    .sleep_prepare = zero,
    .sleep_done = noop,
    .sleep_limit_ms = tcp_sleep_limit_ms,
    .tick = tcp_tick,
    .reply_wait_enter = tcp_reply_wait_enter,
    .reply_wait_leave = tcp_reply_wait_leave,
    .flush = tcp_flush,
    .peer_dead = tcp_peer_dead,
    .destroy = tcp_destroy,
};

netvm_status_t nv_tcp_link_open(struct nv_link **out, int rank, int size, const struct nv_tcp_params *p,
                                const struct nv_link_upcalls *up, struct nv_tcp_card *card)
{
    struct tcp_link *t = calloc(1, sizeof *t);
    if (!t)
        return NETVM_ERR_NOMEM;
    t->base.ops = &tcp_ops;
    t->base.up = *up;
    t->base.rank = rank;
    t->base.size = size;
    t->p = *p;
    t->epfd = -1;
    t->listen_ev.link = &t->base;
    pthread_mutex_init(&t->pending_lock, NULL);
    if (p->secret_len == 0 || p->secret_len > sizeof t->secret) {
        nv_error("tcp link: no job secret (the launcher sets NETVM_SECRET)");
        free(t);
        return NETVM_ERR_INVAL;
    }
    memcpy(t->secret, p->secret, p->secret_len);
    t->conns = calloc((size_t)size, sizeof *t->conns);
    t->slot_refs = calloc(p->max_segments, sizeof *t->slot_refs);
    t->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = 0 };
    if (inet_pton(AF_INET, p->bind_addr, &a.sin_addr) != 1) {
        nv_error("tcp link: NETVM_TCP_ADDR=%s is not an IPv4 address", p->bind_addr);
        t->listen_fd >= 0 ? close(t->listen_fd) : 0;
        t->listen_fd = -1;
        tcp_destroy(&t->base);
        return NETVM_ERR_INVAL;
    }
    socklen_t al = sizeof a;
    if (!t->conns || !t->slot_refs || t->listen_fd < 0 || bind(t->listen_fd, (struct sockaddr *)&a, sizeof a) ||
        listen(t->listen_fd, size + 16) || getsockname(t->listen_fd, (struct sockaddr *)&a, &al)) {
        nv_error("tcp link: cannot listen on %s: %s", p->bind_addr, strerror(errno));
        tcp_destroy(&t->base);
        return NETVM_ERR_SYS;
    }
    char shown[INET_ADDRSTRLEN] = "?";
    inet_ntop(AF_INET, &a.sin_addr, shown, sizeof shown);
    nv_info("tcp link: listening on %s:%u", shown, (unsigned)ntohs(a.sin_port));
    memset(card, 0, sizeof *card);
    card->version = NV_TCP_VERSION;
    card->ipv4 = a.sin_addr.s_addr;
    card->port = a.sin_port;
    *out = &t->base;
    return NETVM_OK;
}

netvm_status_t nv_tcp_link_connect(struct nv_link *l, const struct nv_tcp_card *cards, const uint8_t *use)
{
    for (int r = 0; r < l->size; r++)
        if (use[r] && cards[r].version != NV_TCP_VERSION) {
            nv_error("tcp link: rank %d runs another tcp protocol version", r);
            return NETVM_ERR_UNSUPPORTED;
        }
    return tcp_handshake_all(tcp_of(l), cards, use);
}
