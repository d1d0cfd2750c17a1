/* Blocking waiters wake. Two ranks take turns: one waits with no time
 * limit -- in netvm_evq_wait(-1) for a tripwire event or a notification,
 * or in netvm_wait_until(NETVM_WAIT_SLEEP, -1) for a word -- and the other,
 * after a random delay (often none, to race the waiter going to sleep),
 * writes: a put on a tripwire (private or shared memory), a notification,
 * a put with signal (set or add), an immediate put, an atomic or a plain
 * put of the word. Run with NETVM_SPIN_US=0 the waiter sleeps at once, so
 * a lost wake-up hangs: a watchdog names the round. Then timeouts: with
 * nothing coming, each wait returns NETVM_ERR_TIMEOUT in about its time.
 *
 *   wake ROUNDS */
#include "evt.h"

#include <signal.h>

#define TRIP_LEN 256
#define WORD_AT  2048

static volatile int cur_round = -1, cur_kind = -1;
static void watchdog(int sig)
{
    (void)sig;
    char msg[160];
    int n = snprintf(msg, sizeof msg, "FAIL rank %d: watchdog: stuck in round %d (kind %d) -- a lost wake-up?\n",
                     check_rank, cur_round, cur_kind);
    if (write(2, msg, (size_t)n) < 0) { }
    _exit(1);
}

enum {
    K_TRIP_PV, K_TRIP_SH, K_NOTIFY, K_TRIP_SIGNAL,               /* netvm_evq_wait */
    K_SIG_SET_PV, K_IMM_SH, K_ATOMIC_PV, K_SIG_ADD_SH, K_PUT_PV, /* netvm_wait_until */
    NK
};
static const char *kind_names[NK] = { "tripwire/private", "tripwire/shared", "notify", "tripwire/put_signal",
                                      "signal-set/private", "put_imm/shared", "atomic/private",
                                      "signal-add/shared", "put/private" };

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 2);
    signal(SIGALRM, watchdog);
    int peer = 1 - rank;
    uint8_t *pv = aligned_alloc(4096, 4096), *sh;
    memset(pv, 0, 4096);
    netvm_seg_t *s0, *s1;
    CHECK_OK(netvm_export(ctx, pv, 4096, NETVM_RWA, "pv", &s0));
    void *p;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "sh", &p, &s1));
    sh = p;
    netvm_tripwire_t *tpv, *tsh;
    CHECK_OK(netvm_tripwire_arm(ctx, pv, TRIP_LEN, NETVM_TRIP_WRITE, 1, NULL, &tpv));
    CHECK_OK(netvm_tripwire_arm(ctx, sh, TRIP_LEN, NETVM_TRIP_WRITE, 2, NULL, &tsh));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *rpv, *rsh;
    CHECK_OK(netvm_import(ctx, peer, "pv", &rpv));
    CHECK_OK(netvm_import(ctx, peer, "sh", &rsh));
    rng_t g = rng_seed(job_seed(), 9, (uint64_t)rank);
    uint64_t *wpv = (uint64_t *)(pv + WORD_AT), *wsh = (uint64_t *)(sh + WORD_AT);
    uint64_t peer_pv = 0, peer_sh = 0;   /* what this rank last wrote into the peer's words */
    double t0 = now_s(), waited = 0;
    for (int i = 0; i < rounds; i++) {
        int waiter = i % 2, kind = (i / 2) % NK;
        cur_round = i;
        cur_kind = kind;
        alarm(20);
        uint64_t v = (uint64_t)i + 1;
        if (rank == waiter) {
            double tw = now_s();
            if (kind <= K_TRIP_SIGNAL) {
                netvm_event_t e;
                int n = 0;
                CHECK_OK(netvm_evq_wait(ctx, &e, 1, &n, -1));
                CHECK(n == 1);
                evbuf_check_overflow(&e);
                int ok = e.rank == peer;
                if (kind == K_NOTIFY)
                    ok = ok && e.type == NETVM_EV_NOTIFY && e.value == v;
                else
                    ok = ok && e.type == NETVM_EV_TRIPWIRE && e.value == (kind == K_TRIP_SH ? 2u : 1u) &&
                         e.access == NETVM_TRIP_WRITE && e.len == 8 &&
                         e.addr == (uint64_t)(uintptr_t)((kind == K_TRIP_SH ? sh : pv) + 8 * (i % 32));
                if (!ok) {
                    ev_print("unexpected", &e);
                    FAILF("round %d (%s): wrong event", i, kind_names[kind]);
                }
                if (kind != K_NOTIFY) {
                    uint64_t d;
                    memcpy(&d, (kind == K_TRIP_SH ? sh : pv) + 8 * (i % 32), 8);
                    if (d != v)
                        FAILF("round %d (%s): the tripwire fired before the data (%" PRIu64 ")", i,
                              kind_names[kind], d);
                }
            } else {
                const uint64_t *w = (kind == K_IMM_SH || kind == K_SIG_ADD_SH) ? wsh : wpv;
                uint64_t seen = 0;
                CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GE, v, NETVM_WAIT_SLEEP, -1, &seen));
                if (seen < v || __atomic_load_n(w, __ATOMIC_ACQUIRE) < v)
                    FAILF("round %d (%s): woke with the word at %" PRIu64, i, kind_names[kind], seen);
                if (kind == K_SIG_SET_PV) {
                    uint64_t d;
                    memcpy(&d, pv + 1024, 8);
                    if (d != v)
                        FAILF("round %d: the signal came before the data", i);
                }
            }
            waited += now_s() - tw;
        } else {
            switch (rng_below(&g, 4)) {
            case 0: break;
            case 1: sched_yield(); break;
            case 2: sleep_us((long)rng_below(&g, 200)); break;
            default: sleep_us(500 + (long)rng_below(&g, 2000)); break;
            }
            size_t off = 8 * (size_t)(i % 32);
            switch (kind) {
            case K_TRIP_PV: CHECK_OK(netvm_put(ctx, rpv, off, &v, 8, 0)); break;
            case K_TRIP_SH: CHECK_OK(netvm_put(ctx, rsh, off, &v, 8, 0)); break;
            case K_NOTIFY:  CHECK_OK(netvm_notify(ctx, peer, v)); break;
            case K_TRIP_SIGNAL:   /* data on the tripwire, the signal elsewhere */
                CHECK_OK(netvm_put_signal(ctx, rpv, off, &v, 8, rsh, WORD_AT + 8, v, NETVM_SIGNAL_SET, 0));
                break;
            case K_SIG_SET_PV:
                CHECK_OK(netvm_put_signal(ctx, rpv, 1024, &v, 8, rpv, WORD_AT, v, NETVM_SIGNAL_SET, 0));
                peer_pv = v;
                break;
            case K_IMM_SH:
                CHECK_OK(netvm_put_imm(ctx, rsh, WORD_AT, v, 0));
                peer_sh = v;
                break;
            case K_ATOMIC_PV:
                CHECK_OK(netvm_atomic(ctx, rpv, WORD_AT, NETVM_AOP_ADD, v - peer_pv, 0, NULL));
                peer_pv = v;
                break;
            case K_SIG_ADD_SH:
                CHECK_OK(netvm_put_signal_nb(ctx, rsh, 1024, &v, 8, rsh, WORD_AT, v - peer_sh, NETVM_SIGNAL_ADD, 0));
                CHECK_OK(netvm_flush(ctx, peer));
                peer_sh = v;
                break;
            case K_PUT_PV:
                CHECK_OK(netvm_put(ctx, rpv, WORD_AT, &v, 8, 0));
                peer_pv = v;
                break;
            }
        }
    }
    alarm(0);
    cur_round = -1;
    CHECK_OK(netvm_barrier(ctx));
    double dt = now_s() - t0;
    if (rank == 0)
        printf("%d rounds in %.2f s (waiting %.1f us a round on average, delays included)\n", rounds, dt,
               waited * 1e6 / (rounds / 2));

    /* timeouts, with nothing coming: never early; late only by what a busy
     * machine may add (the upper bounds catch a wait that ignores its
     * timeout, not a slow scheduler) */
    netvm_event_t e;
    int n = -1;
    double t = now_s();
    CHECK_ST(netvm_evq_wait(ctx, &e, 1, &n, 100), NETVM_ERR_TIMEOUT);
    double el = now_s() - t;
    if (el < 0.095 || el > 30)
        DEFER_FAILF("netvm_evq_wait(100 ms) timed out after %.3f s", el);
    t = now_s();
    CHECK_ST(netvm_evq_wait(ctx, &e, 1, &n, 0), NETVM_ERR_TIMEOUT);
    if (now_s() - t > 30)
        DEFER_FAILF("netvm_evq_wait(0) took %.3f s", now_s() - t);
    CHECK(netvm_evq_poll(ctx, &e, 1) == 0);
    uint64_t seen = 12345, cur = __atomic_load_n(wpv, __ATOMIC_ACQUIRE);
    static const unsigned wflags[3] = { 0, NETVM_WAIT_SLEEP, NETVM_WAIT_SPIN };
    for (int f = 0; f < 3; f++) {
        t = now_s();
        CHECK_ST(netvm_wait_until(ctx, wpv, NETVM_CMP_EQ, cur + 1000, wflags[f], 100, &seen), NETVM_ERR_TIMEOUT);
        el = now_s() - t;
        if (el < 0.095 || el > 30)
            DEFER_FAILF("netvm_wait_until(flags %u, 100 ms) timed out after %.3f s", wflags[f], el);
        CHECK(seen == cur);
    }
    netvm_tripset_t *set;
    netvm_tripwire_t *tw3;
    CHECK_OK(netvm_tripset_create(ctx, &set));
    CHECK_OK(netvm_tripwire_arm(ctx, pv + 3000, 8, NETVM_TRIP_WRITE, 3, set, &tw3));
    t = now_s();
    CHECK_ST(netvm_tripset_wait(set, &e, 100), NETVM_ERR_TIMEOUT);
    el = now_s() - t;
    if (el < 0.095 || el > 30)
        DEFER_FAILF("netvm_tripset_wait(100 ms) timed out after %.3f s", el);

    /* a tripset waiter with no limit, woken by the peer */
    CHECK_OK(netvm_barrier(ctx));
    alarm(20);
    cur_round = -2;
    if (rank == 0) {
        CHECK_OK(netvm_tripset_wait(set, &e, -1));
        CHECK(e.type == NETVM_EV_TRIPWIRE && e.value == 3 && e.rank == 1 && e.id == netvm_tripwire_id(tw3));
    } else {
        sleep_us(20000);
        uint64_t x = 7;
        CHECK_OK(netvm_put(ctx, rpv, 3000, &x, 8, 0));
    }
    alarm(0);
    CHECK_OK(netvm_tripset_destroy(set));
    CHECK_OK(netvm_tripwire_disarm(tpv));
    CHECK_OK(netvm_tripwire_disarm(tsh));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(pv);
    check_deferred();
    return 0;
}
