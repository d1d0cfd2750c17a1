/* The shm link's message ring (link/shm/shm_block.h over util/mpsc_ring.h):
 * records of several 64-byte slots, their bytes contiguous in the ring. Every length from 1 to 2000 bytes
 * round-trips intact across the ring's wrap-around; a record of more than
 * half the ring is refused (-2); a full ring refuses (-1) and frees up as
 * the consumer pops; a malformed first slot is dropped (SIZE_MAX) and the
 * next record still arrives, and so is a record longer than the consumer's
 * buffer, all of it; a record's bytes that lay over later slots' words,
 * even bytes that spell "published" for the next lap, never read as a
 * record once consumed; several producer threads and one consumer
 * move 200000 records of random lengths, each producer's in order, none
 * lost or duplicated, sharing the head they last read. A dead
 * producer's note (nv_mpsc_claim_check): won at the swap and never
 * published reads DEAD and is finished; a slot a live producer still
 * names reads LIVE; one taken in, published or never taken reads NONE;
 * a producer that finds the ring full keeps no note. Bounded by counts,
 * never by time. */
#include "check.h"
#include "link/shm/shm_block.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define RING     128                              /* slots */
#define PER      (NV_CACHELINE - 8)               /* a slot's bytes after its word */
#define FITS(k)  ((k) * NV_CACHELINE - 12)        /* the longest record of k slots */
#define MAX_REC  FITS(RING / 2)                   /* the longest record: half the ring */
#define THREADS  4
#define TOTAL    200000                           /* records through the threaded ring */

static struct nv_shm_hdr *make_ring(void)
{
    size_t off = (sizeof(struct nv_shm_hdr) + NV_CACHELINE - 1) & ~(size_t)(NV_CACHELINE - 1);
    size_t total = off + RING * sizeof(struct nv_shm_ring_slot);
    struct nv_shm_hdr *h = aligned_alloc(NV_CACHELINE, total);
    CHECK(h);
    memset(h, 0, total);
    h->ring_size = RING;
    h->ring_off = off;
    struct nv_mpsc q = nv_shm_ring_view(h);
    nv_mpsc_init(&q);
    return h;
}

static uint8_t pattern(uint64_t tag, size_t i)
{
    return (uint8_t)(tag * 131 + i * 7 + (i >> 8) + (tag >> 8));
}

static void fill(uint8_t *buf, size_t n, uint64_t tag)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(tag, i);
}

static int intact(const uint8_t *buf, size_t n, uint64_t tag)
{
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(tag, i))
            return 0;
    return 1;
}

/* Pop one record, which must be n bytes of pattern tag, and nothing
 * written past it. */
static void pop_expect(const struct nv_mpsc *q, size_t n, uint64_t tag)
{
    static uint8_t out[8192];
    memset(out, 0xcc, n + 64 < sizeof out ? n + 64 : sizeof out);
    size_t r = nv_mpsc_pop_bytes(q, out, sizeof out);
    if (r != n)
        FAILF("popped %zu bytes, wanted %zu (tag %llu)", r, n, (unsigned long long)tag);
    CHECK(intact(out, n, tag));
    if (n + 1 < sizeof out)
        CHECK(out[n] == 0xcc);
}

static void pop_empty(const struct nv_mpsc *q)
{
    uint8_t out[16];
    CHECK(!nv_mpsc_nonempty(q));
    CHECK(nv_mpsc_pop_bytes(q, out, sizeof out) == 0);
}

static uint64_t tail_of(const struct nv_mpsc *q) { return atomic_load(q->tail); }

/* --- every length, across the wrap-around ------------------------------------------------ */

static void every_length(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t buf[4096];
    /* in flight: lengths in push order */
    size_t fifo[RING], fhead = 0, ftail = 0;
    long straddled = 0, split = 0;
    uint64_t start = tail_of(&q);
    for (size_t n = 1; n <= 2000; n++) {
        fill(buf, n, n);
        size_t k = nv_mpsc_rec_slots(&q, n);
        CHECK(k == (n + 12 + NV_CACHELINE - 1) / NV_CACHELINE && k <= RING / 2);
        int rc;
        for (;;) {
            uint64_t pos = tail_of(&q);
            /* the first and the second part may be split anywhere */
            size_t a = n % 3 == 0 ? n : (n * 37) % (n + 1);
            rc = nv_mpsc_push_bytes(&q, buf, a, buf + a, n - a);
            if (rc == 0) {
                straddled += (pos & (RING - 1)) + k > RING;
                split += a != n;
                CHECK(tail_of(&q) == pos + k);
                break;
            }
            CHECK(rc == -1);   /* full: the consumer makes room */
            CHECK(fhead != ftail);
            pop_expect(&q, fifo[fhead % RING], fifo[fhead % RING]);
            fhead++;
        }
        fifo[ftail++ % RING] = n;
        CHECK(ftail - fhead <= RING);
        if (n % 5 == 0) {   /* the consumer sometimes keeps up, sometimes lags */
            pop_expect(&q, fifo[fhead % RING], fifo[fhead % RING]);
            fhead++;
        }
    }
    while (fhead != ftail) {
        pop_expect(&q, fifo[fhead % RING], fifo[fhead % RING]);
        fhead++;
    }
    pop_empty(&q);
    /* many laps, and many records across the ring's end */
    CHECK(tail_of(&q) - start > 50 * RING);
    CHECK(straddled > 100 && split > 1000);
}

/* --- too long -------------------------------------------------------------------------- */

static void too_long(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t buf[8192];
    CHECK(nv_mpsc_rec_slots(&q, MAX_REC) == RING / 2 && nv_mpsc_rec_slots(&q, MAX_REC + 1) == RING / 2 + 1);
    uint64_t t0 = tail_of(&q);
    fill(buf, sizeof buf, 77);
    CHECK(nv_mpsc_push_bytes(&q, buf, MAX_REC + 1, NULL, 0) == -2);
    CHECK(nv_mpsc_push_bytes(&q, buf, 100, buf + 100, MAX_REC + 1 - 100) == -2);
    CHECK(nv_mpsc_push_bytes(&q, buf, sizeof buf, NULL, 0) == -2);
    CHECK(nv_mpsc_push_bytes(&q, buf, 0, buf, sizeof buf) == -2);
    CHECK(tail_of(&q) == t0);   /* a refusal takes nothing */
    pop_empty(&q);
    /* exactly half the ring fits, twice */
    CHECK(nv_mpsc_push_bytes(&q, buf, MAX_REC, NULL, 0) == 0);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1000, buf + 1000, MAX_REC - 1000) == 0);
    /* the ring is full now; too long is still -2, not -1 */
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    CHECK(nv_mpsc_push_bytes(&q, buf, MAX_REC + 1, NULL, 0) == -2);
    pop_expect(&q, MAX_REC, 77);
    pop_expect(&q, MAX_REC, 77);
    pop_empty(&q);
}

/* --- a full ring ----------------------------------------------------------------------- */

static void full(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    uint8_t buf[4096];
    const size_t one = FITS(1), two = FITS(1) + 1;   /* one slot; two slots */
    CHECK(nv_mpsc_rec_slots(&q, one) == 1 && nv_mpsc_rec_slots(&q, two) == 2);
    uint64_t tag = 1000;
    size_t fifo[RING + 8], fh = 0, ft = 0;
#define PUSH(n) do { fill(buf, (n), tag + ft); CHECK(nv_mpsc_push_bytes(&q, buf, (n), NULL, 0) == 0); \
                     fifo[ft++] = (n); } while (0)
#define POP() do { pop_expect(&q, fifo[fh], tag + fh); fh++; } while (0)
    for (int i = 0; i < RING; i++)
        PUSH(one);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    CHECK(nv_mpsc_push_bytes(&q, buf, two, NULL, 0) == -1);
    POP();                                                     /* one slot free */
    CHECK(nv_mpsc_push_bytes(&q, buf, two, NULL, 0) == -1);   /* not enough for two */
    PUSH(one);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    POP();
    POP();
    POP();                                                     /* three free */
    PUSH(two);
    CHECK(nv_mpsc_push_bytes(&q, buf, two, NULL, 0) == -1);
    PUSH(1);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    while (fh < ft)
        POP();
    pop_empty(&q);
    /* four records of a quarter of the ring each fill it */
    const size_t quarter = FITS(RING / 4);
    tag = 5000;
    fh = ft = 0;
    for (int i = 0; i < 4; i++)
        PUSH(quarter);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    POP();
    CHECK(nv_mpsc_push_bytes(&q, buf, quarter + 1, NULL, 0) == -1);
    PUSH(quarter);
    CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == -1);
    while (fh < ft)
        POP();
    pop_empty(&q);
#undef PUSH
#undef POP
}

/* --- malformed records ----------------------------------------------------------------- */

/* What a broken or hostile producer could leave: one published slot whose
 * length says len. */
static void push_raw(const struct nv_mpsc *q, uint32_t len)
{
    uint64_t pos = atomic_load(q->tail);
    CHECK(atomic_load(nv_mpsc_seq(q, pos)) == pos);   /* free for this lap */
    uint8_t *r = nv_mpsc_rec(q, pos);
    memset(r, 0xab, PER);
    r[0] = (uint8_t)len;
    r[1] = (uint8_t)(len >> 8);
    r[2] = (uint8_t)(len >> 16);
    r[3] = (uint8_t)(len >> 24);
    atomic_store(q->tail, pos + 1);
    atomic_store_explicit(nv_mpsc_seq(q, pos), pos + 1, memory_order_release);
}

/* Nothing leaked: the whole ring takes one-slot records again. */
static void whole_ring(const struct nv_mpsc *q)
{
    uint8_t buf[FITS(1)];
    for (int i = 0; i < RING; i++) {
        fill(buf, FITS(1), (uint64_t)i);
        CHECK(nv_mpsc_push_bytes(q, buf, FITS(1), NULL, 0) == 0);
    }
    CHECK(nv_mpsc_push_bytes(q, buf, 1, NULL, 0) == -1);
    for (int i = 0; i < RING; i++)
        pop_expect(q, FITS(1), (uint64_t)i);
    pop_empty(q);
}

/* --- dead producers' notes -------------------------------------------------------------- */

static _Atomic uint64_t *live_notes[2];   /* the live producers' notes */

static int notes_name(void *arg, uint64_t pos)
{
    (void)arg;
    for (int i = 0; i < 2; i++) {
        uint64_t n = live_notes[i] ? atomic_load(live_notes[i]) : 0;
        if (n && nv_mpsc_note_pos(n) == pos)
            return 1;
    }
    return 0;
}

static void dead_notes(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    _Atomic uint64_t dead = 0, live = 0;
    uint8_t buf[3 * PER], out[4 * NV_CACHELINE];
    uint64_t p, p2;

    /* a producer killed right after its swap: its note names the slot but
     * not the win, and nobody else names it */
    CHECK(nv_mpsc_reserve_noted(&q, sizeof buf, &p, &dead) == 0);
    CHECK(atomic_load(&dead) == ((p + 1) | NV_MPSC_NOTE_WON));
    atomic_store(&dead, p + 1);
    fill(buf, 100, 7);
    CHECK(nv_mpsc_push_bytes(&q, buf, 100, NULL, 0) == 0);   /* behind it */
    pop_empty(&q);                                           /* held up */
    CHECK(nv_mpsc_claim_check(&q, nv_mpsc_note_pos(atomic_load(&dead)), notes_name, NULL) ==
          NV_MPSC_CLAIM_DEAD);
    uint8_t v = 0xee;
    nv_mpsc_finish(&q, p, nv_mpsc_rec_slots(&q, sizeof buf), &v, 1);
    CHECK(nv_mpsc_pop_bytes(&q, out, sizeof out) == nv_mpsc_rec_slots(&q, sizeof buf) * NV_CACHELINE - 12);
    CHECK(out[0] == 0xee);
    pop_expect(&q, 100, 7);
    pop_empty(&q);
    /* settled: taken in now */
    CHECK(nv_mpsc_claim_check(&q, p, notes_name, NULL) == NV_MPSC_CLAIM_NONE);

    /* a producer that lost its slot to a live one and died before its next
     * try: the live one names the slot until it has published it */
    live_notes[0] = &live;
    CHECK(nv_mpsc_reserve_noted(&q, 100, &p, &live) == 0);
    atomic_store(&dead, p + 1);
    CHECK(nv_mpsc_claim_check(&q, p, notes_name, NULL) == NV_MPSC_CLAIM_LIVE);
    fill(buf, 100, 8);
    nv_mpsc_rec_write(&q, p, 0, buf, 100);
    nv_mpsc_publish(&q, p);
    CHECK(nv_mpsc_claim_check(&q, p, notes_name, NULL) == NV_MPSC_CLAIM_NONE);   /* published */
    atomic_store(&live, 0);
    CHECK(nv_mpsc_claim_check(&q, p, notes_name, NULL) == NV_MPSC_CLAIM_NONE);
    pop_expect(&q, 100, 8);
    live_notes[0] = NULL;

    /* a slot nobody took (a dead producer's swap failed, or it never got
     * to try): the tail has not passed it */
    p = atomic_load(q.tail);
    CHECK(nv_mpsc_claim_check(&q, p, notes_name, NULL) == NV_MPSC_CLAIM_NONE);
    CHECK(nv_mpsc_claim_check(&q, p + 5, notes_name, NULL) == NV_MPSC_CLAIM_NONE);

    /* the ring full: the producer holds nothing and keeps no note */
    int n = 0;
    while (nv_mpsc_reserve_noted(&q, 1, &p2, &live) == 0) {
        nv_mpsc_rec_write(&q, p2, 0, &v, 1);
        nv_mpsc_publish(&q, p2);
        n++;
    }
    CHECK(n == RING && atomic_load(&live) == 0);
    for (int i = 0; i < n; i++)
        CHECK(nv_mpsc_pop_bytes(&q, out, sizeof out) == 1);
    pop_empty(&q);
    whole_ring(&q);
}

static void malformed(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t buf[4096], out[4096];
    static const uint32_t bad[] = { MAX_REC + 1, RING * PER, 1u << 20, 0x80000000u, UINT32_MAX };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fill(buf, 300, i);
        CHECK(nv_mpsc_push_bytes(&q, buf, 300, NULL, 0) == 0);
        push_raw(&q, bad[i]);
        fill(buf, 20, i + 100);
        CHECK(nv_mpsc_push_bytes(&q, buf, 20, NULL, 0) == 0);
        push_raw(&q, bad[(i + 1) % (sizeof bad / sizeof bad[0])]);
        push_raw(&q, bad[i]);
        fill(buf, 1500, i + 200);
        CHECK(nv_mpsc_push_bytes(&q, buf, 1500, NULL, 0) == 0);
        pop_expect(&q, 300, i);
        CHECK(nv_mpsc_pop_bytes(&q, out, sizeof out) == SIZE_MAX);
        pop_expect(&q, 20, i + 100);
        CHECK(nv_mpsc_pop_bytes(&q, out, sizeof out) == SIZE_MAX);
        CHECK(nv_mpsc_pop_bytes(&q, out, sizeof out) == SIZE_MAX);
        pop_expect(&q, 1500, i + 200);
        pop_empty(&q);
    }
    whole_ring(&q);
}

/* A well-formed record longer than the consumer's buffer: "dropped"
 * (mpsc_ring.h), so all of its slots go, and the next record is the next
 * one a producer pushed, never a slot of the dropped one read as a record. */
static void over_cap(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t buf[4096], out[4096];
    for (size_t n = 60; n <= 2000; n += 388) {
        fill(buf, n, n);
        CHECK(nv_mpsc_push_bytes(&q, buf, n, NULL, 0) == 0);
        fill(buf, 60, n + 1);
        CHECK(nv_mpsc_push_bytes(&q, buf, 60, NULL, 0) == 0);
        CHECK(nv_mpsc_pop_bytes(&q, out, n - 1) == SIZE_MAX);
        pop_expect(&q, 60, n + 1);
        pop_empty(&q);
    }
    whole_ring(&q);
}

/* --- bytes over slot words ---------------------------------------------------------------- */

/* Records of four slots whose bytes, where they cover a later slot's word,
 * hold the value that word takes when a record is published there on the
 * next lap. Consumed, then followed by one-slot records: each of those
 * slots was a covered one, and the ring must read empty after each pop. */
static void stale_words(struct nv_shm_hdr *h)
{
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t buf[FITS(4)];
    while (tail_of(&q) % RING) {   /* start at the ring's first slot */
        CHECK(nv_mpsc_push_bytes(&q, buf, 1, NULL, 0) == 0);
        CHECK(nv_mpsc_pop_bytes(&q, buf, sizeof buf) == 1);
    }
    for (int r = 0; r < RING / 4; r++) {
        uint64_t pos = tail_of(&q);
        fill(buf, sizeof buf, (uint64_t)r);
        for (uint64_t i = 1; i < 4; i++) {
            uint64_t future = pos + i + RING + 1;
            memcpy(buf + i * NV_CACHELINE - 12, &future, 8);
        }
        CHECK(nv_mpsc_push_bytes(&q, buf, sizeof buf, NULL, 0) == 0);
    }
    for (int r = 0; r < RING / 4; r++)
        CHECK(nv_mpsc_pop_bytes(&q, buf, sizeof buf) == sizeof buf);
    pop_empty(&q);
    for (int i = 0; i < RING; i++) {
        fill(buf, 9, (uint64_t)i);
        CHECK(nv_mpsc_push_bytes(&q, buf, 9, NULL, 0) == 0);
        pop_expect(&q, 9, (uint64_t)i);
        pop_empty(&q);
    }
}

/* --- producer threads ------------------------------------------------------------------ */

struct producer {
    pthread_t   thread;
    struct nv_shm_hdr *h;
    uint32_t    id;
    uint32_t    count;
    long        full;   /* pushes refused because the ring was full */
};

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The payload length of record seq of producer id: both sides compute it. */
static size_t rec_len(uint32_t id, uint32_t seq)
{
    uint64_t s = ((uint64_t)id << 32 | seq) * 0x9e3779b97f4a7c15ull + 1;
    uint64_t r = xorshift(&s);
    return r % 8 == 0 ? (size_t)(r >> 8) % 2001 : (size_t)(r >> 8) % 120;
}

static uint64_t rec_tag(uint32_t id, uint32_t seq) { return (uint64_t)id << 32 | seq; }

/* the producers share the head they last read, as the shm link's do */
static _Atomic uint64_t head_seen;

static void *produce(void *arg)
{
    struct producer *p = arg;
    struct nv_mpsc q = nv_shm_ring_view(p->h);
    q.head_seen = &head_seen;
    static _Thread_local uint8_t payload[2048];
    for (uint32_t seq = 0; seq < p->count; seq++) {
        uint32_t head[3] = { p->id, seq, (uint32_t)rec_len(p->id, seq) };
        fill(payload, head[2], rec_tag(p->id, seq));
        int rc;
        while ((rc = nv_mpsc_push_bytes(&q, head, sizeof head, payload, head[2])) == -1) {
            p->full++;
            sched_yield();
        }
        CHECK(rc == 0);
    }
    return NULL;
}

static void threads(struct nv_shm_hdr *h)
{
    struct producer p[THREADS];
    for (uint32_t i = 0; i < THREADS; i++) {
        p[i] = (struct producer){ .h = h, .id = i, .count = TOTAL / THREADS };
        CHECK(pthread_create(&p[i].thread, NULL, produce, &p[i]) == 0);
    }
    struct nv_mpsc q = nv_shm_ring_view(h);
    static uint8_t out[4096];
    uint32_t next[THREADS] = { 0 };
    long got = 0, empty = 0;
    while (got < TOTAL) {
        size_t r = nv_mpsc_pop_bytes(&q, out, sizeof out);
        if (r == 0) {
            empty++;
            sched_yield();
            continue;
        }
        CHECK(r != SIZE_MAX && r >= 12);
        uint32_t head[3];
        memcpy(head, out, sizeof head);
        if (head[0] >= THREADS)
            FAILF("record from producer %u", head[0]);
        if (head[1] != next[head[0]])   /* per producer: in order, none lost or repeated */
            FAILF("producer %u: record %u, wanted %u", head[0], head[1], next[head[0]]);
        CHECK(head[2] == rec_len(head[0], head[1]) && r == 12 + (size_t)head[2]);
        CHECK(intact(out + 12, head[2], rec_tag(head[0], head[1])));
        next[head[0]]++;
        got++;
    }
    long full = 0;
    for (uint32_t i = 0; i < THREADS; i++) {
        CHECK(pthread_join(p[i].thread, NULL) == 0);
        CHECK(next[i] == TOTAL / THREADS);
        full += p[i].full;
    }
    pop_empty(&q);   /* nothing more than was sent */
    printf("%d records from %d producers; %ld pushes found the ring full, %ld pops found it empty\n", TOTAL,
           THREADS, full, empty);
}

int main(void)
{
    struct nv_shm_hdr *h = make_ring();
    struct nv_mpsc q = nv_shm_ring_view(h);
    CHECK(q.stride == 64 && q.mask == RING - 1);
    pop_empty(&q);
    CHECK(!nv_shm_ring_nonempty(h));
    every_length(h);
    too_long(h);
    full(h);
    malformed(h);
    stale_words(h);
    dead_notes(h);
    threads(h);
    over_cap(h);
    free(h);
    return 0;
}
