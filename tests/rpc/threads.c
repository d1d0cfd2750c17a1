/* Several threads of every rank call every other rank at once at
 * NETVM_THREAD_MULTIPLE: blocking calls, delegated calls and nonblocking
 * calls with continuations (waited for or dropped), every answer checked. */
#include "rpc_test.h"

#include <pthread.h>

enum { OP_ECHO = 1, OP_HOP = 2 };
#define NTHREADS 4

static netvm_ctx_t *ctx;
static int me, n, iters;
static _Atomic long conts, dropped_conts;

static int on_echo(netvm_ctx_t *c_, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_reply(c_, &c->token, NETVM_OK, c->args, c->nargs, c->payload, c->len));
    return NETVM_RPC_DONE;
}

static int on_hop(netvm_ctx_t *c_, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_rpc_delegate(c_, c, (int)c->args[0], OP_ECHO, c->args + 1, c->nargs - 1, c->payload, c->len));
    return NETVM_RPC_DONE;
}

struct nb {
    uint64_t seq;
    char     buf[64];
    int      dropped;
};

static int nb_cont(netvm_ctx_t *c_, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)c_;
    struct nb *b = arg;
    CHECK_ST(o->status, NETVM_OK);
    CHECK(o->res.nargs == 1 && o->res.args[0] == b->seq && o->res.len == 8);
    CHECK(memcmp(b->buf, &b->seq, 8) == 0);
    if (b->dropped) {
        atomic_fetch_add(&dropped_conts, 1);
        free(b);
    } else {
        atomic_fetch_add(&conts, 1);
    }
    return NETVM_RPC_DONE;
}

static void *caller(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < iters; i++) {
        uint64_t seq = amt_mix((uint64_t)me << 40 | (uint64_t)t << 32 | (uint64_t)i);
        int peer = (int)(seq % (uint64_t)n);
        size_t len = (size_t)(seq >> 8) % 3000;
        uint8_t q[3000], r[3000];
        amt_fill(q, len, seq);
        netvm_rpc_result_t res;
        CHECK_OK(netvm_rpc_call(ctx, peer, OP_ECHO, &seq, 1, len ? q : NULL, len, r, sizeof r, 0, &res));
        CHECK(res.peer == peer && res.len == len && res.args[0] == seq);
        CHECK_PATTERN(r, len, seq);
        /* delegated: to peer, answered by the rank after it */
        int last = (peer + 1) % n;
        uint64_t a[2] = { (uint64_t)last, seq };
        CHECK_OK(netvm_rpc_call(ctx, peer, OP_HOP, a, 2, len ? q : NULL, len, r, sizeof r, 0, &res));
        CHECK(res.peer == last && res.len == len && res.args[0] == seq);
        CHECK_PATTERN(r, len, seq);
        /* nonblocking, one waited, one dropped */
        struct nb *w = calloc(1, sizeof *w), *d = calloc(1, sizeof *d);
        w->seq = seq;
        d->seq = seq;
        d->dropped = 1;
        netvm_rpc_handle_t *hw, *hd;
        CHECK_OK(netvm_rpc_begin(ctx, &hw));
        CHECK_OK(netvm_rpc_push(hw, nb_cont, w));
        CHECK_OK(netvm_rpc_issue(hw, peer, OP_ECHO, &seq, 1, &seq, 8, w->buf, sizeof w->buf, 0));
        CHECK_OK(netvm_rpc_begin(ctx, &hd));
        CHECK_OK(netvm_rpc_push(hd, nb_cont, d));
        CHECK_OK(netvm_rpc_issue(hd, last, OP_ECHO, &seq, 1, &seq, 8, d->buf, sizeof d->buf, 0));
        CHECK_OK(netvm_rpc_drop(hd));
        CHECK_OK(netvm_rpc_wait(hw, &res));
        CHECK(res.args[0] == seq);
        free(w);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    iters = argc > 1 ? atoi(argv[1]) : 500;
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    me = check_rank = netvm_rank(ctx);
    n = netvm_size(ctx);
    CHECK_OK(netvm_rpc_register(ctx, OP_ECHO, on_echo, NULL));
    CHECK_OK(netvm_rpc_register(ctx, OP_HOP, on_hop, NULL));
    CHECK_OK(netvm_barrier(ctx));
    pthread_t th[NTHREADS];
    for (unsigned t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, caller, (void *)(uintptr_t)t) == 0);
    for (unsigned t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    CHECK(atomic_load(&conts) == (long)NTHREADS * iters);
    WAIT_UNTIL(ctx, atomic_load(&dropped_conts) == (long)NTHREADS * iters);
    netvm_rpc_stats_t st;
    WAIT_UNTIL(ctx, (netvm_rpc_stats(ctx, &st), st.records_live == 0));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rpc_threads: rank %d ok\n", me);
    return 0;
}
