/* Several threads through one firehose table: rank 0's threads put and get
 * at random into rank 1 with far fewer firehoses than their working set,
 * so misses, moves and waits for a free firehose interleave with hits.
 * With NETVM_FH_MAXVICTIM=0 a bucket is unpinned the moment its last hold
 * goes: a firehose given up while an operation still used it would be
 * unpinned under that operation and the target would refuse it
 * (NETVM_ERR_UNPINNED), so every access succeeding and every byte arriving
 * is the check that no bucket is unpinned while in use. Run with
 * NETVM_LINKS=tcp, NETVM_REG=firehose, NETVM_THREADS=1. */
#include "reg_util.h"

#include <pthread.h>
#include <stdint.h>

#define NT    4
#define SLICE (256u << 10)   /* each thread's own part of the target */
#define OPS   400

static netvm_ctx_t *ctx;
static netvm_rseg_t *rs;

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    uint64_t seed = 0x2545f4914f6cdd1dull * (t + 1);
    static __thread uint8_t buf[16384], back[16384];
    for (int i = 0; i < OPS; i++) {
        size_t len = (size_t)(rnd(&seed) % sizeof buf) + 1;
        size_t off = t * SLICE + (size_t)(rnd(&seed) % (SLICE - len));
        for (size_t k = 0; k < len; k++)
            buf[k] = (uint8_t)(t * 61 + i + k);
        if (i % 3 == 0) {
            /* nonblocking: its hold must outlive the call */
            netvm_req_t *q;
            CHECK_OK(netvm_put_nb(ctx, rs, off, buf, len, 0, &q));
            CHECK_OK(netvm_flush(ctx, 1));
        } else {
            CHECK_OK(netvm_put(ctx, rs, off, buf, len, 0));
        }
        netvm_req_t *g;
        CHECK_OK(netvm_get_nb(ctx, back, rs, off, len, 0, &g));
        if (g)
            CHECK_OK(netvm_wait(&g));
        CHECK(!memcmp(buf, back, len));
        uint64_t old;
        CHECK_OK(netvm_atomic(ctx, rs, t * SLICE, NETVM_AOP_FADD, 1, 0, &old));
    }
    return NULL;
}

int main(void)
{
    CHECK_OK(netvm_init(&ctx, NULL));
    CHECK(netvm_thread_level(ctx) == NETVM_THREAD_MULTIPLE);
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    uint8_t *mem = aligned_alloc(4096, NT * SLICE);
    CHECK(mem);
    memset(mem, 0, NT * SLICE);
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, NT * SLICE, NETVM_RWA, "ws", &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        CHECK_OK(netvm_import(ctx, 1, "ws", &rs));
        pthread_t th[NT];
        for (unsigned t = 0; t < NT; t++)
            CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) == 0);
        for (unsigned t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        /* the firehoses were too few: threads moved them under each other */
        CHECK(s.moves > 50 && s.hits > 0);
        printf("threads: hits %llu misses %llu moves %llu\n", (unsigned long long)s.hits,
               (unsigned long long)s.misses, (unsigned long long)s.moves);
        CHECK_OK(netvm_release(rs));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_reg_stats_t s;
        CHECK_OK(netvm_reg_stats(ctx, &s));
        CHECK(s.refused == 0);
        CHECK(s.unpins > 0);
        printf("threads target: pins %llu unpins %llu high %llu\n", (unsigned long long)s.pins,
               (unsigned long long)s.unpins, (unsigned long long)s.pinned_high);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    free(mem);
    return 0;
}
