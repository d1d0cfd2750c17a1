/* Sleeping sides are woken by the other side's write, not by a timeout:
 * run with NETVM_CHAN_POLL_MS far above the bound checked here, so that
 * only the write itself can end the waits in time.
 *  - the receiver sleeps in netvm_chan_recv; the sender sends after a
 *    pause, with its clock reading in the message (CLOCK_MONOTONIC is one
 *    clock for the whole machine)
 *  - the sender fills the ring and sleeps for credits; the receiver drains
 *    it after a pause and sends the time back on a second channel
 * Also: a receive with a timeout and nothing coming times out. */
#include "chan_test.h"

#include <unistd.h>

#define ROUNDS 5
#define PAUSE_US 200000
#define BOUND_S 5.0   /* NETVM_CHAN_POLL_MS is 30000 in this test */

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    int other = 1 - rank;
    netvm_chan_opts_t o = { .ring_bytes = 1024, .max_msg = 64 };
    netvm_chan_rx_t *rx;
    netvm_chan_tx_t *tx;
    CHECK_OK(netvm_chan_create(ctx, other, rank ? "to1" : "to0", &o, &rx));
    CHECK_OK(netvm_chan_connect(ctx, other, rank ? "to0" : "to1", CT_WAIT_MS, &tx));
    CHECK_OK(netvm_barrier(ctx));
    double t;
    size_t len;
    uint8_t buf[64];

    /* a sleeping receiver */
    for (int i = 0; i < ROUNDS; i++) {
        if (rank == 0) {
            usleep(PAUSE_US);
            t = now_s();
            CHECK_OK(netvm_chan_send(tx, &t, sizeof t, CT_WAIT_MS));
        } else {
            CHECK_OK(netvm_chan_recv(rx, &t, sizeof t, &len, CT_WAIT_MS));
            double lag = now_s() - t;
            CHECK(len == sizeof t);
            if (lag > BOUND_S)
                FAILF("receiver woke %.3f s after the send", lag);
        }
    }
    CHECK_OK(netvm_barrier(ctx));

    /* a sender sleeping for credits: it fills the ring (n messages), then
     * sends one more, carrying n, which has to wait for the receiver */
    for (int i = 0; i < ROUNDS; i++) {
        if (rank == 0) {
            uint64_t n = 0;
            memset(buf, 0xff, sizeof buf);
            while (netvm_chan_send(tx, buf, 64, 0) == NETVM_OK)
                n++;
            CHECK(n >= 8);
            CHECK_OK(netvm_barrier(ctx));
            memcpy(buf, &n, 8);
            CHECK_OK(netvm_chan_send(tx, buf, 64, CT_WAIT_MS));   /* sleeps */
            double woke = now_s();
            CHECK_OK(netvm_chan_recv(rx, &t, sizeof t, &len, CT_WAIT_MS));
            if (woke - t > BOUND_S)
                FAILF("sender woke %.3f s after the receiver made room", woke - t);
            CHECK_OK(netvm_chan_flush(tx));
            CHECK_OK(netvm_barrier(ctx));
            CHECK_OK(netvm_barrier(ctx));   /* the receiver took the rest */
        } else {
            CHECK_OK(netvm_barrier(ctx));
            usleep(PAUSE_US);
            t = now_s();
            uint64_t got = 0, n = 0;
            while (netvm_chan_recv(rx, buf, sizeof buf, &len, 0) == NETVM_OK) {
                got++;
                memcpy(&n, buf, 8);
            }
            CHECK(got >= 8);
            CHECK_OK(netvm_chan_send(tx, &t, sizeof t, CT_WAIT_MS));
            CHECK_OK(netvm_barrier(ctx));
            while (netvm_chan_recv(rx, buf, sizeof buf, &len, 0) == NETVM_OK) {
                got++;
                memcpy(&n, buf, 8);
            }
            if (got != n + 1)
                FAILF("round %d: %llu messages, the sender sent %llu", i, (unsigned long long)got,
                      (unsigned long long)(n + 1));
            CHECK_OK(netvm_barrier(ctx));
        }
    }
    CHECK_OK(netvm_barrier(ctx));

    /* nothing comes: a timed receive times out, after about its time */
    double t0 = now_s();
    CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, 100), NETVM_ERR_TIMEOUT);
    CHECK(now_s() - t0 >= 0.09);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_chan_close(tx));
    CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS), NETVM_ERR_STATE);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_chan_destroy(rx));
    printf("rank %d: woken by writes\n", rank);
    netvm_finalize(ctx);
    return 0;
}
