/* A distributed queue with lazy counters: the CLAN Tripwire paper, section
 * 4.2 (Figure 6, Example 2), with one queue per producer.
 *
 * Rank 0 consumes; every other rank produces. Producer p owns a ring of
 * SLOTS fixed-size elements in rank 0's memory and rank 0's copy of its
 * write index (lazy_write_i); rank 0 owns p's copy of its read index
 * (lazy_read_i, in p's memory). As in the paper, every cross-process access
 * is a write and each side polls only its own memory:
 *  - a producer puts an element into its next slot and sets lazy_write_i in
 *    one netvm_put_signal_nb: the index cannot move before the element is
 *    visible, and the producer streams on without waiting for a round trip;
 *  - the consumer copies elements out and writes read_i back to the producer
 *    lazily, once every SLOTS/4 elements, so that one write frees many
 *    slots. A stale copy is safe: the producer sees the ring fuller than it
 *    is, the consumer sees it emptier. As in the paper, a ring is full with
 *    one slot free, so equal indices mean empty.
 *
 * The paper's queue has one writer. Several producers sharing one ring would
 * need a cross-process fetch-add to reserve slots plus a per-slot "full"
 * flag (the tail alone does not say a reserved slot has been written), so
 * each producer gets its own ring: no atomics, no reads, and the consumer
 * waits for all rings at once with a tripset.
 *
 * Sleeping: a producer whose ring is full sleeps in netvm_wait_until on its
 * lazy_read_i; the consumer, finding every ring empty, arms a once-only
 * tripwire on each lazy_write_i, looks again, and sleeps in
 * netvm_tripset_wait.
 *
 *   netvm run -n 4 ./dqueue [items per producer]
 */
#include <netvm/netvm.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "dqueue rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)

#define SLOTS   64                 /* per ring; SLOTS - 1 usable */
#define LAZY    (SLOTS / 4)        /* consumer writes read_i back after this many */
#define WORDS   5
#define WAIT_MS 20000              /* a silent peer is a failure, not a hang */

struct elm {                       /* one cache line */
    uint32_t producer;
    uint32_t pad;
    uint64_t seq;
    uint64_t data[WORDS];
    uint64_t sum;
};

struct ring {                      /* in the consumer's memory, one per producer */
    uint64_t lazy_write_i;
    uint8_t  pad[56];              /* the index alone on its line: element stores do not
                                      disturb the consumer polling it */
    struct elm q[SLOTS];
};

struct prod_area {                 /* in each producer's memory */
    uint64_t lazy_read_i;
};

static int rank;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t load(const uint64_t *w)
{
    return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

static uint64_t elm_sum(const struct elm *e)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const uint8_t *b = (const uint8_t *)e;
    for (size_t i = 0; i < offsetof(struct elm, sum); i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void elm_fill(struct elm *e, int producer, uint64_t seq)
{
    e->producer = (uint32_t)producer;
    e->pad = 0;
    e->seq = seq;
    for (int i = 0; i < WORDS; i++)
        e->data[i] = (seq + 1) * 0x9e3779b97f4a7c15ull ^ ((uint64_t)producer << 48 | (uint64_t)i);
    e->sum = elm_sum(e);
}

static int run_producer(netvm_ctx_t *ctx, struct prod_area *mine, netvm_rseg_t *rings,
                        uint64_t items)
{
    size_t base = (size_t)(rank - 1) * sizeof(struct ring);
    uint64_t write_i = 0, full_waits = 0;
    struct elm e;
    double t0 = now_us();
    for (uint64_t seq = 0; seq < items; seq++) {
        uint64_t next = (write_i + 1) % SLOTS;
        if (next == load(&mine->lazy_read_i)) {
            /* Full as far as we know: the consumer's next write-back frees it. */
            full_waits++;
            netvm_status_t s = netvm_wait_until(ctx, &mine->lazy_read_i, NETVM_CMP_NE, next, 0,
                                                WAIT_MS, NULL);
            if (s == NETVM_ERR_TIMEOUT) {
                fprintf(stderr, "dqueue rank %d: ring full for %d ms at item %llu\n",
                        rank, WAIT_MS, (unsigned long long)seq);
                exit(1);
            }
            TRY(s);
        }
        elm_fill(&e, rank, seq);
        TRY(netvm_put_signal_nb(ctx, rings, base + offsetof(struct ring, q) + write_i * sizeof e,
                                &e, sizeof e, rings, base + offsetof(struct ring, lazy_write_i),
                                next, NETVM_SIGNAL_SET, 0));
        write_i = next;
    }
    TRY(netvm_flush(ctx, 0));          /* every element visible (or its failure reported) */
    double us = now_us() - t0;
    printf("dqueue: producer %d: %llu items in %.1f ms, found its ring full %llu times\n",
           rank, (unsigned long long)items, us / 1e3, (unsigned long long)full_waits);
    return 0;
}

struct consumer {
    netvm_ctx_t   *ctx;
    int            producers;
    uint64_t       items;          /* per producer */
    struct ring   *rings;          /* rings[p - 1] is producer p's */
    netvm_rseg_t **lazy_read;      /* producer p's lazy_read_i */
    uint64_t      *read_i, *acked, *got;
    netvm_tripwire_t **tw;         /* armed only while the consumer sleeps */
    uint64_t       writebacks, sleeps, bad;
};

static void write_back(struct consumer *c, int p)
{
    TRY(netvm_put_imm(c->ctx, c->lazy_read[p - 1], offsetof(struct prod_area, lazy_read_i),
                      c->read_i[p - 1], 0));
    c->acked[p - 1] = c->read_i[p - 1];
    c->writebacks++;
}

/* Take what producer p's ring holds as far as lazy_write_i says. */
static uint64_t drain(struct consumer *c, int p)
{
    struct ring *r = &c->rings[p - 1];
    uint64_t *read_i = &c->read_i[p - 1], *got = &c->got[p - 1], n = 0;
    uint64_t write_i = load(&r->lazy_write_i);
    while (*read_i != write_i) {
        struct elm e = r->q[*read_i], want;   /* copied out: the slot may be reused once acked */
        elm_fill(&want, p, *got);
        if (memcmp(&e, &want, sizeof e) != 0 && c->bad++ < 5)
            fprintf(stderr, "dqueue: from producer %d expected item %llu, got producer %u item %llu"
                    " (checksum %s)\n", p, (unsigned long long)*got, e.producer,
                    (unsigned long long)e.seq, e.sum == elm_sum(&e) ? "ok" : "bad");
        (*got)++;
        n++;
        *read_i = (*read_i + 1) % SLOTS;
        /* A producer whose every item is in view has sent them all and never
         * waits for room again: it needs no more write-backs. */
        if ((*read_i + SLOTS - c->acked[p - 1]) % SLOTS >= LAZY &&
            *got + (load(&r->lazy_write_i) + SLOTS - *read_i) % SLOTS < c->items)
            write_back(c, p);
    }
    return n;
}

static int any_waiting(struct consumer *c, uint64_t items)
{
    for (int p = 1; p <= c->producers; p++)
        if (c->got[p - 1] < items && load(&c->rings[p - 1].lazy_write_i) != c->read_i[p - 1])
            return 1;
    return 0;
}

static void sleep_until_data(struct consumer *c, netvm_tripset_t *set, uint64_t items)
{
    /* No write-back is owed before sleeping: a producer that finds its ring
     * full has SLOTS - 1 elements past the last read index it was given and
     * more to send, and drain() writes back after LAZY < SLOTS - 1 of them. */
    netvm_tripwire_t **tw = c->tw;
    for (int p = 1; p <= c->producers; p++) {
        tw[p - 1] = NULL;
        if (c->got[p - 1] < items)
            TRY(netvm_tripwire_arm(c->ctx, &c->rings[p - 1].lazy_write_i, sizeof(uint64_t),
                                   NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, (uint64_t)p, set, &tw[p - 1]));
    }
    /* Look again after arming: an index that moved before the arm is seen
     * here, one that moves after fires its tripwire. */
    if (!any_waiting(c, items)) {
        netvm_event_t ev;
        netvm_status_t s = netvm_tripset_wait(set, &ev, WAIT_MS);
        if (s == NETVM_ERR_TIMEOUT) {
            fprintf(stderr, "dqueue: consumer: no item in %d ms\n", WAIT_MS);
            exit(1);
        }
        TRY(s);
        if (ev.type != NETVM_EV_TRIPWIRE || ev.value < 1 || ev.value > (uint64_t)c->producers) {
            fprintf(stderr, "dqueue: consumer: unexpected event type %u value %llu\n",
                    ev.type, (unsigned long long)ev.value);
            exit(1);
        }
        c->sleeps++;
    }
    for (int p = 1; p <= c->producers; p++)
        if (tw[p - 1])
            TRY(netvm_tripwire_disarm(tw[p - 1]));
}

static int run_consumer(struct consumer *c, netvm_tripset_t *set, uint64_t items)
{
    uint64_t total = items * (uint64_t)c->producers, done = 0;
    double t0 = now_us();
    while (done < total) {
        uint64_t n = 0;
        for (int p = 1; p <= c->producers; p++)
            n += drain(c, p);
        done += n;
        if (n == 0)
            sleep_until_data(c, set, items);
    }
    double us = now_us() - t0;
    printf("dqueue: consumer: %llu items in %.1f ms (%.2f us each), %llu lazy write-backs, slept %llu times\n",
           (unsigned long long)total, us / 1e3, us / (double)total,
           (unsigned long long)c->writebacks, (unsigned long long)c->sleeps);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t items = argc > 1 ? strtoull(argv[1], NULL, 0) : 20000;
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    int size = netvm_size(ctx), producers = size - 1;
    if (size < 2) {
        if (rank == 0)
            fprintf(stderr, "dqueue: run with at least 2 ranks (netvm run -n 4)\n");
        netvm_finalize(ctx);
        return 2;
    }

    void *area;
    netvm_seg_t *seg;
    if (rank == 0)
        TRY(netvm_alloc_shared(ctx, (size_t)producers * sizeof(struct ring), NETVM_RW, "rings",
                               &area, &seg));
    else
        TRY(netvm_alloc_shared(ctx, sizeof(struct prod_area), NETVM_RW, "lazy_read", &area, &seg));
    TRY(netvm_barrier(ctx));                 /* every area exists */

    int rc;
    if (rank == 0) {
        struct consumer c = { .ctx = ctx, .producers = producers, .items = items, .rings = area };
        c.lazy_read = calloc((size_t)producers, sizeof *c.lazy_read);
        c.read_i = calloc((size_t)producers, sizeof *c.read_i);
        c.acked = calloc((size_t)producers, sizeof *c.acked);
        c.got = calloc((size_t)producers, sizeof *c.got);
        c.tw = calloc((size_t)producers, sizeof *c.tw);
        if (!c.lazy_read || !c.read_i || !c.acked || !c.got || !c.tw) {
            fprintf(stderr, "dqueue: out of memory\n");
            return 1;
        }
        for (int p = 1; p <= producers; p++)
            TRY(netvm_import(ctx, p, "lazy_read", &c.lazy_read[p - 1]));
        netvm_tripset_t *set;
        TRY(netvm_tripset_create(ctx, &set));
        TRY(netvm_barrier(ctx));             /* consumer ready: producers may start */
        rc = run_consumer(&c, set, items);
        TRY(netvm_barrier(ctx));             /* producers have flushed: nothing more is coming */
        /* Exactly once: nothing may follow the last expected item. */
        for (int p = 1; p <= producers; p++) {
            uint64_t w = load(&c.rings[p - 1].lazy_write_i);
            if (w != c.read_i[p - 1] || c.got[p - 1] != items) {
                fprintf(stderr, "dqueue: producer %d: %llu items taken, ring index %llu, read %llu\n",
                        p, (unsigned long long)c.got[p - 1], (unsigned long long)w,
                        (unsigned long long)c.read_i[p - 1]);
                c.bad++;
            }
        }
        if (c.bad) {
            printf("dqueue: FAILED: %llu errors\n", (unsigned long long)c.bad);
            rc = 1;
        } else {
            printf("dqueue: %d producers x %llu items: every item arrived exactly once, in order per"
                   " producer, checksums ok\n", producers, (unsigned long long)items);
        }
        TRY(netvm_tripset_destroy(set));
        for (int p = 1; p <= producers; p++)
            TRY(netvm_release(c.lazy_read[p - 1]));
        free(c.lazy_read); free(c.read_i); free(c.acked); free(c.got); free(c.tw);
    } else {
        netvm_rseg_t *rings;
        TRY(netvm_import(ctx, 0, "rings", &rings));
        TRY(netvm_barrier(ctx));
        rc = run_producer(ctx, area, rings, items);
        TRY(netvm_barrier(ctx));
        TRY(netvm_release(rings));
    }
    TRY(netvm_unexport(seg));
    TRY(netvm_finalize(ctx));
    return rc;
}
