/* The evictor: one thread per region keeps resident pages under the
 * budget. Victims come from a CLOCK over the page states, whose reference
 * bit is set by the access information the pager really has: missing and
 * write-protect faults (docs/gmem.md measures the alternatives). Clean
 * victims are taken out and dropped at once; dirty ones are taken out
 * (UFFDIO_MOVE, atomic: a later write faults as missing and waits), stored
 * in runs of adjacent pages, and dropped when every copy is acknowledged.
 * Sync and the early cleaner write dirty pages back without dropping them:
 * the page is write-protected before its copy is taken, so a write during
 * the write-back makes it dirty again instead of being lost. */
#include "gmem/pager.h"
#include "util/log.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct wb_wait {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    int             pending;
    netvm_status_t  status;
};

__attribute__((noinline)) void nv_gm_copy_protected(void *dst, const void *page)
{
    memcpy(dst, page, NV_GM_PAGE);
}

static void wb_done(void *arg, netvm_status_t st)
{
    struct wb_wait *w = arg;
    pthread_mutex_lock(&w->lock);
    if (st != NETVM_OK)
        w->status = st;
    w->pending--;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

static void wb_init(struct wb_wait *w)
{
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    w->pending = 0;
    w->status = NETVM_OK;
}

/* One more store for the wait to count (one that does not start is
 * settled at once, as failed: wb_done). */
static void wb_add(struct wb_wait *w)
{
    pthread_mutex_lock(&w->lock);
    w->pending++;
    pthread_mutex_unlock(&w->lock);
}

static void wb_issue(struct nv_gm_region *r, struct wb_wait *w, uint64_t first, uint64_t n, const void *buf)
{
    nv_gm_child_before_store(r, first, n);
    wb_add(w);
    netvm_status_t st = r->store->ops->store_nb(r->store, first, n, buf, wb_done, w);
    if (st != NETVM_OK)
        wb_done(w, st);
}

static netvm_status_t wb_finish(struct wb_wait *w)
{
    pthread_mutex_lock(&w->lock);
    while (w->pending)
        pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    return w->status;
}

/* One batch of victims, at most NV_GM_STAGE: chosen, moved out to the
 * staging slots in order, the dirty ones stored by runs. */
struct batch {
    uint64_t page[NV_GM_STAGE];
    uint32_t old[NV_GM_STAGE];
    int      n;
};

/* Store the n pages pages[] (ascending), page i's bytes at src[i]: in one
 * store_vec_nb where the store has it (scattered pages: a call a server,
 * not a call a page), else a store_nb a run of adjacent pages whose bytes
 * are adjacent too. */
static void wb_issue_pages(struct nv_gm_region *r, struct wb_wait *w, const uint64_t *pages,
                           const void *const *src, uint64_t n)
{
    if (!n)
        return;
    if (!r->store->ops->store_vec_nb) {
        for (uint64_t i = 0; i < n;) {
            uint64_t j = i + 1;
            while (j < n && pages[j] == pages[j - 1] + 1 &&
                   (const unsigned char *)src[j] == (const unsigned char *)src[j - 1] + NV_GM_PAGE)
                j++;
            wb_issue(r, w, pages[i], j - i, src[i]);
            i = j;
        }
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        nv_gm_child_before_store(r, pages[i], 1);
    wb_add(w);
    netvm_status_t st = r->store->ops->store_vec_nb(r->store, pages, src, n, wb_done, w);
    if (st != NETVM_OK)
        wb_done(w, st);
}

/* The batch's dirty pages, sorted (the hand passes in order but may wrap
 * round within a batch). */
static void wb_issue_batch(struct nv_gm_region *r, struct wb_wait *w, const struct batch *b)
{
    uint64_t pages[NV_GM_STAGE];
    const void *src[NV_GM_STAGE];
    uint64_t n = 0;
    for (int i = 0; i < b->n; i++) {
        if (!(b->old[i] & NV_GM_DIRTY))
            continue;
        uint64_t j = n++;
        for (; j > 0 && pages[j - 1] > b->page[i]; j--) {
            pages[j] = pages[j - 1];
            src[j] = src[j - 1];
        }
        pages[j] = b->page[i];
        src[j] = r->ev_stage + (size_t)i * NV_GM_PAGE;
    }
    wb_issue_pages(r, w, pages, src, n);
}

/* A write-back's span, as the program's discards see it (pager_events.c) */
static void wb_begin(struct nv_gm_region *r) { __atomic_fetch_add(&r->wb_active, 1, __ATOMIC_SEQ_CST); }
static void wb_end(struct nv_gm_region *r)
{
    __atomic_fetch_add(&r->wb_ended, 1, __ATOMIC_SEQ_CST);
    __atomic_fetch_sub(&r->wb_active, 1, __ATOMIC_SEQ_CST);
}

/* Returns how many of the batch's pages stayed resident (their
 * write-back failed). */
static int batch_finish(struct nv_gm_region *r, struct batch *b)
{
    int stayed = 0;
    struct wb_wait w;
    wb_init(&w);
    wb_begin(r);
    wb_issue_batch(r, &w, b);
    netvm_status_t st = wb_finish(&w);
    for (int i = 0; i < b->n; i++) {
        uint64_t p = b->page[i];
        uintptr_t a = nv_gm_page_addr(r, p);
        if ((b->old[i] & NV_GM_DIRTY) && st != NETVM_OK && a) {
            /* not stored everywhere: the page comes back, resident and
             * dirty (store.h), rather than risk its only copy; unless the
             * program discarded it meanwhile (the gate: pager.h; this
             * thread may wait at it) */
            while (!nv_gm_place_enter(r))
                sched_yield();
            int back = !nv_gm_discarded(r, p) &&
                       nv_gm_uffd_copy(r->uffd, a, r->ev_stage + (size_t)i * NV_GM_PAGE, NV_GM_PAGE, 0) == 0;
            if (back) {
                __atomic_store_n(&r->state[p], NV_GM_RESIDENT | NV_GM_DIRTY | NV_GM_REF, __ATOMIC_RELEASE);
                nv_gm_resmap_set(r, p);
            }
            nv_gm_place_leave(r);
            if (back) {
                stayed++;
                continue;
            }
        }
        uint32_t s = __atomic_exchange_n(&r->state[p], NV_GM_ABSENT, __ATOMIC_ACQ_REL);
        if (s & NV_GM_DISCARD)
            r->store->ops->discard(r->store, p, 1);   /* discarded during its write-back */
        NV_GM_CNT(r, evictions);
        if (b->old[i] & NV_GM_DIRTY)
            NV_GM_CNT(r, evictions_dirty);
        nv_gm_page_gone(r, b->old[i]);
        if (a)
            nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
    }
    wb_end(r);
    /* said once while write-backs keep failing (no server takes pages),
     * not once a batch: the evictor retries every millisecond */
    if (st != NETVM_OK && !r->wb_failing)
        nv_warn("gmem: a write-back failed (%s): its pages stay resident and dirty (said once until one succeeds)",
                netvm_strerror(st));
    r->wb_failing = st != NETVM_OK;
    /* the staged pages: kept for read-ahead to fill (a page allocated,
     * charged and zeroed fewer), or dropped */
    if (!nv_gm_reuse_give(r, (unsigned)b->n))
        madvise(r->ev_stage, (size_t)b->n * NV_GM_PAGE, MADV_DONTNEED);
    b->n = 0;
    return stayed;
}

/* Victims chosen (made EVICTING) and not yet moved out: they are moved
 * together, adjacent ones with one UFFDIO_MOVE, because every call costs
 * a TLB shootdown (an IPI to the program's CPU: 12 us a page here against
 * 0.26 us a page in runs of 64, docs/performance.md). */
struct pick {
    uint64_t page[NV_GM_STAGE];
    uint32_t old[NV_GM_STAGE];
    int      n;
};

/* Choose page p if it is a victim now: 1 chosen, 0 not. */
static int pick(struct nv_gm_region *r, struct pick *k, uint64_t p)
{
    uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    if ((s & NV_GM_STATE) != NV_GM_RESIDENT)
        return 0;
    if (s & NV_GM_COW) {
        r->cow_seen++;
        return 0;
    }
    if (s & NV_GM_REF) {
        __atomic_compare_exchange_n(&r->state[p], &s, s & ~(uint32_t)NV_GM_REF, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
        return 0;
    }
    if (!__atomic_compare_exchange_n(&r->state[p], &s, (s & ~(uint32_t)NV_GM_STATE) | NV_GM_EVICTING, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return 0;
    k->page[k->n] = p;
    k->old[k->n] = s;
    k->n++;
    return 1;
}

/* A chosen page that could not be moved out (error e): gone already, or
 * it stays. */
static void move_failed(struct nv_gm_region *r, uint64_t p, uint32_t s, uintptr_t a, int e)
{
    if (e == -ENOENT) {
        /* nothing mapped there: the program discarded or unmapped it and
         * the event is not read yet; it reads as zeros now */
        __atomic_store_n(&r->state[p], NV_GM_ABSENT, __ATOMIC_RELEASE);
        nv_gm_page_gone(r, s);
        if (a)
            nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);   /* faults that saw it EVICTING */
        return;
    }
    /* EBUSY: shared with a forked child (copy-on-write): passed over
     * (NV_GM_COW) until cow_retry, at most every NV_GM_COW_RETRY_NS (each
     * try is a system call, and a budget full of such pages made every
     * round try them all while the program waited); EAGAIN: a transient
     * lock, tried on a later pass */
    if (e == -EBUSY) {
        NV_GM_CNT(r, move_busy);
        r->cow_seen++;
    }
    __atomic_store_n(&r->state[p], s | (e == -EBUSY ? NV_GM_COW : NV_GM_REF), __ATOMIC_RELEASE);
    nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);           /* writers that saw it EVICTING */
}

static void staged(struct batch *b, uint64_t p, uint32_t old)
{
    b->page[b->n] = p;
    b->old[b->n] = old;
    b->n++;
}

/* Move the chosen pages out into the (empty) batch's staging slots, in
 * order, each run of pages adjacent in the region and in the address
 * space with one call; a page the run stopped at is moved alone, which
 * says why it failed. */
static uint64_t zap_out(struct nv_gm_region *r, struct pick *k);

static void move_out(struct nv_gm_region *r, struct pick *k, struct batch *b)
{
    for (int i = 0; i < k->n;) {
        uintptr_t a = nv_gm_page_addr(r, k->page[i]);
        if (!a) {
            move_failed(r, k->page[i], k->old[i], 0, -ENOENT);
            i++;
            continue;
        }
        int j = i + 1;
        while (j < k->n && k->page[j] == k->page[j - 1] + 1 &&
               nv_gm_page_addr(r, k->page[j]) == a + (uintptr_t)(j - i) * NV_GM_PAGE)
            j++;
        size_t moved = 0;
        int e = nv_gm_uffd_move_run(r->stage_fd, (uintptr_t)r->ev_stage + (size_t)b->n * NV_GM_PAGE, a,
                                    (size_t)(j - i) * NV_GM_PAGE, 0, &moved);
        for (size_t q = 0; q < moved / NV_GM_PAGE; q++, i++)
            staged(b, k->page[i], k->old[i]);
        if (!e)
            continue;
        uintptr_t fa = nv_gm_page_addr(r, k->page[i]);
        if (moved || e == -EAGAIN)
            e = fa ? nv_gm_uffd_move(r->stage_fd, (uintptr_t)r->ev_stage + (size_t)b->n * NV_GM_PAGE, fa, NV_GM_PAGE)
                   : -ENOENT;
        if (e == 0)
            staged(b, k->page[i], k->old[i]);
        else
            move_failed(r, k->page[i], k->old[i], fa, e);
        i++;
    }
    k->n = 0;
}

/* A reader's chosen pages (clean, in a read-only mapping that UFFDIO_MOVE
 * does not take: pager.h) leave at once; how many. */
static uint64_t zap_out(struct nv_gm_region *r, struct pick *k)
{
    for (int i = 0; i < k->n; i++) {
        uintptr_t a = nv_gm_page_addr(r, k->page[i]);
        if (a)
            nv_gm_zap(r, a);
        __atomic_store_n(&r->state[k->page[i]], NV_GM_ABSENT, __ATOMIC_RELEASE);
        NV_GM_CNT(r, evictions);
        nv_gm_page_gone(r, k->old[i]);
        if (a)
            nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
    }
    uint64_t n = (uint64_t)k->n;
    k->n = 0;
    return n;
}

/* The hand's next page at or after r->hand that may be resident, within
 * the first `used` pages, wrapping; *scanned grows by the positions passed
 * (the loop below stops after three rounds). Walking every page ever used
 * cost a sequential scan of 2 GiB with a 4 MiB budget 500 absent pages per
 * victim, the evictor a quarter of a CPU; the map skips 64 at a time.
 * UINT64_MAX: none in a whole round. */
static uint64_t next_candidate(struct nv_gm_region *r, uint64_t used, uint64_t *scanned)
{
    uint64_t start = r->hand % used, p = start;
    for (int wrapped = 0;;) {
        uint64_t w = __atomic_load_n(&r->resmap[p / 64], __ATOMIC_ACQUIRE) >> (p % 64);
        if (w) {
            uint64_t q = p + (uint64_t)__builtin_ctzll(w);
            if (q < used && (!wrapped || q < start)) {
                *scanned += q - p + 1;
                r->hand = q + 1;
                return q;
            }
        }
        uint64_t next = (p / 64 + 1) * 64;
        if (!wrapped && next >= used) {
            *scanned += used - p;
            wrapped = 1;
            p = 0;
        } else {
            *scanned += next - p;
            p = next;
        }
        if (wrapped && p >= start) {
            r->hand = start;
            return UINT64_MAX;
        }
    }
}

/* Page p's bit is set but it was found not resident: clear the bit, then
 * look again, since a placement may have set both meanwhile (it writes the
 * state first, the bit second). */
static void resmap_tidy(struct nv_gm_region *r, uint64_t p)
{
    uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    if ((s & NV_GM_STATE) != NV_GM_ABSENT && (s & NV_GM_STATE) != NV_GM_LOST)
        return;
    __atomic_fetch_and(&r->resmap[p / 64], ~(1ull << (p % 64)), __ATOMIC_SEQ_CST);
    s = __atomic_load_n(&r->state[p], __ATOMIC_SEQ_CST);
    if ((s & NV_GM_STATE) != NV_GM_ABSENT && (s & NV_GM_STATE) != NV_GM_LOST)
        nv_gm_resmap_set(r, p);
}

/* A round took nothing: the pages shared with a child are tried again
 * (the parent may have written them since, which unshares them), at most
 * every NV_GM_COW_RETRY_NS. */
#define NV_GM_COW_RETRY_NS 50000000ull
static void cow_retry(struct nv_gm_region *r)
{
    uint64_t used = __atomic_load_n(&r->used, __ATOMIC_ACQUIRE);
    for (uint64_t w = 0; w * 64 < used; w++)
        for (uint64_t m = __atomic_load_n(&r->resmap[w], __ATOMIC_ACQUIRE); m; m &= m - 1)
            __atomic_fetch_and(&r->state[w * 64 + (uint64_t)__builtin_ctzll(m)], ~(uint32_t)NV_GM_COW,
                               __ATOMIC_ACQ_REL);
}

/* Evict until the count is down to the low watermark; returns the number
 * of pages taken out (not those a failed write-back put back). */
static uint64_t evict_round(struct nv_gm_region *r)
{
    struct batch b = { .n = 0 };
    struct pick k = { .n = 0 };
    uint64_t taken = 0, scanned = 0;
    pthread_mutex_lock(&r->wb_lock);
    /* the hand goes round the pages ever used, not the whole region */
    uint64_t used = __atomic_load_n(&r->used, __ATOMIC_ACQUIRE);
    while (used && __atomic_load_n(&r->resident, __ATOMIC_ACQUIRE) - (uint64_t)k.n > r->low_water &&
           scanned < 3 * used) {
        uint64_t p = next_candidate(r, used, &scanned);
        if (p == UINT64_MAX)
            break;
        int chosen = pick(r, &k, p);
        if (!chosen)
            resmap_tidy(r, p);
        if (chosen && k.n == NV_GM_STAGE) {
            if (r->read_only) {
                taken += zap_out(r, &k);
                continue;
            }
            move_out(r, &k, &b);
            taken += (uint64_t)b.n;
            taken -= (uint64_t)batch_finish(r, &b);
        }
    }
    if (k.n && r->read_only) {
        taken += zap_out(r, &k);
    } else if (k.n) {
        move_out(r, &k, &b);
        taken += (uint64_t)b.n;
        if (b.n)
            taken -= (uint64_t)batch_finish(r, &b);
    }
    pthread_mutex_unlock(&r->wb_lock);
    return taken;
}

/* Write dirty pages back without dropping them (sync, early cleaner), at
 * most max of them; the caller holds wb_lock. */
static netvm_status_t clean(struct nv_gm_region *r, uint64_t max, unsigned char *buf)
{
    netvm_status_t res = NETVM_OK;
    uint64_t done = 0, pages[NV_GM_STAGE];
    const void *src[NV_GM_STAGE];
    uint64_t used = __atomic_load_n(&r->used, __ATOMIC_ACQUIRE);
    for (uint64_t p = 0; p < used && done < max;) {
        /* up to a batch of dirty pages, adjacent or not, copied into buf */
        uint64_t n = 0;
        for (; p < used && n < NV_GM_STAGE && done < max; p++) {
            uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
            if ((s & NV_GM_STATE) != NV_GM_RESIDENT || !(s & NV_GM_DIRTY) ||
                !__atomic_compare_exchange_n(&r->state[p], &s, (s & ~(uint32_t)NV_GM_STATE) | NV_GM_BUSY, 0,
                                             __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
                continue;
            uintptr_t a = nv_gm_page_addr(r, p);
            /* protected first: a write from now on faults and redirties it */
            if (!a || nv_gm_uffd_wp(r->uffd, a, NV_GM_PAGE, UFFDIO_WRITEPROTECT_MODE_WP) != 0) {
                /* EAGAIN (the mm is changing): left dirty for next time */
                nv_gm_publish(r, p, s & ~(uint32_t)(NV_GM_STATE | NV_GM_DISCARD));
                continue;
            }
            nv_gm_copy_protected(buf + n * NV_GM_PAGE, (const void *)a);
            if (!nv_gm_publish(r, p, s & ~(uint32_t)(NV_GM_STATE | NV_GM_DIRTY | NV_GM_DISCARD)))
                continue;   /* discarded by the program meanwhile: not written back */
            pages[n] = p;
            src[n] = buf + n * NV_GM_PAGE;
            n++, done++;
        }
        if (!n)
            continue;
        struct wb_wait w;
        wb_init(&w);
        wb_begin(r);
        wb_issue_pages(r, &w, pages, src, n);
        netvm_status_t st = wb_finish(&w);
        wb_end(r);
        if (st != NETVM_OK) {
            res = st;
            for (uint64_t i = 0; i < n; i++)
                __atomic_fetch_or(&r->state[pages[i]], NV_GM_DIRTY, __ATOMIC_ACQ_REL);
        }
    }
    return res;
}

netvm_status_t nv_gm_sync(struct nv_gm_region *r)
{
    pthread_mutex_lock(&r->wb_lock);
    netvm_status_t st = clean(r, UINT64_MAX, r->wb_buf);
    pthread_mutex_unlock(&r->wb_lock);
    return st;
}

void *nv_gm_evict_thread(void *arg)
{
    struct nv_gm_region *r = arg;
    uint64_t trigger = r->budget - (r->budget - r->low_water) / 2;
    pthread_mutex_lock(&r->ev_lock);
    while (!r->stopping) {
        if (__atomic_load_n(&r->resident, __ATOMIC_ACQUIRE) < trigger && !r->room_waiters) {
            if (r->write_policy == NETVM_GMEM_WRITE_EARLY) {
                /* the early cleaner: a slice of dirty pages every 10 ms */
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += 10000000;
                if (ts.tv_nsec >= 1000000000) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000;
                }
                if (pthread_cond_timedwait(&r->ev_cond, &r->ev_lock, &ts) == ETIMEDOUT && !r->stopping) {
                    pthread_mutex_unlock(&r->ev_lock);
                    pthread_mutex_lock(&r->wb_lock);
                    clean(r, NV_GM_STAGE, r->wb_buf);
                    pthread_mutex_unlock(&r->wb_lock);
                    pthread_mutex_lock(&r->ev_lock);
                }
            } else {
                pthread_cond_wait(&r->ev_cond, &r->ev_lock);
            }
            continue;
        }
        pthread_mutex_unlock(&r->ev_lock);
        r->cow_seen = 0;
        uint64_t taken = evict_round(r);
        int shared = r->cow_seen != 0;
        /* not after every futile round: each retry is a system call per
         * such page, and a round of 2 000 of them (4 ms) between every
         * two grants of room made each fault wait that long */
        if (!taken && shared && nv_gm_now_ns() - r->cow_retry_ns >= NV_GM_COW_RETRY_NS) {
            cow_retry(r);
            r->cow_retry_ns = nv_gm_now_ns();
        }
        pthread_mutex_lock(&r->ev_lock);
        if (!taken && r->room_waiters && !r->stopping && r->wb_failing) {
            /* Every victim was dirty and no server took it (the only
             * server died, or every one is full): waiting for room would
             * hang the program's next fault for good. The waiting
             * placements go past the budget instead; the pages stay
             * resident until a write-back succeeds again. */
            r->room_grants = r->room_waiters;
            if (!r->wb_overcommit_said) {
                r->wb_overcommit_said = 1;
                nv_warn("gmem: no server takes the region's dirty pages: it goes past its budget rather than "
                        "block the program");
            }
        }
        if (!taken && r->room_waiters && !r->stopping && shared) {
            /* Pages resident at a fork are shared copy-on-write with the
             * child until this process writes them, and the kernel moves
             * no shared page (EBUSY), even after the child is gone. When
             * they are all that is resident, waiting for room would wait
             * for ever: the waiting placements go past the budget instead
             * (the pages they place are this process's own, so the next
             * rounds can move them out again). */
            r->room_grants = r->room_waiters;
            if (!r->overcommit_said) {
                r->overcommit_said = 1;
                nv_warn("gmem: pages shared with a forked child (copy-on-write, resident at the fork and not "
                        "written since) cannot be moved out: the region goes past its budget while nothing "
                        "else can go");
            }
        }
        pthread_cond_broadcast(&r->room_cond);
        if (!taken && !r->stopping && (r->wb_failing || r->room_waiters || shared)) {
            /* nothing could go (every resident page busy, shared with a
             * forked child, or dirty with no server taking it): let the
             * hand pass again after a pause rather than spin (waiters
             * behind shared pages were let past the budget above) */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&r->ev_cond, &r->ev_lock, &ts);
        }
    }
    pthread_mutex_unlock(&r->ev_lock);
    return NULL;
}
