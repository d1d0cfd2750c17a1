/* Firehose on the ofi link, one bucket shared by two segments of
 * different rights: rank 1 exports the first half of a page read-only and
 * the second half read-write. Rank 0 reaches both through the same
 * bucket, alternately: each segment needs a registration of its own with
 * its own rights (the read-only half's must not allow RDMA writes), and
 * each access must name its own segment's key, or the provider refuses it
 * (a registration that does not cover it, or does not allow it). Run with
 * NETVM_LINKS=ofi, NETVM_REG=firehose, NETVM_FH_BUCKET=4K. */
#include "reg_util.h"

#include <stdint.h>
#include <stdlib.h>

#define HALF 2048u

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    uint8_t *pg = aligned_alloc(4096, 4096);
    CHECK(pg);
    for (unsigned i = 0; i < 4096; i++)
        pg[i] = (uint8_t)(i * 7 + 1);
    netvm_seg_t *sro, *srw;
    CHECK_OK(netvm_export(ctx, pg, HALF, NETVM_READ, "ro", &sro));
    CHECK_OK(netvm_export(ctx, pg + HALF, HALF, NETVM_RW, "rw", &srw));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        netvm_rseg_t *ro, *rw;
        CHECK_OK(netvm_import(ctx, 1, "ro", &ro));
        CHECK_OK(netvm_import(ctx, 1, "rw", &rw));
        uint8_t buf[HALF], back[HALF];
        for (int round = 0; round < 8; round++) {
            CHECK_OK(netvm_get(ctx, back, ro, 0, HALF, 0));
            for (unsigned i = 0; i < HALF; i++)
                CHECK(back[i] == (uint8_t)(i * 7 + 1));
            CHECK_ST(netvm_put(ctx, ro, 0, buf, 8, 0), NETVM_ERR_RIGHTS);
            for (unsigned i = 0; i < HALF; i++)
                buf[i] = (uint8_t)(i + round);
            CHECK_OK(netvm_put(ctx, rw, 0, buf, HALF, 0));
            CHECK_OK(netvm_get(ctx, back, rw, 0, HALF, 0));
            CHECK(!memcmp(buf, back, HALF));
        }
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        CHECK(s.moves == 2 && s.misses == 2 && s.hits == 8 * 3 - 2);   /* a firehose per segment, then hits */
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        CHECK(s.pins == 2);   /* one registration per segment's part of the bucket */
        for (unsigned i = 0; i < HALF; i++)
            CHECK(pg[i] == (uint8_t)(i * 7 + 1) && pg[HALF + i] == (uint8_t)(i + 7));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(pg);
    printf("rank %d ok\n", rank);
    return 0;
}
