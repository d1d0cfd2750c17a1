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

static void set_pollout(struct tcp_conn *c, int on)
{
    struct tcp_link *t = c->link;
    if (t->epfd < 0 || atomic_exchange(&c->want_pollout, on) == on)
        return;
    struct epoll_event ev = { .events = EPOLLIN | EPOLLET | (on ? EPOLLOUT : 0), .data.ptr = &c->ev };
    epoll_ctl(t->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* Send queued replies until the socket is full; the caller holds send_lock. */
static void flush_out_locked(struct tcp_conn *c)
{
    for (;;) {
        pthread_mutex_lock(&c->out_lock);
        struct tcp_out *o = c->out_head;
        pthread_mutex_unlock(&c->out_lock);
        if (!o || atomic_load(&c->state) == CONN_DEAD)
            break;
        struct iovec iov[2];
        int n = 0;
        size_t total = NV_TCP_HDR_LEN + (size_t)o->plen;
        if (o->sent < NV_TCP_HDR_LEN) {
            iov[n++] = (struct iovec){ o->hdr + o->sent, NV_TCP_HDR_LEN - o->sent };
            if (o->plen)
                iov[n++] = (struct iovec){ (void *)o->payload, (size_t)o->plen };
        } else {
            size_t done = o->sent - NV_TCP_HDR_LEN;
            iov[n++] = (struct iovec){ (void *)(o->payload + done), (size_t)o->plen - done };
        }
        ssize_t w = write_some(c, iov, n);
        if (w < 0)
            break;
        o->sent += (size_t)w;
        if (o->sent < total) {
            set_pollout(c, 1);   /* the progress thread finishes it when there is room */
            return;
        }
        pthread_mutex_lock(&c->out_lock);
        c->out_head = o->next;
        if (!c->out_head)
            c->out_tail = NULL;
        pthread_mutex_unlock(&c->out_lock);
        if (o->slot_ref >= 0)
            atomic_fetch_sub_explicit(&c->link->slot_refs[o->slot_ref], 1, memory_order_release);
        free(o);
    }
    set_pollout(c, 0);
}

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
        flush_out_locked(c);
        pthread_mutex_unlock(&c->send_lock);
        if (!atomic_load(&c->tx_pending))
            return;
    }
}

void tcp_queue_reply(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload,
                     uint64_t plen, int copy, int slot_ref)
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
    tcp_try_flush(c);
}

netvm_status_t tcp_send_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload, uint64_t plen)
{
    uint8_t hb[NV_TCP_HDR_LEN];
    nv_tcp_hdr_encode(h, hb);
    pthread_mutex_lock(&c->send_lock);
    /* replies first: they unblock the peer */
    flush_out_locked(c);
    size_t total = NV_TCP_HDR_LEN + (size_t)plen, sent = 0;
    netvm_status_t st = NETVM_OK;
    while (sent < total) {
        if (atomic_load(&c->state) == CONN_DEAD) {
            st = NETVM_ERR_PEER;
            break;
        }
        struct iovec iov[2];
        int n = 0;
        if (sent < NV_TCP_HDR_LEN) {
            iov[n++] = (struct iovec){ hb + sent, NV_TCP_HDR_LEN - sent };
            if (plen)
                iov[n++] = (struct iovec){ (void *)payload, (size_t)plen };
        } else {
            iov[n++] = (struct iovec){ (uint8_t *)payload + (sent - NV_TCP_HDR_LEN), total - sent };
        }
        ssize_t w = write_some(c, iov, n);
        if (w < 0) {
            st = NETVM_ERR_PEER;
            break;
        }
        sent += (size_t)w;
        if (sent < total) {
            /* no room: keep the peer's data flowing while we wait */
            struct pollfd p = { .fd = c->fd, .events = POLLOUT | POLLIN };
            if (poll(&p, 1, 100) > 0 && (p.revents & POLLIN))
                tcp_rx(c);
        }
    }
    flush_out_locked(c);
    pthread_mutex_unlock(&c->send_lock);
    if (atomic_load(&c->tx_pending))
        tcp_try_flush(c);
    return st;
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

static int rx_locked(struct tcp_conn *c)
{
    int frames = 0;
    uint8_t sink[65536];
    while (atomic_load(&c->state) != CONN_DEAD) {
        if (c->rx == RX_HDR) {
            ssize_t r = read_some(c, c->hdr_buf + c->hdr_got, NV_TCP_HDR_LEN - c->hdr_got);
            if (r <= 0)
                break;
            c->hdr_got += (size_t)r;
            if (c->hdr_got < NV_TCP_HDR_LEN)
                continue;
            c->hdr_got = 0;
            const char *why = NULL;
            if (nv_tcp_hdr_decode(c->hdr_buf, NV_TCP_HDR_LEN, &c->h, &why)) {
                tcp_conn_fail(c, why);
                break;
            }
            c->remaining = nv_tcp_payload_len(&c->h);
            c->dst = NULL;
            c->small_got = 0;
            tcp_frame_begin(c);
            if (atomic_load(&c->state) == CONN_DEAD)
                break;
            if (c->remaining == 0) {
                tcp_frame_end(c);
                frames++;
            } else {
                c->rx = RX_PAYLOAD;
            }
            continue;
        }
        /* payload: straight into its destination, into the small buffer,
         * or (a refused PUT) into the sink */
        uint8_t *into;
        size_t want = c->remaining > (uint64_t)SSIZE_MAX ? (size_t)SSIZE_MAX : (size_t)c->remaining;
        if (c->dst) {
            into = c->dst;
        } else if (c->remaining <= sizeof c->small - c->small_got && c->h.kind != NV_TCP_PUT &&
                   c->h.kind != NV_TCP_GET_RESP) {
            into = c->small + c->small_got;
        } else {
            into = sink;
            if (want > sizeof sink)
                want = sizeof sink;
        }
        ssize_t r = read_some(c, into, want);
        if (r == -2) {
            /* EFAULT: drain the rest and report it */
            c->frame_status = NETVM_ERR_FAULT;
            c->dst = NULL;
            continue;
        }
        if (r <= 0)
            break;
        c->remaining -= (uint64_t)r;
        if (c->dst)
            c->dst += r;
        else if (into != sink)
            c->small_got += (size_t)r;
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
        if (!atomic_load(&c->rx_pending))
            return frames;
    }
}
