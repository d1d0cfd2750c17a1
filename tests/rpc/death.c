/* A peer dies with calls outstanding to it (run with --keep-going). Rank 1
 * is the victim: it keeps every call it gets unanswered and dies once it
 * holds three: one from rank 0, one from rank 2, and one rank 0 made to
 * rank 2 that rank 2 delegated to it. NETVM_TIMEOUT is a minute, so
 * nothing below may end by a timeout in the time the test takes:
 *  - calls to the dead rank fail with NETVM_ERR_PEER, continuations once;
 *  - the call delegated through the dead rank fails with NETVM_ERR_PEER
 *    answered by the delegating rank 2 (res.peer 2), which watched it;
 *  - after the death: calls to rank 1 fail at once, a delegation to it
 *    fails at the delegating procedure, which answers the error; calls
 *    between the survivors work. */
#include "rpc_test.h"

#include <signal.h>

enum { OP_HOLD = 1, OP_FWD = 2, OP_ECHO = 3 };
#define CTX_TIMEOUT_MS 60000

static _Atomic int holds;

static int on_hold(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)ctx;
    (void)c;
    (void)arg;
    atomic_fetch_add(&holds, 1);
    return NETVM_RPC_DONE;
}

/* args[0]: the peer to delegate to */
static int on_fwd(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    netvm_status_t st = netvm_rpc_delegate(ctx, c, (int)c->args[0], OP_HOLD, NULL, 0, NULL, 0);
    if (st != NETVM_OK)
        CHECK_OK(netvm_rpc_reply(ctx, &c->token, st, NULL, 0, NULL, 0));
    return NETVM_RPC_DONE;
}

static int on_echo(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, c->args, c->nargs, c->payload, c->len));
    return NETVM_RPC_DONE;
}

static _Atomic int cont_runs;
static _Atomic int cont_st = -1;

static int cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    (void)arg;
    atomic_store(&cont_st, (int)o->status);
    atomic_fetch_add(&cont_runs, 1);
    return NETVM_RPC_DONE;
}

static netvm_rpc_handle_t *issue(netvm_ctx_t *ctx, int peer, unsigned op, uint64_t arg, int with_cont)
{
    netvm_rpc_handle_t *h;
    CHECK_OK(netvm_rpc_begin(ctx, &h));
    if (with_cont)
        CHECK_OK(netvm_rpc_push(h, cont, NULL));
    CHECK_OK(netvm_rpc_issue(h, peer, op, &arg, 1, NULL, 0, NULL, 0, 0));
    return h;
}

int main(void)
{
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .timeout_ms = CTX_TIMEOUT_MS };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int me = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 3);
    CHECK_OK(netvm_rpc_register(ctx, OP_HOLD, on_hold, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_FWD, on_fwd, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_ECHO, on_echo, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (me == 1) {
        WAIT_UNTIL(ctx, atomic_load(&holds) == 3);
        raise(SIGKILL);
    }
    int other = 2 - me;
    double t0 = now_s();
    netvm_rpc_handle_t *hold = issue(ctx, 1, OP_HOLD, 0, 1), *via = NULL;
    if (me == 0)
        via = issue(ctx, 2, OP_FWD, 1, 0);
    netvm_rpc_result_t res;
    CHECK_ST(netvm_rpc_wait(hold, &res), NETVM_ERR_PEER);
    CHECK(atomic_load(&cont_runs) == 1 && atomic_load(&cont_st) == NETVM_ERR_PEER);
    if (me == 0) {
        CHECK_ST(netvm_rpc_wait(via, &res), NETVM_ERR_PEER);
        if (!(res.peer == 2 && res.status == NETVM_ERR_PEER))
            FAILF("the call through the dead delegate: answered by peer %d with %s, wanted peer 2's %s",
                  res.peer, netvm_strerror(res.status), netvm_strerror(NETVM_ERR_PEER));
    }
    if (now_s() - t0 > CTX_TIMEOUT_MS / 2000.0)
        FAILF("the failures took %.1f s: a timeout, not the death, ended them", now_s() - t0);

    /* after the death */
    CHECK_ST(netvm_rpc_call(ctx, 1, OP_ECHO, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_PEER);
    netvm_rpc_handle_t *h = issue(ctx, 1, OP_ECHO, 0, 1);
    CHECK_ST(netvm_rpc_wait(h, NULL), NETVM_ERR_PEER);
    CHECK(atomic_load(&cont_runs) == 2 && atomic_load(&cont_st) == NETVM_ERR_PEER);
    uint64_t to = 1;
    CHECK_ST(netvm_rpc_call(ctx, other, OP_FWD, &to, 1, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_PEER);
    CHECK(res.peer == other);
    for (int i = 0; i < 50; i++) {
        uint64_t a = (uint64_t)i;
        char back[4];
        CHECK_OK(netvm_rpc_call(ctx, other, OP_ECHO, &a, 1, "ping", 4, back, sizeof back, 0, &res));
        CHECK(res.peer == other && res.args[0] == a && res.len == 4 && memcmp(back, "ping", 4) == 0);
    }
    if (me == 2) {
        /* the watch on the delegate runs every few ms on the RPC worker:
         * this rank's own calls above may all be over before it looked */
        netvm_rpc_stats_t st;
        WAIT_UNTIL(ctx, netvm_rpc_stats(ctx, &st) == NETVM_OK && st.delegate_failures >= 1);
        if (!(st.delegated == 1 && st.delegate_failures == 1))
            FAILF("delegated %llu, delegate failures %llu: wanted 1 and 1", (unsigned long long)st.delegated,
                  (unsigned long long)st.delegate_failures);
    }
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    printf("survivor %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
