/* Several threads of every rank contend at NETVM_THREAD_MULTIPLE: a
 * queue lock (a get+put counter), the reader-writer lock (writers bump a
 * counter, readers see no writer inside), and a semaphore of 2 (never
 * more than 2 holders in the job). Then CHURN threads, one after another,
 * each take the lock once and exit: more threads than a process has wait
 * nodes (NV_SYNC_NODES), so a node a thread keeps for its next acquire
 * must go back when it exits. Run under ThreadSanitizer too.
 * Args: THREADS ITERS [CHURN]. */
#include "sync_test.h"

#include <pthread.h>

enum { CNT = 0, WCNT = 8, WIN = 16, SIN = 24 };

static netvm_ctx_t *ctx;
static netvm_rseg_t *data;
static netvm_lock_t *lock;
static netvm_rwlock_t *rw;
static netvm_sem_t *sem;
static int iters;

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < iters; i++) {
        CHECK_OK(netvm_lock_acquire(lock));
        st_racy_inc(ctx, data, CNT);
        CHECK_OK(netvm_lock_release(lock));
        if ((i + id) % 2) {
            CHECK_OK(netvm_rwlock_wrlock(rw));
            CHECK(st_fadd(ctx, data, WIN, 1) == 0);
            st_racy_inc(ctx, data, WCNT);
            st_fadd(ctx, data, WIN, (uint64_t)-1);
            CHECK_OK(netvm_rwlock_wrunlock(rw));
        } else {
            CHECK_OK(netvm_rwlock_rdlock(rw));
            CHECK(st_get(ctx, data, WIN) == 0);
            CHECK_OK(netvm_rwlock_rdunlock(rw));
        }
        CHECK_OK(netvm_sem_wait(sem));
        CHECK(st_fadd(ctx, data, SIN, 1) < 2);
        st_fadd(ctx, data, SIN, (uint64_t)-1);
        CHECK_OK(netvm_sem_post(sem));
    }
    return NULL;
}

static void *once(void *arg)
{
    (void)arg;
    CHECK_OK(netvm_lock_acquire(lock));
    st_racy_inc(ctx, data, CNT);
    CHECK_OK(netvm_lock_release(lock));
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atoi(argv[2]) : 100;
    int churn = argc > 3 ? atoi(argv[3]) : 0;
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    data = st_shared(ctx, "thrdata", 4096);
    if (me == 0) {
        CHECK_OK(netvm_lock_create(ctx, "L", &lock));
        CHECK_OK(netvm_rwlock_create(ctx, "RW", &rw));
        CHECK_OK(netvm_sem_create(ctx, "S", 2, &sem));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me != 0) {
        CHECK_OK(netvm_lock_open(ctx, 0, "L", &lock));
        CHECK_OK(netvm_rwlock_open(ctx, 0, "RW", &rw));
        CHECK_OK(netvm_sem_open(ctx, 0, "S", &sem));
    }
    pthread_t t[16];
    CHECK(nthreads >= 1 && nthreads <= 16);
    for (int i = 0; i < nthreads; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    CHECK_OK(netvm_barrier(ctx));
    uint64_t want = (uint64_t)n * (uint64_t)nthreads * (uint64_t)iters, wantw = 0;
    for (int id = 0; id < nthreads; id++)
        for (int i = 0; i < iters; i++)
            wantw += (i + id) % 2;
    wantw *= (uint64_t)n;
    CHECK(st_get(ctx, data, CNT) == want);
    CHECK(st_get(ctx, data, WCNT) == wantw);
    CHECK_OK(netvm_barrier(ctx));
    for (int i = 0; i < churn; i++) {
        pthread_t c;
        CHECK(pthread_create(&c, NULL, once, NULL) == 0);
        pthread_join(c, NULL);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK(st_get(ctx, data, CNT) == want + (uint64_t)n * (uint64_t)churn);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_sem_close(sem));
    CHECK_OK(netvm_rwlock_close(rw));
    CHECK_OK(netvm_lock_close(lock));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
