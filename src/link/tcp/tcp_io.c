/* Moving frames over a connection without ever wedging: sockets are
 * nonblocking; a sender that must wait for room keeps receiving, and what
 * receiving wants to send back (replies) is queued, never sent while
 * blocking. So two processes writing large frames to each other always make
 * progress. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

void tcp_conn_fail(struct tcp_conn *c, const char *why)
{
    int prev = atomic_exchange(&c->state, CONN_DEAD);
    if (prev == CONN_DEAD)
        return;
    if (c->rank < 0 || prev == CONN_STRANGER) {
        nv_warn("tcp link: closed a connection from an unauthenticated peer: %s", why);
        return;
    }
    if (c->bye)
        nv_debug("tcp link: rank %d finished", c->rank);
    else
        nv_warn("tcp link: connection to rank %d failed: %s", c->rank, why);
    shutdown(c->fd, SHUT_RDWR);
    c->link->base.up.peer_down(c->link->base.up.arg, c->rank);
}

/* Write from iov without blocking; returns bytes written, or -1 on a dead
 * connection. */
static ssize_t write_some(struct tcp_conn *c, struct iovec *iov, int n)
{
    struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
    for (;;) {
        ssize_t w = sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
            return 0;
        tcp_conn_fail(c, strerror(errno));
        return -1;
    }
}

void tcp_conn_rearm(struct tcp_conn *c)
{
    struct tcp_link *t = c->link;
    if (t->epfd < 0)
        return;
    /* two threads may re-arm at once (the progress thread quieting, a
     * waiter waking); the interest is read and set under one lock so the
     * last epoll_ctl always matches the state */
    pthread_mutex_lock(&c->arm_lock);
    unsigned events = EPOLLET | (atomic_load(&c->quiet) ? 0 : EPOLLIN) |
                      (atomic_load(&c->want_pollout) ? EPOLLOUT : 0);
    struct epoll_event ev = { .events = events, .data.ptr = &c->ev };
    epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
    pthread_mutex_unlock(&c->arm_lock);
}

static void set_pollout(struct tcp_conn *c, int on)
{
    if (atomic_exchange(&c->want_pollout, on) != on)
        tcp_conn_rearm(c);
}

/* Send queued replies, many per system call, until the queue is empty or
 * the socket full; the caller holds send_lock. */
static void flush_out_locked(struct tcp_conn *c)
{
    enum { MAXIOV = 64 };
    for (;;) {
        struct iovec iov[MAXIOV];
        int n = 0;
        pthread_mutex_lock(&c->out_lock);
        for (struct tcp_out *o = c->out_head; o && n + 2 <= MAXIOV; o = o->next) {
            if (o->sent < NV_TCP_HDR_LEN) {
                iov[n++] = (struct iovec){ o->hdr + o->sent, NV_TCP_HDR_LEN - o->sent };
                if (o->plen)
                    iov[n++] = (struct iovec){ (void *)o->payload, (size_t)o->plen };
            } else {
                size_t done = o->sent - NV_TCP_HDR_LEN;
                iov[n++] = (struct iovec){ (void *)(o->payload + done), (size_t)o->plen - done };
            }
        }
        pthread_mutex_unlock(&c->out_lock);
        if (n == 0 || atomic_load(&c->state) == CONN_DEAD)
            break;
        ssize_t w = write_some(c, iov, n);
        if (w < 0)
            break;
        /* retire what went out completely */
        size_t left = (size_t)w;
        for (;;) {
            pthread_mutex_lock(&c->out_lock);
            struct tcp_out *o = c->out_head;
            size_t need = o ? NV_TCP_HDR_LEN + (size_t)o->plen - o->sent : 0;
            if (!o || left < need) {
                if (o)
                    o->sent += left;
                pthread_mutex_unlock(&c->out_lock);
                break;
            }
            c->out_head = o->next;
            if (!c->out_head)
                c->out_tail = NULL;
            pthread_mutex_unlock(&c->out_lock);
            left -= need;
            if (o->slot_ref >= 0)
                atomic_fetch_sub_explicit(&c->link->slot_refs[o->slot_ref], 1, memory_order_release);
            if (o->read_ev)
                tcp_read_done(c, (uint64_t)(uintptr_t)o->payload, o->plen, &o->note);
            free(o);
        }
        pthread_mutex_lock(&c->out_lock);
        int more = c->out_head != NULL, stuck = more && (size_t)w == 0;
        pthread_mutex_unlock(&c->out_lock);
        if (stuck || (more && w == 0)) {
            set_pollout(c, 1);   /* the progress thread finishes when there is room */
            return;
        }
        if (!more)
            break;
    }
    set_pollout(c, 0);
}

static netvm_status_t flush_wbuf_locked(struct tcp_conn *c);

/* Take send_lock only if free; if not, its holder will flush our replies
 * (it checks tx_pending after unlocking). */
void tcp_try_flush(struct tcp_conn *c)
{
    for (;;) {
        if (pthread_mutex_trylock(&c->send_lock) != 0) {
            atomic_store(&c->tx_pending, 1);
            if (pthread_mutex_trylock(&c->send_lock) != 0)
                return;
        }
        atomic_store(&c->tx_pending, 0);
        /* gathered application frames too: their thread may be asleep,
         * waiting for the answers to them */
        if (atomic_load_explicit(&c->wbuf_used, memory_order_relaxed))
            flush_wbuf_locked(c);
        flush_out_locked(c);
        pthread_mutex_unlock(&c->send_lock);
        if (!atomic_load(&c->tx_pending))
            return;
    }
}

void tcp_queue_reply(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload,
                     uint64_t plen, int copy, int slot_ref, const struct nv_note *read_note)
{
    struct tcp_out *o = calloc(1, sizeof *o);
    if (!o) {
        tcp_conn_fail(c, "out of memory for a reply");
        if (slot_ref >= 0)
            atomic_fetch_sub(&c->link->slot_refs[slot_ref], 1);
        return;
    }
    nv_tcp_hdr_encode(h, o->hdr);
    o->slot_ref = slot_ref;
    o->plen = plen;
    if (read_note) {
        o->read_ev = 1;
        o->note = *read_note;
    }
    if (copy && plen) {
        memcpy(o->small, payload, (size_t)plen);
        o->payload = o->small;
    } else {
        o->payload = payload;
    }
    pthread_mutex_lock(&c->out_lock);
    if (c->out_tail)
        c->out_tail->next = o;
    else
        c->out_head = o;
    c->out_tail = o;
    pthread_mutex_unlock(&c->out_lock);
    /* sent by tcp_rx after the frames it is receiving, all at once */
}

#define WBUF_CAP  (64 * 1024)
#define BATCH_MAX (8 * 1024)

/* Write the whole of iov, receiving while the socket is full; the caller
 * holds send_lock and no queued reply is half-sent. */
static netvm_status_t write_all_locked(struct tcp_conn *c, struct iovec *iov, int n, size_t total)
{
    size_t sent = 0;
    while (sent < total) {
        if (atomic_load(&c->state) == CONN_DEAD)
            return NETVM_ERR_PEER;
        ssize_t w = write_some(c, iov, n);
        if (w < 0)
            return NETVM_ERR_PEER;
        sent += (size_t)w;
        /* advance the iovec past what went out */
        while (n > 0 && (size_t)w >= iov[0].iov_len) {
            w -= (ssize_t)iov[0].iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov[0].iov_base = (uint8_t *)iov[0].iov_base + w;
            iov[0].iov_len -= (size_t)w;
        }
        if (sent < total) {
            /* no room: keep the peer's data flowing while we wait */
            struct pollfd p = { .fd = c->fd, .events = POLLOUT | POLLIN };
            if (poll(&p, 1, 100) > 0 && (p.revents & POLLIN))
                tcp_rx(c);
        }
    }
    return NETVM_OK;
}

/* A reply half-sent must finish before any other byte enters the stream. */
static netvm_status_t settle_out_locked(struct tcp_conn *c)
{
    for (;;) {
        flush_out_locked(c);
        pthread_mutex_lock(&c->out_lock);
        int partial = c->out_head && c->out_head->sent > 0;
        pthread_mutex_unlock(&c->out_lock);
        if (!partial)
            return NETVM_OK;
        if (atomic_load(&c->state) == CONN_DEAD)
            return NETVM_ERR_PEER;
        struct pollfd p = { .fd = c->fd, .events = POLLOUT | POLLIN };
        if (poll(&p, 1, 100) > 0 && (p.revents & POLLIN))
            tcp_rx(c);
    }
}

static netvm_status_t flush_wbuf_locked(struct tcp_conn *c)
{
    if (!c->wlen)
        return NETVM_OK;
    netvm_status_t st = settle_out_locked(c);
    struct iovec iov = { c->wbuf, c->wlen };
    if (st == NETVM_OK)
        st = write_all_locked(c, &iov, 1, c->wlen);
    c->wlen = 0;
    atomic_store_explicit(&c->wbuf_used, 0, memory_order_relaxed);
    return st;
}

static void unlock_send(struct tcp_conn *c)
{
    pthread_mutex_unlock(&c->send_lock);
    if (atomic_load(&c->tx_pending))
        tcp_try_flush(c);
}

netvm_status_t tcp_send_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload, uint64_t plen,
                              int batch)
{
    netvm_status_t st = NETVM_OK;
    size_t total = NV_TCP_HDR_LEN + (size_t)plen;
    pthread_mutex_lock(&c->send_lock);
    if (atomic_load(&c->state) == CONN_DEAD) {
        pthread_mutex_unlock(&c->send_lock);
        return NETVM_ERR_PEER;
    }
    if (batch && total <= BATCH_MAX && c->wbuf) {
        if (c->wlen + total > WBUF_CAP)
            st = flush_wbuf_locked(c);
        nv_tcp_hdr_encode(h, c->wbuf + c->wlen);
        if (plen)
            memcpy(c->wbuf + c->wlen + NV_TCP_HDR_LEN, payload, (size_t)plen);
        c->wlen += total;
        atomic_store_explicit(&c->wbuf_used, 1, memory_order_relaxed);
        unlock_send(c);
        return st;
    }
    /* gathered frames went first: they were issued first */
    st = flush_wbuf_locked(c);
    if (st == NETVM_OK)
        st = settle_out_locked(c);
    if (st == NETVM_OK) {
        uint8_t hb[NV_TCP_HDR_LEN];
        nv_tcp_hdr_encode(h, hb);
        struct iovec iov[2] = { { hb, NV_TCP_HDR_LEN }, { (void *)payload, (size_t)plen } };
        st = write_all_locked(c, iov, plen ? 2 : 1, total);
    }
    flush_out_locked(c);
    unlock_send(c);
    return st;
}

void tcp_flush_gathered(struct tcp_conn *c)
{
    if (atomic_load_explicit(&c->wbuf_used, memory_order_relaxed))
        tcp_try_flush(c);   /* if the send side is busy, its holder sends them */
}

/* Read into buf without blocking: bytes read, 0 if nothing is there, -1 if
 * the connection ended. */
static ssize_t read_some(struct tcp_conn *c, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0) {
            tcp_conn_fail(c, "closed by the peer");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
            return 0;
        if (errno == EFAULT) {
            /* the destination vanished between the check and the copy */
            return -2;
        }
        tcp_conn_fail(c, strerror(errno));
        return -1;
    }
}

/* A large payload received straight into its destination. */
static ssize_t recv_into_place(struct tcp_conn *c, uint8_t *into, size_t want)
{
    return read_some(c, into, want);
}

/* Bytes that arrived with a header, copied to where they belong (for a PUT:
 * the application's memory, checked and inside the serve section). */
static void land_payload(uint8_t *into, const uint8_t *from, size_t n)
{
    memcpy(into, from, n);
}

/* Where the current frame's payload goes: its destination, the small
 * buffer, or nowhere (a refused PUT is drained). */
static uint8_t *payload_target(struct tcp_conn *c)
{
    if (c->dst)
        return c->dst;
    if (c->h.kind != NV_TCP_PUT && c->h.kind != NV_TCP_GET_RESP &&
        c->remaining <= sizeof c->small - c->small_got)
        return c->small + c->small_got;
    return NULL;
}

static void payload_advance(struct tcp_conn *c, size_t n)
{
    c->remaining -= n;
    if (c->dst)
        c->dst += n;
    else if (c->h.kind != NV_TCP_PUT && c->h.kind != NV_TCP_GET_RESP)
        c->small_got += n;
}

/* A header is complete: decode and act on it. 0 to go on, -1 if the
 * connection is dead. */
static int header_done(struct tcp_conn *c, int *frames)
{
    c->hdr_got = 0;
    const char *why = NULL;
    if (nv_tcp_hdr_decode(c->hdr_buf, NV_TCP_HDR_LEN, &c->h, &why)) {
        tcp_conn_fail(c, why);
        return -1;
    }
    c->remaining = nv_tcp_payload_len(&c->h);
    c->dst = NULL;
    c->small_got = 0;
    tcp_frame_begin(c);
    if (atomic_load(&c->state) == CONN_DEAD)
        return -1;
    if (c->remaining == 0) {
        tcp_frame_end(c);
        (*frames)++;
    } else {
        c->rx = RX_PAYLOAD;
    }
    return 0;
}

static int rx_locked(struct tcp_conn *c)
{
    int frames = 0;
    while (atomic_load(&c->state) != CONN_DEAD) {
        if (c->stage_off == c->stage_len) {
            c->stage_off = c->stage_len = 0;
            if (c->rx == RX_PAYLOAD && c->remaining >= TCP_STAGE_CAP) {
                /* a large payload: straight from the socket into place */
                uint8_t *into = payload_target(c);
                uint8_t sink[4096];
                size_t want = c->remaining > (uint64_t)SSIZE_MAX ? (size_t)SSIZE_MAX : (size_t)c->remaining;
                if (!into) {
                    into = sink;
                    want = want < sizeof sink ? want : sizeof sink;
                }
                ssize_t r = recv_into_place(c, into, want);
                if (r == -2) {
                    /* EFAULT: the destination vanished; drain and report it */
                    c->frame_status = NETVM_ERR_FAULT;
                    c->dst = NULL;
                    continue;
                }
                if (r <= 0)
                    break;
                payload_advance(c, (size_t)r);
                if (c->remaining == 0) {
                    c->rx = RX_HDR;
                    tcp_frame_end(c);
                    frames++;
                }
                continue;
            }
            ssize_t r = read_some(c, c->stage, TCP_STAGE_CAP);
            if (r <= 0)
                break;
            c->stage_len = (size_t)r;
        }
        size_t avail = c->stage_len - c->stage_off;
        const uint8_t *p = c->stage + c->stage_off;
        if (c->rx == RX_HDR) {
            size_t n = NV_TCP_HDR_LEN - c->hdr_got;
            if (n > avail)
                n = avail;
            memcpy(c->hdr_buf + c->hdr_got, p, n);
            c->hdr_got += n;
            c->stage_off += n;
            if (c->hdr_got == NV_TCP_HDR_LEN && header_done(c, &frames))
                break;
            continue;
        }
        size_t n = c->remaining < avail ? (size_t)c->remaining : avail;
        uint8_t *into = payload_target(c);
        if (into)
            land_payload(into, p, n);
        payload_advance(c, n);
        c->stage_off += n;
        if (c->remaining == 0) {
            c->rx = RX_HDR;
            tcp_frame_end(c);
            frames++;
        }
    }
    return frames;
}

int tcp_rx(struct tcp_conn *c)
{
    int frames = 0;
    for (;;) {
        if (pthread_mutex_trylock(&c->rx_lock) != 0) {
            /* the holder looks again after unlocking */
            atomic_store(&c->rx_pending, 1);
            if (pthread_mutex_trylock(&c->rx_lock) != 0)
                return frames;
        }
        atomic_store(&c->rx_pending, 0);
        frames += rx_locked(c);
        pthread_mutex_unlock(&c->rx_lock);
        /* the replies those frames queued leave together */
        if (frames)
            tcp_try_flush(c);
        if (!atomic_load(&c->rx_pending))
            return frames;
    }
}
