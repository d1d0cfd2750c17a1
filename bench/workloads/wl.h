/* What the workloads of bench/workloads/run share, beside gm_bench.h (the
 * clock, splitmix64, percentiles, size parsing and the output row): a
 * stateless hash for array contents, the process's peak resident size, and
 * a loud failure when a check fails.  Every program prints one row
 * {"metric":WORKLOAD,...,"verified":1,"peak_rss":BYTES} and {"done":1}, or
 * exits 1 with "VERIFY FAILED: ..." on stderr. */
#ifndef NV_BENCH_WL_H
#define NV_BENCH_WL_H

#include "../gmem/gm_bench.h"

/* splitmix64's finaliser of (seed, i): element i of a seeded array, without
 * a sequential state, so a check can recompute any element. */
static inline uint64_t wl_hash(uint64_t seed, uint64_t i)
{
    uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i + 1) * 0xd1b54a32d192ed03ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The largest resident size this process had (VmHWM), bytes; -1 unknown. */
static inline double wl_peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    double kb = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %lf kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

__attribute__((format(printf, 1, 2), noreturn)) static inline void wl_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("VERIFY FAILED: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

static inline void *wl_alloc(size_t bytes, const char *what)
{
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "cannot allocate %zu bytes for %s\n", bytes, what);
        exit(2);
    }
    return p;
}

#endif
