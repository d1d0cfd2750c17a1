/* Random writes over a region 4x its budget, verified after many eviction
 * cycles (every page checked against the version last written), with the
 * budget checked in resident memory as the kernel counts it (mincore)
 * throughout. Usage: random BUDGET_PAGES ROUNDS */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 1024;
    int rounds = argc > 2 ? atoi(argv[2]) : 4;
    size_t npages = 4 * budget;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    uint32_t *ver = calloc(npages, sizeof *ver);
    CHECK(ver);
    uint64_t seed = 0x1234567;
    size_t worst = 0;
    for (int round = 0; round < rounds; round++) {
        /* writes to random pages (a whole page or one word of it) and reads */
        for (size_t i = 0; i < 2 * npages; i++) {
            uint64_t p = gt_rand(&seed) % npages;
            if (gt_rand(&seed) % 3 == 0) {
                if (!gt_check(m + p * GPAGE, p, ver[p])) {
                    uint64_t w0 = ((uint64_t *)(m + p * GPAGE))[0];
                    FAILF("round %d step %zu: page %llu: version %u expected, word 0 is %llx (version %llu)", round,
                          i, (unsigned long long)p, ver[p], (unsigned long long)w0,
                          (unsigned long long)((w0 ^ (p * 0x9E3779B97F4A7C15ull)) >> 32));
                }
            } else {
                gt_fill(m + p * GPAGE, p, ++ver[p]);
            }
            if (i % 257 == 0) {
                size_t res = gt_resident(m, npages * GPAGE);
                if (res > worst)
                    worst = res;
            }
        }
        /* a sequential pass verifies everything (and reads ahead) */
        for (size_t p = 0; p < npages; p++)
            if (!gt_check(m + p * GPAGE, p, ver[p]))
                FAILF("round %d: page %zu does not hold version %u", round, p, ver[p]);
    }
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    printf("random: %zu pages, budget %zu: faults %llu (zero %llu), fetches %llu, evictions %llu (dirty %llu), "
           "writebacks %llu, read-ahead %llu (hits %llu, waste %llu), fault p50 %llu ns p99 %llu ns, "
           "most resident %zu pages (%.2f%% of the budget)\n",
           npages, budget, (unsigned long long)s.faults, (unsigned long long)s.zero_fills,
           (unsigned long long)s.remote_fetches, (unsigned long long)s.evictions,
           (unsigned long long)s.evictions_dirty, (unsigned long long)s.writebacks,
           (unsigned long long)s.readahead_issued, (unsigned long long)s.readahead_hits,
           (unsigned long long)s.readahead_waste, (unsigned long long)s.fault_ns_p50,
           (unsigned long long)s.fault_ns_p99, worst, 100.0 * (double)worst / (double)budget);
    CHECK(s.evictions_dirty > npages);
    CHECK(s.remote_fetches > npages);
    CHECK(worst <= budget + budget / 50);
    CHECK(s.resident_pages <= budget);
    CHECK_OK(netvm_gmem_unmap(g));
    free(ver);
    printf("random: ok\n");
    return 0;
}
