/* Fork. With UFFD_FEATURE_EVENT_FORK the child's copy of the region gets a
 * uffd of its own, delivered to this process, which serves the child's
 * faults (the child has no pager threads). The child must see the region
 * as of the fork: pages resident then were copied by the kernel; every
 * other page is served from the store, and before this process changes a
 * page's store copy (write-back, discard) a child that has not read it yet
 * is given the old one first (UFFDIO_COPY into the child). At the fork the
 * store must not be changing: a pthread_atfork handler holds every
 * region's write-back lock from before the mm is copied until the event
 * was read, so no write-back or eviction is in flight across it. */
#include "gmem/pager.h"
#include "util/log.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

/* The regions of this process, for the atfork handlers. */
static pthread_mutex_t all_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_gm_region *all[64];

void nv_gm_fork_track(struct nv_gm_region *r, int on)
{
    pthread_mutex_lock(&all_lock);
    for (int i = 0; i < 64; i++)
        if (on ? !all[i] : all[i] == r) {
            all[i] = on ? r : NULL;
            break;
        }
    pthread_mutex_unlock(&all_lock);
}

static void prepare(void)
{
    pthread_mutex_lock(&all_lock);
    for (int i = 0; i < 64; i++)
        if (all[i]) {
            struct nv_gm_region *r = all[i];
            __atomic_store_n(&r->forking, 1, __ATOMIC_RELEASE);
            pthread_mutex_lock(&r->ev_lock);
            pthread_cond_broadcast(&r->room_cond);
            pthread_mutex_unlock(&r->ev_lock);
            pthread_mutex_lock(&r->wb_lock);
        }
}

static void parent(void)
{
    for (int i = 0; i < 64; i++)
        if (all[i]) {
            pthread_mutex_unlock(&all[i]->wb_lock);
            __atomic_store_n(&all[i]->forking, 0, __ATOMIC_RELEASE);
        }
    pthread_mutex_unlock(&all_lock);
}

static void child(void)
{
    /* the child's copies: their threads did not follow, the parent serves
     * the child's faults; netvm_gmem_unmap only unmaps here */
    for (int i = 0; i < 64; i++)
        if (all[i]) {
            all[i]->forked_copy = 1;
            pthread_mutex_unlock(&all[i]->wb_lock);
        }
    pthread_mutex_unlock(&all_lock);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void atfork_register(void)
{
    pthread_atfork(prepare, parent, child);
}

void nv_gm_fork_init(void)
{
    pthread_once(&atfork_once, atfork_register);
}

static void child_close(struct nv_gm_child *c)
{
    close(c->fd);
    c->fd = -1;
    munmap(c->given, c->npages);
    c->given = NULL;
}

/* Give page p as of the fork to child c if it does not have it yet; the
 * caller holds child_lock. 0, or -ESRCH when the child is gone. */
static int child_give(struct nv_gm_region *r, struct nv_gm_child *c, uint64_t p, int wake)
{
    if (c->given[p])
        return 0;
    uintptr_t a = nv_gm_seg_page_addr(c->seg, c->nseg, p);
    if (!a)
        return 0;
    int e;
    if (!r->store->ops->has(r->store, p) || r->store->ops->fetch(r->store, p, r->child_buf) == NETVM_ERR_NOTFOUND)
        e = nv_gm_uffd_zeropage(c->fd, a, NV_GM_PAGE, wake ? 0 : UFFDIO_ZEROPAGE_MODE_DONTWAKE);
    else
        e = nv_gm_uffd_copy(c->fd, a, r->child_buf, NV_GM_PAGE, wake ? 0 : UFFDIO_COPY_MODE_DONTWAKE);
    if (e == -ESRCH)
        return e;
    /* EEXIST: the child had it (copied at the fork); EAGAIN: its mm is
     * changing (it retries the access and faults again) */
    if (e == 0 || e == -EEXIST)
        c->given[p] = 1;
    if (e != 0 && wake)
        nv_gm_uffd_wake(c->fd, a, NV_GM_PAGE);
    return 0;
}

void nv_gm_child_before_store(struct nv_gm_region *r, uint64_t first, uint64_t n)
{
    if (!__atomic_load_n(&r->nchildren, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&r->child_lock);
    for (int i = 0; i < NV_GM_MAXCHILD; i++) {
        struct nv_gm_child *c = &r->child[i];
        if (c->fd < 0)
            continue;
        for (uint64_t p = first; p < first + n && p < r->npages; p++)
            if (child_give(r, c, p, 0) == -ESRCH) {
                child_close(c);
                __atomic_fetch_sub(&r->nchildren, 1, __ATOMIC_RELEASE);
                break;
            }
        if (c->fd >= 0)
            NV_GM_CNT(r, child_pushes);
    }
    pthread_mutex_unlock(&r->child_lock);
}

static void child_msg(struct nv_gm_region *r, struct nv_gm_child *c, const struct uffd_msg *m)
{
    if (m->event == UFFD_EVENT_PAGEFAULT) {
        uintptr_t a = (uintptr_t)m->arg.pagefault.address & ~(uintptr_t)(NV_GM_PAGE - 1);
        if (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_WP) {
            nv_gm_uffd_wp(c->fd, a, NV_GM_PAGE, 0);     /* the child's writes are its own */
            return;
        }
        NV_GM_CNT(r, child_faults);
        uint64_t p = nv_gm_seg_addr_page(c->seg, c->nseg, a);
        if (p == UINT64_MAX || c->given[p]) {
            /* given already and discarded by the child since: zeros */
            if (nv_gm_uffd_zeropage(c->fd, a, NV_GM_PAGE, 0) != 0)
                nv_gm_uffd_wake(c->fd, a, NV_GM_PAGE);
            return;
        }
        if (child_give(r, c, p, 1) == -ESRCH) {
            child_close(c);
            __atomic_fetch_sub(&r->nchildren, 1, __ATOMIC_RELEASE);
        }
    } else if (m->event == UFFD_EVENT_REMOVE || m->event == UFFD_EVENT_UNMAP) {
        for (uintptr_t a = (uintptr_t)m->arg.remove.start; a < (uintptr_t)m->arg.remove.end; a += NV_GM_PAGE) {
            uint64_t p = nv_gm_seg_addr_page(c->seg, c->nseg, a);
            if (p != UINT64_MAX)
                c->given[p] = 1;
        }
    } else if (m->event == UFFD_EVENT_FORK) {
        /* a grandchild: not served (docs/gmem.md, "fork") */
        close((int)m->arg.fork.ufd);
        nv_warn("gmem: a forked child forked again: the grandchild's copy of the region is not served");
    } else if (m->event == UFFD_EVENT_REMAP) {
        /* the child moved its copy: follow whole moves only */
        uintptr_t from = (uintptr_t)m->arg.remap.from;
        for (int i = 0; i < c->nseg; i++)
            if (c->seg[i].start == from)
                c->seg[i].start = (uintptr_t)m->arg.remap.to;
    }
}

/* Serves every child's uffd of a region. */
static void *child_thread(void *arg)
{
    struct nv_gm_region *r = arg;
    struct pollfd pf[NV_GM_MAXCHILD + 2];
    int idx[NV_GM_MAXCHILD + 1];
    struct uffd_msg msg[8];
    for (;;) {
        int n = 0;
        pthread_mutex_lock(&r->child_lock);
        for (int i = 0; i < NV_GM_MAXCHILD; i++)
            if (r->child[i].fd >= 0) {
                pf[n] = (struct pollfd){ .fd = r->child[i].fd, .events = POLLIN };
                idx[n++] = i;
            }
        pthread_mutex_unlock(&r->child_lock);
        pf[n] = (struct pollfd){ .fd = r->stop_fd, .events = POLLIN };
        pf[n + 1] = (struct pollfd){ .fd = r->child_efd, .events = POLLIN };   /* a new child */
        int k = poll(pf, (nfds_t)n + 2, -1);
        if (k < 0 && errno != EINTR)
            break;
        if (pf[n].revents)
            break;
        if (pf[n + 1].revents) {
            uint64_t v;
            if (read(r->child_efd, &v, sizeof v) < 0) { /* already reset */ }
        }
        for (int j = 0; j < n; j++) {
            if (!pf[j].revents)
                continue;
            pthread_mutex_lock(&r->child_lock);
            struct nv_gm_child *c = &r->child[idx[j]];
            if (c->fd == pf[j].fd) {
                ssize_t got = read(c->fd, msg, sizeof msg);
                for (ssize_t i = 0; got > 0 && i < got / (ssize_t)sizeof msg[0] && c->fd >= 0; i++)
                    child_msg(r, c, &msg[i]);
                if (got < 0 && errno != EAGAIN) {
                    child_close(c);
                    __atomic_fetch_sub(&r->nchildren, 1, __ATOMIC_RELEASE);
                }
            }
            pthread_mutex_unlock(&r->child_lock);
        }
    }
    return NULL;
}

void nv_gm_child_add(struct nv_gm_region *r, int fd)
{
    pthread_mutex_lock(&r->child_lock);
    struct nv_gm_child *c = NULL;
    for (int i = 0; i < NV_GM_MAXCHILD && !c; i++)
        if (r->child[i].fd < 0)
            c = &r->child[i];
    if (c) {
        /* zero-filled on first touch: a big region costs what is used */
        void *g = mmap(NULL, r->npages, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        c->given = g == MAP_FAILED ? NULL : g;
        c->npages = r->npages;
        if (!c->given)
            c = NULL;
    }
    if (!c) {
        pthread_mutex_unlock(&r->child_lock);
        close(fd);
        nv_error("gmem: more than %d forked children hold a copy of a region: this one's copy is not served "
                 "(its missing pages fault forever)", NV_GM_MAXCHILD);
        return;
    }
    pthread_rwlock_rdlock(&r->seg_lock);
    memcpy(c->seg, r->seg, sizeof c->seg);
    c->nseg = r->nseg;
    pthread_rwlock_unlock(&r->seg_lock);
    c->fd = fd;
    __atomic_fetch_add(&r->nchildren, 1, __ATOMIC_RELEASE);
    if (r->child_efd < 0)
        r->child_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!r->child_started && r->child_efd >= 0 && pthread_create(&r->child_thr, NULL, child_thread, r) == 0)
        r->child_started = 1;
    uint64_t one = 1;
    if (r->child_efd >= 0 && write(r->child_efd, &one, sizeof one) < 0) { /* already signalled */ }
    pthread_mutex_unlock(&r->child_lock);
}

void nv_gm_child_stop(struct nv_gm_region *r)
{
    if (r->child_started)
        pthread_join(r->child_thr, NULL);
    for (int i = 0; i < NV_GM_MAXCHILD; i++)
        if (r->child[i].fd >= 0)
            child_close(&r->child[i]);
    if (r->child_efd >= 0)
        close(r->child_efd);
    r->child_efd = -1;
}
