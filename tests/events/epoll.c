/* The event queue's fd in the application's own epoll set, with the
 * netvm_evq_arm protocol: NETVM_OK when nothing waits (then the fd becomes
 * readable at the next event), NETVM_ERR_AGAIN when events wait (then
 * netvm_evq_poll returns them at once). Rank 1 sends notifications and puts
 * on a tripwire, with random delays and sometimes in bursts; rank 0 sleeps
 * only in epoll_wait, beside an fd of its own that never becomes readable.
 *
 *   epoll ITEMS */
#include "evt.h"

#include <sys/epoll.h>

#define BURST 5

static netvm_ctx_t *ctx;
static uint8_t *box;          /* rank 0: the tripwired range; item numbers land here */
static uint8_t *got;
static int items, received;

static void handle(const netvm_event_t *e)
{
    evbuf_check_overflow(e);
    uint64_t i;
    if (e->type == NETVM_EV_NOTIFY && e->rank == 1) {
        i = e->value;
    } else if (e->type == NETVM_EV_TRIPWIRE && e->rank == 1 && e->value == 0xb0c5 && e->len == 8 &&
               e->addr >= (uint64_t)(uintptr_t)box && e->addr < (uint64_t)(uintptr_t)box + 512) {
        memcpy(&i, (void *)(uintptr_t)e->addr, 8);
    } else {
        ev_print("unexpected", e);
        FAILF("wanted a notification or a tripwire event from rank 1");
    }
    if (i >= (uint64_t)items || got[i])
        FAILF("item %" PRIu64 " reported twice or out of range", i);
    got[i] = 1;
    received++;
}

int main(int argc, char **argv)
{
    items = argc > 1 ? atoi(argv[1]) : 2000;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 2);
    static uint64_t ackword __attribute__((aligned(64)));
    box = aligned_alloc(64, 4096);
    memset(box, 0, 4096);
    netvm_seg_t *s0, *s1;
    CHECK_OK(netvm_export(ctx, box, 4096, NETVM_RW, "box", &s0));
    CHECK_OK(netvm_export(ctx, &ackword, 8, NETVM_RW, "ack", &s1));
    netvm_tripwire_t *tw = NULL;
    if (rank == 0)
        CHECK_OK(netvm_tripwire_arm(ctx, box, 512, NETVM_TRIP_WRITE, 0xb0c5, NULL, &tw));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *peerbox, *peerack;
    CHECK_OK(netvm_import(ctx, 1 - rank, "box", &peerbox));
    CHECK_OK(netvm_import(ctx, 1 - rank, "ack", &peerack));
    /* the imports' traffic is over before rank 0 checks that its armed fd
     * stays quiet (any traffic may make it readable: an armed fd also
     * wakes its caller for the peers' requests that netvm_evq_poll serves) */
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 0) {
        int fd = netvm_evq_fd(ctx);
        CHECK(fd >= 0);
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        int ep = epoll_create1(EPOLL_CLOEXEC);
        CHECK(ep >= 0);
        struct epoll_event ee = { .events = EPOLLIN, .data.u32 = 1 };
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ee) == 0);
        ee.data.u32 = 2;
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ee) == 0);
        got = calloc((size_t)items, 1);
        struct epoll_event out[4];
        netvm_event_t ev[16];

        /* the protocol by hand: nothing waits, so arm says OK and the fd is quiet */
        CHECK(netvm_evq_poll(ctx, ev, 16) == 0);
        CHECK_OK(netvm_evq_arm(ctx));
        CHECK(epoll_wait(ep, out, 4, 50) == 0);
        CHECK_OK(netvm_barrier(ctx));   /* rank 1 notifies */
        int r = epoll_wait(ep, out, 4, 10000);
        if (r != 1 || out[0].data.u32 != 1)
            FAILF("the fd did not become readable after a notification (epoll_wait: %d)", r);
        CHECK_ST(netvm_evq_arm(ctx), NETVM_ERR_AGAIN);   /* the event waits */
        CHECK(netvm_evq_poll(ctx, ev, 16) == 1);
        CHECK(ev[0].type == NETVM_EV_NOTIFY && ev[0].rank == 1 && ev[0].value == 0xfeed);
        CHECK_OK(netvm_evq_arm(ctx));
        r = epoll_wait(ep, out, 4, 50);
        if (r != 0)
            FAILF("the fd is readable after netvm_evq_arm returned NETVM_OK with nothing waiting");
        CHECK_OK(netvm_barrier(ctx));

        /* the loop of the header */
        int sleeps = 0, again = 0, spurious = 0, acked = -1;
        double t0 = now_s();
        while (received < items) {
            int n;
            while ((n = netvm_evq_poll(ctx, ev, 16)) > 0)
                for (int k = 0; k < n; k++)
                    handle(&ev[k]);
            CHECK(n == 0);
            if (received == items)
                break;
            if (received != acked) {
                CHECK_OK(netvm_put_imm(ctx, peerack, 0, (uint64_t)received, 0));
                acked = received;
            }
            netvm_status_t st = netvm_evq_arm(ctx);
            if (st == NETVM_ERR_AGAIN) {
                again++;
                n = netvm_evq_poll(ctx, ev, 16);
                if (n <= 0)
                    FAILF("netvm_evq_arm said events wait, netvm_evq_poll returned %d", n);
                for (int k = 0; k < n; k++)
                    handle(&ev[k]);
                continue;
            }
            CHECK_OK(st);
            r = epoll_wait(ep, out, 4, 10000);
            if (r == 0)
                FAILF("the fd stayed quiet for 10 s with %d of %d items received", received, items);
            CHECK(r == 1 && out[0].data.u32 == 1);
            sleeps++;
            n = netvm_evq_poll(ctx, ev, 16);
            if (n == 0)
                spurious++;
            for (int k = 0; k < n; k++)
                handle(&ev[k]);
        }
        CHECK_OK(netvm_put_imm(ctx, peerack, 0, (uint64_t)received, 0));
        printf("%d items in %.2f s: %d sleeps in epoll_wait, %d NETVM_ERR_AGAIN, %d readable with nothing to poll\n",
               items, now_s() - t0, sleeps, again, spurious);
        if (spurious * 2 > sleeps)
            FAILF("the fd was readable with nothing to poll in %d of %d wake-ups", spurious, sleeps);
        CHECK(sleeps > 0);
        close(ep);
        close(pfd[0]);
        close(pfd[1]);
        CHECK_OK(netvm_tripwire_disarm(tw));
    } else {
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_notify(ctx, 0, 0xfeed));
        CHECK_OK(netvm_barrier(ctx));
        rng_t g = rng_seed(job_seed(), 7, 1);
        int i = 0;
        while (i < items) {
            int burst = rng_below(&g, 10) == 0 ? BURST : 1;
            for (int b = 0; b < burst && i < items; b++, i++) {
                uint64_t v = (uint64_t)i;
                if (i % 2)
                    CHECK_OK(netvm_notify(ctx, 0, v));
                else
                    CHECK_OK(netvm_put(ctx, peerbox, 8 * (size_t)(i % 64), &v, 8, 0));
            }
            /* wait until rank 0 has all so far, then let it fall asleep (or not) */
            spin_until_ge(ctx, &ackword, (uint64_t)i, 20, "rank 0's count");
            switch (rng_below(&g, 3)) {
            case 0: break;
            case 1: sleep_us((long)rng_below(&g, 100)); break;
            default: sleep_us(300 + (long)rng_below(&g, 1000)); break;
            }
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(box);
    free(got);
    return 0;
}
