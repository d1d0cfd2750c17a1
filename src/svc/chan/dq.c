/* Distributed queues: one ring per producer in one queue segment, merged
 * at the consumer. One ring per producer rather than one shared ring with
 * slots reserved by a remote fetch-add: a shared ring needs an atomic (a
 * round trip on tcp) per item plus a per-slot "written" flag, since the
 * tail alone does not say a reserved slot is full; per-producer rings keep
 * the data path to one put-with-signal, keep each producer's order for
 * free, and let a slow or dead producer hold up no one else. The consumer
 * sleeps on one tripwire over all the rings' head words (contiguous). */
#include "queue_seg.h"

#include <stdlib.h>

struct netvm_dq {
    pthread_mutex_t     lock;
    netvm_ctx_t        *ctx;
    struct nv_queue_seg qs;
    netvm_tripset_t    *set;
    size_t              next;    /* round robin */
    struct nv_ring_rx  *rings;
};

struct netvm_dq_prod {
    struct nv_ring_tx *ring;
};

netvm_status_t netvm_dq_create(netvm_ctx_t *ctx, const char *name, int producers,
                               const netvm_chan_opts_t *opts, netvm_dq_t **dq)
{
    if (!ctx || !dq || producers < 1 || producers > 1024)
        return NETVM_ERR_INVAL;
    netvm_dq_t *q = calloc(1, sizeof *q);
    if (!q)
        return NETVM_ERR_NOMEM;
    q->rings = calloc((size_t)producers, sizeof *q->rings);
    if (!q->rings) {
        free(q);
        return NETVM_ERR_NOMEM;
    }
    netvm_status_t st = nv_queue_seg_create(ctx, name, (size_t)producers, opts, &q->qs);
    if (!st && (st = netvm_tripset_create(ctx, &q->set)))
        netvm_unexport(q->qs.seg);
    if (st) {
        free(q->rings);
        free(q);
        return st;
    }
    q->ctx = ctx;
    pthread_mutex_init(&q->lock, NULL);
    for (size_t i = 0; i < (size_t)producers; i++)
        nv_ring_rx_init(&q->rings[i], ctx, -1, q->qs.base, q->qs.rings, i, q->qs.ring_bytes, q->qs.max_msg);
    *dq = q;
    return NETVM_OK;
}

enum { FOUND_ITEM, FOUND_DEAD, FOUND_NOTHING, FOUND_END };

/* One pass over the rings: an item to take, a dead producer to report, or
 * nothing (or, nothing ever again). */
static int scan(netvm_dq_t *q, size_t *which)
{
    size_t n = q->qs.rings, ended = 0;
    for (size_t k = 0; k < n; k++) {
        size_t i = (q->next + k) % n;
        struct nv_ring_rx *r = &q->rings[i];
        if (r->state != NV_RING_LIVE) {
            ended++;
            continue;
        }
        int closed;
        if (nv_ring_rx_avail(r, &closed)) {
            (void)nv_ring_rx_attached(r);   /* the attach landed before any item: learn the rank */
            *which = i;
            return FOUND_ITEM;
        }
        if (closed) {
            r->state = NV_RING_ENDED;
            ended++;
            continue;
        }
        if (nv_ring_rx_attached(r) && !nv_chan_peer_alive(q->ctx, r->peer)
            && !nv_ring_rx_avail(r, NULL)) {   /* a last look: it may have written just before */
            r->state = NV_RING_DEAD;
            *which = i;
            return FOUND_DEAD;
        }
    }
    return ended == n ? FOUND_END : FOUND_NOTHING;
}

static int any_avail(netvm_dq_t *q)
{
    for (size_t i = 0; i < q->qs.rings; i++)
        if (q->rings[i].state == NV_RING_LIVE && nv_ring_rx_avail(&q->rings[i], NULL))
            return 1;
    return 0;
}

/* Items expected soon are cheaper to poll for than to arm a tripwire
 * (a system call) for: look for NETVM_SPIN_US first, as netvm_wait_until
 * does. */
static int spin_for_items(netvm_dq_t *q)
{
    double end = nv_chan_now_ms() + nv_chan_spin_us() / 1e3;
    for (unsigned i = 0;; i++) {
        if (any_avail(q))
            return 1;
        if ((i & 63) == 63 && nv_chan_now_ms() >= end)
            return 0;
    }
}

/* Sleep until a head word is written or the slice ends: arm, look again
 * (a write before the arm is seen by the look, one after fires it), wait. */
static netvm_status_t sleep_on_heads(netvm_dq_t *q, int slice_ms)
{
    if (spin_for_items(q))
        return NETVM_OK;
    netvm_tripwire_t *tw;
    const uint8_t *heads = q->qs.base + nv_chan_head_off(0);
    netvm_status_t st = netvm_tripwire_arm(q->ctx, heads, q->qs.rings * NV_CHAN_LINE,
                                           NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, 0, q->set, &tw);
    if (st)
        return st;
    if (!any_avail(q)) {
        netvm_event_t ev;
        st = netvm_tripset_wait(q->set, &ev, slice_ms);
        if (st == NETVM_ERR_TIMEOUT)
            st = NETVM_OK;
    }
    netvm_status_t d = netvm_tripwire_disarm(tw);
    return st ? st : d;
}

static netvm_status_t recv_locked(netvm_dq_t *q, void *buf, size_t cap, size_t *len, int *producer,
                                  int *rank, int timeout_ms)
{
    double start = nv_chan_now_ms();
    for (;;) {
        size_t i;
        int found = scan(q, &i);
        if (found == FOUND_ITEM || found == FOUND_DEAD) {
            if (producer)
                *producer = (int)i;
            if (rank)
                *rank = q->rings[i].peer;
            if (found == FOUND_DEAD)
                return NETVM_ERR_PEER;
            netvm_status_t st = nv_ring_rx_take(&q->rings[i], buf, cap, len);
            if (st == NETVM_OK)
                q->next = (i + 1) % q->qs.rings;
            return st;
        }
        if (found == FOUND_END)
            return NETVM_ERR_STATE;
        if (timeout_ms == 0)
            return NETVM_ERR_AGAIN;
        int left = nv_chan_left_ms(timeout_ms, start);
        if (left == 0)
            return NETVM_ERR_TIMEOUT;
        int slice = nv_chan_poll_ms();
        netvm_status_t st = sleep_on_heads(q, left < 0 || left > slice ? slice : left);
        if (st)
            return st;
    }
}

netvm_status_t netvm_dq_recv(netvm_dq_t *dq, void *buf, size_t cap, size_t *len, int *producer, int *rank,
                             int timeout_ms)
{
    if (!dq || !len || (!buf && cap))
        return NETVM_ERR_INVAL;
    pthread_mutex_lock(&dq->lock);
    netvm_status_t st = recv_locked(dq, buf, cap, len, producer, rank, timeout_ms);
    pthread_mutex_unlock(&dq->lock);
    return st;
}

netvm_status_t netvm_dq_destroy(netvm_dq_t *dq)
{
    if (!dq)
        return NETVM_ERR_INVAL;
    for (size_t i = 0; i < dq->qs.rings; i++)
        nv_ring_rx_fini(&dq->rings[i]);
    netvm_status_t st = netvm_tripset_destroy(dq->set);
    netvm_status_t u = netvm_unexport(dq->qs.seg);
    pthread_mutex_destroy(&dq->lock);
    free(dq->rings);
    free(dq);
    return st ? st : u;
}

netvm_status_t netvm_dq_join(netvm_ctx_t *ctx, int consumer, const char *name, int timeout_ms,
                             netvm_dq_prod_t **p)
{
    if (!ctx || !p || !name)
        return NETVM_ERR_INVAL;
    netvm_dq_prod_t *c = calloc(1, sizeof *c);
    if (!c)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = nv_ring_tx_open(ctx, consumer, name, timeout_ms, &c->ring);
    if (st) {
        free(c);
        return st;
    }
    *p = c;
    return NETVM_OK;
}

netvm_status_t netvm_dq_send(netvm_dq_prod_t *p, const void *buf, size_t len, int timeout_ms)
{
    if (!p)
        return NETVM_ERR_INVAL;
    return nv_ring_tx_send(p->ring, buf, len, timeout_ms);
}

netvm_status_t netvm_dq_flush(netvm_dq_prod_t *p)
{
    if (!p)
        return NETVM_ERR_INVAL;
    return nv_ring_tx_flush(p->ring);
}

size_t netvm_dq_max_msg(const netvm_dq_prod_t *p)
{
    return p ? p->ring->max_msg : 0;
}

netvm_status_t netvm_dq_leave(netvm_dq_prod_t *p)
{
    if (!p)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_ring_tx_close(p->ring);
    free(p);
    return st;
}
