/* The sending end of one ring: writes records into the receiver's memory
 * with put-with-signal (the head word moves only once the record is
 * visible) and waits on its own credit word when the ring is full. */
#include "chan_int.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t load_acquire(const uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

/* Import the segment, retrying while it does not exist yet. */
static netvm_status_t import_retry(netvm_ctx_t *ctx, int peer, const char *seg_name, int timeout_ms,
                                   netvm_rseg_t **rs)
{
    double start = nv_chan_now_ms();
    for (;;) {
        netvm_status_t st = netvm_import(ctx, peer, seg_name, rs);
        if (st != NETVM_ERR_NOTFOUND)
            return st;
        if (nv_chan_left_ms(timeout_ms, start) == 0)
            return st;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

/* The queue's header, once its receiver has written it: the segment is
 * exported (and importable) a moment before, and its magic word is written
 * last, so a 0 there means "not yet". The words are read again after the
 * magic was seen, which orders them after it. */
static netvm_status_t read_header(netvm_ctx_t *ctx, netvm_rseg_t *rs, int timeout_ms, uint64_t *hdr)
{
    double start = nv_chan_now_ms();
    for (;;) {
        netvm_status_t st = netvm_get(ctx, hdr, rs, 0, NV_CHAN_HDR_WORDS * sizeof *hdr, 0);
        if (st || hdr[0] != 0)
            return st ? st : netvm_get(ctx, hdr, rs, 0, NV_CHAN_HDR_WORDS * sizeof *hdr, 0);
        if (nv_chan_left_ms(timeout_ms, start) == 0)
            return NETVM_ERR_TIMEOUT;
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

static void tx_free(struct nv_ring_tx *tx)
{
    if (tx->rs)
        netvm_release(tx->rs);
    if (tx->credit_seg)
        netvm_unexport(tx->credit_seg);
    pthread_mutex_destroy(&tx->lock);
    free(tx->stage);
    free(tx);
}

netvm_status_t nv_ring_tx_open(netvm_ctx_t *ctx, int peer, const char *name, int timeout_ms,
                               struct nv_ring_tx **out)
{
    char seg_name[64];
    if (!ctx || !out)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_chan_seg_name(name, seg_name);
    if (st)
        return st;
    struct nv_ring_tx *tx = calloc(1, sizeof *tx);
    if (!tx)
        return NETVM_ERR_NOMEM;
    pthread_mutex_init(&tx->lock, NULL);
    tx->ctx = ctx;
    tx->peer = peer;
    st = import_retry(ctx, peer, seg_name, timeout_ms, &tx->rs);
    if (st) {
        tx->rs = NULL;
        goto fail;
    }
    uint64_t hdr[NV_CHAN_HDR_WORDS];
    if ((st = read_header(ctx, tx->rs, timeout_ms, hdr)))
        goto fail;
    uint64_t rb = hdr[1], mm = hdr[2], n = hdr[3];
    if (hdr[0] != NV_CHAN_MAGIC || rb < NV_CHAN_MIN_RING || rb > NV_CHAN_MAX_RING || (rb & (rb - 1))
        || mm > rb - NV_CHAN_REC_HDR || n == 0 || n > 1024
        || netvm_rseg_len(tx->rs) < nv_chan_data_off(n, rb, n)) {
        st = NETVM_ERR_INVAL;   /* not a queue segment of this version */
        goto fail;
    }
    uint64_t idx;
    if ((st = netvm_atomic(ctx, tx->rs, NV_CHAN_CLAIM_OFF, NETVM_AOP_FADD, 1, 0, &idx)))
        goto fail;
    if (idx >= n) {
        st = NETVM_ERR_AGAIN;
        goto fail;
    }
    tx->index = idx;
    tx->ring_bytes = rb;
    tx->max_msg = mm;
    tx->head_off = nv_chan_head_off(idx);
    tx->data_off = nv_chan_data_off(n, rb, idx);
    tx->stage = malloc(nv_chan_rec_len(mm));
    if (!tx->stage) {
        st = NETVM_ERR_NOMEM;
        goto fail;
    }
    void *area;
    if ((st = netvm_alloc_shared(ctx, NV_CHAN_LINE, NETVM_RW, NULL, &area, &tx->credit_seg))) {
        tx->credit_seg = NULL;
        goto fail;
    }
    tx->credit = area;
    struct nv_chan_attach att = { .attached = 1 };
    if ((st = netvm_seg_handle(tx->credit_seg, &att.handle)))
        goto fail;
    /* the handle first, then the flag: puts to one target land in order */
    size_t aoff = nv_chan_attach_off(n, idx);
    if ((st = netvm_put(ctx, tx->rs, aoff, &att.handle, sizeof att.handle, 0)))
        goto fail;
    if ((st = netvm_put_imm(ctx, tx->rs, aoff + offsetof(struct nv_chan_attach, attached), 1, 0)))
        goto fail;
    *out = tx;
    return NETVM_OK;
fail:
    tx_free(tx);
    return st;
}

netvm_status_t nv_ring_tx_send(struct nv_ring_tx *tx, const void *buf, size_t len, int timeout_ms)
{
    if (!tx || (!buf && len))
        return NETVM_ERR_INVAL;
    if (len > tx->max_msg)
        return NETVM_ERR_BOUNDS;
    size_t rec = nv_chan_rec_len(len);
    pthread_mutex_lock(&tx->lock);
    netvm_status_t st = NETVM_OK;
    /* room: the receiver's consumed count must be at least this */
    uint64_t need = tx->head + rec - tx->ring_bytes;
    if (tx->head + rec > tx->ring_bytes && load_acquire(tx->credit) < need) {
        if (!nv_chan_peer_alive(tx->ctx, tx->peer))
            st = NETVM_ERR_PEER;
        else
            st = nv_chan_wait_word(tx->ctx, tx->credit, NETVM_CMP_GE, need, tx->peer, timeout_ms);
        if (st)
            goto out;
    }
    uint64_t hdr = (uint64_t)len | (uint64_t)(uint32_t)tx->head << 32;
    memcpy(tx->stage, &hdr, sizeof hdr);
    if (len)
        memcpy(tx->stage + NV_CHAN_REC_HDR, buf, len);
    size_t pad = rec - NV_CHAN_REC_HDR - len;
    if (pad)
        memset(tx->stage + NV_CHAN_REC_HDR + len, 0, pad);
    size_t pos = (size_t)(tx->head & (tx->ring_bytes - 1));
    size_t first = tx->ring_bytes - pos < rec ? tx->ring_bytes - pos : rec;
    uint64_t word = (tx->head + rec) << 1;
    if (first < rec) {
        /* The first part signals the head's current value (no change) so
         * that it, too, returns at local completion; the second moves the
         * head, after both parts are visible (puts to one target land in
         * order). */
        st = netvm_put_signal_nb(tx->ctx, tx->rs, tx->data_off + pos, tx->stage, first, tx->rs,
                                 tx->head_off, tx->head << 1, NETVM_SIGNAL_SET, 0);
        if (!st)
            st = netvm_put_signal_nb(tx->ctx, tx->rs, tx->data_off, tx->stage + first, rec - first,
                                     tx->rs, tx->head_off, word, NETVM_SIGNAL_SET, 0);
    } else {
        st = netvm_put_signal_nb(tx->ctx, tx->rs, tx->data_off + pos, tx->stage, rec, tx->rs,
                                 tx->head_off, word, NETVM_SIGNAL_SET, 0);
    }
    if (!st)
        tx->head += rec;
out:
    pthread_mutex_unlock(&tx->lock);
    return st;
}

netvm_status_t nv_ring_tx_flush(struct nv_ring_tx *tx)
{
    if (!tx)
        return NETVM_ERR_INVAL;
    return netvm_flush(tx->ctx, tx->peer);
}

netvm_status_t nv_ring_tx_close(struct nv_ring_tx *tx)
{
    if (!tx)
        return NETVM_ERR_INVAL;
    pthread_mutex_lock(&tx->lock);
    /* The closing write must land after the last record's head update, and
     * on the process_vm path a put-with-signal's signal can still be on its
     * way when a later immediate put lands (it would overwrite the closed
     * bit): wait for every signal first. */
    netvm_status_t st = netvm_flush(tx->ctx, tx->peer);
    if (st == NETVM_OK)
        st = netvm_put_imm(tx->ctx, tx->rs, tx->head_off, tx->head << 1 | 1, 0);
    pthread_mutex_unlock(&tx->lock);
    tx_free(tx);
    return st;
}
