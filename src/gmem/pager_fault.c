/* The fault threads: each polls the region's uffd, reads its messages
 * without blocking and serves them. A missing fault on a page never stored
 * is filled with UFFDIO_ZEROPAGE; otherwise the page is fetched into the
 * thread's own buffer and placed with UFFDIO_COPY, write-protected so the
 * first write is seen (pager.h). Nothing here allocates, prints or touches
 * the region's memory. */
#include "gmem/pager.h"
#include "util/time.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

uint64_t nv_gm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The reason a page is lost, written with write(2) from a static buffer:
 * the fault path must not call the formatted logger. */
static void log_lost(struct nv_gm_region *r, uint64_t page, netvm_status_t st)
{
    static const char head[] = "netvm gmem: ERROR: page ";
    char msg[160], num[24];
    int n = 0, k = 0;
    uint64_t v = page;
    do
        num[k++] = (char)('0' + v % 10);
    while ((v /= 10) && k < 20);
    memcpy(msg, head, sizeof head - 1);
    n = sizeof head - 1;
    while (k)
        msg[n++] = num[--k];
    const char *tail = r->caps.features & UFFD_FEATURE_POISON
                           ? " of a region has no readable copy left (every server holding it failed): "
                             "poisoned, its accesses get SIGBUS\n"
                           : " of a region has no readable copy left: this kernel has no UFFDIO_POISON, "
                             "the faulting thread stays blocked\n";
    size_t tl = strlen(tail);
    memcpy(msg + n, tail, tl < sizeof msg - (size_t)n ? tl : sizeof msg - (size_t)n);
    n += (int)(tl < sizeof msg - (size_t)n ? tl : sizeof msg - (size_t)n);
    (void)st;
    if (write(2, msg, (size_t)n) < 0) { /* nothing to do: stderr is gone */ }
}

/* A page whose every copy is gone: SIGBUS for whoever touches it. */
static void lose_page(struct nv_gm_region *r, uint64_t p, uintptr_t addr, netvm_status_t st)
{
    __atomic_store_n(&r->state[p], NV_GM_LOST, __ATOMIC_RELEASE);
    nv_gm_unreserve(r, 1);
    NV_GM_CNT(r, poisoned);
    log_lost(r, p, st);
    if (r->caps.features & UFFD_FEATURE_POISON)
        nv_gm_uffd_poison(r->uffd, addr, NV_GM_PAGE);
}

/* The placement failed: EAGAIN (the mm is changing: an event waits to be
 * read, perhaps by this very thread) or the range is gone. Give the page
 * back and wake the faulting thread: it retries the access and faults
 * again once the event is read. */
static void unplace(struct nv_gm_region *r, uint64_t p, uintptr_t addr)
{
    __atomic_store_n(&r->state[p], NV_GM_ABSENT, __ATOMIC_RELEASE);
    nv_gm_unreserve(r, 1);
    nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
}

/* EEXIST: something is already mapped there (a racing placement the page
 * states did not serialize, e.g. around mremap). Keep what is there, and
 * count it dirty since the pager did not write-protect it. */
static void already(struct nv_gm_region *r, uint64_t p, uintptr_t addr)
{
    NV_GM_CNT(r, eexist);
    nv_gm_publish(r, p, NV_GM_DIRTY);
    nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
}

static void place_zero(struct nv_gm_region *r, uint64_t p, uintptr_t addr, int write)
{
    NV_GM_CNT(r, zero_fills);
    if (write) {
        /* a write fault: a zeroed page of its own, writable and dirty at
         * once (no zero page to copy on write, no write-protect fault) */
        static const unsigned char zeros[NETVM_GMEM_PAGE] __attribute__((aligned(NETVM_GMEM_PAGE)));
        int e = nv_gm_uffd_copy(r->uffd, addr, zeros, NV_GM_PAGE, UFFDIO_COPY_MODE_DONTWAKE);
        if (e == 0) {
            /* dirty before the writer runs: a sync from now on sees it */
            nv_gm_publish(r, p, NV_GM_DIRTY);
            nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
        }
        else if (e == -EEXIST)
            already(r, p, addr);
        else {
            if (e == -EAGAIN)
                NV_GM_CNT(r, eagain);
            unplace(r, p, addr);
        }
        return;
    }
    int e = nv_gm_uffd_zeropage(r->uffd, addr, NV_GM_PAGE, UFFDIO_ZEROPAGE_MODE_DONTWAKE);
    if (e == 0) {
        /* the zero page is mapped writable-on-COW: protect it so the
         * first write is seen, before any thread is let in */
        if (nv_gm_uffd_wp(r->uffd, addr, NV_GM_PAGE, UFFDIO_WRITEPROTECT_MODE_WP) != 0) {
            /* EAGAIN (the mm is changing): unprotected, its writes would
             * go unseen; out again, the retried access faults anew */
            NV_GM_CNT(r, eagain);
            nv_gm_drop(r, p, 0);
            return;
        }
        nv_gm_publish(r, p, 0);
        nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
    } else if (e == -EEXIST) {
        already(r, p, addr);
    } else {
        if (e == -EAGAIN)
            NV_GM_CNT(r, eagain);
        unplace(r, p, addr);
    }
}

/* How a read fault's page is placed. Write-protected, its first write
 * faults again (a fault thread's round trip and the program's second
 * sleep) to mark it dirty; writable and dirty, it costs no second fault
 * but is written back when evicted even if never written. Which is
 * cheaper depends on how many read-faulted pages are written while
 * resident (a read-modify-write of an absent page is a read fault and
 * then a write fault): measured over windows of NV_GM_RD_WINDOW
 * protected placements, a quarter or more written switches read faults
 * to writable-and-dirty placement, in which one read fault in
 * NV_GM_RD_SAMPLE is still placed protected to keep measuring
 * (performance.md, "Read faults placed dirty"). 1: writable and dirty. */
static int read_as_dirty(struct nv_gm_region *r)
{
    if (!r->rd_adapt || r->read_only)
        return 0;
    if (__atomic_load_n(&r->rd_dirty, __ATOMIC_RELAXED) &&
        __atomic_fetch_add(&r->rd_sample, 1, __ATOMIC_RELAXED) % NV_GM_RD_SAMPLE != 0) {
        NV_GM_CNT(r, placed_dirty);
        return 1;
    }
    if (__atomic_add_fetch(&r->rd_wp_placed, 1, __ATOMIC_RELAXED) % NV_GM_RD_WINDOW == 0) {
        uint64_t w = __atomic_exchange_n(&r->rd_wp_written, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&r->rd_dirty, w * 4 >= NV_GM_RD_WINDOW, __ATOMIC_RELAXED);
    }
    return 0;
}

/* 1 when the fault looked random (worth polling for the next one), 0 when
 * it was part of a sequential stream that read-ahead serves (polling then
 * only takes the CPU the stream's placements need: performance.md). */
static int missing(struct nv_gm_region *r, uint64_t p, uintptr_t addr, int write, void *buf, uint64_t t0)
{
    uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    for (;;) {
        switch (s & NV_GM_STATE) {
        case NV_GM_ABSENT:
            if (__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                goto owned;
            continue;
        case NV_GM_RESIDENT:
            if (r->read_only) {
                /* a reader's region raises no REMOVE event (pager.h): the
                 * program's own MADV_DONTNEED may have taken it; fetched
                 * again (EEXIST if it was only placed after this fault) */
                if (!__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_BUSY, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                    continue;
                nv_gm_unreserve(r, 1);
                goto owned;
            }
            /* placed by another thread after this fault was raised */
            nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
            return 1;
        case NV_GM_LOST:
            if (r->caps.features & UFFD_FEATURE_POISON)
                nv_gm_uffd_poison(r->uffd, addr, NV_GM_PAGE);
            return 1;
        default:
            /* BUSY or EVICTING: its owner wakes the range when done, and
             * one fetch serves every thread waiting on the page */
            return 1;
        }
    }
owned:
    NV_GM_CNT(r, faults);
    int dir;
    int sx = nv_gm_stream_of(r, p, &dir), seq = dir != 0;
    nv_gm_reserve(r);
    /* a stream going down: its window below is asked for before this
     * page's own fetch, which it then overlaps */
    if (dir < 0)
        nv_gm_readahead(r, sx, p, -1, write);
    if (!r->store->ops->has(r->store, p)) {
        if (!(write && dir > 0 && nv_gm_zero_ahead(r, sx, p, addr)))
            place_zero(r, p, addr, write || read_as_dirty(r));
    } else if (!write && dir > 0 && nv_gm_readahead_with(r, sx, p, t0) == 0) {
        return 0;   /* placed with its run, which wakes the fault */
    } else {
        netvm_status_t st = r->store->ops->fetch(r->store, p, buf);
        if (st == NETVM_ERR_NOTFOUND) {
            place_zero(r, p, addr, write);
        } else if (st != NETVM_OK) {
            lose_page(r, p, addr, st);
            return 1;
        } else {
            /* a write fault places the page writable and dirty; a read
             * fault write-protected, so that its first write is seen,
             * unless read faults are placed dirty now */
            write = write || read_as_dirty(r);
            if (!nv_gm_place_enter(r)) {
                /* the program's discard is being handled: out again, the
                 * retried access faults anew */
                unplace(r, p, addr);
                return 1;
            }
            /* discarded since the fetch began: its data is gone for good */
            int e = nv_gm_discarded(r, p) ? -ENOENT
                    : nv_gm_uffd_copy(r->uffd, addr, buf, NV_GM_PAGE,
                                      write ? UFFDIO_COPY_MODE_DONTWAKE : UFFDIO_COPY_MODE_WP);
            if (e == 0) {
                nv_gm_publish(r, p, write ? NV_GM_DIRTY : 0);
                if (write)  /* dirty before the writer runs: a sync from now on sees it */
                    nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
                nv_gm_hist_add(&r->hist, nv_gm_now_ns() - t0);
            } else if (e == -EEXIST) {
                already(r, p, addr);
            } else {
                if (e == -EAGAIN)
                    NV_GM_CNT(r, eagain);
                unplace(r, p, addr);
            }
            nv_gm_place_leave(r);
        }
    }
    if (dir > 0)
        nv_gm_readahead(r, sx, p, 1, write);
    return !seq;
}

static void wprotect(struct nv_gm_region *r, uint64_t p, uintptr_t addr)
{
    uint32_t s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
    for (;;) {
        switch (s & NV_GM_STATE) {
        case NV_GM_RESIDENT: {
            uint32_t keep = s & ~(uint32_t)(NV_GM_STATE | NV_GM_RA | NV_GM_RAWP);
            if (!__atomic_compare_exchange_n(&r->state[p], &s, NV_GM_BUSY | keep, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue;
            if (s & NV_GM_RA)
                NV_GM_CNT(r, ra_hits);
            /* whose placement policy this first write speaks for */
            if (s & NV_GM_RAWP)
                __atomic_fetch_add(&r->ra_wp_written, 1, __ATOMIC_RELAXED);
            else
                __atomic_fetch_add(&r->rd_wp_written, 1, __ATOMIC_RELAXED);
            NV_GM_CNT(r, wp_faults);
            if (nv_gm_uffd_wp(r->uffd, addr, NV_GM_PAGE, UFFDIO_WRITEPROTECT_MODE_DONTWAKE) != 0) {
                /* EAGAIN (the mm is changing): still protected and clean;
                 * the woken writer faults again once the event is read */
                NV_GM_CNT(r, eagain);
                nv_gm_publish(r, p, keep | (s & (NV_GM_RA | NV_GM_RAWP)));
                nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
                return;
            }
            /* dirty before the writer runs: a sync from now on sees it */
            nv_gm_publish(r, p, keep | NV_GM_DIRTY);
            nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
            return;
        }
        case NV_GM_BUSY:
            /* the owner is between placing the page and publishing it */
            sched_yield();
            s = __atomic_load_n(&r->state[p], __ATOMIC_ACQUIRE);
            continue;
        case NV_GM_EVICTING:
            return;      /* the evictor wakes the range when the page is out */
        default:
            /* gone since: the retried access faults as missing */
            nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
            return;
        }
    }
}

int nv_gm_fault_msg(struct nv_gm_region *r, const struct uffd_msg *m, void *buf)
{
    uint64_t t0 = nv_gm_now_ns();
    uintptr_t addr = (uintptr_t)m->arg.pagefault.address & ~(uintptr_t)(NV_GM_PAGE - 1);
    pthread_rwlock_rdlock(&r->seg_lock);
    uint64_t p = nv_gm_seg_addr_page(r->seg, r->nseg, addr);
    pthread_rwlock_unlock(&r->seg_lock);
    if (p == UINT64_MAX) {
        /* beyond the region (it was grown by mremap): ordinary zeros,
         * not managed (docs/gmem.md, "mremap") */
        if (nv_gm_uffd_zeropage(r->uffd, addr, NV_GM_PAGE, 0) != 0)
            nv_gm_uffd_wake(r->uffd, addr, NV_GM_PAGE);
        return 1;
    }
    nv_gm_used_upto(r, p + 1);
    if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
        wprotect(r, p, addr);
        return 1;
    }
    return missing(r, p, addr, !!(m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WRITE), buf, t0);
}

/* Each fault thread waits on an epoll set of its own holding the uffd as
 * EPOLLEXCLUSIVE, so a fault wakes one sleeping fault thread, not all: with
 * poll(2) on the shared uffd every thread woke for every fault and all but
 * one found nothing to read (a wasted wake-up per fault and thread, 10-80
 * us of CPU each on a small VM: docs/perf-issue10.md, run 3). The stop fd
 * is watched by every thread. -1 if the set cannot be made (poll then). */
static int wait_set(struct nv_gm_region *r)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -1;
    struct epoll_event u = { .events = EPOLLIN | EPOLLEXCLUSIVE, .data.u32 = 0 };
    struct epoll_event st = { .events = EPOLLIN, .data.u32 = 1 };
    if (epoll_ctl(ep, EPOLL_CTL_ADD, r->uffd, &u) != 0 || epoll_ctl(ep, EPOLL_CTL_ADD, r->stop_fd, &st) != 0) {
        close(ep);
        return -1;
    }
    return ep;
}

/* Sleep until the uffd or the stop fd is readable: 1 to stop, 0 to read,
 * -1 on an error that ends the thread. */
static int wait_msg(int ep, struct pollfd *pf)
{
    if (ep >= 0) {
        struct epoll_event ev[2];
        int n = epoll_wait(ep, ev, 2, -1);
        if (n < 0)
            return errno == EINTR ? 0 : -1;
        for (int i = 0; i < n; i++)
            if (ev[i].data.u32 == 1)
                return 1;
        return 0;
    }
    if (poll(pf, 2, -1) < 0)
        return errno == EINTR ? 0 : -1;
    return pf[1].revents ? 1 : 0;
}

/* Read what the uffd holds, without blocking; events are handled at once
 * (see below). The count of messages read, 0 when none. */
static int read_msgs(struct nv_gm_region *r, struct uffd_msg *msg, int cap)
{
    /* The kernel lets the program's madvise or munmap go on as soon as
     * its event is read, so the event is handled before any other thread
     * reads again: a fault raised after the madvise returned then finds
     * the pages discarded (never their old data). */
    pthread_mutex_lock(&r->read_lock);
    /* no placement overlaps the read, nor the handling of the events it
     * brought (pager.h, nv_gm_place_enter) */
    __atomic_store_n(&r->ev_reading, 1, __ATOMIC_SEQ_CST);
    for (unsigned pass = 0; __atomic_load_n(&r->placing, __ATOMIC_SEQ_CST); pass++)
        nv_spin_pause(16, pass);   /* a placer may be waiting for this CPU */
    ssize_t n = read(r->uffd, msg, (size_t)cap * sizeof msg[0]);
    int k = n > 0 ? (int)(n / (ssize_t)sizeof msg[0]) : 0;
    for (int i = 0; i < k; i++)
        if (msg[i].event != UFFD_EVENT_PAGEFAULT) {
            /* long: placements give their pages back meanwhile */
            __atomic_store_n(&r->ev_reading, 2, __ATOMIC_SEQ_CST);
            nv_gm_event(r, &msg[i]);
        }
    __atomic_store_n(&r->ev_reading, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&r->read_lock);
    return k;
}

/* After a fault, one fault thread at a time keeps reading the uffd for
 * spin_ns before it sleeps: the program's next fault then costs no
 * wake-up of a fault thread (docs/gmem.md, NETVM_GMEM_SPIN_US). The
 * messages read, 0 when the spin ran out or another thread spins. */
static int spin_msgs(struct nv_gm_region *r, struct uffd_msg *msg, int cap)
{
    int zero = 0;
    if (!r->spin_ns || !__atomic_compare_exchange_n(&r->spinner, &zero, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 0;
    uint64_t end = nv_gm_now_ns() + r->spin_ns;
    int k = 0;
    /* a look with poll(2): a read closes the placement gate (pager.h),
     * which a loop of reads would keep closed most of the time */
    struct pollfd pf = { .fd = r->uffd, .events = POLLIN };
    for (unsigned pass = 0;; pass++) {
        if (poll(&pf, 1, 0) > 0 && (k = read_msgs(r, msg, cap)) > 0)
            break;
        if (nv_gm_now_ns() >= end)
            break;
        nv_spin_pause(r->spin_yield, pass);
    }
    __atomic_store_n(&r->spinner, 0, __ATOMIC_RELEASE);
    return k;
}

void *nv_gm_fault_thread(void *arg)
{
    struct nv_gm_region *r = arg;
    void *buf = mmap(NULL, NV_GM_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return NULL;
    /* named, so that profiles and tests can tell its wake-ups apart */
    prctl(PR_SET_NAME, "netvm-gmfault", 0, 0, 0);
    int ep = wait_set(r);
    struct pollfd pf[2] = { { .fd = r->uffd, .events = POLLIN }, { .fd = r->stop_fd, .events = POLLIN } };
    struct uffd_msg msg[4];
    int k = 0;
    for (;;) {
        if (k == 0) {
            int w = wait_msg(ep, pf);
            if (w != 0)
                break;
            k = read_msgs(r, msg, 4);
        }
        /* faults are served outside the read lock, in parallel */
        int rnd = 0;
        for (int i = 0; i < k; i++)
            if (msg[i].event == UFFD_EVENT_PAGEFAULT)
                rnd |= nv_gm_fault_msg(r, &msg[i], buf);
        k = rnd ? spin_msgs(r, msg, 4) : 0;
    }
    if (ep >= 0)
        close(ep);
    munmap(buf, NV_GM_PAGE);
    return NULL;
}
