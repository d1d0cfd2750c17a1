/* A lock holder dies (run with --keep-going): rank 1 holds lock L (home
 * rank 0) while ranks 0 and 2 queue for it, and is the home of semaphore
 * S, and a member of barrier B; then it kills itself. The survivors'
 * acquires fail with NETVM_ERR_PEER (no hang), the lock stays broken for
 * later acquires, a wait on the dead home's semaphore and on the barrier
 * fail with NETVM_ERR_PEER, an uncontended acquire of a lock whose home
 * died fails so too (on shm its words stay mapped: the direct swap must
 * look at the home's liveness), and locks without the dead peer still
 * work. */
#include "sync_test.h"

#include <signal.h>

enum { QUEUED = 0, HELD = 8 };

int main(void)
{
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .timeout_ms = 3000 };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int me = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 3);
    netvm_rseg_t *data = st_shared(ctx, "deathdata", 4096);
    netvm_lock_t *lock, *other, *homeless;
    netvm_sem_t *sem;
    netvm_gbarrier_t *bar;
    int all[3] = { 0, 1, 2 };
    if (me == 0) {
        CHECK_OK(netvm_lock_create(ctx, "L", &lock));
        CHECK_OK(netvm_lock_create(ctx, "L2", &other));
        CHECK_OK(netvm_gbarrier_create(ctx, "B", all, 3, &bar));
    }
    if (me == 1) {
        CHECK_OK(netvm_sem_create(ctx, "S", 0, &sem));
        CHECK_OK(netvm_lock_create(ctx, "L3", &homeless));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me != 0) {
        CHECK_OK(netvm_lock_open(ctx, 0, "L", &lock));
        CHECK_OK(netvm_lock_open(ctx, 0, "L2", &other));
        CHECK_OK(netvm_gbarrier_open(ctx, 0, "B", &bar));
    }
    if (me != 1) {
        CHECK_OK(netvm_sem_open(ctx, 1, "S", &sem));
        CHECK_OK(netvm_lock_open(ctx, 1, "L3", &homeless));
        /* taken and given back while its home lives */
        CHECK_OK(netvm_lock_acquire(homeless));
        CHECK_OK(netvm_lock_release(homeless));
    }
    CHECK_OK(netvm_barrier(ctx));

    if (me == 1) {
        CHECK_OK(netvm_lock_acquire(lock));
        st_put(ctx, data, HELD, 1);
        while (st_get(ctx, data, QUEUED) < 2)
            sched_yield();
        usleep(100 * 1000);   /* they are in the queue by now (or soon: either way they fail) */
        raise(SIGKILL);
    }
    while (!st_get(ctx, data, HELD))
        sched_yield();
    st_fadd(ctx, data, QUEUED, 1);
    double t0 = now_s();
    CHECK_ST(netvm_lock_acquire(lock), NETVM_ERR_PEER);
    CHECK_ST(netvm_lock_acquire(lock), NETVM_ERR_PEER);   /* broken for good */
    CHECK_ST(netvm_sem_wait(sem), NETVM_ERR_PEER);
    CHECK_ST(netvm_gbarrier_wait(bar), NETVM_ERR_PEER);
    CHECK_ST(netvm_lock_acquire(homeless), NETVM_ERR_PEER);
    if (now_s() - t0 > 60)
        FAILF("the failures took %.1f s", now_s() - t0);
    /* a lock the dead peer never touched still works */
    CHECK_OK(netvm_lock_acquire(other));
    CHECK_OK(netvm_lock_release(other));
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    printf("survivor %d ok\n", me);
    fflush(stdout);
    _exit(0);
}
