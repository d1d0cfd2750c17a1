/* Firehose on the ofi link: the pins are the link's registrations, one per
 * bucket. Rank 1 exports four buckets; rank 0 owns one firehose (NETVM_FH_M
 * = one bucket, MAXVICTIM = 0), so every new bucket moves it and the old
 * bucket's registration is closed. At each step the target's counters say
 * what was registered and closed; VmLck stays where it was (the pins are
 * fi_mr_reg, not mlock); the segment has no whole registration (its import
 * answer carries no key to use); and the data of each bucket lands where it
 * must, which needs that bucket's key and its offset from the bucket's own
 * registration (tcp;ofi_rxm addresses registrations by offset). A put to a
 * bucket whose registration was closed succeeds by moving again, under a
 * new key. Run with NETVM_LINKS=ofi, NETVM_REG=firehose, NETVM_FH_M=4K,
 * NETVM_FH_MAXVICTIM=0, NETVM_FH_BUCKET=4K. */
#include "reg_util.h"
#include "core/internal.h"

#include <stdint.h>

#define BS 4096u
#define NB 4u

static netvm_reg_stats_t stats(netvm_ctx_t *ctx)
{
    netvm_reg_stats_t s;
    CHECK_OK(netvm_reg_stats(ctx, &s));
    return s;
}

/* the target's counters after a step of rank 0's */
static void expect(netvm_ctx_t *ctx, int rank, unsigned long long pins, unsigned long long unpins,
                   unsigned long long lck0)
{
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_reg_stats_t s = stats(ctx);
        if (s.pins != pins || s.unpins != unpins)
            printf("target: pins %llu unpins %llu, wanted %llu %llu\n", (unsigned long long)s.pins,
                   (unsigned long long)s.unpins, pins, unpins);
        CHECK(s.pins == pins && s.unpins == unpins);
        CHECK(s.pinned_bytes == (pins > unpins ? BS : 0));
        CHECK(s.buckets == pins - unpins && s.refused == 0);
        CHECK(vm_locked() == lck0);   /* registered, not mlocked */
    }
    CHECK_OK(netvm_barrier(ctx));
}

static void put_bucket(netvm_ctx_t *ctx, netvm_rseg_t *r, unsigned b, uint8_t v)
{
    uint8_t buf[64], back[64];
    memset(buf, v, sizeof buf);
    size_t off = (size_t)b * BS + 100 + b * 8;   /* inside the bucket, not at its start */
    CHECK_OK(netvm_put(ctx, r, off, buf, sizeof buf, 0));
    CHECK_OK(netvm_get(ctx, back, r, off, sizeof back, 0));
    CHECK(!memcmp(buf, back, sizeof buf));
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    CHECK(ctx->reg_link && !strcmp(ctx->reg_link->ops->name, "ofi"));
    unsigned long long lck0 = vm_locked();
    uint8_t *mem = aligned_alloc(BS, NB * BS);
    CHECK(mem);
    memset(mem, 0, NB * BS);
    netvm_seg_t *seg = NULL;
    if (rank == 1) {
        CHECK_OK(netvm_export(ctx, mem, NB * BS, NETVM_RW, "buckets", &seg));
        for (int i = 0; i < ctx->nlinks; i++)
            CHECK(seg->mr[i] == NULL);   /* nothing registered whole */
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r = NULL;
    if (rank == 0) {
        CHECK_OK(netvm_import(ctx, 1, "buckets", &r));
        CHECK(r->d.mr_key == 0);   /* the segment's own key: none */
    }
    expect(ctx, rank, 0, 0, lck0);

    if (rank == 0)
        put_bucket(ctx, r, 0, 0x11);   /* registers bucket 0 */
    expect(ctx, rank, 1, 0, lck0);
    if (rank == 0) {
        put_bucket(ctx, r, 0, 0x12);   /* a hit: nothing registered */
        netvm_reg_stats_t s = stats(ctx);
        CHECK(s.moves == 1 && s.hits >= 1);
    }
    expect(ctx, rank, 1, 0, lck0);
    for (unsigned b = 1; b < NB; b++) {
        if (rank == 0)
            put_bucket(ctx, r, b, (uint8_t)(0x20 + b));   /* moves: the previous bucket's registration closes */
        expect(ctx, rank, 1 + b, b, lck0);
    }
    /* bucket 0's registration was closed: the put moves again and names
     * the new one */
    if (rank == 0) {
        put_bucket(ctx, r, 0, 0x13);
        CHECK(stats(ctx).moves == NB + 1);
    }
    expect(ctx, rank, NB + 1, NB, lck0);
    if (rank == 1) {
        /* every bucket's bytes where they belong, nothing elsewhere */
        for (unsigned b = 0; b < NB; b++) {
            size_t off = (size_t)b * BS + 100 + b * 8;
            uint8_t v = b ? (uint8_t)(0x20 + b) : 0x13;
            for (size_t k = 0; k < BS; k++) {
                size_t i = (size_t)b * BS + k;
                CHECK(mem[i] == (i >= off && i < off + 64 ? v : 0));
            }
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        CHECK(stats(ctx).buckets <= 1);
        CHECK_OK(netvm_unexport(seg));
    }
    printf("rank %d: ofi buckets ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    free(mem);
    return 0;
}
