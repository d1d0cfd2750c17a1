/* The demo `make demo` runs: a local job doing RMA on each other's memory.
 * Each rank exports two kinds of memory: a private heap buffer (reached with
 * process_vm_writev/readv; atomics executed by its progress engine) and a
 * netvm_alloc_shared buffer (mapped by the peers: loads, stores, CPU
 * atomics). Then: a ring of puts and gets, a shared counter every rank
 * increments with fetch-add, a compare-and-swap lock, the latencies seen
 * on each path, a token passed round the ranks with tripwires waking
 * each receiver, and the services: an RPC to the next rank and one
 * delegated round the ring, mailbox messages, and a queue lock; last,
 * rank 0 runs a workload four times larger than its memory budget on
 * network memory (demo_parts/gmem_phase.c). */
#include "demo_parts/gmem_phase.h"

#include <netvm/netvm.h>
#include <netvm/msg.h>
#include <netvm/rpc.h>
#include <netvm/sync.h>
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

/* The services' part. */
enum { OP_SUM = 1, OP_HOP = 2 };

/* OP_SUM: the sum of the payload's bytes, and the payload reversed */
static int proc_sum(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    const uint8_t *in = c->payload;
    uint8_t rev[4096];
    uint64_t sum = 0;
    for (size_t i = 0; i < c->len && i < sizeof rev; i++) {
        sum += in[i];
        rev[c->len - 1 - i] = in[i];
    }
    netvm_rpc_reply(ctx, &c->token, NETVM_OK, &sum, 1, rev, c->len);
    return NETVM_RPC_DONE;
}

/* OP_HOP: pass the call on round the ring; the rank before the caller
 * answers it directly (args[0]: the caller) */
static int proc_hop(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    int size = netvm_size(ctx), next = (rank + 1) % size;
    uint64_t hops = c->args[1] + 1;
    if (next == (int)c->args[0]) {
        netvm_rpc_reply(ctx, &c->token, NETVM_OK, &hops, 1, NULL, 0);
        return NETVM_RPC_DONE;
    }
    uint64_t a[2] = { c->args[0], hops };
    netvm_rpc_delegate(ctx, c, next, OP_HOP, a, 2, NULL, 0);
    return NETVM_RPC_DONE;
}

static void services(netvm_ctx_t *ctx, int size, netvm_rseg_t *counter, uint64_t *shared)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    /* an RPC to the right: 4 KiB out, the checksum and the bytes reversed back */
    uint8_t out[4096], back[4096];
    for (size_t i = 0; i < sizeof out; i++)
        out[i] = (uint8_t)(i * 7 + rank);
    netvm_rpc_result_t res;
    uint64_t want = 0;
    for (size_t i = 0; i < sizeof out; i++)
        want += out[i];
    TRY(netvm_rpc_call(ctx, right, OP_SUM, NULL, 0, out, sizeof out, back, sizeof back, 0, &res));
    int ok = res.nargs == 1 && res.args[0] == want && res.len == sizeof back;
    for (size_t i = 0; ok && i < sizeof out; i++)
        ok = back[i] == out[sizeof out - 1 - i];
    /* a call delegated round the ring: answered by the rank left of us */
    uint64_t a[2] = { (uint64_t)rank, 0 };
    TRY(netvm_rpc_call(ctx, right, OP_HOP, a, 2, NULL, 0, NULL, 0, 0, &res));
    int hop_ok = res.peer == (size > 1 ? left : rank) && res.args[0] == (uint64_t)(size > 1 ? size - 1 : 1);
    /* mailbox messages: 100 tagged messages to the right, from the left */
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t m = i * 1000 + (uint64_t)rank;
        TRY(netvm_msg_send(ctx, right, i % 3, &m, sizeof m));
    }
    int msg_ok = 1;
    for (uint64_t i = 0; i < 100; i++) {
        uint64_t m = 0;
        netvm_msg_info_t info;
        TRY(netvm_msg_recv(ctx, left, i % 3, &m, sizeof m, &info, -1));
        msg_ok &= m == i * 1000 + (uint64_t)left && info.source == left;
    }
    /* a queue lock (MCS) homed at rank 0 guarding a plain get/put counter */
    netvm_lock_t *lock;
    if (rank == 0)
        TRY(netvm_lock_create(ctx, "demo", &lock));
    TRY(netvm_barrier(ctx));
    if (rank != 0)
        TRY(netvm_lock_open(ctx, 0, "demo", &lock));
    for (int i = 0; i < 100; i++) {
        TRY(netvm_lock_acquire(lock));
        uint64_t v;
        TRY(netvm_get(ctx, &v, counter, 200, 8, 0));
        v++;
        TRY(netvm_put(ctx, counter, 200, &v, 8, 0));
        TRY(netvm_lock_release(lock));
    }
    TRY(netvm_barrier(ctx));
    for (int r = 0; r < size; r++) {
        if (r == rank)
            printf("rank %d: rpc to rank %d (4 KiB, checksum and reply verified): %s; call delegated "
                   "round the ring, answered by rank %d: %s; 100 messages from rank %d: %s\n", rank, right,
                   ok ? "ok" : "WRONG", res.peer, hop_ok ? "ok" : "WRONG", left, msg_ok ? "ok" : "WRONG");
        TRY(netvm_barrier(ctx));
    }
    if (rank == 0)
        printf("queue-lock-protected counter after %d ranks x 100 increments: %llu (expected %d)\n", size,
               (unsigned long long)shared[25], size * 100);
    TRY(netvm_barrier(ctx));
    if (rank != 0)
        TRY(netvm_lock_close(lock));
    TRY(netvm_barrier(ctx));
    if (rank == 0)
        TRY(netvm_lock_close(lock));
}

int main(int argc, char **argv)
{
    /* the network-memory region in MiB (tests pass a smaller one) */
    unsigned gmem_mib = argc > 1 ? (unsigned)atoi(argv[1]) : 128;
    if (gmem_mib < 4)
        gmem_mib = 4;
    setvbuf(stdout, NULL, _IOLBF, 0);   /* lines leave in the order the barriers allow */
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    int size = netvm_size(ctx), right = (rank + 1) % size;
    /* procedures before the barrier that lets peers call them */
    TRY(netvm_rpc_register(ctx, OP_SUM, proc_sum, NULL));
    TRY(netvm_rpc_register(ctx, OP_HOP, proc_hop, NULL));
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
    /* 6. the services: RPC, delegated RPC, mailbox messages, a queue lock */
    if (rank == 0)
        printf("\n");
    TRY(netvm_barrier(ctx));
    services(ctx, size, counter, shared);
    /* 7. network memory: rank 0's region, on local memory servers */
    TRY(netvm_barrier(ctx));
    int gmem_ok = rank == 0 ? demo_gmem_phase(ctx, gmem_mib) : 1;
    TRY(netvm_barrier(ctx));

    free(out);
    free(back);
    TRY(netvm_finalize(ctx));
    free(priv);
    return gmem_ok ? 0 : 1;
}
