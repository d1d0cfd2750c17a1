/* Evicted pages reused by read-ahead. A sequential scan over a small
 * budget evicts a page for every page it reads ahead: the evictor moves
 * its victims out to a staging area and the kernel frees them, and each
 * UFFDIO_COPY of read-ahead allocates, charges to the memory cgroup, puts
 * on the LRU and fills a new one. Here the evictor's staged pages are
 * kept instead, a batch in each of the staging areas that are not the
 * evictor's now, and read-ahead fills them with its bytes and moves them
 * in with one UFFDIO_MOVE a run (performance.md, "Evicted pages reused").
 * When every area holds pages the evictor takes the oldest and drops
 * what is left in it; a batch given while takers use them all is dropped.
 *
 * UFFDIO_MOVE maps a page writable and cannot write-protect it, so a
 * clean run is protected by a UFFDIO_WRITEPROTECT after its move; a write
 * the program made in between is not seen as a fault. So every page of
 * the run is compared with the bytes it was given once the protection has
 * taken (the kernel's TLB flush has made any earlier store visible): one
 * that differs was written and is published dirty. The comparison reads
 * managed memory, which is safe here: the pages are mapped, the run is
 * BUSY (the evictor leaves it alone) and the caller is inside the
 * placement gate, so no discard can zap them meanwhile (pager.h).
 *
 * Memory: the kept pages are outside the budget, like the read-ahead
 * buffers and the staged pages while their write-back runs: at most
 * (NV_GM_KEEP - 1) * NV_GM_STAGE pages (512 KiB). NETVM_GMEM_REUSE=0
 * drops every batch as before. */
#include "gmem/pager.h"

#include <string.h>
#include <sys/mman.h>

void nv_gm_reuse_init(struct nv_gm_region *r)
{
    for (unsigned i = 0; i < NV_GM_KEEP; i++)
        r->keep[i] = (struct nv_gm_keep){
            .base = r->stage + (size_t)i * NV_GM_STAGE * NV_GM_PAGE };
    r->keep_ev = 0;
    r->ev_stage = r->stage;
}

int nv_gm_reuse_give(struct nv_gm_region *r, unsigned n)
{
    if (!r->reuse_on || !n)
        return 0;
    /* the evictor's next area: an empty one (every page taken from it
     * gone: moved in, or dropped by its taker), else the oldest kept
     * one, its pages left dropped; none that a taker is using */
    pthread_mutex_lock(&r->reuse_lock);
    unsigned to = NV_GM_KEEP;
    for (unsigned i = 0; i < NV_GM_KEEP; i++) {
        const struct nv_gm_keep *k = &r->keep[i];
        if (i == r->keep_ev || k->busy)
            continue;
        if (k->next == k->end) {
            to = i;
            break;
        }
        if (to == NV_GM_KEEP || k->seq < r->keep[to].seq)
            to = i;
    }
    if (to == NV_GM_KEEP) {
        pthread_mutex_unlock(&r->reuse_lock);
        return 0;
    }
    struct nv_gm_keep *t = &r->keep[to], *kept = &r->keep[r->keep_ev];
    unsigned left = t->next, nleft = t->end - t->next;
    t->next = t->end = 0;
    kept->next = 0;
    kept->end = n;
    kept->seq = ++r->keep_seq;
    r->keep_ev = to;
    r->ev_stage = t->base;
    pthread_mutex_unlock(&r->reuse_lock);
    /* nobody takes from the evictor's area: dropped outside the lock,
     * before the evictor moves its next victims in */
    if (nleft)
        madvise(t->base + (size_t)left * NV_GM_PAGE, (size_t)nleft * NV_GM_PAGE, MADV_DONTNEED);
    return 1;
}

/* Whether the program wrote the page at a since it was given src's
 * bytes. Called once the page is write-protected: a write from then on
 * waits in its fault, and one before is visible. ThreadSanitizer cannot
 * see that ordering (the kernel's TLB flush), and a later write of the
 * program's would be reported against these reads with no stack left to
 * suppress it by: so the words are compared here, uninstrumented, not
 * by memcmp (which it intercepts). */
__attribute__((noinline, no_sanitize_thread)) int nv_gm_compare_protected(uintptr_t a, const unsigned char *src)
{
    const uint64_t *x = (const uint64_t *)a, *y = (const uint64_t *)(const void *)src;
    uint64_t d = 0;
    for (size_t i = 0; i < NV_GM_PAGE / sizeof *x; i++)
        d |= x[i] ^ y[i];
    return d != 0;
}

/* fewer pages than this go by UFFDIO_COPY: a move's TLB flush (an IPI to
 * the program's CPU) and a protection's are paid once a call */
#define REUSE_MIN 8u

unsigned nv_gm_reuse_place(struct nv_gm_region *r, uintptr_t a, const unsigned char *src, unsigned k, int protect,
                           unsigned char *written)
{
    if (!r->reuse_on || k < REUSE_MIN)
        return 0;
    /* from the oldest kept area that has pages */
    pthread_mutex_lock(&r->reuse_lock);
    struct nv_gm_keep *src_area = NULL;
    for (unsigned i = 0; i < NV_GM_KEEP; i++) {
        struct nv_gm_keep *c = &r->keep[i];
        if (i != r->keep_ev && c->next < c->end && (!src_area || c->seq < src_area->seq))
            src_area = c;
    }
    if (!src_area) {
        pthread_mutex_unlock(&r->reuse_lock);
        return 0;
    }
    unsigned m = src_area->end - src_area->next;
    if (m > k)
        m = k;
    unsigned char *from = src_area->base + (size_t)src_area->next * NV_GM_PAGE;
    src_area->next += m;
    src_area->busy++;
    pthread_mutex_unlock(&r->reuse_lock);

    memcpy(from, src, (size_t)m * NV_GM_PAGE);
    size_t moved = 0;
    nv_gm_uffd_move_run(r->uffd, a, (uintptr_t)from, (size_t)m * NV_GM_PAGE, UFFDIO_MOVE_MODE_DONTWAKE, &moved);
    unsigned q = (unsigned)(moved / NV_GM_PAGE);
    /* pages that stayed (a page already there, the mm changing, a page
     * shared since a fork): dropped, so the area is empty when it is the
     * evictor's again */
    if (q < m)
        madvise(from + (size_t)q * NV_GM_PAGE, (size_t)(m - q) * NV_GM_PAGE, MADV_DONTNEED);
    pthread_mutex_lock(&r->reuse_lock);
    src_area->busy--;
    pthread_mutex_unlock(&r->reuse_lock);
    if (!q)
        return 0;
    __atomic_fetch_add(&r->c.reused, q, __ATOMIC_RELAXED);
    nv_gm_test_delay(r);   /* the window between the move and the protection */
    if (!protect)
        return q;
    if (nv_gm_uffd_wp(r->uffd, a, (size_t)q * NV_GM_PAGE, UFFDIO_WRITEPROTECT_MODE_WP) != 0) {
        /* not protected: writes go unseen, so all are dirty */
        memset(written, 1, q);
        return q;
    }
    unsigned w = 0;
    for (unsigned i = 0; i < q; i++) {
        uintptr_t pa = a + (uintptr_t)i * NV_GM_PAGE;
        written[i] = (unsigned char)nv_gm_compare_protected(pa, src + (size_t)i * NV_GM_PAGE);
        /* dirty already: writable again, or its next write would fault
         * for nothing (if this fails it does, and is served as any) */
        if (written[i])
            nv_gm_uffd_wp(r->uffd, pa, NV_GM_PAGE, UFFDIO_WRITEPROTECT_MODE_DONTWAKE);
        w += written[i];
    }
    if (w)
        __atomic_fetch_add(&r->c.reuse_written, w, __ATOMIC_RELAXED);
    return q;
}
