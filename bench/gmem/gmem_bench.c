/* gmem_bench: network memory through its public API (include/netvm/gmem.h),
 * the measurements of issue 10's targets (docs/perf-issue10.md). A process
 * of its own (rank 0 of 1); servers as netvm_gmem_map finds them
 * (NETVM_GMEM_SERVERS, else embedded ones on loopback; NETVM_GMEM_STORE=local
 * selects the pager's local store). Every mode first writes every page of
 * the region (word 0: the page's number, the rest pseudo-random) and syncs,
 * so later accesses find the pages on the servers; every read checks word 0
 * (a stale or foreign page stops the run with exit 1).
 *
 *   fault_lat     pages touched once each in a random order, read-ahead off,
 *                 --writes percent of them written; an access counts as a
 *                 fault when mincore(2) said just before that the page was
 *                 not resident. Row fault_lat: median/p99/mean of those, by
 *                 the program's clock, with the pager's own percentiles
 *                 (netvm_gmem_stats) beside them
 *   fault_rate    --threads application threads touch disjoint random pages;
 *                 row fault_rate: faults (by the pager's count) per second
 *   seqscan       --passes sequential passes (1) reading every byte, read-ahead on;
 *                 row seqscan_bw: the first pass after the fill, region bytes /
 *                 pass time (MB/s, 1e6); with 2 passes or more also row
 *                 seqscan_later_bw over the others (the client's mappings of
 *                 the servers' pools are made by then: docs/performance.md,
 *                 "Evicted pages reused")
 *   gms_fraction  the GMS paper's experiment: sequential passes reading the
 *                 first 1/64 .. 1 of each page; row gms_bw per fraction
 *                 (size = 4096 x fraction: the bytes touched per page)
 *   random_rw     --accesses uniformly random accesses (--writes percent
 *                 writes; gm_random_access, the swap comparison's workload),
 *                 budget --budget; rows random_rw_lat (per access) and
 *                 random_rw_ops, with the region's largest resident size
 *                 read from /proc/self/smaps between batches of accesses
 * Output: one JSON object per line, then {"done":ROWS} (gm_bench.h). */
#include "gm_bench.h"

#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <netvm/gmem.h>

static struct {
    const char *mode;
    size_t size, budget;
    int readahead, readahead_set, threads, passes;
    uint64_t accesses, seed;
    unsigned writes;
    const char *fractions;
} o = { .mode = "fault_lat", .size = 64u << 20, .budget = 4u << 20, .threads = 2, .passes = 1, .accesses = 0, .seed = 1,
        .fractions = "64,32,16,8,4,2,1" };

static netvm_gmem_t *region;
static uint8_t *base;
static size_t pages;
static int rows;

static void fail(const char *what, netvm_status_t st)
{
    fprintf(stderr, "gmem_bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

static void bad_page(uint64_t pg, uint64_t got)
{
    fprintf(stderr, "gmem_bench: page %llu reads as page %llu: stale or foreign data\n",
            (unsigned long long)pg, (unsigned long long)got);
    exit(1);
}

static netvm_gmem_stats_t stats(void)
{
    netvm_gmem_stats_t s;
    netvm_status_t st = netvm_gmem_stats(region, &s);
    if (st != NETVM_OK)
        fail("netvm_gmem_stats", st);
    return s;
}

/* Write every page once, in order (fresh memory being initialised), and
 * sync. With read-ahead on (the sequential modes) it is measured:
 * fill_bw, the first write of fresh network memory, sync included. */
static void fill(int timed)
{
    uint64_t t0 = gm_now_ns();
    for (size_t p = 0; p < pages; p++)
        gm_fill_page((uint64_t *)(base + p * GM_PAGE), p);
    netvm_status_t st = netvm_gmem_sync(region);
    if (st != NETVM_OK)
        fail("netvm_gmem_sync", st);
    double secs = (double)(gm_now_ns() - t0) / 1e9;
    if (timed) {
        netvm_gmem_stats_t s = stats();
        gm_row(&rows, "fill_bw", GM_PAGE, "MB/s", (double)pages * GM_PAGE / secs / 1e6, "seconds", secs, "pages",
               (double)pages, "faults", (double)s.faults, "zero_fills", (double)s.zero_fills, (const char *)NULL);
    }
}

static int resident(size_t pg)
{
    unsigned char v = 0;
    return mincore(base + pg * GM_PAGE, GM_PAGE, &v) == 0 && (v & 1);
}

static void mode_fault_lat(void)
{
    uint32_t *perm = gm_perm(pages, o.seed);
    size_t n = o.accesses && o.accesses < pages ? o.accesses : pages;
    uint64_t *lat = malloc(n * sizeof *lat), rs = o.seed ^ 0x5555;
    if (!perm || !lat)
        exit(1);
    size_t nf = 0, hits = 0;
    netvm_gmem_stats_t s0 = stats();
    for (size_t i = 0; i < n; i++) {
        size_t pg = perm[i];
        volatile uint64_t *w = (volatile uint64_t *)(base + pg * GM_PAGE);
        int was = resident(pg), write = (unsigned)(gm_rand(&rs) % 100) < o.writes;
        uint64_t t0 = gm_now_ns(), got;
        if (write)
            w[1] = w[1] + 1;
        got = w[0];
        uint64_t dt = gm_now_ns() - t0;
        if (got != pg)
            bad_page(pg, got);
        if (was)
            hits++;
        else
            lat[nf++] = dt;
    }
    netvm_gmem_stats_t s1 = stats();
    gm_pct_t l = gm_pct(lat, nf);
    gm_row(&rows, "fault_lat", GM_PAGE, "us", l.p50, "p99", l.p99, "mean", l.mean, "writes", (double)o.writes,
           "faults", (double)nf, "resident_hits", (double)hits,
           "pager_faults", (double)(s1.faults - s0.faults),
           "remote_fetches", (double)(s1.remote_fetches - s0.remote_fetches),
           "writebacks", (double)(s1.writebacks - s0.writebacks),
           "wp_faults", (double)(s1.wp_faults - s0.wp_faults), "placed_dirty", (double)(s1.placed_dirty - s0.placed_dirty),
           "pager_p50", (double)s1.fault_ns_p50 / 1e3, "pager_p99", (double)s1.fault_ns_p99 / 1e3,
           (const char *)NULL);
    free(perm);
    free(lat);
}

struct rate_arg { const uint32_t *perm; size_t from, to; pthread_barrier_t *bar; };

static void *rate_thread(void *p)
{
    struct rate_arg *a = p;
    pthread_barrier_wait(a->bar);
    for (size_t i = a->from; i < a->to; i++) {
        size_t pg = a->perm[i];
        uint64_t got = *(volatile uint64_t *)(base + pg * GM_PAGE);
        if (got != pg)
            bad_page(pg, got);
    }
    pthread_barrier_wait(a->bar);
    return NULL;
}

static void mode_fault_rate(void)
{
    uint32_t *perm = gm_perm(pages, o.seed);
    size_t n = o.accesses && o.accesses < pages ? o.accesses : pages;
    int t = o.threads;
    pthread_t th[64];
    struct rate_arg a[64];
    pthread_barrier_t bar;
    if (!perm || t < 1 || t > 64)
        exit(1);
    pthread_barrier_init(&bar, NULL, (unsigned)t + 1);
    for (int i = 0; i < t; i++) {
        a[i] = (struct rate_arg){ perm, n * (size_t)i / (size_t)t, n * (size_t)(i + 1) / (size_t)t, &bar };
        if (pthread_create(&th[i], NULL, rate_thread, &a[i]))
            exit(1);
    }
    netvm_gmem_stats_t s0 = stats();
    pthread_barrier_wait(&bar);
    uint64_t t0 = gm_now_ns();
    pthread_barrier_wait(&bar);
    double secs = (double)(gm_now_ns() - t0) / 1e9;
    for (int i = 0; i < t; i++)
        pthread_join(th[i], NULL);
    netvm_gmem_stats_t s1 = stats();
    double faults = (double)(s1.faults - s0.faults);
    gm_row(&rows, "fault_rate", GM_PAGE, "faults/s", faults / secs, "threads", (double)t, "faults", faults,
           "accesses", (double)n, "seconds", secs, (const char *)NULL);
    free(perm);
}

/* One sequential pass reading the first words_per_page words of each page;
 * returns seconds. */
static double scan(unsigned words_per_page, uint64_t *sum)
{
    uint64_t t0 = gm_now_ns(), acc = 0;
    for (size_t p = 0; p < pages; p++) {
        const volatile uint64_t *w = (const volatile uint64_t *)(base + p * GM_PAGE);
        uint64_t got = w[0];
        if (got != p)
            bad_page(p, got);
        for (unsigned i = 1; i < words_per_page; i++)
            acc += w[i];
    }
    *sum += acc;
    return (double)(gm_now_ns() - t0) / 1e9;
}

/* A row over npass passes: their bytes over their time. */
static void scan_row(const char *metric, unsigned divisor, int npass)
{
    uint64_t sum = 0;
    netvm_gmem_stats_t s0 = stats();
    double secs = 0;
    for (int i = 0; i < npass; i++)
        secs += scan(GM_PAGE / 8 / divisor, &sum);
    netvm_gmem_stats_t s1 = stats();
    gm_row(&rows, metric, GM_PAGE / divisor, "MB/s", (double)pages * npass * GM_PAGE / secs / 1e6,
           "fraction", 1.0 / divisor, "seconds", secs, "passes", (double)npass, "pages", (double)pages * npass,
           "remote_fetches", (double)(s1.remote_fetches - s0.remote_fetches),
           "readahead_hits", (double)(s1.readahead_hits - s0.readahead_hits),
           "readahead_issued", (double)(s1.readahead_issued - s0.readahead_issued),
           "evictions_dirty", (double)(s1.evictions_dirty - s0.evictions_dirty),
           "placed_dirty", (double)(s1.placed_dirty - s0.placed_dirty),
           "checksum_low", (double)(sum & 0xffff), (const char *)NULL);
}

/* The first pass after the fill alone: it pays the first touches of the
 * servers' pools, which later passes do not (and several passes give a
 * profiler a scan longer than the fill). */
static void mode_seqscan(void)
{
    scan_row("seqscan_bw", 1, 1);
    if (o.passes > 1)
        scan_row("seqscan_later_bw", 1, o.passes - 1);
}

static void mode_gms_fraction(void)
{
    char *copy = strdup(o.fractions), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        unsigned d = (unsigned)atoi(t);
        if (d < 1 || d > 512 || (d & (d - 1))) {
            fprintf(stderr, "gmem_bench: --fractions: divisors of a page, powers of two 1..512\n");
            exit(2);
        }
        scan_row("gms_bw", d, 1);
    }
    free(copy);
}

static void mode_random_rw(void)
{
    uint64_t n = o.accesses ? o.accesses : 200000, bad = 0;
    uint64_t *lat = malloc(n * sizeof *lat), chunk = 8192, rs = o.seed;
    if (!lat)
        exit(1);
    long long rmax = 0;
    double secs = 0;
    netvm_gmem_stats_t s0 = stats();
    for (uint64_t done = 0; done < n; done += chunk) {
        uint64_t k = n - done < chunk ? n - done : chunk;
        uint64_t t0 = gm_now_ns();
        /* the sequence goes on where the previous batch stopped: one seed
         * state through the whole run, as netvm_gm_rand's single call */
        if (gm_random_access(base, pages, k, o.writes, rs, lat + done, &bad))
            bad_page(bad, ~0ull);
        secs += (double)(gm_now_ns() - t0) / 1e9;
        rs += k * 0x9e3779b97f4a7c15ull;
        long long r = gm_resident(base, pages * GM_PAGE);
        if (r > rmax)
            rmax = r;
    }
    netvm_gmem_stats_t s1 = stats();
    gm_pct_t l = gm_pct(lat, n);
    gm_row(&rows, "random_rw_lat", o.size, "us", l.p50, "p99", l.p99, "mean", l.mean, "writes", (double)o.writes,
           "iters", (double)n, "resident", (double)rmax, "budget", (double)o.budget,
           "faults", (double)(s1.faults - s0.faults), "evictions", (double)(s1.evictions - s0.evictions),
           "evictions_dirty", (double)(s1.evictions_dirty - s0.evictions_dirty),
           "wp_faults", (double)(s1.wp_faults - s0.wp_faults), "placed_dirty", (double)(s1.placed_dirty - s0.placed_dirty),
           (const char *)NULL);
    gm_row(&rows, "random_rw_ops", o.size, "ops/s", (double)n / secs, "writes", (double)o.writes, "iters",
           (double)n, "seconds", secs, (const char *)NULL);
    free(lat);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: gmem_bench [--mode fault_lat|fault_rate|seqscan|gms_fraction|random_rw]\n"
            "       [--size BYTES (64M)] [--budget BYTES (4M)] [--readahead PAGES (-1: none; default\n"
            "       -1 except seqscan and gms_fraction: the pager's default)] [--accesses N]\n"
            "       [--writes PCT] [--threads N (2)] [--seed S] [--fractions 64,32,...,1]\n"
            "       [--passes N (seqscan: N passes: the first, and the others together; 1)]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc % 2 == 0)
        usage();
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--mode"))
            o.mode = v;
        else if (!strcmp(k, "--size"))
            o.size = gm_parse_size(v);
        else if (!strcmp(k, "--budget"))
            o.budget = gm_parse_size(v);
        else if (!strcmp(k, "--readahead"))
            o.readahead = atoi(v), o.readahead_set = 1;
        else if (!strcmp(k, "--accesses"))
            o.accesses = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--writes"))
            o.writes = (unsigned)atoi(v);
        else if (!strcmp(k, "--threads"))
            o.threads = atoi(v);
        else if (!strcmp(k, "--seed"))
            o.seed = strtoull(v, NULL, 10);
        else if (!strcmp(k, "--fractions"))
            o.fractions = v;
        else if (!strcmp(k, "--passes"))
            o.passes = atoi(v);
        else
            usage();
    }
    int seq = !strcmp(o.mode, "seqscan") || !strcmp(o.mode, "gms_fraction");
    if (o.size < GM_PAGE || o.budget < GM_PAGE || o.writes > 100 || o.passes < 1)
        usage();
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st != NETVM_OK)
        fail("netvm_init", st);
    netvm_gmem_opts_t opts = { .budget = o.budget, .readahead = o.readahead_set ? o.readahead : seq ? 0 : -1 };
    void *addr;
    st = netvm_gmem_map(ctx, o.size, &opts, &region, &addr);
    if (st != NETVM_OK)
        fail("netvm_gmem_map", st);
    base = addr;
    pages = netvm_gmem_len(region) / GM_PAGE;
    fill(seq);
    if (!strcmp(o.mode, "fault_lat"))
        mode_fault_lat();
    else if (!strcmp(o.mode, "fault_rate"))
        mode_fault_rate();
    else if (!strcmp(o.mode, "seqscan"))
        mode_seqscan();
    else if (!strcmp(o.mode, "gms_fraction"))
        mode_gms_fraction();
    else if (!strcmp(o.mode, "random_rw"))
        mode_random_rw();
    else
        usage();
    st = netvm_gmem_unmap(region);
    if (st != NETVM_OK)
        fail("netvm_gmem_unmap", st);
    netvm_finalize(ctx);
    printf("{\"done\":%d}\n", rows);
    return 0;
}
