/* Read-ahead: a missing fault on the page after the previous fault, or on
 * the first page past the last window, starts nonblocking fetches of up to
 * NETVM_GMEM_READAHEAD pages ahead into the read-ahead buffers; each
 * completion places its page. A fault on a page being read ahead finds it
 * BUSY and waits for that fetch (the placement wakes it). Hits: pages read
 * ahead that the sequential stream has passed (the program went on past
 * them without faulting) or that were written; waste: those evicted or
 * discarded untouched. */
#include "gmem/pager.h"

#include <errno.h>
#include <time.h>

static void ra_release(struct nv_gm_region *r, unsigned slot)
{
    __atomic_fetch_or(&r->ra_free, (uint64_t)1 << slot, __ATOMIC_RELEASE);
}

static int ra_grab(struct nv_gm_region *r)
{
    uint64_t f = __atomic_load_n(&r->ra_free, __ATOMIC_ACQUIRE);
    while (f) {
        unsigned slot = (unsigned)__builtin_ctzll(f);
        if (__atomic_compare_exchange_n(&r->ra_free, &f, f & ~((uint64_t)1 << slot), 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
            return (int)slot;
    }
    return -1;
}

static void ra_place(struct nv_gm_region *r, struct nv_gm_ra_op *op, netvm_status_t st)
{
    uint64_t p = op->page;
    uintptr_t a = nv_gm_page_addr(r, p);
    int e = -ENOENT;
    if (st == NETVM_OK && a)
        e = nv_gm_uffd_copy(r->uffd, a, r->ra_buf + (size_t)op->slot * NV_GM_PAGE, NV_GM_PAGE, UFFDIO_COPY_MODE_WP);
    if (e == 0) {
        nv_gm_publish(r, p, NV_GM_RA);
        return;
    }
    if (e == -EEXIST) {
        NV_GM_CNT(r, eexist);
        nv_gm_publish(r, p, NV_GM_DIRTY);
        nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
        return;
    }
    if (e == -EAGAIN)
        NV_GM_CNT(r, eagain);
    /* not placed: a fault on it fetches it itself (and poisons it if no
     * copy is left) */
    __atomic_store_n(&r->state[p], NV_GM_ABSENT, __ATOMIC_RELEASE);
    nv_gm_unreserve(r, 1);
    if (a)
        nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
}

/* Runs in the progress engine (or inline with the local store): never
 * blocks. The slot is given back last: netvm_gmem_unmap frees the region
 * once every slot is back, so nothing here may touch it after. */
static void ra_done(void *arg, netvm_status_t st)
{
    struct nv_gm_ra_op *op = arg;
    struct nv_gm_region *r = op->r;
    unsigned slot = op->slot;
    ra_place(r, op, st);
    ra_release(r, slot);
}

void nv_gm_readahead_drain(struct nv_gm_region *r)
{
    uint64_t all = NV_GM_RABUF == 64 ? UINT64_MAX : ((uint64_t)1 << NV_GM_RABUF) - 1;
    while (__atomic_load_n(&r->ra_free, __ATOMIC_ACQUIRE) != all) {
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
}

void nv_gm_readahead(struct nv_gm_region *r, uint64_t p)
{
    uint64_t w = (uint64_t)r->ra_window;
    /* the stream went past these: hits */
    for (uint64_t q = p > 2 * w ? p - 2 * w : 0; q < p; q++) {
        uint32_t s = __atomic_load_n(&r->state[q], __ATOMIC_ACQUIRE);
        if ((s & NV_GM_STATE) == NV_GM_RESIDENT && (s & NV_GM_RA) &&
            __atomic_compare_exchange_n(&r->state[q], &s, s & ~(uint32_t)NV_GM_RA, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            NV_GM_CNT(r, ra_hits);
    }
    uint64_t start = p + 1, end = p + 1 + w;
    uint64_t next = __atomic_load_n(&r->ra_next, __ATOMIC_RELAXED);
    if (next > start && next < end)
        start = next;
    if (end > r->npages)
        end = r->npages;
    uint64_t q;
    for (q = start; q < end; q++) {
        uint32_t s = __atomic_load_n(&r->state[q], __ATOMIC_ACQUIRE);
        if (s != NV_GM_ABSENT || !r->store->ops->has(r->store, q))
            continue;          /* there, on its way, or zeros (filled on fault at no cost) */
        int slot = ra_grab(r);
        if (slot < 0)
            break;
        if (!nv_gm_try_reserve(r)) {
            ra_release(r, (unsigned)slot);
            break;             /* no room: read-ahead never evicts */
        }
        if (!__atomic_compare_exchange_n(&r->state[q], &s, NV_GM_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            nv_gm_unreserve(r, 1);
            ra_release(r, (unsigned)slot);
            continue;
        }
        struct nv_gm_ra_op *op = &r->ra_op[slot];
        op->r = r;
        op->page = q;
        op->slot = (unsigned)slot;
        NV_GM_CNT(r, ra_issued);
        if (r->store->ops->fetch_nb(r->store, q, r->ra_buf + (size_t)slot * NV_GM_PAGE, ra_done, op) != NETVM_OK) {
            __atomic_store_n(&r->state[q], NV_GM_ABSENT, __ATOMIC_RELEASE);
            nv_gm_unreserve(r, 1);
            ra_release(r, (unsigned)slot);
            break;
        }
    }
    __atomic_store_n(&r->ra_next, q, __ATOMIC_RELAXED);
}
