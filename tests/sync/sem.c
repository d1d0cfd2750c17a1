/* The counting semaphore: never more than K holders at once under
 * contention from every rank, every unit comes back, trywait says
 * NETVM_ERR_AGAIN at zero, and a post wakes a queued waiter (no lost
 * wake-up). Args: ITERS. */
#include "sync_test.h"

enum { INSIDE = 0, MAXIN = 8, DONE = 16, WAITING = 24 };
#define K 2

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    netvm_rseg_t *data = st_shared(ctx, "semdata", 4096);
    int home = n > 1 ? 1 : 0;
    netvm_sem_t *sem, *zero;
    if (me == home) {
        CHECK_OK(netvm_sem_create(ctx, "S", K, &sem));
        CHECK_OK(netvm_sem_create(ctx, "Z", 0, &zero));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me != home) {
        CHECK_OK(netvm_sem_open(ctx, home, "S", &sem));
        CHECK_OK(netvm_sem_open(ctx, home, "Z", &zero));
    }
    uint64_t v;
    CHECK_OK(netvm_sem_value(sem, &v));
    if (v != K)
        FAILF("value %llu", (unsigned long long)v);
    CHECK_ST(netvm_sem_trywait(zero), NETVM_ERR_AGAIN);
    CHECK_OK(netvm_barrier(ctx));

    for (int i = 0; i < iters; i++) {
        if (i % 4 == 3) {
            netvm_status_t s = netvm_sem_trywait(sem);
            if (s == NETVM_ERR_AGAIN)
                continue;
            CHECK_OK(s);
        } else {
            CHECK_OK(netvm_sem_wait(sem));
        }
        uint64_t in = st_fadd(ctx, data, INSIDE, 1) + 1;
        if (in > K)
            FAILF("%llu holders of a semaphore of %d", (unsigned long long)in, K);
        sched_yield();
        st_fadd(ctx, data, INSIDE, (uint64_t)-1);
        CHECK_OK(netvm_sem_post(sem));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_sem_value(sem, &v));
    CHECK(v == K);

    /* every rank but 0 waits on the empty one; rank 0 posts once per
     * waiter, only after all are queued or about to be */
    if (me != 0) {
        st_fadd(ctx, data, WAITING, 1);
        CHECK_OK(netvm_sem_wait(zero));
        st_fadd(ctx, data, DONE, 1);
    } else {
        while (st_get(ctx, data, WAITING) < (uint64_t)(n - 1))
            sched_yield();
        for (int i = 1; i < n; i++)
            CHECK_OK(netvm_sem_post(zero));
        while (st_get(ctx, data, DONE) < (uint64_t)(n - 1))
            sched_yield();
        CHECK_OK(netvm_sem_value(zero, &v));
        CHECK(v == 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_sem_close(zero));
    CHECK_OK(netvm_sem_close(sem));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
