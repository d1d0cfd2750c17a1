/* A queue segment of the receiver: its rings, heads and attach blocks
 * (layout in chan_int.h). */
#ifndef NV_SVC_CHAN_QUEUE_SEG_H
#define NV_SVC_CHAN_QUEUE_SEG_H

#include "chan_int.h"

struct nv_queue_seg {
    netvm_seg_t *seg;
    uint8_t     *base;
    size_t       rings, ring_bytes, max_msg;
};

/* Allocate, export under "nvchan.<name>" and write the header. */
netvm_status_t nv_queue_seg_create(netvm_ctx_t *ctx, const char *name, size_t rings,
                                   const netvm_chan_opts_t *opts, struct nv_queue_seg *qs);

#endif
