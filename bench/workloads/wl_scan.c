/* wl_scan: sequential scan of a large array (bench/workloads/run).
 *   wl_scan --size W [--passes P] [--seed S]
 * Fills W bytes of 64-bit words from a seeded hash (the fill's sum is the
 * expected checksum), then reads the whole array P times, summing it; every
 * pass must give the fill's sum.  Timed: the passes.  Row "scan": MB/s read. */
#include "wl.h"

int main(int argc, char **argv)
{
    size_t size = 1ull << 30;
    unsigned passes = 4;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = gm_parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--passes"))
            passes = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else
            size = 0;
    }
    size_t n = size / 8;
    if (!n || !passes || argc % 2 == 0) {
        fprintf(stderr, "usage: wl_scan --size W [--passes P] [--seed S]\n");
        return 2;
    }
    uint64_t *a = wl_alloc(n * 8, "the array");
    uint64_t expect = 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = wl_hash(seed, i);
        expect += a[i];
    }
    uint64_t t0 = gm_now_ns();
    for (unsigned p = 0; p < passes; p++) {
        uint64_t sum = 0;
        for (size_t i = 0; i < n; i++)
            sum += ((volatile uint64_t *)a)[i];
        if (sum != expect)
            wl_fail("scan pass %u: sum %016llx, the fill's %016llx", p, (unsigned long long)sum,
                    (unsigned long long)expect);
    }
    double s = (double)(gm_now_ns() - t0) / 1e9;
    int rows = 0;
    gm_row(&rows, "scan", n * 8, "MB/s", (double)n * 8 * passes / s / 1e6, "seconds", s, "passes", (double)passes,
           "verified", 1.0, "peak_rss", wl_peak_rss(), (const char *)NULL);
    printf("{\"done\":%d}\n", rows);
    free(a);
    return 0;
}
