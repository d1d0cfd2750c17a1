/* A peer killed while others wait: rank 1 dies (SIGKILL) while rank 0
 * waits in netvm_evq_wait and rank 2 in netvm_wait_until and
 * netvm_tripset_wait, each with a timeout: every wait returns (timed out,
 * or reporting the dead peer) in about its time. Then notifications and
 * counting notifications to the dead rank fail with NETVM_ERR_PEER within a
 * bounded time, and the survivors still notify each other. Run with
 * --keep-going; rank 1 is the victim. */
#include "evt.h"

#include <signal.h>

#define WAIT_MS 1500

/* Retry op until it reports the peer dead; it must within 5 s. */
#define EXPECT_PEER_DEAD(op) do { \
    double t0_ = now_s(); netvm_status_t got_; \
    while ((got_ = (op)) == NETVM_OK) { CHECK(now_s() - t0_ < 5.0); sleep_us(1000); } \
    CHECK_ST(got_, NETVM_ERR_PEER); \
} while (0)

static void timed(netvm_status_t st, double t0, const char *what)
{
    double el = now_s() - t0;
    if (st != NETVM_ERR_TIMEOUT && st != NETVM_ERR_PEER)
        FAILF("%s returned %s while the peer died, wanted a timeout or NETVM_ERR_PEER", what, netvm_strerror(st));
    if (el > WAIT_MS / 1000.0 + 10.0)   /* a hang, not a busy machine */
        FAILF("%s returned after %.2f s (timeout %.1f s)", what, el, WAIT_MS / 1000.0);
    printf("rank %d: %s returned %s after %.2f s\n", check_rank, what, netvm_strerror(st), el);
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 3);
    static uint64_t words[8] __attribute__((aligned(64)));
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, words, sizeof words, NETVM_RWA, "words", &seg));
    netvm_tripset_t *set;
    netvm_tripwire_t *tw;
    CHECK_OK(netvm_tripset_create(ctx, &set));
    CHECK_OK(netvm_tripwire_arm(ctx, words, 8, NETVM_TRIP_WRITE, 1, set, &tw));
    CHECK_OK(netvm_counter_arm(ctx, 0, NULL, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        sleep_us(300000);
        raise(SIGKILL);
    }
    netvm_event_t e;
    int n = 0;
    double t0 = now_s();
    if (rank == 0) {
        timed(netvm_evq_wait(ctx, &e, 1, &n, WAIT_MS), t0, "netvm_evq_wait");
    } else {
        timed(netvm_wait_until(ctx, &words[1], NETVM_CMP_NE, 0, 0, WAIT_MS, NULL), t0, "netvm_wait_until");
        t0 = now_s();
        timed(netvm_tripset_wait(set, &e, WAIT_MS), t0, "netvm_tripset_wait");
    }
    EXPECT_PEER_DEAD(netvm_notify(ctx, 1, 7));
    EXPECT_PEER_DEAD(netvm_counter_add(ctx, 1, 0, 1));
    /* the survivors */
    int friend = 2 - rank;
    CHECK_OK(netvm_notify(ctx, friend, 100 + (uint64_t)rank));
    CHECK_OK(netvm_counter_add(ctx, friend, 0, 5));
    int got_notify = 0;
    uint64_t counted = 0;
    t0 = now_s();
    while (!got_notify || counted < 5) {
        netvm_status_t st = netvm_evq_wait(ctx, &e, 1, &n, 1000);
        CHECK(now_s() - t0 < 10);
        if (st == NETVM_ERR_TIMEOUT)
            continue;
        CHECK_OK(st);
        if (e.type == NETVM_EV_NOTIFY && e.rank == friend && e.value == 100 + (uint64_t)friend) {
            got_notify = 1;
        } else if (e.type == NETVM_EV_COUNTER && e.id == 0) {
            counted += e.value;
            CHECK_OK(netvm_counter_ack(ctx, 0));
        } else {
            ev_print("unexpected", &e);
            FAILF("a survivor got an unexpected event");
        }
    }
    CHECK(counted == 5);
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    printf("survivor %d ok\n", rank);
    CHECK_OK(netvm_tripset_destroy(set));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
