/* NETVM_THREAD_MULTIPLE: several application threads per rank use one
 * context at once. Every thread, against every rank in turn (itself
 * included), on a private (malloc'ed) and a shared (netvm_alloc_shared)
 * segment:
 *  - a blocking put (returns at remote completion), then a request to the
 *    target's handler that checksums the target's own memory: the data is
 *    there when netvm_put returns; then a blocking get of it;
 *  - nonblocking puts in pieces, netvm_wait_all, netvm_flush to that rank,
 *    a nonblocking get, netvm_wait;
 *  - fetch-adds (blocking and nonblocking) and adds on one word of the
 *    target: every old value a rank sees is distinct and each word's final
 *    value is exact;
 *  - one-way active messages with eager and large payloads (the large ones
 *    land through netvm_am_recv), blocking and nonblocking: the receiver
 *    counts them and sums their values exactly;
 *  - requests with eager and large payloads, blocking and nonblocking, whose
 *    handlers (or their netvm_am_recv completions) reply with arguments and
 *    the payload echoed;
 *  - netvm_flush(-1) and netvm_fence now and then;
 * and before all that, every thread of every rank hammers one word of rank
 * 0 with fetch-adds (shared and private memory): the total is exact and
 * no two fetch-adds a rank made saw the same value.
 * Each thread owns its own region at each target, so every byte is checked.
 * argv: threads iterations [level: 1 multiple (default), -1 environment] */
#include "thr.h"

#include <stdlib.h>

#define MAXR     8
#define REGION   8192
#define BIG      (96 * 1024)   /* larger than either link's eager limit */
#define H_SEND   1
#define H_REQ    2
#define H_CHECK  3
#define CTR_W0   0             /* fetch-add 1 (4 per iteration) */
#define CTR_W1   8             /* add 2 (2 per iteration) */
#define CTR_HOT  16            /* rank 0's: every thread's fetch-adds in a tight loop */
#define HOT      400

static netvm_ctx_t *ctx;
static int rank, size, T, ITERS;
static uint8_t *priv, *shared;
static uint64_t *ctr_priv, *ctr_shared;
static netvm_rseg_t *rbuf[MAXR][2], *rctr[MAXR][2];
static _Atomic uint64_t am_count, am_sum;

static const size_t sizes[] = { 8, 64, 1000, 4096, 8192 };

/* what thread t of rank r does in iteration it */
static int target_of(int r, int t, int it) { return (r + 1 + it + t) % size; }
static int kind_of(int it) { return (it / 2) % 2; }   /* 0 private, 1 shared */
static size_t len_of(int t, int it) { return sizes[(size_t)(it + t) % 5]; }
static int large_of(int it) { return it % 4 == 0; }
static uint64_t value_of(int r, int t, int it, int which) { return thr_seed(r, t, it, 100 + which) & 0xffff; }

/* --- handlers --------------------------------------------------------------------------- */

struct landing {
    uint64_t seed, value;
    size_t   len;
    uint8_t *buf;
};

static void send_landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    (void)c;
    (void)msg;
    struct landing *l = arg;
    CHECK_ST(st, NETVM_OK);
    long d = thr_diff(l->buf, l->len, l->seed);
    if (d >= 0)
        FAILF("large message from rank %d: byte %ld differs", msg->peer, d);
    atomic_fetch_add(&am_sum, l->value);
    atomic_fetch_add(&am_count, 1);
    free(l->buf);
    free(l);
}

/* one-way: args { sender, value, len, seed } */
static int on_send(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 4 && !msg->has_token);
    CHECK(msg->peer == (int)msg->args[0]);
    CHECK(msg->len == msg->args[2]);
    if (msg->payload || !msg->len) {
        long d = thr_diff(msg->payload, msg->len, msg->args[3]);
        if (d >= 0)
            FAILF("message from rank %d: byte %ld differs", msg->peer, d);
        atomic_fetch_add(&am_sum, msg->args[1]);
        atomic_fetch_add(&am_count, 1);
        return NETVM_AM_DONE;
    }
    struct landing *l = malloc(sizeof *l);
    CHECK(l);
    l->seed = msg->args[3];
    l->value = msg->args[1];
    l->len = msg->len;
    l->buf = malloc(msg->len);
    CHECK(l->buf);
    CHECK_OK(netvm_am_recv(c, msg, l->buf, send_landed, l));
    return NETVM_AM_DONE;
}

static void answer(netvm_ctx_t *c, netvm_am_msg_t *msg, const void *payload)
{
    uint64_t a[3] = { msg->args[0] * 3 + 1, (uint64_t)rank, thr_sum(payload, msg->len) };
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, a, 3, payload, msg->len));
}

static void req_landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    CHECK_ST(st, NETVM_OK);
    CHECK(msg->has_token);
    answer(c, msg, arg);   /* from the landing's completion, not the handler */
    free(arg);
}

/* request: args { x, seed }; answered with { 3x+1, rank, checksum } and the payload */
static int on_req(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->has_token && msg->nargs == 2);
    if (msg->payload || !msg->len) {
        long d = thr_diff(msg->payload, msg->len, msg->args[1]);
        if (d >= 0)
            FAILF("request from rank %d: byte %ld differs", msg->peer, d);
        answer(c, msg, msg->payload);
        return NETVM_AM_DONE;
    }
    void *buf = malloc(msg->len);
    CHECK(buf);
    CHECK_OK(netvm_am_recv(c, msg, buf, req_landed, buf));
    return NETVM_AM_DONE;
}

/* request: args { src rank, thread, kind, len }: the checksum of that region here */
static int on_check(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->has_token && msg->nargs == 4);
    const uint8_t *base = msg->args[2] ? shared : priv;
    size_t off = (size_t)(msg->args[0] * (uint64_t)T + msg->args[1]) * REGION;
    uint64_t s = thr_sum(base + off, (size_t)msg->args[3]);
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, &s, 1, NULL, 0));
    return NETVM_AM_DONE;
}

/* --- the threads ------------------------------------------------------------------------ */

struct olds {
    uint64_t *v[MAXR][2];
    size_t    n[MAXR][2];
    uint64_t  v_hot[HOT];
    size_t    n_hot;
};
static struct olds *olds_of;

static void *worker(void *argp)
{
    int t = (int)(intptr_t)argp;
    uint8_t *src = malloc(REGION), *dst = malloc(REGION);
    uint8_t *big = malloc(BIG), *rb = malloc(BIG);
    CHECK(src && dst && big && rb);
    struct olds *o = &olds_of[t];
    size_t off = (size_t)(rank * T + t) * REGION;
    /* everybody's fetch-adds on one word of rank 0, shared and private,
     * blocking and in batches */
    uint64_t *hot = malloc(sizeof *hot * HOT);
    CHECK(hot);
    for (int i = 0; i < HOT; i += 4) {
        netvm_req_t *hq[3];
        CHECK_OK(netvm_atomic(ctx, rctr[0][1], CTR_HOT, NETVM_AOP_FADD, 1, 0, &hot[i]));
        for (int k = 1; k < 4; k++)
            CHECK_OK(netvm_atomic_nb(ctx, rctr[0][1], CTR_HOT, NETVM_AOP_FADD, 1, 0, &hot[i + k], &hq[k - 1]));
        CHECK_OK(netvm_wait_all(hq, 3));
        CHECK_OK(netvm_atomic(ctx, rctr[0][0], CTR_HOT, NETVM_AOP_ADD, 1, 0, NULL));
    }
    for (int i = 0; i < HOT; i++)
        o->v_hot[o->n_hot++] = hot[i];
    free(hot);
    for (int it = 0; it < ITERS; it++) {
        int q = target_of(rank, t, it), k = kind_of(it);
        size_t len = len_of(t, it);
        netvm_rseg_t *rs = rbuf[q][k], *rc = rctr[q][k];

        /* a blocking put is visible at the target when it returns */
        uint64_t seed = thr_seed(rank, t, it, 1);
        thr_fill(src, len, seed);
        CHECK_OK(netvm_put(ctx, rs, off, src, len, 0));
        uint64_t a4[4] = { (uint64_t)rank, (uint64_t)t, (uint64_t)k, len };
        netvm_am_result_t res;
        CHECK_OK(netvm_am_request(ctx, q, H_CHECK, a4, 4, NULL, 0, NULL, 0, &res, NULL));
        if (res.status != NETVM_OK || res.nargs != 1 || res.peer != q || res.len != 0)
            FAILF("thread %d it %d: check request to rank %d answered status %d nargs %u peer %d len %zu", t, it, q,
                  (int)res.status, res.nargs, res.peer, res.len);
        if (res.args[0] != thr_sum(src, len))
            FAILF("thread %d it %d: rank %d's region does not hold the put's %zu bytes", t, it, q, len);
        memset(dst, 0, len);
        CHECK_OK(netvm_get(ctx, dst, rs, off, len, 0));
        if (thr_diff(dst, len, seed) >= 0)
            FAILF("thread %d it %d: get from rank %d differs", t, it, q);

        /* nonblocking puts in pieces, a flush, a nonblocking get */
        seed = thr_seed(rank, t, it, 2);
        thr_fill(src, len, seed);
        netvm_req_t *rq[4];
        size_t piece = len / 4;
        for (int i = 0; i < 4; i++) {
            size_t po = piece * (size_t)i, pl = i == 3 ? len - po : piece;
            CHECK_OK(netvm_put_nb(ctx, rs, off + po, src + po, pl, 0, &rq[i]));
        }
        CHECK_OK(netvm_wait_all(rq, 4));
        if (it % 8 == 3)
            CHECK_OK(netvm_fence(ctx, q));
        CHECK_OK(netvm_flush(ctx, q));
        memset(dst, 0, len);
        netvm_req_t *gq;
        CHECK_OK(netvm_get_nb(ctx, dst, rs, off, len, 0, &gq));
        CHECK_OK(netvm_wait(&gq));
        if (thr_diff(dst, len, seed) >= 0)
            FAILF("thread %d it %d: nonblocking get from rank %d differs", t, it, q);

        /* atomics: 4 fetch-adds of 1 on W0, 2 adds of 2 on W1 */
        uint64_t old[4];
        CHECK_OK(netvm_atomic(ctx, rc, CTR_W0, NETVM_AOP_FADD, 1, 0, &old[0]));
        netvm_req_t *aq[4];
        for (int i = 1; i < 4; i++)
            CHECK_OK(netvm_atomic_nb(ctx, rc, CTR_W0, NETVM_AOP_FADD, 1, 0, &old[i], &aq[i - 1]));
        CHECK_OK(netvm_atomic_nb(ctx, rc, CTR_W1, NETVM_AOP_ADD, 2, 0, NULL, &aq[3]));
        CHECK_OK(netvm_wait_all(aq, 4));
        CHECK_OK(netvm_atomic(ctx, rc, CTR_W1, NETVM_AOP_ADD, 2, 0, NULL));
        for (int i = 0; i < 4; i++)
            o->v[q][k][o->n[q][k]++] = old[i];

        /* one-way messages: eager, blocking; large every 4th (alternately
         * blocking and nonblocking) */
        uint64_t ms = thr_seed(rank, t, it, 3);
        thr_fill(src, 100, ms);
        uint64_t sa[4] = { (uint64_t)rank, value_of(rank, t, it, 0), 100, ms };
        CHECK_OK(netvm_am_send(ctx, q, H_SEND, sa, 4, src, 100, NULL));
        if (large_of(it)) {
            uint64_t bs = thr_seed(rank, t, it, 4);
            thr_fill(big, BIG, bs);
            uint64_t ba[4] = { (uint64_t)rank, value_of(rank, t, it, 1), BIG, bs };
            if (it % 8 == 0) {
                CHECK_OK(netvm_am_send(ctx, q, H_SEND, ba, 4, big, BIG, NULL));
            } else {
                netvm_req_t *sq;
                CHECK_OK(netvm_am_send(ctx, q, H_SEND, ba, 4, big, BIG, &sq));
                CHECK_OK(netvm_wait(&sq));
            }
        }

        /* requests: eager blocking; large nonblocking every 4th */
        uint64_t x = (uint64_t)it * 1000 + (uint64_t)t, rsd = thr_seed(rank, t, it, 5);
        thr_fill(src, 200, rsd);
        uint64_t ra[2] = { x, rsd };
        memset(rb, 0, 200);
        CHECK_OK(netvm_am_request(ctx, q, H_REQ, ra, 2, src, 200, rb, BIG, &res, NULL));
        CHECK(res.status == NETVM_OK && res.nargs == 3 && res.peer == q && res.len == 200);
        CHECK(res.args[0] == 3 * x + 1 && res.args[1] == (uint64_t)q && res.args[2] == thr_sum(src, 200));
        CHECK(thr_diff(rb, 200, rsd) < 0);
        if (large_of(it)) {
            rsd = thr_seed(rank, t, it, 6);
            thr_fill(big, BIG, rsd);
            ra[1] = rsd;
            memset(rb, 0, BIG);
            netvm_req_t *req;
            netvm_am_result_t lres;
            CHECK_OK(netvm_am_request(ctx, q, H_REQ, ra, 2, big, BIG, rb, BIG, &lres, &req));
            CHECK_OK(netvm_wait(&req));
            CHECK(lres.status == NETVM_OK && lres.nargs == 3 && lres.peer == q && lres.len == BIG);
            CHECK(lres.args[0] == 3 * x + 1 && lres.args[2] == thr_sum(big, BIG));
            CHECK(thr_diff(rb, BIG, rsd) < 0);
        }
        if (it % 8 == 7)
            CHECK_OK(netvm_flush(ctx, -1));
    }
    free(src);
    free(dst);
    free(big);
    free(rb);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    T = argc > 1 ? atoi(argv[1]) : 4;
    ITERS = argc > 2 ? atoi(argv[2]) : 64;
    int level = argc > 3 ? atoi(argv[3]) : NETVM_THREAD_MULTIPLE;
    ctx = thr_init(level);
    rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    CHECK(size <= MAXR && T > 0 && ITERS > 0);
    CHECK(netvm_thread_level(ctx) == NETVM_THREAD_MULTIPLE);

    size_t blen = (size_t)size * (size_t)T * REGION;
    netvm_seg_t *segs[4];
    priv = aligned_alloc(4096, (blen + 4095) & ~(size_t)4095);
    CHECK(priv);
    memset(priv, 0, blen);
    CHECK_OK(netvm_export(ctx, priv, blen, NETVM_RW, "mt-priv", &segs[0]));
    void *p;
    CHECK_OK(netvm_alloc_shared(ctx, blen, NETVM_RW, "mt-shared", &p, &segs[1]));
    shared = p;
    ctr_priv = aligned_alloc(4096, 4096);
    CHECK(ctr_priv);
    memset(ctr_priv, 0, 4096);
    CHECK_OK(netvm_export(ctx, ctr_priv, 4096, NETVM_RWA, "mt-ctr-priv", &segs[2]));
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "mt-ctr-shared", &p, &segs[3]));
    ctr_shared = p;
    CHECK_OK(netvm_am_register(ctx, H_SEND, on_send, NULL));
    CHECK_OK(netvm_am_register(ctx, H_REQ, on_req, NULL));
    CHECK_OK(netvm_am_register(ctx, H_CHECK, on_check, NULL));
    CHECK_OK(netvm_barrier(ctx));
    for (int q = 0; q < size; q++) {
        CHECK_OK(netvm_import(ctx, q, "mt-priv", &rbuf[q][0]));
        CHECK_OK(netvm_import(ctx, q, "mt-shared", &rbuf[q][1]));
        CHECK_OK(netvm_import(ctx, q, "mt-ctr-priv", &rctr[q][0]));
        CHECK_OK(netvm_import(ctx, q, "mt-ctr-shared", &rctr[q][1]));
    }

    olds_of = calloc((size_t)T, sizeof *olds_of);
    CHECK(olds_of);
    for (int t = 0; t < T; t++)
        for (int q = 0; q < size; q++)
            for (int k = 0; k < 2; k++) {
                olds_of[t].v[q][k] = malloc(sizeof(uint64_t) * 4 * (size_t)ITERS);
                CHECK(olds_of[t].v[q][k]);
            }
    pthread_t th[128];
    CHECK(T <= 128);
    double t0 = now_s();
    for (int t = 0; t < T; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < T; t++)
        CHECK(pthread_join(th[t], NULL) == 0);
    double t1 = now_s();
    CHECK_OK(netvm_flush(ctx, -1));

    /* every old value this rank saw on a word is distinct */
    for (int q = 0; q <= size; q++)
        for (int k = 0; k < 2; k++) {
            if (q == size && k == 1)
                break;   /* q == size: rank 0's hot word */
            size_t n = 0;
            for (int t = 0; t < T; t++)
                n += q == size ? olds_of[t].n_hot : olds_of[t].n[q][k];
            uint64_t *all = malloc(sizeof *all * (n ? n : 1));
            CHECK(all);
            n = 0;
            for (int t = 0; t < T; t++) {
                size_t m = q == size ? olds_of[t].n_hot : olds_of[t].n[q][k];
                memcpy(all + n, q == size ? olds_of[t].v_hot : olds_of[t].v[q][k], sizeof *all * m);
                n += m;
            }
            qsort(all, n, sizeof *all, cmp_u64);
            for (size_t i = 1; i < n; i++)
                if (all[i] == all[i - 1])
                    FAILF("fetch-add on rank %d's %s word returned %llu twice", q == size ? 0 : q,
                          q == size ? "hot" : k ? "shared" : "private", (unsigned long long)all[i]);
            free(all);
        }
    CHECK_OK(netvm_barrier(ctx));

    /* what every rank's threads did to this one */
    uint64_t want_msgs = 0, want_sum = 0, want_ops[2] = { 0, 0 };
    for (int r = 0; r < size; r++)
        for (int t = 0; t < T; t++)
            for (int it = 0; it < ITERS; it++) {
                if (target_of(r, t, it) != rank)
                    continue;
                want_ops[kind_of(it)]++;
                want_msgs++;
                want_sum += value_of(r, t, it, 0);
                if (large_of(it)) {
                    want_msgs++;
                    want_sum += value_of(r, t, it, 1);
                }
            }
    thr_wait_count(ctx, &am_count, want_msgs, "one-way messages received");
    CHECK(atomic_load(&am_sum) == want_sum);
    uint64_t *ctr[2] = { ctr_priv, ctr_shared };
    for (int k = 0; k < 2; k++) {
        uint64_t w0 = __atomic_load_n(&ctr[k][CTR_W0 / 8], __ATOMIC_SEQ_CST);
        uint64_t w1 = __atomic_load_n(&ctr[k][CTR_W1 / 8], __ATOMIC_SEQ_CST);
        if (w0 != 4 * want_ops[k] || w1 != 4 * want_ops[k])
            FAILF("%s counters: %llu and %llu, wanted %llu each", k ? "shared" : "private",
                  (unsigned long long)w0, (unsigned long long)w1, (unsigned long long)(4 * want_ops[k]));
    }
    if (rank == 0)
        for (int k = 0; k < 2; k++) {
            uint64_t w = __atomic_load_n(&ctr[k][CTR_HOT / 8], __ATOMIC_SEQ_CST);
            uint64_t want = (uint64_t)size * (uint64_t)T * (k ? HOT : HOT / 4);
            if (w != want)
                FAILF("rank 0's hot %s word: %llu, wanted %llu", k ? "shared" : "private", (unsigned long long)w,
                      (unsigned long long)want);
        }
    netvm_am_stats_t st;
    CHECK_OK(netvm_am_stats(ctx, &st));
    CHECK(st.dropped_replies == 0 && st.dropped_no_handler == 0);
    CHECK_OK(netvm_barrier(ctx));

    for (int q = 0; q < size; q++)
        for (int k = 0; k < 2; k++) {
            CHECK_OK(netvm_release(rbuf[q][k]));
            CHECK_OK(netvm_release(rctr[q][k]));
        }
    for (int t = 0; t < T; t++)
        for (int q = 0; q < size; q++)
            for (int k = 0; k < 2; k++)
                free(olds_of[t].v[q][k]);
    free(olds_of);
    if (rank == 0) {
        netvm_peer_info_t pi;
        CHECK_OK(netvm_peer_info(ctx, size > 1 ? 1 : 0, &pi));
        printf("mt_ops: %d ranks x %d threads x %d iterations in %.2f s (link %s)\n", size, T, ITERS, t1 - t0,
               pi.link);
    }
    CHECK_OK(netvm_finalize(ctx));
    free(priv);
    free(ctr_priv);
    return 0;
}
