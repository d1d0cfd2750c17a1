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
 * A sequential pass of plain stores (write faults, each page fetched
 * because it is stored) places what read-ahead brings for it dirty at
 * once: its own faults say it writes, and protecting runs to find out
 * would cost a write-protect fault a page for a while.
 * From 65536 pages, the read-modify-write pass must also see read-ahead's
 * sample back off (pager.h, NV_GM_RA_SAMPLE_MAX): fewer write-protect
 * faults than one run in NV_GM_RA_SAMPLE protected would cost.
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

    /* plain stores, in order: write faults lead the stream */
    netvm_gmem_stats_t d;
    for (uint64_t p = 0; p < n; p++)
        ((volatile uint64_t *)(m + p * GPAGE))[2] = p ^ 0x5555;
    CHECK_OK(netvm_gmem_stats(g, &d));
    uint64_t wp = d.wp_faults - b.wp_faults, dirty = d.placed_dirty - b.placed_dirty;
    ra = d.readahead_issued - b.readahead_issued;
    printf("ra_wp: stores (%s): %llu faults, %llu read ahead, %llu write-protect faults, %llu placed dirty\n",
           always ? "always" : "auto", (unsigned long long)(d.faults - b.faults), (unsigned long long)ra,
           (unsigned long long)wp, (unsigned long long)dirty);
    if (ra < n / 2)
        FAILF("%llu of %llu pages read ahead in a sequential pass of stores", (unsigned long long)ra,
              (unsigned long long)n);
    if (!always && (dirty < n / 2 || wp > n / 64))
        FAILF("%llu of %llu pages placed dirty, %llu write-protect faults: read-ahead for a stream of write "
              "faults should place its runs dirty", (unsigned long long)dirty, (unsigned long long)n,
              (unsigned long long)wp);
    if (always && dirty > n / 64)
        FAILF("%llu pages placed dirty with NETVM_GMEM_READ_WP=always in a pass of stores (the faults' own "
              "pages at most)", (unsigned long long)dirty);

    /* read-modify-writes, in order */
    b = d;
    for (uint64_t p = 0; p < n; p++) {
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        w[1] = w[1] + 1;
    }
    CHECK_OK(netvm_gmem_stats(g, &c));
    wp = c.wp_faults - b.wp_faults;
    dirty = c.placed_dirty - b.placed_dirty;
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
    } else if (n >= 65536 && wp > n / 40) {
        /* one run in 32 protected throughout: about n / 32 and a first
         * window; backing off to one in 128: about n / 64 */
        FAILF("%llu write-protect faults in a read-modify-write pass of %llu pages: read-ahead's sample did "
              "not back off while every sampled page was written", (unsigned long long)wp, (unsigned long long)n);
    }

    /* every page kept its number and its write through the evictions */
    for (uint64_t p = 0; p < n; p++) {
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        if (w[0] != p || w[1] != 1 || w[2] != (p ^ 0x5555))
            FAILF("page %llu: %llu/%llu/%llu, expected %llu/1/%llu", (unsigned long long)p,
                  (unsigned long long)w[0], (unsigned long long)w[1], (unsigned long long)w[2],
                  (unsigned long long)p, (unsigned long long)(p ^ 0x5555));
    }
    CHECK_OK(netvm_gmem_unmap(g));
    printf("ra_wp: ok\n");
    return 0;
}
