/* How read faults are placed (NETVM_GMEM_READ_WP, pager_fault.c). A pass of
 * read-modify-writes over absent pages (each a read fault, then a write)
 * must switch the pager to placing read faults writable and dirty, so that
 * most of them cost no second, write-protect fault; with "always" every one
 * pays it. A pass of reads alone must never switch (its evictions stay
 * clean: nothing is written back). In both, every page keeps its data
 * through the evictions.
 * Usage: read_wp [PAGES] [auto|always] (PAGES >= 2048) */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192;
    int always = argc > 2 && !strcmp(argv[2], "always");
    CHECK(n >= 2048);
    CHECK(setenv("NETVM_GMEM_READ_WP", always ? "always" : "auto", 1) == 0);
    /* a budget of an eighth: most accesses of a random pass fault */
    netvm_gmem_opts_t o = { .budget = n / 8 * GPAGE, .readahead = -1 };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), n * GPAGE, &o, &g, (void **)&m));
    for (uint64_t p = 0; p < n; p++)
        ((volatile uint64_t *)(m + p * GPAGE))[0] = p;

    /* reads alone, in a random order */
    uint64_t seed = 0x5eed, sum = 0;
    netvm_gmem_stats_t a, b, c;
    CHECK_OK(netvm_gmem_stats(g, &a));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = gt_rand(&seed) % n;
        uint64_t v = ((volatile uint64_t *)(m + p * GPAGE))[0];
        if (v != p)
            FAILF("page %llu reads %llu in the read pass", (unsigned long long)p, (unsigned long long)v);
        sum += v;
    }
    CHECK_OK(netvm_gmem_stats(g, &b));
    uint64_t rfaults = b.faults - a.faults;
    printf("read_wp: reads: %llu faults, %llu placed dirty, %llu dirty evictions\n", (unsigned long long)rfaults,
           (unsigned long long)(b.placed_dirty - a.placed_dirty),
           (unsigned long long)(b.evictions_dirty - a.evictions_dirty));
    CHECK(rfaults > n / 2);
    if (b.placed_dirty != a.placed_dirty)
        FAILF("%llu read faults placed dirty in a pass that writes nothing",
              (unsigned long long)(b.placed_dirty - a.placed_dirty));

    /* read-modify-writes, in a random order; each page's count kept */
    uint32_t *count = calloc(n, sizeof *count);
    CHECK(count);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t p = gt_rand(&seed) % n;
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        w[1] = w[1] + 1;
        count[p]++;
    }
    CHECK_OK(netvm_gmem_stats(g, &c));
    uint64_t wfaults = c.faults - b.faults, wp = c.wp_faults - b.wp_faults, dirty = c.placed_dirty - b.placed_dirty;
    printf("read_wp: read-modify-writes (%s): %llu faults, %llu write-protect faults, %llu placed dirty\n",
           always ? "always" : "auto", (unsigned long long)wfaults, (unsigned long long)wp,
           (unsigned long long)dirty);
    CHECK(wfaults > n / 2);
    if (always) {
        if (dirty)
            FAILF("%llu read faults placed dirty with NETVM_GMEM_READ_WP=always", (unsigned long long)dirty);
        if (wp < wfaults / 2)
            FAILF("%llu write-protect faults for %llu read-modify-write faults: reads were not placed protected",
                  (unsigned long long)wp, (unsigned long long)wfaults);
    } else if (dirty < wfaults / 2 || wp > wfaults / 2) {
        FAILF("%llu of %llu read faults placed dirty, %llu write-protect faults: a read-modify-write pass "
              "should switch read faults to writable-and-dirty placement",
              (unsigned long long)dirty, (unsigned long long)wfaults, (unsigned long long)wp);
    }

    /* every page kept its number and its count through the evictions */
    for (uint64_t p = 0; p < n; p++) {
        volatile uint64_t *w = (volatile uint64_t *)(m + p * GPAGE);
        if (w[0] != p || w[1] != count[p])
            FAILF("page %llu: %llu/%llu, expected %llu/%u", (unsigned long long)p, (unsigned long long)w[0],
                  (unsigned long long)w[1], (unsigned long long)p, count[p]);
    }
    free(count);
    CHECK_OK(netvm_gmem_unmap(g));
    printf("read_wp: ok (%llu)\n", (unsigned long long)sum);
    return 0;
}
