/* Thousands of tripwires against random traffic, checked by a reference
 * matcher.
 *
 *   trip_many NTW STATIC_ROUNDS DYNAMIC_ROUNDS [ACCESSES_PER_ROUND [MUTATIONS_PER_ROUND]]
 *
 * Rank 0 arms NTW tripwires at random ranges (random READ / WRITE / RW) in
 * two buffers: private exported memory and memory from netvm_alloc_shared.
 * Every other rank runs rounds: it waits for rank 0's "go" notification,
 * makes ACCESSES random puts, gets and atomics of random ranges, then
 * notifies "done". Every rank derives every round's accesses from a seed
 * the job shares (EVT_SEED overrides it), so rank 0 computes by brute force
 * exactly which tripwires each access must fire, and checks each event
 * against that: a missing, extra, duplicated or malformed event fails.
 *
 * Dynamic rounds also disarm and re-arm tripwires while the traffic runs:
 * no event may come for a tripwire once its disarm returned; a tripwire
 * armed before the round's "go" must fire for every access that overlaps
 * it; one armed during the round may fire only for accesses of this round
 * (or the one before) that overlap it. */
#include "evt.h"

#define BUFLEN (256 * 1024)
#define MAXACC (64 * 1024)

enum { OP_PUT, OP_PUTNB, OP_GET, OP_ATOMIC };
typedef struct { int b, op; size_t off, len; unsigned flags; } acc_t;

static unsigned access_bits(int op)
{
    return op == OP_GET ? NETVM_TRIP_READ : op == OP_ATOMIC ? NETVM_TRIP_RW : NETVM_TRIP_WRITE;
}

static uint64_t seed;
static int K = 8;

static acc_t gen_access(int r, int k, int i)
{
    rng_t g = rng_seed(seed, ((uint64_t)r << 32) | (uint64_t)k, (uint64_t)i + 77);
    acc_t a;
    a.b = (int)rng_below(&g, 2);
    unsigned p = (unsigned)rng_below(&g, 100);
    a.op = p < 35 ? OP_PUT : p < 50 ? OP_PUTNB : p < 90 ? OP_GET : OP_ATOMIC;
    a.flags = rng_below(&g, 4) == 0 ? NETVM_F_UNORDERED : 0;
    if (a.op == OP_ATOMIC) {
        a.len = 8;
        a.off = 8 * rng_below(&g, BUFLEN / 8);
        a.flags = 0;
        return a;
    }
    unsigned q = (unsigned)rng_below(&g, 100);
    size_t maxlen = q < 40 ? 64 : q < 80 ? 2048 : q < 95 ? 16384 : MAXACC;
    a.len = 1 + rng_below(&g, maxlen);
    a.off = rng_below(&g, BUFLEN - a.len + 1);
    return a;
}

/* ---------------------------------------------------------------- target */

enum { ST_FREE, ST_STABLE, ST_NEW };
typedef struct {
    netvm_tripwire_t *tw;
    uint32_t id;
    uint64_t user;
    int b, state, armed_round;
    size_t lo, hi;
    unsigned flags;
} tw_t;

typedef struct {
    acc_t a;
    int *exp;         /* tripwire indices, ascending */
    uint8_t *seen;
    int nexp;
} racc_t;

static netvm_ctx_t *ctx;
static int rank, size, ntw;
static uint8_t *bufs[2];
static tw_t *tws;
static racc_t (*cur)[64], (*prev)[64];   /* [rank][access] of this round and the one before */
static int round_no, outstanding;
static uint64_t gen, events, late_ok, new_ok, mutations;
static rng_t trng;

static void arm_slot(int i, int round)
{
    tw_t *t = &tws[i];
    t->b = (int)rng_below(&trng, 2);
    unsigned q = (unsigned)rng_below(&trng, 100);
    size_t maxlen = q < 50 ? 64 : q < 90 ? 1024 : 16384;
    size_t len = 1 + rng_below(&trng, maxlen);
    t->lo = rng_below(&trng, BUFLEN - len + 1);
    t->hi = t->lo + len;
    static const unsigned fl[3] = { NETVM_TRIP_READ, NETVM_TRIP_WRITE, NETVM_TRIP_RW };
    t->flags = fl[rng_below(&trng, 3)];
    t->user = (++gen << 16) | (uint64_t)i;
    CHECK_OK(netvm_tripwire_arm(ctx, bufs[t->b] + t->lo, len, t->flags, t->user, NULL, &t->tw));
    t->id = netvm_tripwire_id(t->tw);
    t->armed_round = round;
    t->state = ST_NEW;
}

static int matches(const tw_t *t, const acc_t *a)
{
    return t->b == a->b && (t->flags & access_bits(a->op)) && a->off < t->hi && a->off + a->len > t->lo;
}

static void expect_round(racc_t *ra, int r, int k)
{
    static int *tmp;
    if (!tmp)
        tmp = malloc(sizeof(int) * (size_t)ntw);
    for (int i = 0; i < K; i++) {
        racc_t *x = &ra[i];
        free(x->exp);
        free(x->seen);
        x->a = gen_access(r, k, i);
        x->nexp = 0;
        for (int j = 0; j < ntw; j++)
            if (tws[j].state == ST_STABLE && matches(&tws[j], &x->a))
                tmp[x->nexp++] = j;
        x->exp = malloc(sizeof(int) * (size_t)(x->nexp + 1));
        memcpy(x->exp, tmp, sizeof(int) * (size_t)x->nexp);
        x->seen = calloc((size_t)x->nexp + 1, 1);
        outstanding += x->nexp;
    }
}

static int find_exp(const racc_t *x, int j)
{
    int lo = 0, hi = x->nexp;
    while (lo < hi) {
        int m = (lo + hi) / 2;
        if (x->exp[m] < j)
            lo = m + 1;
        else
            hi = m;
    }
    return lo < x->nexp && x->exp[lo] == j ? lo : -1;
}

/* Atomics read and write, so their events must say READ|WRITE ("what the
 * access did"); one that says only what the tripwire watches is counted and
 * fails the test at the end, so the rest of the run still gets checked.
 * Returns 1 for the exact access, 2 for an atomic whose event was masked so
 * (counted by the caller only if no access of the round explains the event
 * exactly: a put and an atomic on the same range in one round are two
 * accesses, and the put's event must not be charged to the atomic). */
static uint64_t atomic_masked;
static int event_is_access(const netvm_event_t *e, const acc_t *a, unsigned twflags)
{
    if (e->addr != (uint64_t)(uintptr_t)(bufs[a->b] + a->off) || e->len != a->len)
        return 0;
    if (e->access == access_bits(a->op))
        return 1;
    if (a->op == OP_ATOMIC && e->access == (NETVM_TRIP_RW & twflags))
        return 2;
    return 0;
}

/* The first access of ra[0..K) that explains e and expects tripwire j's
 * event not yet seen: exactly if one does, else as a masked atomic. */
static int take_expected(const netvm_event_t *e, racc_t *ra, int j, unsigned twflags)
{
    for (int want = 1; want <= 2; want++)
        for (int i = 0; i < K; i++) {
            racc_t *x = &ra[i];
            if (event_is_access(e, &x->a, twflags) != want)
                continue;
            int p = find_exp(x, j);
            if (p >= 0 && !x->seen[p]) {
                x->seen[p] = 1;
                outstanding--;
                if (want == 2) {
                    atomic_masked++;
                    ev_print("masked atomic", e);
                }
                return 1;
            }
        }
    return 0;
}

/* Does an access of a (or of b, if given) that overlaps t explain e? A
 * masked atomic only if no access does exactly. */
static int explained(const netvm_event_t *e, const tw_t *t, const racc_t *a, const racc_t *b)
{
    for (int want = 1; want <= 2; want++)
        for (int i = 0; i < K; i++)
            if ((event_is_access(e, &a[i].a, t->flags) == want && matches(t, &a[i].a)) ||
                (b && event_is_access(e, &b[i].a, t->flags) == want && matches(t, &b[i].a))) {
                if (want == 2) {
                    atomic_masked++;
                    ev_print("masked atomic", e);
                }
                return 1;
            }
    return 0;
}

static void fail_event(const netvm_event_t *e, const char *why)
{
    ev_print("bad", e);
    int j = (int)(e->value & 0xffff);
    if (j < ntw) {
        tw_t *t = &tws[j];
        fprintf(stderr, "  slot %d now: user %#" PRIx64 " state %d armed in round %d, buffer %d [%zu, %zu) flags %u\n",
                j, t->user, t->state, t->armed_round, t->b, t->lo, t->hi, t->flags);
    }
    for (int b = 0; b < 2; b++)
        if (e->addr >= (uint64_t)(uintptr_t)bufs[b] && e->addr < (uint64_t)(uintptr_t)bufs[b] + BUFLEN)
            fprintf(stderr, "  the event's range: buffer %d [%" PRIu64 ", +%" PRIu64 ")\n", b,
                    e->addr - (uint64_t)(uintptr_t)bufs[b], e->len);
    if (e->rank > 0 && e->rank < size)
        for (int i = 0; i < K; i++) {
            const acc_t *a = &cur[e->rank][i].a, *pa = &prev[e->rank][i].a;
            fprintf(stderr, "  rank %d access %d: buffer %d op %d [%zu, +%zu) | previous round: buffer %d op %d [%zu, +%zu)\n",
                    e->rank, i, a->b, a->op, a->off, a->len, pa->b, pa->op, pa->off, pa->len);
        }
    FAILF("round %d: %s (seed %#" PRIx64 ")", round_no, why, seed);
}

static void take(const netvm_event_t *e)
{
    if (e->type != NETVM_EV_TRIPWIRE)
        fail_event(e, "an event that is not a tripwire's");
    int j = (int)(e->value & 0xffff);
    if (j >= ntw || tws[j].state == ST_FREE || tws[j].user != e->value)
        fail_event(e, "an event of a tripwire that is disarmed (its disarm had returned) or never existed");
    tw_t *t = &tws[j];
    if (e->id != t->id)
        fail_event(e, "the event's id is not the tripwire's");
    if (e->rank < 1 || e->rank >= size)
        fail_event(e, "the event names no initiator");
    events++;
    if (t->state == ST_STABLE) {
        if (take_expected(e, cur[e->rank], j, t->flags))
            return;
        /* armed during the previous round: may still report one of its accesses */
        if (t->armed_round == round_no - 1 && explained(e, t, prev[e->rank], NULL)) {
            late_ok++;
            return;
        }
        fail_event(e, "an event no access of this round explains (extra, duplicate, or wrong addr/len/access)");
    }
    /* armed during this round: may fire, but only for an overlapping access */
    if (explained(e, t, cur[e->rank], prev[e->rank])) {
        new_ok++;
        return;
    }
    fail_event(e, "an event of a tripwire armed during the round that no access overlapping it explains");
}

/* Disarm a random stable tripwire (its outstanding events become
 * optional) and arm a fresh one in its slot. */
static void mutate(void)
{
    int j;
    do
        j = (int)rng_below(&trng, (uint64_t)ntw);
    while (tws[j].state != ST_STABLE);
    CHECK_OK(netvm_tripwire_disarm(tws[j].tw));
    tws[j].state = ST_FREE;
    for (int r = 1; r < size; r++)
        for (int i = 0; i < K; i++) {
            racc_t *x = &cur[r][i];
            int p = find_exp(x, j);
            if (p >= 0 && !x->seen[p]) {
                x->seen[p] = 1;
                outstanding--;
            }
        }
    arm_slot(j, round_no);
    mutations++;
}

static void target(int static_rounds, int dyn_rounds, int nmut)
{
    tws = calloc((size_t)ntw, sizeof *tws);
    cur = calloc((size_t)size, sizeof *cur);
    prev = calloc((size_t)size, sizeof *prev);
    trng = rng_seed(seed, 0xabc, 0);
    double t0 = now_s();
    for (int j = 0; j < ntw; j++) {
        arm_slot(j, -1);
        tws[j].state = ST_STABLE;
    }
    double t_arm = now_s() - t0;
    evbuf_t *eb = calloc(1, sizeof *eb);
    CHECK_OK(netvm_barrier(ctx));
    t0 = now_s();
    int rounds = static_rounds + dyn_rounds;
    for (round_no = 0; round_no < rounds; round_no++) {
        void *sw = prev;
        prev = cur;
        cur = sw;
        outstanding = 0;
        for (int r = 1; r < size; r++)
            expect_round(cur[r], r, round_no);
        for (int r = 1; r < size; r++)
            CHECK_OK(netvm_notify(ctx, r, (uint64_t)round_no));   /* go */
        int done = 0, muts = round_no >= static_rounds ? nmut : 0;
        netvm_event_t e;
        while (muts > 0) {   /* mutate while the accesses run */
            /* events already taken from the queue came before the disarm */
            while (eb->n > 0) {
                CHECK(evbuf_poll(ctx, eb, &e) == 1);
                if (e.type == NETVM_EV_NOTIFY) {
                    CHECK(e.value == (uint64_t)round_no);
                    done++;
                } else {
                    take(&e);
                }
            }
            mutate();
            muts--;
            for (int n = 0; n < 4 && evbuf_poll(ctx, eb, &e); n++) {
                if (e.type == NETVM_EV_NOTIFY) {
                    CHECK(e.value == (uint64_t)round_no);
                    done++;
                } else {
                    take(&e);
                }
            }
        }
        double tr = now_s();
        while (done < size - 1 || outstanding > 0) {
            netvm_status_t st = evbuf_next(ctx, eb, &e, 1000);
            if (st == NETVM_ERR_TIMEOUT) {
                if (now_s() - tr < 10)
                    continue;
                for (int r = 1; r < size; r++)
                    for (int i = 0; i < K; i++) {
                        racc_t *x = &cur[r][i];
                        for (int p = 0; p < x->nexp; p++)
                            if (!x->seen[p]) {
                                tw_t *t = &tws[x->exp[p]];
                                fprintf(stderr, "  missing: rank %d access %d (buf %d op %d [%zu, +%zu)) "
                                        "tripwire %d [%zu, %zu) flags %u\n", r, i, x->a.b, x->a.op, x->a.off,
                                        x->a.len, x->exp[p], t->lo, t->hi, t->flags);
                            }
                    }
                FAILF("round %d: %d events missing, %d of %d initiators done after 10 s (seed %#" PRIx64 ")",
                      round_no, outstanding, done, size - 1, seed);
            }
            CHECK_OK(st);
            if (e.type == NETVM_EV_NOTIFY) {
                if (e.value != (uint64_t)round_no)
                    fail_event(&e, "a done notification of another round");
                done++;
            } else {
                take(&e);
            }
        }
        for (int j = 0; j < ntw; j++)
            if (tws[j].state == ST_NEW)
                tws[j].state = ST_STABLE;
    }
    double dt = now_s() - t0;
    netvm_event_t e;
    netvm_status_t st = evbuf_next(ctx, eb, &e, 300);
    if (st == NETVM_OK)
        fail_event(&e, "an event after the last round was complete");
    CHECK_ST(st, NETVM_ERR_TIMEOUT);
    t0 = now_s();
    for (int j = 0; j < ntw; j++)
        CHECK_OK(netvm_tripwire_disarm(tws[j].tw));
    printf("%d tripwires (armed in %.3f s, disarmed in %.3f s); %d rounds x %d initiators x %d accesses: "
           "%" PRIu64 " events in %.2f s (%" PRIu64 " late but allowed, %" PRIu64 " of fresh tripwires, "
           "%" PRIu64 " re-arms during traffic); seed %#" PRIx64 "\n",
           ntw, t_arm, now_s() - t0, rounds, size - 1, K, events, dt, late_ok, new_ok, mutations, seed);
    free(eb);
    if (atomic_masked)
        DEFER_FAILF("%" PRIu64 " events of atomics on READ-only or WRITE-only tripwires said only what the tripwire "
              "watches, not READ|WRITE (what the access did; events.h, docs/events.md: atomics are both)",
              atomic_masked);
}

/* ------------------------------------------------------------- initiator */

static void initiator(int rounds)
{
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *rs[2];
    CHECK_OK(netvm_import(ctx, 0, "pv", &rs[0]));
    CHECK_OK(netvm_import(ctx, 0, "sh", &rs[1]));
    uint8_t *src = malloc(MAXACC), *dst = malloc(MAXACC);
    fill_pattern(src, MAXACC, (uint64_t)rank);
    evbuf_t *eb = calloc(1, sizeof *eb);
    for (int k = 0; k < rounds; k++) {
        netvm_event_t e;
        netvm_status_t st = evbuf_next(ctx, eb, &e, 30000);
        if (st != NETVM_OK)
            FAILF("no go for round %d: %s", k, netvm_strerror(st));
        if (e.type != NETVM_EV_NOTIFY || e.rank != 0 || e.value != (uint64_t)k) {
            ev_print("unexpected", &e);
            FAILF("wanted go for round %d", k);
        }
        for (int i = 0; i < K; i++) {
            acc_t a = gen_access(rank, k, i);
            netvm_req_t *req;
            switch (a.op) {
            case OP_PUT:   CHECK_OK(netvm_put(ctx, rs[a.b], a.off, src, a.len, a.flags)); break;
            case OP_PUTNB:
                CHECK_OK(netvm_put_nb(ctx, rs[a.b], a.off, src, a.len, a.flags, &req));
                CHECK_OK(netvm_wait(&req));
                break;
            case OP_GET:   CHECK_OK(netvm_get(ctx, dst, rs[a.b], a.off, a.len, a.flags)); break;
            case OP_ATOMIC:
                CHECK_OK(netvm_atomic(ctx, rs[a.b], a.off, NETVM_AOP_FADD, 1, 0, NULL));
                break;
            }
        }
        CHECK_OK(netvm_notify(ctx, 0, (uint64_t)k));
    }
    free(eb);
    free(src);
    free(dst);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 4);
    ntw = atoi(argv[1]);
    int static_rounds = atoi(argv[2]), dyn_rounds = atoi(argv[3]);
    if (argc > 4)
        K = atoi(argv[4]);
    int nmut = argc > 5 ? atoi(argv[5]) : 16;
    CHECK(ntw > 0 && ntw < 65536 && K > 0 && K <= 64);
    seed = job_seed();
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    CHECK(size >= 2);
    netvm_seg_t *s0, *s1;
    if (rank == 0) {
        bufs[0] = malloc(BUFLEN);
        memset(bufs[0], 0, BUFLEN);
        CHECK_OK(netvm_export(ctx, bufs[0], BUFLEN, NETVM_RWA, "pv", &s0));
        void *p;
        CHECK_OK(netvm_alloc_shared(ctx, BUFLEN, NETVM_RWA, "sh", &p, &s1));
        bufs[1] = p;
        printf("seed %#" PRIx64 "\n", seed);
        fflush(stdout);
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        target(static_rounds, dyn_rounds, nmut);
    else
        initiator(static_rounds + dyn_rounds);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(bufs[0]);
    if (tws) {
        for (int r = 0; r < size; r++)
            for (int i = 0; i < 64; i++) {
                free(cur[r][i].exp);
                free(cur[r][i].seen);
                free(prev[r][i].exp);
                free(prev[r][i].seen);
            }
        free(cur);
        free(prev);
        free(tws);
    }
    check_deferred();
    return 0;
}
