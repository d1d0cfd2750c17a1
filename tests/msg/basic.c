/* Mailbox basics, 3 ranks: ranks 1 and 2 send N messages each to rank 0
 * (tag i % 3, payload {rank, i}) and a last one tagged DONE.
 *  - bad arguments, a message above the maximum (NETVM_ERR_BOUNDS at the
 *    sender), no such peer;
 *  - probe: sees without taking, by source and tag, nothing (AGAIN);
 *  - a buffer too small: NETVM_ERR_BOUNDS, the message stays;
 *  - specific receives (source and tag), then wildcards: every message
 *    once, each source's in the order sent, each (source, tag)'s too;
 *  - nothing left: try_recv AGAIN, recv with a timeout TIMEOUT;
 *  - zero-byte messages, messages to oneself;
 *  - inside a handler a blocking receive is refused (NETVM_ERR_STATE) and
 *    try_recv / probe work. */
#include "msg_test.h"

#include <stdatomic.h>

#define DONE 100
#define NTAGS 3
#define H_PROBE 9

static _Atomic int handler_recv_st = -1, handler_try_st = -1;

static int on_probe(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)m;
    (void)arg;
    uint64_t v[2];
    atomic_store(&handler_recv_st, (int)netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, 55, v, sizeof v, NULL, -1));
    atomic_store(&handler_try_st, (int)netvm_msg_try_recv(ctx, NETVM_MSG_ANY_SOURCE, 55, v, sizeof v, NULL));
    return NETVM_AM_DONE;
}

static void bad_arguments(netvm_ctx_t *ctx, int size)
{
    static char big[4097];
    netvm_req_t *req;
    CHECK_ST(netvm_msg_send(NULL, 0, 1, "x", 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_send(ctx, 0, 1, NULL, 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_send(ctx, 0, NETVM_MSG_ANY_TAG, "x", 1), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_send(ctx, size + 7, 1, "x", 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_msg_send(ctx, -1, 1, "x", 1), NETVM_ERR_RANK);
    CHECK_ST(netvm_msg_send(ctx, 0, 1, big, sizeof big), NETVM_ERR_BOUNDS);   /* default max 4096 */
    CHECK_ST(netvm_msg_isend(ctx, 0, 1, big, sizeof big, &req), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_msg_isend(ctx, 0, 1, "x", 1, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_recv(NULL, 0, 1, big, 1, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_recv(ctx, -2, 1, big, 1, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_recv(ctx, 0, 1, NULL, 1, NULL, 0), NETVM_ERR_INVAL);
    CHECK_ST(netvm_msg_try_recv(ctx, size + 7, 1, big, 1, NULL), NETVM_ERR_RANK);
    CHECK_ST(netvm_msg_probe(NULL, 0, 1, NULL), NETVM_ERR_INVAL);
    netvm_msg_opts_t o = { .max_size = (1u << 20) + 1 };
    CHECK_ST(netvm_msg_setup(ctx, &o), NETVM_ERR_INVAL);
    /* the mailbox exists by now (the calls above made it) */
    CHECK_ST(netvm_msg_setup(ctx, NULL), NETVM_ERR_STATE);
}

static void receiver(netvm_ctx_t *ctx, int size, int n)
{
    netvm_msg_info_t in, in2;
    uint64_t v[2];
    int nsend = size - 1;
    /* the DONE markers: each sender's last message, so all are here after */
    for (int k = 0; k < nsend; k++) {
        CHECK_OK(netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, DONE, v, sizeof v, &in, -1));
        CHECK(in.tag == DONE && in.len == 0 && in.source >= 1 && in.source < size);
    }
    CHECK_ST(netvm_msg_probe(ctx, NETVM_MSG_ANY_SOURCE, DONE, &in), NETVM_ERR_AGAIN);

    /* probe takes nothing: twice the same */
    CHECK_OK(netvm_msg_probe(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, &in));
    CHECK_OK(netvm_msg_probe(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, &in2));
    CHECK(in.source == in2.source && in.tag == in2.tag && in.len == in2.len && in.len == sizeof v);
    CHECK_OK(netvm_msg_probe(ctx, 1, 2, &in));
    CHECK(in.source == 1 && in.tag == 2 && in.len == sizeof v);
    CHECK_ST(netvm_msg_probe(ctx, 1, 77, &in), NETVM_ERR_AGAIN);

    /* too small a buffer: BOUNDS, the message stays */
    char small[4];
    CHECK_ST(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, small, sizeof small, &in, -1), NETVM_ERR_BOUNDS);
    CHECK(in.source == 1 && in.tag == 0 && in.len == sizeof v);
    CHECK_ST(netvm_msg_try_recv(ctx, 1, NETVM_MSG_ANY_TAG, small, sizeof small, &in), NETVM_ERR_BOUNDS);

    /* specific: source 2's tag-1 messages come first-sent first */
    int *got = calloc((size_t)size * n, sizeof *got);
    CHECK(got);
    for (int i = 1; i < n && i < 7; i += NTAGS) {
        CHECK_OK(netvm_msg_recv(ctx, size > 2 ? 2 : 1, 1, v, sizeof v, &in, -1));
        CHECK(in.tag == 1 && v[0] == (uint64_t)in.source && v[1] == (uint64_t)i);
        got[in.source * n + i]++;
    }
    /* source 1 by tag: within each tag, in order */
    uint64_t last_tag[NTAGS];
    for (int t = 0; t < NTAGS; t++) {
        last_tag[t] = UINT64_MAX;
        for (;;) {
            netvm_status_t st = netvm_msg_try_recv(ctx, 1, (uint64_t)t, v, sizeof v, &in);
            if (st == NETVM_ERR_AGAIN)
                break;
            CHECK_OK(st);
            CHECK(in.source == 1 && in.tag == (uint64_t)t && v[0] == 1 && v[1] % NTAGS == (uint64_t)t);
            CHECK(last_tag[t] == UINT64_MAX || v[1] > last_tag[t]);
            last_tag[t] = v[1];
            got[n + v[1]]++;
        }
    }
    /* the rest with wildcards: each source's in order */
    uint64_t last[8];
    for (int s = 0; s < 8; s++)
        last[s] = UINT64_MAX;
    for (;;) {
        netvm_status_t st = netvm_msg_try_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, v, sizeof v, &in);
        if (st == NETVM_ERR_AGAIN)
            break;
        CHECK_OK(st);
        CHECK(in.len == sizeof v && v[0] == (uint64_t)in.source && in.tag == v[1] % NTAGS);
        CHECK(last[in.source] == UINT64_MAX || v[1] > last[in.source]);
        last[in.source] = v[1];
        got[in.source * n + v[1]]++;
    }
    for (int s = 1; s < size; s++)
        for (int i = 0; i < n; i++)
            if (got[s * n + i] != 1)
                FAILF("message %d of source %d received %d times", i, s, got[s * n + i]);
    free(got);
    CHECK_ST(netvm_msg_try_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, v, sizeof v, &in), NETVM_ERR_AGAIN);
    CHECK_ST(netvm_msg_recv(ctx, NETVM_MSG_ANY_SOURCE, NETVM_MSG_ANY_TAG, v, sizeof v, &in, 30), NETVM_ERR_TIMEOUT);
    CHECK_ST(netvm_msg_recv(ctx, 1, NETVM_MSG_ANY_TAG, v, sizeof v, &in, 0), NETVM_ERR_AGAIN);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 60;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    check_rank = rank;
    CHECK(size >= 2 && size <= 8);
    CHECK_OK(netvm_am_register(ctx, H_PROBE, on_probe, NULL));
    bad_arguments(ctx, size);
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 0) {
        receiver(ctx, size, n);
    } else {
        for (int i = 0; i < n; i++) {
            uint64_t v[2] = { (uint64_t)rank, (uint64_t)i };
            CHECK_OK(netvm_msg_send(ctx, 0, (uint64_t)(i % NTAGS), v, sizeof v));
        }
        CHECK_OK(netvm_msg_send(ctx, 0, DONE, NULL, 0));
    }
    CHECK_OK(netvm_barrier(ctx));

    /* to oneself, zero bytes and not */
    uint64_t v = 42, w = 0;
    netvm_msg_info_t in;
    CHECK_OK(netvm_msg_send(ctx, rank, 5, NULL, 0));
    CHECK_OK(netvm_msg_send(ctx, rank, 6, &v, sizeof v));
    CHECK_OK(netvm_msg_recv(ctx, rank, 6, &w, sizeof w, &in, -1));
    CHECK(w == 42 && in.source == rank && in.len == 8);
    CHECK_OK(netvm_msg_recv(ctx, rank, NETVM_MSG_ANY_TAG, NULL, 0, &in, -1));
    CHECK(in.tag == 5 && in.len == 0);

    /* a handler may not wait for a message, but may look */
    if (rank == 1) {
        CHECK_OK(netvm_am_send(ctx, 0, H_PROBE, NULL, 0, NULL, 0, NULL));
    } else if (rank == 0) {
        while (atomic_load(&handler_try_st) < 0)
            netvm_progress(ctx);
        CHECK(atomic_load(&handler_recv_st) == NETVM_ERR_STATE);
        CHECK(atomic_load(&handler_try_st) == NETVM_ERR_AGAIN);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok\n", rank);
    return 0;
}
