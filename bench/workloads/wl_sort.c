/* wl_sort: sort of a large array of 64-bit keys with the C library's qsort
 * (bench/workloads/run).
 *   wl_sort --size W [--seed S]
 * W bytes of seeded pseudo-random keys; glibc's qsort is a merge sort that
 * mallocs a buffer as large as the array when it can, so the working set is
 * about 2 W (the run measures it).  Checked: the result is nondecreasing and
 * holds the same keys (sum and xor of all keys unchanged).  Timed: qsort.
 * Row "sort": million keys sorted per second, and the seconds. */
#include "wl.h"

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    size_t size = 512ull << 20;
    uint64_t seed = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--size"))
            size = gm_parse_size(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else
            size = 0;
    }
    size_t n = size / 8;
    if (n < 2 || argc % 2 == 0) {
        fprintf(stderr, "usage: wl_sort --size W [--seed S]\n");
        return 2;
    }
    uint64_t *a = wl_alloc(n * 8, "the keys");
    uint64_t sum = 0, xr = 0;
    for (size_t i = 0; i < n; i++) {
        a[i] = wl_hash(seed, i);
        sum += a[i];
        xr ^= a[i];
    }
    uint64_t t0 = gm_now_ns();
    qsort(a, n, 8, cmp_key);
    double s = (double)(gm_now_ns() - t0) / 1e9;
    uint64_t sum2 = a[0], xr2 = a[0];
    for (size_t i = 1; i < n; i++) {
        if (a[i] < a[i - 1])
            wl_fail("sort: key %zu (%016llx) < key %zu (%016llx)", i, (unsigned long long)a[i], i - 1,
                    (unsigned long long)a[i - 1]);
        sum2 += a[i];
        xr2 ^= a[i];
    }
    if (sum2 != sum || xr2 != xr)
        wl_fail("sort: the keys changed (sum %016llx -> %016llx, xor %016llx -> %016llx)",
                (unsigned long long)sum, (unsigned long long)sum2, (unsigned long long)xr,
                (unsigned long long)xr2);
    int rows = 0;
    gm_row(&rows, "sort", n * 8, "Mkeys/s", (double)n / s / 1e6, "seconds", s, "verified", 1.0, "peak_rss",
           wl_peak_rss(), (const char *)NULL);
    printf("{\"done\":%d}\n", rows);
    free(a);
    return 0;
}
