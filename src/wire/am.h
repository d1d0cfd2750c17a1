/* Active messages: the requests a target's progress engine executes for an
 * initiator (atomics the link cannot do natively) and the replies to them.
 * Fixed-size, versioned, little-endian; decoding checks every field's range
 * so a malformed message is rejected, never acted on. */
#ifndef NV_WIRE_AM_H
#define NV_WIRE_AM_H

#include <stddef.h>
#include <stdint.h>

#define NV_AM_VERSION 1
#define NV_AM_SIZE    64   /* every encoded message is exactly this long */

enum nv_am_kind {
    NV_AM_ATOMIC = 1,   /* initiator -> target: run an atomic on (slot, off) */
    NV_AM_REPLY  = 2,   /* target -> initiator: status and result of a request */
    NV_AM_KIND_MAX
};

struct nv_am {
    uint8_t  kind;
    uint8_t  op;        /* netvm_atomic_op_t for NV_AM_ATOMIC */
    uint16_t status;    /* netvm_status_t for NV_AM_REPLY */
    int32_t  src_rank;
    uint32_t req_id;    /* initiator's request, echoed in the reply */
    uint32_t slot;      /* target segment slot */
    uint64_t key;       /* target segment key */
    uint64_t off;
    uint64_t operand;   /* ATOMIC: operand; REPLY: result */
    uint64_t compare;
};

void nv_am_encode(const struct nv_am *m, uint8_t out[NV_AM_SIZE]);
/* 0 on success, -1 if buf is not a well-formed message of this version. */
int  nv_am_decode(const uint8_t *buf, size_t len, struct nv_am *m);

#endif
