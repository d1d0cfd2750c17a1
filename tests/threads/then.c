/* Request continuations (netvm_req_then) that issue further operations.
 *
 * A. A chain driven entirely by continuations: each rank runs N steps
 *    against the next rank; a step is a nonblocking put of the step's
 *    pattern, a nonblocking get of it back (checked), a nonblocking
 *    fetch-add on a word only this chain adds to (the old value checked:
 *    exactly the steps before) and a nonblocking active-message request
 *    (its answer checked); each operation's continuation issues the next
 *    one. The fetch-add runs at the target (private memory: core's
 *    emulation, so its continuation runs later, on the progress thread or
 *    a thread inside netvm, on every link). Every continuation runs
 *    exactly once, with NETVM_OK. In it, the blocking calls fail with
 *    NETVM_ERR_STATE (netvm_flush, netvm_barrier, a blocking request, a
 *    blocking get or atomic that would wait for the target) and
 *    netvm_req_then on an already complete (NULL) request runs at once.
 *    The main thread either does not call netvm while it waits
 *    ("thread": the progress thread runs the continuations) or polls with
 *    netvm_progress ("poll"; the only way without a progress thread).
 * B. Handlers that issue a nonblocking operation and answer from its
 *    continuation: a fetch-add on the requester's memory (answered with
 *    the old value: the running sum of the requests), a get of the
 *    requester's memory (answered with the bytes as the reply's payload),
 *    and a fetch-add on a segment the requester has unexported (the
 *    continuation sees NETVM_ERR_REVOKED and answers with it).
 * C. ("concurrent") While A runs, the main thread issues its own blocking
 *    puts, gets and atomics on other memory of the same peer and checks
 *    them: the progress thread and the application thread issue
 *    operations at once, which every thread level allows.
 * argv: level (-1: environment) chain-length wait-mode [concurrent] */
#include "thr.h"

#include <stdlib.h>

#define H_ECHO     1   /* reply { 2k+1 } */
#define H_FADD     2   /* fetch-add k on the requester's word, reply { old } from the continuation */
#define H_GETBACK  3   /* get the requester's bytes, reply with them from the continuation */
#define H_DEAD     4   /* fetch-add on the requester's unexported segment: reply with the status */
#define SLOTS      16
#define PIECE      1024

static netvm_ctx_t *ctx;
static int rank, size, level;
static uint8_t *data;           /* private, SLOTS * PIECE (+ the concurrent part) */
static uint64_t *words;         /* private, atomics: word r is rank r's chain's */
static uint64_t dead_words[8];
/* Atomic because handlers on the progress thread read them: the imports
 * happen before the peers send, but through the other processes, which
 * ThreadSanitizer cannot see. */
static netvm_rseg_t **_Atomic rdata, **_Atomic rwords, **_Atomic rdead;
static pthread_t main_thread;

/* --- A. the chain --------------------------------------------------------------------- */

struct chain {
    int      q, n, step;
    uint8_t  src[PIECE], back[PIECE];
    uint64_t old;
    netvm_am_result_t res;
    _Atomic unsigned ran[4];     /* continuations of the current step, by phase */
    _Atomic uint64_t total;      /* continuations run */
    _Atomic uint64_t on_main;    /* ... on the main thread */
    _Atomic int      done;
    int      checked_state;
};

static void phase_put(struct chain *c);
static void after_put(netvm_ctx_t *x, netvm_status_t st, void *arg);
static void after_get(netvm_ctx_t *x, netvm_status_t st, void *arg);
static void after_fadd(netvm_ctx_t *x, netvm_status_t st, void *arg);
static void after_req(netvm_ctx_t *x, netvm_status_t st, void *arg);

static void ran(struct chain *c, int phase, netvm_status_t st)
{
    if (st != NETVM_OK)
        FAILF("chain step %d phase %d: continuation with status %d (%s)", c->step, phase, (int)st,
              netvm_strerror(st));
    if (atomic_fetch_add(&c->ran[phase], 1) != 0)
        FAILF("chain step %d phase %d: a continuation ran twice", c->step, phase);
    atomic_fetch_add(&c->total, 1);
    if (pthread_equal(pthread_self(), main_thread))
        atomic_fetch_add(&c->on_main, 1);
}

/* Inside a continuation: nothing that would block. */
static void check_no_blocking(struct chain *c)
{
    int q = c->q;
    uint64_t v;
    CHECK_ST(netvm_flush(ctx, q), NETVM_ERR_STATE);
    CHECK_ST(netvm_flush(ctx, -1), NETVM_ERR_STATE);
    CHECK_ST(netvm_fence(ctx, q), NETVM_ERR_STATE);
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_STATE);
    CHECK_ST(netvm_am_request(ctx, q, H_ECHO, &v, 1, NULL, 0, NULL, 0, NULL, NULL), NETVM_ERR_STATE);
    /* the atomic on private memory runs at the target: it would wait */
    CHECK_ST(netvm_atomic(ctx, rwords[q], 0, NETVM_AOP_FADD, 0, 0, &v), NETVM_ERR_STATE);
    netvm_peer_info_t pi;
    CHECK_OK(netvm_peer_info(ctx, q, &pi));
    if (strcmp(pi.link, "tcp") == 0)
        CHECK_ST(netvm_get(ctx, &v, rdata[q], 0, 8, 0), NETVM_ERR_STATE);
    netvm_req_t *none = NULL;
    CHECK_ST(netvm_req_then(ctx, &none, NULL, NULL), NETVM_ERR_INVAL);
}

static void set_flag(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    (void)x;
    CHECK_OK(st);
    *(int *)arg += 1;
}

static void next_step(struct chain *c)
{
    c->step++;
    if (c->step == c->n) {
        atomic_store(&c->done, 1);
        return;
    }
    for (int i = 0; i < 4; i++)
        atomic_store(&c->ran[i], 0);
    phase_put(c);
}

static void phase_put(struct chain *c)
{
    thr_fill(c->src, PIECE, thr_seed(rank, 7, (uint64_t)c->step, 1));
    netvm_req_t *r;
    CHECK_OK(netvm_put_nb(ctx, rdata[c->q], (size_t)(rank * SLOTS + c->step % SLOTS) * PIECE, c->src, PIECE, 0, &r));
    CHECK_OK(netvm_req_then(ctx, &r, after_put, c));
    CHECK(r == NULL);
}

static void after_put(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct chain *c = arg;
    ran(c, 0, st);
    if (c->step == 0) {
        check_no_blocking(c);   /* (run at once, from the first netvm_req_then) */
        netvm_req_t *none = NULL;
        int flag = 0;
        CHECK_OK(netvm_req_then(x, &none, set_flag, &flag));
        CHECK(flag == 1);   /* ran at once, in this thread */
    }
    memset(c->back, 0, PIECE);
    netvm_req_t *r;
    CHECK_OK(netvm_get_nb(x, c->back, rdata[c->q], (size_t)(rank * SLOTS + c->step % SLOTS) * PIECE, PIECE, 0, &r));
    CHECK_OK(netvm_req_then(x, &r, after_get, c));
}

static void after_get(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct chain *c = arg;
    ran(c, 1, st);
    if (thr_diff(c->back, PIECE, thr_seed(rank, 7, (uint64_t)c->step, 1)) >= 0)
        FAILF("chain step %d: the get did not bring back what the put wrote", c->step);
    c->old = ~0ull;
    netvm_req_t *r;
    CHECK_OK(netvm_atomic_nb(x, rwords[c->q], (size_t)rank * 8, NETVM_AOP_FADD, 1, 0, &c->old, &r));
    CHECK_OK(netvm_req_then(x, &r, after_fadd, c));
}

static void after_fadd(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct chain *c = arg;
    ran(c, 2, st);
    if (!c->checked_state) {
        /* the first continuation that ran when its operation completed
         * (the fetch-add runs at the target) */
        c->checked_state = 1;
        check_no_blocking(c);
    }
    if (c->old != (uint64_t)c->step)
        FAILF("chain step %d: fetch-add returned %llu", c->step, (unsigned long long)c->old);
    uint64_t k = (uint64_t)c->step;
    memset(&c->res, 0, sizeof c->res);
    netvm_req_t *r;
    CHECK_OK(netvm_am_request(x, c->q, H_ECHO, &k, 1, NULL, 0, NULL, 0, &c->res, &r));
    CHECK_OK(netvm_req_then(x, &r, after_req, c));
}

static void after_req(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    (void)x;
    struct chain *c = arg;
    ran(c, 3, st);
    if (c->res.status != NETVM_OK || c->res.nargs != 1 || c->res.args[0] != 2 * (uint64_t)c->step + 1 ||
        c->res.peer != c->q)
        FAILF("chain step %d: answer status %d nargs %u arg %llu peer %d", c->step, (int)c->res.status,
              c->res.nargs, (unsigned long long)c->res.args[0], c->res.peer);
    next_step(c);
}

/* --- handlers ------------------------------------------------------------------------- */

static int on_echo(netvm_ctx_t *x, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    uint64_t v = msg->args[0] * 2 + 1;
    CHECK_OK(netvm_am_reply(x, &msg->token, NETVM_OK, &v, 1, NULL, 0));
    return NETVM_AM_DONE;
}

/* Part B's handlers and continuations that finished here; main waits for
 * them before releasing the imports they use (the requester's answer and
 * the barrier order them too, but through other processes, which
 * ThreadSanitizer cannot see) */
static _Atomic uint64_t served;

struct pending {
    netvm_am_token_t token;
    uint64_t old;
    uint8_t  buf[PIECE];
    size_t   len;
};

static void fadd_done(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct pending *p = arg;
    CHECK_OK(st);
    CHECK_OK(netvm_am_reply(x, &p->token, NETVM_OK, &p->old, 1, NULL, 0));
    free(p);
    atomic_fetch_add(&served, 1);
}

static int on_fadd(netvm_ctx_t *x, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    struct pending *p = malloc(sizeof *p);
    CHECK(p);
    p->token = msg->token;
    netvm_req_t *r;
    netvm_status_t st = netvm_atomic_nb(x, rwords[msg->peer], 8 * 8, NETVM_AOP_FADD, msg->args[0], 0, &p->old, &r);
    if (st == NETVM_ERR_AGAIN) {
        free(p);
        return NETVM_AM_DEFER;
    }
    CHECK_OK(st);
    CHECK_OK(netvm_req_then(x, &r, fadd_done, p));
    return NETVM_AM_DONE;
}

static void get_done(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct pending *p = arg;
    CHECK_OK(st);
    CHECK_OK(netvm_am_reply(x, &p->token, NETVM_OK, NULL, 0, p->buf, p->len));
    free(p);
    atomic_fetch_add(&served, 1);
}

static int on_getback(netvm_ctx_t *x, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    struct pending *p = malloc(sizeof *p);
    CHECK(p);
    p->token = msg->token;
    p->len = (size_t)msg->args[1];
    netvm_req_t *r;
    netvm_status_t st = netvm_get_nb(x, p->buf, rdata[msg->peer], (size_t)msg->args[0], p->len, 0, &r);
    if (st == NETVM_ERR_AGAIN) {
        free(p);
        return NETVM_AM_DEFER;
    }
    CHECK_OK(st);
    CHECK_OK(netvm_req_then(x, &r, get_done, p));
    return NETVM_AM_DONE;
}

static void dead_done(netvm_ctx_t *x, netvm_status_t st, void *arg)
{
    struct pending *p = arg;
    CHECK_OK(netvm_am_reply(x, &p->token, st, NULL, 0, NULL, 0));
    free(p);
    atomic_fetch_add(&served, 1);
}

static int on_dead(netvm_ctx_t *x, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    struct pending *p = malloc(sizeof *p);
    CHECK(p);
    p->token = msg->token;
    netvm_req_t *r;
    netvm_status_t st = netvm_atomic_nb(x, rdead[msg->peer], 0, NETVM_AOP_FADD, 1, 0, &p->old, &r);
    if (st != NETVM_OK) {
        /* refused at once: that is the status too (the continuation of a
         * NULL request sees NETVM_OK, so answer here) */
        CHECK_OK(netvm_am_reply(x, &p->token, st, NULL, 0, NULL, 0));
        free(p);
        atomic_fetch_add(&served, 1);
        return NETVM_AM_DONE;
    }
    CHECK(r != NULL);
    CHECK_OK(netvm_req_then(x, &r, dead_done, p));
    return NETVM_AM_DONE;
}

/* --- C. the main thread's own operations meanwhile ------------------------------------------ */

static void concurrent_ops(int q, int round)
{
    uint8_t src[PIECE], back[PIECE];
    uint64_t seed = thr_seed(rank, 9, (uint64_t)round, 2);
    size_t off = (size_t)(size * SLOTS + rank) * PIECE;
    thr_fill(src, PIECE, seed);
    CHECK_OK(netvm_put(ctx, rdata[q], off, src, PIECE, 0));
    memset(back, 0, PIECE);
    CHECK_OK(netvm_get(ctx, back, rdata[q], off, PIECE, 0));
    CHECK(thr_diff(back, PIECE, seed) < 0);
    uint64_t old;
    CHECK_OK(netvm_atomic(ctx, rwords[q], (size_t)(16 + rank) * 8, NETVM_AOP_FADD, 1, 0, &old));
    CHECK(old == (uint64_t)round);
}

int main(int argc, char **argv)
{
    level = argc > 1 ? atoi(argv[1]) : -1;
    int n = argc > 2 ? atoi(argv[2]) : 500;
    int poll = argc > 3 && strcmp(argv[3], "poll") == 0;
    int concurrent = argc > 4 && strcmp(argv[4], "concurrent") == 0;
    main_thread = pthread_self();
    ctx = thr_init(level);
    rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    CHECK(size >= 2);
    if (level >= 0)
        CHECK(netvm_thread_level(ctx) == level);

    size_t dlen = (size_t)(size * SLOTS + size) * PIECE;
    data = aligned_alloc(4096, (dlen + 4095) & ~(size_t)4095);
    words = aligned_alloc(4096, 4096);
    CHECK(data && words);
    memset(data, 0, dlen);
    memset(words, 0, 4096);
    netvm_seg_t *sd, *sw, *sdead;
    CHECK_OK(netvm_export(ctx, data, dlen, NETVM_RW, "then-data", &sd));
    CHECK_OK(netvm_export(ctx, words, 4096, NETVM_RWA, "then-words", &sw));
    CHECK_OK(netvm_export(ctx, dead_words, sizeof dead_words, NETVM_RWA, "then-dead", &sdead));
    CHECK_OK(netvm_am_register(ctx, H_ECHO, on_echo, NULL));
    CHECK_OK(netvm_am_register(ctx, H_FADD, on_fadd, NULL));
    CHECK_OK(netvm_am_register(ctx, H_GETBACK, on_getback, NULL));
    CHECK_OK(netvm_am_register(ctx, H_DEAD, on_dead, NULL));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t **imp_data = calloc((size_t)size, sizeof *imp_data);
    netvm_rseg_t **imp_words = calloc((size_t)size, sizeof *imp_words);
    netvm_rseg_t **imp_dead = calloc((size_t)size, sizeof *imp_dead);
    CHECK(imp_data && imp_words && imp_dead);
    for (int q = 0; q < size; q++) {
        CHECK_OK(netvm_import(ctx, q, "then-data", &imp_data[q]));
        CHECK_OK(netvm_import(ctx, q, "then-words", &imp_words[q]));
        CHECK_OK(netvm_import(ctx, q, "then-dead", &imp_dead[q]));
    }
    atomic_store(&rdata, imp_data);
    atomic_store(&rwords, imp_words);
    atomic_store(&rdead, imp_dead);
    CHECK_OK(netvm_barrier(ctx));

    /* A (and C) */
    struct chain *c = calloc(1, sizeof *c);
    CHECK(c);
    c->q = (rank + 1) % size;
    c->n = n;
    double t0 = now_s(), end = t0 + THR_HANG_S;
    phase_put(c);
    int rounds = 0;
    while (!atomic_load(&c->done)) {
        if (concurrent && rounds < n)
            concurrent_ops(c->q, rounds++);
        else if (poll)
            netvm_progress(ctx);
        else
            sched_yield();   /* the progress thread runs the chain */
        if (now_s() > end)
            FAILF("the chain stopped at step %d", c->step);
    }
    double t1 = now_s();
    CHECK(atomic_load(&c->total) == 4 * (uint64_t)n);
    if (!poll && !concurrent && atomic_load(&c->on_main) > 4 * 8)
        FAILF("%llu continuations ran on the main thread, which did not call netvm while it waited",
              (unsigned long long)atomic_load(&c->on_main));
    while (concurrent && rounds < n)
        concurrent_ops(c->q, rounds++);
    CHECK_OK(netvm_flush(ctx, -1));
    CHECK_OK(netvm_barrier(ctx));
    /* what the chain of the rank before did here */
    int prev = (rank + size - 1) % size;
    CHECK(__atomic_load_n(&words[prev], __ATOMIC_SEQ_CST) == (uint64_t)n);
    for (int k = n > SLOTS ? n - SLOTS : 0; k < n; k++)
        if (thr_diff(data + (size_t)(prev * SLOTS + k % SLOTS) * PIECE, PIECE, thr_seed(prev, 7, (uint64_t)k, 1)) >= 0)
            FAILF("rank %d's chain step %d: its data is not here", prev, k);
    if (concurrent)
        CHECK(__atomic_load_n(&words[16 + prev], __ATOMIC_SEQ_CST) == (uint64_t)n);
    CHECK_OK(netvm_barrier(ctx));

    /* B: every rank asks the next one, whose handlers answer from continuations */
    int q = (rank + 1) % size;
    uint64_t sum = 0;
    for (int k = 1; k <= 200; k++) {
        netvm_am_result_t res;
        uint64_t a = (uint64_t)k;
        CHECK_OK(netvm_am_request(ctx, q, H_FADD, &a, 1, NULL, 0, NULL, 0, &res, NULL));
        if (res.status != NETVM_OK || res.nargs != 1 || res.args[0] != sum)
            FAILF("fetch-add request %d: status %d nargs %u old %llu, wanted %llu", k, (int)res.status, res.nargs,
                  (unsigned long long)res.args[0], (unsigned long long)sum);
        sum += (uint64_t)k;
        /* the get: the handler reads this rank's bytes and sends them back */
        size_t off = (size_t)((k % SLOTS) + size * SLOTS) * PIECE / 2, len = 1 + (size_t)k * 5 % PIECE;
        thr_fill(data + off, len, thr_seed(rank, 11, (uint64_t)k, 0));
        uint8_t back[PIECE];
        memset(back, 0, sizeof back);
        uint64_t ga[2] = { off, len };
        CHECK_OK(netvm_am_request(ctx, q, H_GETBACK, ga, 2, NULL, 0, back, sizeof back, &res, NULL));
        CHECK(res.status == NETVM_OK && res.len == len && res.peer == q);
        CHECK(thr_diff(back, len, thr_seed(rank, 11, (uint64_t)k, 0)) < 0);
    }
    CHECK(__atomic_load_n(&words[8], __ATOMIC_SEQ_CST) == sum);
    CHECK_OK(netvm_unexport(sdead));
    netvm_am_result_t res;
    CHECK_OK(netvm_am_request(ctx, q, H_DEAD, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
    if (res.status != NETVM_ERR_REVOKED)
        FAILF("an atomic on an unexported segment: the handler's continuation saw %d (%s)", (int)res.status,
              netvm_strerror(res.status));
    thr_wait_count(ctx, &served, 2 * 200 + 1, "requests answered from continuations");
    CHECK_OK(netvm_barrier(ctx));

    if (rank == 0)
        printf("then: %d ranks, chains of %d steps (%.3f s, %llu of %llu continuations on the main thread), "
               "level %d, %s%s\n", size, n, t1 - t0, (unsigned long long)atomic_load(&c->on_main),
               (unsigned long long)atomic_load(&c->total), netvm_thread_level(ctx), poll ? "poll" : "thread",
               concurrent ? ", concurrent" : "");
    for (int k = 0; k < size; k++) {
        CHECK_OK(netvm_release(rdata[k]));
        CHECK_OK(netvm_release(rwords[k]));
        CHECK_OK(netvm_release(rdead[k]));
    }
    free(c);
    CHECK_OK(netvm_finalize(ctx));
    free(data);
    free(words);
    return 0;
}
