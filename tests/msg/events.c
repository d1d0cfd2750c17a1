/* NETVM_EV_MESSAGE, 2 ranks: rank 0 asks for events (netvm_msg_setup
 * before the barrier that lets rank 1 send). Rank 1 sends N messages
 * (tag i, length i % 64); rank 0 sleeps in netvm_evq_wait and, for each
 * event, receives the message it names: N events, each with the message's
 * source, tag and length, and the message there when the event is. Then
 * the same through the event fd: arm, poll(2) on netvm_evq_fd, take the
 * event, receive. */
#include "msg_test.h"

#include <poll.h>

static void take(netvm_ctx_t *ctx, const netvm_event_t *ev, uint64_t want)
{
    uint8_t buf[64];
    netvm_msg_info_t in;
    CHECK(ev->type == NETVM_EV_MESSAGE && ev->rank == 1);
    if (ev->value != want || ev->len != want % 64)
        FAILF("event for tag %llu len %llu, wanted tag %llu", (unsigned long long)ev->value,
              (unsigned long long)ev->len, (unsigned long long)want);
    CHECK_OK(netvm_msg_try_recv(ctx, ev->rank, ev->value, buf, sizeof buf, &in));
    CHECK(in.len == ev->len && mt_ok(buf, 1, want, in.len));
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    check_rank = rank;
    if (rank == 0) {
        netvm_msg_opts_t o = { .events = 1 };
        CHECK_OK(netvm_msg_setup(ctx, &o));
        CHECK_ST(netvm_msg_setup(ctx, &o), NETVM_ERR_STATE);
    }
    CHECK_OK(netvm_barrier(ctx));
    uint8_t buf[64];
    if (rank == 1) {
        for (int i = 0; i < n; i++) {
            mt_fill(buf, 1, (uint64_t)i, (size_t)i % 64);
            CHECK_OK(netvm_msg_send(ctx, 0, (uint64_t)i, buf, (size_t)i % 64));
        }
    } else if (rank == 0) {
        int got = 0;
        while (got < n) {
            netvm_event_t ev[16];
            int k;
            CHECK_OK(netvm_evq_wait(ctx, ev, 16, &k, -1));
            for (int j = 0; j < k; j++)
                take(ctx, &ev[j], (uint64_t)got++);
        }
        netvm_event_t ev;
        CHECK(netvm_evq_poll(ctx, &ev, 1) == 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    /* the event fd: rank 0 sleeps in poll(2), rank 1 sends one more */
    if (rank == 0) {
        int fd = netvm_evq_fd(ctx);
        CHECK(fd >= 0);
        int got = 0;
        CHECK_OK(netvm_notify(ctx, 1, 1));   /* go */
        while (!got) {
            netvm_event_t ev;
            while (!got && netvm_evq_poll(ctx, &ev, 1) == 1) {
                take(ctx, &ev, (uint64_t)n);
                got = 1;
            }
            if (!got && netvm_evq_arm(ctx) == NETVM_OK) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                CHECK(poll(&p, 1, -1) == 1);
            }
        }
    } else if (rank == 1) {
        netvm_event_t ev;
        int k;
        CHECK_OK(netvm_evq_wait(ctx, &ev, 1, &k, -1));
        CHECK(k == 1 && ev.type == NETVM_EV_NOTIFY);
        mt_fill(buf, 1, (uint64_t)n, (size_t)n % 64);
        CHECK_OK(netvm_msg_send(ctx, 0, (uint64_t)n, buf, (size_t)n % 64));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
