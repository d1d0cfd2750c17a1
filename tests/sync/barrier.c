/* Barriers over subsets: the even ranks and the odd ranks each have a
 * barrier (homed at rank 0, which is not a member of the odd one), used
 * many times at once; in every round no member leaves before every
 * member arrived (a count each bumps before waiting). A non-member's wait
 * fails with NETVM_ERR_RANK. Args: ROUNDS. */
#include "sync_test.h"

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    CHECK(n >= 3);
    netvm_rseg_t *data = st_shared(ctx, "bardata", 4096);
    int evens[64], odds[64], ne = 0, no = 0;
    for (int r = 0; r < n && r < 128; r++) {
        if (r % 2)
            odds[no++] = r;
        else
            evens[ne++] = r;
    }
    netvm_gbarrier_t *be, *bo;
    if (me == 0) {
        CHECK_OK(netvm_gbarrier_create(ctx, "even", evens, (unsigned)ne, &be));
        CHECK_OK(netvm_gbarrier_create(ctx, "odd", odds, (unsigned)no, &bo));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (me != 0) {
        CHECK_OK(netvm_gbarrier_open(ctx, 0, "even", &be));
        CHECK_OK(netvm_gbarrier_open(ctx, 0, "odd", &bo));
    }
    netvm_gbarrier_t *mine = me % 2 ? bo : be, *other = me % 2 ? be : bo;
    int members = me % 2 ? no : ne;
    size_t off = me % 2 ? 8 : 0;
    for (int r = 1; r <= rounds; r++) {
        st_fadd(ctx, data, off, 1);
        CHECK_OK(netvm_gbarrier_wait(mine));
        uint64_t c = st_get(ctx, data, off);
        if (c < (uint64_t)r * (uint64_t)members)
            FAILF("round %d: left with %llu arrivals of %d", r, (unsigned long long)c, r * members);
    }
    CHECK_ST(netvm_gbarrier_wait(other), NETVM_ERR_RANK);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_gbarrier_close(be));
    CHECK_OK(netvm_gbarrier_close(bo));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
