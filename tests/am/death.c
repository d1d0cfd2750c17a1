/* A peer dies with active messages outstanding to it (run with
 * --keep-going): everything waiting on it fails with NETVM_ERR_PEER,
 * nothing hangs, and the survivors go on. Rank 1 is the victim: its
 * handler keeps the token of every request and answers none.
 *  - Before it dies, ranks 0 and 2 have NHOLD requests pending on it each,
 *    finished in every way there is: netvm_wait, a netvm_req_then
 *    continuation (runs once), netvm_test polling. Rank 0 also has a call
 *    to rank 2 that rank 2 forwarded to rank 1: its answer can only come
 *    from rank 1, and the call to the living rank 2 times out instead.
 *  - Rank 1 dies (SIGKILL) inside the handler of rank 0's 16 MiB one-way
 *    message, before the payload has moved: that send fails too.
 *  - After the death: blocking requests, sends (small and large),
 *    forwards and replies to rank 1 fail with NETVM_ERR_PEER; rank 2's
 *    handler forwarding to rank 1 gets the error and answers it; calls
 *    between the survivors work; the barrier reports the death; nothing
 *    of the dead peer keeps the survivors' progress busy. */
#include "am_test.h"

#include <signal.h>

enum { H_HOLD = 1, H_BIG = 2, H_FWD = 3, H_ECHO = 4, H_KEEP = 5 };

#define NHOLD 6
#define BIG (16u << 20)
#define TIMEOUT_MS 3000

static int rank;
static _Atomic int holds;
static netvm_am_token_t victim_token;   /* survivors: a request of rank 1's, kept */
static _Atomic int have_victim_token;

static int on_hold(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->has_token);
    atomic_fetch_add(&holds, 1);
    return NETVM_AM_DONE;
}

static int on_big(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->len == BIG && m->payload == NULL);
    raise(SIGKILL);
    return NETVM_AM_DONE;
}

/* args: the rank to forward to; a failed forward is answered here */
static int on_fwd(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 1);
    netvm_status_t st = netvm_am_forward(ctx, (int)m->args[0], H_HOLD, &m->token, NULL, 0, NULL, 0);
    if (st != NETVM_OK)
        CHECK_OK(netvm_am_reply(ctx, &m->token, st, NULL, 0, NULL, 0));
    return NETVM_AM_DONE;
}

static int on_echo(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token);
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, m->args, m->nargs, m->payload, m->len));
    return NETVM_AM_DONE;
}

static int on_keep(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->has_token && m->peer == 1);
    victim_token = m->token;
    atomic_store(&have_victim_token, 1);
    return NETVM_AM_DONE;
}

static _Atomic int then_runs, then_st = -1;

static void then_fn(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    (void)ctx;
    (void)arg;
    atomic_store(&then_st, (int)st);
    atomic_fetch_add(&then_runs, 1);
}

int main(void)
{
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .timeout_ms = TIMEOUT_MS };
    CHECK_OK(netvm_init(&ctx, &cfg));
    rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 3);
    CHECK_OK(netvm_am_register(ctx, H_HOLD, on_hold, NULL));
    CHECK_OK(netvm_am_register(ctx, H_BIG, on_big, NULL));
    CHECK_OK(netvm_am_register(ctx, H_FWD, on_fwd, NULL));
    CHECK_OK(netvm_am_register(ctx, H_ECHO, on_echo, NULL));
    CHECK_OK(netvm_am_register(ctx, H_KEEP, on_keep, NULL));
    CHECK_OK(netvm_barrier(ctx));
    int other = 2 - rank;   /* the other survivor */

    /* outstanding requests on rank 1 */
    static netvm_am_result_t res[NHOLD];
    static uint8_t rbuf[NHOLD][64];
    netvm_req_t *rq[NHOLD] = { 0 };
    netvm_req_t *via2 = NULL;
    netvm_am_result_t via2_res;
    if (rank == 1) {
        /* a request of ours each survivor keeps */
        netvm_req_t *k0, *k2;
        CHECK_OK(netvm_am_request(ctx, 0, H_KEEP, NULL, 0, NULL, 0, NULL, 0, NULL, &k0));
        CHECK_OK(netvm_am_request(ctx, 2, H_KEEP, NULL, 0, NULL, 0, NULL, 0, NULL, &k2));
        WAIT_UNTIL(ctx, atomic_load(&holds) == 2 * NHOLD + 1);
    } else {
        for (int i = 0; i < NHOLD; i++) {
            static uint8_t q[1u << 20];
            memset(q, i, sizeof q);
            /* no payload, a small one, a large one */
            size_t ql = i % 3 == 0 ? 0 : i % 3 == 1 ? 100 : sizeof q;
            CHECK_OK(netvm_am_request(ctx, 1, H_HOLD, NULL, 0, ql ? q : NULL, ql, rbuf[i], sizeof rbuf[i], &res[i],
                                      &rq[i]));
            CHECK(rq[i] != NULL);
        }
        if (rank == 0) {
            uint64_t to = 1;
            CHECK_OK(netvm_am_request(ctx, 2, H_FWD, &to, 1, NULL, 0, NULL, 0, &via2_res, &via2));
        }
        WAIT_UNTIL(ctx, atomic_load(&have_victim_token));
    }
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 1) {
        /* dies in H_BIG; until then it serves */
        for (;;)
            netvm_progress(ctx);
    }
    netvm_req_t *big = NULL;
    uint8_t *bigbuf = NULL;
    if (rank == 0) {
        bigbuf = malloc(BIG);
        memset(bigbuf, 0x42, BIG);
        CHECK_OK(netvm_am_send(ctx, 1, H_BIG, NULL, 0, bigbuf, BIG, &big));
        CHECK(big != NULL);
    }
    /* the holds: waited for, continued, polled */
    double t0 = now_s();
    CHECK_ST(netvm_wait(&rq[0]), NETVM_ERR_PEER);
    CHECK_ST(netvm_wait(&rq[1]), NETVM_ERR_PEER);
    CHECK_OK(netvm_req_then(ctx, &rq[2], then_fn, NULL));
    for (int i = 3; i < NHOLD; i++) {
        int done = 0;
        netvm_status_t st;
        unsigned it = 0;
        while ((st = netvm_test(&rq[i], &done)), !done)
            if ((++it & 255) == 0 && now_s() - t0 > AMT_HANG_S)
                FAILF("request %d to the dead rank never finished", i);
        CHECK_ST(st, NETVM_ERR_PEER);
    }
    WAIT_UNTIL(ctx, atomic_load(&then_runs) > 0);
    CHECK(atomic_load(&then_st) == NETVM_ERR_PEER);
    for (int i = 0; i < NHOLD; i++)
        for (size_t k = 0; k < sizeof rbuf[i]; k++)
            CHECK(rbuf[i][k] == 0);
    if (rank == 0) {
        CHECK_ST(netvm_wait(&big), NETVM_ERR_PEER);
        free(bigbuf);
        /* forwarded to the dead rank before it died: only a timeout ends it */
        CHECK_ST(netvm_wait(&via2), NETVM_ERR_TIMEOUT);
    }

    /* after the death */
    netvm_am_result_t r;
    uint8_t small[8] = { 1 };
    CHECK_ST(netvm_am_request(ctx, 1, H_ECHO, NULL, 0, NULL, 0, NULL, 0, &r, NULL), NETVM_ERR_PEER);
    netvm_req_t *q = NULL;
    netvm_status_t st = netvm_am_request(ctx, 1, H_ECHO, NULL, 0, NULL, 0, NULL, 0, &r, &q);
    if (st == NETVM_OK)
        st = netvm_wait(&q);
    CHECK_ST(st, NETVM_ERR_PEER);
    CHECK_ST(netvm_am_send(ctx, 1, H_ECHO, NULL, 0, small, sizeof small, NULL), NETVM_ERR_PEER);
    uint8_t *b2 = malloc(1u << 20);
    CHECK_ST(netvm_am_send(ctx, 1, H_ECHO, NULL, 0, b2, 1u << 20, NULL), NETVM_ERR_PEER);
    free(b2);
    CHECK_ST(netvm_am_reply(ctx, &victim_token, NETVM_OK, NULL, 0, NULL, 0), NETVM_ERR_PEER);
    /* the survivors: calls between them work; a forward to the dead rank
     * fails and the forwarder answers the failure */
    /* quiet now: a pass finds (almost) nothing to do. A dead peer's fd
     * left readable in the epoll set would count in every one, and keep a
     * progress thread spinning */
    long events = 0;
    for (int i = 0; i < 1000; i++)
        events += netvm_progress(ctx);
    if (events > 10)
        FAILF("%ld events in 1000 progress calls after the death", events);
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    for (int i = 0; i < 100; i++) {
        uint64_t a = (uint64_t)i;
        CHECK_ST(netvm_am_request(ctx, other, H_ECHO, &a, 1, small, sizeof small, NULL, 0, &r, NULL),
                 NETVM_ERR_BOUNDS);
        uint8_t back[8];
        CHECK_OK(netvm_am_request(ctx, other, H_ECHO, &a, 1, small, sizeof small, back, sizeof back, &r, NULL));
        CHECK(r.status == NETVM_OK && r.peer == other && r.nargs == 1 && r.args[0] == a && r.len == 8);
        CHECK(memcmp(back, small, 8) == 0);
    }
    uint64_t to = 1;
    CHECK_OK(netvm_am_request(ctx, other, H_FWD, &to, 1, NULL, 0, NULL, 0, &r, NULL));
    CHECK(r.status == NETVM_ERR_PEER && r.peer == other);
    printf("survivor %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
