/* The shared block of the shm link: one memfd per process, mapped by every
 * peer on the machine. It holds what a NIC would: the table of exported
 * segments an initiator checks before touching the target's memory, the
 * active-message ring the target's progress engine drains, the flags that
 * say whether the target must be woken, and the word through which this
 * process, as an initiator, tells exporters it is inside a direct access
 * (the revocation fence).
 *
 * Every field another process reads is either written once before the block
 * is shared, or an atomic with the ordering stated where it is used. */
#ifndef NV_LINK_SHM_BLOCK_H
#define NV_LINK_SHM_BLOCK_H

#include "util/mpsc_ring.h"

#include <stdatomic.h>
#include <stdint.h>

#define NV_SHM_MAGIC   0x314b4c424d564e4eull   /* "NNVMBLK1" */
#define NV_SHM_VERSION 6
#define NV_SHM_NAME_MAX 64
#define NV_CACHELINE 64

/* entry state, low 2 bits of the entry word; the rest is a generation that
 * changes on every publish, so a stale import never matches a new segment */
enum { NV_SEG_FREE = 0, NV_SEG_BUSY = 1, NV_SEG_LIVE = 2, NV_SEG_REVOKED = 3 };
#define NV_SEG_STATE(w) ((unsigned)((w) & 3u))

struct nv_shm_seg {
    _Atomic uint64_t word;       /* gen << 2 | state: a seqlock for the fields below */
    uint64_t key;
    uint64_t addr;
    uint64_t len;
    uint64_t name_hash;
    uint32_t rights;
    int32_t  memfd;              /* fd number in the owner, -1 if not memfd-backed */
    char     name[NV_SHM_NAME_MAX];
} __attribute__((aligned(NV_CACHELINE)));

/* One slot of the message ring: a record (util/mpsc_ring.h) takes as many
 * consecutive slots as its bytes need. */
struct nv_shm_ring_slot {
    _Atomic uint64_t seq;        /* Vyukov bounded-queue sequence number */
    uint8_t data[NV_CACHELINE - 8];
} __attribute__((aligned(NV_CACHELINE)));

#define NV_SHM_OP_SLOTS 64

struct nv_shm_opslot {
    _Atomic uint64_t seq __attribute__((aligned(NV_CACHELINE)));
};

/* A producing thread's note of its reservation in a peer's ring (the
 * note word of util/mpsc_ring.h), kept in the producer's own block from
 * before it tries to take slots until it has published them. A producer
 * that dies in between (killed while it copied its message in) would
 * leave the consumer waiting at that record for good, and every other
 * producer's records behind it: the consumer, told of the death, finishes
 * such a record as void (shm_msg.c). */
struct nv_shm_pushrec {
    _Atomic uint64_t pos __attribute__((aligned(NV_CACHELINE)));   /* the note; 0: none */
    _Atomic uint32_t target;     /* the consumer's pid */
    _Atomic uint32_t k;          /* the slots it takes */
};

struct nv_shm_hdr {
    uint64_t magic;
    uint32_t version;
    int32_t  rank;
    int32_t  pid;
    int32_t  doorbell_fd;        /* eventfd number in the owner */
    uint32_t nseg;               /* capacity of the segment table */
    uint32_t ring_size;          /* power of two */
    uint64_t seg_off, ring_off, block_len;
    _Atomic uint32_t seg_high;   /* slots below this may be in use (bounds name scans) */

    _Atomic uint64_t ring_head __attribute__((aligned(NV_CACHELINE)));  /* consumer */
    _Atomic uint64_t ring_tail __attribute__((aligned(NV_CACHELINE)));  /* producers */
    /* sleeping: threads that serve this process's ring and are (about to
     * be) asleep on its epoll set, so a producer must ring the doorbell
     * (a count: the progress thread and an application thread may both);
     * rung: the doorbell was rung and not yet taken (once is enough);
     * pollers: threads spinning on the ring, which make the doorbell
     * unnecessary */
    _Atomic uint32_t sleeping __attribute__((aligned(NV_CACHELINE)));
    _Atomic uint32_t rung;
    _Atomic uint32_t pollers;
    /* The revocation fence's words (shm_rma.c), one per initiating thread
     * of this process: slot i < NV_SHM_OP_SLOTS is odd while the thread
     * holding it is inside a direct access to some peer; the last slot,
     * shared by threads beyond those, counts the threads inside. op_high:
     * slots below it have been used. */
    _Atomic uint32_t op_high;
    struct nv_shm_opslot op[NV_SHM_OP_SLOTS + 1];
    /* by the same thread slots; threads beyond NV_SHM_OP_SLOTS share the
     * last one, one push at a time (shm_link.push_shared) */
    struct nv_shm_pushrec push[NV_SHM_OP_SLOTS + 1];
};

static inline struct nv_shm_seg *nv_shm_segs(struct nv_shm_hdr *h)
{
    return (struct nv_shm_seg *)((char *)h + h->seg_off);
}

static inline struct nv_shm_ring_slot *nv_shm_ring(struct nv_shm_hdr *h)
{
    return (struct nv_shm_ring_slot *)((char *)h + h->ring_off);
}

/* The message ring, as the generic MPSC ring sees it. */
static inline struct nv_mpsc nv_shm_ring_view(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = { .head = &h->ring_head, .tail = &h->ring_tail,
                         .slots = (uint8_t *)nv_shm_ring(h), .mask = h->ring_size - 1,
                         .stride = sizeof(struct nv_shm_ring_slot), .size = 0 };
    return q;
}

static inline int nv_shm_ring_nonempty(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    return nv_mpsc_nonempty(&q);
}

#endif
