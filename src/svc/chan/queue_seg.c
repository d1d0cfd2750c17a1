/* Allocating a queue segment (one ring or many) in the receiver's memory. */
#include "queue_seg.h"

#include <string.h>

netvm_status_t nv_queue_seg_create(netvm_ctx_t *ctx, const char *name, size_t rings,
                                   const netvm_chan_opts_t *opts, struct nv_queue_seg *qs)
{
    char seg_name[64];
    netvm_status_t st = nv_chan_seg_name(name, seg_name);
    if (st)
        return st;
    if ((st = nv_chan_geometry(opts, &qs->ring_bytes, &qs->max_msg)))
        return st;
    qs->rings = rings;
    size_t len = nv_chan_data_off(rings, qs->ring_bytes, rings);
    void *addr;
    /* atomics: senders take their ring with a fetch-add on the claim word */
    if ((st = netvm_alloc_shared(ctx, len, NETVM_RWA, seg_name, &addr, &qs->seg)))
        return st;
    qs->base = addr;
    /* senders may import the segment as soon as it is exported, before
     * this header exists: the magic word goes last, and a sender that reads
     * it still 0 looks again (ring_tx.c) */
    uint64_t hdr[NV_CHAN_HDR_WORDS] = { 0, qs->ring_bytes, qs->max_msg, rings };
    memcpy(qs->base, hdr, sizeof hdr);
    __atomic_store_n((uint64_t *)qs->base, (uint64_t)NV_CHAN_MAGIC, __ATOMIC_RELEASE);
    return NETVM_OK;
}
