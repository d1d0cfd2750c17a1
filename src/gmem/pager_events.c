/* The kernel's events on a region (read by the fault threads with the
 * faults): the program's own MADV_DONTNEED/REMOVE and munmap of part (the
 * pages read as zeros from then on: dropped here and discarded in the
 * store) and mremap (the region, or part of it, moved: its segments
 * follow). Fork is in pager_fork.c. */
#include "gmem/pager.h"
#include "util/log.h"

#include <sched.h>
#include <unistd.h>

/* Pages [first, first + n) were discarded by the program. */
static void discard_pages(struct nv_gm_region *r, uint64_t first, uint64_t n)
{
    /* write-backs under way now or ending before the loop below is done
     * may store a page of the range after the discard: seen, it is
     * discarded again at the end */
    uint64_t active = __atomic_load_n(&r->wb_active, __ATOMIC_SEQ_CST);
    uint64_t ended = __atomic_load_n(&r->wb_ended, __ATOMIC_SEQ_CST);
    /* the store first: the kernel zaps the pages as soon as this event
     * was read, and a fault after that must not fetch the old data */
    nv_gm_child_before_store(r, first, n);
    r->store->ops->discard(r->store, first, n);
    for (uint64_t p = first; p < first + n; p++) {
        uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
        for (;;) {
            uint32_t st = s & NV_GM_STATE;
            if (st == NV_GM_RESIDENT) {
                if (!__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_ABSENT, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE))
                    continue;
                NV_GM_CNT(r, discarded);
                nv_gm_page_gone(r, s);
            } else if (st == NV_GM_BUSY || st == NV_GM_EVICTING) {
                /* its owner drops it when done (nv_gm_publish, the evictor) */
                if (!(s & NV_GM_DISCARD) &&
                    !__atomic_compare_exchange_n(&r->state[p], &s, s | NV_GM_DISCARD, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE))
                    continue;
                NV_GM_CNT(r, discarded);
            } else if (st == NV_GM_LOST) {
                if (!__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_ABSENT, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE))
                    continue;
            }
            break;
        }
    }
    /* A write-back that ran beside the loop above may have stored a page
     * of the range after the discard and left it ABSENT before the loop
     * looked (so never marked NV_GM_DISCARD): the evictor's, of a page
     * moved out before the zap, or the cleaner's, of a page it left
     * resident. Forget the range once more. Nothing newer is lost: this
     * runs under read_lock, so no fault after the zap is served before it
     * (gmem_madvise saw such a leftover after a munmap once, in a
     * fresh-clone make test under load). */
    if (active || __atomic_load_n(&r->wb_active, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&r->wb_ended, __ATOMIC_SEQ_CST) != ended)
        r->store->ops->discard(r->store, first, n);
}

static void range_pages(struct nv_gm_region *r, uintptr_t start, uintptr_t end)
{
    /* the range may span segments: walk it page by page, discarding runs */
    uint64_t first = UINT64_MAX, n = 0;
    for (uintptr_t a = start; a < end; a += NV_GM_PAGE) {
        uint64_t p = nv_gm_addr_page(r, a);
        if (p != UINT64_MAX && n && p == first + n) {
            n++;
            continue;
        }
        if (n)
            discard_pages(r, first, n);
        first = p;
        n = p != UINT64_MAX;
    }
    if (n)
        discard_pages(r, first, n);
}

/* [from, from + len) now lives at to (to 0: it is unmapped): cut the
 * segments there and move (or drop) the pieces inside. */
static void remap(struct nv_gm_region *r, uintptr_t from, uintptr_t to, uint64_t len)
{
    struct nv_gm_seg out[NV_GM_MAXSEG];
    int n = 0, overflow = 0;
    pthread_rwlock_wrlock(&r->seg_lock);
    for (int i = 0; i < r->nseg; i++) {
        struct nv_gm_seg s = r->seg[i];
        uintptr_t s_end = s.start + s.n * NV_GM_PAGE;
        uintptr_t lo = s.start > from ? s.start : from, hi = s_end < from + len ? s_end : from + len;
        if (lo >= hi) {
            if (n < NV_GM_MAXSEG) out[n++] = s; else overflow = 1;
            continue;
        }
        struct nv_gm_seg pieces[3] = {
            { s.start, s.first, (lo - s.start) / NV_GM_PAGE },
            { to + (lo - from), s.first + (lo - s.start) / NV_GM_PAGE, (hi - lo) / NV_GM_PAGE },
            { hi, s.first + (hi - s.start) / NV_GM_PAGE, (s_end - hi) / NV_GM_PAGE },
        };
        for (int k = 0; k < 3; k++)
            if (pieces[k].n && (k != 1 || to)) {
                if (n < NV_GM_MAXSEG) out[n++] = pieces[k]; else overflow = 1;
            }
    }
    if (!overflow) {
        for (int i = 0; i < n; i++)
            r->seg[i] = out[i];
        r->nseg = n;
    }
    pthread_rwlock_unlock(&r->seg_lock);
    if (overflow)
        nv_error("gmem: mremap split the region into more than %d pieces: the moved pages are no longer "
                 "managed (their faults read zeros); remap whole regions", NV_GM_MAXSEG);
}

void nv_gm_event(struct nv_gm_region *r, const struct uffd_msg *m)
{
    switch (m->event) {
    case UFFD_EVENT_REMOVE:
        range_pages(r, (uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
        break;
    case UFFD_EVENT_UNMAP:
        /* gone from the address space: discarded, and no longer the
         * region's (unmap leaves alone whatever is mapped there later) */
        range_pages(r, (uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
        remap(r, (uintptr_t)m->arg.remove.start, 0, m->arg.remove.end - m->arg.remove.start);
        break;
    case UFFD_EVENT_REMAP:
        remap(r, (uintptr_t)m->arg.remap.from, (uintptr_t)m->arg.remap.to, m->arg.remap.len);
        break;
    case UFFD_EVENT_FORK:
        nv_gm_child_add(r, (int)m->arg.fork.ufd);
        break;
    default:
        break;
    }
}
