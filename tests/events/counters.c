/* Counting notifications: several ranks add to rank 0's counters at once,
 * many times. Every increment is delivered exactly once (the sum of the
 * delivered counts equals the sum added), a counter is never delivered again
 * before it was acknowledged, and deliveries coalesce (fewer deliveries than
 * adds). Counter 0 has a handler that acknowledges inside itself half the
 * time (every other delivery, starting with the first, so even a run whose
 * increments all coalesce into one delivery acknowledges in the handler)
 * and otherwise leaves it to the main loop; counter 1's handler never
 * does, the main loop acknowledges after a random delay; counter 2 has no
 * handler (NETVM_EV_COUNTER events, acknowledged late too); counter 3 is
 * armed only after all its increments were made; counter 4's handler always
 * acknowledges inside itself, re-arming as fast as it can while the adds
 * race with it.
 *
 *   counters ADDS_PER_RANK */
#include "evt.h"

#define NC 5

typedef struct {
    uint32_t num;
    int handler, ack_in_handler;
    uint64_t want, sum, deliveries, adds, in_handler_acks;
    int pending;       /* delivered, not yet acknowledged */
    double ack_at;
} cs_t;

static netvm_ctx_t *ctx;
static cs_t cs[NC];
static rng_t trng;
static int in_handler;

static double ack_delay(void)
{
    switch (rng_below(&trng, 4)) {
    case 0: return 0;
    case 1: return 50e-6;
    case 2: return 500e-6;
    default: return 2e-3;
    }
}

static void delivered(cs_t *s, uint64_t count, const char *how)
{
    if (count == 0)
        FAILF("counter %u: a delivery (%s) of 0", s->num, how);
    if (s->pending)
        FAILF("counter %u: delivered (%s, count %" PRIu64 ") again before it was acknowledged", s->num, how, count);
    s->sum += count;
    s->deliveries++;
    if (s->sum > s->want)
        FAILF("counter %u: %" PRIu64 " delivered, only %" PRIu64 " were added", s->num, s->sum, s->want);
    s->pending = 1;
    s->ack_at = now_s() + ack_delay();
}

static void handler(netvm_ctx_t *c, uint32_t counter, uint64_t count, void *arg)
{
    cs_t *s = arg;
    CHECK(c == ctx);
    if (counter != s->num)
        FAILF("handler of counter %u called for counter %u", s->num, counter);
    if (!s->handler)
        FAILF("counter %u has no handler, yet one was called", counter);
    in_handler++;
    delivered(s, count, "handler");
    if (s->ack_in_handler == 2 || (s->ack_in_handler && (s->deliveries & 1))) {
        s->pending = 0;
        s->in_handler_acks++;
        CHECK_OK(netvm_counter_ack(ctx, counter));   /* may deliver again right away */
    }
    in_handler--;
}

static void ack_due(int force)
{
    double t = now_s();
    for (int c = 0; c < NC; c++)
        if (cs[c].pending && (force || t >= cs[c].ack_at)) {
            cs[c].pending = 0;
            CHECK_OK(netvm_counter_ack(ctx, cs[c].num));
        }
}

/* phase 1: every counter but 3; phase 2: all */
static int all_in(int upto)
{
    for (int c = 0; c < NC; c++)
        if ((upto > 3 || c != 3) && cs[c].sum < cs[c].want)
            return 0;
    return 1;
}

static void serve(int upto, double limit_s, const char *phase)
{
    netvm_event_t ev[16];
    double t0 = now_s(), last = t0;
    uint64_t lastsum = 0;
    while (!all_in(upto)) {
        int n = 0;
        netvm_status_t st = netvm_evq_wait(ctx, ev, 16, &n, 1);
        if (st != NETVM_ERR_TIMEOUT)
            CHECK_OK(st);
        else
            n = 0;
        for (int i = 0; i < n; i++) {
            evbuf_check_overflow(&ev[i]);
            if (ev[i].type != NETVM_EV_COUNTER || ev[i].id >= NC || cs[ev[i].id].handler) {
                ev_print("unexpected", &ev[i]);
                FAILF("%s: only NETVM_EV_COUNTER events of handler-less counters may come", phase);
            }
            if (ev[i].rank != -1 && (ev[i].rank < 0 || ev[i].rank >= netvm_size(ctx)))
                ev_print("odd rank in", &ev[i]);
            delivered(&cs[ev[i].id], ev[i].value, "event");
        }
        ack_due(0);
        uint64_t s = 0;
        for (int c = 0; c < NC; c++)
            s += cs[c].sum;
        if (s != lastsum) {
            lastsum = s;
            last = now_s();
        } else if (now_s() - last > limit_s) {
            for (int c = 0; c < NC; c++)
                fprintf(stderr, "  counter %u: %" PRIu64 " of %" PRIu64 " in %" PRIu64 " deliveries, %s\n",
                        cs[c].num, cs[c].sum, cs[c].want, cs[c].deliveries,
                        cs[c].pending ? "awaiting ack" : "armed");
            FAILF("%s: no delivery for %.0f s and increments are missing", phase, limit_s);
        }
    }
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2);
    uint64_t adds = strtoull(argv[1], NULL, 0);
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size >= 2);
    uint64_t seed = job_seed();
    trng = rng_seed(seed, 5, (uint64_t)rank);
    static const uint32_t nums[NC] = { 0, 1, 2, 3, 4 };
    /* what every initiator adds, known to all */
    for (int c = 0; c < NC; c++)
        cs[c].num = nums[c];
    for (int r = 1; r < size; r++) {
        rng_t g = rng_seed(seed, 6, (uint64_t)r);
        for (uint64_t i = 0; i < adds; i++) {
            int c = (int)(i % 3);
            cs[c].want += 1 + rng_below(&g, 3);
            cs[c].adds++;
            if (i % 8 == 0) {
                cs[3].want += 2;
                cs[3].adds++;
            }
            cs[4].want += 1;
            cs[4].adds++;
        }
    }
    if (rank == 0) {
        cs[0].handler = 1;
        cs[0].ack_in_handler = 1;
        cs[1].handler = 1;
        cs[3].handler = 1;
        cs[4].handler = 1;
        cs[4].ack_in_handler = 2;
        CHECK_OK(netvm_counter_arm(ctx, nums[0], handler, &cs[0]));
        CHECK_OK(netvm_counter_arm(ctx, nums[4], handler, &cs[4]));
        CHECK_OK(netvm_counter_arm(ctx, nums[1], handler, &cs[1]));
        CHECK_OK(netvm_counter_arm(ctx, nums[2], NULL, NULL));
    }
    static uint8_t sink[4096];
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, sink, sizeof sink, NETVM_RW, "sink", &seg));
    CHECK_OK(netvm_barrier(ctx));
    double t0 = now_s();
    if (rank == 0) {
        serve(3, 10, "while adds run");
        double dt = now_s() - t0;
        CHECK_OK(netvm_barrier(ctx));   /* every add was made */
        ack_due(1);
        CHECK_OK(netvm_counter_arm(ctx, nums[3], handler, &cs[3]));
        serve(4, 10, "counter armed after its adds");
        /* nothing more may come */
        double t1 = now_s();
        while (now_s() - t1 < 0.3) {
            netvm_event_t ev;
            int n = 0;
            netvm_status_t st = netvm_evq_wait(ctx, &ev, 1, &n, 10);
            if (st == NETVM_OK) {
                ev_print("extra", &ev);
                FAILF("an event after every increment was delivered");
            }
            CHECK_ST(st, NETVM_ERR_TIMEOUT);
            ack_due(1);
        }
        for (int c = 0; c < NC; c++) {
            CHECK(cs[c].sum == cs[c].want);
            printf("counter %u: %" PRIu64 " adds (sum %" PRIu64 ") in %" PRIu64 " deliveries%s\n", cs[c].num,
                   cs[c].adds, cs[c].sum, cs[c].deliveries,
                   cs[c].ack_in_handler == 2 ? " (all acked in the handler)"
                   : cs[c].ack_in_handler ? " (some acked in the handler)" : "");
            if (c < 3 && cs[c].deliveries >= cs[c].adds)
                FAILF("counter %u: %" PRIu64 " deliveries for %" PRIu64 " adds -- no coalescing", cs[c].num,
                      cs[c].deliveries, cs[c].adds);
        }
        CHECK(cs[0].in_handler_acks > 0);
        printf("adds from %d ranks delivered in %.2f s\n", size - 1, dt);
    } else {
        rng_t g = rng_seed(seed, 6, (uint64_t)rank);
        netvm_rseg_t *r;
        CHECK_OK(netvm_import(ctx, 0, "sink", &r));
        for (uint64_t i = 0; i < adds; i++) {
            int c = (int)(i % 3);
            CHECK_OK(netvm_counter_add(ctx, 0, nums[c], 1 + rng_below(&g, 3)));
            if (i % 8 == 0)
                CHECK_OK(netvm_counter_add(ctx, 0, nums[3], 2));
            CHECK_OK(netvm_counter_add(ctx, 0, nums[4], 1));
            if (i % 64 == 0)   /* some other traffic between */
                CHECK_OK(netvm_put(ctx, r, 8 * (size_t)rank, &i, 8, 0));
        }
        CHECK_OK(netvm_flush(ctx, 0));
        CHECK_OK(netvm_barrier(ctx));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
