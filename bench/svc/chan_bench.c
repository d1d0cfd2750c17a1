/* Channels and distributed queues (include/netvm/chan.h), measured:
 *   chan_lat  ping-pong of 8 B messages over two channels (0 -> 1 and
 *             1 -> 0), one-way = round trip / 2, us
 *   chan_bw   rank 0 streams messages of 4 KiB and 64 KiB to rank 1 (a
 *             1 MiB ring), which answers once it has taken the last; MB/s,
 *             MB = 1e6 bytes
 *   dq_rate   (4 ranks or more) every rank but 0 produces 8 B items into
 *             rank 0's distributed queue; items per second taken by rank 0
 * Rank 0 drives: before each batch it sends the others a command (what,
 * how many, what size) on a control channel; each measurement doubles its
 * count until a batch lasts min-ms/8 (the warm-up), then times one batch
 * sized to last min-ms (--quick divides min-ms by 10).
 *   netvm run -n 4 -- chan_bench [--min-ms M] [--json FILE] [--quick] */
#define _GNU_SOURCE
#include <netvm/chan.h>
#include "svc_bench.h"
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RING (1u << 20)
#define MAX_MSG (64u << 10)
#define WAIT_MS 60000

enum { OP_PINGPONG = 1, OP_STREAM, OP_DQ, OP_STOP };

struct cmd {
    uint64_t op, n, size;
};

static int rank, size;
static netvm_chan_tx_t *to_peer;     /* rank 0: to rank 1; rank 1: to rank 0 */
static netvm_chan_rx_t *from_peer;
static netvm_chan_tx_t **ctl_tx;     /* rank 0: a control channel to every rank */
static netvm_chan_rx_t *ctl_rx;      /* the others: rank 0's commands */
static netvm_dq_t *dq;
static netvm_dq_prod_t *prod;
static uint8_t *buf;
static FILE *json;
static int rows;

#define OK(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "chan_bench rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)

static void emit(const char *metric, size_t sz, const char *unit, double v)
{
    svc_bench_row(json, &rows, metric, sz, unit, v);
}

static void command(int to, uint64_t op, uint64_t n, uint64_t sz)
{
    struct cmd c = { op, n, sz };
    OK(netvm_chan_send(ctl_tx[to], &c, sizeof c, WAIT_MS));
}

static void recv_exact(netvm_chan_rx_t *rx, size_t want)
{
    size_t len;
    OK(netvm_chan_recv(rx, buf, MAX_MSG, &len, WAIT_MS));
    if (len != want) {
        fprintf(stderr, "chan_bench rank %d: a message of %zu bytes, wanted %zu\n", rank, len, want);
        exit(1);
    }
}

/* One batch of n, run by rank 0; returns seconds. */
static double batch(uint64_t op, uint64_t n, uint64_t sz)
{
    if (op == OP_DQ) {
        for (int r = 1; r < size; r++)
            command(r, op, n, sz);
        double t0 = now_s();
        for (uint64_t i = 0; i < n * (uint64_t)(size - 1); i++) {
            size_t len;
            OK(netvm_dq_recv(dq, buf, MAX_MSG, &len, NULL, NULL, WAIT_MS));
        }
        return now_s() - t0;
    }
    command(1, op, n, sz);
    double t0 = now_s();
    if (op == OP_PINGPONG) {
        for (uint64_t i = 0; i < n; i++) {
            OK(netvm_chan_send(to_peer, buf, sz, WAIT_MS));
            recv_exact(from_peer, sz);
        }
    } else {
        for (uint64_t i = 0; i < n; i++)
            OK(netvm_chan_send(to_peer, buf, sz, WAIT_MS));
        recv_exact(from_peer, 8);
    }
    return now_s() - t0;
}

/* Seconds per unit of n, calibrated as netvm bench does. */
static double timed(uint64_t op, uint64_t sz, double goal)
{
    uint64_t n = 1;
    double t;
    batch(op, 2, sz);
    while ((t = batch(op, n, sz)) < goal / 8 && n < (1ull << 40))
        n *= 2;
    n = (uint64_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    return batch(op, n, sz) / (double)n;
}

/* The others: obey rank 0's commands until OP_STOP. */
static void serve(void)
{
    for (;;) {
        struct cmd c;
        size_t len;
        OK(netvm_chan_recv(ctl_rx, &c, sizeof c, &len, -1));
        if (c.op == OP_STOP)
            return;
        for (uint64_t i = 0; i < c.n; i++) {
            if (c.op == OP_DQ) {
                OK(netvm_dq_send(prod, buf, c.size, WAIT_MS));
            } else {
                recv_exact(from_peer, c.size);
                if (c.op == OP_PINGPONG)
                    OK(netvm_chan_send(to_peer, buf, c.size, WAIT_MS));
            }
        }
        if (c.op == OP_STREAM)
            OK(netvm_chan_send(to_peer, buf, 8, WAIT_MS));
    }
}

int main(int argc, char **argv)
{
    double min_ms = 200;
    int quick = 0;
    const char *json_path = NULL;
    static const struct option opts[] = {
        { "min-ms", required_argument, 0, 'm' }, { "json", required_argument, 0, 'j' },
        { "quick", no_argument, 0, 'q' }, { 0, 0, 0, 0 },
    };
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'm')
            min_ms = strtod(optarg, NULL);
        else if (c == 'j')
            json_path = optarg;
        else if (c == 'q')
            quick = 1;
        else {
            fprintf(stderr, "usage: netvm run -n N -- chan_bench [--min-ms M] [--json FILE] [--quick]\n");
            return 2;
        }
    }
    if (min_ms <= 0) {
        fprintf(stderr, "chan_bench: --min-ms must be positive\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    netvm_ctx_t *ctx;
    OK(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    if (size < 2) {
        fprintf(stderr, "chan_bench: run with 2 ranks (4 or more for dq_rate): netvm run -n 4 -- chan_bench\n");
        netvm_finalize(ctx);
        return 2;
    }
    buf = calloc(1, MAX_MSG);
    if (!buf)
        return 1;
    netvm_chan_opts_t o = { .ring_bytes = RING, .max_msg = MAX_MSG };
    netvm_chan_opts_t small = { .ring_bytes = 4096, .max_msg = sizeof(struct cmd) };
    if (rank == 0) {
        OK(netvm_chan_create(ctx, 1, "back", &o, &from_peer));
        if (size >= 4)
            OK(netvm_dq_create(ctx, "items", size - 1, NULL, &dq));
    } else {
        OK(netvm_chan_create(ctx, 0, "ctl", &small, &ctl_rx));
        if (rank == 1)
            OK(netvm_chan_create(ctx, 0, "data", &o, &from_peer));
    }
    OK(netvm_barrier(ctx));
    if (rank == 0) {
        ctl_tx = calloc((size_t)size, sizeof *ctl_tx);
        for (int r = 1; r < size; r++)
            OK(netvm_chan_connect(ctx, r, "ctl", WAIT_MS, &ctl_tx[r]));
        OK(netvm_chan_connect(ctx, 1, "data", WAIT_MS, &to_peer));
    } else {
        if (rank == 1)
            OK(netvm_chan_connect(ctx, 0, "back", WAIT_MS, &to_peer));
        if (size >= 4)
            OK(netvm_dq_join(ctx, 0, "items", WAIT_MS, &prod));
    }
    OK(netvm_barrier(ctx));

    if (rank == 0) {
        if (json_path && !(json = fopen(json_path, "w"))) {
            perror(json_path);
            return 1;
        }
        if (json)
            fprintf(json, "[");
        double goal = (quick ? min_ms / 10 : min_ms) / 1e3;
        emit("chan_lat", 8, "us", timed(OP_PINGPONG, 8, goal) / 2 * 1e6);
        static const size_t bw[] = { 4096, 65536 };
        for (size_t i = 0; i < 2; i++)
            emit("chan_bw", bw[i], "MB/s", (double)bw[i] / timed(OP_STREAM, bw[i], goal) / 1e6);
        if (size >= 4)
            emit("dq_rate", 8, "items/s", (double)(size - 1) / timed(OP_DQ, 8, goal));
        for (int r = 1; r < size; r++)
            command(r, OP_STOP, 0, 0);
        if (json) {
            fprintf(json, "\n]\n");
            fclose(json);
        }
    } else {
        serve();
    }
    OK(netvm_barrier(ctx));
    if (rank == 0) {
        for (int r = 1; r < size; r++)
            OK(netvm_chan_close(ctl_tx[r]));
        OK(netvm_chan_close(to_peer));
        free(ctl_tx);
    } else {
        if (rank == 1)
            OK(netvm_chan_close(to_peer));
        if (prod)
            OK(netvm_dq_leave(prod));
    }
    OK(netvm_barrier(ctx));
    if (from_peer)
        OK(netvm_chan_destroy(from_peer));
    if (ctl_rx)
        OK(netvm_chan_destroy(ctl_rx));
    if (dq)
        OK(netvm_dq_destroy(dq));
    free(buf);
    netvm_finalize(ctx);
    return 0;
}
