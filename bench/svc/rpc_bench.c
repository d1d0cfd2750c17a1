/* RPC round trip and throughput, the table of the GMS/Trapeze paper:
 * 0 B, 4 KiB and 8 KiB replies; 2-way (rank 0 calls rank 1) and, with a
 * third rank, delegated 3-way (rank 0 calls rank 1, which delegates to
 * rank 2, which answers rank 0); the caller waiting (blocking calls) or
 * continuing (nonblocking calls whose continuations issue the next).
 *
 *   netvm run -n 3 -- rpc_bench [--min-ms M] [--json FILE] [--quick]
 *
 * Rows as netvm bench prints them: metric, reply size, unit, value.
 *  am_lat                        us per 0-byte active-message request to a
 *                                handler that answers at once (netvm bench's
 *                                am_lat), in rounds alternating with
 *                                rpc_lat's 0-byte rounds: the medians of
 *                                both (rpc_lat_alt), so their ratio is
 *                                RPC's overhead on a busy machine too
 *  rpc_lat / rpc3_lat            us per blocking call
 *  rpc_cont_lat / rpc3_cont_lat  us per nonblocking call, one at a time
 *  rpc_rate / rpc3_rate          blocking calls/s
 *  rpc_bw / rpc3_bw              MB/s of reply payload, blocking
 *  rpc_cont_rate / rpc3_cont_rate, rpc_cont_bw / rpc3_cont_bw
 *                                the same with a window of WINDOW calls
 *                                driven by continuations
 * The serving ranks poll (netvm_progress) while rank 0 measures, as
 * ucx_perftest's server and netvm bench's target do: a sleeping server
 * would add a thread wake-up to every call. */
#include <netvm/rpc.h>
#include "svc_bench.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OP_REPLY = 1, OP_FWD = 2 };
#define AM_ECHO 1
#define AM_STOP 2   /* rank 0 is done: the servers stop polling */
#define ROUNDS  5
#define WINDOW 16
#define MAXREPLY 8192

struct bench {
    netvm_ctx_t *ctx;
    double       min_s;
    int          quick;
    FILE        *json;
    int          rows;
    int          three;      /* delegated */
    uint8_t      rbuf[WINDOW][MAXREPLY];
    /* a continuation-driven batch */
    size_t       size, to_issue;
    _Atomic size_t issued, done;
};

static uint8_t reply_data[MAXREPLY];

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "rpc_bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

static int on_reply(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    netvm_rpc_reply(ctx, &c->token, NETVM_OK, NULL, 0, reply_data, (size_t)c->args[0]);
    return NETVM_RPC_DONE;
}

static int on_fwd(netvm_ctx_t *ctx, netvm_rpc_call_t *c, void *arg)
{
    (void)arg;
    netvm_status_t st = netvm_rpc_delegate(ctx, c, 2, OP_REPLY, c->args, 1, NULL, 0);
    if (st != NETVM_OK)
        netvm_rpc_reply(ctx, &c->token, st, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

static int on_am_echo(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    netvm_am_reply(ctx, &m->token, NETVM_OK, NULL, 0, NULL, 0);
    return NETVM_AM_DONE;
}

static atomic_int stop;

static int on_am_stop(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx, (void)m, (void)arg;
    atomic_store(&stop, 1);
    return NETVM_AM_DONE;
}

static void emit(struct bench *b, const char *metric, size_t size, const char *unit, double v)
{
    svc_bench_row(b->json, &b->rows, metric, size, unit, v);
}

static unsigned op(struct bench *b) { return b->three ? OP_FWD : OP_REPLY; }

/* One batch of n; returns seconds. */
typedef double (*batch_fn)(struct bench *b, size_t s, size_t n);

static double wait_batch(struct bench *b, size_t s, size_t n)
{
    uint64_t a = s;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_rpc_call(b->ctx, 1, op(b), &a, 1, NULL, 0, b->rbuf[0], MAXREPLY, 0, NULL));
    return now_s() - t0;
}

static double am_batch(struct bench *b, size_t s, size_t n)
{
    (void)s;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_am_request(b->ctx, 1, AM_ECHO, NULL, 0, NULL, 0, NULL, 0, NULL, NULL));
    return now_s() - t0;
}

static int single_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct bench *b = arg;
    if (o->status != NETVM_OK)
        die("continued call", o->status);
    atomic_fetch_add_explicit(&b->done, 1, memory_order_release);
    return NETVM_RPC_DONE;
}

static void issue_one(struct bench *b, netvm_rpc_cont_fn fn)
{
    size_t k = atomic_fetch_add_explicit(&b->issued, 1, memory_order_relaxed);
    netvm_rpc_handle_t *h;
    uint64_t a = b->size;
    OK(netvm_rpc_begin(b->ctx, &h));
    OK(netvm_rpc_push(h, fn, b));
    OK(netvm_rpc_issue(h, 1, op(b), &a, 1, NULL, 0, b->rbuf[k % WINDOW], MAXREPLY, 0));
    OK(netvm_rpc_drop(h));
}

static void wait_done(struct bench *b, size_t n)
{
    unsigned idle = 0;
    while (atomic_load_explicit(&b->done, memory_order_acquire) < n)
        if (netvm_progress(b->ctx) == 0 && ++idle % 64 == 0)
            sched_yield();
}

/* one nonblocking call at a time, its continuation completing it */
static double cont_lat_batch(struct bench *b, size_t s, size_t n)
{
    b->size = s;
    atomic_store(&b->issued, 0);
    atomic_store(&b->done, 0);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        issue_one(b, single_cont);
        wait_done(b, i + 1);
    }
    return now_s() - t0;
}

/* each continuation issues the next call while calls remain */
static int window_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct bench *b = arg;
    if (o->status != NETVM_OK)
        die("continued call", o->status);
    if (atomic_load_explicit(&b->issued, memory_order_relaxed) < b->to_issue)
        issue_one(b, window_cont);
    atomic_fetch_add_explicit(&b->done, 1, memory_order_release);
    return NETVM_RPC_DONE;
}

static double window_batch(struct bench *b, size_t s, size_t n)
{
    b->size = s;
    b->to_issue = n;
    atomic_store(&b->issued, 0);
    atomic_store(&b->done, 0);
    double t0 = now_s();
    for (size_t i = 0; i < WINDOW && i < n; i++)
        issue_one(b, window_cont);
    wait_done(b, n);
    return now_s() - t0;
}

/* Calibrate as netvm bench does: double n until a batch lasts an eighth
 * of the goal, then time one batch sized to last the goal. */
static double timed(struct bench *b, batch_fn fn, size_t s)
{
    size_t n = 1;
    double t;
    fn(b, s, 2);
    double goal = b->quick ? b->min_s / 10 : b->min_s;
    while ((t = fn(b, s, n)) < goal / 8 && n < ((size_t)1 << 40))
        n *= 2;
    n = (size_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    t = fn(b, s, n);
    return t / (double)n;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* 0-byte: the raw active-message round trip and the RPC's, alternated */
static void measure_overhead(struct bench *b)
{
    double am[ROUNDS], rpc[ROUNDS], min_s = b->min_s;
    b->min_s = min_s / ROUNDS;
    for (int r = 0; r < ROUNDS; r++) {
        am[r] = timed(b, am_batch, 0);
        rpc[r] = timed(b, wait_batch, 0);
    }
    b->min_s = min_s;
    qsort(am, ROUNDS, sizeof am[0], cmp_double);
    qsort(rpc, ROUNDS, sizeof rpc[0], cmp_double);
    emit(b, "am_lat", 0, "us", am[ROUNDS / 2] * 1e6);
    emit(b, "rpc_lat_alt", 0, "us", rpc[ROUNDS / 2] * 1e6);
}

static void measure(struct bench *b)
{
    static const size_t sizes[] = { 0, 4096, 8192 };
    const char *p = b->three ? "rpc3" : "rpc";
    char m[32];
    for (unsigned i = 0; i < 3; i++) {
        size_t s = sizes[i];
        double t = timed(b, wait_batch, s);
        snprintf(m, sizeof m, "%s_lat", p);
        emit(b, m, s, "us", t * 1e6);
        snprintf(m, sizeof m, "%s_rate", p);
        emit(b, m, s, "op/s", 1 / t);
        snprintf(m, sizeof m, "%s_bw", p);
        emit(b, m, s, "MB/s", (double)s / t / 1e6);
        t = timed(b, cont_lat_batch, s);
        snprintf(m, sizeof m, "%s_cont_lat", p);
        emit(b, m, s, "us", t * 1e6);
        t = timed(b, window_batch, s);
        snprintf(m, sizeof m, "%s_cont_rate", p);
        emit(b, m, s, "op/s", 1 / t);
        snprintf(m, sizeof m, "%s_cont_bw", p);
        emit(b, m, s, "MB/s", (double)s / t / 1e6);
    }
}

int main(int argc, char **argv)
{
    static struct bench b;
    b.min_s = 0.2;
    const char *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            b.min_s = atof(argv[++i]) / 1000;
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            b.quick = 1;
        else {
            fprintf(stderr, "usage: netvm run -n 2|3 -- rpc_bench [--min-ms M] [--json FILE] [--quick]\n");
            return 2;
        }
    }
    OK(netvm_init(&b.ctx, NULL));
    int me = netvm_rank(b.ctx), n = netvm_size(b.ctx);
    if (n < 2) {
        fprintf(stderr, "rpc_bench: run it with 2 or 3 ranks\n");
        return 2;
    }
    memset(reply_data, 0x5c, sizeof reply_data);
    OK(netvm_rpc_register(b.ctx, OP_REPLY, on_reply, NULL));
    OK(netvm_rpc_register(b.ctx, OP_FWD, on_fwd, NULL));
    OK(netvm_am_register(b.ctx, AM_ECHO, on_am_echo, NULL));
    OK(netvm_am_register(b.ctx, AM_STOP, on_am_stop, NULL));
    OK(netvm_barrier(b.ctx));
    if (me != 0)
        svc_bench_poll(b.ctx, n, &stop);
    if (me == 0) {
        if (json && !(b.json = fopen(json, "w"))) {
            perror(json);
            return 1;
        }
        if (b.json)
            fputc('[', b.json);
        measure_overhead(&b);
        measure(&b);
        if (n >= 3) {
            b.three = 1;
            measure(&b);
        }
        if (b.json) {
            fputs("\n]\n", b.json);
            fclose(b.json);
        }
        for (int r = 1; r < n; r++)
            OK(netvm_am_send(b.ctx, r, AM_STOP, NULL, 0, NULL, 0, NULL));
    }
    OK(netvm_barrier(b.ctx));
    OK(netvm_finalize(b.ctx));
    return 0;
}
