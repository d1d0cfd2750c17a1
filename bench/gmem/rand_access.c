/* netvm_gm_rand: the random-access workload of the swap comparison
 * (bench/gmem/swap_compare) on plain malloc'd memory, so Linux's own paging
 * (swap to a disk file, swap on zram, or none) is what serves its misses.
 * gmem_bench --mode random_rw runs the same workload (gm_random_access: the
 * same pages in the same order for the same seed) over network memory.
 *   --size W      working set (bytes, K/M/G suffixes)
 *   --accesses N  timed random accesses after every page was written once
 *   --writes P    percent of the accesses that write
 * Rows: rand_lat (per access, us: median, p99, mean) and rand_ops (accesses
 * per second), each with the region's resident bytes at the end (from
 * /proc/self/smaps) and the major faults taken (getrusage). */
#include "gm_bench.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>

static void usage(void)
{
    fprintf(stderr, "usage: netvm_gm_rand --size W [--accesses N] [--writes PCT] [--seed S]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    size_t size = 0;
    uint64_t accesses = 100000, seed = 1;
    unsigned writes = 0;
    if (argc % 2 == 0)
        usage();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = gm_parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--accesses"))
            accesses = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--writes"))
            writes = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else
            usage();
    }
    size_t pages = size / GM_PAGE;
    if (!pages || !accesses || writes > 100)
        usage();
    /* the latency record is allocated (and touched) first: it is the
     * program's only other memory, a small part of the limit */
    uint64_t *lat = malloc(accesses * sizeof *lat);
    uint8_t *base = NULL;
    if (!lat || posix_memalign((void **)&base, GM_PAGE, pages * GM_PAGE)) {
        fprintf(stderr, "netvm_gm_rand: out of memory\n");
        return 1;
    }
    memset(lat, 0, accesses * sizeof *lat);
    /* 4 KiB pages, as network memory pages: a transparent huge page would
     * swap as 512 at once */
    madvise(base, pages * GM_PAGE, MADV_NOHUGEPAGE);
    uint64_t t0 = gm_now_ns();
    for (size_t p = 0; p < pages; p++)
        gm_fill_page((uint64_t *)(base + p * GM_PAGE), p);
    double fill_s = (double)(gm_now_ns() - t0) / 1e9;
    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t bad = 0;
    t0 = gm_now_ns();
    if (gm_random_access(base, pages, accesses, writes, seed, lat, &bad)) {
        fprintf(stderr, "netvm_gm_rand: page %llu read back wrong\n", (unsigned long long)bad);
        return 1;
    }
    double secs = (double)(gm_now_ns() - t0) / 1e9;
    getrusage(RUSAGE_SELF, &ru1);
    double rss = (double)gm_resident(base, pages * GM_PAGE);
    double majflt = (double)(ru1.ru_majflt - ru0.ru_majflt);
    gm_pct_t l = gm_pct(lat, accesses);
    int rows = 0;
    gm_row(&rows, "rand_lat", size, "us", l.p50, "p99", l.p99, "mean", l.mean, "writes", (double)writes,
           "iters", (double)accesses, "resident", rss, "majflt", majflt, "fill_s", fill_s, (const char *)NULL);
    gm_row(&rows, "rand_ops", size, "ops/s", (double)accesses / secs, "writes", (double)writes, "iters",
           (double)accesses, "seconds", secs, (const char *)NULL);
    printf("{\"done\":%d}\n", rows);
    free(base);
    free(lat);
    return 0;
}
