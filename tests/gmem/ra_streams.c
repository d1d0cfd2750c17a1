/* Read-ahead follows several sequential streams at once, going up or down
 * (pager_ra.c). Three passes over a region four times the budget, each
 * must take far fewer faults than pages (one a page without read-ahead):
 *   down: every page read from the last to the first;
 *   merge: two halves read in order side by side, a page of each in turn
 *          (a merge's two runs), each page's sum written into a third
 *          stream, the other half going down (a copy back);
 *   copy down: a page read from the top half and written into the bottom
 *          half, both going down (glibc's memcpy of a large block here).
 * Every page holds what was written last, checked after the passes.
 * Read-ahead never evicts: with the budget full it waits for the evictor
 * (pager_ra.c), so on a machine busy enough to starve the evictor thread
 * a pass can fault far more. Each pass (all three are idempotent) is
 * therefore run up to three times and one run within the bound passes;
 * without stream following every run is over it (6208 faults for 8192
 * pages going down).
 * Usage: ra_streams [PAGES] (PAGES >= 2048, a multiple of 4) */
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

static netvm_gmem_t *g;
static unsigned char *m;

static volatile uint64_t *word(uint64_t p)
{
    return (volatile uint64_t *)(m + p * GPAGE);
}

static uint64_t faults(void)
{
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    return s.faults;
}

static uint64_t n, q;

static void pass_down(void)
{
    for (uint64_t p = n; p-- > 0;)
        if (word(p)[0] != p)
            FAILF("down: page %llu reads %llu", (unsigned long long)p, (unsigned long long)word(p)[0]);
}

/* a quarter and a quarter merged into the last half (going down) */
static void pass_merge(void)
{
    for (uint64_t i = 0; i < q; i++) {
        uint64_t a = word(i)[0], b = word(q + i)[0];
        word(n - 1 - 2 * i)[1] = a + 1;
        word(n - 2 - 2 * i)[1] = b + 1;
    }
}

/* the top half copied down into the bottom half, both going down */
static void pass_copy_down(void)
{
    for (uint64_t i = n / 2; i-- > 0;)
        word(i)[1] = word(n / 2 + i)[1] + 7;
}

/* Run pass until it takes at most n / 4 faults, three times at most. */
static void expect_few(const char *name, void (*pass)(void))
{
    uint64_t f = 0;
    for (int run = 1; run <= 3; run++) {
        uint64_t f0 = faults();
        pass();
        f = faults() - f0;
        printf("ra_streams: %s (run %d): %llu faults for %llu pages\n", name, run, (unsigned long long)f,
               (unsigned long long)n);
        if (f <= n / 4)
            return;
    }
    FAILF("%s: %llu faults for %llu pages in sequential streams: read-ahead did not follow them", name,
          (unsigned long long)f, (unsigned long long)n);
}

int main(int argc, char **argv)
{
    n = argc > 1 ? strtoull(argv[1], NULL, 0) : 8192;
    CHECK(n >= 2048 && n % 4 == 0);
    netvm_gmem_opts_t o = { .budget = n / 4 * GPAGE, .readahead = 0 };
    CHECK_OK(netvm_gmem_map(gt_ctx(), n * GPAGE, &o, &g, (void **)&m));
    /* word 0: the page's number; word 1: what the passes wrote */
    for (uint64_t p = 0; p < n; p++)
        word(p)[0] = p;
    CHECK_OK(netvm_gmem_sync(g));

    q = n / 4;
    expect_few("down", pass_down);
    expect_few("merge", pass_merge);
    expect_few("copy down", pass_copy_down);

    for (uint64_t i = 0; i < q; i++) {
        uint64_t want[2] = { i + 1 + 7, q + i + 1 + 7 };
        uint64_t top[2] = { n - 1 - 2 * i, n - 2 - 2 * i };
        for (int k = 0; k < 2; k++) {
            uint64_t lo = top[k] - n / 2;
            if (word(top[k])[0] != top[k] || word(top[k])[1] != want[k] - 7 || word(lo)[0] != lo ||
                word(lo)[1] != want[k])
                FAILF("pages %llu/%llu: %llu/%llu and %llu/%llu, expected %llu/%llu and %llu/%llu",
                      (unsigned long long)top[k], (unsigned long long)lo, (unsigned long long)word(top[k])[0],
                      (unsigned long long)word(top[k])[1], (unsigned long long)word(lo)[0],
                      (unsigned long long)word(lo)[1], (unsigned long long)top[k],
                      (unsigned long long)(want[k] - 7), (unsigned long long)lo, (unsigned long long)want[k]);
        }
    }
    CHECK_OK(netvm_gmem_unmap(g));
    printf("ra_streams: ok\n");
    return 0;
}
