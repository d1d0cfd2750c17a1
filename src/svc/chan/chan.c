/* Channels: one queue segment with one ring; the receiver waits on the
 * ring's head word with netvm_wait_until. */
#include "queue_seg.h"

#include <stdlib.h>

struct netvm_chan_rx {
    pthread_mutex_t     lock;
    struct nv_queue_seg qs;
    struct nv_ring_rx   ring;
};

struct netvm_chan_tx {
    struct nv_ring_tx *ring;
};

netvm_status_t netvm_chan_create(netvm_ctx_t *ctx, int peer, const char *name,
                                 const netvm_chan_opts_t *opts, netvm_chan_rx_t **rx)
{
    if (!ctx || !rx || peer < 0)
        return NETVM_ERR_INVAL;
    netvm_chan_rx_t *c = calloc(1, sizeof *c);
    if (!c)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = nv_queue_seg_create(ctx, name, 1, opts, &c->qs);
    if (st) {
        free(c);
        return st;
    }
    pthread_mutex_init(&c->lock, NULL);
    nv_ring_rx_init(&c->ring, ctx, peer, c->qs.base, 1, 0, c->qs.ring_bytes, c->qs.max_msg);
    *rx = c;
    return NETVM_OK;
}

static netvm_status_t recv_locked(netvm_chan_rx_t *c, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    struct nv_ring_rx *r = &c->ring;
    double start = nv_chan_now_ms();
    for (;;) {
        int closed;
        uint64_t w = nv_ring_rx_headword(r);
        if (nv_ring_rx_avail(r, &closed))
            return nv_ring_rx_take(r, buf, cap, len);
        if (closed)
            return NETVM_ERR_STATE;
        if (!nv_chan_peer_alive(r->ctx, r->peer)) {
            /* the head may have moved just before the death was seen */
            if (nv_ring_rx_avail(r, NULL))
                continue;
            return NETVM_ERR_PEER;
        }
        int left = nv_chan_left_ms(timeout_ms, start);
        if (timeout_ms > 0 && left == 0)
            return NETVM_ERR_TIMEOUT;
        netvm_status_t st = nv_chan_wait_word(r->ctx, r->head, NETVM_CMP_NE, w, r->peer,
                                              timeout_ms < 0 ? -1 : left);
        if (st == NETVM_ERR_PEER)
            continue;   /* drain what it wrote first */
        if (st)
            return st;
    }
}

netvm_status_t netvm_chan_recv(netvm_chan_rx_t *rx, void *buf, size_t cap, size_t *len, int timeout_ms)
{
    if (!rx || !len || (!buf && cap))
        return NETVM_ERR_INVAL;
    pthread_mutex_lock(&rx->lock);
    netvm_status_t st = recv_locked(rx, buf, cap, len, timeout_ms);
    pthread_mutex_unlock(&rx->lock);
    return st;
}

netvm_status_t netvm_chan_pending(netvm_chan_rx_t *rx, size_t *bytes)
{
    if (!rx || !bytes)
        return NETVM_ERR_INVAL;
    pthread_mutex_lock(&rx->lock);
    *bytes = (size_t)nv_ring_rx_avail(&rx->ring, NULL);
    pthread_mutex_unlock(&rx->lock);
    return NETVM_OK;
}

netvm_status_t netvm_chan_destroy(netvm_chan_rx_t *rx)
{
    if (!rx)
        return NETVM_ERR_INVAL;
    nv_ring_rx_fini(&rx->ring);
    netvm_status_t st = netvm_unexport(rx->qs.seg);
    pthread_mutex_destroy(&rx->lock);
    free(rx);
    return st;
}

netvm_status_t netvm_chan_connect(netvm_ctx_t *ctx, int peer, const char *name, int timeout_ms,
                                  netvm_chan_tx_t **tx)
{
    if (!ctx || !tx || !name)
        return NETVM_ERR_INVAL;
    netvm_chan_tx_t *c = calloc(1, sizeof *c);
    if (!c)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = nv_ring_tx_open(ctx, peer, name, timeout_ms, &c->ring);
    if (st) {
        free(c);
        return st == NETVM_ERR_AGAIN ? NETVM_ERR_EXISTS : st;   /* its one ring is taken */
    }
    *tx = c;
    return NETVM_OK;
}

netvm_status_t netvm_chan_send(netvm_chan_tx_t *tx, const void *buf, size_t len, int timeout_ms)
{
    if (!tx)
        return NETVM_ERR_INVAL;
    return nv_ring_tx_send(tx->ring, buf, len, timeout_ms);
}

netvm_status_t netvm_chan_flush(netvm_chan_tx_t *tx)
{
    if (!tx)
        return NETVM_ERR_INVAL;
    return nv_ring_tx_flush(tx->ring);
}

size_t netvm_chan_max_msg(const netvm_chan_tx_t *tx)
{
    return tx ? tx->ring->max_msg : 0;
}

netvm_status_t netvm_chan_close(netvm_chan_tx_t *tx)
{
    if (!tx)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_ring_tx_close(tx->ring);
    free(tx);
    return st;
}
