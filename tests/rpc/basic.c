/* RPC between every pair of ranks: payloads of every size class both ways
 * (0, small, at and past the link's eager limit), verified; the
 * procedure's status, reply arguments and answering peer; procedures that
 * answer later (from the main thread, with the kept token) or defer once;
 * an op without a procedure; bad arguments; a reply too long for the
 * caller's buffer; a per-call timeout far below NETVM_TIMEOUT; a second
 * reply to one token dropped and counted, altered tokens refused. */
#include "rpc_test.h"

#include <pthread.h>

enum { OP_ECHO = 1, OP_FAIL = 2, OP_LATER = 3, OP_DEFER = 4, OP_HOLD = 5, OP_TWICE = 6, OP_FORGE = 7,
       OP_NOBUF = 8, OP_BIG = 200 };

#define CTX_TIMEOUT_MS 60000

/* args: reply size, seed of the reply; the request's payload has the
 * pattern of seed args[2] */
static int on_echo(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK(c->op == OP_ECHO && c->nargs == 3);
    CHECK_PATTERN(c->payload, c->len, c->args[2]);
    size_t rl = (size_t)c->args[0];
    void *r = malloc(rl ? rl : 1);
    amt_fill(r, rl, c->args[1]);
    uint64_t back[NETVM_AM_MAX_ARGS] = { c->len, c->args[1], 3, 4, 5, 6 };
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, back, NETVM_AM_MAX_ARGS, r, rl));
    free(r);
    return NETVM_RPC_DONE;
}

static int on_fail(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_ERR_EXISTS, c->args, c->nargs, NULL, 0));
    return NETVM_RPC_DONE;
}

/* kept tokens, answered by the main thread */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static netvm_am_token_t kept[16];
static uint64_t kept_arg[16];
static int nkept;

static int on_later(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)ctx;
    (void)arg;
    pthread_mutex_lock(&kept_lock);
    CHECK(nkept < 16);
    kept_arg[nkept] = c->args[0];
    kept[nkept] = c->token;
    __atomic_store_n(&nkept, nkept + 1, __ATOMIC_RELEASE);   /* main polls it without the lock */
    pthread_mutex_unlock(&kept_lock);
    return NETVM_RPC_DONE;
}

static int on_defer(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    if (c->deferred < 2)
        return NETVM_RPC_DEFER;
    uint64_t d = c->deferred;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, &d, 1, NULL, 0));
    return NETVM_RPC_DONE;
}

static int on_hold(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)ctx;
    (void)c;
    (void)arg;
    return NETVM_RPC_DONE;   /* never answers */
}

static int on_twice(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    uint64_t one = 1, two = 2;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, &one, 1, "first", 5));
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, &two, 1, "again", 5));
    return NETVM_RPC_DONE;
}

/* answers with a wrong call key, then a wrong payload key, then right */
static int on_forge(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    uint64_t bad = 9, good = 7;
    /* an altered key is refused where the token is held: the wire carries
     * only the call's key, from which the payload's is derived, so a token
     * whose two keys disagree was altered (tests/am/replies.c forges one
     * that agrees, which the caller drops) */
    netvm_am_token_t t = c->token;
    t.w[2] ^= 1;
    CHECK(netvm_rpc_reply(ctx, &t, NETVM_OK, &bad, 1, "forged", 6) == NETVM_ERR_KEY);
    t = c->token;
    t.w[3] ^= 1;
    CHECK(netvm_rpc_reply(ctx, &t, NETVM_OK, &bad, 1, "forged", 6) == NETVM_ERR_KEY);
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, &good, 1, "real", 4));
    return NETVM_RPC_DONE;
}

/* a payload for a caller that named no reply buffer */
static int on_nobuf(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, NULL, 0, "x", 1));
    return NETVM_RPC_DONE;
}

static void echo_one(netvm_ctx_t *ctx, int peer, size_t ql, size_t rl, uint64_t seq)
{
    uint64_t qs = amt_seed(1, ql, seq), rs = amt_seed(2, rl, seq);
    uint8_t *q = malloc(ql + 1), *r = malloc(rl + 16);
    amt_fill(q, ql, qs);
    memset(r, 0xee, rl + 16);
    uint64_t a[3] = { rl, rs, qs };
    netvm_rpc_result_t res;
    CHECK_OK(netvm_rpc_call(ctx, peer, OP_ECHO, a, 3, ql ? q : NULL, ql, r, rl + 8, 0, &res));
    CHECK(res.status == NETVM_OK && res.peer == peer && res.len == rl);
    CHECK(res.nargs == NETVM_AM_MAX_ARGS && res.args[0] == ql && res.args[1] == rs && res.args[5] == 6);
    CHECK_PATTERN(r, rl, rs);
    for (size_t i = rl; i < rl + 16; i++)
        CHECK(r[i] == 0xee);
    free(q);
    free(r);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .timeout_ms = CTX_TIMEOUT_MS };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    check_rank = me;
    CHECK_ST(netvm_rpc_register(ctx, NETVM_RPC_MAX_OPS, on_echo, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_register(NULL, 1, on_echo, NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_rpc_register(ctx, OP_ECHO, on_echo, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_FAIL, on_fail, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_LATER, on_later, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_DEFER, on_defer, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_HOLD, on_hold, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_TWICE, on_twice, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_FORGE, on_forge, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_NOBUF, on_nobuf, NULL));
    /* registered and removed: as if never registered */
    CHECK_OK(netvm_rpc_register(ctx, OP_BIG, on_echo, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_BIG, NULL, NULL));
    CHECK_OK(netvm_barrier(ctx));

    int peer = (me + 1) % n;
    size_t eager = amt_eager(ctx, peer, NULL);
    size_t sizes[] = { 0, 1, 8, 100, 1000, eager - 1, eager, eager + 1, 3 * eager + 5, 1u << 20 };
    unsigned ns = sizeof sizes / sizeof sizes[0];
    for (int r = 0; r < rounds; r++)
        for (unsigned i = 0; i < ns; i++)
            echo_one(ctx, peer, sizes[i], sizes[(i + (unsigned)r) % ns], (uint64_t)r * 100 + i);

    netvm_rpc_result_t res;
    uint64_t a[NETVM_RPC_MAX_ARGS + 1] = { 11, 12, 13, 14, 15, 16 };
    /* the procedure's own status */
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, a, 2, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_EXISTS);
    CHECK(res.status == NETVM_ERR_EXISTS && res.nargs == 2 && res.args[1] == 12 && res.peer == peer);
    /* no procedure */
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_BIG, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_NOTFOUND);
    CHECK_ST(netvm_rpc_call(ctx, peer, 77, NULL, 0, NULL, 0, NULL, 0, 0, NULL), NETVM_ERR_NOTFOUND);
    /* bad arguments */
    CHECK_ST(netvm_rpc_call(ctx, peer, NETVM_RPC_MAX_OPS, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, a, NETVM_RPC_MAX_ARGS + 1, NULL, 0, NULL, 0, 0, &res),
             NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, NULL, 1, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, NULL, 0, NULL, 5, NULL, 0, 0, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, NULL, 0, NULL, 0, NULL, 5, 0, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, NULL, 0, NULL, 0, NULL, 0, -1, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(NULL, peer, OP_FAIL, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_INVAL);
    CHECK_ST(netvm_rpc_call(ctx, 1000, OP_FAIL, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_RANK);
    CHECK_ST(netvm_rpc_reply(ctx, NULL, NETVM_OK, NULL, 0, NULL, 0), NETVM_ERR_INVAL);
    /* a reply too long for the buffer: the call fails, the buffer untouched */
    uint8_t small[16];
    memset(small, 0x5a, sizeof small);
    uint64_t big[3] = { 100, 1, 0 };
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_ECHO, big, 3, NULL, 0, small, sizeof small, 0, &res), NETVM_ERR_BOUNDS);
    for (size_t i = 0; i < sizeof small; i++)
        CHECK(small[i] == 0x5a);
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_NOBUF, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_BOUNDS);
    /* deferred twice, then answered */
    CHECK_OK(netvm_rpc_call(ctx, peer, OP_DEFER, NULL, 0, NULL, 0, NULL, 0, 0, &res));
    CHECK(res.nargs == 1 && res.args[0] == 2);
    /* a per-call timeout: far below the context's, which would fail the
     * test's launcher timeout first */
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        CHECK_ST(netvm_rpc_call(ctx, peer, OP_HOLD, NULL, 0, NULL, 0, NULL, 0, 200, &res), NETVM_ERR_TIMEOUT);
        CHECK(now_s() - t0 < CTX_TIMEOUT_MS / 2000.0);
    }
    /* answered twice / forged: one answer delivered, the rest dropped */
    uint64_t dropped0 = amt_stats(ctx).dropped_replies;
    char buf[16] = { 0 };
    CHECK_OK(netvm_rpc_call(ctx, peer, OP_TWICE, NULL, 0, NULL, 0, buf, sizeof buf, 0, &res));
    CHECK(res.args[0] == 1 && res.len == 5 && memcmp(buf, "first", 5) == 0);
    memset(buf, 0, sizeof buf);
    CHECK_OK(netvm_rpc_call(ctx, peer, OP_FORGE, NULL, 0, NULL, 0, buf, sizeof buf, 0, &res));
    CHECK(res.args[0] == 7 && res.len == 4 && memcmp(buf, "real", 4) == 0);
    /* the second answer of OP_TWICE may still be on its way; a blocking
     * call after it on the same path comes back after it */
    CHECK_ST(netvm_rpc_call(ctx, peer, OP_FAIL, NULL, 0, NULL, 0, NULL, 0, 0, &res), NETVM_ERR_EXISTS);
    WAIT_UNTIL(ctx, amt_stats(ctx).dropped_replies >= dropped0 + 1);
    CHECK(memcmp(buf, "real", 4) == 0);

    /* answered later, from this process's main thread, out of order */
    netvm_rpc_handle_t *h[4];
    for (int i = 0; i < 4; i++) {
        CHECK_OK(netvm_rpc_begin(ctx, &h[i]));
        uint64_t v = 1000 + (uint64_t)i;
        CHECK_OK(netvm_rpc_issue(h[i], peer, OP_LATER, &v, 1, NULL, 0, NULL, 0, 0));
    }
    WAIT_UNTIL(ctx, __atomic_load_n(&nkept, __ATOMIC_ACQUIRE) == 4);
    pthread_mutex_lock(&kept_lock);
    for (int i = 3; i >= 0; i--) {
        uint64_t v = kept_arg[i] * 2;
        CHECK_OK(netvm_rpc_reply(ctx, &kept[i], NETVM_OK, &v, 1, NULL, 0));
    }
    __atomic_store_n(&nkept, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&kept_lock);
    for (int i = 0; i < 4; i++) {
        CHECK_OK(netvm_rpc_wait(h[i], &res));
        CHECK(res.nargs == 1 && res.args[0] == 2 * (1000 + (uint64_t)i) && res.peer == peer);
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rpc_stats_t rs;
    CHECK_OK(netvm_rpc_stats(ctx, &rs));
    CHECK(rs.records_live == 0 && rs.nb_calls == 4);
    CHECK_OK(netvm_finalize(ctx));
    printf("rpc_basic: rank %d ok\n", me);
    return 0;
}
