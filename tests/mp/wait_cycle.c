/* Waits that form a cycle, without progress threads (run with
 * NETVM_PROGRESS_THREAD=0 over tcp): rank r gets from rank r+1 (mod n)
 * while rank r-1 gets from it, and then flushes rank r+1 likewise. Each
 * target is itself blocked waiting on its successor, so only a waiter that
 * serves every peer while it waits, not just the one it waits on, lets the
 * ring finish; otherwise every operation waits out NETVM_TIMEOUT. */
#include "check.h"


int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size >= 3);
    static uint64_t word[64];
    for (int i = 0; i < 64; i++)
        word[i] = 1000 * (uint64_t)rank + (uint64_t)i;
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, word, sizeof word, NETVM_RW, "w", &seg));
    CHECK_OK(netvm_barrier(ctx));
    int next = (rank + 1) % size;
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, next, "w", &r));
    CHECK_OK(netvm_barrier(ctx));
    double t0 = now_s(), worst = 0;
    for (int round = 0; round < 200; round++) {
        double t = now_s();
        uint64_t v = 0;
        CHECK_OK(netvm_get(ctx, &v, r, 8 * (size_t)(round % 64), 8, 0));
        CHECK(v == 1000 * (uint64_t)next + (uint64_t)(round % 64));
        CHECK_OK(netvm_put(ctx, r, 8 * (size_t)(round % 64), &v, 8, 0));
        CHECK_OK(netvm_flush(ctx, next));
        if (now_s() - t > worst)
            worst = now_s() - t;
    }
    /* a round of the ring waiting out the timeout (3 s here) would have
     * failed above; one that took most of it and still made it is reported
     * as the failure it is (a busy machine's slow round stays far below) */
    if (worst > 2.5)
        FAILF("a round took %.2f s: waiters served only the peer they waited on", worst);
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d: 200 rounds of the wait ring in %.3f s (slowest %.1f ms)\n", rank, now_s() - t0, worst * 1e3);
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
