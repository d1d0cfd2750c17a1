/* What the network-memory benchmarks share (bench/gmem): the clock, the
 * random sequences (so the swap program and gmem_bench touch the same pages
 * in the same order), per-access latency records and their percentiles, a
 * region's resident size from /proc/self/smaps, and the output row: one
 * JSON object per line, then {"done":ROWS}, as bench/peers/raw_tcp.c. */
#ifndef NV_BENCH_GM_BENCH_H
#define NV_BENCH_GM_BENCH_H

#define _GNU_SOURCE
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GM_PAGE 4096u

/* "64M", "4096", "1.5G": bytes (powers of 1024); 0 if it is not a size. */
static inline size_t gm_parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'G': case 'g': v *= 1024; /* fall through */
    case 'M': case 'm': v *= 1024; /* fall through */
    case 'K': case 'k': v *= 1024; end++; break;
    case 0: break;
    default: return 0;
    }
    return *end ? 0 : (size_t)v;
}

static inline uint64_t gm_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* splitmix64: one 64-bit state, the same sequence on every machine. */
static inline uint64_t gm_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A random permutation of 0..n-1 (Fisher-Yates). */
static inline uint32_t *gm_perm(size_t n, uint64_t seed)
{
    uint32_t *p = malloc(n * sizeof *p);
    if (!p)
        return NULL;
    for (size_t i = 0; i < n; i++)
        p[i] = (uint32_t)i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)(gm_rand(&seed) % i);
        uint32_t t = p[i - 1];
        p[i - 1] = p[j];
        p[j] = t;
    }
    return p;
}

static int gm_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Latencies in ns: sorted in place; q in [0,1]. */
typedef struct { double p50, p99, mean; } gm_pct_t;
static inline gm_pct_t gm_pct(uint64_t *ns, size_t n)
{
    gm_pct_t r = { 0, 0, 0 };
    if (!n)
        return r;
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)ns[i];
    qsort(ns, n, sizeof *ns, gm_cmp_u64);
    r.p50 = (double)ns[n / 2] / 1e3;
    r.p99 = (double)ns[(size_t)((double)(n - 1) * 0.99)] / 1e3;
    r.mean = sum / (double)n / 1e3;
    return r;
}

/* Page contents: word 0 is the page's number, the rest pseudo-random (so a
 * compressing swap device, zram, gets no free ride from constant pages and
 * a page read back from anywhere can be checked). */
static inline void gm_fill_page(uint64_t *w, uint64_t page)
{
    uint64_t s = page * 0x2545f4914f6cdd1dull + 1;
    w[0] = page;
    for (unsigned i = 1; i < GM_PAGE / 8; i++)
        w[i] = gm_rand(&s);
}

/* The random-access workload: n accesses, each to a uniformly random page
 * of the pages at base, write_pct of them writes (word 1 of the page
 * incremented), the others reads (word 0 checked against the page's
 * number: a stale or foreign page stops the run). lat[i] gets the ns of
 * access i. Returns 0, or -1 with the bad page's number in *bad. */
static inline int gm_random_access(uint8_t *base, size_t pages, uint64_t n, unsigned write_pct,
                                   uint64_t seed, uint64_t *lat, uint64_t *bad)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = gm_rand(&seed);
        uint64_t pg = r % pages;
        volatile uint64_t *w = (volatile uint64_t *)(base + pg * GM_PAGE);
        int write = (unsigned)((r >> 40) % 100) < write_pct;
        uint64_t t0 = gm_now_ns();
        if (write) {
            w[1] = w[1] + 1;
        } else if (w[0] != pg) {
            *bad = pg;
            return -1;
        }
        lat[i] = gm_now_ns() - t0;
    }
    return 0;
}

/* Bytes of [addr, addr+len) resident, from /proc/self/smaps: the kernel's
 * count, not the pager's (the Rss of every mapping inside the range). */
static inline long long gm_resident(const void *addr, size_t len)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    uintptr_t lo = (uintptr_t)addr, hi = lo + len;
    int inside = 0;
    long long rss = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        long long kb;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = a >= lo && b <= hi;
        else if (inside && sscanf(line, "Rss: %lld kB", &kb) == 1)
            rss += kb * 1024;
    }
    fclose(f);
    return rss;
}

/* One output row: metric, size, unit, value, then "key":number pairs
 * (NULL-terminated list of const char *, double). */
static inline void gm_row(int *rows, const char *metric, size_t size, const char *unit, double value, ...)
{
    va_list ap;
    va_start(ap, value);
    printf("{\"metric\":\"%s\",\"size\":%zu,\"unit\":\"%s\",\"value\":%.9g", metric, size, unit, value);
    for (const char *k; (k = va_arg(ap, const char *));)
        printf(",\"%s\":%.9g", k, va_arg(ap, double));
    printf("}\n");
    fflush(stdout);
    va_end(ap);
    (*rows)++;
}

#endif
