/* Zero-ahead (pager_ra.c): writing fresh memory in order places the
 * never-stored pages ahead of the writer with each fault, so a fill of H
 * pages takes far fewer than H faults; without read-ahead it takes one a
 * page. Pages placed ahead and never written read as zeros, written ones
 * keep their data through evictions, and a page written out of order in
 * the middle of the run is not overwritten with zeros.
 * Usage: zero_ahead [PAGES] [on|off] (PAGES >= 1024; a quarter written) */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192;
    int on = !(argc > 2 && !strcmp(argv[2], "off"));
    CHECK(n >= 1024);
    /* room for the whole fill: zero-ahead places no more than the budget
     * has room for, and how fast the evictor makes room is not what this
     * tests; the passes below evict */
    netvm_gmem_opts_t o = { .budget = n / 2 * GPAGE, .readahead = on ? 0 : -1 };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), n * GPAGE, &o, &g, (void **)&m));
    uint64_t h = n / 4, odd = h + 10;
    /* a page just past the half written first: the run placed ahead of
     * the writer reaches it, and must leave it alone */
    gt_fill(m + odd * GPAGE, odd, 7);
    for (uint64_t p = 0; p < h; p++)
        gt_fill(m + p * GPAGE, p, 1);
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    printf("zero_ahead (%s): %llu pages written in order, %llu faults, %llu zero fills\n", on ? "on" : "off",
           (unsigned long long)h, (unsigned long long)s.faults, (unsigned long long)s.zero_fills);
    if (on && s.faults > h / 4)
        FAILF("%llu faults to write %llu fresh pages in order: zero-ahead placed nothing ahead",
              (unsigned long long)s.faults, (unsigned long long)h);
    if (!on && s.faults < h)
        FAILF("%llu faults for %llu pages without read-ahead: pages were placed ahead",
              (unsigned long long)s.faults, (unsigned long long)h);
    /* twice over everything, evicting as it goes */
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t p = 0; p < n; p++) {
            uint32_t v = p < h ? 1 : p == odd ? 7 : 0;   /* the rest: zeros, placed ahead or never touched */
            if (!gt_check(m + p * GPAGE, p, v))
                FAILF("pass %d: page %llu does not hold version %u", pass, (unsigned long long)p, v);
        }
    CHECK_OK(netvm_gmem_unmap(g));
    printf("zero_ahead: ok\n");
    return 0;
}
