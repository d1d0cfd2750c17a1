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

#include "wire/am.h"

#include <stdatomic.h>
#include <stdint.h>

#define NV_SHM_MAGIC   0x314b4c424d564e4eull   /* "NNVMBLK1" */
#define NV_SHM_VERSION 2
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

struct nv_shm_ring_slot {
    _Atomic uint64_t seq;        /* Vyukov bounded-queue sequence number */
    uint8_t data[NV_AM_SIZE];
} __attribute__((aligned(NV_CACHELINE)));

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
    /* sleeping: the progress thread is (about to be) in epoll_wait and a
     * producer must ring the doorbell; pollers: threads spinning on the ring,
     * which make the doorbell unnecessary */
    _Atomic uint32_t sleeping __attribute__((aligned(NV_CACHELINE)));
    _Atomic uint32_t pollers;
    _Atomic uint32_t reply_sleepers;   /* threads asleep until a reply arrives */
    /* odd while this process is inside a direct access to some peer */
    _Atomic uint64_t op_seq __attribute__((aligned(NV_CACHELINE)));
};

static inline struct nv_shm_seg *nv_shm_segs(struct nv_shm_hdr *h)
{
    return (struct nv_shm_seg *)((char *)h + h->seg_off);
}

static inline struct nv_shm_ring_slot *nv_shm_ring(struct nv_shm_hdr *h)
{
    return (struct nv_shm_ring_slot *)((char *)h + h->ring_off);
}

/* Multi-producer enqueue; 0 on success, -1 if the ring is full. */
static inline int nv_shm_ring_push(struct nv_shm_hdr *h, const uint8_t msg[NV_AM_SIZE])
{
    struct nv_shm_ring_slot *ring = nv_shm_ring(h);
    uint64_t mask = h->ring_size - 1;
    uint64_t pos = atomic_load_explicit(&h->ring_tail, memory_order_relaxed);
    for (;;) {
        struct nv_shm_ring_slot *s = &ring[pos & mask];
        uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
        int64_t diff = (int64_t)(seq - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(&h->ring_tail, &pos, pos + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
                for (int i = 0; i < NV_AM_SIZE; i++)
                    s->data[i] = msg[i];
                atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (diff < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(&h->ring_tail, memory_order_relaxed);
        }
    }
}

/* Single-consumer dequeue (the caller holds the consumer lock); 1 if a
 * message was copied out, 0 if the ring is empty. */
static inline int nv_shm_ring_pop(struct nv_shm_hdr *h, uint8_t msg[NV_AM_SIZE])
{
    struct nv_shm_ring_slot *ring = nv_shm_ring(h);
    uint64_t mask = h->ring_size - 1;
    uint64_t pos = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
    struct nv_shm_ring_slot *s = &ring[pos & mask];
    if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
        return 0;
    for (int i = 0; i < NV_AM_SIZE; i++)
        msg[i] = s->data[i];
    atomic_store_explicit(&h->ring_head, pos + 1, memory_order_relaxed);
    atomic_store_explicit(&s->seq, pos + mask + 1, memory_order_release);
    return 1;
}

static inline int nv_shm_ring_nonempty(struct nv_shm_hdr *h)
{
    uint64_t pos = atomic_load_explicit(&h->ring_head, memory_order_relaxed);
    struct nv_shm_ring_slot *s = &nv_shm_ring(h)[pos & (h->ring_size - 1)];
    return atomic_load_explicit(&s->seq, memory_order_acquire) == pos + 1;
}

#endif
