/* Monitor and wait queue: a bounded buffer (capacity 2) between every
 * producer rank and consumer rank 0 through a monitor with two conditions
 * (a lost wake-up hangs it: the launcher's timeout), broadcast waking
 * every waiter of a condition, and a wait queue's signal and broadcast
 * counting the waiters they woke. Args: ITEMS. */
#include "sync_test.h"

enum { COUNT = 0, SUM = 8, FLAG = 16, QUEUED = 24, WOKEN = 32 };
enum { NOT_EMPTY = 0, NOT_FULL = 1, GO = 2 };
#define CAP 2

int main(int argc, char **argv)
{
    int items = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    CHECK(n >= 2);
    netvm_rseg_t *data = st_shared(ctx, "mondata", 4096);
    int home = n - 1;
    netvm_monitor_t *mon;
    netvm_waitq_t *wq;
    if (me == home) {
        CHECK_OK(netvm_monitor_create(ctx, "M", 3, &mon));
        CHECK_OK(netvm_waitq_create(ctx, "Q", &wq));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me != home) {
        CHECK_OK(netvm_monitor_open(ctx, home, "M", &mon));
        CHECK_OK(netvm_waitq_open(ctx, home, "Q", &wq));
    }
    CHECK_ST(netvm_monitor_wait(mon, NOT_EMPTY), NETVM_ERR_STATE);

    /* bounded buffer: COUNT items in it, SUM of what was taken */
    if (me == 0) {
        uint64_t want = (uint64_t)items * (uint64_t)(n - 1), got = 0;
        while (got < want) {
            CHECK_OK(netvm_monitor_enter(mon));
            while (st_get(ctx, data, COUNT) == 0)
                CHECK_OK(netvm_monitor_wait(mon, NOT_EMPTY));
            uint64_t c = st_get(ctx, data, COUNT);
            st_put(ctx, data, COUNT, c - 1);
            got++;
            CHECK_OK(netvm_monitor_signal(mon, NOT_FULL, NULL));
            CHECK_OK(netvm_monitor_exit(mon));
        }
    } else {
        for (int i = 0; i < items; i++) {
            CHECK_OK(netvm_monitor_enter(mon));
            while (st_get(ctx, data, COUNT) >= CAP)
                CHECK_OK(netvm_monitor_wait(mon, NOT_FULL));
            st_put(ctx, data, COUNT, st_get(ctx, data, COUNT) + 1);
            CHECK_OK(netvm_monitor_signal(mon, NOT_EMPTY, NULL));
            CHECK_OK(netvm_monitor_exit(mon));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK(st_get(ctx, data, COUNT) == 0);

    /* broadcast: everyone but rank 0 waits for FLAG */
    if (me != 0) {
        CHECK_OK(netvm_monitor_enter(mon));
        st_fadd(ctx, data, QUEUED, 1);
        while (!st_get(ctx, data, FLAG))
            CHECK_OK(netvm_monitor_wait(mon, GO));
        CHECK_OK(netvm_monitor_exit(mon));
    } else {
        for (;;) {
            CHECK_OK(netvm_monitor_enter(mon));
            int all = st_get(ctx, data, QUEUED) == (uint64_t)(n - 1);
            if (all) {
                st_put(ctx, data, FLAG, 1);
                unsigned w = 0;
                CHECK_OK(netvm_monitor_broadcast(mon, GO, &w));
                /* every waiter was queued: they queued before releasing */
                CHECK(w == (unsigned)(n - 1));
            }
            CHECK_OK(netvm_monitor_exit(mon));
            if (all)
                break;
            sched_yield();
        }
    }
    CHECK_OK(netvm_barrier(ctx));

    /* wait queue: rank 0 signals one by one until all woke, then a
     * broadcast with nobody queued wakes nobody */
    if (me != 0) {
        CHECK_OK(netvm_waitq_wait(wq));
        st_fadd(ctx, data, WOKEN, 1);
    } else {
        unsigned total = 0;
        while (total < (unsigned)(n - 1)) {
            unsigned w = 0;
            CHECK_OK(netvm_waitq_signal(wq, &w));
            CHECK(w <= 1);
            total += w;
            if (!w)
                sched_yield();
        }
        while (st_get(ctx, data, WOKEN) < (uint64_t)(n - 1))
            sched_yield();
        unsigned w = 9;
        CHECK_OK(netvm_waitq_broadcast(wq, &w));
        CHECK(w == 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_waitq_close(wq));
    CHECK_OK(netvm_monitor_close(mon));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
