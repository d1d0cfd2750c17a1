/* One-way message transfer with two flags and two tripwires: the protocol
 * of the CLAN Tripwire paper, section 4.1 (Figure 5, Example 1).
 *
 * Rank 1, the receiver, owns the message buffer and its rx_ready flag; rank
 * 0, the sender, owns tx_ready. The sender waits for tx_ready, clears it,
 * puts the message into the receiver's buffer and sets rx_ready, in one
 * netvm_put_signal so that the flag cannot change before the message is
 * visible. The receiver waits for rx_ready, clears it, checks the message
 * where it landed (zero copy, as the paper suggests) and sets the sender's
 * tx_ready with an immediate put. Every cross-process access is a write and
 * each side polls only its own memory, which is the point of the design.
 *
 * Waiting: a side that finds its flag clear arms a once-only tripwire on it,
 * looks at the flag again, and only then sleeps in netvm_tripset_wait. The
 * second look closes the race between the first look and the arm: a write
 * landing before the arm is seen by it, a write landing after fires the
 * tripwire. Once-only tripwires, disarmed after each wait, leave no stale
 * events behind for the times the flag was already set; and as after any
 * wake-up, the flag is looked at again after the event.
 *
 * Before arming, a side polls its flag for spin_us (10 by default; 0 arms
 * at once, which exercises the tripwires on every message).
 *
 *   netvm run -n 2 ./oneway [messages] [spin_us]
 */
#include <netvm/netvm.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "oneway rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)

enum { SENDER = 0, RECEIVER = 1 };
#define MIN_PAYLOAD 8
#define MAX_PAYLOAD 1024
/* A peer that stops answering is a failure, not a reason to hang the test. */
#define WAIT_MS 20000

struct msg {
    uint64_t seq;
    uint32_t len;                 /* payload bytes */
    uint32_t pad;
    uint64_t sum;                 /* FNV-1a over seq, len and payload */
    uint8_t  payload[MAX_PAYLOAD];
};

struct rx_area {                  /* at the receiver */
    uint64_t rx_ready;
    uint8_t  pad[56];             /* the flag alone on its cache line: the sender's message
                                     stores do not disturb the receiver's polling */
    struct msg buf;
};

struct tx_area {                  /* at the sender */
    uint64_t tx_ready;
};

static int rank;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t msg_sum(const struct msg *m)
{
    uint64_t h = fnv1a(0xcbf29ce484222325ull, &m->seq, sizeof m->seq);
    h = fnv1a(h, &m->len, sizeof m->len);
    return fnv1a(h, m->payload, m->len);
}

/* Lengths and bytes vary with seq, so a message left over from an earlier
 * transfer, or one mixed with it, does not pass for the expected one. */
static uint32_t msg_len(uint64_t seq)
{
    return MIN_PAYLOAD + (uint32_t)((seq * 2654435761u) % (MAX_PAYLOAD - MIN_PAYLOAD + 1));
}

static void msg_fill(struct msg *m, uint64_t seq)
{
    m->seq = seq;
    m->len = msg_len(seq);
    m->pad = 0;
    uint64_t x = seq * 0x9e3779b97f4a7c15ull + 1;
    for (uint32_t i = 0; i < m->len; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        m->payload[i] = (uint8_t)x;
    }
    m->sum = msg_sum(m);
}

static uint64_t flag_load(const uint64_t *flag)
{
    return __atomic_load_n(flag, __ATOMIC_ACQUIRE);
}

struct wait_stats {
    uint64_t arms;                /* flag clear after the spin: a tripwire was armed */
    uint64_t sleeps;              /* flag still clear after arming: waited for the event */
};

/* Wait until the peer sets *flag. */
static void wait_flag(netvm_ctx_t *ctx, netvm_tripset_t *set, const uint64_t *flag,
                      double spin_us, struct wait_stats *st)
{
    /* Section 4.3: if the message is expected soon, polling for a few
     * microseconds first saves arming a tripwire, which costs a system call. */
    if (spin_us > 0) {
        double end = now_us() + spin_us;
        while (!flag_load(flag) && now_us() < end)
            ;
    }
    while (!flag_load(flag)) {
        netvm_tripwire_t *tw;
        TRY(netvm_tripwire_arm(ctx, flag, sizeof *flag, NETVM_TRIP_WRITE | NETVM_TRIP_ONCE, 0, set, &tw));
        st->arms++;
        if (!flag_load(flag)) {
            netvm_event_t ev;
            netvm_status_t s = netvm_tripset_wait(set, &ev, WAIT_MS);
            if (s == NETVM_ERR_TIMEOUT) {
                fprintf(stderr, "oneway rank %d: no write to the flag in %d ms (flag %llu)\n",
                        rank, WAIT_MS, (unsigned long long)flag_load(flag));
                exit(1);
            }
            TRY(s);
            if (ev.type != NETVM_EV_TRIPWIRE) {
                fprintf(stderr, "oneway rank %d: unexpected event type %u\n", rank, ev.type);
                exit(1);
            }
            st->sleeps++;
        }
        /* The flag may still be clear after an event: the peer's previous
         * write can be matched after we cleared the flag and armed again (its
         * matching runs after its data lands). Then the once-only tripwire is
         * spent, so arm a fresh one and look again. */
        TRY(netvm_tripwire_disarm(tw));
    }
}

static int run_sender(netvm_ctx_t *ctx, netvm_tripset_t *set, struct tx_area *tx,
                      netvm_rseg_t *rx, uint64_t count, double spin_us)
{
    static struct msg m;
    struct wait_stats st = { 0, 0 };
    double t0 = now_us();
    for (uint64_t seq = 0; seq < count; seq++) {
        wait_flag(ctx, set, &tx->tx_ready, spin_us, &st);
        /* Cleared before the message goes: the receiver's next write is the
         * only thing that may set it again. */
        __atomic_store_n(&tx->tx_ready, 0, __ATOMIC_SEQ_CST);
        msg_fill(&m, seq);
        TRY(netvm_put_signal(ctx, rx, offsetof(struct rx_area, buf), &m,
                             offsetof(struct msg, payload) + m.len,
                             rx, offsetof(struct rx_area, rx_ready), 1, NETVM_SIGNAL_SET, 0));
    }
    /* The last tx_ready says the last message was consumed. */
    wait_flag(ctx, set, &tx->tx_ready, spin_us, &st);
    double us = now_us() - t0;
    printf("oneway: sender: %llu messages in %.1f ms, %.2f us per message (spin %.0f us);"
           " armed its tripwire %llu times, slept on it %llu times\n",
           (unsigned long long)count, us / 1e3, us / (double)count, spin_us,
           (unsigned long long)st.arms, (unsigned long long)st.sleeps);
    return 0;
}

static int run_receiver(netvm_ctx_t *ctx, netvm_tripset_t *set, struct rx_area *rx,
                        netvm_rseg_t *tx, uint64_t count, double spin_us)
{
    static struct msg want;
    struct wait_stats st = { 0, 0 };
    uint64_t bad = 0, bytes = 0;
    for (uint64_t seq = 0; seq < count; seq++) {
        wait_flag(ctx, set, &rx->rx_ready, spin_us, &st);
        __atomic_store_n(&rx->rx_ready, 0, __ATOMIC_SEQ_CST);
        const struct msg *m = &rx->buf;
        msg_fill(&want, seq);
        int ok = m->seq == seq && m->len == want.len && m->sum == msg_sum(m) && m->sum == want.sum
                 && memcmp(m->payload, want.payload, want.len) == 0;
        if (!ok && bad++ < 5)
            fprintf(stderr, "oneway: message %llu is wrong: seq %llu len %u (want %u), checksum %s\n",
                    (unsigned long long)seq, (unsigned long long)m->seq, m->len, want.len,
                    m->len <= MAX_PAYLOAD && m->sum == msg_sum(m) ? "ok" : "bad");
        bytes += want.len;
        /* Only now may the sender overwrite the buffer. */
        TRY(netvm_put_imm(ctx, tx, offsetof(struct tx_area, tx_ready), 1, 0));
    }
    if (bad) {
        printf("oneway: receiver: %llu of %llu messages wrong\n",
               (unsigned long long)bad, (unsigned long long)count);
        return 1;
    }
    printf("oneway: receiver: %llu messages (%llu payload bytes) arrived in order, every checksum verified;"
           " armed its tripwire %llu times, slept on it %llu times\n",
           (unsigned long long)count, (unsigned long long)bytes, (unsigned long long)st.arms,
           (unsigned long long)st.sleeps);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000;
    double spin_us = argc > 2 ? strtod(argv[2], NULL) : 10;
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    if (netvm_size(ctx) != 2) {
        if (rank == 0)
            fprintf(stderr, "oneway: run with exactly 2 ranks (netvm run -n 2)\n");
        netvm_finalize(ctx);
        return 2;
    }

    /* Memory from netvm_alloc_shared: on the shm link the peer's puts are
     * stores (the paper's programmed I/O); NETVM_SHM_MAPPED=0 or the tcp
     * link reach the same memory the other ways. */
    void *area;
    netvm_seg_t *seg;
    if (rank == RECEIVER)
        TRY(netvm_alloc_shared(ctx, sizeof(struct rx_area), NETVM_RW, "rx", &area, &seg));
    else
        TRY(netvm_alloc_shared(ctx, sizeof(struct tx_area), NETVM_RW, "tx", &area, &seg));
    if (rank == SENDER)
        ((struct tx_area *)area)->tx_ready = 1;      /* the buffer starts free */
    netvm_tripset_t *set;
    TRY(netvm_tripset_create(ctx, &set));
    TRY(netvm_barrier(ctx));                         /* both areas exist, tx_ready is set */

    netvm_rseg_t *peer;
    TRY(netvm_import(ctx, 1 - rank, rank == SENDER ? "rx" : "tx", &peer));
    int rc = rank == SENDER ? run_sender(ctx, set, area, peer, count, spin_us)
                            : run_receiver(ctx, set, area, peer, count, spin_us);

    TRY(netvm_barrier(ctx));
    TRY(netvm_tripset_destroy(set));
    TRY(netvm_release(peer));
    TRY(netvm_unexport(seg));
    TRY(netvm_finalize(ctx));
    return rc;
}
