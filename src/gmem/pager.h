/* The pager's state of a region (region.c makes it, pager_*.c run it).
 *
 * Each page has one atomic word: a state in the low bits and flags. A
 * thread that moves a page out of ABSENT, RESIDENT or EVICTING first wins
 * a compare-and-swap into BUSY (or EVICTING), so exactly one thread places,
 * unprotects, fetches or evicts a page at a time; the others leave their
 * faults pending and the owner's placement (or its UFFDIO_WAKE) releases
 * them. Pages are placed write-protected: the first write raises a
 * write-protect fault, which marks the page dirty (docs/gmem.md, "Dirty
 * tracking and eviction", says why this and not PAGEMAP_SCAN). Victims
 * leave the region with UFFDIO_MOVE into a staging area registered with a
 * second uffd, atomically: a write after the move faults as missing and
 * waits for the write-back, so no write is lost, and no madvise on the
 * region (which would raise a REMOVE event and wait for a fault thread)
 * is ever needed. */
#ifndef NV_GMEM_PAGER_H
#define NV_GMEM_PAGER_H

#include "gmem/store.h"
#include "gmem/uffd.h"
#include "util/time.h"

#include <pthread.h>
#include <stdint.h>

#define NV_GM_PAGE ((uint64_t)NETVM_GMEM_PAGE)

enum {
    NV_GM_ABSENT   = 0,
    NV_GM_BUSY     = 1,    /* owned by one thread: being fetched, placed or unprotected */
    NV_GM_RESIDENT = 2,
    NV_GM_EVICTING = 3,    /* moved out (or being), write-back in flight */
    NV_GM_LOST     = 4,    /* poisoned: no copy left */
    NV_GM_STATE    = 7,
    NV_GM_DIRTY    = 8,    /* written since placed or cleaned */
    NV_GM_RA       = 16,   /* read ahead and not yet known touched */
    NV_GM_REF      = 32,   /* CLOCK reference: faulted or written since the hand passed */
    NV_GM_DISCARD  = 64,   /* the program discarded it while it was BUSY: the owner drops it */
    NV_GM_COW      = 128,  /* resident, and its last move out failed with EBUSY (shared copy-on-write
                              with a forked child): the hand passes it until the evictor clears the
                              marks, at most every 50 ms after a round that took nothing */
    NV_GM_RAWP     = 256,  /* placed write-protected by read-ahead and not written since: its first
                              write counts for the read-ahead's placement policy (pager_ra.c) */
};

#define NV_GM_STAGE 64   /* staging slots of the evictor (a batch of victims) */
#define NV_GM_KEEP 3     /* staging areas: the evictor's, and batches kept for reuse (pager_reuse.c) */
/* The staging mapping: NV_GM_KEEP areas of NV_GM_STAGE pages, then the
 * slot for dropping a page (NV_GM_DROP_SLOT) */
#define NV_GM_STAGE_PAGES (NV_GM_KEEP * NV_GM_STAGE + 1)
#define NV_GM_DROP_SLOT   (NV_GM_KEEP * NV_GM_STAGE)
/* Placement as writable and dirty, for read faults (pager_fault.c) and for
 * read-ahead runs (pager_ra.c): decided over windows of this many pages
 * placed protected (a quarter or more written while resident switches it
 * on), one placement in NV_GM_RD_SAMPLE still protected while it is on. */
#define NV_GM_STREAMS 8  /* sequential streams read-ahead follows at once (pager_ra.c) */
#define NV_GM_RD_WINDOW 256
#define NV_GM_RD_SAMPLE 8
/* read-ahead's sample is a run (16-64 pages), not a page: one in 8 kept
 * 12% of a sort's read-ahead protected, a third of its write-protect
 * faults; one in 32 still closes a window every 8192 pages (32 MiB) read ahead
 * (performance.md, "Read-ahead runs placed dirty"). While windows find
 * nearly every sampled page written (NV_GM_RA_STEADY), the sample halves,
 * down to one run in NV_GM_RA_SAMPLE_MAX, and the window shrinks with it,
 * so that a change of the program's habit is still seen within 8192 pages
 * (performance.md, "Write streams' runs placed dirty, the sample backing
 * off") */
#define NV_GM_RA_SAMPLE 32
#define NV_GM_RA_SAMPLE_MAX 128
#define NV_GM_RA_STEADY(w, win) ((w) * 8 >= (win) * 7)   /* 7/8 or more written */
#define NV_GM_RABUF 256  /* read-ahead buffers (a bit each in ra_free; a run's lie in one word) */
#define NV_GM_RA_LARGE_BUDGET 16384u  /* pages (64 MiB): from here the default window is 128 (pager_ra.c) */

/* Fault latency: a fixed log-linear histogram (8 sub-buckets per power of
 * two from 64 ns), so percentiles cost no allocation. */
#define NV_GM_HIST_SUB 8
#define NV_GM_HIST_N   (40 * NV_GM_HIST_SUB)
struct nv_gm_hist {
    uint64_t bucket[NV_GM_HIST_N];  /* __atomic */
    uint64_t max;
};
void     nv_gm_hist_add(struct nv_gm_hist *h, uint64_t ns);
uint64_t nv_gm_hist_pct(const struct nv_gm_hist *h, double q);

/* A piece of the region's address space: mremap may move part of it. */
#define NV_GM_MAXSEG 16
struct nv_gm_seg {
    uintptr_t start;
    uint64_t  first, n;     /* region pages [first, first + n) */
};

/* A forked child's copy of the region, served by this process (the child
 * has no pager threads): its faults get the data as of the fork. */
#define NV_GM_MAXCHILD 8
struct nv_gm_child {
    int            fd;          /* the child's uffd; -1: free slot */
    unsigned char *given;       /* per page: given to the child already (mmap'd, zero: not yet) */
    uint64_t       npages;      /* of given */
    struct nv_gm_seg seg[NV_GM_MAXSEG];
    int            nseg;
};

struct nv_gm_region;
struct nv_gm_ra_op {
    struct nv_gm_region *r;
    uint64_t             page;       /* first page of the run */
    unsigned             slot, n;    /* its buffers: slots slot .. slot+n-1 */
    int                  fault;      /* the first page is a read fault's (nv_gm_readahead_with) */
    int                  dirty;      /* placed writable and dirty, not write-protected (pager_ra.c) */
    uint64_t             t0;         /* when that fault was read */
};

/* A sequential stream of missing faults that read-ahead follows. */
struct nv_gm_stream {
    uint64_t prev;   /* the page of its last fault (under ra_lock) */
    uint64_t next;   /* __atomic: the next page to read ahead for it, in its direction
                        (UINT64_MAX: none yet) */
    uint64_t used;   /* ra_clock when a fault last began or went on with it; 0: free */
    int      dir;    /* 1: up, -1: down, 0: one fault so far (a lone fault, perhaps) */
};

struct nv_gm_counters {
    uint64_t faults, zero_fills, wp_faults, ra_issued, ra_hits, ra_waste, evictions, evictions_dirty,
             eexist, eagain, poisoned, discarded, move_busy, child_faults, child_pushes, placed_dirty,
             reused, reuse_written;
};

struct nv_gm_region {
    netvm_ctx_t      *ctx;
    struct nv_gstore *store;
    size_t            len;
    uint64_t          npages;
    uint32_t         *state;         /* npages words, __atomic; mmap'd, so pages never used cost nothing */
    uint64_t         *resmap;        /* __atomic: bit p set whenever page p may be resident: set when a
                                        page is placed, cleared lazily by the evictor, whose hand walks
                                        the set bits instead of every page ever used (pager_evict.c) */
    uint64_t          used;          /* __atomic: pages [used, npages) were never faulted or read ahead:
                                        the evictor's hand and the cleaner stop there, so a region that
                                        is a large reservation costs what is used of it */

    /* address space: segments, rwlock (events write, everyone else reads) */
    pthread_rwlock_t  seg_lock;
    struct nv_gm_seg  seg[NV_GM_MAXSEG];
    int               nseg;

    int               uffd, stage_fd;
    pthread_mutex_t   read_lock;     /* a read of the uffd and the events it brought (pager_fault.c) */
    /* the placement gate (nv_gm_place_enter): placements in progress, and
     * a read of the uffd under way (1) or the events it brought being
     * handled (2): no placement overlaps either */
    int               placing;       /* __atomic */
    int               ev_reading;    /* __atomic */
    uint64_t          test_place_ns; /* __atomic; tests only: a read-ahead run waits this long before it is
                                        placed, and each placement as long again before it is
                                        published (tests/gmem/discard_ra.c) */
    struct nv_uffd_caps caps;
    unsigned char    *stage;         /* NV_GM_STAGE_PAGES pages, registered on stage_fd */
    pthread_mutex_t   drop_lock;     /* the last staging slot (NV_GM_DROP_SLOT) */
    /* evicted pages kept for read-ahead to fill and move back in
     * (pager_reuse.c): the NV_GM_KEEP areas of stage, one of them the
     * evictor's (ev_stage); the others' pages [next, end) are free to take */
    unsigned char    *ev_stage;      /* the evictor's */
    pthread_mutex_t   reuse_lock;
    struct nv_gm_keep {
        unsigned char *base;
        unsigned       next, end, busy;
        uint64_t       seq;          /* when it was kept: the oldest goes first */
    }                 keep[NV_GM_KEEP];
    unsigned          keep_ev;       /* which is the evictor's */
    uint64_t          keep_seq;
    int               reuse_on;      /* NETVM_GMEM_REUSE */

    /* options in force */
    uint64_t          budget;        /* pages */
    int               ra_window, write_policy, nthreads;
    unsigned          ra_run;        /* pages one read-ahead fetch asks for at most (pager_ra.c) */
    uint64_t          spin_ns;       /* a fault thread polls this long after a fault before it sleeps */
    /* read faults: placed write-protected, so that the first write is
     * seen, or writable and dirty while most such pages are written soon
     * anyway (pager_fault.c, NETVM_GMEM_READ_WP) */
    int               rd_adapt;      /* 0: always protected */
    int               rd_dirty;      /* __atomic: place read faults writable and dirty now */
    uint64_t          rd_wp_placed;  /* __atomic: read faults placed protected */
    uint64_t          rd_wp_written; /* __atomic: first writes to such pages in this window */
    uint64_t          rd_sample;     /* __atomic: read faults placed while rd_dirty */
    unsigned          ra_dirty;      /* __atomic: the same for read-ahead runs (pager_ra.c): 0, or
                                        one run in this many is still placed protected */
    uint64_t          ra_wp_placed;  /* __atomic: pages read-ahead placed protected */
    uint64_t          ra_wp_close;   /* __atomic: ra_wp_placed at which this window closes
                                        (UINT64_MAX while one is being closed) */
    uint64_t          ra_wp_written; /* __atomic: first writes to such pages in this window */
    uint64_t          ra_sample;     /* __atomic: runs issued while ra_dirty */
    unsigned          spin_yield;    /* NETVM_SPIN_YIELD */
    int               spinner;       /* __atomic: a fault thread is polling (one at a time) */

    /* budget: pages resident or reserved for a placement in progress */
    uint64_t          resident;      /* __atomic */
    uint64_t          resident_peak; /* __atomic: the most resident has been */
    uint64_t          low_water;
    pthread_mutex_t   ev_lock;
    pthread_cond_t    ev_cond, room_cond;
    int               room_waiters, stopping;
    int               room_waiters_hint;  /* __atomic copy of room_waiters for the lock-free path */
    int               room_grants;   /* placements let past a full budget (ev_lock; pager_evict.c) */
    int               overcommit_said;
    int               wb_failing;    /* the evictor's: the last write-back of a victim failed */
    int               wb_overcommit_said;
    int               forking;       /* __atomic: a fork is under way (pager_events.c) */
    uint64_t          hand;
    uint64_t          cow_seen;      /* evictor's: NV_GM_COW pages met in the current round */
    uint64_t          cow_retry_ns;  /* evictor's: when NV_GM_COW marks were last cleared */
    pthread_mutex_t   wb_lock;       /* one write-back of a page at a time (evictor, sync) */
    uint64_t          wb_active;     /* __atomic: write-backs under way, from the first store to the
                                        last state change (pager_events.c: a discard that raced one) */
    uint64_t          wb_ended;      /* __atomic: write-backs finished */
    unsigned char    *wb_buf;        /* NV_GM_STAGE pages: sync's and the cleaner's copies */

    /* read-ahead */
    pthread_mutex_t   ra_lock;       /* the streams */
    uint64_t          ra_clock;
    struct nv_gm_stream ra_stream[NV_GM_STREAMS];
    unsigned char    *ra_buf;        /* NV_GM_RABUF pages */
    uint64_t          ra_free[NV_GM_RABUF / 64]; /* __atomic bitmasks of free ra_buf slots */
    struct nv_gm_ra_op ra_op[NV_GM_RABUF];

    /* threads */
    pthread_t        *fault_thr;
    pthread_t         evict_thr, child_thr;
    int               stop_fd;       /* eventfd: fault threads and the child server stop */
    int               child_started;
    int               child_efd;     /* eventfd: a new child for the child server (-1: none yet) */

    /* fork */
    pthread_mutex_t   child_lock;
    struct nv_gm_child child[NV_GM_MAXCHILD];
    int               nchildren;     /* __atomic */
    unsigned char    *child_buf;     /* a page: a child's page on its way (child_lock) */
    int               forked_copy;   /* this is the child's copy: nothing runs */
    /* a shared region's reader (region_shared.c): the mapping is
     * PROT_READ, so UFFDIO_MOVE (writable mappings only) cannot take pages
     * out: they leave with MADV_DONTNEED, which raises no event because its
     * uffd has no UFFD_FEATURE_EVENT_REMOVE */
    int               read_only;

    struct nv_gm_counters c;         /* __atomic */
    struct nv_gm_hist hist;
};

#define NV_GM_CNT(r, f) __atomic_fetch_add(&(r)->c.f, 1, __ATOMIC_RELAXED)

/* Evicted pages reused (pager_reuse.c). Init: the areas, all empty, the
 * first the evictor's. The evictor, done with a batch
 * of n staged pages: 1 if they were kept for reuse (its staging area is
 * another now), 0 if the caller drops them. */
void nv_gm_reuse_init(struct nv_gm_region *r);
int nv_gm_reuse_give(struct nv_gm_region *r, unsigned n);
/* Place up to k pages at a (contiguous, BUSY, inside the placement gate)
 * with src's bytes by moving kept pages in, not waking anyone; protect:
 * write-protect them too, and written[i] says page i was written before
 * the protection took (it must be published dirty). How many were placed
 * (a prefix; 0: none kept, or the move failed at once). */
unsigned nv_gm_reuse_place(struct nv_gm_region *r, uintptr_t a, const unsigned char *src, unsigned k, int protect,
                           unsigned char *written);
/* The tests' widening of a placement's windows (pager_ra.c) */
void nv_gm_test_delay(struct nv_gm_region *r);

/* Pages below end may be resident from now on (r->used). */
static inline void nv_gm_used_upto(struct nv_gm_region *r, uint64_t end)
{
    uint64_t u = __atomic_load_n(&r->used, __ATOMIC_RELAXED);
    while (u < end && !__atomic_compare_exchange_n(&r->used, &u, end, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

/* Page p may be resident from now on (after its state says so). */
static inline void nv_gm_resmap_set(struct nv_gm_region *r, uint64_t p)
{
    __atomic_fetch_or(&r->resmap[p / 64], 1ull << (p % 64), __ATOMIC_SEQ_CST);
}

/* The placement gate. The kernel lets the program's madvise or munmap
 * zap its pages as soon as the fault thread has read its event, before
 * the event is handled; a page placed with its old data after that zap
 * (a read-ahead run, a fetch that was under way) would stay mapped, and
 * the program would read the discarded data. So a read of the uffd waits
 * for placements in progress and holds new ones off until the events it
 * brought have marked their pages (NV_GM_DISCARD), and a placement checks
 * its pages' marks inside the gate, before its UFFDIO_COPY. Enter: 1, or
 * 0 when events are being handled now (the caller must not wait: it may
 * be the progress thread a handler's discard needs) and gives the page
 * back instead; during a bare read it waits the read's system call. */
static inline int nv_gm_place_enter(struct nv_gm_region *r)
{
    for (;;) {
        __atomic_fetch_add(&r->placing, 1, __ATOMIC_SEQ_CST);
        int ev = __atomic_load_n(&r->ev_reading, __ATOMIC_SEQ_CST);
        if (!ev)
            return 1;
        __atomic_fetch_sub(&r->placing, 1, __ATOMIC_SEQ_CST);
        if (ev == 2)
            return 0;
        /* yielding: the reader may be waiting for this CPU */
        for (unsigned pass = 0; __atomic_load_n(&r->ev_reading, __ATOMIC_SEQ_CST) == 1; pass++)
            nv_spin_pause(16, pass);
    }
}

static inline void nv_gm_place_leave(struct nv_gm_region *r)
{
    __atomic_fetch_sub(&r->placing, 1, __ATOMIC_SEQ_CST);
}

/* Page p (BUSY, the caller's) was discarded by the program: its data may
 * not be placed. */
static inline int nv_gm_discarded(struct nv_gm_region *r, uint64_t p)
{
    return (__atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE) & NV_GM_DISCARD) != 0;
}

/* address of page in the region as it is mapped now (0: not mapped) */
uintptr_t nv_gm_page_addr(struct nv_gm_region *r, uint64_t page);
/* page of address (UINT64_MAX: not in the region) */
uint64_t  nv_gm_addr_page(struct nv_gm_region *r, uintptr_t addr);
uint64_t  nv_gm_seg_addr_page(const struct nv_gm_seg *seg, int nseg, uintptr_t addr);
uintptr_t nv_gm_seg_page_addr(const struct nv_gm_seg *seg, int nseg, uint64_t page);

/* The pager state of a region (region.c), for the tests' white-box checks. */
struct nv_gm_region *nv_gm_region_of(netvm_gmem_t *g);

/* pager_fault.c */
uint64_t nv_gm_now_ns(void);   /* CLOCK_MONOTONIC, without the formatted logger's helpers */
/* Serve one fault message with buf as the fetch buffer (a fault thread's
 * loop; the tests call it with messages of their own); 1 when it looked
 * random. */
int  nv_gm_fault_msg(struct nv_gm_region *r, const struct uffd_msg *m, void *buf);
void *nv_gm_fault_thread(void *arg);

/* pager_budget.c / pager_evict.c */
uint64_t nv_gm_evict_gap(uint64_t budget);   /* pages between the budget and the low watermark */
void nv_gm_reserve(struct nv_gm_region *r);
int  nv_gm_try_reserve(struct nv_gm_region *r);
void nv_gm_unreserve(struct nv_gm_region *r, uint64_t n);
void *nv_gm_evict_thread(void *arg);
netvm_status_t nv_gm_sync(struct nv_gm_region *r);
/* pages leaving the region: budget, read-ahead waste */
void nv_gm_page_gone(struct nv_gm_region *r, uint32_t old);

/* The owner of BUSY page p publishes it RESIDENT with flags (1); if the
 * program discarded it meanwhile (DISCARD) it leaves the region instead,
 * reads as zeros, and 0 is returned. */
int  nv_gm_publish(struct nv_gm_region *r, uint64_t p, uint32_t flags);
/* The owner of BUSY page p takes it out of the region (it reads as zeros
 * or is fetched again) and wakes its waiters. */
void nv_gm_drop(struct nv_gm_region *r, uint64_t p, uint32_t flags);

/* pager_shared.c: a shared region's reader drops pages a writer's sync
 * changed (nv_gstore_inval_fn): resident ones leave the region now, ones
 * being placed leave when placed; the next access fetches them anew. */
uint64_t nv_gm_invalidate(void *region, uint64_t first, uint64_t n, int drop);
/* Take the page at a out of a read-only region (no event, no copy). */
void nv_gm_zap(struct nv_gm_region *r, uintptr_t a);

/* pager_stream.c, pager_ra.c */
/* The stream a missing fault on page belongs to: the one it goes on with
 * (*dir = 1 up or -1 down: the page next to its last fault, or the next
 * past what was read ahead for it), or a new one it begins (*dir = 0), in
 * the place of the least recently used, lone faults' first. -1 without
 * read-ahead. */
int  nv_gm_stream_of(struct nv_gm_region *r, uint64_t page, int *dir);
/* Read ahead from page in direction dir (1 or -1) for stream sx; write:
 * the fault that asks is a write, and the runs are placed dirty. */
void nv_gm_readahead(struct nv_gm_region *r, int sx, uint64_t page, int dir, int write);
/* A sequential read fault on page (the caller owns it: BUSY, reserved):
 * fetch it as the first page of a read-ahead run, then read ahead past
 * it; the fault is answered when the run is placed. 0: so done; -1: no
 * buffer free or the call could not start, and the caller fetches it. */
int  nv_gm_readahead_with(struct nv_gm_region *r, int sx, uint64_t page, uint64_t t0);
/* A sequential write fault on page p, never stored, at address a (the
 * caller owns it: BUSY, reserved): place it and the never-stored pages
 * after it, zeroed, writable and dirty, in one copy. The pages placed
 * (p's wake included); 0 or 1 when fewer than two could be, and with 0
 * the caller places p itself. */
unsigned nv_gm_zero_ahead(struct nv_gm_region *r, int sx, uint64_t page, uintptr_t a);
/* Copy a resident page of the region that this thread has just
 * write-protected: the program's writes from then on wait in the kernel
 * until the page is unprotected, so the copy is whole (an ordering the
 * kernel gives, which ThreadSanitizer cannot see: tests/tsan.supp). */
void nv_gm_copy_protected(void *dst, const void *page);
/* Whether the page at a, moved in with src's bytes and write-protected
 * since by this thread, was written before the protection took (the same
 * ordering; not instrumented for ThreadSanitizer: pager_reuse.c). */
int nv_gm_compare_protected(uintptr_t a, const unsigned char *src);
/* Wait until every read-ahead fetch of r has completed (its buffers are
 * all back): before the region is freed. */
void nv_gm_readahead_drain(struct nv_gm_region *r);

/* pager_events.c, pager_fork.c */
void nv_gm_event(struct nv_gm_region *r, const struct uffd_msg *m);
/* before page's store copy changes (write-back, discard): children that
 * have not read it yet get the old one */
void nv_gm_child_before_store(struct nv_gm_region *r, uint64_t first, uint64_t n);
void nv_gm_child_add(struct nv_gm_region *r, int fd);
void nv_gm_child_stop(struct nv_gm_region *r);
void nv_gm_fork_init(void);
void nv_gm_fork_track(struct nv_gm_region *r, int on);

#endif
