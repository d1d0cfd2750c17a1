/* The receiving side of one ring: the records are already in this
 * process's memory; taking one is a copy, and the consumed count goes back
 * to the sender's credit word lazily, once a quarter of the ring (or less,
 * when large messages need it) is unacknowledged. */
#include "chan_int.h"
#include "core/svc.h"

#include <string.h>

static uint64_t load_acquire(const uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

void nv_ring_rx_init(struct nv_ring_rx *r, netvm_ctx_t *ctx, int peer, uint8_t *base, size_t n, size_t i,
                     size_t ring_bytes, size_t max_msg)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    r->peer = peer;
    r->state = NV_RING_LIVE;
    r->head = (const uint64_t *)(base + nv_chan_head_off(i));
    r->attach = (struct nv_chan_attach *)(base + nv_chan_attach_off(n, i));
    r->data = base + nv_chan_data_off(n, ring_bytes, i);
    r->ring_bytes = ring_bytes;
    r->max_msg = max_msg;
    /* A sender blocked for room for its largest record needs the credit
     * once the ring holds less than that; a quarter keeps write-backs rare. */
    uint64_t slack = ring_bytes - nv_chan_rec_len(max_msg);
    r->thresh = ring_bytes / 4 < slack ? ring_bytes / 4 : slack;
    if (r->thresh == 0)
        r->thresh = 1;
}

uint64_t nv_ring_rx_headword(const struct nv_ring_rx *r)
{
    return load_acquire(r->head);
}

uint64_t nv_ring_rx_avail(const struct nv_ring_rx *r, int *closed)
{
    uint64_t w = load_acquire(r->head);
    if (closed)
        *closed = (int)(w & 1);
    return (w >> 1) - r->tail;
}

int nv_ring_rx_attached(struct nv_ring_rx *r)
{
    if (r->credit)
        return 1;
    if (load_acquire(&r->attach->attached) != 1)
        return 0;
    netvm_seg_handle_t h = r->attach->handle;
    if (r->peer < 0)
        r->peer = h.rank;   /* a queue's producers are ranks of the job */
    if (netvm_import_handle_peer(r->ctx, r->peer, &h, &r->credit) != NETVM_OK) {
        r->credit = NULL;
        return 0;
    }
    return 1;
}

static void write_credit(struct nv_ring_rx *r)
{
    if (!nv_ring_rx_attached(r))
        return;   /* the sender writes its handle before any record: not reached */
    /* The put is complete locally on return, so the source word may change
     * at once. The sender may close and free its credit word between the
     * look at the closed bit and this write's arrival: a quiet put, so that
     * expected failure (the sender is gone; its records are still here)
     * is not reported by this process's next flush to that rank, which has
     * nothing to do with this ring. */
    r->credit_val = r->tail;
    (void)nv_svc_put_quiet(r->ctx, r->credit, 0, &r->credit_val, sizeof r->credit_val);
    r->acked = r->tail;
}

netvm_status_t nv_ring_rx_take(struct nv_ring_rx *r, void *buf, size_t cap, size_t *len)
{
    size_t mask = r->ring_bytes - 1;
    size_t pos = (size_t)(r->tail & mask);
    uint64_t hdr;
    memcpy(&hdr, r->data + pos, sizeof hdr);   /* records are 8-aligned: the header never wraps */
    size_t n = (size_t)(uint32_t)hdr;
    if ((uint32_t)(hdr >> 32) != (uint32_t)r->tail || n > r->max_msg)
        return NETVM_ERR_FAULT;   /* the ring was written by something other than its sender */
    *len = n;
    if (n > cap)
        return NETVM_ERR_BOUNDS;
    size_t p = (pos + NV_CHAN_REC_HDR) & mask;
    size_t first = r->ring_bytes - p < n ? r->ring_bytes - p : n;
    if (first)
        memcpy(buf, r->data + p, first);
    if (n > first)
        memcpy((uint8_t *)buf + first, r->data, n - first);
    r->tail += nv_chan_rec_len(n);
    /* once closed, nobody waits for room (and the credit word may be gone) */
    if (r->tail - r->acked >= r->thresh && !(load_acquire(r->head) & 1))
        write_credit(r);
    return NETVM_OK;
}

void nv_ring_rx_fini(struct nv_ring_rx *r)
{
    if (r->credit)
        netvm_release(r->credit);
    r->credit = NULL;
}
