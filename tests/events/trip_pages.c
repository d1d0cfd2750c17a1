/* Tripwire ranges at page boundaries: a tripwire spanning a boundary fires
 * for an access touching only its first or only its last byte; accesses
 * adjacent to it (ending exactly where it begins, beginning exactly where
 * it ends) must not fire it; a tripwire over several pages fires for an
 * access to a middle page. Each access is checked on its own (the
 * initiator waits for the target's verdict before the next), on private
 * exported memory and on memory from netvm_alloc_shared. */
#include "evt.h"

#define PG    4096
#define B     PG                /* the page boundary the tripwires sit on */
#define BUFLEN (6 * PG)

enum { T0, T1, T2, T3, NT };
static const struct { size_t lo, hi; } TR[NT] = {
    [T0] = { B - 3, B + 5 },           /* spans the boundary */
    [T1] = { B - 1, B },               /* last byte of a page */
    [T2] = { B, B + 1 },               /* first byte of the next */
    [T3] = { B + PG - 1, B + 3 * PG + 1 }, /* four pages, touching two only by a byte */
};

enum { PUT, PUTNB, GET, IMM, ATOMIC };
#define M(t) (1u << (t))
#define ALL (M(T0) | M(T1) | M(T2) | M(T3))
static const struct { int op; size_t off, len; unsigned want; } A[] = {
    { PUT, B - 3, 1, M(T0) },                 /* only T0's first byte */
    { PUT, B + 4, 1, M(T0) },                 /* only T0's last byte */
    { PUT, B - 11, 8, 0 },                    /* ends where T0 begins */
    { PUT, B + 5, 8, 0 },                     /* begins where T0 ends */
    { GET, B - 3, 1, M(T0) },
    { GET, B + 4, 1, M(T0) },
    { GET, B + 5, 1, 0 },
    { GET, B - 4, 1, 0 },
    { PUT, B - 1, 2, M(T0) | M(T1) | M(T2) }, /* the two bytes around the boundary */
    { PUT, B - 2, 1, M(T0) },
    { PUT, B + 1, 1, M(T0) },
    { PUT, B, 1, M(T0) | M(T2) },
    { PUT, B + 2 * PG, 1, M(T3) },            /* a middle page of T3 */
    { PUT, B + PG - 2, 1, 0 },                /* the byte before T3 */
    { PUT, B + 3 * PG + 1, 1, 0 },            /* the byte after T3 */
    { PUT, B + 3 * PG, 1, M(T3) },            /* T3's last byte */
    { GET, B + PG - 1, 1, M(T3) },            /* T3's first byte */
    { PUT, 0, BUFLEN, ALL },
    { GET, 0, BUFLEN, ALL },
    { IMM, B - 8, 8, M(T0) | M(T1) },
    { ATOMIC, B, 8, M(T0) | M(T2) },
    { PUT, B, PG, M(T0) | M(T2) | M(T3) },    /* one whole page */
    { PUT, B + PG, PG, M(T3) },
    { PUT, B + 5, PG - 6, 0 },                /* fills the gap between T0 and T3 exactly */
    { PUT, B + 5, PG - 5, M(T3) },            /* and one byte more */
    { GET, 1, B - 4, 0 },                     /* ends where T0 begins */
    { GET, 1, B - 3, M(T0) },                 /* one byte more */
    { PUT, B - 100, 200, M(T0) | M(T1) | M(T2) },
    { PUTNB, B + 3 * PG - 10, 20, M(T3) },
    { PUT, B + 3 * PG + 1, PG, 0 },
};
#define NA ((int)(sizeof A / sizeof A[0]))

static unsigned access_of(int op)
{
    return op == GET ? NETVM_TRIP_READ : op == ATOMIC ? NETVM_TRIP_RW : NETVM_TRIP_WRITE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size >= 2);
    /* the table agrees with a brute-force overlap */
    for (int a = 0; a < NA; a++) {
        unsigned m = 0;
        for (int t = 0; t < NT; t++)
            if (A[a].off < TR[t].hi && A[a].off + A[a].len > TR[t].lo)
                m |= M(t);
        if (m != A[a].want)
            FAILF("test table: access %d overlaps %#x, not %#x", a, m, A[a].want);
    }
    uint8_t *bufs[2] = { NULL, NULL };
    netvm_seg_t *s0, *s1;
    if (rank == 0) {
        bufs[0] = aligned_alloc(PG, BUFLEN);
        memset(bufs[0], 0, BUFLEN);
        CHECK_OK(netvm_export(ctx, bufs[0], BUFLEN, NETVM_RWA, "pv", &s0));
        void *p;
        CHECK_OK(netvm_alloc_shared(ctx, BUFLEN, NETVM_RWA, "sh", &p, &s1));
        bufs[1] = p;
        CHECK((uintptr_t)bufs[1] % PG == 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    evbuf_t *eb = calloc(1, sizeof *eb);
    int events = 0;
    if (rank == 0) {
        netvm_tripwire_t *tw[2][NT];
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < NT; t++)
                CHECK_OK(netvm_tripwire_arm(ctx, bufs[b] + TR[t].lo, TR[t].hi - TR[t].lo, NETVM_TRIP_RW,
                                            (uint64_t)(b * NT + t), NULL, &tw[b][t]));
        CHECK_OK(netvm_barrier(ctx));
        for (int b = 0; b < 2; b++)
            for (int a = 0; a < NA; a++) {
                unsigned got = 0;
                int notified = 0;
                double t0 = now_s();
                while (!notified || got != A[a].want) {
                    netvm_event_t e;
                    netvm_status_t st = evbuf_next(ctx, eb, &e, 100);
                    if (st == NETVM_ERR_TIMEOUT) {
                        if (now_s() - t0 > 10)
                            FAILF("%s memory, access %d (op %d, [B%+ld, +%zu)): fired %#x, wanted %#x (10 s)",
                                  b ? "shared" : "private", a, A[a].op, (long)A[a].off - B, A[a].len, got,
                                  A[a].want);
                        continue;
                    }
                    CHECK_OK(st);
                    if (e.type == NETVM_EV_NOTIFY && e.rank == 1 && e.value == (uint64_t)(b * NA + a)) {
                        notified = 1;
                        continue;
                    }
                    int t = (int)e.value - b * NT;
                    if (e.type != NETVM_EV_TRIPWIRE || t < 0 || t >= NT || !(A[a].want & M(t)) || (got & M(t)) ||
                        e.id != netvm_tripwire_id(tw[b][t]) || e.rank != 1 ||
                        e.addr != (uint64_t)(uintptr_t)(bufs[b] + A[a].off) || e.len != A[a].len ||
                        e.access != access_of(A[a].op)) {
                        ev_print("unexpected", &e);
                        FAILF("%s memory, access %d (op %d, [B%+ld, +%zu)) should fire exactly %#x "
                              "(tripwire n fires bit 1<<n; already seen %#x)",
                              b ? "shared" : "private", a, A[a].op, (long)A[a].off - B, A[a].len, A[a].want, got);
                    }
                    got |= M(t);
                    events++;
                }
                CHECK_OK(netvm_notify(ctx, 1, (uint64_t)(b * NA + a)));
            }
        /* nothing late */
        netvm_event_t e;
        netvm_status_t st = evbuf_next(ctx, eb, &e, 300);
        if (st == NETVM_OK) {
            ev_print("late", &e);
            FAILF("an event after every access was accounted for");
        }
        CHECK_ST(st, NETVM_ERR_TIMEOUT);
        for (int b = 0; b < 2; b++)
            for (int t = 0; t < NT; t++)
                CHECK_OK(netvm_tripwire_disarm(tw[b][t]));
        printf("%d accesses on 2 kinds of memory: %d events, each as expected\n", NA, events);
    } else {
        CHECK_OK(netvm_barrier(ctx));
        if (rank == 1) {
            netvm_rseg_t *rs[2];
            CHECK_OK(netvm_import(ctx, 0, "pv", &rs[0]));
            CHECK_OK(netvm_import(ctx, 0, "sh", &rs[1]));
            uint8_t *junk = calloc(1, BUFLEN);
            for (int b = 0; b < 2; b++)
                for (int a = 0; a < NA; a++) {
                    netvm_req_t *req;
                    switch (A[a].op) {
                    case PUT:    CHECK_OK(netvm_put(ctx, rs[b], A[a].off, junk, A[a].len, 0)); break;
                    case PUTNB:
                        CHECK_OK(netvm_put_nb(ctx, rs[b], A[a].off, junk, A[a].len, 0, &req));
                        CHECK_OK(netvm_wait(&req));
                        break;
                    case GET:    CHECK_OK(netvm_get(ctx, junk, rs[b], A[a].off, A[a].len, 0)); break;
                    case IMM:    CHECK_OK(netvm_put_imm(ctx, rs[b], A[a].off, 7, 0)); break;
                    case ATOMIC: CHECK_OK(netvm_atomic(ctx, rs[b], A[a].off, NETVM_AOP_FADD, 1, 0, NULL)); break;
                    }
                    CHECK_OK(netvm_notify(ctx, 0, (uint64_t)(b * NA + a)));
                    /* the verdict */
                    netvm_event_t e;
                    netvm_status_t st;
                    double t0 = now_s();
                    while ((st = evbuf_next(ctx, eb, &e, 1000)) == NETVM_ERR_TIMEOUT)
                        CHECK(now_s() - t0 < 20);
                    CHECK_OK(st);
                    if (e.type != NETVM_EV_NOTIFY || e.rank != 0 || e.value != (uint64_t)(b * NA + a)) {
                        ev_print("unexpected", &e);
                        FAILF("wanted the target's verdict on access %d", a);
                    }
                }
            free(junk);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(bufs[0]);
    free(eb);
    return 0;
}
