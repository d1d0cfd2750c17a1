/* Requester, completer and responder notifications, and remote tripwires.
 * Rank 0 initiates, rank 1 is the target, rank 2 a relay: a third party
 * whose accesses are not ordered with rank 0's, used to check that what an
 * event at rank 0 claims is complete at the target really is.
 *
 *   notif OPS REMOTE_ROUNDS
 *
 * A: puts, gets and atomics with every combination of notification flags.
 *    Each notification must carry the tag, the peer, the status; when it
 *    comes the data must be there: a requester event of a put is checked by
 *    the relay's get, a completer event at the target by the target reading
 *    its memory, a requester or completer event of a get by the initiator
 *    reading its buffer, an atomic's by its result and the target's word.
 *    No notification comes that was not asked for.
 * B: operations on revoked segments (private and shared) and out of bounds
 *    report the status: at once, or in the requester event.
 * C: remote tripwires (netvm_tripwire_arm_remote): a put, a nonblocking put,
 *    a put with notification and a put with signal overlapping the watched
 *    range each give one NETVM_EV_REMOTE_TRIPWIRE (offset and length of the
 *    write); on it rank 0 asks the relay to get the range from the target
 *    and the target to read it: the data must be complete. A once-only one
 *    fires once; a range no write touches never fires; after disarm none
 *    fires. */
#include "evt.h"

#define I 0
#define T 1
#define R 2
#define BUFLEN   (1024 * 1024)
#define ATOM_AT  (BUFLEN - 4096)
#define RT_AT    (256 * 1024)
#define RT_LEN   (64 * 1024)
#define ONCE_AT  (512 * 1024)
#define QUIET_AT (600 * 1024)
#define SIG_AT   (900 * 1024)
#define MAXC     (200 * 1024)
#define DONE     (0xdull << 56)

enum { PUT_RC, PUT_C, PUT_R, GET_RCS, GET_R, GET_C, ATOM_RC, ATOM_R, NKIND };
static const char *kname[NKIND] = { "put R+C", "put C", "put R", "get R+C+resp", "get R", "get C",
                                    "atomic R+C", "atomic R" };

static netvm_ctx_t *ctx;
static uint8_t *tb[2];            /* target's buffers: private, shared */
static netvm_rseg_t *rb[2];       /* their imports */
static uint8_t scratch[2 * MAXC];
static evbuf_t eb;
static int nops, nrounds;
static uint64_t *atom_after;      /* A: the word's value after op i */

static int a_kind(int i) { return i % NKIND; }
static int a_b(int i) { return (i / NKIND) % 2; }
static size_t a_len(int i) { return 8 + mix64((uint64_t)i * 3 + 1) % 8185; }
static size_t a_off(int i) { return (size_t)(i % 32) * 16384 + mix64((uint64_t)i * 5 + 2) % 64; }
static uint64_t a_h(int i) { return mix64((uint64_t)i ^ 0xa000); }
static size_t a_word(int i) { return ATOM_AT + 8 * (size_t)(i % 16); }
static uint64_t a_tag(int i) { return (0xaull << 56) | ((uint64_t)a_kind(i) << 32) | (uint64_t)i; }

static int c_b(int i) { return i % 2; }
static int c_method(int i) { return (i / 2) % 4; }
static size_t c_off(int i) { return RT_AT - 2048 + mix64((uint64_t)i * 11 + 4) % (60 * 1024); }
static size_t c_len(int i)
{
    size_t off = c_off(i), len = 2048 + mix64((uint64_t)i * 7 + 3) % (MAXC - 2048);
    return off + len > 500 * 1024 ? 500 * 1024 - off : len;
}
static uint64_t c_h(int i) { return mix64((uint64_t)i ^ 0xc000); }

static void want_pattern(const uint8_t *p, size_t len, uint64_t h, const char *what, int i)
{
    long bad = pattern_mismatch(p, len, h, scratch);
    if (bad >= 0)
        FAILF("%s (op %d, %zu bytes): byte %ld is not the data's", what, i, len, bad);
}

static void next_event(netvm_event_t *e, const char *waiting_for)
{
    double t0 = now_s();
    netvm_status_t st;
    while ((st = evbuf_next(ctx, &eb, e, 1000)) == NETVM_ERR_TIMEOUT)
        if (now_s() - t0 > 10)
            FAILF("no event for 10 s waiting for %s", waiting_for);
    CHECK_OK(st);
}

static void bad_event(const netvm_event_t *e, const char *why)
{
    ev_print("unexpected", e);
    FAILF("%s", why);
}

static int addr_is(uint64_t got, const void *abs, size_t off)
{
    return got == (uint64_t)(uintptr_t)abs || got == off;
}

/* ----------------------------------------------------------------- A */

static void a_initiator(void)
{
    uint8_t *src = malloc(8192), *dst = malloc(8192);
    for (int i = 0; i < nops; i++) {
        int k = a_kind(i), b = a_b(i);
        size_t len = a_len(i), off = a_off(i);
        uint64_t tag = a_tag(i), result = 0xdeadbeef;
        int req = 0, comp = 0, tack = 0, relay = 0;
        fill_pattern(src, len, a_h(i));
        if (k == GET_RCS || k == GET_R || k == GET_C) {
            CHECK_OK(netvm_put(ctx, rb[b], off, src, len, 0));
            memset(dst, 0, len);
        }
        switch (k) {
        case PUT_RC:
            CHECK_OK(netvm_put_notify(ctx, rb[b], off, src, len, NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER, tag));
            req = tack = 1;
            break;
        case PUT_C:
            CHECK_OK(netvm_put_notify(ctx, rb[b], off, src, len, NETVM_F_NOTIFY_COMPLETER, tag));
            tack = 1;
            break;
        case PUT_R:
            CHECK_OK(netvm_put_notify(ctx, rb[b], off, src, len, NETVM_F_NOTIFY_REQUESTER, tag));
            req = relay = 1;
            break;
        case GET_RCS:
            CHECK_OK(netvm_get_notify(ctx, dst, rb[b], off, len,
                                      NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER | NETVM_F_NOTIFY_RESPONDER, tag));
            req = comp = tack = 1;
            break;
        case GET_R:
            CHECK_OK(netvm_get_notify(ctx, dst, rb[b], off, len, NETVM_F_NOTIFY_REQUESTER, tag));
            req = 1;
            break;
        case GET_C:
            CHECK_OK(netvm_get_notify(ctx, dst, rb[b], off, len, NETVM_F_NOTIFY_COMPLETER, tag));
            comp = 1;
            break;
        case ATOM_RC:
        case ATOM_R:
            CHECK_OK(netvm_atomic_notify(ctx, rb[b], a_word(i), NETVM_AOP_FADD, (uint64_t)i + 1, 0, &result,
                                         NETVM_F_NOTIFY_REQUESTER | (k == ATOM_RC ? NETVM_F_NOTIFY_COMPLETER : 0), tag));
            req = 1;
            tack = k == ATOM_RC;
            break;
        }
        int relay_sent = 0;
        while (req + comp + tack + relay > 0) {
            netvm_event_t e;
            next_event(&e, kname[k]);
            if (e.type == NETVM_EV_REQUESTER && req && e.value == tag) {
                if (e.rank != T || e.status != NETVM_OK)
                    bad_event(&e, "requester event: wrong rank or status");
                if (k == GET_RCS || k == GET_R)
                    want_pattern(dst, len, a_h(i), "get: the buffer when the requester event came", i);
                if (k == ATOM_RC || k == ATOM_R) {
                    uint64_t want = atom_after[i] - ((uint64_t)i + 1);
                    if (result != want)
                        FAILF("atomic op %d: result %" PRIu64 " at the requester event, wanted %" PRIu64, i, result, want);
                }
                if (k == PUT_R) {   /* visible at the target: a third party must see it */
                    CHECK_OK(netvm_notify(ctx, R, (0xaull << 56) | (uint64_t)i));
                    relay_sent = 1;
                }
                req = 0;
            } else if (e.type == NETVM_EV_COMPLETER && comp && e.value == tag) {
                if (e.rank != T || e.len != len || !addr_is(e.addr, dst, off))
                    bad_event(&e, "completer event of a get: wrong rank, len or addr");
                want_pattern(dst, len, a_h(i), "get: the buffer when the completer event came", i);
                comp = 0;
            } else if (e.type == NETVM_EV_NOTIFY && e.rank == T && tack && e.value == tag) {
                tack = 0;
            } else if (e.type == NETVM_EV_NOTIFY && e.rank == R && relay && relay_sent &&
                       e.value == ((0xaull << 56) | (uint64_t)i)) {
                relay = 0;
            } else {
                fprintf(stderr, "op %d (%s): waiting for req %d comp %d target %d relay %d\n", i, kname[k], req, comp,
                        tack, relay);
                bad_event(&e, "an event that was not asked for, or a wrong tag");
            }
        }
    }
    CHECK_OK(netvm_flush(ctx, T));
    CHECK_OK(netvm_notify(ctx, T, DONE));
    CHECK_OK(netvm_notify(ctx, R, DONE));
    free(src);
    free(dst);
}

static void a_target(void)
{
    int want = 0, got = 0;
    for (int i = 0; i < nops; i++) {
        int k = a_kind(i);
        want += k == PUT_RC || k == PUT_C || k == GET_RCS || k == ATOM_RC;
    }
    for (;;) {
        netvm_event_t e;
        next_event(&e, "phase A at the target");
        if (e.type == NETVM_EV_NOTIFY && e.rank == I && e.value == DONE)
            break;
        if ((e.type != NETVM_EV_COMPLETER && e.type != NETVM_EV_RESPONDER) || e.rank != I || (e.value >> 56) != 0xa)
            bad_event(&e, "target: not a completer or responder event of rank 0");
        int i = (int)(e.value & 0xffffffff);
        if (i >= nops || e.value != a_tag(i))
            bad_event(&e, "target: a tag no operation had");
        int k = a_kind(i), b = a_b(i);
        size_t len = a_len(i), off = a_off(i);
        if (e.type == NETVM_EV_COMPLETER && (k == PUT_RC || k == PUT_C)) {
            if (e.len != len || !addr_is(e.addr, tb[b] + off, off))
                bad_event(&e, "completer event of a put: wrong len or addr");
            want_pattern(tb[b] + off, len, a_h(i), "put: the target's memory when the completer event came", i);
        } else if (e.type == NETVM_EV_COMPLETER && k == ATOM_RC) {
            uint64_t w = __atomic_load_n((uint64_t *)(tb[b] + a_word(i)), __ATOMIC_ACQUIRE);
            if (e.len != 8 || !addr_is(e.addr, tb[b] + a_word(i), a_word(i)))
                bad_event(&e, "completer event of an atomic: wrong len or addr");
            if (w != atom_after[i])
                FAILF("atomic op %d: the word is %" PRIu64 " at the completer event, wanted %" PRIu64, i, w, atom_after[i]);
        } else if (e.type == NETVM_EV_RESPONDER && k == GET_RCS) {
            if (e.len != len || !addr_is(e.addr, tb[b] + off, off))
                bad_event(&e, "responder event: wrong len or addr");
        } else {
            fprintf(stderr, "op %d is a %s\n", i, kname[k]);
            bad_event(&e, "target: a notification that was not asked for");
        }
        got++;
        CHECK_OK(netvm_notify(ctx, I, e.value));
    }
    if (got != want)
        FAILF("target: %d notifications, wanted %d", got, want);
}

static void relay(int phase)
{
    uint8_t *buf = malloc(MAXC);
    for (;;) {
        netvm_event_t e;
        next_event(&e, "a request to the relay");
        if (e.type != NETVM_EV_NOTIFY || e.rank != I)
            bad_event(&e, "relay: wanted a notification of rank 0");
        if (e.value == DONE)
            break;
        int i = (int)(e.value & 0xffffffff);
        if ((int)(e.value >> 56) != phase)
            bad_event(&e, "relay: a request of another phase");
        if (phase == 0xa) {
            size_t len = a_len(i);
            CHECK_OK(netvm_get(ctx, buf, rb[a_b(i)], a_off(i), len, 0));
            want_pattern(buf, len, a_h(i), "a put whose requester event came, read by a third rank", i);
            CHECK_OK(netvm_notify(ctx, I, e.value));
        } else {
            size_t len = c_len(i);
            CHECK_OK(netvm_get(ctx, buf, rb[c_b(i)], c_off(i), len, 0));
            want_pattern(buf, len, c_h(i), "a write whose remote tripwire fired, read by a third rank", i);
            CHECK_OK(netvm_notify(ctx, T, e.value));
        }
    }
    free(buf);
}

/* ----------------------------------------------------------------- B */

/* An operation on a segment that cannot take it: the status comes back
 * either at once (the call fails: nothing was issued, no event follows) or
 * in the requester event (the call returned NETVM_OK) -- exactly once. */
static void expect_status(netvm_status_t st, uint64_t tag, netvm_status_t want, const char *what)
{
    if (st == want) {
        /* reported at once: the operation was not issued, no event may follow */
        netvm_event_t e;
        if (evbuf_next(ctx, &eb, &e, 100) == NETVM_OK) {
            ev_print("second report", &e);
            if (e.type != NETVM_EV_REQUESTER || e.value != tag)
                FAILF("an unexpected event");
            DEFER_FAILF("%s returned %s at once, and then a requester event (status %u) reported it again", what,
                        netvm_strerror(want), e.status);
            return;
        }
        printf("  %s: %s at once\n", what, netvm_strerror(want));
        return;
    }
    if (st != NETVM_OK)
        FAILF("%s returned %s, wanted %s (at once or in the requester event)", what, netvm_strerror(st),
              netvm_strerror(want));
    netvm_event_t e;
    next_event(&e, what);
    if (e.type != NETVM_EV_REQUESTER || e.value != tag || e.rank != T)
        bad_event(&e, "wanted the requester event of the failing operation");
    if (e.status != (uint32_t)want)
        FAILF("%s: the requester event says %s (%u), wanted %s", what,
              e.status < NETVM_STATUS_COUNT ? netvm_strerror((netvm_status_t)e.status) : "?", e.status,
              netvm_strerror(want));
    printf("  %s: %s in the requester event\n", what, netvm_strerror(want));
}

static void b_initiator(netvm_rseg_t *gone, netvm_rseg_t *gone_sh)
{
    uint8_t buf[64] = { 0 };
    uint64_t res;
    netvm_rseg_t *g[2] = { gone, gone_sh };
    for (int s = 0; s < 2; s++) {
        const char *nm = s ? "shared" : "private";
        char what[96];
        snprintf(what, sizeof what, "get_notify from a revoked %s segment", nm);
        expect_status(netvm_get_notify(ctx, buf, g[s], 0, 64, NETVM_F_NOTIFY_REQUESTER, 0xb1), 0xb1, NETVM_ERR_REVOKED, what);
        snprintf(what, sizeof what, "put_notify to a revoked %s segment", nm);
        expect_status(netvm_put_notify(ctx, g[s], 0, buf, 64, NETVM_F_NOTIFY_REQUESTER, 0xb2), 0xb2, NETVM_ERR_REVOKED, what);
        snprintf(what, sizeof what, "atomic_notify on a revoked %s segment", nm);
        expect_status(netvm_atomic_notify(ctx, g[s], 0, NETVM_AOP_FADD, 1, 0, &res, NETVM_F_NOTIFY_REQUESTER, 0xb3),
                      0xb3, NETVM_ERR_REVOKED, what);
        snprintf(what, sizeof what, "get_notify beyond a %s segment's end", nm);
        expect_status(netvm_get_notify(ctx, buf, rb[s], BUFLEN - 8, 64, NETVM_F_NOTIFY_REQUESTER, 0xb4), 0xb4,
                      NETVM_ERR_BOUNDS, what);
    }
    netvm_event_t e;
    netvm_status_t st = evbuf_next(ctx, &eb, &e, 200);
    if (st == NETVM_OK)
        bad_event(&e, "an event after the failing operations were all reported");
}

/* ----------------------------------------------------------------- C */

static void c_initiator(void)
{
    netvm_tripwire_t *rt[4];
    CHECK_OK(netvm_tripwire_arm_remote(ctx, rb[0], RT_AT, RT_LEN, NETVM_TRIP_WRITE, 0xa0, NULL, &rt[0]));
    CHECK_OK(netvm_tripwire_arm_remote(ctx, rb[1], RT_AT, RT_LEN, NETVM_TRIP_WRITE, 0xa1, NULL, &rt[1]));
    CHECK_OK(netvm_tripwire_arm_remote(ctx, rb[0], ONCE_AT, 16, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, 0xa2, NULL, &rt[2]));
    CHECK_OK(netvm_tripwire_arm_remote(ctx, rb[1], QUIET_AT, 100, NETVM_TRIP_WRITE, 0xa3, NULL, &rt[3]));
    uint8_t *src = malloc(MAXC);
    int once = 0;
    uint64_t small = 0x5a5a;
    for (int i = 0; i < nrounds; i++) {
        int b = c_b(i), m = c_method(i);
        size_t off = c_off(i), len = c_len(i);
        uint64_t tag = (0xcull << 56) | (uint64_t)i;
        fill_pattern(src, len, c_h(i));
        netvm_req_t *req = NULL;
        int rtrip = 1, reqev = 0, tack = 0, once_want = 0;
        switch (m) {
        case 0: CHECK_OK(netvm_put(ctx, rb[b], off, src, len, 0)); break;
        case 1: CHECK_OK(netvm_put_nb(ctx, rb[b], off, src, len, 0, &req)); break;
        case 2:
            CHECK_OK(netvm_put_notify(ctx, rb[b], off, src, len, NETVM_F_NOTIFY_REQUESTER, tag));
            reqev = 1;
            break;
        case 3:
            CHECK_OK(netvm_put_signal_nb(ctx, rb[b], off, src, len, rb[1], SIG_AT, (uint64_t)i + 1, NETVM_SIGNAL_SET, 0));
            break;
        }
        if (i % 4 == 1) {   /* the once-only one: only the first fires */
            CHECK_OK(netvm_put(ctx, rb[0], ONCE_AT + 8, &small, 8, 0));
            once_want = once == 0;
        }
        if (i % 4 == 3)     /* next to the quiet one, never on it */
            CHECK_OK(netvm_put(ctx, rb[1], QUIET_AT + 100, &small, 8, 0));
        while (rtrip + reqev + tack + once_want > 0) {
            netvm_event_t e;
            next_event(&e, "a remote tripwire");
            if (e.type == NETVM_EV_REMOTE_TRIPWIRE && e.value == (uint64_t)(0xa0 + b) && rtrip) {
                if (e.rank != T || e.id != netvm_tripwire_id(rt[b]) || e.addr != off || e.len != len)
                    bad_event(&e, "remote tripwire event: wrong rank, id, offset or length");
                /* complete at the target: a third rank must see it, then the target */
                CHECK_OK(netvm_notify(ctx, R, tag));
                rtrip = 0;
                tack = 1;
            } else if (e.type == NETVM_EV_REMOTE_TRIPWIRE && e.value == 0xa2 && once_want) {
                if (e.rank != T || e.addr != ONCE_AT + 8 || e.len != 8)
                    bad_event(&e, "once-only remote tripwire: wrong rank, offset or length");
                once++;
                once_want = 0;
            } else if (e.type == NETVM_EV_REQUESTER && reqev && e.value == tag) {
                if (e.status != NETVM_OK || e.rank != T)
                    bad_event(&e, "requester event of put_notify");
                reqev = 0;
            } else if (e.type == NETVM_EV_NOTIFY && e.rank == T && tack && e.value == tag) {
                tack = 0;
            } else {
                fprintf(stderr, "round %d (method %d): waiting for rtrip %d req %d target %d once %d\n", i, m, rtrip,
                        reqev, tack, once_want);
                bad_event(&e, "an unexpected event (a once-only tripwire twice, a quiet one, a wrong tag)");
            }
        }
        if (req)
            CHECK_OK(netvm_wait(&req));
    }
    CHECK_OK(netvm_flush(ctx, T));
    CHECK(once == 1);
    uint64_t fired = 99;
    CHECK_OK(netvm_tripwire_test(rt[3], &fired));
    CHECK(fired == 0);
    CHECK_OK(netvm_notify(ctx, T, DONE));
    CHECK_OK(netvm_notify(ctx, R, DONE));
    /* disarmed: silent */
    for (int k = 0; k < 4; k++)
        CHECK_OK(netvm_tripwire_disarm(rt[k]));
    for (int b = 0; b < 2; b++)
        CHECK_OK(netvm_put(ctx, rb[b], RT_AT, src, RT_LEN, 0));
    CHECK_OK(netvm_put(ctx, rb[0], ONCE_AT, src, 16, 0));
    CHECK_OK(netvm_put(ctx, rb[1], QUIET_AT, src, 100, 0));
    CHECK_OK(netvm_put_signal(ctx, rb[0], RT_AT, src, 64, rb[1], SIG_AT, 1, NETVM_SIGNAL_SET, 0));
    CHECK_OK(netvm_flush(ctx, T));
    netvm_event_t e;
    netvm_status_t st = evbuf_next(ctx, &eb, &e, 300);
    if (st == NETVM_OK)
        bad_event(&e, "an event after the remote tripwires were disarmed");
    CHECK_ST(st, NETVM_ERR_TIMEOUT);
    free(src);
}

static void c_target(void)
{
    for (;;) {
        netvm_event_t e;
        next_event(&e, "phase C at the target");
        if (e.type == NETVM_EV_NOTIFY && e.rank == I && e.value == DONE)
            break;
        if (e.type != NETVM_EV_NOTIFY || e.rank != R || (e.value >> 56) != 0xc)
            bad_event(&e, "target: wanted the relay's notification");
        int i = (int)(e.value & 0xffffffff);
        want_pattern(tb[c_b(i)] + c_off(i), c_len(i), c_h(i),
                     "the target's memory after the writer's remote tripwire fired", i);
        CHECK_OK(netvm_notify(ctx, I, e.value));
    }
}

int main(int argc, char **argv)
{
    nops = argc > 1 ? atoi(argv[1]) : 4000;
    nrounds = argc > 2 ? atoi(argv[2]) : 400;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 3);
    atom_after = calloc((size_t)nops, sizeof *atom_after);
    {
        uint64_t words[2][16] = { { 0 } };
        for (int i = 0; i < nops; i++)
            if (a_kind(i) == ATOM_RC || a_kind(i) == ATOM_R) {
                words[a_b(i)][i % 16] += (uint64_t)i + 1;
                atom_after[i] = words[a_b(i)][i % 16];
            }
    }
    netvm_seg_t *s[4];
    void *p;
    uint8_t *gone = NULL;
    if (rank == T) {
        tb[0] = malloc(BUFLEN);
        memset(tb[0], 0, BUFLEN);
        CHECK_OK(netvm_export(ctx, tb[0], BUFLEN, NETVM_RWA, "pv", &s[0]));
        CHECK_OK(netvm_alloc_shared(ctx, BUFLEN, NETVM_RWA, "sh", &p, &s[1]));
        tb[1] = p;
        gone = calloc(1, 4096);
        CHECK_OK(netvm_export(ctx, gone, 4096, NETVM_RWA, "gone", &s[2]));
        CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "gone-sh", &p, &s[3]));
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *rgone = NULL, *rgone_sh = NULL;
    if (rank != T) {
        CHECK_OK(netvm_import(ctx, T, "pv", &rb[0]));
        CHECK_OK(netvm_import(ctx, T, "sh", &rb[1]));
        CHECK_OK(netvm_import(ctx, T, "gone", &rgone));
        CHECK_OK(netvm_import(ctx, T, "gone-sh", &rgone_sh));
    }
    CHECK_OK(netvm_barrier(ctx));

    double t0 = now_s();
    if (rank == I)
        a_initiator();
    else if (rank == T)
        a_target();
    else
        relay(0xa);
    CHECK_OK(netvm_barrier(ctx));
    if (rank == I)
        printf("A: %d notified operations checked in %.2f s\n", nops, now_s() - t0);

    if (rank == T) {
        CHECK_OK(netvm_unexport(s[2]));
        CHECK_OK(netvm_unexport(s[3]));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == I) {
        printf("B:\n");
        b_initiator(rgone, rgone_sh);
    }
    CHECK_OK(netvm_barrier(ctx));

    t0 = now_s();
    if (rank == I)
        c_initiator();
    else if (rank == T)
        c_target();
    else
        relay(0xc);
    CHECK_OK(netvm_barrier(ctx));
    if (rank == I)
        printf("C: %d writes under remote tripwires checked in %.2f s\n", nrounds, now_s() - t0);
    /* nothing left over anywhere */
    netvm_event_t e;
    netvm_status_t st = evbuf_next(ctx, &eb, &e, 100);
    if (st == NETVM_OK)
        bad_event(&e, "a leftover event");
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    check_deferred();
    free(gone);
    free(tb[0]);
    free(atom_after);
    return 0;
}
