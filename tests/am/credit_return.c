/* Credits owed go back on the next message the other way, and alone only
 * at three quarters of NETVM_AM_CREDITS (C), 2 ranks:
 *
 * 1. windows: rank 0 sends W = C/2 one-way messages, then waits for rank
 *    1's answer (one message a window, sent by its application thread once
 *    it has seen the window). The answers carry every credit: rank 1 sends
 *    exactly one message a window. (Returning alone at half the credits,
 *    as before, sent two more a window of 64 with C = 64.)
 * 2. a stream: rank 0 sends N one-way messages nobody answers. Rank 1
 *    returns credits alone each time it owes 3C/4: N / (3C/4) messages,
 *    and rank 0's stream never stops for good (it finishes).
 * Rank 1 counts its own sends (netvm_am_stats().sent) between points
 * where it sends nothing else. */
#include "am/am_test.h"

#define H_MSG    1
#define H_ANSWER 2
#define WINDOWS  20

static atomic_ulong handled, answers;

static int on_msg(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx, (void)m, (void)arg;
    atomic_fetch_add(&handled, 1);
    return NETVM_AM_DONE;
}

static int on_answer(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx, (void)m, (void)arg;
    atomic_fetch_add(&answers, 1);
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    long C = amt_env("NETVM_AM_CREDITS", 128);
    CHECK(C >= 8);
    unsigned long W = (unsigned long)C / 2, lone = (unsigned long)C * 3 / 4, N = 10 * lone + lone / 2;
    CHECK_OK(netvm_am_register(ctx, H_MSG, on_msg, NULL));
    CHECK_OK(netvm_am_register(ctx, H_ANSWER, on_answer, NULL));
    CHECK_OK(netvm_barrier(ctx));

    /* 1. windows answered by rank 1 */
    uint64_t s1 = 0;   /* rank 1: its sends before phase 2 (read before the barrier: the
                        * progress thread may handle phase 2's first messages before
                        * this thread is back from it) */
    if (rank == 0) {
        for (unsigned long w = 1; w <= WINDOWS; w++) {
            for (unsigned long k = 0; k < W; k++)
                CHECK_OK(netvm_am_send(ctx, 1, H_MSG, NULL, 0, NULL, 0, NULL));
            WAIT_UNTIL(ctx, atomic_load(&answers) == w);
        }
    } else {
        uint64_t s0 = amt_stats(ctx).sent;
        for (unsigned long w = 1; w <= WINDOWS; w++) {
            WAIT_UNTIL(ctx, atomic_load(&handled) == w * W);
            CHECK_OK(netvm_am_send(ctx, 0, H_ANSWER, NULL, 0, NULL, 0, NULL));
        }
        s1 = amt_stats(ctx).sent;
        if (s1 - s0 != WINDOWS)
            FAILF("%d windows of %lu messages, each answered once: %llu messages sent back, wanted %d "
                  "(credits returned alone besides the answers)",
                  WINDOWS, W, (unsigned long long)(s1 - s0), WINDOWS);
    }
    CHECK_OK(netvm_barrier(ctx));

    /* 2. a stream nobody answers */
    if (rank == 0) {
        for (unsigned long k = 0; k < N; k++)
            CHECK_OK(netvm_am_send(ctx, 1, H_MSG, NULL, 0, NULL, 0, NULL));
    } else {
        unsigned long base = WINDOWS * W;   /* all phase 1 sent: rank 0 waited for every answer */
        WAIT_UNTIL(ctx, atomic_load(&handled) == base + N);
        uint64_t sent = amt_stats(ctx).sent - s1;
        /* whatever the previous phase left owed (under lone) counts too */
        if (sent < N / lone || sent > N / lone + 1)
            FAILF("%lu messages with credits returned alone at %lu owed: %llu returns, wanted %lu or %lu", N,
                  lone, (unsigned long long)sent, N / lone, N / lone + 1);
    }
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
