/* Tripwire counting: once-only tripwires fire exactly once even when
 * several ranks hit them at the same time; persistent ones fire once per
 * access; read tripwires ignore puts and write tripwires ignore gets;
 * atomics fire both with access READ|WRITE; netvm_tripwire_test counts;
 * a tripset receives its tripwires' events (and netvm_evq_poll does not);
 * after netvm_tripwire_disarm returns no event of it comes, even one that
 * was already queued.
 *
 * Rank 0 owns the tripwires, on private exported memory and on memory from
 * netvm_alloc_shared; every other rank hits them. */
#include "evt.h"

#define BUFLEN  16384
#define K       100          /* accesses per rank per range */
#define NMANY   200          /* once-only tripwires hit by everyone at once */
#define MANY_AT 4096
#define ROUNDS  20

enum { VIA_POLL, VIA_TEST, VIA_SET };

typedef struct {
    netvm_tripwire_t *tw;
    uint32_t id;
    uint64_t user;
    uintptr_t lo, hi;
    unsigned flags, want_access;
    int via, armed;
    uint64_t want, got, got_ev;
    const char *name;
} tw_t;

static netvm_ctx_t *ctx;
static int rank, size, P;
static uint8_t *bufs[2];
static netvm_tripset_t *set;
static tw_t tws[2 * 16 + 2 * NMANY];
static int ntw;
static evbuf_t eb;
static uint64_t atomic_masked;

/* the fixed ranges, as offsets in each buffer */
enum { R_ONCE_POLL, R_ONCE_TEST, R_PER_POLL, R_PER_TEST, R_READ, R_SET_ONCE, R_DISARM, R_RDONCE,
       R_ATOM, R_ATOMW, NR };
static const struct { size_t lo, hi; unsigned flags; int via; unsigned access; const char *name; } R[NR] = {
    [R_ONCE_POLL] = { 100, 200, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, VIA_POLL, NETVM_TRIP_WRITE, "once-poll" },
    [R_ONCE_TEST] = { 300, 400, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, VIA_TEST, NETVM_TRIP_WRITE, "once-test" },
    [R_PER_POLL]  = { 500, 600, NETVM_TRIP_WRITE, VIA_POLL, NETVM_TRIP_WRITE, "persistent-poll" },
    [R_PER_TEST]  = { 700, 800, NETVM_TRIP_WRITE, VIA_TEST, NETVM_TRIP_WRITE, "persistent-test" },
    [R_READ]      = { 900, 1000, NETVM_TRIP_READ, VIA_POLL, NETVM_TRIP_READ, "read" },
    [R_SET_ONCE]  = { 1100, 1200, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, VIA_SET, NETVM_TRIP_WRITE, "set-once" },
    [R_DISARM]    = { 1300, 1400, NETVM_TRIP_RW, VIA_POLL, NETVM_TRIP_WRITE, "disarmed-with-queued" },
    [R_RDONCE]    = { 1500, 1600, NETVM_TRIP_READ | NETVM_TRIP_ONCE, VIA_POLL, NETVM_TRIP_READ, "read-once" },
    [R_ATOM]      = { 2048, 2056, NETVM_TRIP_READ, VIA_POLL, NETVM_TRIP_RW, "atomic-read" },
    [R_ATOMW]     = { 2056, 2064, NETVM_TRIP_WRITE, VIA_POLL, NETVM_TRIP_RW, "atomic-write" },
};

static tw_t *arm(int b, size_t lo, size_t hi, unsigned flags, int via, unsigned access, const char *name)
{
    CHECK(ntw < (int)(sizeof tws / sizeof tws[0]));
    tw_t *t = &tws[ntw];
    memset(t, 0, sizeof *t);
    static uint64_t gen;
    t->user = (0x77ull << 40) | (++gen << 20) | (uint64_t)ntw;
    ntw++;
    t->lo = (uintptr_t)(bufs[b] + lo);
    t->hi = (uintptr_t)(bufs[b] + hi);
    t->flags = flags;
    t->via = via;
    t->want_access = access;
    t->name = name;
    CHECK_OK(netvm_tripwire_arm(ctx, bufs[b] + lo, hi - lo, flags, t->user, via == VIA_SET ? set : NULL, &t->tw));
    t->id = netvm_tripwire_id(t->tw);
    t->armed = 1;
    return t;
}

static void disarm(tw_t *t)
{
    CHECK(t->armed);
    CHECK_OK(netvm_tripwire_disarm(t->tw));
    t->armed = 0;
}

static tw_t *find(uint64_t user)
{
    uint64_t i = user & 0xfffff;
    if (i >= (uint64_t)ntw || tws[i].user != user)
        return NULL;
    return &tws[i];
}

static void take(const netvm_event_t *e, int via)
{
    tw_t *t = find(e->value);
    if (e->type != NETVM_EV_TRIPWIRE || !t) {
        ev_print("unexpected", e);
        FAILF("not an event of an armed tripwire of this test (unknown, or disarmed and replaced)");
    }
    if (!t->armed) {
        ev_print("after disarm", e);
        FAILF("an event of tripwire '%s' after netvm_tripwire_disarm returned", t->name);
    }
    /* a tripwire counted with netvm_tripwire_test has its events in the queue too */
    if (t->via != via && !(t->via == VIA_TEST && via == VIA_POLL)) {
        ev_print("misrouted", e);
        FAILF("tripwire '%s' (%s) delivered through %s", t->name,
              t->via == VIA_SET ? "in a tripset" : "not in a tripset", via == VIA_SET ? "the tripset" : "the queue");
    }
    int access_ok = e->access == t->want_access;
    if (!access_ok && t->want_access == NETVM_TRIP_RW && e->access == (t->flags & NETVM_TRIP_RW)) {
        atomic_masked++;   /* an atomic reported as only what the tripwire watches: fails at the end */
        access_ok = 1;
    }
    if (e->id != t->id || e->rank < 1 || e->rank >= size || !access_ok ||
        !(e->addr < t->hi && e->addr + e->len > t->lo)) {
        ev_print("bad", e);
        FAILF("event of '%s' (id %u, range %#lx+%lu): wrong id, rank, access (want %u) or range",
              t->name, t->id, (unsigned long)t->lo, (unsigned long)(t->hi - t->lo), t->want_access);
    }
    if (t->via == VIA_TEST) {   /* counted by netvm_tripwire_test; its events may not exceed that */
        if (++t->got_ev > t->want)
            FAILF("tripwire '%s': %" PRIu64 " events, it fired only %" PRIu64 " times", t->name, t->got_ev, t->want);
        return;
    }
    t->got++;
    if (t->got > t->want)
        FAILF("tripwire '%s'%s fired %" PRIu64 " times, wanted %" PRIu64, t->name,
              (t->flags & NETVM_TRIP_ONCE) ? " (once-only)" : "", t->got, t->want);
}

static int all_in(void)
{
    for (int i = 0; i < ntw; i++)
        if (tws[i].armed && tws[i].got < tws[i].want)
            return 0;
    return 1;
}

static void pass(void)
{
    netvm_event_t e;
    while (evbuf_poll(ctx, &eb, &e))
        take(&e, VIA_POLL);
    for (int i = 0; i < ntw; i++)
        if (tws[i].armed && tws[i].via == VIA_TEST) {
            uint64_t f = 99999;
            CHECK_OK(netvm_tripwire_test(tws[i].tw, &f));
            CHECK(f != 99999);
            tws[i].got += f;
            if (tws[i].got > tws[i].want)
                FAILF("netvm_tripwire_test: '%s' fired %" PRIu64 " times, wanted %" PRIu64,
                      tws[i].name, tws[i].got, tws[i].want);
        }
    netvm_status_t st;
    while ((st = netvm_tripset_wait(set, &e, 0)) == NETVM_OK)
        take(&e, VIA_SET);
    CHECK_ST(st, NETVM_ERR_TIMEOUT);
}

/* Wait until every armed tripwire reached its count, then make sure no
 * more come. */
static void collect(const char *phase, int linger_ms)
{
    double t0 = now_s();
    while (pass(), !all_in()) {
        if (now_s() - t0 > 10) {
            for (int i = 0; i < ntw; i++)
                if (tws[i].armed && tws[i].got != tws[i].want)
                    fprintf(stderr, "  '%s' (#%d): %" PRIu64 " of %" PRIu64 "\n", tws[i].name, i,
                            tws[i].got, tws[i].want);
            FAILF("%s: events missing after 10 s", phase);
        }
        sleep_us(500);
    }
    sleep_us(linger_ms * 1000L);
    pass();
    for (int i = 0; i < ntw; i++)
        if (tws[i].armed && tws[i].got != tws[i].want)
            FAILF("%s: '%s' fired %" PRIu64 " times, wanted %" PRIu64, phase, tws[i].name, tws[i].got,
                  tws[i].want);
}

/* initiator: a put of random length inside [lo, hi) */
static void put_in(netvm_rseg_t *r, rng_t *g, size_t lo, size_t hi)
{
    static uint8_t junk[4096];
    size_t a = lo + rng_below(g, hi - lo), len = 1 + rng_below(g, hi - a);
    CHECK_OK(netvm_put(ctx, r, a, junk, len, (rng_next(g) & 1) ? NETVM_F_UNORDERED : 0));
}
static void get_in(netvm_rseg_t *r, rng_t *g, size_t lo, size_t hi)
{
    static uint8_t junk[4096];
    size_t a = lo + rng_below(g, hi - lo), len = 1 + rng_below(g, hi - a);
    CHECK_OK(netvm_get(ctx, junk, r, a, len, 0));
}

int main(void)
{
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    CHECK(size >= 2);
    P = size - 1;
    netvm_seg_t *s0 = NULL, *s1 = NULL;
    netvm_rseg_t *rs[2] = { NULL, NULL };
    if (rank == 0) {
        bufs[0] = aligned_alloc(4096, BUFLEN);
        memset(bufs[0], 0, BUFLEN);
        CHECK_OK(netvm_export(ctx, bufs[0], BUFLEN, NETVM_RWA, "buf", &s0));
        void *p;
        CHECK_OK(netvm_alloc_shared(ctx, BUFLEN, NETVM_RWA, "buf-shared", &p, &s1));
        bufs[1] = p;
        CHECK_OK(netvm_tripset_create(ctx, &set));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank != 0) {
        CHECK_OK(netvm_import(ctx, 0, "buf", &rs[0]));
        CHECK_OK(netvm_import(ctx, 0, "buf-shared", &rs[1]));
    }
    rng_t g = rng_seed(job_seed(), (uint64_t)rank, 1);

    /* --- phase A: everybody hits every range at once --- */
    tw_t *fixed[2][NR];
    if (rank == 0) {
        for (int b = 0; b < 2; b++) {
            for (int r = 0; r < NR; r++) {
                fixed[b][r] = arm(b, R[r].lo, R[r].hi, R[r].flags, R[r].via, R[r].access, R[r].name);
                int once = (R[r].flags & NETVM_TRIP_ONCE) != 0;
                fixed[b][r]->want = r == R_DISARM ? 0 : once ? 1 : (uint64_t)P * K;
            }
            for (int j = 0; j < NMANY; j++)
                arm(b, MANY_AT + 16 * (size_t)j, MANY_AT + 16 * (size_t)j + 8, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE,
                    VIA_POLL, NETVM_TRIP_WRITE, "many-once")->want = 1;
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank != 0) {
        static uint8_t junk[NMANY * 16];
        for (int i = 0; i < K; i++)
            for (int b = 0; b < 2; b++) {
                netvm_rseg_t *r = rs[b];
                CHECK_OK(netvm_put(ctx, r, MANY_AT, junk, sizeof junk, 0));   /* all 200 at once */
                put_in(r, &g, 100, 200);
                put_in(r, &g, 300, 400);
                put_in(r, &g, 500, 600);
                put_in(r, &g, 700, 800);
                put_in(r, &g, 900, 1000);    /* read tripwire: must not fire */
                get_in(r, &g, 900, 1000);
                get_in(r, &g, 500, 600);     /* write tripwire: must not fire */
                put_in(r, &g, 1100, 1200);
                put_in(r, &g, 1300, 1400);
                get_in(r, &g, 1500, 1600);
                uint64_t old;
                CHECK_OK(netvm_atomic(ctx, r, 2048, NETVM_AOP_FADD, 1, 0, &old));
                CHECK_OK(netvm_atomic(ctx, r, 2056, NETVM_AOP_ADD, 1, 0, NULL));
            }
        CHECK_OK(netvm_flush(ctx, 0));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        /* events of R_DISARM were queued (no one polled): disarm drops them */
        sleep_us(200000);
        for (int b = 0; b < 2; b++)
            disarm(fixed[b][R_DISARM]);
        collect("phase A", 300);
        for (int b = 0; b < 2; b++)
            CHECK(__atomic_load_n((uint64_t *)(bufs[b] + 2048), __ATOMIC_SEQ_CST) == (uint64_t)P * K);
        printf("phase A: every count exact\n");
    }

    /* --- phase B: once-only ones stay quiet; persistent ones go on --- */
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        for (int b = 0; b < 2; b++) {
            fixed[b][R_PER_POLL]->want += (uint64_t)P;
            fixed[b][R_PER_TEST]->want += (uint64_t)P;
            fixed[b][R_READ]->want += (uint64_t)P;
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank != 0) {
        static uint8_t junk[NMANY * 16];
        for (int b = 0; b < 2; b++) {
            CHECK_OK(netvm_put(ctx, rs[b], MANY_AT, junk, sizeof junk, 0));
            CHECK_OK(netvm_put(ctx, rs[b], 0, junk, 2048, 0));   /* every write range */
            get_in(rs[b], &g, 900, 1000);
            get_in(rs[b], &g, 1500, 1600);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        collect("phase B", 300);
        netvm_event_t e;
        CHECK_ST(netvm_tripset_wait(set, &e, 100), NETVM_ERR_TIMEOUT);
        printf("phase B: once-only tripwires stayed quiet\n");
    }

    /* --- phase C: disarmed ones are silent --- */
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        for (int i = 0; i < ntw; i++)
            if (tws[i].armed && tws[i].via == VIA_POLL)
                disarm(&tws[i]);
    CHECK_OK(netvm_barrier(ctx));
    if (rank != 0) {
        static uint8_t junk[BUFLEN];
        for (int b = 0; b < 2; b++) {
            CHECK_OK(netvm_put(ctx, rs[b], 0, junk, BUFLEN, 0));
            CHECK_OK(netvm_get(ctx, junk, rs[b], 0, BUFLEN, 0));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        for (int b = 0; b < 2; b++) {
            fixed[b][R_PER_TEST]->want += (uint64_t)P;   /* still armed */
        }
        collect("phase C", 300);
        for (int i = 0; i < ntw; i++)
            if (tws[i].armed)
                CHECK(tws[i].via != VIA_POLL);
        /* the set disarms what is left in it */
        CHECK_OK(netvm_tripset_destroy(set));
        for (int i = 0; i < ntw; i++)
            if (tws[i].via == VIA_SET)
                tws[i].armed = 0;
        for (int i = 0; i < ntw; i++)
            if (tws[i].armed)
                disarm(&tws[i]);
        printf("phase C: no event after disarm\n");
    }

    /* --- rounds: fresh once-only tripwires, all ranks hit them together --- */
    for (int round = 0; round < ROUNDS; round++) {
        int first = ntw;
        if (rank == 0) {
            ntw = 0;   /* reuse the table */
            first = 0;
            for (int b = 0; b < 2; b++)
                for (int j = 0; j < NMANY; j++)
                    arm(b, MANY_AT + 16 * (size_t)j, MANY_AT + 16 * (size_t)j + 8 + (size_t)(j % 3),
                        NETVM_TRIP_RW | NETVM_TRIP_ONCE, VIA_POLL, 0, "round-once")->want = 1;
        }
        CHECK_OK(netvm_barrier(ctx));
        if (rank != 0) {
            static uint8_t junk[NMANY * 16];
            for (int k = 0; k < 3; k++) {
                int b = (int)rng_below(&g, 2);
                int j = (int)rng_below(&g, NMANY);
                if (k == 1)
                    CHECK_OK(netvm_get(ctx, junk, rs[b], MANY_AT + 16 * (size_t)j, 4, 0));
                else
                    CHECK_OK(netvm_put(ctx, rs[b], MANY_AT + 16 * (size_t)j, junk, 4, 0));
                CHECK_OK(netvm_put(ctx, rs[1 - b], MANY_AT, junk, sizeof junk, 0));
                CHECK_OK(netvm_get(ctx, junk, rs[b], MANY_AT, sizeof junk, 0));
            }
        }
        CHECK_OK(netvm_barrier(ctx));
        if (rank == 0) {
            /* which access fired it varies: accept READ or WRITE */
            for (int i = first; i < ntw; i++)
                tws[i].want_access = 0;
            double t0 = now_s();
            netvm_event_t e;
            for (;;) {
                while (evbuf_poll(ctx, &eb, &e)) {
                    tw_t *t = find(e.value);
                    if (!t || !t->armed || e.type != NETVM_EV_TRIPWIRE) {
                        ev_print("unexpected", &e);
                        FAILF("round %d", round);
                    }
                    if (e.access != NETVM_TRIP_READ && e.access != NETVM_TRIP_WRITE) {
                        ev_print("bad access", &e);
                        FAILF("round %d", round);
                    }
                    t->want_access = e.access;
                    if (++t->got > 1)
                        FAILF("round %d: a once-only tripwire fired %" PRIu64 " times", round, t->got);
                }
                if (all_in())
                    break;
                if (now_s() - t0 > 10)
                    FAILF("round %d: once-only tripwires did not fire", round);
                sleep_us(200);
            }
            sleep_us(20000);
            while (evbuf_poll(ctx, &eb, &e)) {
                tw_t *t = find(e.value);
                ev_print("late", &e);
                FAILF("round %d: a once-only tripwire (%s) fired twice", round, t ? t->name : "?");
            }
            for (int i = first; i < ntw; i++)
                disarm(&tws[i]);
        }
    }
    if (rank == 0) {
        printf("%d rounds of %d once-only tripwires hit by %d ranks at once: each fired once\n",
               ROUNDS, 2 * NMANY, P);
        if (atomic_masked)
            DEFER_FAILF("%" PRIu64 " events of atomics on READ-only or WRITE-only tripwires said only what the tripwire "
                  "watches, not READ|WRITE (what the access did; events.h, docs/events.md: atomics are both)",
                  atomic_masked);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(bufs[0]);
    check_deferred();
    return 0;
}
