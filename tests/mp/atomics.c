/* Atomics: the result of each operation, and concurrency: every rank hammers
 * rank 0's words with fetch-add, add, compare-swap loops and FCAA on both
 * paths (mapped: CPU atomics by the initiator; private memory: executed by
 * the target's progress engine), then the sums must be exact. */
#include "check.h"

#include <string.h>

#define ITERS 20000

static void semantics(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t *word_at_target_is_self)
{
    uint64_t old;
    CHECK_OK(netvm_put_imm(ctx, r, 64, 10, 0));
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_FADD, 5, 0, &old));
    CHECK(old == 10);
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_ADD, 1, 0, NULL));
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_SWAP, 100, 0, &old));
    CHECK(old == 16);
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_CSWAP, 200, 99, &old));   /* fails: 100 != 99 */
    CHECK(old == 100);
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_CSWAP, 200, 100, &old));  /* succeeds */
    CHECK(old == 100);
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_FCAA, 7, 150, &old));     /* 200 > 150: no add */
    CHECK(old == 200);
    CHECK_OK(netvm_atomic(ctx, r, 64, NETVM_AOP_FCAA, (uint64_t)-50, 200, &old)); /* 200 <= 200: add -50 */
    CHECK(old == 200);
    uint64_t v = 0;
    CHECK_OK(netvm_get(ctx, &v, r, 64, 8, 0));
    CHECK(v == 150);
    /* unaligned word and unknown op are invalid, and change nothing */
    CHECK_ST(netvm_atomic(ctx, r, 65, NETVM_AOP_ADD, 1, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_atomic(ctx, r, 64, (netvm_atomic_op_t)99, 1, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_put_imm(ctx, r, 3, 1, 0), NETVM_ERR_INVAL);
    CHECK_OK(netvm_get(ctx, &v, r, 64, 8, 0));
    CHECK(v == 150);
    (void)word_at_target_is_self;
}

static void hammer(netvm_ctx_t *ctx, netvm_rseg_t *r, int rank)
{
    netvm_req_t *reqs[32];
    for (int i = 0; i < ITERS; i += 32) {
        for (int k = 0; k < 32; k++)
            CHECK_OK(netvm_atomic_nb(ctx, r, 0, NETVM_AOP_ADD, 1, 0, NULL, &reqs[k]));
        CHECK_OK(netvm_wait_all(reqs, 32));
    }
    uint64_t old, prev = 0;
    for (int i = 0; i < ITERS / 4; i++) {
        CHECK_OK(netvm_atomic(ctx, r, 8, NETVM_AOP_FADD, 3, 0, &old));
        CHECK(old >= prev);            /* a counter only grows */
        prev = old;
    }
    /* increment through compare-and-swap retries */
    for (int i = 0; i < ITERS / 10; i++) {
        uint64_t cur;
        CHECK_OK(netvm_atomic(ctx, r, 16, NETVM_AOP_FADD, 0, 0, &cur));
        for (;;) {
            CHECK_OK(netvm_atomic(ctx, r, 16, NETVM_AOP_CSWAP, cur + 1, cur, &old));
            if (old == cur)
                break;
            cur = old;
        }
    }
    /* FCAA as a bounded counter: never passes 1000 */
    for (int i = 0; i < 2000; i++)
        CHECK_OK(netvm_atomic(ctx, r, 24, NETVM_AOP_FCAA, 1, 999, &old));
    (void)rank;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);

    static uint64_t private_words[16] __attribute__((aligned(64)));
    uint64_t *shared;
    netvm_seg_t *s1, *s2;
    void *p;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "shared-words", &p, &s1));
    shared = p;
    CHECK_OK(netvm_export(ctx, private_words, sizeof private_words, NETVM_RWA, "private-words", &s2));
    CHECK_OK(netvm_barrier(ctx));

    netvm_rseg_t *rs, *rp;
    int target = (rank + 1) % size;
    CHECK_OK(netvm_import(ctx, target, "shared-words", &rs));
    CHECK_OK(netvm_import(ctx, target, "private-words", &rp));
    semantics(ctx, rs, NULL);
    semantics(ctx, rp, NULL);
    CHECK_OK(netvm_barrier(ctx));
    memset(shared, 0, 4096);
    memset(private_words, 0, sizeof private_words);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_release(rs));
    CHECK_OK(netvm_release(rp));

    CHECK_OK(netvm_import(ctx, 0, "shared-words", &rs));
    CHECK_OK(netvm_import(ctx, 0, "private-words", &rp));
    hammer(ctx, rs, rank);
    hammer(ctx, rp, rank);
    CHECK_OK(netvm_flush(ctx, -1));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        uint64_t *w[2] = { shared, private_words };
        for (int i = 0; i < 2; i++) {
            uint64_t *x = w[i];
            CHECK(__atomic_load_n(&x[0], __ATOMIC_SEQ_CST) == (uint64_t)size * ITERS);
            CHECK(__atomic_load_n(&x[1], __ATOMIC_SEQ_CST) == (uint64_t)size * (ITERS / 4) * 3);
            CHECK(__atomic_load_n(&x[2], __ATOMIC_SEQ_CST) == (uint64_t)size * (ITERS / 10));
            CHECK(__atomic_load_n(&x[3], __ATOMIC_SEQ_CST) == 1000);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
