/* mremap of a region by the program: the whole region moved elsewhere,
 * then a part of it moved on its own; every page keeps its data (resident
 * and evicted ones), writes after the moves survive eviction, and the
 * region's pages are found at their new addresses. Usage: mremap BUDGET */
#define _GNU_SOURCE
#include "gmem_test.h"

#include <stdio.h>
#include <stdlib.h>

static void verify(unsigned char *const *where, size_t npages, const uint32_t *ver, const char *when)
{
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(where[p], p, ver[p]))
            FAILF("%s: page %zu wrong", when, p);
}

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 512;
    size_t npages = 4 * budget;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    uint32_t *ver = calloc(npages, sizeof *ver);
    unsigned char **where = calloc(npages, sizeof *where);
    for (size_t p = 0; p < npages; p++) {
        where[p] = m + p * GPAGE;
        gt_fill(where[p], p, ver[p] = 1);
    }
    /* the whole region to a new place */
    unsigned char *hole = mmap(NULL, npages * GPAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(hole != MAP_FAILED);
    unsigned char *m2 = mremap(m, npages * GPAGE, npages * GPAGE, MREMAP_MAYMOVE | MREMAP_FIXED, hole);
    CHECK(m2 == hole);
    for (size_t p = 0; p < npages; p++)
        where[p] = m2 + p * GPAGE;
    verify(where, npages, ver, "after moving the region");
    for (size_t p = 0; p < npages; p += 3)
        gt_fill(where[p], p, ++ver[p]);
    verify(where, npages, ver, "after writing the moved region");
    printf("mremap: the whole region moved: every page right\n");

    /* a quarter in the middle, on its own */
    size_t first = npages / 2, n = npages / 4;
    unsigned char *hole2 = mmap(NULL, n * GPAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *part = mremap(where[first], n * GPAGE, n * GPAGE, MREMAP_MAYMOVE | MREMAP_FIXED, hole2);
    CHECK(part == hole2);
    for (size_t p = first; p < first + n; p++)
        where[p] = part + (p - first) * GPAGE;
    verify(where, npages, ver, "after moving a part");
    for (size_t p = 1; p < npages; p += 3)
        gt_fill(where[p], p, ++ver[p]);
    verify(where, npages, ver, "after writing around the moved part");
    printf("mremap: a part moved on its own: every page right\n");
    CHECK_OK(netvm_gmem_unmap(g));
    free(ver);
    free(where);
    printf("mremap: ok\n");
    return 0;
}
