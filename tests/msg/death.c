/* A peer dies (run with --keep-going), 2 ranks; rank 1 is the victim.
 *  sender:   rank 1 sends N messages to rank 0, which waits until they
 *            are all in its mailbox (a probe for the last); after a
 *            barrier rank 1 kills itself. Rank 0: a receive naming rank 1
 *            for a tag it never sent fails with NETVM_ERR_PEER (no hang),
 *            the N messages are still received, in order, and then every
 *            receive or probe naming rank 1 fails with NETVM_ERR_PEER; a
 *            receive with a wildcard source times out instead.
 *  receiver: after a barrier rank 1 kills itself; rank 0 sends to it until
 *            a send fails: NETVM_ERR_PEER, within far more messages than
 *            its mailbox and credits take (no hang). */
#include "msg_test.h"

#include <signal.h>

#define N 20

int main(int argc, char **argv)
{
    int receiver_dies = argc > 1 && strcmp(argv[1], "receiver") == 0;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    check_rank = rank;
    CHECK(netvm_size(ctx) == 2);
    CHECK_OK(netvm_barrier(ctx));
    uint64_t v;
    netvm_msg_info_t in;
    if (!receiver_dies) {
        if (rank == 1) {
            for (uint64_t i = 0; i < N; i++)
                CHECK_OK(netvm_msg_send(ctx, 0, i, &i, sizeof i));
        } else {
            while (netvm_msg_probe(ctx, 1, N - 1, &in) != NETVM_OK)
                ;
        }
        netvm_barrier(ctx);
        if (rank == 1)
            raise(SIGKILL);
        CHECK_ST(netvm_msg_recv(ctx, 1, 999, &v, sizeof v, &in, -1), NETVM_ERR_PEER);
        for (uint64_t i = 0; i < N; i++) {
            CHECK_OK(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, &v, sizeof v, &in, -1));
            CHECK(in.source == 1 && in.tag == i && v == i);
        }
        CHECK_ST(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, &v, sizeof v, &in, -1), NETVM_ERR_PEER);
        CHECK_ST(netvm_msg_try_recv(ctx, 1, NETVM_MSG_ANY_TAG, &v, sizeof v, &in), NETVM_ERR_PEER);
        CHECK_ST(netvm_msg_probe(ctx, 1, NETVM_MSG_ANY_TAG, &in), NETVM_ERR_PEER);
        CHECK_ST(netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, &v, sizeof v, &in, 20),
                 NETVM_ERR_TIMEOUT);
        CHECK_ST(netvm_msg_send(ctx, 1, 0, &v, sizeof v), NETVM_ERR_PEER);
    } else {
        netvm_barrier(ctx);
        if (rank == 1)
            raise(SIGKILL);
        netvm_status_t st = NETVM_OK;
        long sent = 0;
        for (; sent < 1000000 && st == NETVM_OK; sent++) {
            v = (uint64_t)sent;
            st = netvm_msg_send(ctx, 1, 1, &v, sizeof v);
        }
        printf("send failed after %ld messages: %s\n", sent, netvm_strerror(st));
        CHECK_ST(st, NETVM_ERR_PEER);
        CHECK_ST(netvm_msg_send(ctx, 1, 1, &v, sizeof v), NETVM_ERR_PEER);
    }
    printf("survivor %d ok\n", rank);
    fflush(stdout);
    netvm_finalize(ctx);
    return 0;
}
