/* Bad arguments and refusals, and a channel to oneself:
 * NULLs, bad geometry and names (NETVM_ERR_INVAL), a name taken
 * (NETVM_ERR_EXISTS), a second sender (NETVM_ERR_EXISTS), a missing
 * channel (NETVM_ERR_NOTFOUND), a message above max_msg (NETVM_ERR_BOUNDS,
 * nothing sent), a buffer too small (NETVM_ERR_BOUNDS, the message stays). */
#include "chan_test.h"

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    netvm_chan_rx_t *rx;
    netvm_chan_tx_t *tx;
    netvm_dq_t *dq;
    netvm_dq_prod_t *p;
    netvm_chan_opts_t o = { .ring_bytes = 4096, .max_msg = 100 };
    uint8_t buf[4096] = { 0 };
    size_t len;

    CHECK_ST(netvm_chan_create(NULL, 0, "a", NULL, &rx), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_create(ctx, 0, NULL, NULL, &rx), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_create(ctx, 0, "a", NULL, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_create(ctx, -1, "a", NULL, &rx), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_create(ctx, 0, "", NULL, &rx), NETVM_ERR_INVAL);
    char longname[NETVM_CHAN_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_ST(netvm_chan_create(ctx, 0, longname, NULL, &rx), NETVM_ERR_INVAL);
    longname[NETVM_CHAN_NAME_MAX] = 0;   /* the longest name is fine */
    CHECK_OK(netvm_chan_create(ctx, rank, longname, NULL, &rx));
    CHECK_OK(netvm_chan_destroy(rx));
    netvm_chan_opts_t bad[] = {
        { .ring_bytes = 1000 }, { .ring_bytes = 128 }, { .ring_bytes = 1ull << 31 },
        { .ring_bytes = 4096, .max_msg = 4089 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_ST(netvm_chan_create(ctx, 0, "a", &bad[i], &rx), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_create(ctx, "q", 0, NULL, &dq), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_create(ctx, "q", 1025, NULL, &dq), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_create(ctx, "q", 2, &bad[0], &dq), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_connect(ctx, 1 - rank, "nosuch", 0, &tx), NETVM_ERR_NOTFOUND);
    CHECK_ST(netvm_chan_connect(ctx, 1 - rank, "nosuch", 50, &tx), NETVM_ERR_NOTFOUND);
    CHECK_ST(netvm_chan_connect(ctx, 1 - rank, NULL, 0, &tx), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_connect(ctx, 1 - rank, "a", 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_join(ctx, 1 - rank, "nosuch", 0, &p), NETVM_ERR_NOTFOUND);
    CHECK_ST(netvm_chan_send(NULL, buf, 1, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_recv(NULL, buf, 1, &len, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_flush(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_close(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_destroy(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_pending(NULL, &len), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_recv(NULL, buf, 1, &len, NULL, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_send(NULL, buf, 1, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_leave(NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_dq_destroy(NULL), NETVM_ERR_INVAL);
    CHECK(netvm_chan_max_msg(NULL) == 0 && netvm_dq_max_msg(NULL) == 0);

    /* a channel from the other rank; this rank tries to send on it too */
    char mine[16], theirs[16];
    snprintf(mine, sizeof mine, "c%d", rank);
    snprintf(theirs, sizeof theirs, "c%d", 1 - rank);
    CHECK_OK(netvm_chan_create(ctx, 1 - rank, mine, &o, &rx));
    CHECK_ST(netvm_chan_create(ctx, 1 - rank, mine, &o, &rx), NETVM_ERR_EXISTS);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_chan_connect(ctx, 1 - rank, theirs, CT_WAIT_MS, &tx));
    CHECK_OK(netvm_barrier(ctx));
    netvm_chan_tx_t *tx2;
    CHECK_ST(netvm_chan_connect(ctx, rank, mine, 0, &tx2), NETVM_ERR_EXISTS);
    CHECK_ST(netvm_chan_send(tx, NULL, 1, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_send(tx, buf, 101, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_chan_send(tx, buf, sizeof buf, 0), NETVM_ERR_BOUNDS);
    CHECK_OK(netvm_chan_send(tx, NULL, 0, 0));     /* empty messages are messages */
    ct_fill(buf, 100, 7, 1);
    CHECK_OK(netvm_chan_send(tx, buf, 100, 0));
    CHECK_OK(netvm_chan_flush(tx));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_ST(netvm_chan_recv(rx, buf, 1, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_chan_recv(rx, NULL, 1, &len, 0), NETVM_ERR_INVAL);
    CHECK_OK(netvm_chan_recv(rx, NULL, 0, &len, 0));
    CHECK(len == 0);
    CHECK_ST(netvm_chan_recv(rx, buf, 99, &len, 0), NETVM_ERR_BOUNDS);
    CHECK(len == 100);
    CHECK_ST(netvm_chan_recv(rx, NULL, 0, &len, 0), NETVM_ERR_BOUNDS);
    CHECK_OK(netvm_chan_recv(rx, buf, 100, &len, 0));   /* still there */
    CHECK(len == 100 && ct_check(buf, 100, 7, 1));
    CHECK_ST(netvm_chan_recv(rx, buf, sizeof buf, &len, 0), NETVM_ERR_AGAIN);
    CHECK_OK(netvm_barrier(ctx));

    /* a channel to oneself */
    netvm_chan_rx_t *self_rx;
    netvm_chan_tx_t *self_tx;
    CHECK_OK(netvm_chan_create(ctx, rank, "self", NULL, &self_rx));
    CHECK_OK(netvm_chan_connect(ctx, rank, "self", 0, &self_tx));
    for (uint64_t i = 0; i < 10000; i++) {
        size_t l = ct_len(i, 64);
        ct_fill(buf, l, 9, i);
        CHECK_OK(netvm_chan_send(self_tx, buf, l, CT_WAIT_MS));
        CHECK_OK(netvm_chan_recv(self_rx, buf, sizeof buf, &len, CT_WAIT_MS));
        CHECK(len == l && ct_check(buf, l, 9, i));
    }
    CHECK_OK(netvm_chan_close(self_tx));
    CHECK_ST(netvm_chan_recv(self_rx, buf, sizeof buf, &len, CT_WAIT_MS), NETVM_ERR_STATE);
    CHECK_OK(netvm_chan_destroy(self_rx));

    CHECK_OK(netvm_chan_close(tx));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_chan_destroy(rx));
    printf("rank %d: args ok\n", rank);
    netvm_finalize(ctx);
    return 0;
}
