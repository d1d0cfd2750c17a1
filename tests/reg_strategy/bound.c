/* Firehose's bound: a ring of ranks puts and gets at random over a working
 * set much larger than M + MAXVICTIM of each target, in 8 B and 64 KiB
 * pieces; every target's pinned total (its counters, and the kernel's
 * VmLck) never exceeds M + MAXVICTIM, while moves and unpins show the
 * bound was reached and the data arrives intact. Run with NETVM_LINKS=tcp,
 * NETVM_REG=firehose, small NETVM_FH_M and NETVM_FH_MAXVICTIM. */
#include "reg_util.h"

#include <stdint.h>

#define WS   (4u << 20)   /* each target's exported working set */
#define OPS  600

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    unsigned long long bound = env_size("NETVM_FH_M") + env_size("NETVM_FH_MAXVICTIM");
    unsigned long long base_lck = vm_locked();   /* anything locked before netvm pinned for peers */
    uint8_t *mem = aligned_alloc(4096, WS);
    CHECK(mem);
    memset(mem, 0, WS);
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, WS, NETVM_RW, "ws", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r;
    int next = (rank + 1) % size;
    CHECK_OK(netvm_import(ctx, next, "ws", &r));
    static uint8_t buf[64 * 1024], back[64 * 1024];
    uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(rank + 1);
    unsigned long long worst = 0;
    for (int i = 0; i < OPS; i++) {
        size_t len = (i % 4 == 3) ? sizeof buf : 8;
        size_t off = (size_t)(rnd(&seed) % (WS - len)) & ~(size_t)7;
        for (size_t k = 0; k < len && k < sizeof buf; k++)   /* (gcc -O3 sees a way past buf without the second test) */
            buf[k] = (uint8_t)(i + k * 3);
        CHECK_OK(netvm_put(ctx, r, off, buf, len, 0));
        CHECK_OK(netvm_get(ctx, back, r, off, len, 0));
        CHECK(!memcmp(buf, back, len));
        /* what peers made this process pin, now */
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        CHECK(s.pinned_bytes <= bound);
        unsigned long long lck = vm_locked();
        CHECK(lck <= base_lck + bound);   /* (trivially true where VMLCK_REAL is 0) */
        if (lck > worst)
            worst = lck;
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_reg_stats_t s;
    CHECK_OK(netvm_reg_stats(ctx, &s));
    CHECK(s.pinned_high <= bound);
    /* the bound was reached, not just respected by a small working set */
    CHECK(s.pinned_high >= bound / 2);
    CHECK(s.unpins > 0);
    CHECK(s.moves > 0 && s.misses > 0);
    CHECK(s.refused == 0);
    printf("rank %d: pinned high %llu of bound %llu, VmLck worst %llu, hits %llu misses %llu moves %llu "
           "pins %llu unpins %llu\n", rank, (unsigned long long)s.pinned_high, bound, worst,
           (unsigned long long)s.hits, (unsigned long long)s.misses, (unsigned long long)s.moves,
           (unsigned long long)s.pins, (unsigned long long)s.unpins);
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    free(mem);
    return 0;
}
