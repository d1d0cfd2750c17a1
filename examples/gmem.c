/* Network memory: a region four times larger than the memory it may keep
 * resident, filled, then verified, with the pager's statistics printed.
 * With no servers configured, netvm starts two memory servers on loopback
 * for this process; NETVM_GMEM_SERVERS names real ones (docs/gmem.md).
 *
 *   ./gmem [MiB]      (default 64 MiB, budget 16 MiB) */
#include <netvm/gmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 64;
    size_t len = mib << 20, words = len / sizeof(uint64_t);
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm_init: %s\n", netvm_strerror(st));
        return 1;
    }
    netvm_gmem_opts_t opts = { .budget = len / 4 };
    netvm_gmem_t *region;
    uint64_t *mem;
    st = netvm_gmem_map(ctx, len, &opts, &region, (void **)&mem);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm_gmem_map: %s\n", netvm_strerror(st));
        return 1;
    }
    /* fill: every word its own value, so any lost or stale page shows */
    for (size_t i = 0; i < words; i++)
        mem[i] = i * 0x9E3779B97F4A7C15ull;
    size_t bad = 0;
    for (size_t i = 0; i < words; i++)
        bad += mem[i] != i * 0x9E3779B97F4A7C15ull;
    netvm_gmem_stats_t s;
    netvm_gmem_health_t h;
    netvm_gmem_stats(region, &s);
    netvm_gmem_health(region, &h);
    printf("gmem: %zu MiB region, budget %zu MiB: verified, %zu wrong words\n", mib, mib / 4, bad);
    printf("gmem: faults %llu (%llu zero-filled), fetched %llu pages, read ahead %llu (%llu hits, %llu wasted)\n",
           (unsigned long long)s.faults, (unsigned long long)s.zero_fills, (unsigned long long)s.remote_fetches,
           (unsigned long long)s.readahead_issued, (unsigned long long)s.readahead_hits,
           (unsigned long long)s.readahead_waste);
    printf("gmem: evicted %llu pages (%llu dirty), %llu page copies written back, %.1f MiB in, %.1f MiB out\n",
           (unsigned long long)s.evictions, (unsigned long long)s.evictions_dirty, (unsigned long long)s.writebacks,
           (double)s.bytes_in / (1 << 20), (double)s.bytes_out / (1 << 20));
    printf("gmem: resident %llu of %llu budget pages; fault latency p50 %.1f us, p99 %.1f us, max %.1f us\n",
           (unsigned long long)s.resident_pages, (unsigned long long)s.budget_pages, (double)s.fault_ns_p50 / 1e3,
           (double)s.fault_ns_p99 / 1e3, (double)s.fault_ns_max / 1e3);
    printf("gmem: %d of %d servers alive, %d replicas, %llu pages stored, %llu lost\n", h.servers_alive, h.servers,
           h.replicas, (unsigned long long)h.pages_stored, (unsigned long long)h.pages_lost);
    netvm_gmem_unmap(region);
    netvm_finalize(ctx);
    return bad != 0;
}
