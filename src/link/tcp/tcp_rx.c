/* Receiving on a connection (its owner only). Bytes are read ahead into a
 * stage buffer, so many small frames cost one system call; a payload too
 * large for it is received straight into its destination (the kernel's
 * copy survives a destination unmapped meanwhile: EFAULT, and the rest is
 * drained). A pass stops when a read returned less than it asked for, so
 * it never pays a read that only says EAGAIN after the data it wanted. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>

/* Read into buf: bytes read, 0 if nothing is there, -1 if the connection
 * ended, -2 if buf is not mapped. */
static ssize_t read_some(struct tcp_conn *c, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (r > 0)
            return r;
        if (r == 0) {
            tcp_conn_fail(c, c->bye ? "closed after BYE" : "closed by the peer");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN)
            return 0;
        if (errno == EFAULT)
            return -2;
        tcp_conn_fail(c, strerror(errno));
        return -1;
    }
}

/* A large payload (and its trailer) straight into place. 1: the frame is
 * done; 0: more to come later; -1: the connection died. */
static int land(struct tcp_conn *c)
{
    while (c->remaining) {
        uint8_t sink[4096];
        uint8_t *into = c->dst ? c->dst : sink;
        size_t want = c->remaining > (uint64_t)SSIZE_MAX ? (size_t)SSIZE_MAX : (size_t)c->remaining;
        if (!c->dst && want > sizeof sink)
            want = sizeof sink;
        ssize_t r = read_some(c, into, want);
        if (r == -2) {
            /* the destination vanished: drain the rest and report it */
            c->frame_status = NETVM_ERR_FAULT;
            c->dst = NULL;
            continue;
        }
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        c->remaining -= (uint64_t)r;
        if (c->dst)
            c->dst += r;
        if ((size_t)r < want && c->remaining)
            return 0;   /* drained for now: no trailing read for EAGAIN */
    }
    if (c->h.flags & NV_TCP_F_TRAILER) {
        while (c->trailer_got < NV_TCP_TRAILER_LEN) {
            ssize_t r = read_some(c, c->trailer + c->trailer_got, NV_TCP_TRAILER_LEN - c->trailer_got);
            if (r < 0)
                return -1;
            if (r == 0)
                return 0;
            c->trailer_got += (unsigned)r;
        }
    }
    return 1;
}

static netvm_status_t trailer_status(struct tcp_conn *c, const uint8_t *t)
{
    uint16_t st;
    if (nv_tcp_trailer_decode(t, &st) != 0) {
        tcp_conn_fail(c, "malformed trailer");
        return NETVM_ERR_SYS;
    }
    return (netvm_status_t)st;
}

static void end_landing(struct tcp_conn *c)
{
    netvm_status_t landed = NETVM_OK;
    if (c->h.flags & NV_TCP_F_TRAILER)
        landed = trailer_status(c, c->trailer);
    c->in_payload = 0;
    tcp_frame_end(c, landed);
}

void tcp_rx_abort(struct tcp_conn *c)
{
    if (!c->in_payload)
        return;
    c->in_payload = 0;
    c->frame_status = NETVM_ERR_PEER;
    tcp_frame_end(c, NETVM_ERR_PEER);
}

static int rx_pass(struct tcp_conn *c)
{
    int frames = 0, drained = 0;
    while (atomic_load(&c->state) == CONN_READY) {
        if (c->in_payload) {
            int r = land(c);
            if (r < 0)
                tcp_rx_abort(c);   /* the connection died under it */
            if (r <= 0)
                break;
            end_landing(c);
            frames++;
            continue;
        }
        size_t avail = c->st_len - c->st_off;
        const uint8_t *p = c->stage + c->st_off;
        if (avail >= NV_TCP_HDR_LEN) {
            struct nv_tcp_hdr h;
            const char *why = NULL;
            if (nv_tcp_hdr_decode(p, NV_TCP_HDR_LEN, &h, &why)) {
                tcp_conn_fail(c, why);
                break;
            }
            uint64_t plen = nv_tcp_payload_len(&h);
            uint64_t tlen = (h.flags & NV_TCP_F_TRAILER) ? NV_TCP_TRAILER_LEN : 0;
            uint64_t whole = NV_TCP_HDR_LEN + plen + tlen;
            if (avail >= whole) {
                c->st_off += (size_t)whole;
                netvm_status_t ts = NETVM_OK;
                if (tlen) {
                    ts = trailer_status(c, p + NV_TCP_HDR_LEN + plen);
                    if (atomic_load(&c->state) != CONN_READY)
                        break;
                }
                if (ts != NETVM_OK) {
                    /* the sender's memory vanished: its bytes are zeros;
                     * the frame fails as a whole */
                    c->h = h;
                    c->dst = NULL;
                    c->frame_status = ts;
                    tcp_frame_begin(c, p + NV_TCP_HDR_LEN, (size_t)plen);
                    if (atomic_load(&c->state) == CONN_READY)
                        tcp_frame_end(c, ts);
                } else {
                    tcp_frame(c, &h, p + NV_TCP_HDR_LEN, (size_t)plen);
                }
                frames++;
                continue;
            }
            size_t inpay = avail - NV_TCP_HDR_LEN;
            /* an active message's header must be here to know where it goes */
            int head_here = h.kind != NV_TCP_AM || inpay >= (plen < NV_AM_HDR_MAX ? plen : NV_AM_HDR_MAX);
            if (head_here && ((inpay < plen && (plen - inpay >= TCP_DIRECT_MIN || whole > TCP_STAGE_CAP)) ||
                              (inpay >= plen && whole > TCP_STAGE_CAP))) {
                /* large: what came with the header lands now, the rest in place */
                size_t have = inpay < plen ? inpay : (size_t)plen;
                c->h = h;
                c->st_off += NV_TCP_HDR_LEN;
                c->remaining = plen;
                c->trailer_got = 0;
                c->dst = NULL;
                c->frame_status = NETVM_OK;
                tcp_frame_begin(c, p + NV_TCP_HDR_LEN, have);   /* consumes `have` payload bytes */
                if (atomic_load(&c->state) != CONN_READY)
                    break;
                c->st_off += have;
                c->remaining -= have;
                if (!c->remaining && tlen) {
                    size_t t = c->st_len - c->st_off;
                    if (t > NV_TCP_TRAILER_LEN)
                        t = NV_TCP_TRAILER_LEN;
                    memcpy(c->trailer, c->stage + c->st_off, t);
                    c->trailer_got = (unsigned)t;
                    c->st_off += t;
                }
                c->in_payload = 1;
                continue;
            }
        }
        /* more bytes are needed; a read that came back short emptied the
         * socket, so another would only say EAGAIN */
        if (drained)
            break;
        if (c->st_off) {
            memmove(c->stage, c->stage + c->st_off, avail);
            c->st_len = avail;
            c->st_off = 0;
        }
        size_t room = TCP_STAGE_CAP - c->st_len;
        ssize_t r = read_some(c, c->stage + c->st_len, room);
        if (r <= 0)
            break;
        c->st_len += (size_t)r;
        drained = (size_t)r < room;
    }
    if (c->st_off == c->st_len)
        c->st_off = c->st_len = 0;
    return frames;
}

int tcp_rx_owned(struct tcp_conn *c, int (*fn)(struct tcp_conn *));

int tcp_rx(struct tcp_conn *c)
{
    if (atomic_load(&c->state) != CONN_READY)
        return 0;   /* the handshake's bytes are serve_conn's */
    return tcp_rx_owned(c, rx_pass);
}
