/* The program discards pages (MADV_DONTNEED) while their read-ahead is
 * under way: they must read as zeros afterwards, never their old data.
 * The kernel zaps the range as soon as the discard's event is read, so a
 * read-ahead run placed after that would stay mapped with the discarded
 * data (and wake the program's fault on it) unless placements are held
 * off while the event is read and handled (pager.h, the placement gate).
 * The test delays each run's placement and widens the window between
 * it and its publication (the region's test_place_ns). Each round writes the region (most pages go to the store), starts a
 * sequential read at a random place (read-ahead fetches the pages after
 * it), discards the window ahead at once, and checks it reads zeros.
 * Usage: discard_ra BUDGET_PAGES ROUNDS */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
    int rounds = argc > 2 ? atoi(argv[2]) : 200;
    if (budget < 160)
        budget = 160;   /* a read-ahead window and the fault threads' reserve (the sanitizers' scaled args) */
    size_t npages = 4 * budget, win = 64;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    struct nv_gm_region *r = nv_gm_region_of(g);
    uint64_t seed = 11;
    unsigned long long raced = 0;
    for (int i = 0; i < rounds; i++) {
        uint32_t v = (uint32_t)i + 1;
        for (size_t p = 0; p < npages; p++)
            gt_fill(m + p * GPAGE, p, v);
        /* room in the budget for read-ahead (it never evicts): the
         * resident end of the region goes */
        CHECK(madvise(m + (npages - budget) * GPAGE, budget * GPAGE, MADV_DONTNEED) == 0);
        /* a window the budget has evicted: its pages come from the store */
        size_t first = gt_rand(&seed) % (npages / 2 - win - 2);
        uint64_t ra0 = __atomic_load_n(&r->c.ra_issued, __ATOMIC_RELAXED);
        /* from here a read-ahead run arrives 2 ms late (after the
         * discard's event was read) and stays placed but unpublished for
         * 2 ms more: without the gate the program reads the discarded
         * data meanwhile */
        __atomic_store_n(&r->test_place_ns, 2000000, __ATOMIC_RELAXED);
        volatile unsigned char sink = 0;
        sink += m[first * GPAGE];
        sink += m[(first + 1) * GPAGE];   /* sequential: read-ahead starts */
        (void)sink;
        CHECK(madvise(m + (first + 2) * GPAGE, win * GPAGE, MADV_DONTNEED) == 0);
        for (size_t p = first + 2; p < first + 2 + win; p++)
            if (!gt_check(m + p * GPAGE, p, 0))
                FAILF("round %d: page %zu (discarded during its read-ahead) is not zeros", i, p);
        __atomic_store_n(&r->test_place_ns, 0, __ATOMIC_RELAXED);
        raced += __atomic_load_n(&r->c.ra_issued, __ATOMIC_RELAXED) != ra0;
    }
    printf("discard_ra: %d rounds, read-ahead under way at %llu of the discards: every discarded page read zeros\n",
           rounds, raced);
    CHECK(raced > 0);
    CHECK_OK(netvm_gmem_unmap(g));
    return 0;
}
