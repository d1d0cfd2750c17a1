/* A connection's send queue. Small frames are copied into an arena and
 * many leave with one sendmsg; large payloads are sent from where they lie
 * (the caller's buffer, the exported memory a get reads). Sockets are
 * nonblocking: what does not fit waits for EPOLLOUT, and a thread that must
 * wait for room keeps receiving meanwhile, so two processes sending large
 * transfers to each other never wedge. Memory that vanishes under a
 * payload being sent is replaced by zeros and the frame's trailer says
 * so. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/guard.h"
#include "util/log.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>

void tcp_read_done(struct tcp_conn *c, uint64_t addr, uint64_t len, unsigned note, uint64_t tag);

static const uint8_t zeros[16384];

static struct tcp_seg *seg_at(struct tcp_tx *tx, unsigned i) { return &tx->seg[(tx->head + i) % TCP_SEGS]; }

static struct tcp_seg *seg_new(struct tcp_tx *tx)
{
    if (tx->n == TCP_SEGS)
        return NULL;
    struct tcp_seg *s = seg_at(tx, tx->n++);
    memset(s, 0, sizeof *s);
    s->slot_ref = -1;
    return s;
}

/* Room for n bytes of copies: the arena, or a buffer of their own. */
static uint8_t *reserve(struct tcp_conn *c, size_t n, struct tcp_seg **out)
{
    struct tcp_tx *tx = &c->tx;
    if (!tx->n)
        tx->arena_used = 0;
    if (tx->arena_used + n > TCP_ARENA_CAP && tx->n) {
        tcp_tx_push(c);   /* make room by sending */
        if (!tx->n)
            tx->arena_used = 0;
    }
    if (tx->n == TCP_SEGS) {
        tcp_tx_push(c);
        if (tx->n == TCP_SEGS)
            return NULL;
    }
    if (tx->arena_used + n <= TCP_ARENA_CAP) {
        uint8_t *p = tx->arena + tx->arena_used;
        struct tcp_seg *last = tx->n ? seg_at(tx, tx->n - 1) : NULL;
        tx->arena_used += n;
        if (last && last->kind == SEG_ARENA && !last->has_trailer && !last->token && last->base + last->len == p) {
            last->len += n;   /* one more frame in the same piece */
            *out = last;
            return p;
        }
        struct tcp_seg *s = seg_new(tx);
        s->kind = SEG_ARENA;
        s->base = p;
        s->len = n;
        *out = s;
        return p;
    }
    uint8_t *own = malloc(n);
    if (!own)
        return NULL;
    struct tcp_seg *s = seg_new(tx);
    s->kind = SEG_OWNED;
    s->base = own;
    s->len = n;
    *out = s;
    return own;
}

int tcp_tx_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                 const void *pay, size_t plen, int urgent)
{
    struct tcp_seg *s;
    uint8_t *p = reserve(c, NV_TCP_HDR_LEN + elen + plen, &s);
    if (!p)
        return -1;
    nv_tcp_hdr_encode(h, p);
    if (elen)
        memcpy(p + NV_TCP_HDR_LEN, extra, elen);
    if (plen && nv_guarded_copy(p + NV_TCP_HDR_LEN + elen, pay, plen) != 0) {
        /* the caller's own buffer is not mapped: nothing is queued */
        if (s->kind == SEG_OWNED) {
            free((void *)s->base);
            c->tx.n--;
        } else {
            s->len -= NV_TCP_HDR_LEN + elen + plen;
            c->tx.arena_used -= NV_TCP_HDR_LEN + elen + plen;
            if (!s->len)
                c->tx.n--;
        }
        return -2;
    }
    if (urgent)
        c->tx.urgent = 1;
    else if (!c->tx.lazy) {
        c->tx.lazy = 1;
        atomic_fetch_add_explicit(&c->t->nlazy, 1, memory_order_relaxed);
    }
    return 0;
}

int tcp_tx_frame_ext(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                     const void *pay, size_t plen, const struct tcp_seg *how)
{
    if (c->tx.n + 2 > TCP_SEGS) {
        tcp_tx_push(c);
        if (c->tx.n + 2 > TCP_SEGS)
            return -1;
    }
    if (tcp_tx_frame(c, h, extra, elen, NULL, 0, 1) != 0)
        return -1;
    struct tcp_seg *s = seg_new(&c->tx);
    *s = *how;
    s->kind = SEG_EXT;
    s->base = pay;
    s->len = plen;
    c->tx.urgent = 1;
    return 0;
}

/* A piece is out: what it owed. */
static void retire(struct tcp_conn *c, struct tcp_seg *s)
{
    struct tcp_link *t = c->t;
    if (s->kind == SEG_OWNED)
        free((void *)s->base);
    if (s->slot_ref >= 0)
        atomic_fetch_sub_explicit(&t->slot_refs[s->slot_ref], 1, memory_order_release);
    if (s->read_ev && !s->faulted)
        tcp_read_done(c, s->addr, s->len, s->note, s->tag);
    if (s->token)
        t->base.up.complete(t->base.up.arg, s->token, s->faulted ? NETVM_ERR_FAULT : NETVM_OK);
}

/* The iovec of what is queued, from the head. */
static int build(struct tcp_tx *tx, struct iovec *iov, int max, size_t *total)
{
    int k = 0;
    size_t skip = tx->done_in_head;
    *total = 0;
    for (unsigned i = 0; i < tx->n && k + 2 <= max; i++) {
        struct tcp_seg *s = seg_at(tx, i);
        if (skip < s->len) {
            size_t n = s->len - skip;
            if (s->faulted) {
                if (n > sizeof zeros)
                    n = sizeof zeros;
                iov[k++] = (struct iovec){ (void *)zeros, n };
                *total += n;
                if (n < s->len - skip)
                    break;   /* more zeros after these */
            } else {
                iov[k++] = (struct iovec){ (void *)(s->base + skip), n };
                *total += n;
            }
            skip = 0;
        } else {
            skip -= s->len;
        }
        if (s->has_trailer) {
            size_t tn = NV_TCP_TRAILER_LEN - skip;
            iov[k++] = (struct iovec){ s->trailer + skip, tn };
            *total += tn;
        }
        skip = 0;
    }
    return k;
}

/* The first piece sent from memory among those just tried vanished: send
 * zeros in its place and say so in its trailer. */
static int mark_fault(struct tcp_tx *tx)
{
    for (unsigned i = 0; i < tx->n; i++) {
        struct tcp_seg *s = seg_at(tx, i);
        if (s->kind == SEG_EXT && !s->faulted) {
            s->faulted = 1;
            nv_tcp_trailer_encode(NETVM_ERR_FAULT, s->trailer);
            return 0;
        }
    }
    return -1;
}

int tcp_tx_push(struct tcp_conn *c)
{
    struct tcp_tx *tx = &c->tx;
    while (tx->n) {
        if (atomic_load(&c->state) == CONN_DEAD)
            return -1;
        struct iovec iov[64];
        size_t want;
        int k = build(tx, iov, 64, &want);
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)k };
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                if (!tx->want_out) {
                    tx->want_out = 1;
                    tcp_conn_interest(c, EPOLLIN | EPOLLOUT);
                }
                return 0;
            }
            if (errno == EFAULT && mark_fault(tx) == 0)
                continue;
            tcp_conn_fail(c, strerror(errno));
            return -1;
        }
        /* retire what went out completely */
        size_t left = (size_t)w;
        while (tx->n) {
            struct tcp_seg *s = seg_at(tx, 0);
            size_t whole = s->len + (s->has_trailer ? NV_TCP_TRAILER_LEN : 0);
            if (tx->done_in_head + left < whole) {
                tx->done_in_head += left;
                break;
            }
            left -= whole - tx->done_in_head;
            tx->done_in_head = 0;
            tx->head = (tx->head + 1) % TCP_SEGS;
            tx->n--;
            retire(c, s);
        }
        if ((size_t)w < want) {
            if (!tx->want_out) {
                tx->want_out = 1;
                tcp_conn_interest(c, EPOLLIN | EPOLLOUT);
            }
            return 0;
        }
    }
    tx->arena_used = 0;
    tx->urgent = 0;
    if (tx->lazy) {
        tx->lazy = 0;
        atomic_fetch_sub_explicit(&c->t->nlazy, 1, memory_order_relaxed);
    }
    if (tx->want_out) {
        tx->want_out = 0;
        if (atomic_load(&c->state) != CONN_DEAD)
            tcp_conn_interest(c, EPOLLIN);
    }
    return 0;
}

netvm_status_t tcp_tx_drain(struct tcp_conn *c)
{
    while (c->tx.n) {
        if (tcp_tx_push(c) != 0 || atomic_load(&c->state) == CONN_DEAD)
            return NETVM_ERR_PEER;
        if (!c->tx.n)
            break;
        /* no room: keep the peer's data flowing while we wait */
        struct pollfd p = { .fd = c->fd, .events = POLLOUT | POLLIN };
        if (poll(&p, 1, 100) > 0 && (p.revents & POLLIN))
            tcp_rx(c);
    }
    return atomic_load(&c->state) == CONN_DEAD ? NETVM_ERR_PEER : NETVM_OK;
}

void tcp_tx_free(struct tcp_conn *c)
{
    struct tcp_tx *tx = &c->tx;
    if (tx->lazy) {
        tx->lazy = 0;
        atomic_fetch_sub(&c->t->nlazy, 1);
    }
    while (tx->n) {
        struct tcp_seg *s = seg_at(tx, 0);
        tx->head = (tx->head + 1) % TCP_SEGS;
        tx->n--;
        if (s->kind == SEG_OWNED)
            free((void *)s->base);
        if (s->slot_ref >= 0)
            atomic_fetch_sub(&c->t->slot_refs[s->slot_ref], 1);
        if (s->token)
            c->t->base.up.complete(c->t->base.up.arg, s->token, NETVM_ERR_PEER);
    }
    pthread_mutex_lock(&c->mail_lock);
    struct tcp_mail *m = c->mail_head;
    c->mail_head = c->mail_tail = NULL;
    atomic_store(&c->mail_n, 0);
    pthread_mutex_unlock(&c->mail_lock);
    while (m) {
        struct tcp_mail *n = m->next;
        if (m->seg.token)
            c->t->base.up.complete(c->t->base.up.arg, m->seg.token, NETVM_ERR_PEER);
        if (m->seg.slot_ref >= 0)
            atomic_fetch_sub(&c->t->slot_refs[m->seg.slot_ref], 1);
        free(m);
        m = n;
    }
    free(tx->arena);
    tx->arena = NULL;
}

/* --- frames from threads that do not own the connection --------------------- */

netvm_status_t tcp_mail(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                        const void *pay, size_t plen, const struct tcp_seg *ext)
{
    size_t copy = ext ? 0 : plen;
    struct tcp_mail *m = malloc(sizeof *m + copy);
    if (!m)
        return NETVM_ERR_NOMEM;
    m->next = NULL;
    nv_tcp_hdr_encode(h, m->hdr);
    if (elen)   /* a frame without extra (a FLUSH) passes NULL */
        memcpy(m->hdr + NV_TCP_HDR_LEN, extra, elen);
    m->hlen = NV_TCP_HDR_LEN + elen;
    memset(&m->seg, 0, sizeof m->seg);
    m->seg.slot_ref = -1;
    if (ext) {
        m->seg = *ext;
        m->seg.base = pay;
        m->seg.len = plen;
    } else if (copy && nv_guarded_copy(m->data, pay, copy) != 0) {
        free(m);
        return NETVM_ERR_FAULT;
    }
    m->seg.len = plen;
    pthread_mutex_lock(&c->mail_lock);
    if (c->mail_tail)
        c->mail_tail->next = m;
    else
        c->mail_head = m;
    c->mail_tail = m;
    atomic_fetch_add_explicit(&c->mail_n, 1, memory_order_seq_cst);
    pthread_mutex_unlock(&c->mail_lock);
    /* the owner sends it before it lets go; if nobody owns it, we do */
    if (tcp_own(c) == 0)
        tcp_release(c);
    return NETVM_OK;
}

void tcp_take_mail(struct tcp_conn *c)
{
    pthread_mutex_lock(&c->mail_lock);
    struct tcp_mail *m = c->mail_head;
    c->mail_head = c->mail_tail = NULL;
    atomic_store(&c->mail_n, 0);
    pthread_mutex_unlock(&c->mail_lock);
    while (m) {
        struct tcp_mail *n = m->next;
        int rc;
        if (m->seg.kind == SEG_EXT) {
            struct tcp_seg s = m->seg;
            struct tcp_seg *first;
            uint8_t *p = reserve(c, m->hlen, &first);
            rc = p ? 0 : -1;
            if (p) {
                memcpy(p, m->hdr, m->hlen);
                struct tcp_seg *e = seg_new(&c->tx);
                if (e)
                    *e = s;
                else
                    rc = -1;
            }
        } else {
            struct tcp_seg *s;
            uint8_t *p = reserve(c, m->hlen + m->seg.len, &s);
            rc = p ? 0 : -1;
            if (p) {
                memcpy(p, m->hdr, m->hlen);
                memcpy(p + m->hlen, m->data, m->seg.len);
            }
        }
        if (rc != 0) {
            tcp_conn_fail(c, "out of memory for queued frames");
            if (m->seg.token)
                c->t->base.up.complete(c->t->base.up.arg, m->seg.token, NETVM_ERR_NOMEM);
        }
        c->tx.urgent = 1;
        free(m);
        m = n;
    }
}
