/* The demo `make demo` runs: a local job doing RMA on each other's memory.
 * Each rank exports two kinds of memory: a private heap buffer (reached with
 * process_vm_writev/readv; atomics executed by its progress engine) and a
 * netvm_alloc_shared buffer (mapped by the peers: loads, stores, CPU
 * atomics). Then: a ring of puts and gets, a shared counter every rank
 * increments with fetch-add, a compare-and-swap lock, the latencies seen
 * on each path, and a token passed round the ranks with tripwires waking
 * each receiver. */
#include <netvm/netvm.h>
#include <stddef.h>
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

/* A mailbox on the heap (reached by process_vm_writev, not mapped): the
 * message, then a flag the sender writes after it. */
struct mbox {
    uint64_t seq, sum;
    uint64_t words[30];
    uint64_t flag;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return x ^ (x >> 29);
}

/* Rank 0 starts a token; each rank waits for its flag (arm a tripwire,
 * look, sleep until it fires), checks the message, and passes it on. */
static void token_ring(netvm_ctx_t *ctx, int size)
{
    enum { LAPS = 200 };
    struct mbox *mb = calloc(1, sizeof *mb);
    netvm_seg_t *seg;
    netvm_rseg_t *next;
    if (!mb)
        exit(1);
    TRY(netvm_export(ctx, mb, sizeof *mb, NETVM_RW, "mbox", &seg));
    TRY(netvm_barrier(ctx));
    TRY(netvm_import(ctx, (rank + 1) % size, "mbox", &next));
    uint64_t wakeups = 0, bad = 0, expect_flag = 1;
    double t0 = now_us();
    struct mbox m;
    /* rank 0 sends on laps 0 .. LAPS-1 and takes the token home on lap LAPS */
    uint64_t laps = rank == 0 ? LAPS + 1 : LAPS;
    for (uint64_t lap = 0; lap < laps; lap++, expect_flag++) {
        if (rank != 0 || lap > 0) {
            netvm_tripwire_t *tw;
            TRY(netvm_tripwire_arm(ctx, &mb->flag, 8, NETVM_TRIP_WRITE, lap, NULL, &tw));
            while (__atomic_load_n(&mb->flag, __ATOMIC_ACQUIRE) < expect_flag - (rank == 0)) {
                netvm_event_t ev;
                int n;
                TRY(netvm_evq_wait(ctx, &ev, 1, &n, 10000));
                wakeups++;
            }
            TRY(netvm_tripwire_disarm(tw));
            uint64_t sum = mb->seq;
            for (int i = 0; i < 30; i++)
                sum += mix(mb->words[i]);
            bad += sum != mb->sum;
        }
        if (rank == 0 && lap == LAPS)
            break;   /* the token is home */
        m.seq = lap * (uint64_t)size + (uint64_t)rank;
        m.sum = m.seq;
        for (int i = 0; i < 30; i++) {
            m.words[i] = mix(m.seq * 31 + (uint64_t)i);
            m.sum += mix(m.words[i]);
        }
        m.flag = expect_flag;
        /* message first, flag last: netvm_put keeps issue order */
        TRY(netvm_put(ctx, next, 0, &m, offsetof(struct mbox, flag), 0));
        TRY(netvm_put(ctx, next, offsetof(struct mbox, flag), &m.flag, 8, 0));
    }
    double us = now_us() - t0;
    TRY(netvm_barrier(ctx));
    if (rank == 0)
        printf("\ntoken ring: %d laps x %d ranks, tripwire-synchronised: %.2f us per hop\n", LAPS, size,
               us / (LAPS * size));
    printf("rank %d: token messages verified: %s (woken by a tripwire %llu times)\n", rank,
           bad ? "CORRUPT" : "ok", (unsigned long long)wakeups);
    if (bad)
        exit(1);
    TRY(netvm_barrier(ctx));
    TRY(netvm_release(next));
    TRY(netvm_unexport(seg));
    free(mb);
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
    /* 5. tripwire-synchronised messaging: a token passed round the ring */
    token_ring(ctx, size);

    free(out);
    free(back);
    TRY(netvm_finalize(ctx));
    free(priv);
    return 0;
}
