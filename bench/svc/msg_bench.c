/* Mailbox message benchmark, 2 ranks:
 *
 *   netvm run -n 2 -- msg_bench [--min-ms M] [--json FILE] [--quick] [--only ROW,...]
 *
 *   msg_lat       ping-pong of 8-byte messages: rank 0 sends, rank 1 takes
 *                 it and sends it back; both poll with netvm_msg_try_recv
 *                 (as netvm bench's am_pp_lat polls with netvm_progress);
 *                 one-way = round trip / 2, in us
 *   msg_lat_wait  the same with the blocking netvm_msg_recv on both sides
 *                 (spin NETVM_SPIN_US, then sleep)
 *   msg_rate      8-byte messages in windows of WINDOW: rank 0 sends a
 *                 window, rank 1 drains it (polling) and answers the window
 *                 with one message; Mmsg/s
 *   msg_rate_nb   the same with netvm_msg_isend (as ucp_am_bw's
 *                 ucp_am_send_nbx): a window may leave in one system call
 * Rank 1 serves until rank 0 sends STOP. Rows as netvm bench prints them;
 * --json writes [{"metric", "size", "unit", "netvm"}, ...]. Each
 * measurement doubles its count until a batch lasts min-ms/8 (the warm-up),
 * then times one batch sized to last min-ms (default 200; --quick: a tenth).
 * --only msg_rate measures only the rows named. */
#define _GNU_SOURCE
#include <netvm/netvm.h>
#include "svc_bench.h"
#include <netvm/msg.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WINDOW 64
enum { T_PING = 1, T_PONG, T_RATE, T_ACK, T_STOP, T_MODE };

struct bench {
    netvm_ctx_t *ctx;
    double       min_s;
    int          quick;
    FILE        *json;
    int          rows;
    int          wait;   /* receive with the blocking call, not by polling */
};

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "msg_bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

static void emit(struct bench *b, const char *metric, size_t size, const char *unit, double v)
{
    svc_bench_row(b->json, &b->rows, metric, size, unit, v);
}

/* A receive by polling (try_recv drives progress) or by the blocking call. */
static void take(netvm_ctx_t *ctx, int peer, int wait, uint64_t tag, uint64_t *v, netvm_msg_info_t *in)
{
    netvm_status_t st;
    if (wait)
        st = netvm_msg_recv(ctx, peer, tag, v, sizeof *v, in, -1);
    else
        while ((st = netvm_msg_try_recv(ctx, peer, tag, v, sizeof *v, in)) == NETVM_ERR_AGAIN)
            ;
    if (st != NETVM_OK)
        die("receive", st);
}

typedef double (*batch_fn)(struct bench *b, size_t n);

/* seconds per unit of n */
static double timed(struct bench *b, batch_fn fn)
{
    size_t n = 1;
    double t;
    fn(b, 2);
    double goal = b->quick ? b->min_s / 10 : b->min_s;
    while ((t = fn(b, n)) < goal / 8 && n < ((size_t)1 << 40))
        n *= 2;
    n = (size_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    return fn(b, n) / (double)n;
}

static double lat_batch(struct bench *b, size_t n)
{
    uint64_t v = 0, w;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        OK(netvm_msg_send(b->ctx, 1, T_PING, &v, sizeof v));
        take(b->ctx, 1, b->wait, T_PONG, &w, NULL);
        v++;
    }
    return now_s() - t0;
}

static double rate_batch(struct bench *b, size_t n)
{
    uint64_t v = 0, w;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < WINDOW; k++, v++)
            OK(netvm_msg_send(b->ctx, 1, T_RATE, &v, sizeof v));
        take(b->ctx, 1, b->wait, T_ACK, &w, NULL);
    }
    return now_s() - t0;
}

/* The same with the nonblocking send (ucx_perftest's ucp_am_bw sends
 * with ucp_am_send_nbx): a window's messages may leave together. */
static double rate_nb_batch(struct bench *b, size_t n)
{
    uint64_t v = 0, w;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < WINDOW; k++, v++) {
            netvm_req_t *req;
            OK(netvm_msg_isend(b->ctx, 1, T_RATE, &v, sizeof v, &req));
            if (req)
                OK(netvm_wait(&req));   /* a small message completes at once: not taken */
        }
        take(b->ctx, 1, b->wait, T_ACK, &w, NULL);
    }
    return now_s() - t0;
}

static void serve(netvm_ctx_t *ctx)
{
    uint64_t v, drained = 0;
    int wait = 0;
    for (;;) {
        netvm_msg_info_t in;
        take(ctx, 0, wait, NETVM_MSG_ANY_TAG, &v, &in);
        if (in.tag == T_MODE) {
            wait = (int)v;
        } else if (in.tag == T_PING) {
            OK(netvm_msg_send(ctx, 0, T_PONG, &v, sizeof v));
        } else if (in.tag == T_RATE) {
            if (++drained % WINDOW == 0)
                OK(netvm_msg_send(ctx, 0, T_ACK, &drained, sizeof drained));
        } else if (in.tag == T_STOP) {
            return;
        }
    }
}

int main(int argc, char **argv)
{
    struct bench b = { .min_s = 0.2 };
    const char *json = NULL, *only = NULL;
    static const struct option opts[] = {
        { "min-ms", required_argument, NULL, 'm' },
        { "json", required_argument, NULL, 'j' },
        { "quick", no_argument, NULL, 'q' },
        { "only", required_argument, NULL, 'o' },
        { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'm')
            b.min_s = atof(optarg) / 1e3;
        else if (c == 'j')
            json = optarg;
        else if (c == 'q')
            b.quick = 1;
        else if (c == 'o')
            only = optarg;
        else {
            fprintf(stderr, "usage: netvm run -n 2 -- msg_bench [--min-ms M] [--json FILE] [--quick] [--only ROW,...]\n");
            return 2;
        }
    }
    OK(netvm_init(&b.ctx, NULL));
    if (netvm_size(b.ctx) != 2) {
        fprintf(stderr, "msg_bench: run it as a job of 2 (netvm run -n 2 -- msg_bench)\n");
        return 2;
    }
    int rank = netvm_rank(b.ctx);
    OK(netvm_barrier(b.ctx));
    if (rank == 1) {
        serve(b.ctx);
    } else {
        if (json && !(b.json = fopen(json, "w"))) {
            perror(json);
            return 1;
        }
        if (b.json)
            fputc('[', b.json);
        if (svc_bench_wanted(only, "msg_lat"))
            emit(&b, "msg_lat", 8, "us", timed(&b, lat_batch) / 2 * 1e6);
        if (svc_bench_wanted(only, "msg_rate"))
            emit(&b, "msg_rate", 8, "Mmsg", WINDOW / timed(&b, rate_batch) / 1e6);
        if (svc_bench_wanted(only, "msg_rate_nb"))
            emit(&b, "msg_rate_nb", 8, "Mmsg", WINDOW / timed(&b, rate_nb_batch) / 1e6);
        if (svc_bench_wanted(only, "msg_lat_wait")) {
            uint64_t mode = 1;
            OK(netvm_msg_send(b.ctx, 1, T_MODE, &mode, sizeof mode));
            b.wait = 1;
            emit(&b, "msg_lat_wait", 8, "us", timed(&b, lat_batch) / 2 * 1e6);
        }
        OK(netvm_msg_send(b.ctx, 1, T_STOP, NULL, 0));
        if (b.json) {
            fputs("\n]\n", b.json);
            fclose(b.json);
        }
    }
    if (getenv("MSG_BENCH_STATS")) {
        netvm_am_stats_t st;
        OK(netvm_am_stats(b.ctx, &st));
        fprintf(stderr, "rank %d: am sent %llu received %llu deferred %llu credit_waits %llu\n", rank,
                (unsigned long long)st.sent, (unsigned long long)st.received, (unsigned long long)st.deferred,
                (unsigned long long)st.credit_waits);
    }
    OK(netvm_barrier(b.ctx));
    OK(netvm_finalize(b.ctx));
    return 0;
}
