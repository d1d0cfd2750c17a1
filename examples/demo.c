/* The demo `make demo` runs: a local job doing RMA on each other's memory.
 * Each rank exports two kinds of memory: a private heap buffer (reached with
 * process_vm_writev/readv; atomics executed by its progress engine) and a
 * netvm_alloc_shared buffer (mapped by the peers: loads, stores, CPU
 * atomics). Then: a ring of puts and gets, a shared counter every rank
 * increments with fetch-add, a compare-and-swap lock, and the latencies seen
 * on each path. */
#include <netvm/netvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)
#define BUF (1 << 20)

static int rank;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void measure(netvm_ctx_t *ctx, netvm_rseg_t *r, const char *path)
{
    uint8_t buf[8] = { 0 };
    uint64_t old;
    double t0 = now_us();
    for (int i = 0; i < 10000; i++)
        TRY(netvm_put(ctx, r, 0, buf, 8, 0));
    double put = (now_us() - t0) / 10000;
    t0 = now_us();
    for (int i = 0; i < 10000; i++)
        TRY(netvm_get(ctx, buf, r, 0, 8, 0));
    double get = (now_us() - t0) / 10000;
    t0 = now_us();
    for (int i = 0; i < 2000; i++)
        TRY(netvm_atomic(ctx, r, 8, NETVM_AOP_FADD, 0, 0, &old));
    double fadd = (now_us() - t0) / 2000;
    printf("rank %d  %-7s 8 B put %7.3f us   8 B get %7.3f us   fetch-add %7.3f us\n",
           rank, path, put, get, fadd);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* lines leave in the order the barriers allow */
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    int size = netvm_size(ctx), right = (rank + 1) % size;
    if (rank == 0)
        printf("netvm demo: %d ranks on this machine\n\n", size);

    uint8_t *priv = calloc(1, BUF);
    void *shared;
    netvm_seg_t *s_priv, *s_shared;
    TRY(netvm_export(ctx, priv, BUF, NETVM_RWA, "private", &s_priv));
    TRY(netvm_alloc_shared(ctx, BUF, NETVM_RWA, "shared", &shared, &s_shared));
    TRY(netvm_barrier(ctx));

    netvm_rseg_t *r_priv, *r_shared, *counter;
    TRY(netvm_import(ctx, right, "private", &r_priv));
    TRY(netvm_import(ctx, right, "shared", &r_shared));
    TRY(netvm_import(ctx, 0, "shared", &counter));

    /* 1. a ring of 1 MiB puts, read back with gets */
    uint8_t *out = malloc(BUF), *back = malloc(BUF);
    for (int i = 0; i < BUF; i++)
        out[i] = (uint8_t)(rank + i);
    TRY(netvm_put(ctx, r_priv, 0, out, BUF, 0));
    TRY(netvm_get(ctx, back, r_priv, 0, BUF, 0));
    TRY(netvm_barrier(ctx));
    int from = (rank + size - 1) % size, readback = memcmp(out, back, BUF) == 0, arrived = 1;
    for (int i = 0; i < BUF; i++)
        arrived &= priv[i] == (uint8_t)(from + i);
    for (int r = 0; r < size; r++) {
        if (r == rank)
            printf("rank %d: 1 MiB put to rank %d, read back: %s; the 1 MiB from rank %d arrived: %s\n",
                   rank, right, readback ? "ok" : "WRONG", from, arrived ? "ok" : "WRONG");
        TRY(netvm_barrier(ctx));
    }

    /* 2. a shared counter: everyone fetch-adds into rank 0's memory */
    uint64_t old;
    for (int i = 0; i < 1000; i++)
        TRY(netvm_atomic(ctx, counter, 64, NETVM_AOP_FADD, 1, 0, &old));
    TRY(netvm_barrier(ctx));
    if (rank == 0)
        printf("\ncounter at rank 0 after %d ranks x 1000 fetch-adds: %llu (expected %d)\n\n", size,
               (unsigned long long)((uint64_t *)shared)[8], size * 1000);
    TRY(netvm_barrier(ctx));

    /* 3. a spin lock in rank 0's memory, built from compare-and-swap */
    for (int i = 0; i < 100; i++) {
        do
            TRY(netvm_atomic(ctx, counter, 128, NETVM_AOP_CSWAP, (uint64_t)rank + 1, 0, &old));
        while (old != 0);
        uint64_t v;
        TRY(netvm_get(ctx, &v, counter, 136, 8, 0));   /* critical section: a plain get and put */
        v++;
        TRY(netvm_put(ctx, counter, 136, &v, 8, 0));
        TRY(netvm_atomic(ctx, counter, 128, NETVM_AOP_SWAP, 0, 0, &old));
    }
    TRY(netvm_barrier(ctx));
    if (rank == 0)
        printf("lock-protected counter after %d ranks x 100 increments: %llu (expected %d)\n\n", size,
               (unsigned long long)((uint64_t *)shared)[17], size * 100);
    TRY(netvm_barrier(ctx));

    /* 4. latency seen on each path, one rank at a time */
    for (int r = 0; r < size; r++) {
        if (r == rank) {
            measure(ctx, r_shared, "mapped");
            measure(ctx, r_priv, "cma");
        }
        TRY(netvm_barrier(ctx));
    }
    free(out);
    free(back);
    TRY(netvm_finalize(ctx));
    free(priv);
    return 0;
}
