/* What a handler may and may not do, and messages nobody handles.
 * Rank 0 asks, rank 1's handlers serve.
 *  - A handler issues operations: a nonblocking put, then (continuation) a
 *    get of what it put, then an atomic, then a one-way message and the
 *    reply; on the mapped segment and on a plain exported buffer.
 *  - Blocking calls inside a handler fail with NETVM_ERR_STATE: netvm_wait
 *    on a pending request, a blocking netvm_am_request, a large
 *    netvm_am_send without a request, netvm_flush, netvm_fence,
 *    netvm_barrier, and netvm_put / netvm_get / netvm_atomic where they
 *    would wait for the target (tcp; atomics the target runs). On shm put
 *    and get never wait for the target and work (and native atomics).
 *  - NETVM_AM_DEFER N times, then DONE: the handler sees msg->deferred
 *    0..N, the payload (eager and large) intact each time, a request's
 *    token still answers; stats.deferred counts every deferral.
 *  - No handler: a request is answered NETVM_ERR_NOTFOUND, one-way
 *    messages (a large one too) are dropped and counted in
 *    dropped_no_handler, also after a handler was removed; the stream goes
 *    on. netvm_am_register refuses ids >= NETVM_AM_MAX_ID. */
#include "am_test.h"

enum { H_OPS = 1, H_NOTE = 2, H_HOLD = 3, H_DEFER = 4, H_PLAIN = 5, H_NONE = 6, H_TEMP = 7 };
enum { K_DEFER = 1, K_PLAIN };

#define SEGLEN 4096

static int rank, is_tcp, shm_mapped;
/* rank 0's: [0] netvm_alloc_shared, [1] a plain buffer. Atomic because the
 * progress thread reads them in on_ops: the imports happen before rank 0
 * sends, but through the other process, which ThreadSanitizer cannot see. */
static netvm_rseg_t *_Atomic peer_seg[2];
static uint64_t plain_mem[SEGLEN / 8];

/* --- operations from a handler ------------------------------------------------------- */

struct ops {
    netvm_am_token_t token;
    netvm_rseg_t *r;
    uint64_t seq, off, val, got, old;
};

static _Atomic int n_notes, n_held_done, n_ops_done;
static netvm_am_token_t held[2];
static _Atomic int nheld;

static void after_atomic(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    struct ops *o = arg;
    CHECK_ST(st, NETVM_OK);
    uint64_t a[2] = { o->seq, o->old };
    CHECK_OK(netvm_am_send(ctx, 0, H_NOTE, a, 2, NULL, 0, NULL));
    uint64_t r[3] = { o->seq, o->got, o->old };
    atomic_fetch_add(&n_ops_done, 1);   /* before the caller can see the reply */
    CHECK_OK(netvm_am_reply(ctx, &o->token, NETVM_OK, r, 3, NULL, 0));
    free(o);
}

static void after_get(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    struct ops *o = arg;
    CHECK_ST(st, NETVM_OK);
    CHECK(o->got == o->val);
    netvm_req_t *rq;
    CHECK_OK(netvm_atomic_nb(ctx, o->r, o->off + 8, NETVM_AOP_FADD, 5, 0, &o->old, &rq));
    CHECK_OK(netvm_req_then(ctx, &rq, after_atomic, o));
}

static void after_put(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    struct ops *o = arg;
    CHECK_ST(st, NETVM_OK);
    netvm_req_t *rq;
    CHECK_OK(netvm_get_nb(ctx, &o->got, o->r, o->off, 8, 0, &rq));
    CHECK_OK(netvm_req_then(ctx, &rq, after_get, o));
}

static void held_done(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    (void)ctx;
    netvm_am_result_t *res = arg;
    CHECK_ST(st, NETVM_OK);
    CHECK(res->status == NETVM_OK && res->nargs == 1 && res->args[0] == 77 && res->peer == 0);
    free(res);
    atomic_fetch_add(&n_held_done, 1);
}

/* The blocking calls, each refused; the first time only (args[2] == 1). */
static void blocking_refused(netvm_ctx_t *ctx, struct ops *o)
{
    netvm_am_result_t *res = malloc(sizeof *res);
    netvm_req_t *rq;
    /* a request that stays pending until rank 0 answers it (after our reply) */
    CHECK_OK(netvm_am_request(ctx, 0, H_HOLD, NULL, 0, NULL, 0, NULL, 0, res, &rq));
    CHECK(rq != NULL);
    CHECK_ST(netvm_wait(&rq), NETVM_ERR_STATE);
    CHECK(rq != NULL);
    CHECK_OK(netvm_req_then(ctx, &rq, held_done, res));
    netvm_am_result_t r2;
    CHECK_ST(netvm_am_request(ctx, 0, H_NOTE, NULL, 0, NULL, 0, NULL, 0, &r2, NULL), NETVM_ERR_STATE);
    static uint8_t big[1u << 20];
    CHECK_ST(netvm_am_send(ctx, 0, H_NOTE, NULL, 0, big, sizeof big, NULL), NETVM_ERR_STATE);
    CHECK_ST(netvm_flush(ctx, 0), NETVM_ERR_STATE);
    CHECK_ST(netvm_flush(ctx, -1), NETVM_ERR_STATE);
    CHECK_ST(netvm_fence(ctx, 0), NETVM_ERR_STATE);
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_STATE);
    /* put and get wait for the target on tcp only; atomics wherever the
     * target runs them (tcp, and shm off the mapped path) */
    uint64_t v = 0x1234567, got = 0;
    netvm_status_t want = is_tcp ? NETVM_ERR_STATE : NETVM_OK;
    CHECK_ST(netvm_put(ctx, o->r, o->off + 16, &v, 8, 0), want);
    CHECK_ST(netvm_get(ctx, &got, o->r, o->off + 16, 8, 0), want);
    if (!is_tcp)
        CHECK(got == v);
    int native = !is_tcp && shm_mapped && o->r == peer_seg[0];
    CHECK_ST(netvm_atomic(ctx, o->r, o->off + 24, NETVM_AOP_ADD, 1, 0, NULL), native ? NETVM_OK : NETVM_ERR_STATE);
}

/* args: seq, which segment, check the blocking calls */
static int on_ops(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 3);
    struct ops *o = calloc(1, sizeof *o);
    o->token = m->token;
    o->seq = m->args[0];
    o->r = peer_seg[m->args[1]];
    o->off = 32 * (o->seq % (SEGLEN / 32));
    o->val = amt_arg(o->seq, 1);
    if (m->args[2])
        blocking_refused(ctx, o);
    netvm_req_t *rq;
    CHECK_OK(netvm_put_nb(ctx, o->r, o->off, &o->val, 8, 0, &rq));
    CHECK_OK(netvm_req_then(ctx, &rq, after_put, o));
    CHECK(rq == NULL);
    return NETVM_AM_DONE;
}

static int on_note(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(!m->has_token && m->nargs == 2);
    atomic_fetch_add(&n_notes, 1);
    return NETVM_AM_DONE;
}

static int on_hold(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->has_token);
    int i = atomic_load(&nheld);
    CHECK(i < 2);
    held[i] = m->token;
    atomic_store(&nheld, i + 1);
    return NETVM_AM_DONE;
}

/* --- deferral ------------------------------------------------------------------------ */

#define MAXSEQ 64
static unsigned calls[MAXSEQ];
static _Atomic int n_defer_done;

/* args: seq, times to defer, size; a request is answered with the seq */
static int on_defer(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->nargs == 3 && m->args[0] < MAXSEQ && m->len == m->args[2]);
    uint64_t seq = m->args[0], n = m->args[1];
    if (m->deferred != calls[seq])
        FAILF("message %llu: deferred %u, its handler ran %u times before", (unsigned long long)seq,
              m->deferred, calls[seq]);
    calls[seq]++;
    if (m->len && !m->payload) {
        /* large, first time: it must wait for us without being taken */
        CHECK(m->deferred == 0 && n > 0);
        return NETVM_AM_DEFER;
    }
    CHECK_PATTERN(m->payload, m->len, amt_seed(K_DEFER, m->len, seq));
    if (m->deferred < n)
        return NETVM_AM_DEFER;
    if (m->has_token)
        CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, &m->args[0], 1, NULL, 0));
    atomic_fetch_add(&n_defer_done, 1);
    return NETVM_AM_DONE;
}

/* --- no handler ----------------------------------------------------------------------- */

static _Atomic int n_plain, n_temp;

static void plain_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    (void)ctx;
    CHECK_ST(st, NETVM_OK);
    CHECK_PATTERN(buf, m->len, amt_seed(K_PLAIN, m->len, m->args[0]));
    free(buf);
    atomic_fetch_add(&n_plain, 1);
}

static int on_plain(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK_OK(netvm_am_recv(ctx, m, buf, plain_landed, buf));
        return NETVM_AM_DONE;
    }
    CHECK_PATTERN(m->payload, m->len, amt_seed(K_PLAIN, m->len, m->args[0]));
    atomic_fetch_add(&n_plain, 1);
    return NETVM_AM_DONE;
}

static int on_temp(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)m;
    (void)arg;
    atomic_fetch_add(&n_temp, 1);
    return NETVM_AM_DONE;
}

static void plain(netvm_ctx_t *ctx, uint64_t seq, size_t len)
{
    uint8_t *p = len ? malloc(len) : NULL;
    amt_fill(p, len, amt_seed(K_PLAIN, len, seq));
    CHECK_OK(netvm_am_send(ctx, 1, H_PLAIN, &seq, 1, p, len, NULL));
    free(p);
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    shm_mapped = amt_env("NETVM_SHM_MAPPED", 1) != 0;
    size_t eager = amt_eager(ctx, 1 - rank, &is_tcp);
    CHECK_OK(netvm_am_register(ctx, H_OPS, on_ops, NULL));
    CHECK_OK(netvm_am_register(ctx, H_NOTE, on_note, NULL));
    CHECK_OK(netvm_am_register(ctx, H_HOLD, on_hold, NULL));
    CHECK_OK(netvm_am_register(ctx, H_DEFER, on_defer, NULL));
    CHECK_OK(netvm_am_register(ctx, H_PLAIN, on_plain, NULL));
    CHECK_OK(netvm_am_register(ctx, H_TEMP, on_temp, NULL));
    CHECK_ST(netvm_am_register(ctx, NETVM_AM_MAX_ID, on_temp, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_register(ctx, 0xffffffffu, on_temp, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_register(NULL, 1, on_temp, NULL), NETVM_ERR_INVAL);
    netvm_am_stats_t st0;
    CHECK_ST(netvm_am_stats(ctx, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_stats(NULL, &st0), NETVM_ERR_INVAL);

    void *shp;
    netvm_seg_t *s1, *s2;
    CHECK_OK(netvm_alloc_shared(ctx, SEGLEN, NETVM_RWA, "shared", &shp, &s1));
    CHECK_OK(netvm_export(ctx, plain_mem, SEGLEN, NETVM_RWA, "plain", &s2));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_rseg_t *shared, *plain;
        CHECK_OK(netvm_import(ctx, 0, "shared", &shared));
        CHECK_OK(netvm_import(ctx, 0, "plain", &plain));
        atomic_store(&peer_seg[0], shared);
        atomic_store(&peer_seg[1], plain);
    }
    CHECK_OK(netvm_barrier(ctx));

    /* operations from handlers and continuations */
    const int NOPS = 8;
    if (rank == 0) {
        for (int i = 0; i < NOPS; i++) {
            uint64_t seq = (uint64_t)i, a[3] = { seq, (uint64_t)(i % 2), i < 2 };
            netvm_am_result_t res;
            CHECK_OK(netvm_am_request(ctx, 1, H_OPS, a, 3, NULL, 0, NULL, 0, &res, NULL));
            CHECK(res.status == NETVM_OK && res.nargs == 3 && res.args[0] == seq);
            uint64_t *mem = i % 2 ? plain_mem : shp;
            size_t w = 32 * (seq % (SEGLEN / 32)) / 8;
            CHECK(res.args[1] == amt_arg(seq, 1));
            CHECK(__atomic_load_n(&mem[w], __ATOMIC_SEQ_CST) == amt_arg(seq, 1));
            CHECK(res.args[2] == 0 && __atomic_load_n(&mem[w + 1], __ATOMIC_SEQ_CST) == 5);
            if (i < 2) {
                /* the blocking calls' effects, where they were allowed */
                CHECK(mem[w + 2] == (is_tcp ? 0 : 0x1234567u));
                int native = !is_tcp && shm_mapped && i == 0;
                CHECK(__atomic_load_n(&mem[w + 3], __ATOMIC_SEQ_CST) == (native ? 1u : 0u));
                /* answer the request the handler could not wait for */
                WAIT_UNTIL(ctx, atomic_load(&nheld) > i);
                uint64_t a77 = 77;
                CHECK_OK(netvm_am_reply(ctx, &held[i], NETVM_OK, &a77, 1, NULL, 0));
            }
        }
        WAIT_UNTIL(ctx, atomic_load(&n_notes) == NOPS);
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        WAIT_UNTIL(ctx, atomic_load(&n_held_done) == 2);
        CHECK(atomic_load(&n_ops_done) == NOPS);
    }

    /* deferral */
    size_t dsz[] = { 0, 100, eager, eager + 1, 1u << 20 };
    const int ND = sizeof dsz / sizeof dsz[0];
    uint64_t want_deferred = 0;
    if (rank == 0) {
        uint64_t seq = 0;
        netvm_req_t *rq[16];
        int nrq = 0;
        for (int i = 0; i < ND; i++)
            for (int req = 0; req < 2; req++, seq++) {
                uint64_t n = 1 + seq % 4;
                want_deferred += n;
                uint8_t *p = dsz[i] ? malloc(dsz[i]) : NULL;
                amt_fill(p, dsz[i], amt_seed(K_DEFER, dsz[i], seq));
                uint64_t a[3] = { seq, n, dsz[i] };
                if (req) {
                    static netvm_am_result_t res[16];
                    CHECK_OK(netvm_am_request(ctx, 1, H_DEFER, a, 3, p, dsz[i], NULL, 0, &res[nrq], &rq[nrq]));
                    nrq++;
                } else {
                    CHECK_OK(netvm_am_send(ctx, 1, H_DEFER, a, 3, p, dsz[i], NULL));
                }
                free(p);   /* reusable as soon as the call returns */
            }
        CHECK_OK(netvm_wait_all(rq, (size_t)nrq));
    } else {
        for (uint64_t seq = 0; seq < 2 * (uint64_t)ND; seq++)
            want_deferred += 1 + seq % 4;
        WAIT_UNTIL(ctx, atomic_load(&n_defer_done) == 2 * ND);
        netvm_am_stats_t s = amt_stats(ctx);
        if (s.deferred != want_deferred)
            FAILF("stats.deferred %llu, wanted %llu", (unsigned long long)s.deferred,
                  (unsigned long long)want_deferred);
        for (uint64_t seq = 0; seq < 2 * (uint64_t)ND; seq++)
            CHECK(calls[seq] == 2 + seq % 4);
    }
    CHECK_OK(netvm_barrier(ctx));

    /* no handler */
    if (rank == 0) {
        netvm_am_result_t res;
        uint8_t *big = malloc(1u << 20);
        memset(big, 7, 1u << 20);
        CHECK_OK(netvm_am_request(ctx, 1, H_NONE, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
        CHECK(res.status == NETVM_ERR_NOTFOUND && res.peer == 1 && res.len == 0);
        CHECK_OK(netvm_am_request(ctx, 1, NETVM_AM_MAX_ID - 1, NULL, 0, big, 1u << 20, NULL, 0, &res, NULL));
        CHECK(res.status == NETVM_ERR_NOTFOUND);
        CHECK_OK(netvm_am_send(ctx, 1, H_NONE, NULL, 0, big, 8, NULL));
        CHECK_OK(netvm_am_send(ctx, 1, H_NONE, NULL, 0, big, 1u << 20, NULL));
        free(big);
        plain(ctx, 1, 1u << 20);   /* nothing of the dropped ones is left in the stream */
        CHECK_OK(netvm_am_send(ctx, 1, H_TEMP, NULL, 0, NULL, 0, NULL));
        plain(ctx, 2, 100);
    } else {
        WAIT_UNTIL(ctx, atomic_load(&n_temp) == 1 && atomic_load(&n_plain) == 2);
        CHECK(amt_stats(ctx).dropped_no_handler == 4);
        CHECK_OK(netvm_am_register(ctx, H_TEMP, NULL, NULL));   /* removed */
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        CHECK_OK(netvm_am_send(ctx, 1, H_TEMP, NULL, 0, NULL, 0, NULL));
        netvm_am_result_t res;
        CHECK_OK(netvm_am_request(ctx, 1, H_TEMP, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
        CHECK(res.status == NETVM_ERR_NOTFOUND);
        plain(ctx, 3, 0);
    } else {
        WAIT_UNTIL(ctx, atomic_load(&n_plain) == 3);
        CHECK(amt_stats(ctx).dropped_no_handler == 6 && atomic_load(&n_temp) == 1);
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_am_stats_t s = amt_stats(ctx);
    CHECK(s.dropped_replies == 0);
    CHECK(s.dropped_no_handler == (rank == 1 ? 6u : 0u));
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
