/* Pages and addresses: the region's segments (mremap may move part of
 * it), and publishing a page its owner placed. */
#include "gmem/pager.h"

#include <sys/mman.h>

uint64_t nv_gm_seg_addr_page(const struct nv_gm_seg *seg, int nseg, uintptr_t addr)
{
    for (int i = 0; i < nseg; i++)
        if (addr >= seg[i].start && addr < seg[i].start + seg[i].n * NV_GM_PAGE)
            return seg[i].first + (addr - seg[i].start) / NV_GM_PAGE;
    return UINT64_MAX;
}

uintptr_t nv_gm_seg_page_addr(const struct nv_gm_seg *seg, int nseg, uint64_t page)
{
    for (int i = 0; i < nseg; i++)
        if (page >= seg[i].first && page < seg[i].first + seg[i].n)
            return seg[i].start + (page - seg[i].first) * NV_GM_PAGE;
    return 0;
}

uintptr_t nv_gm_page_addr(struct nv_gm_region *r, uint64_t page)
{
    pthread_rwlock_rdlock(&r->seg_lock);
    uintptr_t a = nv_gm_seg_page_addr(r->seg, r->nseg, page);
    pthread_rwlock_unlock(&r->seg_lock);
    return a;
}

uint64_t nv_gm_addr_page(struct nv_gm_region *r, uintptr_t addr)
{
    pthread_rwlock_rdlock(&r->seg_lock);
    uint64_t p = nv_gm_seg_addr_page(r->seg, r->nseg, addr);
    pthread_rwlock_unlock(&r->seg_lock);
    return p;
}

void nv_gm_drop(struct nv_gm_region *r, uint64_t p, uint32_t flags)
{
    uintptr_t a = nv_gm_page_addr(r, p);
    unsigned char *slot = r->stage + (size_t)NV_GM_DROP_SLOT * NV_GM_PAGE;
    if (a && r->read_only) {
        nv_gm_zap(r, a);
    } else if (a) {
        /* out without an event on the region (pager.h) */
        pthread_mutex_lock(&r->drop_lock);
        if (nv_gm_uffd_move(r->stage_fd, (uintptr_t)slot, a, NV_GM_PAGE) == 0)
            madvise(slot, NV_GM_PAGE, MADV_DONTNEED);
        pthread_mutex_unlock(&r->drop_lock);
    }
    __atomic_store_n(&r->state[p], NV_GM_ABSENT, __ATOMIC_RELEASE);
    nv_gm_page_gone(r, flags);
    if (a)
        nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
}

int nv_gm_publish(struct nv_gm_region *r, uint64_t p, uint32_t flags)
{
    uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    for (;;) {
        if (s & NV_GM_DISCARD) {
            nv_gm_drop(r, p, flags);
            return 0;
        }
        if (__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_RESIDENT | NV_GM_REF | flags, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            nv_gm_resmap_set(r, p);
            return 1;
        }
    }
}
