/* The reader-writer lock: readers share (every rank holds a read lock at
 * once), writers exclude (a get+put counter under write locks from every
 * rank, while readers check no writer is inside), and a writer is not
 * starved by a stream of overlapping readers (it would wait for ever
 * without writer registration: the launcher's timeout). Args: ITERS. */
#include "sync_test.h"

enum { CNT = 0, READERS_IN = 8, WRITER_IN = 16, STOP = 24, READS = 32 };

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    CHECK(n >= 3);
    netvm_rseg_t *data = st_shared(ctx, "rwdata", 4096);
    netvm_rwlock_t *rw;
    if (me == 1)
        CHECK_OK(netvm_rwlock_create(ctx, "RW", &rw));
    CHECK_OK(netvm_barrier(ctx));
    if (me != 1)
        CHECK_OK(netvm_rwlock_open(ctx, 1, "RW", &rw));
    if (me == 0)   /* alone: an unlock without a lock is seen only while nobody reads */
        CHECK_ST(netvm_rwlock_rdunlock(rw), NETVM_ERR_STATE);
    CHECK_ST(netvm_rwlock_wrunlock(rw), NETVM_ERR_STATE);
    CHECK_OK(netvm_barrier(ctx));

    /* readers share: nobody leaves before all are in */
    CHECK_OK(netvm_rwlock_rdlock(rw));
    st_fadd(ctx, data, READERS_IN, 1);
    while (st_get(ctx, data, READERS_IN) < (uint64_t)n)
        sched_yield();
    CHECK_OK(netvm_rwlock_rdunlock(rw));
    CHECK_OK(netvm_barrier(ctx));
    st_put(ctx, data, READERS_IN, 0);
    CHECK_OK(netvm_barrier(ctx));

    /* writers exclude writers and readers */
    for (int i = 0; i < iters; i++) {
        if ((i + me) % 3 == 0) {
            CHECK_OK(netvm_rwlock_rdlock(rw));
            CHECK(st_get(ctx, data, WRITER_IN) == 0);
            CHECK_OK(netvm_rwlock_rdunlock(rw));
        } else {
            CHECK_OK(netvm_rwlock_wrlock(rw));
            CHECK(st_fadd(ctx, data, WRITER_IN, 1) == 0);
            st_racy_inc(ctx, data, CNT);
            CHECK(st_fadd(ctx, data, WRITER_IN, (uint64_t)-1) == 1);
            CHECK_OK(netvm_rwlock_wrunlock(rw));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    uint64_t want = 0;
    for (int r = 0; r < n; r++)
        for (int i = 0; i < iters; i++)
            want += (i + r) % 3 != 0;
    CHECK(st_get(ctx, data, CNT) == want);
    CHECK_OK(netvm_barrier(ctx));

    /* no writer starvation: ranks 1.. read in overlapping turns (each
     * enters before the previous one leaves) until rank 0 has written */
    if (me == 0) {
        while (st_get(ctx, data, READS) < (uint64_t)(4 * n))
            sched_yield();   /* readers are streaming */
        CHECK_OK(netvm_rwlock_wrlock(rw));
        st_put(ctx, data, STOP, 1);
        CHECK_OK(netvm_rwlock_wrunlock(rw));
    } else {
        while (!st_get(ctx, data, STOP)) {
            CHECK_OK(netvm_rwlock_rdlock(rw));
            st_fadd(ctx, data, READS, 1);
            /* hold until another reader came in, so readers always overlap */
            uint64_t seen = st_get(ctx, data, READS);
            for (int k = 0; k < 1000 && st_get(ctx, data, READS) == seen && !st_get(ctx, data, STOP); k++)
                sched_yield();
            CHECK_OK(netvm_rwlock_rdunlock(rw));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_rwlock_close(rw));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
