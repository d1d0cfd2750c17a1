/* Read-ahead fills evicted pages and moves them in (pager_reuse.c). A
 * page moved in is mapped writable until the pager's write-protection
 * takes; a write the program makes in between raises no fault, and must
 * not be lost when the page is evicted as clean. The test widens that
 * window (the region's test_place_ns) and a second thread writes a marker
 * into a page of a read-ahead run the moment the page is mapped (it
 * watches with mincore), before the protection. The page is then pushed
 * out and read back: the marker must be there, and the rest of the run
 * must hold the data the store had. With "on" the run must have gone by
 * reused pages and the write must have been caught by the comparison at
 * least once; with "off" (NETVM_GMEM_REUSE=0) no page is reused and the
 * write is caught by its write-protect fault as before.
 * Usage: reuse BUDGET_PAGES ROUNDS on|off */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct watch {
    unsigned char *page;
    uint64_t       marker;
    int            wrote;
};

/* at most this many looks (a system call each) for the page to be mapped */
#define WATCH_LOOKS 20000000L

static void *watcher(void *arg)
{
    struct watch *w = arg;
    for (long i = 0; i < WATCH_LOOKS; i++) {
        unsigned char v = 0;
        if (mincore(w->page, GPAGE, &v) == 0 && (v & 1)) {
            __atomic_store_n((uint64_t *)(void *)(w->page + 8), w->marker, __ATOMIC_RELEASE);
            w->wrote = 1;
            break;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t budget = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
    int rounds = argc > 2 ? atoi(argv[2]) : 20;
    int on = !(argc > 3 && !strcmp(argv[3], "off"));
    if (budget < 160)
        budget = 160;   /* a read-ahead window, an eviction batch and the fault threads' reserve */
    CHECK(setenv("NETVM_GMEM_REUSE", on ? "1" : "0", 1) == 0);
    size_t npages = 8 * budget, win = 64;
    netvm_gmem_opts_t o = { .budget = budget * GPAGE };
    netvm_gmem_t *g;
    unsigned char *m;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    struct nv_gm_region *r = nv_gm_region_of(g);
    uint64_t seed = 7;
    int wrote = 0;
    for (int i = 0; i < rounds; i++) {
        uint32_t v = (uint32_t)i + 1;
        /* every page to the store (the evictor keeps its batches for
         * read-ahead to reuse, with "on"), then room for read-ahead: the
         * resident end of the region goes */
        for (size_t p = 0; p < npages; p++)
            gt_fill(m + p * GPAGE, p, v);
        CHECK(madvise(m + (npages - budget) * GPAGE, budget * GPAGE, MADV_DONTNEED) == 0);
        size_t first = gt_rand(&seed) % (npages / 2 - win - 2), x = first + 5;
        struct watch w = { .page = m + x * GPAGE, .marker = 0xfeed0000u + (uint64_t)i };
        /* each run is placed 2 ms late and stays 2 ms between its move and
         * its protection (pager_ra.c, pager_reuse.c) */
        __atomic_store_n(&r->test_place_ns, 2000000, __ATOMIC_RELAXED);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, watcher, &w) == 0);
        volatile unsigned char sink = 0;
        sink += m[first * GPAGE];
        sink += m[(first + 1) * GPAGE];   /* sequential: read-ahead of first + 2 on */
        (void)sink;
        CHECK(pthread_join(t, NULL) == 0);
        __atomic_store_n(&r->test_place_ns, 0, __ATOMIC_RELAXED);
        CHECK(w.wrote);
        wrote++;
        /* x out: a scan of three budgets of other pages, until it is gone */
        for (int pass = 0; gt_resident(m + x * GPAGE, GPAGE); pass++) {
            CHECK(pass < 4);
            for (size_t p = npages / 2; p < npages - budget; p++)
                if (!gt_check(m + p * GPAGE, p, v))
                    FAILF("round %d: page %zu lost its data", i, p);
        }
        uint64_t *xw = (uint64_t *)(void *)(m + x * GPAGE);
        if (xw[1] != w.marker)
            FAILF("round %d: page %zu lost the write made before its placement was protected (%llx, not %llx)", i,
                  x, (unsigned long long)xw[1], (unsigned long long)w.marker);
        xw[1] = 1 ^ (x * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)v << 32);   /* the pattern's word 1 again */
        for (size_t p = first; p < first + 2 + win; p++)
            if (!gt_check(m + p * GPAGE, p, v))
                FAILF("round %d: page %zu (read ahead) does not hold its data", i, p);
    }
    uint64_t reused = __atomic_load_n(&r->c.reused, __ATOMIC_RELAXED);
    uint64_t caught = __atomic_load_n(&r->c.reuse_written, __ATOMIC_RELAXED);
    printf("reuse (%s): %d rounds, a write in the placement's window in each; %llu pages placed by reuse, "
           "%llu of them found written before their protection\n",
           on ? "on" : "off", rounds, (unsigned long long)reused, (unsigned long long)caught);
    if (on) {
        CHECK(reused > 0);
        CHECK(caught > 0);
    } else {
        CHECK(reused == 0);
    }
    CHECK(wrote == rounds);
    CHECK_OK(netvm_gmem_unmap(g));
    return 0;
}
