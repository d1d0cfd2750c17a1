/* Tripwires that stay armed must keep firing while the owner arms and
 * disarms others. Rank 0 arms NSENT stable "sentinel" tripwires (8 bytes
 * every 16, at the top of its buffer) and NBG background ones below them;
 * rank 1 puts PUTS times over all the sentinels at once while rank 0
 * disarms and re-arms background tripwires as fast as it can. Every put
 * must fire every sentinel exactly once: a sentinel's count short of PUTS
 * is a lost event, above it a duplicate.
 *
 *   trip_churn NBG PUTS [CHURN [OVERLAP]]
 *     CHURN 0: no re-arms (to check the test itself); N > 1: sleep N-1 us
 *     between re-arms. OVERLAP 1: the background tripwires lie among the
 *     sentinels, so every put matches some of them too (their events are
 *     allowed, not counted): the matches of one access then change while
 *     it is being matched.
 * Rank 0 also starts EVT_HOGS threads (EVT_HOGS, default 1) that only burn CPU,
 * so the table's writer is preempted now and then, as on a loaded machine. */
#include "evt.h"

#include <pthread.h>

static _Atomic int hogs_stop;   /* atomic: the hogs read it while main sets it */
static void *hog(void *arg)
{
    (void)arg;
    unsigned long x = 0;
    while (!hogs_stop)
        x++;
    return (void *)x;
}

#define BUFLEN  (256 * 1024)
#define SENT_AT (192 * 1024)
#define NSENT   200
#define BATCH   8          /* puts of each kind before rank 1 waits for rank 0 */
#define DONE    (1ull << 62)

/* A background tripwire: below the sentinels, or among them. */
static netvm_status_t arm_bg(netvm_ctx_t *ctx, uint8_t *buf, rng_t *g, int overlap, netvm_tripwire_t **tw)
{
    if (overlap)
        return netvm_tripwire_arm(ctx, buf + SENT_AT + rng_below(g, 16 * NSENT - 8), 1 + rng_below(g, 8),
                                  NETVM_TRIP_WRITE, 0, NULL, tw);
    return netvm_tripwire_arm(ctx, buf + rng_below(g, SENT_AT - 64), 1 + rng_below(g, 64), NETVM_TRIP_WRITE, 0,
                              NULL, tw);
}

int main(int argc, char **argv)
{
    int nbg = argc > 1 ? atoi(argv[1]) : 4000;
    int puts = argc > 2 ? atoi(argv[2]) : 2000;
    int churn = argc > 3 ? atoi(argv[3]) : 1;
    int overlap = argc > 4 ? atoi(argv[4]) : 0;
    CHECK(nbg > 0 && puts > 0);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 2);
    uint8_t *buf = NULL;
    netvm_seg_t *s0, *s1;
    netvm_rseg_t *r[2];
    void *p;
    CHECK_OK(netvm_export(ctx, buf = calloc(1, BUFLEN), BUFLEN, NETVM_RW, "pv", &s0));
    uint8_t *bufs[2] = { buf, NULL };
    CHECK_OK(netvm_alloc_shared(ctx, BUFLEN, NETVM_RW, "sh", &p, &s1));
    bufs[1] = p;
    static uint64_t ackword __attribute__((aligned(64)));
    netvm_seg_t *s2;
    netvm_rseg_t *rack;
    CHECK_OK(netvm_export(ctx, &ackword, 8, NETVM_RW, "ack", &s2));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_import(ctx, 1 - rank, "ack", &rack));
    if (rank == 0) {
        netvm_tripwire_t **bg = calloc((size_t)nbg, sizeof *bg), *sent[2][NSENT];
        uint64_t count[2][NSENT] = { { 0 } };
        rng_t g = rng_seed(job_seed(), 3, 0);
        for (int i = 0; i < nbg; i++)
            CHECK_OK(arm_bg(ctx, bufs[i % 2], &g, overlap, &bg[i]));
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < NSENT; j++)
                CHECK_OK(netvm_tripwire_arm(ctx, bufs[b] + SENT_AT + 16 * (size_t)j, 8, NETVM_TRIP_WRITE,
                                            0x5e000 + (uint64_t)(b * NSENT + j), NULL, &sent[b][j]));
        int nhogs = env_int("EVT_HOGS", 1);
        pthread_t hogs[16];
        CHECK(nhogs >= 0 && nhogs <= 16);
        for (int h = 0; h < nhogs; h++)
            CHECK(pthread_create(&hogs[h], NULL, hog, NULL) == 0);
        CHECK_OK(netvm_barrier(ctx));
        int done = 0;
        uint64_t acked = 0, total = 0, want = 2ull * NSENT * (uint64_t)puts, churns = 0;
        double t0 = now_s(), last = t0;
        netvm_event_t ev[64];
        while (!done || total < want) {
            /* churn one background tripwire */
            int i = (int)rng_below(&g, (uint64_t)nbg);
            if (churn > 1)
                sleep_us(churn - 1);
            if (churn) {
                CHECK_OK(netvm_tripwire_disarm(bg[i]));
                CHECK_OK(arm_bg(ctx, bufs[i % 2], &g, overlap, &bg[i]));
                churns++;
            }
            int n = netvm_evq_poll(ctx, ev, 64);
            CHECK(n >= 0);
            for (int k = 0; k < n; k++) {
                evbuf_check_overflow(&ev[k]);
                if (ev[k].type == NETVM_EV_NOTIFY) {
                    /* a batch is in (its events came before, on every link) */
                    if (ev[k].value == DONE) {
                        done = 1;
                    } else {
                        CHECK_OK(netvm_put_imm(ctx, rack, 0, ev[k].value, 0));
                        acked = ev[k].value;
                    }
                    continue;
                }
                if (ev[k].type == NETVM_EV_TRIPWIRE && ev[k].value == 0) {
                    if (!overlap)
                        FAILF("a background tripwire fired (nothing writes there)");
                    continue;
                }
                uint64_t s = ev[k].value - 0x5e000;
                if (ev[k].type != NETVM_EV_TRIPWIRE || s >= 2 * NSENT) {
                    ev_print("unexpected", &ev[k]);
                    FAILF("not a sentinel's event");
                }
                if (++count[s / NSENT][s % NSENT] > (uint64_t)puts)
                    FAILF("sentinel %" PRIu64 " fired more often than the %d puts over it", s, puts);
                total++;
                last = now_s();
            }
            if (now_s() - last > 3) {
                printf("no event for 3 s: %s, %" PRIu64 " batches of %d acknowledged\n",
                       done ? "rank 1 is done" : "rank 1 is not done", acked, BATCH);
                break;
            }
        }
        hogs_stop = 1;
        for (int h = 0; h < nhogs; h++)
            pthread_join(hogs[h], NULL);
        int short_ = 0;
        uint64_t lost = 0;
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < NSENT; j++)
                if (count[b][j] != (uint64_t)puts) {
                    short_++;
                    lost += (uint64_t)puts - count[b][j];
                }
        printf("%" PRIu64 " of %" PRIu64 " sentinel events in %.2f s, %" PRIu64 " re-arms meanwhile\n", total, want,
               now_s() - t0, churns);
        if (lost)
            FAILF("%" PRIu64 " events lost: %d of %d sentinels fired fewer times than the %d puts over them "
                  "while other tripwires were armed and disarmed", lost, short_, 2 * NSENT, puts);
        for (int b = 0; b < 2; b++)
            for (int j = 0; j < NSENT; j++)
                CHECK_OK(netvm_tripwire_disarm(sent[b][j]));
        for (int i = 0; i < nbg; i++)
            CHECK_OK(netvm_tripwire_disarm(bg[i]));
        free(bg);
    } else {
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_import(ctx, 0, "pv", &r[0]));
        CHECK_OK(netvm_import(ctx, 0, "sh", &r[1]));
        static uint8_t junk[16 * NSENT];
        for (int i = 0; i < puts; i++) {
            for (int b = 0; b < 2; b++)
                CHECK_OK(netvm_put(ctx, r[b], SENT_AT, junk, sizeof junk, 0));
            if (i % BATCH == BATCH - 1) {
                uint64_t k = (uint64_t)(i / BATCH) + 1;
                CHECK_OK(netvm_notify(ctx, 0, k));
                spin_until_ge(ctx, &ackword, k, 20, "rank 0's acknowledgement");
            }
        }
        CHECK_OK(netvm_notify(ctx, 0, DONE));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(buf);
    return 0;
}
