/* A request with a large payload completes twice inside netvm: its reply
 * arrives, and the link is done with its payload (the receiver copied it,
 * or the socket took it). Neither may complete the request while the
 * other is still due, nor reach a later request that reuses its slot.
 *
 * Rank 0, single-threaded, against rank 1's handlers:
 *  A: a request with a large payload, answered at once by a handler that
 *     does not take the payload (and, in the second round, by one that
 *     takes it first with netvm_am_recv);
 *  B: then a request that rank 1 holds unanswered (it keeps the token);
 *  C: then a blocking request answered at once. Whatever finished A has
 *     arrived by now: B must still be pending (netvm_test says not done,
 *     its result untouched);
 *  then a request makes rank 1 answer B with a value: B completes with it.
 * A third kind of round checks the payload's lifetime: the handler replies
 * first and takes the payload after; once the request completes the caller
 * overwrites its buffer, and the receiver checks that it got the original
 * (on shm the receiver copies from the caller's memory, after the reply
 * has left). */
#include "thr.h"

#include <stdlib.h>

#define BIG   (200 * 1024)
#define H_BIG       1   /* reply { 7 } without taking the payload */
#define H_BIG_RECV  2   /* take the payload, check it, reply { 8 } */
#define H_HOLD      3   /* keep the token */
#define H_RELEASE   4   /* answer the kept token with { args[0] }, then this one */
#define H_NOW       5   /* reply { 5, payloads that landed wrong } */
#define H_REPLY_FIRST 6 /* reply { 6 }, then take the payload */

static netvm_am_token_t held;
static int have_held;
static uint8_t *landed;
static _Atomic uint64_t landed_wrong;

static int on_big(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    uint64_t v = 7;
    CHECK(msg->len == BIG && !msg->payload);
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, &v, 1, NULL, 0));
    return NETVM_AM_DONE;
}

static void big_landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    (void)arg;
    CHECK_OK(st);
    if (thr_diff(landed, BIG, msg->args[0]) >= 0)
        FAILF("the large payload landed wrong");
    uint64_t v = 8;
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, &v, 1, NULL, 0));
}

static int on_big_recv(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->len == BIG && !msg->payload && msg->nargs == 1);
    CHECK_OK(netvm_am_recv(c, msg, landed, big_landed, NULL));
    return NETVM_AM_DONE;
}

static void late_landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    (void)c;
    (void)arg;
    CHECK_OK(st);
    if (thr_diff(landed, BIG, msg->args[0]) >= 0)
        atomic_fetch_add(&landed_wrong, 1);
}

static int on_reply_first(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->len == BIG && !msg->payload && msg->nargs == 1);
    uint64_t v = 6;
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, &v, 1, NULL, 0));
    CHECK_OK(netvm_am_recv(c, msg, landed, late_landed, NULL));
    return NETVM_AM_DONE;
}

static int on_hold(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)c;
    (void)arg;
    CHECK(msg->has_token && !have_held);
    held = msg->token;
    have_held = 1;
    return NETVM_AM_DONE;
}

static int on_release(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(have_held);
    have_held = 0;
    CHECK_OK(netvm_am_reply(c, &held, NETVM_OK, msg->args, 1, NULL, 0));
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, NULL, 0, NULL, 0));
    return NETVM_AM_DONE;
}

static int on_now(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    uint64_t v[2] = { 5, atomic_load(&landed_wrong) };
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, v, 2, NULL, 0));
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx = thr_init(-1);
    int rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    landed = malloc(BIG);
    CHECK(landed);
    CHECK_OK(netvm_am_register(ctx, H_BIG, on_big, NULL));
    CHECK_OK(netvm_am_register(ctx, H_BIG_RECV, on_big_recv, NULL));
    CHECK_OK(netvm_am_register(ctx, H_HOLD, on_hold, NULL));
    CHECK_OK(netvm_am_register(ctx, H_RELEASE, on_release, NULL));
    CHECK_OK(netvm_am_register(ctx, H_NOW, on_now, NULL));
    CHECK_OK(netvm_am_register(ctx, H_REPLY_FIRST, on_reply_first, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        uint8_t *big = malloc(BIG);
        CHECK(big);
        static const unsigned kinds[3] = { H_BIG, H_BIG_RECV, H_REPLY_FIRST };
        for (int round = 0; round < 3 * 20; round++) {
            uint64_t seed = thr_seed(1, 2, 3, (uint64_t)round);
            thr_fill(big, BIG, seed);
            netvm_am_result_t ra, rb, rc;
            unsigned h = kinds[round % 3];
            CHECK_OK(netvm_am_request(ctx, 1, h, &seed, 1, big, BIG, NULL, 0, &ra, NULL));
            memset(big, 0, BIG);   /* the caller's again */
            CHECK(ra.status == NETVM_OK && ra.nargs == 1 &&
                  ra.args[0] == (h == H_BIG ? 7u : h == H_BIG_RECV ? 8u : 6u));
            netvm_req_t *b;
            memset(&rb, 0, sizeof rb);
            CHECK_OK(netvm_am_request(ctx, 1, H_HOLD, NULL, 0, NULL, 0, NULL, 0, &rb, &b));
            CHECK(b);
            CHECK_OK(netvm_am_request(ctx, 1, H_NOW, NULL, 0, NULL, 0, NULL, 0, &rc, NULL));
            CHECK(rc.status == NETVM_OK && rc.nargs == 2 && rc.args[0] == 5);
            if (rc.args[1])
                FAILF("round %d: %llu payloads landed after their request completed (the caller had "
                      "overwritten them)", round, (unsigned long long)rc.args[1]);
            int done = 0;
            CHECK_OK(netvm_test(&b, &done));
            if (done)
                FAILF("round %d: a request completed before its reply (result: %u args, peer %d)", round,
                      rb.nargs, rb.peer);
            uint64_t v = 1000 + (uint64_t)round;
            CHECK_OK(netvm_am_request(ctx, 1, H_RELEASE, &v, 1, NULL, 0, NULL, 0, &rc, NULL));
            CHECK_OK(netvm_wait(&b));
            CHECK(rb.status == NETVM_OK && rb.nargs == 1 && rb.args[0] == v && rb.peer == 1);
        }
        free(big);
        printf("large_request: 60 rounds, no request completed by another's completion\n");
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(landed);
    return 0;
}
