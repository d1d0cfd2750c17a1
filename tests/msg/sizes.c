/* Every size from 0 to the maximum (NETVM_MSG_MAX, or 4096), rank 1 to
 * rank 0, in order, tag = size, every byte checked; one byte more fails at
 * the sender with NETVM_ERR_BOUNDS. Run with a small NETVM_SHM_EAGER too:
 * then most arrive by rendezvous and still keep their order. */
#include "msg_test.h"

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    check_rank = rank;
    const char *e = getenv("NETVM_MSG_MAX");
    size_t max = e ? (size_t)atol(e) : 4096;
    uint8_t *buf = malloc(max + 1);
    CHECK(buf);
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        for (size_t len = 0; len <= max; len++) {
            mt_fill(buf, 1, len, len);
            CHECK_OK(netvm_msg_send(ctx, 0, len, buf, len));
        }
        CHECK_ST(netvm_msg_send(ctx, 0, 0, buf, max + 1), NETVM_ERR_BOUNDS);
    } else if (rank == 0) {
        for (size_t len = 0; len <= max; len++) {
            netvm_msg_info_t in;
            memset(buf, 0xee, max + 1);
            CHECK_OK(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, buf, max + 1, &in, -1));
            if (in.tag != len || in.len != len || in.source != 1)
                FAILF("message %zu: tag %llu, len %zu, source %d", len, (unsigned long long)in.tag, in.len,
                      in.source);
            if (!mt_ok(buf, 1, len, len))
                FAILF("message of %zu bytes: payload differs", len);
            if (buf[len] != 0xee)
                FAILF("message of %zu bytes wrote past its length", len);
        }
        /* nothing more: the oversize one never left */
        netvm_msg_info_t in;
        CHECK_ST(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, buf, max + 1, &in, 20), NETVM_ERR_TIMEOUT);
        /* events were not asked for: none came */
        netvm_event_t ev;
        CHECK(netvm_evq_poll(ctx, &ev, 1) == 0);
    }
    CHECK_OK(netvm_barrier(ctx));
    free(buf);
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
