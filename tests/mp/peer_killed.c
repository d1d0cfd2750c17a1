/* A peer killed mid-job (run with --keep-going): operations to it fail with
 * NETVM_ERR_PEER within a bounded time on every path, nothing hangs, and
 * traffic between the survivors goes on. Rank 1 is the victim. */
#include "check.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

/* Retry op until it reports the peer dead; it must within 5 s. */
#define EXPECT_PEER_DEAD(op) do { \
    double t0_ = now_s(); netvm_status_t got_; \
    while ((got_ = (op)) == NETVM_OK) CHECK(now_s() - t0_ < 5.0); \
    CHECK_ST(got_, NETVM_ERR_PEER); \
    CHECK(now_s() - t0_ < 5.0); \
} while (0)

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size >= 3);
    static uint64_t priv[512];
    void *shp;
    netvm_seg_t *s1, *s2;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "shared", &shp, &s1));
    CHECK_OK(netvm_export(ctx, priv, sizeof priv, NETVM_RWA, "private", &s2));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *vs, *vp, *other;
    int friend = rank == 0 ? 2 : 0;
    if (rank != 1) {
        CHECK_OK(netvm_import(ctx, 1, "shared", &vs));
        CHECK_OK(netvm_import(ctx, 1, "private", &vp));
        CHECK_OK(netvm_import(ctx, friend, "private", &other));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1)
        raise(SIGKILL);

    uint64_t v = 42, got;
    EXPECT_PEER_DEAD(netvm_put(ctx, vs, 0, &v, 8, 0));
    EXPECT_PEER_DEAD(netvm_put(ctx, vp, 0, &v, 8, 0));
    EXPECT_PEER_DEAD(netvm_get(ctx, &got, vp, 0, 8, 0));
    EXPECT_PEER_DEAD(netvm_atomic(ctx, vs, 0, NETVM_AOP_FADD, 1, 0, &got));
    EXPECT_PEER_DEAD(netvm_atomic(ctx, vp, 0, NETVM_AOP_FADD, 1, 0, &got));
    netvm_rseg_t *tmp;
    CHECK_ST(netvm_import(ctx, 1, "private", &tmp), NETVM_ERR_PEER);

    /* the survivors still reach each other */
    for (int i = 0; i < 1000; i++) {
        CHECK_OK(netvm_atomic(ctx, other, 8, NETVM_AOP_ADD, 1, 0, NULL));
        CHECK_OK(netvm_put(ctx, other, 16 + 8 * (size_t)rank, &v, 8, 0));
    }
    CHECK_OK(netvm_flush(ctx, friend));
    /* collectives report the death instead of hanging */
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    CHECK(__atomic_load_n(&priv[1], __ATOMIC_SEQ_CST) == 1000);
    CHECK(__atomic_load_n(&priv[2 + friend], __ATOMIC_SEQ_CST) == 42);
    printf("survivor %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
