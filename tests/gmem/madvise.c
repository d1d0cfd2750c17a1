/* The program's own MADV_DONTNEED on a region: the pages read as zeros
 * afterwards (resident ones and evicted ones alike), the others keep their
 * data, and the store forgets them. Then the same while other threads
 * fault: a placement that meets the mm changing (UFFDIO_COPY's EAGAIN) is
 * retried, and nothing is lost.
 * Usage: madvise BUDGET_PAGES ROUNDS */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <errno.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char *m;
static size_t npages, budget;
static uint32_t *ver;
static int stop;

/* threads 1..: their own pages, verified and rewritten */
static void *faulter(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 77 + (uint64_t)id;
    while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
        size_t p = (gt_rand(&seed) % (npages / 4)) * 4 + (size_t)id;
        if (!gt_check(m + p * GPAGE, p, ver[p]))
            FAILF("faulter %d: page %zu wrong", id, p);
        gt_fill(m + p * GPAGE, p, ++ver[p]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 512;
    int rounds = argc > 2 ? atoi(argv[2]) : 2000;
    npages = 4 * budget;
    /* two fault threads whatever the default: a discard's event may then
     * be read by one while the other serves a fault of the same page */
    netvm_gmem_opts_t o = { .budget = budget * GPAGE, .fault_threads = 2 };
    netvm_gmem_t *g;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    struct nv_gm_region *r = nv_gm_region_of(g);
    ver = calloc(npages, sizeof *ver);
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, ver[p] = 1);
    /* the first pages are evicted by now, the last ones resident */
    CHECK(gt_resident(m, 64 * GPAGE) == 0);
    CHECK(gt_resident(m + (npages - 64) * GPAGE, 64 * GPAGE) == 64);
    for (size_t p = 0; p < npages; p += 8) {
        CHECK(madvise(m + p * GPAGE, 2 * GPAGE, MADV_DONTNEED) == 0);
        ver[p] = ver[p + 1] = 0;
    }
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(m + p * GPAGE, p, ver[p]))
            FAILF("after madvise: page %zu is not %s", p, ver[p] ? "its data" : "zeros");
    CHECK(!r->store->ops->has(r->store, 0) && !r->store->ops->has(r->store, 8));
    printf("madvise: resident and evicted pages discarded read as zeros, the others intact\n");

    /* discards of page 4k (thread 0's pages) while threads 1-3 fault */
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, faulter, (void *)(intptr_t)(i + 1));
    uint64_t seed = 5;
    /* until EAGAIN was met at least once, within ten times the rounds */
    int i;
    for (i = 0; i < rounds || (!__atomic_load_n(&r->c.eagain, __ATOMIC_RELAXED) && i < 10 * rounds); i++) {
        size_t p = (gt_rand(&seed) % (npages / 4)) * 4;
        gt_fill(m + p * GPAGE, p, 7);
        CHECK(madvise(m + p * GPAGE, GPAGE, MADV_DONTNEED) == 0);
        if (!gt_check(m + p * GPAGE, p, 0))
            FAILF("round %d: discarded page %zu is not zeros", i, p);
        ver[p] = 0;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(m + p * GPAGE, p, ver[p]))
            FAILF("at the end: page %zu wrong", p);
    CHECK(__atomic_load_n(&r->c.eagain, __ATOMIC_RELAXED) > 0);
    printf("madvise: %d discards among faulting threads: %llu placements met EAGAIN and were retried, "
           "%llu discards counted, every page right\n",
           i, (unsigned long long)__atomic_load_n(&r->c.eagain, __ATOMIC_RELAXED),
           (unsigned long long)__atomic_load_n(&r->c.discarded, __ATOMIC_RELAXED));

    /* munmap of the last quarter by the program: those pages leave the
     * store and the region, the rest stays right, and something mapped
     * there afterwards is not the region's to unmap */
    size_t keep = npages - npages / 4;
    for (size_t p = keep; p < npages; p++)
        gt_fill(m + p * GPAGE, p, ++ver[p]);
    CHECK(munmap(m + keep * GPAGE, (npages - keep) * GPAGE) == 0);
    /* a fault raised after an event: the pager has handled the event */
    CHECK(madvise(m, GPAGE, MADV_DONTNEED) == 0);
    ver[0] = 0;
    CHECK(gt_check(m, 0, 0));
    /* a page of the quarter that the evictor had taken out before the
     * munmap is dropped from the store when its batch's write-back ends
     * (pager_evict.c, batch_finish: marked discarded meanwhile); sync waits
     * for the evictor's round, so that none is under way below */
    CHECK_OK(netvm_gmem_sync(g));
    for (size_t p = keep; p < npages; p++)
        CHECK(!r->store->ops->has(r->store, p));
    for (size_t p = 0; p < keep; p++)
        if (!gt_check(m + p * GPAGE, p, ver[p]))
            FAILF("after munmap of part: page %zu wrong", p);
    /* not MAP_FIXED: another thread (an allocator's mmap, the sanitizer's
     * heap: one such clobbered under ASan) may have taken part of the hole
     * meanwhile, and what it mapped is as much "not the region's" */
    unsigned char *other = mmap(m + keep * GPAGE, (npages - keep) * GPAGE, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (other == MAP_FAILED && errno == EEXIST) {
        CHECK_OK(netvm_gmem_unmap(g));
        printf("madvise: munmap of a quarter: discarded in the store, the rest intact (the hole was taken by "
               "another mapping before the test could map it)\n");
        printf("madvise: ok\n");
        return 0;
    }
    CHECK(other == m + keep * GPAGE);
    memset(other, 0x5a, (npages - keep) * GPAGE);
    CHECK_OK(netvm_gmem_unmap(g));
    CHECK(other[0] == 0x5a && other[(npages - keep) * GPAGE - 1] == 0x5a);
    munmap(other, (npages - keep) * GPAGE);
    printf("madvise: munmap of a quarter: discarded in the store, the rest intact, the range not the region's\n");
    printf("madvise: ok\n");
    return 0;
}
