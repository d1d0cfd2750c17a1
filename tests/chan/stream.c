/* A channel from rank 0 to rank 1, under load: many more messages than the
 * ring holds, of every length from 0 to the maximum, each checked.
 *   phase 1: every length 0..max_msg, in order
 *   phase 2: `count` messages of random lengths, the receiver pausing now
 *            and then so that the sender waits for credits (nothing lost)
 *   phase 3: nonblocking sends into a receiver that does not read: exactly
 *            as many fit as the ring holds, then NETVM_ERR_AGAIN; then a
 *            send with a timeout times out; all of them arrive after
 *   end:     close; the receiver gets NETVM_ERR_STATE after the last one
 * With "mt", the context is NETVM_THREAD_MULTIPLE and two sender threads
 * share the sending end: per thread, order holds.
 *   stream COUNT RING_BYTES MAX_MSG [mt] */
#include "chan_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static netvm_chan_tx_t *tx;
static uint64_t count;
static size_t max_msg;

static void send_one(uint64_t src, uint64_t seq, size_t len)
{
    static _Thread_local uint8_t buf[1u << 20];
    ct_fill(buf, len, src, seq);
    CHECK_OK(netvm_chan_send(tx, buf, len, CT_WAIT_MS));
}

static void *sender_thread(void *arg)
{
    uint64_t src = (uint64_t)(uintptr_t)arg;
    for (uint64_t i = 0; i < count; i++) {
        size_t len = ct_len(i + src * 7777, max_msg);
        send_one(src, src << 32 | i, len < 8 ? 8 : len);   /* the thread in the sequence */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 4);
    count = strtoull(argv[1], NULL, 0);
    size_t ring = strtoull(argv[2], NULL, 0);
    max_msg = strtoull(argv[3], NULL, 0);
    int mt = argc > 4 && strcmp(argv[4], "mt") == 0;
    netvm_config_t cfg = { .thread_level = mt ? NETVM_THREAD_MULTIPLE : NETVM_THREAD_SERIALIZED };
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, &cfg));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    static uint8_t buf[1u << 20];
    CHECK(max_msg <= sizeof buf);
    size_t len;

    if (rank == 1) {
        netvm_chan_opts_t o = { .ring_bytes = ring, .max_msg = max_msg };
        netvm_chan_rx_t *rx;
        CHECK_OK(netvm_chan_create(ctx, 0, "stream", &o, &rx));
        CHECK_OK(netvm_barrier(ctx));
        /* phase 1 */
        for (size_t l = 0; l <= max_msg; l++) {
            CHECK_OK(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS));
            if (len != l || !ct_check(buf, len, 1, l))
                FAILF("phase 1: message %zu: length %zu or contents wrong", l, len);
        }
        /* phase 2 */
        if (!mt) {
            for (uint64_t i = 0; i < count; i++) {
                if (i % 997 == 0)
                    usleep(2000);   /* slow: the ring fills, the sender waits */
                CHECK_OK(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS));
                if (len != ct_len(i, max_msg) || !ct_check(buf, len, 2, i))
                    FAILF("phase 2: message %llu: length %zu or contents wrong", (unsigned long long)i, len);
            }
        } else {
            uint64_t next[2] = { 0, 0 };
            for (uint64_t i = 0; i < 2 * count; i++) {
                CHECK_OK(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS));
                CHECK(len >= 8);
                uint64_t seq;
                memcpy(&seq, buf, 8);
                int t = (int)(seq >> 32) - 10;
                if (t < 0 || t > 1 || !ct_check(buf, len, seq >> 32, seq) || (uint32_t)seq != next[t])
                    FAILF("mt: message %llu (seq %llu) from no thread in order", (unsigned long long)i,
                          (unsigned long long)seq);
                next[t]++;
            }
            CHECK(next[0] == count && next[1] == count);
        }
        /* phase 3: the sender fills the ring while we do not read; our
         * last credit write-back (a nonblocking put) must have landed */
        CHECK_OK(netvm_flush(ctx, 0));
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_barrier(ctx));
        size_t pending;
        CHECK_OK(netvm_chan_pending(rx, &pending));
        CHECK(pending % 16 == 0 && pending <= ring && pending >= ring - ring / 4);
        for (uint64_t i = 0; i < pending / 16; i++) {
            CHECK_OK(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS));
            CHECK(len == 8 && ct_check(buf, len, 3, i));
        }
        /* end */
        CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, CT_WAIT_MS), NETVM_ERR_STATE);
        CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, 0), NETVM_ERR_STATE);
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_chan_destroy(rx));
    } else {
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_chan_connect(ctx, 1, "stream", CT_WAIT_MS, &tx));
        CHECK(netvm_chan_max_msg(tx) == max_msg);
        for (size_t l = 0; l <= max_msg; l++)
            send_one(1, l, l);
        if (!mt) {
            for (uint64_t i = 0; i < count; i++)
                send_one(2, i, ct_len(i, max_msg));
        } else {
            pthread_t th[2];
            for (int t = 0; t < 2; t++)
                CHECK(pthread_create(&th[t], NULL, sender_thread, (void *)(uintptr_t)(10 + t)) == 0);
            for (int t = 0; t < 2; t++)
                pthread_join(th[t], NULL);
        }
        CHECK_OK(netvm_chan_flush(tx));
        CHECK_OK(netvm_barrier(ctx));
        /* phase 3: the receiver drained phase 2, so the ring is empty but
         * for credits not yet written back (less than a quarter of it);
         * each 8-byte message takes 16 bytes */
        uint64_t filled = 0;
        netvm_status_t st;
        for (;;) {
            ct_fill(buf, 8, 3, filled);
            st = netvm_chan_send(tx, buf, 8, 0);
            if (st != NETVM_OK)
                break;
            filled++;
            CHECK(filled <= ring / 16);
        }
        CHECK_ST(st, NETVM_ERR_AGAIN);
        CHECK(filled * 16 >= ring - ring / 4);
        CHECK_ST(netvm_chan_send(tx, buf, 8, 50), NETVM_ERR_TIMEOUT);
        CHECK_OK(netvm_chan_close(tx));
        CHECK_OK(netvm_barrier(ctx));
        CHECK_OK(netvm_barrier(ctx));
    }
    netvm_finalize(ctx);
    return 0;
}
