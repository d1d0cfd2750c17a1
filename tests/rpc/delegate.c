/* Delegated RPC through every rank: each rank calls the next, which
 * delegates the call on (any number of hops, the request's payload with
 * it) until the last rank answers the caller directly with a reply
 * payload of every size class; res.peer names the last rank. Blocking and
 * nonblocking (continuations) calls. */
#include "rpc_test.h"

enum { OP_HOP = 10 };

/* args: hops still to go, reply size, reply seed, request seed */
static int on_hop(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    CHECK(c->nargs == 4);
    CHECK_PATTERN(c->payload, c->len, c->args[3]);
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    if (c->args[0] > 0) {
        uint64_t a[4] = { c->args[0] - 1, c->args[1], c->args[2], c->args[3] };
        CHECK_OK(netvm_rpc_delegate(ctx, c, (me + 1) % n, OP_HOP, a, 4, c->payload, c->len));
        return NETVM_RPC_DONE;
    }
    size_t rl = (size_t)c->args[1];
    void *r = malloc(rl + 1);
    amt_fill(r, rl, c->args[2]);
    uint64_t back[2] = { (uint64_t)me, c->len };
    CHECK_OK(netvm_rpc_reply(ctx, &c->token, NETVM_OK, back, 2, r, rl));
    free(r);
    return NETVM_RPC_DONE;
}

struct nbcall {
    uint8_t *rbuf;
    size_t   rl, ql;
    uint64_t rs;
    int      last;
    _Atomic int runs;
};

static int check_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct nbcall *c = arg;
    CHECK(!o->deferred);
    CHECK_ST(o->status, NETVM_OK);
    CHECK(o->res.peer == c->last && o->res.len == c->rl && o->res.args[0] == (uint64_t)c->last &&
          o->res.args[1] == c->ql);
    CHECK_PATTERN(c->rbuf, c->rl, c->rs);
    atomic_fetch_add(&c->runs, 1);
    return NETVM_RPC_DONE;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 10;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    check_rank = me;
    CHECK(n >= 3);
    CHECK_OK(netvm_rpc_register(ctx, OP_HOP, on_hop, NULL));
    CHECK_OK(netvm_barrier(ctx));
    int next = (me + 1) % n, last = (me + n - 1) % n;
    size_t eager = amt_eager(ctx, next, NULL);
    size_t sizes[] = { 0, 8, 1000, eager, eager + 1, 4 * eager, 1u << 20 };
    unsigned ns = sizeof sizes / sizeof sizes[0];
    uint64_t seq = 0;
    for (int r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < ns; i++) {
            size_t rl = sizes[i], ql = sizes[(i + (unsigned)r) % ns];
            uint64_t rs = amt_seed(3, rl, ++seq), qs = amt_seed(4, ql, seq);
            uint8_t *q = malloc(ql + 1), *rb = malloc(rl + 1);
            amt_fill(q, ql, qs);
            uint64_t a[4] = { (uint64_t)n - 2, rl, rs, qs };
            netvm_rpc_result_t res;
            CHECK_OK(netvm_rpc_call(ctx, next, OP_HOP, a, 4, ql ? q : NULL, ql, rb, rl, 0, &res));
            CHECK(res.peer == last && res.len == rl && res.nargs == 2 && res.args[0] == (uint64_t)last &&
                  res.args[1] == ql);
            CHECK_PATTERN(rb, rl, rs);
            free(q);
            free(rb);
        }
        /* a window of nonblocking delegated calls, one of each size */
        struct nbcall c[16];
        netvm_rpc_handle_t *h[16];
        for (unsigned i = 0; i < ns; i++) {
            c[i].rl = sizes[i];
            c[i].ql = sizes[ns - 1 - i];
            c[i].rs = amt_seed(5, c[i].rl, ++seq);
            c[i].rbuf = malloc(c[i].rl + 1);
            c[i].last = last;
            atomic_init(&c[i].runs, 0);
            uint8_t *q = malloc(c[i].ql + 1);
            uint64_t qs = amt_seed(6, c[i].ql, seq);
            amt_fill(q, c[i].ql, qs);
            uint64_t a[4] = { (uint64_t)n - 2, c[i].rl, c[i].rs, qs };
            CHECK_OK(netvm_rpc_begin(ctx, &h[i]));
            CHECK_OK(netvm_rpc_push(h[i], check_cont, &c[i]));
            CHECK_OK(netvm_rpc_issue(h[i], next, OP_HOP, a, 4, c[i].ql ? q : NULL, c[i].ql, c[i].rbuf, c[i].rl, 0));
            free(q);   /* the payload may be reused once issued */
        }
        for (unsigned i = 0; i < ns; i++) {
            netvm_rpc_result_t res;
            CHECK_OK(netvm_rpc_wait(h[i], &res));
            CHECK(res.peer == last);
            CHECK(atomic_load(&c[i].runs) == 1);
            free(c[i].rbuf);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rpc_stats_t st;
    CHECK_OK(netvm_rpc_stats(ctx, &st));
    /* every rank but the last of each chain delegated the others' calls */
    CHECK(st.delegated == (uint64_t)(n - 2) * (uint64_t)rounds * 2 * ns);
    CHECK(st.records_live == 0);
    CHECK_OK(netvm_finalize(ctx));
    printf("rpc_delegate: rank %d ok\n", me);
    return 0;
}
