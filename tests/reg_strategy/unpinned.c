/* The tcp target's check is real: with NETVM_TCP_PINNED=1 and NETVM_REG=none
 * nothing pins, so put, get and atomic fail with NETVM_ERR_UNPINNED and the
 * target's memory is untouched; with a strategy that pins, the same
 * accesses succeed. Run with NETVM_LINKS=tcp. Rank 0 accesses rank 1. */
#include "reg_util.h"

#define LEN (64 * 1024)

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    const char *kind = getenv("NETVM_REG");
    int none = !kind || !strcmp(kind, "none");
    uint64_t *mem = aligned_alloc(4096, LEN);
    CHECK(mem);
    memset(mem, 0, LEN);
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, LEN, NETVM_RWA, "mem", &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        netvm_rseg_t *r;
        CHECK_OK(netvm_import(ctx, 1, "mem", &r));
        uint64_t v = 0x1234, got = 0;
        static uint8_t big[LEN];
        memset(big, 0xab, sizeof big);
        netvm_status_t want = none ? NETVM_ERR_UNPINNED : NETVM_OK;
        CHECK_ST(netvm_put(ctx, r, 8, &v, 8, 0), want);
        CHECK_ST(netvm_put(ctx, r, 0, big, LEN, 0), want);
        CHECK_ST(netvm_get(ctx, &got, r, 8, 8, 0), want);
        CHECK_ST(netvm_atomic(ctx, r, 16, NETVM_AOP_FADD, 1, 0, &got), want);
        netvm_req_t *q;
        CHECK_OK(netvm_put_nb(ctx, r, 24, &v, 8, 0, &q));
        CHECK_ST(netvm_flush(ctx, 1), want);
        CHECK_OK(netvm_release(r));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        if (none) {
            /* refused before a byte moved */
            for (size_t i = 0; i < LEN / 8; i++)
                CHECK(mem[i] == 0);
            CHECK(s.refused >= 5);
            CHECK(s.pins == 0);
        } else {
            CHECK(mem[1] == 0xabababababababab);
            CHECK(mem[2] == 0xabababababababab + 1);
            CHECK(mem[3] == 0x1234);
            CHECK(s.refused == 0);
            CHECK(s.pins > 0);
        }
        printf("unpinned (%s): refused %llu, pins %llu\n", none ? "none" : kind,
               (unsigned long long)s.refused, (unsigned long long)s.pins);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    free(mem);
    return 0;
}
