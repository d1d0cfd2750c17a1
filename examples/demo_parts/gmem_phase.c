/* The demo's network-memory phase: rank 0 maps a region four times larger
 * than its budget, fills it, updates it at random and checks every byte,
 * once on network memory (the embedded local servers unless
 * NETVM_GMEM_SERVERS names some) and once on ordinary memory, showing its
 * progress and a summary. */
#include "gmem_phase.h"

#include <netvm/gmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* the region and its budget (a quarter of it) are set at run time */
static uint64_t region_bytes, budget_bytes, nupdates;
#define PAGE_WORDS 512u   /* 4 KiB */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

static void progress(const char *what, uint64_t done, uint64_t total, int *shown)
{
    int pct = (int)(done * 100 / total);
    if (pct / 10 == *shown / 10 && done != total)
        return;
    *shown = pct;
    if (isatty(STDOUT_FILENO)) {
        printf("\r  %-36s %3d%%", what, pct);
        if (done == total)
            printf("\n");
        fflush(stdout);
    } else if (done == total) {
        printf("  %-36s done\n", what);
    }
}

/* The workload: fill, random read-modify-writes, a full check. Returns 1
 * if every word is what it must be. */
static int workload(uint64_t *w, const char *label)
{
    uint64_t n = region_bytes / sizeof *w;
    int shown = -1;
    char what[64];
    snprintf(what, sizeof what, "%s: fill", label);
    for (uint64_t i = 0; i < n; i++) {
        w[i] = mix(i);
        if ((i & 0xfffff) == 0 || i + 1 == n)
            progress(what, i + 1, n, &shown);
    }
    /* updates at random pages: the first word of a page gains k+1 for the
     * k-th update that hits it; the sums are kept in ordinary memory too */
    snprintf(what, sizeof what, "%s: random updates", label);
    shown = -1;
    uint64_t *added = calloc(n / PAGE_WORDS, sizeof *added);
    for (uint64_t k = 0; k < nupdates; k++) {
        uint64_t blk = mix(k + 77) % (n / PAGE_WORDS), i = blk * PAGE_WORDS;
        w[i] += k + 1;
        added[blk] += k + 1;
        if ((k & 0x3fff) == 0 || k + 1 == nupdates)
            progress(what, k + 1, nupdates, &shown);
    }
    snprintf(what, sizeof what, "%s: check every word", label);
    shown = -1;
    int ok = 1;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t want = mix(i) + (i % PAGE_WORDS == 0 ? added[i / PAGE_WORDS] : 0);
        ok &= w[i] == want;
        if ((i & 0xfffff) == 0 || i + 1 == n)
            progress(what, i + 1, n, &shown);
    }
    free(added);
    return ok;
}

int demo_gmem_phase(netvm_ctx_t *ctx, unsigned region_mib)
{
    region_bytes = (uint64_t)region_mib << 20;
    budget_bytes = region_bytes / 4;
    nupdates = region_bytes / 2684;   /* 50 000 for 128 MiB */
    printf("\nnetwork memory: a %llu MiB region with a %llu MiB local budget\n", (unsigned long long)(region_bytes >> 20),
           (unsigned long long)(budget_bytes >> 20));
    netvm_gmem_opts_t o;
    memset(&o, 0, sizeof o);
    o.budget = budget_bytes;
    netvm_gmem_t *g;
    void *addr;
    netvm_status_t st = netvm_gmem_map(ctx, region_bytes, &o, &g, &addr);
    if (st != NETVM_OK) {
        printf("network memory: netvm_gmem_map failed: %s\n", netvm_strerror(st));
        return 0;
    }
    double t0 = now_s();
    int ok = workload(addr, "network memory");
    double tg = now_s() - t0;
    netvm_gmem_stats_t s;
    netvm_gmem_health_t h;
    netvm_gmem_stats(g, &s);
    netvm_gmem_health(g, &h);
    netvm_gmem_unmap(g);

    uint64_t *local = malloc(region_bytes);
    t0 = now_s();
    int lok = local && workload(local, "ordinary memory");
    double tl = now_s() - t0;
    free(local);

    printf("network memory: every word verified: %s (ordinary memory: %s)\n", ok ? "ok" : "WRONG",
           lok ? "ok" : "WRONG");
    printf("  %llu faults (%llu zero-filled, %llu fetched, %llu of them read straight from a server's pool), "
           "read-ahead %llu pages (%llu hits), %llu evictions (%llu dirty)\n",
           (unsigned long long)s.faults, (unsigned long long)s.zero_fills, (unsigned long long)s.remote_fetches,
           (unsigned long long)s.direct_fetches,
           (unsigned long long)s.readahead_issued, (unsigned long long)s.readahead_hits,
           (unsigned long long)s.evictions, (unsigned long long)s.evictions_dirty);
    printf("  %.1f MiB to the servers, %.1f MiB back; fault latency median %.1f us, p99 %.1f us\n",
           (double)s.bytes_out / (1 << 20), (double)s.bytes_in / (1 << 20), (double)s.fault_ns_p50 / 1e3,
           (double)s.fault_ns_p99 / 1e3);
    printf("  %d servers, each page on %d; time %.2f s against %.2f s in ordinary memory (%.1fx)\n",
           h.servers, h.replicas, tg, tl, tl > 0 ? tg / tl : 0.0);
    return ok && lok;
}
