/* Read-ahead: a missing fault on the page next to the previous fault of a
 * stream, or on the next page past the stream's last window, starts
 * nonblocking fetches of up to
 * NETVM_GMEM_READAHEAD pages ahead into the read-ahead buffers, in runs of
 * up to r->ra_run consecutive pages, one store call (one NV_GM_GETN)
 * each; each completion places the pages of its run that came. A fault on
 * a page being read ahead finds it BUSY and waits for its run (the
 * placement wakes it). Hits: pages read ahead that the sequential stream
 * has passed (the program went on past them without faulting) or that
 * were written; waste: those evicted or discarded untouched.
 *
 * Streams (pager_stream.c): up to NV_GM_STREAMS at once, each with its
 * own last fault, direction and window; a stream going down reads ahead
 * the window below the fault, runs nearest first, each run fetched in one
 * call like one going up.
 *
 * Why runs of 16 (64 KiB) in a window of 64, and of 64 in a window of
 * 128 when the budget is 64 MiB or more: a page per call made the scan a
 * stream of 4 KiB round trips (188 MB/s against a 2.6 GB/s raw stream);
 * runs of 16 amortise the round trip and still pipeline (the program
 * waits for 64 KiB, then reads while three more runs come), but the scan
 * left a fifth of both CPUs idle between runs, and runs of 64 with two in
 * flight scanned 1.6x faster (performance.md, "Read-ahead in longer
 * runs"); not measured to help in small budgets, which keep 16 in 64.
 *
 * Runs are placed write-protected, so that a page's first write is seen,
 * unless most of what read-ahead brings is written while resident: a
 * merge sort copying each merged run back over the array it read, a
 * program updating a large array in order. Each such page then cost a
 * write-protect fault (the program's sleep and a fault thread's turn, 15-25
 * us here) on top of a placement that took a fraction of a microsecond.
 * So, as for read faults (pager_fault.c, read_as_dirty), the pages placed
 * protected are counted with their first writes over windows of
 * NV_GM_RD_WINDOW, and from a quarter written the runs are placed writable
 * and dirty, one in NV_GM_RA_SAMPLE still protected to go on measuring
 * (fewer while nearly every sampled page is written: ra_count_protected).
 * Runs asked for by a write fault are placed dirty whatever the count
 * says: the program is writing that stream (plain stores, or a copy into
 * an array that is stored), and its runs, placed protected, would each
 * cost it a write-protect fault a page until a window decided; they are
 * not counted either, so a read stream beside it (the copy's source) is
 * judged by its own pages. A dirty page is written back when evicted even
 * if the program never wrote it: the price of a wrong guess, off the
 * program's path. */
#include "gmem/pager.h"

#include <errno.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <time.h>


static uint64_t ra_mask(unsigned slot, unsigned n)
{
    return (n >= 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1) << slot;
}

static void ra_release(struct nv_gm_region *r, unsigned slot, unsigned n)
{
    __atomic_fetch_or(&r->ra_free[slot / 64], ra_mask(slot % 64, n), __ATOMIC_RELEASE);
}

/* Take the first row of free buffers, at most want of them: how many
 * (0: none free), *slot the first. A run's buffers are one block, so the
 * store fetches it into one buffer. */
static unsigned ra_grab(struct nv_gm_region *r, unsigned want, unsigned *slot)
{
    for (unsigned w = 0; w < NV_GM_RABUF / 64; w++) {
        uint64_t f = __atomic_load_n(&r->ra_free[w], __ATOMIC_ACQUIRE);
        while (f) {
            unsigned lo = (unsigned)__builtin_ctzll(f);
            uint64_t rest = ~(f >> lo);
            unsigned n = rest ? (unsigned)__builtin_ctzll(rest) : 64 - lo;
            if (n > want)
                n = want;
            if (__atomic_compare_exchange_n(&r->ra_free[w], &f, f & ~ra_mask(lo, n), 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                *slot = w * 64 + lo;
                return n;
            }
        }
    }
    return 0;
}

/* The tests' widening of the windows before a run is placed and between
 * a placement and its publication (tests/gmem/discard_ra.c). */
void nv_gm_test_delay(struct nv_gm_region *r)
{
    uint64_t ns = __atomic_load_n(&r->test_place_ns, __ATOMIC_RELAXED);
    if (ns) {
        struct timespec ts = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) };
        nanosleep(&ts, NULL);
    }
}

/* Whether the run about to be issued is placed writable and dirty; write:
 * a write fault asks for it. */
static int ra_as_dirty(struct nv_gm_region *r, int write)
{
    if (!r->rd_adapt || r->read_only)
        return 0;
    unsigned every = __atomic_load_n(&r->ra_dirty, __ATOMIC_RELAXED);
    if (write || !every)
        return write;
    return __atomic_fetch_add(&r->ra_sample, 1, __ATOMIC_RELAXED) % every != 0;
}

/* Pages placed protected that close a window while one run in every is:
 * NV_GM_RD_WINDOW while runs are placed protected or one in
 * NV_GM_RA_SAMPLE is, fewer as the sample thins, so that a window spans
 * about the same pages read ahead. */
static uint64_t ra_window(unsigned every)
{
    return every <= NV_GM_RA_SAMPLE ? NV_GM_RD_WINDOW : (uint64_t)NV_GM_RD_WINDOW * NV_GM_RA_SAMPLE / every;
}

/* n more pages were placed protected: a window that closes decides. A
 * quarter written places runs dirty, one in NV_GM_RA_SAMPLE protected;
 * a window with nearly all written halves the sample (a sort, a program
 * updating an array in order: each protected page costs the program a
 * write-protect fault, for no news); any less brings it back. */
static void ra_count_protected(struct nv_gm_region *r, unsigned n)
{
    if (!r->rd_adapt || !n)
        return;
    uint64_t now = __atomic_add_fetch(&r->ra_wp_placed, n, __ATOMIC_RELAXED);
    uint64_t close = __atomic_load_n(&r->ra_wp_close, __ATOMIC_RELAXED);
    /* one thread closes a window: the one that takes its mark */
    if (now < close || !__atomic_compare_exchange_n(&r->ra_wp_close, &close, UINT64_MAX, 0, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED))
        return;
    unsigned every = __atomic_load_n(&r->ra_dirty, __ATOMIC_RELAXED);
    uint64_t win = ra_window(every);
    uint64_t w = __atomic_exchange_n(&r->ra_wp_written, 0, __ATOMIC_RELAXED);
    if (w * 4 < win)
        every = 0;
    else if (every && NV_GM_RA_STEADY(w, win))
        every = every * 2 <= NV_GM_RA_SAMPLE_MAX ? every * 2 : NV_GM_RA_SAMPLE_MAX;
    else
        every = NV_GM_RA_SAMPLE;
    __atomic_store_n(&r->ra_dirty, every, __ATOMIC_RELAXED);
    __atomic_store_n(&r->ra_wp_close, now + ra_window(every), __ATOMIC_RELAXED);
}

/* The copy mode and the flags of a run's pages: a page placed dirty is
 * published before anyone is woken (a sync from then on sees it), so its
 * copy does not wake. */
static uint64_t ra_copy_mode(const struct nv_gm_ra_op *op)
{
    return op->dirty ? UFFDIO_COPY_MODE_DONTWAKE : UFFDIO_COPY_MODE_WP;
}

static uint32_t ra_flags(const struct nv_gm_ra_op *op, unsigned i)
{
    uint32_t f = op->dirty ? NV_GM_DIRTY : NV_GM_RAWP;
    /* a fault's own page is no read-ahead: placed without the RA mark */
    return i || !op->fault ? f | NV_GM_RA : f;
}

/* Place page i of op's run (ok: it came) or leave it to its fault. */
static void ra_place(struct nv_gm_region *r, const struct nv_gm_ra_op *op, unsigned i, int ok)
{
    uint64_t p = op->page + i;
    uintptr_t a = nv_gm_page_addr(r, p);
    int e = -ENOENT;
    if (ok && a && !nv_gm_discarded(r, p))
        e = nv_gm_uffd_copy(r->uffd, a, r->ra_buf + (size_t)(op->slot + i) * NV_GM_PAGE, NV_GM_PAGE,
                            ra_copy_mode(op));
    if (e == 0) {
        nv_gm_test_delay(r);
        nv_gm_publish(r, p, ra_flags(op, i));
        if (op->dirty) {
            NV_GM_CNT(r, placed_dirty);
            nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
        } else {
            ra_count_protected(r, 1);
        }
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

/* Place pages i .. i+k-1 of op's run (mapped contiguously at a) with
 * kept pages moved in (pager_reuse.c): how many, a prefix. A page written
 * between its move and its protection is published dirty. */
static unsigned ra_reuse_run(struct nv_gm_region *r, const struct nv_gm_ra_op *op, unsigned i0, unsigned k,
                             uintptr_t a)
{
    unsigned char written[NV_GM_RABUF];
    uint64_t p = op->page + i0;
    unsigned q = nv_gm_reuse_place(r, a, r->ra_buf + (size_t)(op->slot + i0) * NV_GM_PAGE, k, !op->dirty, written);
    if (!q)
        return 0;
    unsigned clean = 0;
    for (unsigned i = 0; i < q; i++) {
        uint32_t f = ra_flags(op, i0 + i);
        if (!op->dirty && written[i])
            f = (f & ~(uint32_t)NV_GM_RAWP) | NV_GM_DIRTY;
        else if (!op->dirty)
            clean++;
        nv_gm_publish(r, p + i, f);
    }
    if (op->dirty)
        __atomic_fetch_add(&r->c.placed_dirty, q, __ATOMIC_RELAXED);
    else
        ra_count_protected(r, clean);
    nv_gm_uffd_wake(r->uffd, a, (size_t)q * NV_GM_PAGE);
    return q;
}

/* Place pages i .. i+k-1 of op's run, which came, with one UFFDIO_COPY
 * when they are mapped contiguously: a copy costs a system call and the
 * mm's lock (~13 us here), which a page per call made the scan's bound.
 * Evicted pages kept for reuse go first (ra_reuse_run). Returns how many
 * were placed; the rest go page by page (ra_place: a page already there,
 * a mapping that changed). */
static unsigned ra_copy_run(struct nv_gm_region *r, const struct nv_gm_ra_op *op, unsigned i0, unsigned k)
{
    uint64_t p = op->page + i0;
    uintptr_t a = nv_gm_page_addr(r, p);
    if (k < 2 || !a)
        return 0;
    for (unsigned i = 1; i < k; i++)
        if (nv_gm_page_addr(r, p + i) != a + (uintptr_t)i * NV_GM_PAGE)
            return 0;
    for (unsigned i = 0; i < k; i++)
        if (nv_gm_discarded(r, p + i))
            return 0;   /* page by page: those left are placed */
    unsigned reused = ra_reuse_run(r, op, i0, k, a);
    if (reused == k || k - reused < 2)
        return reused;
    i0 += reused;
    p += reused;
    a += (uintptr_t)reused * NV_GM_PAGE;
    k -= reused;
    struct uffdio_copy c = { .dst = a, .src = (uintptr_t)(r->ra_buf + (size_t)(op->slot + i0) * NV_GM_PAGE),
                             .len = (uint64_t)k * NV_GM_PAGE, .mode = ra_copy_mode(op) };
    unsigned placed = ioctl(r->uffd, UFFDIO_COPY, &c) == 0 ? k : c.copy > 0 ? (unsigned)(c.copy / NV_GM_PAGE) : 0;
    if (placed)
        nv_gm_test_delay(r);
    for (unsigned i = 0; i < placed; i++)
        nv_gm_publish(r, p + i, ra_flags(op, i0 + i));
    if (op->dirty) {
        __atomic_fetch_add(&r->c.placed_dirty, placed, __ATOMIC_RELAXED);
        if (placed)
            nv_gm_uffd_wake(r->uffd, a, (size_t)placed * NV_GM_PAGE);
    } else {
        ra_count_protected(r, placed);
    }
    return reused + placed;
}

/* Runs in the progress engine (or inline with the local store): never
 * blocks. The buffers are given back last: netvm_gmem_unmap frees the
 * region once every buffer is back, so nothing here may touch it after. */
static void ra_done(void *arg, uint64_t got)
{
    struct nv_gm_ra_op *op = arg;
    struct nv_gm_region *r = op->r;
    unsigned slot = op->slot, n = op->n;
    if (op->fault && (got & 1))
        nv_gm_hist_add(&r->hist, nv_gm_now_ns() - op->t0);
    nv_gm_test_delay(r);
    /* inside the placement gate (pager.h); while the program's discard is
     * being handled nothing of the run is placed: its faults fetch again */
    int gated = nv_gm_place_enter(r);
    if (!gated)
        got = 0;
    for (unsigned i = 0; i < n;) {
        unsigned k = 0;
        while (i + k < n && (got >> (i + k) & 1))
            k++;
        if (!k) {
            ra_place(r, op, i, 0);
            i++;
            continue;
        }
        for (unsigned j = ra_copy_run(r, op, i, k); j < k; j++)
            ra_place(r, op, i + j, 1);
        i += k;
    }
    if (gated)
        nv_gm_place_leave(r);
    ra_release(r, slot, n);
}

/* Claim up to max pages from q on, going up (dir 1) or down (-1), for one
 * run: each absent, stored (for read-ahead: a page never stored reads as
 * zeros, filled on fault at no cost) or never stored (for zero-ahead:
 * stored == 0), given room in the budget and made BUSY. Stops at the
 * first that is not; *full when the budget had no room (read-ahead never
 * evicts). */
static unsigned ra_claim(struct nv_gm_region *r, uint64_t q, unsigned max, int *full, int stored, int dir)
{
    unsigned n = 0;
    for (; n < max && (dir > 0 || n <= q); n++) {
        uint64_t pg = dir > 0 ? q + n : q - n;
        uint32_t s = __atomic_load_n(&r->state[pg], __ATOMIC_ACQUIRE);
        if (s != NV_GM_ABSENT || !r->store->ops->has(r->store, pg) != !stored)
            break;
        /* a fault waiting for room comes first: read-ahead taking the
         * room the evictor made for it starved it (with a window of 128
         * and a budget full of pages shared with a forked child, two
         * gmem_run tests side by side took 68 s instead of 2.5) */
        if (__atomic_load_n(&r->room_waiters_hint, __ATOMIC_ACQUIRE) || !nv_gm_try_reserve(r)) {
            *full = 1;
            break;
        }
        if (!__atomic_compare_exchange_n(&r->state[pg], &s, NV_GM_BUSY, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED)) {
            nv_gm_unreserve(r, 1);
            break;
        }
    }
    return n;
}

/* Read-ahead found the budget full: wake the evictor now, so that room
 * is made while the program reads what came, not when its next fault
 * (the one that restarts read-ahead) needs a page and would wait for it.
 * The evictor decides what goes; read-ahead itself never evicts. */
static void ra_ask_room(struct nv_gm_region *r)
{
    pthread_mutex_lock(&r->ev_lock);
    pthread_cond_signal(&r->ev_cond);
    pthread_mutex_unlock(&r->ev_lock);
}

/* Undo a claim whose fetch could not start. */
static void ra_unclaim(struct nv_gm_region *r, uint64_t q, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        __atomic_store_n(&r->state[q + i], NV_GM_ABSENT, __ATOMIC_RELEASE);
    nv_gm_unreserve(r, n);
}

void nv_gm_readahead_drain(struct nv_gm_region *r)
{
    for (unsigned w = 0; w < NV_GM_RABUF / 64; w++)
        while (__atomic_load_n(&r->ra_free[w], __ATOMIC_ACQUIRE) != UINT64_MAX) {
            struct timespec ms = { 0, 1000000 };
            nanosleep(&ms, NULL);
        }
}

/* Pages lo .. hi-1 read ahead that the stream went past untouched are
 * hits. */
static void ra_passed(struct nv_gm_region *r, uint64_t lo, uint64_t hi)
{
    for (uint64_t q = lo; q < hi && q < r->npages; q++) {
        uint32_t s = __atomic_load_n(&r->state[q], __ATOMIC_ACQUIRE);
        if ((s & NV_GM_STATE) == NV_GM_RESIDENT && (s & NV_GM_RA) &&
            __atomic_compare_exchange_n(&r->state[q], &s, s & ~(uint32_t)NV_GM_RA, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            NV_GM_CNT(r, ra_hits);
    }
}

/* Start the fetch of the claimed run of n pages from q up, into buffers
 * slot..slot+n-1; 0, or -1 (claim and buffers given back) if it could not
 * start. */
static int ra_issue(struct nv_gm_region *r, uint64_t q, unsigned n, unsigned slot, int write)
{
    struct nv_gm_ra_op *op = &r->ra_op[slot];
    op->r = r;
    op->page = q;
    op->slot = slot;
    op->n = n;
    nv_gm_used_upto(r, q + n);
    op->fault = 0;
    op->dirty = ra_as_dirty(r, write);
    __atomic_fetch_add(&r->c.ra_issued, n, __ATOMIC_RELAXED);
    if (r->store->ops->fetchn_nb(r->store, q, n, r->ra_buf + (size_t)slot * NV_GM_PAGE, ra_done, op) == NETVM_OK)
        return 0;
    ra_unclaim(r, q, n);
    ra_release(r, slot, n);
    return -1;
}

/* Going down: the window below p, runs nearest first. */
static void ra_down(struct nv_gm_region *r, uint64_t *ra_next, uint64_t p, int write)
{
    uint64_t w = (uint64_t)r->ra_window;
    ra_passed(r, p + 1, p + 1 + 2 * w);
    if (!p)
        return;
    int64_t q = (int64_t)p - 1, bottom = p > w ? (int64_t)(p - w) : 0;
    uint64_t next = __atomic_load_n(ra_next, __ATOMIC_RELAXED);
    if (next != UINT64_MAX && (int64_t)next < q && (int64_t)next >= bottom)
        q = (int64_t)next;
    while (q >= bottom) {
        uint32_t s = __atomic_load_n(&r->state[q], __ATOMIC_ACQUIRE);
        if (s != NV_GM_ABSENT || !r->store->ops->has(r->store, (uint64_t)q)) {
            q--;               /* there, on its way, or zeros */
            continue;
        }
        unsigned slot, want = q - bottom + 1 < (int64_t)r->ra_run ? (unsigned)(q - bottom + 1) : r->ra_run;
        unsigned k = ra_grab(r, want, &slot);
        if (!k)
            break;
        int full = 0;
        unsigned n = ra_claim(r, (uint64_t)q, k, &full, 1, -1);
        if (n < k)
            ra_release(r, slot + n, k - n);
        if (!n) {
            if (full)
                break;
            q--;               /* raced with a fault on it */
            continue;
        }
        if (ra_issue(r, (uint64_t)q - n + 1, n, slot, write) != 0)
            break;
        q -= n;
        if (full)
            break;
    }
    __atomic_store_n(ra_next, q >= 0 ? (uint64_t)q : UINT64_MAX, __ATOMIC_RELAXED);
    if (q >= bottom && __atomic_load_n(&r->resident, __ATOMIC_RELAXED) >= r->budget)
        ra_ask_room(r);
}

/* Another thread may have given stream sx to a new stream since its fault
 * was matched: then its next is set from this one's, which costs the new
 * stream a window at worst (read-ahead fetches only absent pages). */
void nv_gm_readahead(struct nv_gm_region *r, int sx, uint64_t p, int dir, int write)
{
    uint64_t *ra_next = &r->ra_stream[sx].next;
    if (dir < 0) {
        ra_down(r, ra_next, p, write);
        return;
    }
    uint64_t w = (uint64_t)r->ra_window;
    ra_passed(r, p > 2 * w ? p - 2 * w : 0, p);
    uint64_t start = p + 1, end = p + 1 + w;
    uint64_t next = __atomic_load_n(ra_next, __ATOMIC_RELAXED);
    if (next > start && next < end)
        start = next;
    if (end > r->npages)
        end = r->npages;
    uint64_t q = start;
    while (q < end) {
        uint32_t s = __atomic_load_n(&r->state[q], __ATOMIC_ACQUIRE);
        if (s != NV_GM_ABSENT || !r->store->ops->has(r->store, q)) {
            q++;               /* there, on its way, or zeros */
            continue;
        }
        unsigned slot, want = end - q < r->ra_run ? (unsigned)(end - q) : r->ra_run;
        unsigned k = ra_grab(r, want, &slot);
        if (!k)
            break;
        int full = 0;
        unsigned n = ra_claim(r, q, k, &full, 1, 1);
        if (n < k)
            ra_release(r, slot + n, k - n);
        if (!n) {
            if (full)
                break;
            q++;               /* raced with a fault on it */
            continue;
        }
        if (ra_issue(r, q, n, slot, write) != 0)
            break;
        q += n;
        if (full)
            break;
    }
    __atomic_store_n(ra_next, q, __ATOMIC_RELAXED);
    if (q < end && __atomic_load_n(&r->resident, __ATOMIC_RELAXED) >= r->budget)
        ra_ask_room(r);
}

/* Why a sequential fault's own page rides in the first run: fetched by a
 * call of its own, every window began with a round trip that the fault
 * thread sat through before the run behind it was even asked for. */
int nv_gm_readahead_with(struct nv_gm_region *r, int sx, uint64_t p, uint64_t t0)
{
    unsigned slot, want = r->npages - p < r->ra_run ? (unsigned)(r->npages - p) : r->ra_run;
    unsigned k = ra_grab(r, want, &slot);
    if (!k)
        return -1;
    int full = 0;
    unsigned n = 1 + (k > 1 ? ra_claim(r, p + 1, k - 1, &full, 1, 1) : 0);
    if (n < k)
        ra_release(r, slot + n, k - n);
    nv_gm_used_upto(r, p + n);
    struct nv_gm_ra_op *op = &r->ra_op[slot];
    op->r = r;
    op->page = p;
    op->slot = slot;
    op->n = n;
    op->fault = 1;
    op->dirty = ra_as_dirty(r, 0);
    op->t0 = t0;
    __atomic_fetch_add(&r->c.ra_issued, n - 1, __ATOMIC_RELAXED);
    if (r->store->ops->fetchn_nb(r->store, p, n, r->ra_buf + (size_t)slot * NV_GM_PAGE, ra_done, op) != NETVM_OK) {
        ra_unclaim(r, p + 1, n - 1);
        ra_release(r, slot, n);
        return -1;
    }
    __atomic_store_n(&r->ra_stream[sx].next, p + n, __ATOMIC_RELAXED);
    if (!full)
        nv_gm_readahead(r, sx, p, 1, 0);
    return 0;
}

/* Zero-ahead. A program that fills fresh memory in order (an array being
 * initialised, a buffer being written) made every page a write fault of
 * its own: the program's sleep, a fault thread's wake-up and a copy, some
 * 50 us a page here, against about 1 us for a first touch of ordinary
 * memory. So a sequential write fault on a page never stored places the
 * pages after it that were never stored either, up to a read-ahead window
 * of them and as many as the budget has room for, zeroed, writable and
 * dirty, with one UFFDIO_COPY. Dirty, because their writes from then on
 * are not seen (they would be written anyway: a page the program leaves
 * untouched is written back as zeros once, when it is evicted). */
#define NV_GM_ZERO_RUN 64u
static unsigned char zero_run[NV_GM_ZERO_RUN * NV_GM_PAGE] __attribute__((aligned(4096)));

unsigned nv_gm_zero_ahead(struct nv_gm_region *r, int sx, uint64_t p, uintptr_t a)
{
    uint64_t max = (uint64_t)r->ra_window < NV_GM_ZERO_RUN ? (uint64_t)r->ra_window : NV_GM_ZERO_RUN;
    if (max > r->npages - p)
        max = r->npages - p;
    /* only as far as the pages lie in one piece of the address space */
    uint64_t k = 1;
    while (k < max && nv_gm_page_addr(r, p + k) == a + (uintptr_t)k * NV_GM_PAGE)
        k++;
    if (k < 2)
        return 0;
    int full = 0;
    unsigned n = 1 + ra_claim(r, p + 1, (unsigned)(k - 1), &full, 0, 1);
    if (full)
        ra_ask_room(r);
    if (n < 2)
        return 0;
    struct uffdio_copy c = { .dst = a, .src = (uintptr_t)zero_run, .len = (uint64_t)n * NV_GM_PAGE,
                             .mode = UFFDIO_COPY_MODE_DONTWAKE };
    unsigned placed = ioctl(r->uffd, UFFDIO_COPY, &c) == 0 ? n : c.copy > 0 ? (unsigned)(c.copy / NV_GM_PAGE) : 0;
    if (placed < 2) {
        /* the first page at least was not placed (EEXIST, EAGAIN: the
         * mm is changing): give back the claim; the caller places the
         * faulting page alone, which sorts out why */
        if (placed == 1) {
            /* the page is there, writable: dirty before anyone runs */
            NV_GM_CNT(r, zero_fills);
            nv_gm_publish(r, p, NV_GM_DIRTY);
            nv_gm_uffd_wake(r->uffd, a, NV_GM_PAGE);
        }
        ra_unclaim(r, p + 1, n - 1);
        /* faults that found them BUSY fault again */
        nv_gm_uffd_wake(r->uffd, a + NV_GM_PAGE, (size_t)(n - 1) * NV_GM_PAGE);
        return placed;
    }
    for (unsigned i = 0; i < placed; i++) {
        NV_GM_CNT(r, zero_fills);
        nv_gm_publish(r, p + i, NV_GM_DIRTY);
    }
    if (placed < n)
        ra_unclaim(r, p + placed, n - placed);
    nv_gm_used_upto(r, p + placed);
    __atomic_store_n(&r->ra_stream[sx].next, p + placed, __ATOMIC_RELAXED);
    /* one wake for the run: the faulting thread, and any other that
     * faulted on a page of it meanwhile and found it BUSY */
    nv_gm_uffd_wake(r->uffd, a, (size_t)n * NV_GM_PAGE);
    return placed;
}
