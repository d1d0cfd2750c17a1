/* gfile_bench: the GMS/Trapeze paper's file-read figure (its figure 4,
 * "bandwidth against bytes touched per page") on netvm's file cache
 * (include/netvm/gfile.h), with a raw TCP stream measured in the same run
 * for the ratio (docs/perf-issue11.md).
 *
 *   gfile_bench [--size BYTES] [--runs N] [--dir DIR] [--json FILE]
 *
 * A file of --size bytes is written under --dir and read once through the
 * cache (every block then lives on the memory servers: NETVM_GMEM_SERVERS,
 * or embedded ones). Then, for each amount touched per page (8 B .. 4 KiB),
 * each interface reads the whole file from network memory with a fresh
 * handle (nothing resident locally) and touches that many bytes of every
 * page:
 *   mmap   netvm_gfile_map, the pages faulted in with read-ahead
 *   mmb    netvm_gfile_window: 2 windows of 256 KiB moved over the file
 *          (the paper's N = 2, B = 256K)
 *   pread  netvm_gfile_pread of 1 MiB at a time (four GETN runs in flight)
 * Bandwidth is file bytes over the time from open to the last page
 * touched (the paper's "delivered bandwidth"); the median of --runs runs.
 * raw: one loopback TCP connection between two processes, 1 MiB messages,
 * the receiver's bandwidth (what bench/peers/raw_tcp.c's stream measures).
 */
#define _GNU_SOURCE
#include "gm_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <netvm/gfile.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE NETVM_GMEM_PAGE
#define WIN  (256u * 1024u)

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "gfile_bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static volatile uint64_t sink;
static int quiet_misses = 1;   /* the fill's misses are expected */

/* Touch `touch` bytes of each page of [p, p + len): 8-byte loads. */
static void touch_pages(const unsigned char *p, size_t len, size_t touch)
{
    uint64_t s = 0;
    for (size_t off = 0; off < len; off += PAGE)
        for (size_t k = 0; k < touch; k += 8)
            s += *(const volatile uint64_t *)(p + off + k);
    sink += s;
}

enum { MMAP, MMB, PREAD, NIF };
static const char *if_name[NIF] = { "mmap", "mmb", "pread" };

static double read_once(netvm_ctx_t *ctx, const char *path, int how, size_t touch, uint64_t size)
{
    double t0 = now();
    netvm_gfile_t *f;
    netvm_status_t st = netvm_gfile_open(ctx, path, NULL, &f);
    if (st != NETVM_OK)
        die("open", st);
    if (how == MMAP) {
        void *a;
        size_t len;
        if ((st = netvm_gfile_map(f, &a, &len)) != NETVM_OK)
            die("map", st);
        touch_pages(a, len / PAGE * PAGE, touch);
    } else if (how == MMB) {
        netvm_gfile_win_t *w;
        void *a;
        if ((st = netvm_gfile_window(f, 2, WIN, &w, &a)) != NETVM_OK)
            die("window", st);
        unsigned k = 0;
        for (uint64_t off = 0; off + WIN <= size; off += WIN, k ^= 1) {
            if ((st = netvm_gfile_window_move(w, k, off)) != NETVM_OK)
                die("window_move", st);
            touch_pages((unsigned char *)a + (size_t)k * WIN, WIN, touch);
        }
    } else {
        static unsigned char buf[4 * WIN];
        for (uint64_t off = 0; off < size; off += sizeof buf) {
            size_t got;
            if ((st = netvm_gfile_pread(f, buf, sizeof buf, off, &got)) != NETVM_OK)
                die("pread", st);
            touch_pages(buf, got / PAGE * PAGE, touch);
        }
    }
    double t = now() - t0;
    netvm_gfile_stats_t s;
    netvm_gfile_stats(f, &s);
    if (s.file_reads && !quiet_misses)
        fprintf(stderr, "gfile_bench: %s read %llu blocks from the file (the cache lost them?)\n", if_name[how],
                (unsigned long long)s.file_reads);
    netvm_gfile_close(f);
    return (double)size / t / 1e6;
}

/* The raw stream: a child sends total bytes in 1 MiB messages. */
static double raw_stream(size_t total)
{
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &al)) {
        perror("gfile_bench: socket");
        exit(1);
    }
    const size_t msg = 1 << 20;
    pid_t pid = fork();
    if (pid == 0) {
        int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (connect(s, (struct sockaddr *)&a, sizeof a))
            _exit(1);
        char *b = calloc(1, msg);
        for (size_t sent = 0; sent < total;) {
            ssize_t k = send(s, b, msg, 0);
            if (k <= 0)
                _exit(1);
            sent += (size_t)k;
        }
        _exit(0);
    }
    int s = accept(ls, NULL, NULL);
    char *b = malloc(msg);
    double t0 = 0;
    size_t got = 0;
    while (got < total) {
        ssize_t k = recv(s, b, msg, 0);
        if (k <= 0)
            break;
        if (!got)
            t0 = now();   /* from the first byte: no connection set-up */
        got += (size_t)k;
    }
    double t = now() - t0;
    close(s);
    close(ls);
    free(b);
    waitpid(pid, NULL, 0);
    return (double)got / t / 1e6;
}

int main(int argc, char **argv)
{
    uint64_t size = 64ull << 20;
    int runs = 3;
    const char *dir = "/tmp", *json = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc)
            size = gm_parse_size(argv[++i]);
        else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
            dir = argv[++i];
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json = argv[++i];
        else {
            fprintf(stderr, "usage: gfile_bench [--size BYTES] [--runs N] [--dir DIR] [--json FILE]\n");
            return 2;
        }
    }
    size = size / WIN * WIN;
    if (!size || runs < 1 || runs > 99) {
        fprintf(stderr, "gfile_bench: --size at least 256K, --runs 1..99\n");
        return 2;
    }
    char path[512];
    snprintf(path, sizeof path, "%s/gfile-bench-%d", dir, (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror("gfile_bench: the file");
        return 1;
    }
    unsigned char *chunk = malloc(WIN);
    uint64_t x = 88172645463325252ull;
    for (uint64_t off = 0; off < size; off += WIN) {
        for (size_t i = 0; i < WIN; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(chunk + i, &x, 8);
        }
        if (write(fd, chunk, WIN) != (ssize_t)WIN) {
            perror("gfile_bench: write");
            return 1;
        }
    }
    close(fd);
    free(chunk);

    /* a server slow to answer on a loaded machine is not what this
     * measures: no suspicion before 30 s (as the tests) */
    setenv("NETVM_GMEM_TIMEOUT", "30000", 0);
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st != NETVM_OK)
        die("init", st);
    /* the first read fills the cache (its stores go on in the
     * background); a second one finds every block there */
    double fill = read_once(ctx, path, PREAD, 8, size);
    read_once(ctx, path, PREAD, 8, size);
    quiet_misses = 0;
    double raw[99];
    for (int r = 0; r < runs; r++)
        raw[r] = raw_stream(size);
    double stream = median(raw, runs);
    static const size_t touches[] = { 8, 64, 256, 512, 1024, 2048, 4096 };
    const int nt = (int)(sizeof touches / sizeof touches[0]);
    double bw[NIF][8];
    for (int t = 0; t < nt; t++)
        for (int how = 0; how < NIF; how++) {
            double v[99];
            for (int r = 0; r < runs; r++)
                v[r] = read_once(ctx, path, how, touches[t], size);
            bw[how][t] = median(v, runs);
        }
    printf("file cache read bandwidth, %llu MiB file, median of %d runs (first read, filling the cache: %.0f MB/s)\n",
           (unsigned long long)(size >> 20), runs, fill);
    printf("raw TCP stream (1 MiB messages, loopback): %.0f MB/s\n", stream);
    printf("%-16s", "bytes/page");
    for (int how = 0; how < NIF; how++)
        printf("%10s MB/s %6s", if_name[how], "ratio");
    printf("\n");
    for (int t = 0; t < nt; t++) {
        printf("%-16zu", touches[t]);
        for (int how = 0; how < NIF; how++)
            printf("%15.0f %6.2f", bw[how][t], bw[how][t] / stream);
        printf("\n");
    }
    if (json) {
        FILE *j = fopen(json, "w");
        if (j) {
            fprintf(j, "{\"size\": %llu, \"runs\": %d, \"fill_mbps\": %.1f, \"raw_stream_mbps\": %.1f, \"rows\": [",
                    (unsigned long long)size, runs, fill, stream);
            for (int t = 0; t < nt; t++)
                fprintf(j, "%s{\"touch\": %zu, \"mmap\": %.1f, \"mmb\": %.1f, \"pread\": %.1f}", t ? ", " : "",
                        touches[t], bw[MMAP][t], bw[MMB][t], bw[PREAD][t]);
            fprintf(j, "]}\n");
            fclose(j);
        }
    }
    netvm_gfile_remove(ctx, path, NULL);
    unlink(path);
    netvm_finalize(ctx);
    return 0;
}
