/* netvm bench: put/get latency (8 B to 4 MiB), bandwidth, atomic latency and
 * rates, on the mapped path (memfd segments: loads and stores) and on the CMA
 * path (any exported memory: process_vm_writev/readv on shm, the tcp link with
 * NETVM_LINKS=tcp; target-executed atomics). Started outside a job it launches
 * itself as a job of two. The methods match the peers' in bench/compare:
 *   put_lat   ping-pong, one-way = round trip / 2; the receiver polls the
 *             last byte of its buffer (driving progress as it polls)
 *   get_lat   blocking get, time per operation
 *   fadd_lat  blocking fetch-and-add, time per operation
 *   put_bw, get_bw  windows of 32 operations then a flush; MB = 1e6 bytes
 *   add_rate  nonblocking atomic add, windows of 64 then a flush
 *   put_rate  nonblocking 8-byte put, windows of 64 then a flush
 * Each measurement doubles its count until a batch lasts min-ms/8 (the
 * warm-up), then times one batch sized to last --min-ms. */
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
/* control words after the data, in the mapped segment */
#define CTL_STOP  (MAX_SIZE)        /* the measuring rank is done with one-sided tests */
#define CTL_COUNT (MAX_SIZE + 8)    /* iterations of the next ping-pong */

struct bench {
    netvm_ctx_t *ctx;
    int rank, peer, quick, target_polls;
    double min_s;
    uint8_t *src;                        /* local source/destination */
    uint8_t *mine[2];                    /* [0] mapped (memfd), [1] private */
    netvm_rseg_t *theirs[2];
    FILE *json;
    int rows;
};

static const char *const path_suffix[2] = { "", "_cma" };

static void emit(struct bench *b, const char *metric, int path, size_t size, const char *unit, double v)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", metric, path_suffix[path]);
    printf("%-16s %9zu %-5s %12.6g\n", name, size, unit, v);
    fflush(stdout);
    if (b->json)
        fprintf(b->json, "%s\n  {\"metric\": \"%s\", \"size\": %zu, \"unit\": \"%s\", \"netvm\": %.9g}",
                b->rows++ ? "," : "", name, size, unit, v);
}

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "netvm bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

static volatile uint64_t *ctl(struct bench *b, size_t off) { return (volatile uint64_t *)(b->mine[0] + off); }

/* --- one-sided measurements: rank 0 alone ------------------------------ */

/* One batch of n operations (or windows); returns seconds. */
typedef double (*batch_fn)(struct bench *b, int path, size_t s, size_t n);

/* Calibrate and time; returns seconds per unit of n, and *units = n. */
static double timed(struct bench *b, batch_fn fn, int path, size_t s, size_t *units)
{
    size_t n = 1;
    double t;
    fn(b, path, s, 2);   /* cold caches, first faults */
    double goal = b->quick ? b->min_s / 10 : b->min_s;
    while ((t = fn(b, path, s, n)) < goal / 8 && n < ((size_t)1 << 40))
        n *= 2;
    n = (size_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    t = fn(b, path, s, n);
    *units = n;
    return t / (double)n;
}

static double now_s(void) { return (double)nv_now_ns() / 1e9; }

static double get_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_get(b->ctx, b->src, b->theirs[path], 0, s, 0));
    return now_s() - t0;
}

static double fadd_batch(struct bench *b, int path, size_t s, size_t n)
{
    uint64_t old;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_atomic(b->ctx, b->theirs[path], 8, NETVM_AOP_FADD, 1, 0, &old));
    return now_s() - t0;
}

static double bw_batch(struct bench *b, int path, size_t s, size_t n, int is_put)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
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
    return now_s() - t0;
}

static double put_bw_batch(struct bench *b, int path, size_t s, size_t n) { return bw_batch(b, path, s, n, 1); }
static double get_bw_batch(struct bench *b, int path, size_t s, size_t n) { return bw_batch(b, path, s, n, 0); }

static double add_rate_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
        netvm_req_t *reqs[RATE_WINDOW];
        for (int i = 0; i < RATE_WINDOW; i++)
            OK(netvm_atomic_nb(b->ctx, b->theirs[path], 16, NETVM_AOP_ADD, 1, 0, NULL, &reqs[i]));
        OK(netvm_wait_all(reqs, RATE_WINDOW));
        OK(netvm_flush(b->ctx, b->peer));
    }
    return now_s() - t0;
}

static double put_rate_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
        for (int i = 0; i < RATE_WINDOW; i++) {
            netvm_req_t *q;
            OK(netvm_put_nb(b->ctx, b->theirs[path], 8 * (size_t)i, b->src, 8, 0, &q));
            OK(netvm_wait(&q));   /* local completion: immediate on every link */
        }
        OK(netvm_flush(b->ctx, b->peer));
    }
    return now_s() - t0;
}

static void one_sided(struct bench *b, int path)
{
    static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 };
    static const size_t bw_sizes[] = { 65536, 1048576, 4194304 };
    OK(netvm_barrier(b->ctx));
    if (b->rank == 1) {
        /* the target: polls (driving progress itself) or sleeps (the
         * progress thread serves what needs its CPU) */
        if (b->target_polls) {
            while (!__atomic_load_n(ctl(b, CTL_STOP), __ATOMIC_ACQUIRE))
                netvm_progress(b->ctx);
            *ctl(b, CTL_STOP) = 0;
        }
        OK(netvm_barrier(b->ctx));
        return;
    }
    size_t n;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        emit(b, "get_lat", path, sizes[i], "us", timed(b, get_batch, path, sizes[i], &n) * 1e6);
    emit(b, "fadd_lat", path, 8, "us", timed(b, fadd_batch, path, 8, &n) * 1e6);
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "put_bw", path, bw_sizes[i], "MB/s",
             (double)bw_sizes[i] * BW_WINDOW / timed(b, put_bw_batch, path, bw_sizes[i], &n) / 1e6);
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "get_bw", path, bw_sizes[i], "MB/s",
             (double)bw_sizes[i] * BW_WINDOW / timed(b, get_bw_batch, path, bw_sizes[i], &n) / 1e6);
    emit(b, "add_rate", path, 8, "Mops", RATE_WINDOW / timed(b, add_rate_batch, path, 8, &n) / 1e6);
    emit(b, "put_rate", path, 8, "Mops", RATE_WINDOW / timed(b, put_rate_batch, path, 8, &n) / 1e6);
    if (b->target_polls)
        OK(netvm_put_imm(b->ctx, b->theirs[0], CTL_STOP, 1, 0));
    OK(netvm_barrier(b->ctx));
}

/* --- the ping-pong: both ranks -------------------------------------------- */

static void pong_rounds(struct bench *b, int path, size_t s, size_t n, uint64_t salt)
{
    volatile uint8_t *last = b->mine[path] + s - 1;
    for (size_t i = 0; i < n; i++) {
        uint8_t tag = (uint8_t)((i + salt) % 255 + 1);
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
}

/* Rank 0 times a trial, picks the count and hands it to rank 1. */
static double put_lat(struct bench *b, int path, size_t s)
{
    const size_t trial = 20;
    OK(netvm_barrier(b->ctx));
    double t0 = now_s();
    pong_rounds(b, path, s, trial, 0);
    double per = (now_s() - t0) / trial;
    size_t n = 0;
    if (b->rank == 0) {
        double goal = b->quick ? b->min_s / 10 : b->min_s;
        n = (size_t)(goal / (per > 0 ? per : 1e-9)) + 1;
        OK(netvm_put_imm(b->ctx, b->theirs[0], CTL_COUNT, n, 0));
    } else {
        while (!(n = (size_t)__atomic_load_n(ctl(b, CTL_COUNT), __ATOMIC_ACQUIRE)))
            netvm_progress(b->ctx);
        *ctl(b, CTL_COUNT) = 0;
    }
    t0 = now_s();
    pong_rounds(b, path, s, n, trial);
    double us = (now_s() - t0) / (double)n / 2 * 1e6;
    OK(netvm_barrier(b->ctx));
    memset(b->mine[path], 0, s);
    OK(netvm_barrier(b->ctx));
    return us;
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
    printf("usage: netvm bench [--json FILE] [--quick] [--path mapped|cma|both]\n"
           "                   [--target sleep|poll] [--min-ms MS]\n\n"
           "Runs as a job of two processes (it launches itself when started outside a job)\n"
           "and prints one row per metric and size; --json also writes the rows as JSON.\n"
           "--target: how the idle rank waits during the one-sided tests: sleep (default:\n"
           "blocked, netvm's progress thread serves it) or poll (calls netvm_progress in a\n"
           "loop, as ucx_perftest's server does). --min-ms: length of each timed batch\n"
           "(default 50; --quick divides it by 10).\n");
}

int nv_cmd_bench(int argc, char **argv)
{
    const char *json_path = NULL, *which = "both", *target = "sleep";
    int quick = 0;
    double min_ms = 50;
    static const struct option opts[] = {
        { "json", required_argument, 0, 'j' }, { "quick", no_argument, 0, 'q' },
        { "path", required_argument, 0, 'p' }, { "target", required_argument, 0, 't' },
        { "min-ms", required_argument, 0, 'm' }, { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "j:qp:t:m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json_path = optarg; break;
        case 'q': quick = 1; break;
        case 'p': which = optarg; break;
        case 't': target = optarg; break;
        case 'm': min_ms = atof(optarg); break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (strcmp(which, "both") && strcmp(which, "mapped") && strcmp(which, "cma")) {
        fprintf(stderr, "netvm bench: --path is mapped, cma or both\n");
        return 2;
    }
    if (strcmp(target, "sleep") && strcmp(target, "poll")) {
        fprintf(stderr, "netvm bench: --target is sleep or poll\n");
        return 2;
    }
    if (min_ms <= 0) {
        fprintf(stderr, "netvm bench: --min-ms must be positive\n");
        return 2;
    }
    if (!getenv("NETVM_BOOT"))
        return relaunch(argv);

    struct bench b = { .quick = quick, .min_s = min_ms / 1000, .target_polls = !strcmp(target, "poll") };
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
    OK(netvm_export(b.ctx, b.mine[1], MAX_SIZE + 64, NETVM_RWA, "bench-cma", &seg[1]));
    OK(netvm_barrier(b.ctx));
    OK(netvm_import(b.ctx, b.peer, "bench-mapped", &b.theirs[0]));
    OK(netvm_import(b.ctx, b.peer, "bench-cma", &b.theirs[1]));
    if (!netvm_rseg_is_mapped(b.theirs[0]) && strcmp(which, "cma"))
        fprintf(stderr, "netvm bench: note: the mapped segment is not mapped (NETVM_SHM_MAPPED=0 or tcp)\n");

    if (b.rank == 0) {
        if (json_path && !(b.json = fopen(json_path, "w"))) {
            perror(json_path);
            return 1;
        }
        if (b.json)
            fprintf(b.json, "[");
        printf("%-16s %9s %-5s %12s   (target %s)\n", "metric", "size", "unit", "netvm", target);
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
