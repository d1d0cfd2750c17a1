/* netvm bench: put/get latency (8 B to 4 MiB), bandwidth, atomic latency and
 * rate, on the mapped path (memfd segments: loads and stores) and on the CMA
 * path (any exported memory: process_vm_writev/readv, target-executed
 * atomics). Started outside a job it launches itself as a job of two.
 * The methods match the peers' in bench/compare, so rows can be compared:
 *   put_lat   ping-pong, one-way = round trip / 2; the receiver polls the
 *             last byte of its buffer
 *   get_lat   blocking get, time per operation
 *   fadd_lat  blocking fetch-and-add, time per operation
 *   put_bw, get_bw  windows of 32 operations then a flush; MB = 1e6 bytes
 *   add_rate  nonblocking atomic add, windows of 64 then a flush
 *   put_rate  nonblocking 8-byte put, windows of 64 then a flush */
#define _GNU_SOURCE
#include "commands.h"
#include "util/time.h"

#include <netvm/netvm.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)
#define BW_WINDOW 32
#define RATE_WINDOW 64

struct bench {
    netvm_ctx_t *ctx;
    int rank, peer, quick;
    uint8_t *src;                        /* local source/destination */
    uint8_t *mine[2];                    /* [0] mapped (memfd), [1] cma (private) */
    netvm_rseg_t *theirs[2];
    volatile uint64_t *stop_flag;        /* in mine[0]'s last word: the idle rank's exit */
    FILE *json;
    int rows;
};

static const char *const path_suffix[2] = { "", "_cma" };

static void emit(struct bench *b, const char *metric, int path, size_t size, const char *unit, double v)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", metric, path_suffix[path]);
    printf("%-16s %9zu %-5s %12.3f\n", name, size, unit, v);
    fflush(stdout);
    if (b->json)
        fprintf(b->json, "%s\n  {\"metric\": \"%s\", \"size\": %zu, \"unit\": \"%s\", \"netvm\": %.4f}",
                b->rows++ ? "," : "", name, size, unit, v);
}

static size_t lat_iters(const struct bench *b, size_t s)
{
    size_t n = (256u << 20) / s;
    if (n > 20000) n = 20000;
    if (n < 20) n = 20;
    return b->quick ? (n / 50 + 2) : n;
}

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "netvm bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

/* The idle rank serves (polling progress) until the measuring rank is done. */
static void serve_until_stopped(struct bench *b)
{
    while (!__atomic_load_n(b->stop_flag, __ATOMIC_ACQUIRE))
        netvm_progress(b->ctx);
    *b->stop_flag = 0;
}

static void stop_peer(struct bench *b)
{
    OK(netvm_put_imm(b->ctx, b->theirs[0], MAX_SIZE, 1, 0));
}

static double put_lat(struct bench *b, int path, size_t s)
{
    size_t iters = lat_iters(b, s), warm = iters / 10 + 1;
    volatile uint8_t *last = b->mine[path] + s - 1;
    OK(netvm_barrier(b->ctx));
    uint64_t t0 = 0;
    for (size_t i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = nv_now_ns();
        uint8_t tag = (uint8_t)(i % 255 + 1);
        /* the waiting side polls its memory and drives progress, as the
         * peers' ping-pongs do (links that need the target's CPU, like tcp,
         * are served by this call rather than by a thread wake-up) */
        if (b->rank == 0) {
            b->src[s - 1] = tag;
            OK(netvm_put(b->ctx, b->theirs[path], 0, b->src, s, 0));
            while (*last != tag)
                netvm_progress(b->ctx);
        } else {
            while (*last != tag)
                netvm_progress(b->ctx);
            b->src[s - 1] = tag;
            OK(netvm_put(b->ctx, b->theirs[path], 0, b->src, s, 0));
        }
    }
    double us = (double)(nv_now_ns() - t0) / 1e3 / (double)iters / 2;
    memset(b->mine[path], 0, s);
    OK(netvm_barrier(b->ctx));
    return us;
}

static double get_lat(struct bench *b, int path, size_t s)
{
    size_t iters = lat_iters(b, s), warm = iters / 10 + 1;
    uint64_t t0 = 0;
    for (size_t i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = nv_now_ns();
        OK(netvm_get(b->ctx, b->src, b->theirs[path], 0, s, 0));
    }
    return (double)(nv_now_ns() - t0) / 1e3 / (double)iters;
}

static double fadd_lat(struct bench *b, int path)
{
    size_t iters = b->quick ? 500 : 50000, warm = iters / 10;
    uint64_t old, t0 = 0;
    for (size_t i = 0; i < warm + iters; i++) {
        if (i == warm)
            t0 = nv_now_ns();
        OK(netvm_atomic(b->ctx, b->theirs[path], 8, NETVM_AOP_FADD, 1, 0, &old));
    }
    return (double)(nv_now_ns() - t0) / 1e3 / (double)iters;
}

static double bw(struct bench *b, int path, size_t s, int is_put)
{
    size_t windows = (512u << 20) / (s * BW_WINDOW);
    if (windows < 4) windows = 4;
    if (b->quick) windows = 2;
    uint64_t t0 = 0;
    for (size_t w = 0; w < windows + 1; w++) {
        if (w == 1)
            t0 = nv_now_ns();
        netvm_req_t *reqs[BW_WINDOW];
        for (int i = 0; i < BW_WINDOW; i++) {
            if (is_put)
                OK(netvm_put_nb(b->ctx, b->theirs[path], 0, b->src, s, 0, &reqs[i]));
            else
                OK(netvm_get_nb(b->ctx, b->src, b->theirs[path], 0, s, 0, &reqs[i]));
        }
        OK(netvm_wait_all(reqs, BW_WINDOW));
        OK(netvm_flush(b->ctx, b->peer));
    }
    double sec = (double)(nv_now_ns() - t0) / 1e9;
    return (double)s * BW_WINDOW * (double)windows / sec / 1e6;
}

static double add_rate(struct bench *b, int path)
{
    size_t windows = b->quick ? 10 : 4000;
    uint64_t t0 = 0;
    for (size_t w = 0; w < windows + 1; w++) {
        if (w == 1)
            t0 = nv_now_ns();
        netvm_req_t *reqs[RATE_WINDOW];
        for (int i = 0; i < RATE_WINDOW; i++)
            OK(netvm_atomic_nb(b->ctx, b->theirs[path], 16, NETVM_AOP_ADD, 1, 0, NULL, &reqs[i]));
        OK(netvm_wait_all(reqs, RATE_WINDOW));
        OK(netvm_flush(b->ctx, b->peer));
    }
    double sec = (double)(nv_now_ns() - t0) / 1e9;
    return (double)RATE_WINDOW * (double)windows / sec / 1e6;
}

static double put_rate(struct bench *b, int path)
{
    size_t windows = b->quick ? 10 : 4000;
    uint64_t t0 = 0;
    for (size_t w = 0; w < windows + 1; w++) {
        if (w == 1)
            t0 = nv_now_ns();
        for (int i = 0; i < RATE_WINDOW; i++) {
            netvm_req_t *q;
            OK(netvm_put_nb(b->ctx, b->theirs[path], 8 * (size_t)i, b->src, 8, 0, &q));
            OK(netvm_wait(&q));   /* local completion: immediate on every link */
        }
        OK(netvm_flush(b->ctx, b->peer));
    }
    double sec = (double)(nv_now_ns() - t0) / 1e9;
    return (double)RATE_WINDOW * (double)windows / sec / 1e6;
}

static void one_sided(struct bench *b, int path)
{
    static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 };
    static const size_t bw_sizes[] = { 65536, 1048576, 4194304 };
    OK(netvm_barrier(b->ctx));
    if (b->rank == 1) {
        serve_until_stopped(b);
        OK(netvm_barrier(b->ctx));
        return;
    }
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        emit(b, "get_lat", path, sizes[i], "us", get_lat(b, path, sizes[i]));
    emit(b, "fadd_lat", path, 8, "us", fadd_lat(b, path));
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "put_bw", path, bw_sizes[i], "MB/s", bw(b, path, bw_sizes[i], 1));
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "get_bw", path, bw_sizes[i], "MB/s", bw(b, path, bw_sizes[i], 0));
    emit(b, "add_rate", path, 8, "Mops", add_rate(b, path));
    emit(b, "put_rate", path, 8, "Mops", put_rate(b, path));
    stop_peer(b);
    OK(netvm_barrier(b->ctx));
}

static void ping_pong(struct bench *b, int path)
{
    static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double us = put_lat(b, path, sizes[i]);
        if (b->rank == 0)
            emit(b, "put_lat", path, sizes[i], "us", us);
    }
}

static int relaunch(char **argv)
{
    /* not inside a job: become a job of two */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("netvm bench: /proc/self/exe");
        return 1;
    }
    self[n] = 0;
    int argc = 0;
    while (argv[argc])
        argc++;
    char **args = calloc((size_t)argc + 8, sizeof *args);
    int k = 0;
    args[k++] = self;
    args[k++] = "run";
    args[k++] = "-n";
    args[k++] = "2";
    args[k++] = "--";
    args[k++] = self;
    for (int i = 0; i < argc; i++)
        args[k++] = argv[i];
    execv(self, args);
    perror("netvm bench: exec");
    return 1;
}

static void usage(void)
{
    printf("usage: netvm bench [--json FILE] [--quick] [--path mapped|cma|both]\n\n"
           "Runs as a job of two processes (it launches itself when started outside a job)\n"
           "and prints one row per metric and size; --json also writes the rows as JSON.\n");
}

int nv_cmd_bench(int argc, char **argv)
{
    const char *json_path = NULL, *which = "both";
    int quick = 0;
    static const struct option opts[] = {
        { "json", required_argument, 0, 'j' }, { "quick", no_argument, 0, 'q' },
        { "path", required_argument, 0, 'p' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "j:qp:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json_path = optarg; break;
        case 'q': quick = 1; break;
        case 'p': which = optarg; break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (strcmp(which, "both") && strcmp(which, "mapped") && strcmp(which, "cma")) {
        fprintf(stderr, "netvm bench: --path is mapped, cma or both\n");
        return 2;
    }
    if (!getenv("NETVM_BOOT"))
        return relaunch(argv);

    struct bench b = { .quick = quick };
    OK(netvm_init(&b.ctx, NULL));
    b.rank = netvm_rank(b.ctx);
    if (netvm_size(b.ctx) != 2) {
        fprintf(stderr, "netvm bench: needs a job of exactly 2 processes\n");
        return 2;
    }
    b.peer = 1 - b.rank;
    netvm_seg_t *seg[2];
    void *p;
    OK(netvm_alloc_shared(b.ctx, MAX_SIZE + 64, NETVM_RWA, "bench-mapped", &p, &seg[0]));
    b.mine[0] = p;
    b.mine[1] = mmap(NULL, MAX_SIZE + 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    b.src = mmap(NULL, MAX_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.mine[1] == MAP_FAILED || b.src == MAP_FAILED) {
        perror("netvm bench: mmap");
        return 1;
    }
    memset(b.mine[1], 0, MAX_SIZE + 64);
    memset(b.src, 1, MAX_SIZE);
    b.stop_flag = (volatile uint64_t *)(b.mine[0] + MAX_SIZE);
    OK(netvm_export(b.ctx, b.mine[1], MAX_SIZE + 64, NETVM_RWA, "bench-cma", &seg[1]));
    OK(netvm_barrier(b.ctx));
    OK(netvm_import(b.ctx, b.peer, "bench-mapped", &b.theirs[0]));
    OK(netvm_import(b.ctx, b.peer, "bench-cma", &b.theirs[1]));
    if (!netvm_rseg_is_mapped(b.theirs[0]) && strcmp(which, "cma"))
        fprintf(stderr, "netvm bench: note: the mapped segment is not mapped (NETVM_SHM_MAPPED=0?)\n");

    if (b.rank == 0) {
        if (json_path && !(b.json = fopen(json_path, "w"))) {
            perror(json_path);
            return 1;
        }
        if (b.json)
            fprintf(b.json, "[");
        printf("%-16s %9s %-5s %12s\n", "metric", "size", "unit", "netvm");
    }
    for (int path = 0; path < 2; path++) {
        if ((path == 0 && !strcmp(which, "cma")) || (path == 1 && !strcmp(which, "mapped")))
            continue;
        ping_pong(&b, path);
        one_sided(&b, path);
    }
    if (b.json) {
        fprintf(b.json, "\n]\n");
        fclose(b.json);
    }
    OK(netvm_barrier(b.ctx));
    OK(netvm_finalize(b.ctx));
    return 0;
}
