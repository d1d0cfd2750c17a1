/* A shared region's reader drops the pages a writer's sync changed
 * (docs/gmem.md, "Shared regions"). Runs in the progress engine: no
 * blocking, only the page's state word, one madvise and a wake. */
#include "gmem/pager.h"

#include <sys/mman.h>
#include <time.h>

void nv_gm_zap(struct nv_gm_region *r, uintptr_t a)
{
    (void)r;
    /* no REMOVE event on a reader's uffd (pager.h): nobody waits for it */
    madvise((void *)a, NV_GM_PAGE, MADV_DONTNEED);
}

uint64_t nv_gm_invalidate(void *region, uint64_t first, uint64_t n, int drop)
{
    struct nv_gm_region *r = region;
    uint64_t busy = 0;
    for (uint64_t p = first; p < first + n && p < r->npages; p++) {
        uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
        if (!drop) {
            busy += (s & NV_GM_STATE) == NV_GM_BUSY && (s & NV_GM_DISCARD);   /* fetched before it */
            continue;
        }
        for (;;) {
            unsigned st = s & NV_GM_STATE;
            if (st == NV_GM_RESIDENT) {
                if (!__atomic_compare_exchange_n(&r->state[p], &s, (s & ~(uint32_t)NV_GM_STATE) | NV_GM_BUSY, 0,
                                                 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                    continue;
                nv_gm_drop(r, p, s);
            } else if (st == NV_GM_BUSY) {
                /* being fetched: its copy may be older than the sync; its
                 * owner drops it instead of publishing it (nv_gm_publish) */
                if (!(s & NV_GM_DISCARD) &&
                    !__atomic_compare_exchange_n(&r->state[p], &s, s | NV_GM_DISCARD, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE))
                    continue;
                busy++;
            }
            /* ABSENT: the next access fetches it; EVICTING: leaving now */
            break;
        }
    }
    return busy;
}

void nv_gm_region_refetch(netvm_gmem_t *region, uint64_t first, uint64_t n)
{
    struct nv_gm_region *r = nv_gm_region_of(region);
    nv_gm_invalidate(r, first, n, 1);
    /* a fetch in flight carries the old block: its owner drops the page
     * instead of publishing it, but only after placing it, and a thread
     * that read the window in between would see the old bytes. So the
     * move returns once every such fetch is over (each ends within the
     * region's timeout). */
    while (nv_gm_invalidate(r, first, n, 0)) {
        struct timespec ts = { 0, 20000 };
        nanosleep(&ts, NULL);
    }
    /* MMB prefetches a block when it is mapped: read-ahead from its first
     * page (the program's fault on that one fetches it) */
    int dir, sx = r->ra_window > 0 && n > 1 && first < r->npages ? nv_gm_stream_of(r, first, &dir) : -1;
    if (sx >= 0)
        nv_gm_readahead(r, sx, first, 1, 0);
}
