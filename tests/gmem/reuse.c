/* Read-ahead fills evicted pages and moves them in (pager_reuse.c). A
 * page moved in is mapped writable until the pager's write-protection
 * takes; a write the program makes in between raises no fault, and must
 * not be lost when the page is evicted as clean. The test widens that
 * window (the region's test_place_ns) and a second thread writes a marker
 * into each page of the read-ahead window the moment the page is mapped
 * (it watches with mincore), before the protection where the page was
 * moved in (runs placed by UFFDIO_COPY are protected when mapped, and
 * the write faults). The pages are then pushed out and read back: each
 * must hold its marker and the rest of the data the store had. With "on"
 * runs must have gone by reused pages and a write must have been caught
 * by the comparison at least once; with "off" (NETVM_GMEM_REUSE=0) no
 * page is reused and the writes are caught by their write-protect faults
 * as before.
 * Usage: reuse BUDGET_PAGES ROUNDS on|off */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct watch {
    unsigned char *first;   /* the window's first page */
    size_t         n;
    uint64_t       marker;
    size_t         wrote;
};

/* at most this many looks (a system call each) for the pages to be mapped */
#define WATCH_LOOKS 20000000L

static void *watcher(void *arg)
{
    struct watch *w = arg;
    unsigned char vec[256], done[256] = { 0 };
    CHECK(w->n <= sizeof vec);
    for (long i = 0; i < WATCH_LOOKS && w->wrote < w->n; i++) {
        if (mincore(w->first, w->n * GPAGE, vec) != 0)
            continue;
        for (size_t k = 0; k < w->n; k++)
            if ((vec[k] & 1) && !done[k]) {
                __atomic_store_n((uint64_t *)(void *)(w->first + k * GPAGE + 8), w->marker + k, __ATOMIC_RELEASE);
                done[k] = 1;
                w->wrote++;
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
    int i;
    /* the rounds asked for, and with "on" more until a write has met the
     * window (a busy machine may run the watcher late: it then writes
     * after the protection, which its fault handles) */
    for (i = 0; i < rounds || (on && i < 10 * rounds && !__atomic_load_n(&r->c.reuse_written, __ATOMIC_RELAXED));
         i++) {
        uint32_t v = (uint32_t)i + 1;
        /* every page to the store (the evictor keeps its batches for
         * read-ahead to reuse, with "on"), then room for read-ahead: the
         * resident end of the region goes */
        for (size_t p = 0; p < npages; p++)
            gt_fill(m + p * GPAGE, p, v);
        CHECK(madvise(m + (npages - budget) * GPAGE, budget * GPAGE, MADV_DONTNEED) == 0);
        size_t first = gt_rand(&seed) % (npages / 2 - win - 2);
        struct watch w = { .first = m + (first + 2) * GPAGE, .n = win,
                           .marker = 0xfeed000000ull + ((uint64_t)i << 12) };
        /* each run is placed 5 ms late and stays 5 ms between its move and
         * its protection (pager_ra.c, pager_reuse.c) */
        __atomic_store_n(&r->test_place_ns, 5000000, __ATOMIC_RELAXED);
        pthread_t t;
        CHECK(pthread_create(&t, NULL, watcher, &w) == 0);
        volatile unsigned char sink = 0;
        sink += m[first * GPAGE];
        sink += m[(first + 1) * GPAGE];   /* sequential: read-ahead of first + 2 on */
        /* the window read too, so every page of it is mapped (one that
         * read-ahead did not bring is faulted in, protected) */
        for (size_t k = 0; k < win; k++)
            sink += w.first[k * GPAGE];
        (void)sink;
        CHECK(pthread_join(t, NULL) == 0);
        __atomic_store_n(&r->test_place_ns, 0, __ATOMIC_RELAXED);
        CHECK(w.wrote == w.n);   /* read-ahead mapped the whole window */
        /* the window out: a scan of three budgets of other pages, until
         * none of it is resident */
        for (int pass = 0; gt_resident(w.first, win * GPAGE); pass++) {
            CHECK(pass < 4);
            for (size_t p = npages / 2; p < npages - budget; p++)
                if (!gt_check(m + p * GPAGE, p, v))
                    FAILF("round %d: page %zu lost its data", i, p);
        }
        for (size_t k = 0; k < win; k++) {
            size_t p = first + 2 + k;
            uint64_t *pw = (uint64_t *)(void *)(m + p * GPAGE);
            if (pw[1] != w.marker + k)
                FAILF("round %d: page %zu lost the write made as it was mapped (%llx, not %llx)", i, p,
                      (unsigned long long)pw[1], (unsigned long long)(w.marker + k));
            pw[1] = 1 ^ (p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)v << 32);   /* the pattern's word 1 again */
            if (!gt_check(m + p * GPAGE, p, v))
                FAILF("round %d: page %zu (read ahead) does not hold its data", i, p);
        }
    }
    uint64_t reused = __atomic_load_n(&r->c.reused, __ATOMIC_RELAXED);
    uint64_t caught = __atomic_load_n(&r->c.reuse_written, __ATOMIC_RELAXED);
    printf("reuse (%s): %d rounds, a write into each page of the read-ahead window as it was mapped; %llu pages "
           "placed by reuse, %llu of them found written before their protection\n",
           on ? "on" : "off", i, (unsigned long long)reused, (unsigned long long)caught);
    if (on) {
        CHECK(reused > 0);
        CHECK(caught > 0);
    } else {
        CHECK(reused == 0);
    }
    CHECK_OK(netvm_gmem_unmap(g));
    return 0;
}
