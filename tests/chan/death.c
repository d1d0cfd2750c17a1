/* A channel end dies (SIGKILL; run with --keep-going):
 *   death sender:   rank 0 sends COUNT messages, flushes and dies; rank 1
 *                   gets every one of them, then NETVM_ERR_PEER (no hang),
 *                   and again at the next call
 *   death receiver: rank 1 creates the channel and dies; rank 0 sends until
 *                   a send fails with NETVM_ERR_PEER (on a mapped link the
 *                   first ring-full of messages still land in the dead
 *                   process's memory), then every send fails the same way
 * The survivor prints "survivor N ok". */
#include "chan_test.h"

#include <signal.h>
#include <stdlib.h>

#define COUNT 40

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    int sender_dies = strcmp(argv[1], "sender") == 0;
    netvm_config_t cfg = { .timeout_ms = 3000 };
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, &cfg));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    netvm_chan_opts_t o = { .ring_bytes = 4096, .max_msg = 64 };
    uint8_t buf[64];
    size_t len;

    if (rank == 1) {
        netvm_chan_rx_t *rx;
        CHECK_OK(netvm_chan_create(ctx, 0, "doomed", &o, &rx));
        CHECK_OK(netvm_barrier(ctx));
        if (!sender_dies)
            raise(SIGKILL);
        for (uint64_t i = 0; i < COUNT; i++) {
            CHECK_OK(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS));
            CHECK(len == 64 && ct_check(buf, len, 0, i));
        }
        double t0 = now_s();
        CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, -1), NETVM_ERR_PEER);
        CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, 0), NETVM_ERR_PEER);
        printf("survivor 1 ok: %d messages, then the death (seen in %.2f s)\n", COUNT, now_s() - t0);
        CHECK_OK(netvm_chan_destroy(rx));
    } else {
        netvm_chan_tx_t *tx;
        CHECK_OK(netvm_chan_connect(ctx, 1, "doomed", CT_WAIT_MS, &tx));
        if (sender_dies) {
            for (uint64_t i = 0; i < COUNT; i++) {
                ct_fill(buf, 64, 0, i);
                CHECK_OK(netvm_chan_send(tx, buf, 64, CT_WAIT_MS));
            }
            CHECK_OK(netvm_chan_flush(tx));
            CHECK_OK(netvm_barrier(ctx));
            raise(SIGKILL);
        }
        CHECK_OK(netvm_barrier(ctx));
        uint64_t sent = 0;
        netvm_status_t st;
        double t0 = now_s();
        while ((st = netvm_chan_send(tx, buf, 64, -1)) == NETVM_OK) {
            sent++;
            CHECK(sent <= 4096 / 72 + 1);
        }
        CHECK_ST(st, NETVM_ERR_PEER);
        CHECK_ST(netvm_chan_send(tx, buf, 64, -1), NETVM_ERR_PEER);
        CHECK(netvm_chan_close(tx) != NETVM_OK);
        printf("survivor 0 ok: %llu sends, then the death (seen in %.2f s)\n", (unsigned long long)sent,
               now_s() - t0);
    }
    netvm_finalize(ctx);
    return 0;
}
