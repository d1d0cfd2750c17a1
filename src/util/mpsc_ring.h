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

/* --- records of several slots ------------------------------------------------
 * A record of n bytes takes the consecutive slots its 4-byte length and
 * bytes need (stride - 8 bytes of each). A producer reserves them all with
 * one step of the tail (the last slot free for this lap means every one
 * before it is: the consumer frees in order), fills them, and publishes
 * the first slot last, so the consumer sees a record whole or not at all. */

static inline size_t nv_mpsc_rec_slots(const struct nv_mpsc *q, size_t n)
{
    size_t per = q->stride - sizeof(uint64_t);
    return (n + 4 + per - 1) / per;
}

/* Copy n bytes of src into the record's data starting at byte off. */
static inline void nv_mpsc_rec_write(const struct nv_mpsc *q, uint64_t pos, size_t off, const void *src, size_t n)
{
    size_t per = q->stride - sizeof(uint64_t);
    const uint8_t *s = src;
    while (n) {
        size_t in = off % per, take = per - in < n ? per - in : n;
        memcpy(nv_mpsc_rec(q, pos + off / per) + in, s, take);
        s += take;
        off += take;
        n -= take;
    }
}

/* Push the record a (alen bytes) followed by b (blen bytes): 0, -1 if the
 * ring is full now, -2 if the record can never fit (more than half the
 * ring) or is empty. */
static inline int nv_mpsc_push_bytes(const struct nv_mpsc *q, const void *a, size_t alen, const void *b,
                                     size_t blen)
{
    size_t n = alen + blen, k = nv_mpsc_rec_slots(q, n);
    if (!n || k > (q->mask + 1) / 2 || n > UINT32_MAX)
        return -2;   /* an empty record would read as an empty ring */
    uint64_t pos = atomic_load_explicit(q->tail, memory_order_relaxed);
    for (;;) {
        uint64_t last = pos + k - 1;
        int64_t diff = (int64_t)(atomic_load_explicit(nv_mpsc_seq(q, last), memory_order_acquire) - last);
        if (diff == 0) {
            if (atomic_compare_exchange_weak_explicit(q->tail, &pos, pos + k, memory_order_relaxed,
                                                      memory_order_relaxed))
                break;
        } else if (diff < 0) {
            return -1;
        } else {
            pos = atomic_load_explicit(q->tail, memory_order_relaxed);
        }
    }
    uint8_t len[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24) };
    nv_mpsc_rec_write(q, pos, 0, len, 4);
    nv_mpsc_rec_write(q, pos, 4, a, alen);
    if (blen)
        nv_mpsc_rec_write(q, pos, 4 + alen, b, blen);
    for (uint64_t i = k; i-- > 0;)
        atomic_store_explicit(nv_mpsc_seq(q, pos + i), pos + i + 1, memory_order_release);
    return 0;
}

/* The single consumer: copy the next record into out (cap bytes); returns
 * its length, 0 if the ring is empty, or SIZE_MAX if it was malformed or
 * longer than cap (it is dropped, all its slots). */
static inline size_t nv_mpsc_pop_bytes(const struct nv_mpsc *q, void *out, size_t cap)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    if (atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) != pos + 1)
        return 0;
    const uint8_t *first = nv_mpsc_rec(q, pos);
    size_t n = (size_t)first[0] | (size_t)first[1] << 8 | (size_t)first[2] << 16 | (size_t)first[3] << 24;
    size_t k = nv_mpsc_rec_slots(q, n);
    int ok = n && k <= (q->mask + 1) / 2 && n <= cap;
    if (!n || k > (q->mask + 1) / 2)
        k = 1;   /* a record no producer of ours writes: skip its first slot only */
    for (uint64_t i = 1; i < k; i++)
        while (atomic_load_explicit(nv_mpsc_seq(q, pos + i), memory_order_acquire) != pos + i + 1)
            ;   /* published before the first: only a producer dying mid-write stops here */
    if (ok) {
        size_t per = q->stride - sizeof(uint64_t), off = 4, left = n;
        uint8_t *o = out;
        while (left) {
            size_t in = off % per, take = per - in < left ? per - in : left;
            memcpy(o, nv_mpsc_rec(q, pos + off / per) + in, take);
            o += take;
            off += take;
            left -= take;
        }
    }
    atomic_store_explicit(q->head, pos + k, memory_order_relaxed);
    for (uint64_t i = 0; i < k; i++)
        atomic_store_explicit(nv_mpsc_seq(q, pos + i), pos + i + q->mask + 1, memory_order_release);
    return ok ? n : SIZE_MAX;
}

static inline int nv_mpsc_nonempty(const struct nv_mpsc *q)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    return atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) == pos + 1;
}

#endif
