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
    /* optional, byte records only: where producers keep the last head they
     * read, so a push need not fetch the consumer's line each time (it
     * lags, which only understates the room; NULL: read the head always) */
    _Atomic uint64_t *head_seen;
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
 * A record of n bytes takes the consecutive slots that its first slot's
 * sequence word, a 4-byte length and its bytes need. The bytes are
 * contiguous in the ring's memory: they run on over the sequence words of
 * the slots after the first (continuing at the ring's start past its end),
 * so a record is copied in and out with one or two memcpy, not one per
 * slot, and only the first slot's word says anything. A producer reserves
 * the slots with one step of the tail once the consumer's head says they
 * are free, fills them, and publishes the first slot last, so the consumer
 * sees a record whole or not at all. The consumer, done with a record,
 * writes every one of its slots' words back to "free for the next lap"
 * before it moves the head: the word of a slot that held bytes could
 * otherwise read, when a later record starts there, as published. */

#define NV_MPSC_REC_HDR (sizeof(uint64_t) + 4)   /* the first slot's word, the length */

static inline size_t nv_mpsc_rec_slots(const struct nv_mpsc *q, size_t n)
{
    return (n + NV_MPSC_REC_HDR + q->stride - 1) / q->stride;
}

/* Where byte off of the record at pos lies, and how many bytes follow it
 * before the ring's end. */
static inline uint8_t *nv_mpsc_rec_at(const struct nv_mpsc *q, uint64_t pos, size_t off, size_t *room)
{
    size_t ring = (size_t)(q->mask + 1) * q->stride;
    size_t at = (size_t)(pos & q->mask) * q->stride + NV_MPSC_REC_HDR + off;
    if (at >= ring)
        at -= ring;   /* off is less than half the ring: one lap at most */
    *room = ring - at;
    return q->slots + at;
}

/* Copy n bytes of src into the record's bytes at off (one memcpy, two
 * where the record runs past the ring's end). */
static inline void nv_mpsc_rec_write(const struct nv_mpsc *q, uint64_t pos, size_t off, const void *src, size_t n)
{
    size_t room;
    uint8_t *d = nv_mpsc_rec_at(q, pos, off, &room);
    if (n <= room) {
        memcpy(d, src, n);
        return;
    }
    memcpy(d, src, room);
    memcpy(q->slots, (const uint8_t *)src + room, n - room);
}

static inline void nv_mpsc_rec_read(const struct nv_mpsc *q, uint64_t pos, size_t off, void *dst, size_t n)
{
    size_t room;
    const uint8_t *s = nv_mpsc_rec_at(q, pos, off, &room);
    if (n <= room) {
        memcpy(dst, s, n);
        return;
    }
    memcpy(dst, s, room);
    memcpy((uint8_t *)dst + room, q->slots, n - room);
}

/* A producer's note of its reservation (the shm link's pushrec), so that
 * the consumer can finish what a producer killed before it published
 * would leave unfinished: 0 none; else the slot it tries + 1, stored
 * before each compare-swap, and NV_MPSC_NOTE_WON added the instant after
 * the swap took the slots. A note without the mark names a slot this
 * producer tried: it may have won it (killed right after the swap) or
 * lost it to another producer, who then has a note of its own naming it
 * (nv_mpsc_claim_check tells which). */
#define NV_MPSC_NOTE_WON (1ull << 63)

static inline uint64_t nv_mpsc_note_pos(uint64_t note) { return (note & ~NV_MPSC_NOTE_WON) - 1; }

/* Reserve the slots of a record of n bytes: 0 and *pos, -1 if the ring is
 * full now, -2 if the record can never fit (more than half the ring) or
 * is empty. The caller writes the bytes (nv_mpsc_rec_write) and must then
 * publish, whatever happens: the consumer waits for the record in order.
 * noted (may be NULL): the producer's note, as above (cleared here when
 * the ring is full; the caller clears it once published). */
static inline int nv_mpsc_reserve_noted(const struct nv_mpsc *q, size_t n, uint64_t *pos_out,
                                        _Atomic uint64_t *noted)
{
    size_t k = nv_mpsc_rec_slots(q, n);
    if (!n || k > (q->mask + 1) / 2 || n > UINT32_MAX)
        return -2;   /* an empty record would read as an empty ring */
    uint64_t pos = atomic_load_explicit(q->tail, memory_order_relaxed);
    /* the consumer's release of the head orders its reads of the slots,
     * and its writes of their words, before our writes (through head_seen
     * too: stored with release after an acquiring read) */
    uint64_t head = q->head_seen ? atomic_load_explicit(q->head_seen, memory_order_acquire)
                                 : atomic_load_explicit(q->head, memory_order_acquire);
    for (;;) {
        if (pos + k - head > q->mask + 1) {
            uint64_t h = atomic_load_explicit(q->head, memory_order_acquire);
            if (h != head) {
                head = h;
                if (q->head_seen)
                    atomic_store_explicit(q->head_seen, h, memory_order_release);
                continue;
            }
            uint64_t again = atomic_load_explicit(q->tail, memory_order_relaxed);
            if (again == pos) {
                if (noted)   /* it holds nothing: a stale note would hold up a dead one's */
                    atomic_store_explicit(noted, 0, memory_order_release);
                return -1;
            }
            pos = again;
            continue;
        }
        /* the swap releases the note: a consumer that reads the tail past
         * pos (acquire) sees the note of whoever won pos */
        if (noted)
            atomic_store_explicit(noted, pos + 1, memory_order_release);
        if (atomic_compare_exchange_weak_explicit(q->tail, &pos, pos + k, memory_order_release,
                                                  memory_order_relaxed))
            break;
    }
    if (noted)
        atomic_store_explicit(noted, (pos + 1) | NV_MPSC_NOTE_WON, memory_order_relaxed);
    uint8_t len[4] = { (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24) };
    memcpy(nv_mpsc_rec(q, pos), len, 4);
    *pos_out = pos;
    return 0;
}

/* The consumer, about a dead producer's note naming pos without the mark
 * (it tried pos; did it win?). live_names(arg, pos) says whether a live
 * producer's note names pos now; every producer that can push must be
 * asked, and must note before its swap (nv_mpsc_reserve_noted).
 *   NV_MPSC_CLAIM_NONE: nothing to do: taken in already, published, or
 *     never taken by anyone (the tail has not passed it: a dead producer
 *     cannot take it now);
 *   NV_MPSC_CLAIM_LIVE: a live producer names it: it won it and will
 *     publish, or lost it and is about to note its next try; ask again;
 *   NV_MPSC_CLAIM_DEAD: taken and no live producer names it: a dead one
 *     won it and it will never be published (nv_mpsc_finish).
 * Why DEAD is sound: whoever won pos noted it before its swap and keeps
 * the note until it has published; the tail read after the swap shows the
 * note, and the last look at pos's word, after the notes, shows a publish
 * that came before a note was cleared. */
enum nv_mpsc_claim { NV_MPSC_CLAIM_NONE, NV_MPSC_CLAIM_LIVE, NV_MPSC_CLAIM_DEAD };

static inline enum nv_mpsc_claim nv_mpsc_claim_check(const struct nv_mpsc *q, uint64_t pos,
                                                     int (*live_names)(void *arg, uint64_t pos), void *arg)
{
    uint64_t head = atomic_load_explicit(q->head, memory_order_acquire);
    if (pos < head || atomic_load_explicit(q->tail, memory_order_acquire) <= pos)
        return NV_MPSC_CLAIM_NONE;
    if (atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) == pos + 1)
        return NV_MPSC_CLAIM_NONE;
    if (live_names(arg, pos))
        return NV_MPSC_CLAIM_LIVE;
    if (atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) == pos + 1)
        return NV_MPSC_CLAIM_NONE;
    return NV_MPSC_CLAIM_DEAD;
}

static inline int nv_mpsc_reserve(const struct nv_mpsc *q, size_t n, uint64_t *pos_out)
{
    return nv_mpsc_reserve_noted(q, n, pos_out, NULL);
}

static inline void nv_mpsc_publish(const struct nv_mpsc *q, uint64_t pos)
{
    atomic_store_explicit(nv_mpsc_seq(q, pos), pos + 1, memory_order_release);
}

/* The consumer finishes the record whose producer reserved k slots at pos
 * and died before publishing them: as a record of all k slots' bytes that
 * begins with the n bytes of rec (the rest is whatever the slots held). */
static inline void nv_mpsc_finish(const struct nv_mpsc *q, uint64_t pos, size_t k, const void *rec, size_t n)
{
    size_t len = k * q->stride - NV_MPSC_REC_HDR;
    uint8_t l[4] = { (uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24) };
    memcpy(nv_mpsc_rec(q, pos), l, 4);
    nv_mpsc_rec_write(q, pos, 0, rec, n);
    nv_mpsc_publish(q, pos);
}

/* Push the record a (alen bytes) followed by b (blen bytes): 0, -1 if the
 * ring is full now, -2 if the record can never fit (more than half the
 * ring) or is empty. */
static inline int nv_mpsc_push_bytes(const struct nv_mpsc *q, const void *a, size_t alen, const void *b,
                                     size_t blen)
{
    uint64_t pos;
    int rc = nv_mpsc_reserve(q, alen + blen, &pos);
    if (rc != 0)
        return rc;
    nv_mpsc_rec_write(q, pos, 0, a, alen);
    if (blen)
        nv_mpsc_rec_write(q, pos, alen, b, blen);
    nv_mpsc_publish(q, pos);
    return 0;
}

/* The consumer's view of the record at its head (nv_mpsc_peek_bytes). */
struct nv_mpsc_taken {
    uint64_t pos;
    size_t   n;       /* its length, as its first slot says */
    size_t   k;       /* the slots it takes (1 if its length is not one a producer writes) */
    int      ok;      /* its length is one a producer writes */
};

/* The single consumer: 1 and *t if a record is published at the head, 0
 * if the ring is empty. Its bytes stay in the ring (nv_mpsc_rec_read,
 * nv_mpsc_rec_at) until nv_mpsc_release. */
static inline int nv_mpsc_peek_bytes(const struct nv_mpsc *q, struct nv_mpsc_taken *t)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    if (atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) != pos + 1)
        return 0;
    const uint8_t *first = nv_mpsc_rec(q, pos);
    size_t n = (size_t)first[0] | (size_t)first[1] << 8 | (size_t)first[2] << 16 | (size_t)first[3] << 24;
    size_t k = nv_mpsc_rec_slots(q, n);
    t->pos = pos;
    t->n = n;
    t->ok = n && k <= (q->mask + 1) / 2;
    t->k = t->ok ? k : 1;   /* a record no producer of ours writes: skip its first slot only */
    return 1;
}

/* Give the record's slots back to the producers. */
static inline void nv_mpsc_release(const struct nv_mpsc *q, const struct nv_mpsc_taken *t)
{
    for (uint64_t i = 0; i < t->k; i++)
        atomic_store_explicit(nv_mpsc_seq(q, t->pos + i), t->pos + i + q->mask + 1, memory_order_relaxed);
    atomic_store_explicit(q->head, t->pos + t->k, memory_order_release);
}

/* The single consumer: copy the next record into out (cap bytes); returns
 * its length, 0 if the ring is empty, or SIZE_MAX if it was malformed or
 * longer than cap (it is dropped, all its slots). */
static inline size_t nv_mpsc_pop_bytes(const struct nv_mpsc *q, void *out, size_t cap)
{
    struct nv_mpsc_taken t;
    if (!nv_mpsc_peek_bytes(q, &t))
        return 0;
    int ok = t.ok && t.n <= cap;
    if (ok)
        nv_mpsc_rec_read(q, t.pos, 0, out, t.n);
    nv_mpsc_release(q, &t);
    return ok ? t.n : SIZE_MAX;
}

/* Called by threads that are not the consumer too, as a hint: their head
 * may be a lap stale, and the word they look at then record bytes being
 * written (tests/tsan.supp); the consumer re-reads the head itself. */
static inline int nv_mpsc_nonempty(const struct nv_mpsc *q)
{
    uint64_t pos = atomic_load_explicit(q->head, memory_order_relaxed);
    return atomic_load_explicit(nv_mpsc_seq(q, pos), memory_order_acquire) == pos + 1;
}

#endif
