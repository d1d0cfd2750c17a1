/* Flow control of one-way messages (am.h): each peer may have
 * NETVM_AM_CREDITS (C) of them not yet handled at a receiver; a sender
 * beyond that waits, or gets NETVM_ERR_AGAIN inside a handler, so no peer
 * makes another hold more than C of its messages. Ranks 0 and 2 send to
 * rank 1, whose handler keeps deferring every message while its gate is
 * closed and counts, per sender, the messages it holds (seen, not done).
 *  - In a handler (rank 1 asks each sender to start a burst): sends succeed
 *    exactly C times, the next one says NETVM_ERR_AGAIN, and nothing was
 *    counted as a credit wait.
 *  - From the application thread: 10 C more blocking sends each. Rank 1
 *    asks each sender (requests need no credit) until it reports a credit
 *    wait, so both are known to be stuck, then opens the gate.
 *  - Every message arrives exactly once; rank 1 never held more than C of
 *    one sender's messages. Order is not promised (am.h says nothing of
 *    it, and deferred messages go behind newer ones), so it is not
 *    checked. */
#include "am_test.h"

enum { H_MSG = 1, H_BURST = 2, H_WAITS = 3 };

#define ROUNDS 10

static int C;
static _Atomic int gate;
static _Atomic int held[3], max_held[3], done_n[3];
static _Atomic uint8_t *seen[3];   /* per sender, per seq: 1 seen, 2 done */
static uint64_t total;

static int on_msg(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->nargs == 1 && m->len == 0 && (m->peer == 0 || m->peer == 2));
    uint64_t seq = m->args[0];
    CHECK(seq < total);
    if (m->deferred == 0) {
        uint8_t was = atomic_exchange(&seen[m->peer][seq], 1);
        if (was)
            FAILF("message %llu of rank %d delivered twice", (unsigned long long)seq, m->peer);
        int h = atomic_fetch_add(&held[m->peer], 1) + 1;
        int mx = atomic_load(&max_held[m->peer]);
        while (h > mx && !atomic_compare_exchange_weak(&max_held[m->peer], &mx, h))
            ;
        if (h > C)
            FAILF("holding %d messages of rank %d, NETVM_AM_CREDITS is %d", h, m->peer, C);
    }
    if (!atomic_load(&gate))
        return NETVM_AM_DEFER;
    atomic_fetch_sub(&held[m->peer], 1);
    atomic_store(&seen[m->peer][seq], 2);
    atomic_fetch_add(&done_n[m->peer], 1);
    return NETVM_AM_DONE;
}

/* --- senders ------------------------------------------------------------------------ */

static _Atomic int burst_ok = -1;
static _Atomic int burst_last = -1;
static _Atomic uint64_t burst_waits;

static int on_burst(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    (void)m;
    uint64_t waits = amt_stats(ctx).credit_waits;
    int ok = 0;
    netvm_status_t st;
    for (;;) {
        uint64_t seq = (uint64_t)ok;
        st = netvm_am_send(ctx, 1, H_MSG, &seq, 1, NULL, 0, NULL);
        if (st != NETVM_OK)
            break;
        if (++ok > 2 * C)
            FAILF("%d sends in a handler, none refused (NETVM_AM_CREDITS %d)", ok, C);
    }
    atomic_store(&burst_waits, amt_stats(ctx).credit_waits - waits);
    atomic_store(&burst_last, (int)st);
    atomic_store(&burst_ok, ok);
    return NETVM_AM_DONE;
}

static int on_waits(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    uint64_t w = amt_stats(ctx).credit_waits;
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, &w, 1, NULL, 0));
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 3);
    C = (int)amt_env("NETVM_AM_CREDITS", 128);
    total = (uint64_t)C * (ROUNDS + 1);
    for (int s = 0; s < 3; s++)
        seen[s] = calloc(total, 1);
    CHECK_OK(netvm_am_register(ctx, H_MSG, on_msg, NULL));
    CHECK_OK(netvm_am_register(ctx, H_BURST, on_burst, NULL));
    CHECK_OK(netvm_am_register(ctx, H_WAITS, on_waits, NULL));
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 1) {
        /* bursts inside the senders' handlers */
        for (int s = 0; s <= 2; s += 2)
            CHECK_OK(netvm_am_send(ctx, s, H_BURST, NULL, 0, NULL, 0, NULL));
        WAIT_UNTIL(ctx, atomic_load(&held[0]) == C && atomic_load(&held[2]) == C);
    } else {
        WAIT_UNTIL(ctx, atomic_load(&burst_ok) >= 0);
        if (atomic_load(&burst_ok) != C || atomic_load(&burst_last) != NETVM_ERR_AGAIN)
            FAILF("a handler sent %d messages, then %s; wanted %d, then NETVM_ERR_AGAIN", atomic_load(&burst_ok),
                  netvm_strerror((netvm_status_t)atomic_load(&burst_last)), C);
        CHECK(atomic_load(&burst_waits) == 0);
    }
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 1) {
        /* both senders must be stuck before the gate opens */
        for (int s = 0; s <= 2; s += 2) {
            netvm_am_result_t res;
            do {
                CHECK_OK(netvm_am_request(ctx, s, H_WAITS, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
                CHECK(res.nargs == 1);
                CHECK(atomic_load(&max_held[0]) <= C && atomic_load(&max_held[2]) <= C);
            } while (res.args[0] == 0);
        }
        CHECK(atomic_load(&held[0]) == C && atomic_load(&held[2]) == C);
        atomic_store(&gate, 1);
        WAIT_UNTIL(ctx, atomic_load(&done_n[0]) == (int)total && atomic_load(&done_n[2]) == (int)total);
        for (int s = 0; s <= 2; s += 2) {
            for (uint64_t q = 0; q < total; q++)
                CHECK(atomic_load(&seen[s][q]) == 2);
            CHECK(atomic_load(&max_held[s]) == C && atomic_load(&held[s]) == 0);
        }
        netvm_am_stats_t st = amt_stats(ctx);
        CHECK(st.dropped_no_handler == 0 && st.deferred >= 2 * (uint64_t)C);
    } else {
        for (uint64_t q = (uint64_t)C; q < total; q++)
            CHECK_OK(netvm_am_send(ctx, 1, H_MSG, &q, 1, NULL, 0, NULL));
        netvm_am_stats_t st = amt_stats(ctx);
        CHECK(st.credit_waits >= 1);
        CHECK(st.sent >= total);
    }
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
