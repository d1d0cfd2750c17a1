/* How read-ahead runs are placed (pager_ra.c). A sequential pass of
 * read-modify-writes (a page read, then written, page after page: what a
 * merge sort does copying a merged run back, or a program updating an
 * array in order) must switch read-ahead to placing its runs writable and
 * dirty, so that most pages cost no write-protect fault; with
 * NETVM_GMEM_READ_WP=always every page read ahead and then written pays
 * one. A sequential pass of reads alone must place nothing dirty. Every
 * page keeps its data through the evictions of both passes (the region is
 * four times the budget), so a page placed dirty and then written is
 * written back, never dropped.
 * Usage: ra_wp [PAGES] [auto|always] (PAGES >= 2048) */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192;
    int always = argc > 2 && !strcmp(argv[2], "always");
    CHECK(n >= 2048);
    CHECK(setenv("NETVM_GMEM_READ_WP", always ? "always" : "auto", 1) == 0);
    netvm_gmem_opts_t o = { .budget = n / 4 * GPAGE, .readahead = 0 };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), n * GPAGE, &o, &g, (void **)&m));
    for (uint64_t p = 0; p < n; p++)
        ((volatile uint64_t *)(m + p * GPAGE))[0] = p;
    CHECK_OK(netvm_gmem_sync(g));

    /* reads alone, in order: read-ahead serves them, nothing is written */
    netvm_gmem_stats_t a, b, c;
    CHECK_OK(netvm_gmem_stats(g, &a));
    for (uint64_t p = 0; p < n; p++) {
        uint64_t v = ((volatile uint64_t *)(m + p * GPAGE))[0];
        if (v != p)
            FAILF("page %llu reads %llu in the read pass", (unsigned long long)p, (unsigned long long)v);
    }
    CHECK_OK(netvm_gmem_stats(g, &b));
    uint64_t ra = b.readahead_issued - a.readahead_issued;
    printf("ra_wp: reads: %llu faults, %llu read ahead, %llu placed dirty\n",
           (unsigned long long)(b.faults - a.faults), (unsigned long long)ra,
           (unsigned long long)(b.placed_dirty - a.placed_dirty));
    if (ra < n / 2)
        FAILF("%llu of %llu pages read ahead in a sequential pass", (unsigned long long)ra, (unsigned long long)n);
    if (b.placed_dirty != a.placed_dirty)
        FAILF("%llu pages placed dirty in a pass that writes nothing",
              (unsigned long long)(b.placed_dirty - a.placed_dirty));

    /* read-modify-writes, in order */
    for (uint64_t p = 0; p < n; p++) {
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        w[1] = w[1] + 1;
    }
    CHECK_OK(netvm_gmem_stats(g, &c));
    uint64_t wp = c.wp_faults - b.wp_faults, dirty = c.placed_dirty - b.placed_dirty;
    ra = c.readahead_issued - b.readahead_issued;
    printf("ra_wp: read-modify-writes (%s): %llu faults, %llu read ahead, %llu write-protect faults, "
           "%llu placed dirty\n",
           always ? "always" : "auto", (unsigned long long)(c.faults - b.faults), (unsigned long long)ra,
           (unsigned long long)wp, (unsigned long long)dirty);
    if (ra < n / 2)
        FAILF("%llu of %llu pages read ahead in a sequential pass", (unsigned long long)ra, (unsigned long long)n);
    if (always) {
        if (dirty)
            FAILF("%llu pages placed dirty with NETVM_GMEM_READ_WP=always", (unsigned long long)dirty);
        if (wp < n / 2)
            FAILF("%llu write-protect faults for %llu pages read and then written: read-ahead did not place "
                  "them protected", (unsigned long long)wp, (unsigned long long)n);
    } else if (dirty < n / 2 || wp > n / 4) {
        FAILF("%llu of %llu pages placed dirty, %llu write-protect faults: a pass that writes what it reads "
              "in order should switch read-ahead to writable-and-dirty placement",
              (unsigned long long)dirty, (unsigned long long)n, (unsigned long long)wp);
    }

    /* every page kept its number and its write through the evictions */
    for (uint64_t p = 0; p < n; p++) {
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        if (w[0] != p || w[1] != 1)
            FAILF("page %llu: %llu/%llu, expected %llu/1", (unsigned long long)p, (unsigned long long)w[0],
                  (unsigned long long)w[1], (unsigned long long)p);
    }
    CHECK_OK(netvm_gmem_unmap(g));
    printf("ra_wp: ok\n");
    return 0;
}
