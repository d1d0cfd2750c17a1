/* Many threads faulting the same and different pages. The region is
 * filled and written back first, so most faults fetch from the store.
 * Same pages: every thread reads every page of a shared range at once,
 * and a page costs one fetch however many threads fault on it. Different
 * pages: each thread writes and verifies its own pages, over a region 4x
 * the budget. EEXIST from UFFDIO_COPY (a page placed behind the pager's
 * back, here by the test) is served by keeping what is there.
 * Usage: threads NTHREADS BUDGET_PAGES */
#include "gmem_test.h"
#include "gmem/pager.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static unsigned char *m;
static size_t npages, shared_pages;
static int nthr;
static pthread_barrier_t bar;
static uint32_t *ver;

static int phase;     /* 0: the same pages, 1: pages of its own */

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_barrier_wait(&bar);
    if (phase == 0) {
        /* the same pages, every thread in the same order, at once */
        for (size_t p = 0; p < shared_pages; p++)
            if (!gt_check(m + p * GPAGE, p, ver[p]))
                FAILF("thread %d: shared page %zu wrong", id, p);
        return NULL;
    }
    /* pages of its own: p % nthr == id */
    uint64_t seed = 0x9999 + (uint64_t)id;
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < npages / (size_t)nthr; i++) {
            size_t p = (gt_rand(&seed) % (npages / (size_t)nthr)) * (size_t)nthr + (size_t)id;
            if (!gt_check(m + p * GPAGE, p, ver[p]))
                FAILF("thread %d: page %zu wrong (version %u)", id, p, ver[p]);
            gt_fill(m + p * GPAGE, p, ++ver[p]);
        }
    }
    return NULL;
}

static void run(int ph)
{
    pthread_t t[64];
    phase = ph;
    pthread_barrier_init(&bar, NULL, (unsigned)nthr);
    for (int i = 0; i < nthr; i++)
        pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < nthr; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&bar);
}

int main(int argc, char **argv)
{
    nthr = argc > 1 ? atoi(argv[1]) : 8;
    size_t budget = argc > 2 ? strtoul(argv[2], NULL, 0) : 1024;
    npages = 4 * budget;
    shared_pages = budget / 2;
    /* four fault threads whatever the default (one on two CPUs): the
     * threads' races on one page are what this test is about */
    netvm_gmem_opts_t o = { .budget = budget * GPAGE, .readahead = -1, .fault_threads = 4 };
    netvm_gmem_t *g;
    CHECK_OK(netvm_gmem_map(gt_ctx(), npages * GPAGE, &o, &g, (void **)&m));
    ver = calloc(npages, sizeof *ver);
    for (size_t p = 0; p < npages; p++)
        gt_fill(m + p * GPAGE, p, ver[p] = 1);
    /* push the shared range out: touch the rest so it is evicted */
    for (size_t p = shared_pages; p < npages; p++)
        CHECK(gt_check(m + p * GPAGE, p, 1));
    CHECK(gt_resident(m, shared_pages * GPAGE) == 0);
    netvm_gmem_stats_t s0, s1;
    CHECK_OK(netvm_gmem_stats(g, &s0));
    run(0);
    CHECK_OK(netvm_gmem_stats(g, &s1));
    printf("threads: %d threads read the same %zu pages: %llu faults, %llu fetches\n", nthr, shared_pages,
           (unsigned long long)(s1.faults - s0.faults), (unsigned long long)(s1.remote_fetches - s0.remote_fetches));
    /* one fetch per page, however many threads faulted on it */
    CHECK(s1.remote_fetches - s0.remote_fetches == shared_pages);
    CHECK(s1.faults - s0.faults == shared_pages);
    run(1);
    CHECK_OK(netvm_gmem_stats(g, &s0));
    for (size_t p = 0; p < npages; p++)
        if (!gt_check(m + p * GPAGE, p, ver[p]))
            FAILF("after the threads: page %zu wrong", p);
    printf("threads: %d threads on pages of their own: %llu faults, %llu evictions (%llu dirty)\n", nthr,
           (unsigned long long)(s0.faults - s1.faults), (unsigned long long)(s0.evictions - s1.evictions),
           (unsigned long long)(s0.evictions_dirty - s1.evictions_dirty));
    CHECK(s0.evictions_dirty - s1.evictions_dirty > npages);

    /* EEXIST: a page placed behind the pager's back while its fault is
     * being served; the pager keeps what is there and counts it dirty */
    struct nv_gm_region *r = nv_gm_region_of(g);
    size_t p = npages - 1;
    CHECK(gt_check(m + p * GPAGE, p, ver[p]));
    static unsigned char page[GPAGE] __attribute__((aligned(GPAGE)));
    uint64_t before = __atomic_load_n(&r->c.eexist, __ATOMIC_RELAXED);
    CHECK_OK(netvm_gmem_sync(g));
    /* take it out as the evictor would, then put it back directly */
    while ((__atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE) & NV_GM_STATE) != NV_GM_ABSENT)
        for (size_t q = 0; q < budget * 2; q++)
            CHECK(gt_check(m + q * GPAGE, q, ver[q]));
    gt_fill(page, p, ++ver[p]);
    CHECK(nv_gm_uffd_copy(r->uffd, (uintptr_t)(m + p * GPAGE), page, GPAGE, 0) == 0);
    struct uffd_msg msg = { .event = UFFD_EVENT_PAGEFAULT };
    msg.arg.pagefault.address = (uintptr_t)(m + p * GPAGE);
    static unsigned char buf[GPAGE] __attribute__((aligned(GPAGE)));
    nv_gm_fault_msg(r, &msg, buf);
    CHECK(__atomic_load_n(&r->c.eexist, __ATOMIC_RELAXED) == before + 1);
    uint32_t st = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    CHECK((st & NV_GM_STATE) == NV_GM_RESIDENT && (st & NV_GM_DIRTY));
    CHECK(gt_check(m + p * GPAGE, p, ver[p]));
    /* and it survives an eviction as the dirty page it is */
    for (size_t q = 0; q < npages - 1; q++)
        CHECK(gt_check(m + q * GPAGE, q, ver[q]));
    CHECK(gt_check(m + p * GPAGE, p, ver[p]));
    printf("threads: EEXIST served: ok\n");
    CHECK_OK(netvm_gmem_unmap(g));
    printf("threads: ok\n");
    return 0;
}
