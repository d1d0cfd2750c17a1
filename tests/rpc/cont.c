/* Nonblocking calls and their continuations (rank 0 calls rank 1):
 *  - a stack of continuations runs last pushed first, each exactly once,
 *    on an answer, on the procedure's error, on a timeout (the call's own)
 *    and on a failure at issue (no such peer);
 *  - a continuation that returns NETVM_RPC_DEFER runs again, with those
 *    below it, on the RPC worker thread, where it may block;
 *  - calls whose handles were dropped free their records when they end,
 *    answered or timed out: many more than a request table holds leave no
 *    record behind;
 *  - push after issue, too many continuations, wait before issue. */
#include "rpc_test.h"

#include <pthread.h>

enum { OP_ECHO = 1, OP_FAIL = 2, OP_HOLD = 3 };

static int on_echo(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, c->args, c->nargs, c->payload, c->len));
    return NETVM_RPC_DONE;
}

static int on_fail(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_ERR_RIGHTS, NULL, 0, NULL, 0));
    return NETVM_RPC_DONE;
}

static int on_hold(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)ctx;
    (void)c;
    (void)arg;
    return NETVM_RPC_DONE;
}

/* a record of continuation runs: who ran, in which order */
struct trace {
    _Atomic int n;
    int         order[NETVM_RPC_MAX_CONT];
    _Atomic int runs[NETVM_RPC_MAX_CONT];
    netvm_status_t st;
};

struct step {
    struct trace *t;
    int           id;
};

static int step_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct step *s = arg;
    int k = atomic_fetch_add(&s->t->n, 1);
    s->t->order[k] = s->id;
    s->t->st = o->status;
    atomic_fetch_add(&s->t->runs[s->id], 1);
    return NETVM_RPC_DONE;
}

static void stack_call(netvm_ctx_t *ctx, int peer, unsigned op, int timeout_ms, netvm_status_t want, int ncont)
{
    struct trace t;
    memset(&t, 0, sizeof t);
    struct step s[NETVM_RPC_MAX_CONT];
    netvm_rpc_handle_t *h;
    CHECK_OK(netvm_rpc_begin(ctx, &h));
    for (int i = 0; i < ncont; i++) {
        s[i].t = &t;
        s[i].id = i;
        CHECK_OK(netvm_rpc_push(h, step_cont, &s[i]));
    }
    if (ncont == NETVM_RPC_MAX_CONT)
        CHECK_ST(netvm_rpc_push(h, step_cont, &s[0]), NETVM_ERR_NOMEM);
    uint64_t v = 5;
    char buf[8];
    CHECK_OK(netvm_rpc_issue(h, peer, op, &v, 1, "abc", 3, buf, sizeof buf, timeout_ms));
    CHECK_ST(netvm_rpc_push(h, step_cont, &s[0]), NETVM_ERR_STATE);
    CHECK_ST(netvm_rpc_issue(h, peer, op, &v, 1, NULL, 0, NULL, 0, 0), NETVM_ERR_STATE);
    netvm_rpc_result_t res;
    CHECK_ST(netvm_rpc_wait(h, &res), want);
    CHECK(atomic_load(&t.n) == ncont);
    for (int i = 0; i < ncont; i++) {
        CHECK(t.order[i] == ncont - 1 - i);   /* last pushed first */
        CHECK(atomic_load(&t.runs[i]) == 1);
    }
    if (ncont)
        CHECK(t.st == want);
    if (want == NETVM_OK)
        CHECK(res.len == 3 && memcmp(buf, "abc", 3) == 0 && res.args[0] == 5 && res.peer == peer);
}

/* deferred continuations: the first refuses in the progress engine and
 * blocks on the worker until main lets it go */
static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int deferred_runs, engine_refusals, below_runs, below_on_worker;
static pthread_t main_thread;

static int gated_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(o->status == NETVM_OK);
    if (!o->deferred) {
        if (pthread_mutex_trylock(&gate) != 0) {
            atomic_fetch_add(&engine_refusals, 1);
            return NETVM_RPC_DEFER;   /* not now, no side effect */
        }
        pthread_mutex_unlock(&gate);
        FAILF("the gate should be held");
    }
    CHECK(!pthread_equal(pthread_self(), main_thread));
    pthread_mutex_lock(&gate);   /* blocks: allowed here */
    pthread_mutex_unlock(&gate);
    atomic_fetch_add(&deferred_runs, 1);
    return NETVM_RPC_DONE;
}

static int below_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    (void)arg;
    /* pushed first, so it runs after gated_cont: also deferred */
    CHECK(atomic_load(&deferred_runs) > 0);
    if (o->deferred)
        atomic_fetch_add(&below_on_worker, 1);
    atomic_fetch_add(&below_runs, 1);
    return NETVM_RPC_DONE;
}

static _Atomic long dropped_done, dropped_ok, dropped_timeout;

static int count_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    (void)arg;
    if (o->status == NETVM_OK)
        atomic_fetch_add(&dropped_ok, 1);
    else if (o->status == NETVM_ERR_TIMEOUT)
        atomic_fetch_add(&dropped_timeout, 1);
    atomic_fetch_add(&dropped_done, 1);
    return NETVM_RPC_DONE;
}

int main(int argc, char **argv)
{
    long ndrop = argc > 1 ? atol(argv[1]) : 2000;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = netvm_rank(ctx);
    check_rank = me;
    CHECK(netvm_size(ctx) == 2);
    main_thread = pthread_self();
    CHECK_OK(netvm_rpc_register(ctx, OP_ECHO, on_echo, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_FAIL, on_fail, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_HOLD, on_hold, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (me == 0) {
        int peer = 1;
        CHECK_ST(netvm_rpc_begin(ctx, NULL), NETVM_ERR_INVAL);
        CHECK_ST(netvm_rpc_push(NULL, step_cont, NULL), NETVM_ERR_INVAL);
        netvm_rpc_handle_t *h;
        CHECK_OK(netvm_rpc_begin(ctx, &h));
        CHECK_ST(netvm_rpc_push(h, NULL, NULL), NETVM_ERR_INVAL);
        CHECK_ST(netvm_rpc_wait(h, NULL), NETVM_ERR_STATE);
        CHECK_ST(netvm_rpc_issue(h, peer, NETVM_RPC_MAX_OPS, NULL, 0, NULL, 0, NULL, 0, 0), NETVM_ERR_INVAL);
        CHECK_OK(netvm_rpc_drop(h));   /* never issued: freed now */

        for (int k = 0; k <= NETVM_RPC_MAX_CONT; k++)
            stack_call(ctx, peer, OP_ECHO, 0, NETVM_OK, k);
        stack_call(ctx, peer, OP_FAIL, 0, NETVM_ERR_RIGHTS, 3);
        stack_call(ctx, peer, OP_HOLD, 300, NETVM_ERR_TIMEOUT, 3);
        stack_call(ctx, 1000, OP_ECHO, 0, NETVM_ERR_RANK, 2);
        /* a reply too long for the buffer fails the call */
        netvm_rpc_handle_t *hb;
        char tiny[2];
        CHECK_OK(netvm_rpc_begin(ctx, &hb));
        CHECK_OK(netvm_rpc_issue(hb, peer, OP_ECHO, NULL, 0, "abcdef", 6, tiny, sizeof tiny, 0));
        CHECK_ST(netvm_rpc_wait(hb, NULL), NETVM_ERR_BOUNDS);

        /* deferred continuations */
        for (int i = 0; i < 3; i++) {
            pthread_mutex_lock(&gate);
            int before = atomic_load(&engine_refusals);
            CHECK_OK(netvm_rpc_begin(ctx, &h));
            CHECK_OK(netvm_rpc_push(h, below_cont, NULL));
            CHECK_OK(netvm_rpc_push(h, gated_cont, NULL));
            CHECK_OK(netvm_rpc_issue(h, peer, OP_ECHO, NULL, 0, NULL, 0, NULL, 0, 0));
            WAIT_UNTIL(ctx, atomic_load(&engine_refusals) > before);
            int done = 1;
            CHECK_OK(netvm_rpc_test(h, &done, NULL));
            CHECK(!done);   /* the worker is blocked on the gate */
            pthread_mutex_unlock(&gate);
            CHECK_OK(netvm_rpc_wait(h, NULL));
            CHECK(atomic_load(&deferred_runs) == i + 1 && atomic_load(&below_runs) == i + 1);
        }
        CHECK(atomic_load(&below_on_worker) == 3);
        netvm_rpc_stats_t st;
        CHECK_OK(netvm_rpc_stats(ctx, &st));
        CHECK(st.deferred_conts == 6);

        /* dropped handles: answered, and timed out */
        for (long i = 0; i < ndrop; i++) {
            CHECK_OK(netvm_rpc_begin(ctx, &h));
            CHECK_OK(netvm_rpc_push(h, count_cont, NULL));
            uint64_t v = (uint64_t)i;
            int hold = i % 50 == 0;
            CHECK_OK(netvm_rpc_issue(h, peer, hold ? OP_HOLD : OP_ECHO, &v, 1, NULL, 0, NULL, 0, hold ? 100 : 0));
            CHECK_OK(netvm_rpc_drop(h));
            if (i % 32 == 31)   /* bound what is in flight */
                WAIT_UNTIL(ctx, atomic_load(&dropped_done) >= i - 31 - (ndrop / 50 + 1));
        }
        WAIT_UNTIL(ctx, atomic_load(&dropped_done) == ndrop);
        CHECK(atomic_load(&dropped_timeout) == (ndrop + 49) / 50);
        CHECK(atomic_load(&dropped_ok) == ndrop - (ndrop + 49) / 50);
        WAIT_UNTIL(ctx, (netvm_rpc_stats(ctx, &st), st.records_live == 0));
        CHECK(st.nb_calls == (uint64_t)(NETVM_RPC_MAX_CONT + 1 + 3 + 1 + 3 + ndrop));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rpc_cont: rank %d ok\n", me);
    return 0;
}
