/* The Firehose paper's experiments (Bell and Bonachea, IPDPS 2003, section
 * 5), one run per registration strategy (NETVM_REG): rank 0 puts into rank
 * 1 over the tcp link with pinning required, and reports per experiment the
 * hit rate, moves, average put latency (blocking put, remote completion)
 * and total time:
 *   rand8    random 8 B puts over a working set growing past M + MAXVICTIM
 *   rand64k  random 64 KiB puts over the same working sets
 *   cannon   Cannon's matrix multiply: every step shifts an A and a B block
 *            into the neighbour's receive buffers (double-buffered)
 *   bitonic  bitonic sort over 16 virtual processes: each compare-exchange
 *            step sends a process's keys to its partner's receive buffer
 * The access patterns are replayed (the arithmetic is not done): what the
 * registration strategy sees is the same. Run by bench/reg/run. Prints one
 * line per row: "row <exp> <ws> <ops> <hit%> <moves> <lat_us> <total_s>"
 * or "row <exp> <ws> fail <reason>", and rank 1's pin counters. */
#include <netvm/netvm.h>
#include <netvm/reg.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MAXWS (16u << 20)
/* where the receive buffers lie in the target's segment: apart, so one
 * experiment does not warm the next (the table is as rand64k left it) */
#define CANNON_AT  (4u << 20)
#define BITONIC_AT (12u << 20)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static netvm_ctx_t *ctx;
static netvm_rseg_t *rs;
static uint8_t *src;

struct run { netvm_reg_stats_t s0; double t0; unsigned long ops; netvm_status_t st; };

static void begin(struct run *r)
{
    netvm_reg_stats(ctx, &r->s0);
    r->ops = 0;
    r->st = NETVM_OK;
    r->t0 = now();
}

static void put(struct run *r, size_t off, const void *p, size_t len)
{
    if (r->st != NETVM_OK)
        return;
    r->st = netvm_put(ctx, rs, off, p, len, 0);
    r->ops++;
}

static void end(struct run *r, const char *exp, unsigned long long ws)
{
    double t = now() - r->t0;
    netvm_reg_stats_t s;
    netvm_reg_stats(ctx, &s);
    if (r->st != NETVM_OK) {
        printf("row %s %llu fail %s\n", exp, ws, netvm_strerror(r->st));
        fflush(stdout);
        return;
    }
    uint64_t hits = s.hits - r->s0.hits, misses = s.misses - r->s0.misses, moves = s.moves - r->s0.moves;
    double hit = hits + misses ? 100.0 * (double)hits / (double)(hits + misses) : 100.0;
    printf("row %s %llu %lu %.3f %llu %.2f %.3f\n", exp, ws, r->ops, hit, (unsigned long long)moves,
           1e6 * t / (double)r->ops, t);
    fflush(stdout);
}

static void rand_puts(const char *exp, size_t len, unsigned long nops)
{
    static const unsigned long long ws[] = { 1u << 20, 2u << 20, 4u << 20, 6u << 20, 8u << 20, 16u << 20 };
    for (unsigned w = 0; w < sizeof ws / sizeof *ws; w++) {
        uint64_t seed = 88172645463325252ull + w;
        struct run r;
        /* a warm-up pass, so the table reflects the working set */
        begin(&r);
        for (unsigned long i = 0; i < nops / 4; i++)
            put(&r, (size_t)(rnd(&seed) % (ws[w] - len)) & ~(size_t)7, src + (i % 64) * 8, len);
        begin(&r);
        for (unsigned long i = 0; i < nops; i++)
            put(&r, (size_t)(rnd(&seed) % (ws[w] - len)) & ~(size_t)7, src + (i % 64) * 8, len);
        end(&r, exp, ws[w]);
    }
}

/* Cannon on a 4x4 grid of 128x128-double blocks: each of the 4 steps of a
 * multiply shifts A left and B up into the neighbour's receive buffers
 * (A and B, two of each); rank 1 hosts the receive buffers of the process
 * rank 0 plays. */
static void cannon(unsigned reps)
{
    const size_t blk = 128 * 128 * 8;
    struct run r;
    begin(&r);
    for (unsigned k = 0; k < reps; k++)
        for (unsigned step = 0; step < 4; step++) {
            size_t b = CANNON_AT + (step & 1) * 2 * blk;
            put(&r, b, src, blk);            /* A block */
            put(&r, b + blk, src, blk);      /* B block */
        }
    end(&r, "cannon", 4 * blk);
}

/* Bitonic sort of 16 virtual processes' keys (64 KiB each); rank 1 hosts
 * the receive buffers of the 8 virtual processes whose partners rank 0
 * plays. Each compare-exchange step sends the whole block to the partner,
 * in 4 KiB messages. */
static void bitonic(unsigned reps)
{
    const size_t blk = 64 * 1024, msg = 4096;
    const unsigned p = 16;
    struct run r;
    begin(&r);
    for (unsigned k = 0; k < reps; k++)
        for (unsigned stage = 1; stage < p; stage <<= 1)
            for (unsigned j = stage; j; j >>= 1)
                for (unsigned me = 0; me < p; me++) {
                    unsigned partner = me ^ j;
                    if (partner < me)
                        continue;
                    size_t dst = BITONIC_AT + (size_t)(partner / 2) * blk;
                    for (size_t o = 0; o < blk; o += msg)
                        put(&r, dst + o, src + o, msg);
                }
    end(&r, "bitonic", 8 * blk);
}

int main(void)
{
    if (netvm_init(&ctx, NULL) != NETVM_OK)
        return 1;
    int rank = netvm_rank(ctx);
    uint8_t *mem = mmap(NULL, MAXWS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    src = malloc(256 * 1024);
    if (mem == MAP_FAILED || !src)
        return 1;
    memset(src, 7, 256 * 1024);
    netvm_seg_t *seg = NULL;
    netvm_status_t est = netvm_export(ctx, mem, MAXWS, NETVM_RW, "ws", &seg);
    netvm_barrier(ctx);
    if (rank == 0) {
        const char *k = getenv("NETVM_REG");
        printf("strategy %s\n", k ? k : "none");
        netvm_status_t st = netvm_import(ctx, 1, "ws", &rs);
        if (st != NETVM_OK) {
            printf("row all 0 fail %s\n", netvm_strerror(st));
        } else {
            rand_puts("rand8", 8, 4000);
            rand_puts("rand64k", 64 * 1024, 200);
            cannon(500);
            bitonic(50);
            netvm_release(rs);
        }
    }
    netvm_barrier(ctx);
    if (rank == 1) {
        netvm_reg_stats_t s;
        netvm_reg_stats(ctx, &s);
        printf("target %s pins %llu unpins %llu pinned_high %llu refused %llu export %s\n", s.strategy,
               (unsigned long long)s.pins, (unsigned long long)s.unpins, (unsigned long long)s.pinned_high,
               (unsigned long long)s.refused, netvm_strerror(est));
        fflush(stdout);
    }
    netvm_barrier(ctx);
    if (seg)
        netvm_unexport(seg);
    netvm_finalize(ctx);
    return 0;
}
