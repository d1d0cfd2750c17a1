#define _GNU_SOURCE
/* The stale-registration scenarios end to end on the ofi link, from
 * several threads at once: run with NETVM_LINKS=ofi, NETVM_THREADS=1 and
 * NETVM_OFI_MR_LOCAL=1, so that every put's source and every get's
 * destination is a registration from the link's cache. Rank 0's threads
 * each map a buffer, put a pattern from it into rank 1, get it back into
 * the same buffer and compare, then release the buffer another way (munmap
 * and map again, MAP_FIXED over it, madvise DONTNEED, mremap over another
 * mapping) and go on with a new pattern, usually at the same address. A
 * registration served after its memory went would pin the old pages on an
 * RDMA NIC: the put would send the old pattern, or the get land where the
 * program no longer looks. The providers here (tcp, shm) copy by address
 * and pin nothing, so the data alone cannot show a stale registration:
 * the cache's counters must also show every released buffer invalidated
 * and every new one registered. */
#include "check.h"
#include "core/internal.h"   /* nv_lreg_stats: the link's registration cache */

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define THREADS 3
#define ROUNDS  60
#define LEN     (256u * 1024)   /* above the link's copy threshold: sent from the buffer itself */

static netvm_ctx_t *ctx;
static netvm_rseg_t *dst;

static void fill(uint8_t *p, uint64_t tag)
{
    for (size_t i = 0; i < LEN; i += 8)
        memcpy(p + i, &(uint64_t){ tag ^ (i * 0x9e3779b97f4a7c15ull) }, 8);
}

static int matches(const uint8_t *p, uint64_t tag)
{
    for (size_t i = 0; i < LEN; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        if (v != (tag ^ (i * 0x9e3779b97f4a7c15ull)))
            return 0;
    }
    return 1;
}

static uint8_t *map(void *hint)
{
    void *p = mmap(hint, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* Release p the round's way; the buffer to use next (often at p). */
static uint8_t *release(uint8_t *p, int how)
{
    switch (how) {
    case 0:   /* munmap, then a new mapping where it was */
        CHECK(munmap(p, LEN) == 0);
        return map(p);
    case 1:   /* a new mapping over it */
        CHECK(mmap(p, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
        return p;
    case 2:   /* its pages given back: the next touch gets new ones */
        CHECK(madvise(p, LEN, MADV_DONTNEED) == 0);
        return p;
    default: {   /* moved over another mapping of this thread (moving back
                    would race with the other threads' maps for the old place) */
        uint8_t *q = map(NULL);
        CHECK(mremap(p, LEN, LEN, MREMAP_MAYMOVE | MREMAP_FIXED, q) == q);
        return q;
    }
    }
}

static void *worker(void *arg)
{
    uint64_t t = (uint64_t)(uintptr_t)arg;
    size_t off = (size_t)t * LEN;
    uint8_t *p = map(NULL);
    for (uint64_t round = 0; round < ROUNDS; round++) {
        uint64_t tag = (t << 56) | (round << 32) | 0x5a5a;
        fill(p, tag);
        CHECK_OK(netvm_put(ctx, dst, off, p, LEN, 0));
        memset(p, 0, LEN);
        CHECK_OK(netvm_get(ctx, p, dst, off, LEN, 0));
        if (!matches(p, tag))
            FAILF("thread %llu round %llu: the data that came back is not what was put (a stale registration)",
                  (unsigned long long)t, (unsigned long long)round);
        p = release(p, (int)((round + t) % 4));
    }
    CHECK(munmap(p, LEN) == 0);
    return NULL;
}

int main(void)
{
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    uint8_t *mem = mmap(NULL, (size_t)THREADS * LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, (size_t)THREADS * LEN, NETVM_RW, "stale", &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        CHECK_OK(netvm_import(ctx, 1, "stale", &dst));
        pthread_t th[THREADS];
        for (uintptr_t t = 0; t < THREADS; t++)
            CHECK(pthread_create(&th[t], NULL, worker, (void *)t) == 0);
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        /* each round's buffer was registered anew (a hit there would be
         * a stale registration), and released, its cached registration
         * was invalidated. A registration made while another thread's
         * release was being read is not cached (the cache cannot tell it
         * is still good): then the round's get registers again and its
         * release finds nothing to invalidate. So a round has one miss and
         * one invalidation, or two misses and none. */
        struct nv_rcache_stats rs;
        nv_lreg_stats(ctx, &rs);
        printf("registration cache: hits %llu misses %llu invalidations %llu\n", (unsigned long long)rs.hits,
               (unsigned long long)rs.misses, (unsigned long long)rs.invalidations);
        CHECK(rs.misses >= (uint64_t)THREADS * ROUNDS);
        CHECK(rs.invalidations + rs.misses >= 2ull * THREADS * ROUNDS);
        /* the target holds each thread's last pattern */
        CHECK_OK(netvm_release(dst));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1)
        for (uint64_t t = 0; t < THREADS; t++)
            CHECK(matches(mem + t * LEN, (t << 56) | ((uint64_t)(ROUNDS - 1) << 32) | 0x5a5a));
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
