/* A bounded multi-producer, single-consumer ring of fixed-size records
 * (Vyukov's bounded queue: each slot carries a sequence number that says
 * whose turn it is). Lock-free for producers, usable between processes: the
 * ring may live in shared memory, described by a view each side builds over
 * its own mapping. A slot is an _Atomic uint64_t sequence number followed
 * by the record, `stride` bytes in all. */
#ifndef NV_UTIL_MPSC_RING_H
#define NV_UTIL_MPSC_RING_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct nv_mpsc {
    _Atomic uint64_t *head;   /* the consumer's position */
    _Atomic uint64_t *tail;   /* the producers' position */
    uint8_t          *slots;
    uint64_t          mask;   /* slot count - 1 (a power of two) */
    size_t            stride; /* bytes per slot */
    size_t            size;   /* bytes per record (stride - 8 at most) */
};

static inline _Atomic uint64_t *nv_mpsc_seq(const struct nv_mpsc *q, uint64_t pos)
{
    return (_Atomic uint64_t *)(void *)(q->slots + (pos & q->mask) * q->stride);
}

static inline uint8_t *nv_mpsc_rec(const struct nv_mpsc *q, uint64_t pos)
{
    return q->slots + (pos & q->mask) * q->stride + sizeof(uint64_t);
}

/* Before the ring is shared. */
static inline void nv_mpsc_init(const struct nv_mpsc *q)
{
    for (uint64_t i = 0; i <= q->mask; i++)
        atomic_store_explicit(nv_mpsc_seq(q, i), i, memory_order_relaxed);
    atomic_store_explicit(q->head, 0, memory_order_relaxed);
    atomic_store_explicit(q->tail, 0, memory_order_relaxed);
}

/* A hint before a push: fetch the slot the next push will likely fill, in
 * the state a write needs, so its transfer from the consumer's cache
 * overlaps the producer's other work. */
static inline void nv_mpsc_prefetch(const struct nv_mpsc *q)
{
    uint64_t pos = atomic_load_explicit(q->tail, memory_order_relaxed);
    __builtin_prefetch(nv_mpsc_seq(q, pos), 1, 3);
}

/* 0 on success, -1 if the ring is full. The record is visible to the
 * consumer (release) with everything this thread wrote before. */
static inline int nv_mpsc_push(const struct nv_mpsc *q, const void *rec)
{
    uint64_t pos = atomic_load_explicit(q->tail, memory_order_relaxed);
    for (;;) {
        _Atomic uint64_t *seq = nv_mpsc_seq(q, pos);
        int64_t diff = (int64_t)(atomic_load_explicit(seq, memory_order_acquire) - pos);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(q->tail, &pos, pos + 1, memory_order_relaxed,
                                                      memory_order_relaxed)) {
                memcpy(nv_mpsc_rec(q, pos), rec, q->size);
                atomic_store_explicit(seq, pos + 1, memory_order_release);
                return 0;
            }
        } else if (diff < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(q->tail, memory_order_relaxed);
        }
    }
}

/* The single consumer: 1 if a record was copied out, 0 if the ring is empty. */
static inline int nv_mpsc_pop(const struct nv_mpsc *q, void *rec)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    _Atomic uint64_t *seq = nv_mpsc_seq(q, pos);
    if (atomic_load_explicit(seq, memory_order_acquire) != pos + 1)
        return 0;
    memcpy(rec, nv_mpsc_rec(q, pos), q->size);
    atomic_store_explicit(q->head, pos + 1, memory_order_relaxed);
    atomic_store_explicit(seq, pos + q->mask + 1, memory_order_release);
    return 1;
}

static inline int nv_mpsc_nonempty(const struct nv_mpsc *q)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    return atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) == pos + 1;
}

#endif
