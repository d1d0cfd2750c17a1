/* A receiver that stops reading (3 ranks, run with NETVM_MSG_SLOTS=8):
 * ranks 1 and 2 send N messages each to rank 0, far more than its mailbox
 * (8) and their credits (NETVM_AM_CREDITS, 128) hold. Rank 0 reads nothing
 * until its mailbox is full and has turned messages away (deferred, seen
 * in netvm_am_stats), then reads them all: every one arrives, each
 * source's in order, with its payload. The senders were held back: their
 * sends waited for credits (credit_waits > 0). */
#include "msg_test.h"

#include <unistd.h>

#define LEN 24

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    check_rank = rank;
    CHECK(size >= 2 && size <= 8);
    CHECK(n > 8 + 128);
    CHECK_OK(netvm_barrier(ctx));
    uint8_t buf[LEN];
    if (rank == 0) {
        /* not reading: wait until senders have been turned away a few times */
        netvm_am_stats_t s;
        do {
            usleep(1000);
            CHECK_OK(netvm_am_stats(ctx, &s));
        } while (s.deferred < 32);
        uint64_t next[8] = { 0 };
        for (long k = 0; k < (long)n * (size - 1); k++) {
            netvm_msg_info_t in;
            CHECK_OK(netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, buf, sizeof buf, &in, -1));
            CHECK(in.source >= 1 && in.source < size && in.len == LEN);
            if (in.tag != next[in.source])
                FAILF("source %d: message %llu where %llu was due", in.source, (unsigned long long)in.tag,
                      (unsigned long long)next[in.source]);
            CHECK(mt_ok(buf, in.source, in.tag, LEN));
            next[in.source]++;
        }
        printf("receiver: %ld messages in order, turned away %llu times\n", (long)n * (size - 1),
               (unsigned long long)s.deferred);
    } else {
        for (int i = 0; i < n; i++) {
            mt_fill(buf, rank, (uint64_t)i, LEN);
            CHECK_OK(netvm_msg_send(ctx, 0, (uint64_t)i, buf, LEN));
        }
        netvm_am_stats_t s;
        CHECK_OK(netvm_am_stats(ctx, &s));
        printf("sender %d: credit_waits %llu\n", rank, (unsigned long long)s.credit_waits);
        CHECK(s.credit_waits > 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        netvm_msg_info_t in;
        CHECK_ST(netvm_msg_try_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, buf, sizeof buf, &in),
                 NETVM_ERR_AGAIN);
    }
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
