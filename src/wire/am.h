/* Active messages: the requests a target's progress engine executes for an
 * initiator (atomics the link cannot do natively) and the replies to them.
 * (and the notifications and signals that need the target's CPU on links
 * that cannot deliver them directly). Fixed-size, versioned, little-endian; decoding checks every field's range
 * so a malformed message is rejected, never acted on. */
#ifndef NV_WIRE_AM_H
#define NV_WIRE_AM_H

#include <stddef.h>
#include <stdint.h>

#define NV_AM_VERSION 2
#define NV_AM_SIZE    64   /* every encoded message is exactly this long */

enum nv_am_kind {
    NV_AM_ATOMIC = 1,   /* initiator -> target: run an atomic on (slot, off) */
    NV_AM_REPLY  = 2,   /* target -> initiator: status and result of a request */
    NV_AM_NOTIFY = 3,   /* a notification put: operand is the value */
    NV_AM_COUNT  = 4,   /* a counting notification: slot is the counter, operand the increment */
    NV_AM_SIGNAL = 5,   /* set (op 0) or add (op 1) operand at (slot, key, off) */
    NV_AM_ERROR  = 6,   /* target -> initiator: an operation sent with NV_AM_F_REPLY_ERR failed
                           (status); reported by the initiator's next flush */
    NV_AM_KIND_MAX
};

enum {
    NV_AM_F_REPLY  = 1u << 0,   /* NOTIFY, COUNT, SIGNAL: answer with a REPLY (ATOMIC always does) */
    NV_AM_F_NOTIFY = 1u << 1,   /* ATOMIC, SIGNAL: a completer notification at the target, with tag */
    NV_AM_F_REPLY_ERR = 1u << 2,   /* SIGNAL: answer only a failure, with an ERROR (links whose flush is
                                      a round trip on the same ordered stream: it arrives before the
                                      flush's answer) */
    NV_AM_F_ALL    = NV_AM_F_REPLY | NV_AM_F_NOTIFY | NV_AM_F_REPLY_ERR,
};

struct nv_am {
    uint8_t  kind;
    uint8_t  op;        /* netvm_atomic_op_t for NV_AM_ATOMIC, netvm_signal_op_t for NV_AM_SIGNAL */
    uint8_t  flags;     /* NV_AM_F_* */
    uint16_t status;    /* netvm_status_t for NV_AM_REPLY */
    int32_t  src_rank;
    uint32_t req_id;    /* initiator's request, echoed in the reply */
    uint32_t slot;      /* target segment slot */
    uint64_t key;       /* target segment key */
    uint64_t off;
    uint64_t operand;   /* ATOMIC: operand; REPLY: result */
    uint64_t compare;
    uint64_t tag;       /* with NV_AM_F_NOTIFY */
};

void nv_am_encode(const struct nv_am *m, uint8_t out[NV_AM_SIZE]);
/* 0 on success, -1 if buf is not a well-formed message of this version. */
int  nv_am_decode(const uint8_t *buf, size_t len, struct nv_am *m);

#endif
