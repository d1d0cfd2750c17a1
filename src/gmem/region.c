/* The region API of include/netvm/gmem.h: a private anonymous mapping
 * (transparent huge pages off) registered with userfaultfd for missing
 * and write-protect faults, its pager threads, and its store. */
#define _GNU_SOURCE
#include "gmem/own_ctx.h"
#include "gmem/pager.h"
#include "gmem/region_int.h"
#include "util/config.h"
#include "util/log.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

struct netvm_gmem {
    struct nv_gm_region r;
};

struct nv_gm_region *nv_gm_region_of(netvm_gmem_t *g)
{
    return &g->r;
}

/* What the pager needs of the kernel: write-protect faults (dirty
 * tracking) and UFFDIO_MOVE (atomic eviction), both in any 6.8+ kernel;
 * the events and POISON are used when present (docs/gmem.md). */
#define NV_GM_FEATURES_NEEDED (UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_MOVE)
#define NV_GM_FEATURES_WANTED                                                                                  \
    (NV_GM_FEATURES_NEEDED | UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_EVENT_REMAP | UFFD_FEATURE_EVENT_REMOVE |  \
     UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_POISON)

static void *map_anon(size_t len)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The default number of fault threads: one where the process may run on
 * two CPUs or fewer, two otherwise. A second fault thread serves a second
 * program thread's fault while the first waits for its page, but each
 * fault also wakes the sleeping one for nothing when the first thread,
 * polling, reads it first; with two CPUs shared by the program, its fault
 * threads and the memory servers, one thread was faster on every
 * benchmark, two faulting program threads included (performance.md,
 * "One fault thread on two CPUs"). */
static int default_fault_threads(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 2;
    return CPU_COUNT(&set) <= 2 ? 1 : 2;
}

struct opts {
    uint64_t budget;      /* pages */
    int      readahead, write_policy, threads, local, read_wp_auto;
};

static netvm_status_t resolve(const netvm_gmem_opts_t *o, struct opts *out)
{
    long long budget = o && o->budget ? (long long)o->budget
                                      : nv_config_size("NETVM_GMEM_BUDGET", NV_GM_PAGE, (long long)1 << 50);
    out->budget = (uint64_t)budget / NV_GM_PAGE;
    /* the default window shrinks to fit a small budget; one the caller or
     * NETVM_GMEM_READAHEAD asked for is kept or refused */
    const char *ra_env = getenv("NETVM_GMEM_READAHEAD");
    int ra_asked = (o && o->readahead) || (ra_env && *ra_env);
    int ra = o && o->readahead ? o->readahead : (int)nv_config_long("NETVM_GMEM_READAHEAD", 0, NV_GM_RABUF);
    if (ra < 0)
        ra = 0;
    /* a large budget gets a longer default window (pager_ra.c says why) */
    if (!ra_asked && out->budget >= NV_GM_RA_LARGE_BUDGET)
        ra = 128;
    if (ra > NV_GM_RABUF) {
        nv_error("gmem: read-ahead of %d pages asked; at most %d", ra, NV_GM_RABUF);
        return NETVM_ERR_INVAL;
    }
    out->readahead = ra;
    if (o && o->write_policy) {
        out->write_policy = o->write_policy;
    } else {
        const char *w = nv_config_str("NETVM_GMEM_WRITE");
        if (w && !strcasecmp(w, "early"))
            out->write_policy = NETVM_GMEM_WRITE_EARLY;
        else if (!w || !strcasecmp(w, "back"))
            out->write_policy = NETVM_GMEM_WRITE_BACK;
        else {
            nv_error("gmem: NETVM_GMEM_WRITE=%s: back or early", w);
            return NETVM_ERR_INVAL;
        }
    }
    if (out->write_policy != NETVM_GMEM_WRITE_BACK && out->write_policy != NETVM_GMEM_WRITE_EARLY)
        return NETVM_ERR_INVAL;
    const char *th_env = nv_config_str("NETVM_GMEM_THREADS");   /* no default: unset is NULL */
    if (o && o->fault_threads)
        out->threads = o->fault_threads;
    else if (th_env && *th_env)
        out->threads = (int)nv_config_long("NETVM_GMEM_THREADS", 1, 64);
    else
        out->threads = default_fault_threads();
    if (out->threads < 1 || out->threads > 64)
        return NETVM_ERR_INVAL;
    const char *wp = nv_config_str("NETVM_GMEM_READ_WP");
    if (!wp || !strcasecmp(wp, "auto"))
        out->read_wp_auto = 1;
    else if (!strcasecmp(wp, "always"))
        out->read_wp_auto = 0;
    else {
        nv_error("gmem: NETVM_GMEM_READ_WP=%s: auto or always", wp);
        return NETVM_ERR_INVAL;
    }
    const char *s = nv_config_str("NETVM_GMEM_STORE");
    if (s && !strcasecmp(s, "local"))
        out->local = 1;
    else if (!s || !strcasecmp(s, "remote"))
        out->local = 0;
    else {
        nv_error("gmem: NETVM_GMEM_STORE=%s: remote or local", s);
        return NETVM_ERR_INVAL;
    }
    /* room for every fault thread's page, a read-ahead window and an
     * eviction batch, or the evictor could find nothing to take */
    uint64_t least = (uint64_t)(2 * out->threads + out->readahead + NV_GM_STAGE);
    if (out->budget < least && !ra_asked && out->budget >= least - (uint64_t)out->readahead) {
        int fit = (int)(out->budget - (least - (uint64_t)out->readahead));
        nv_info("gmem: read-ahead window %d pages, not %d, to fit a budget of %llu pages", fit, out->readahead,
                (unsigned long long)out->budget);
        out->readahead = fit;
        least = out->budget;
    }
    if (out->budget < least) {
        nv_error("gmem: a budget of %llu pages is too small with %d fault threads and read-ahead %d: at least "
                 "%llu pages (%llu KiB)", (unsigned long long)out->budget, out->threads, out->readahead,
                 (unsigned long long)least, (unsigned long long)least * 4);
        return NETVM_ERR_INVAL;
    }
    return NETVM_OK;
}

static void region_free(struct nv_gm_region *r)
{
    if (r->uffd >= 0)
        close(r->uffd);
    if (r->stage_fd >= 0)
        close(r->stage_fd);
    if (r->stop_fd >= 0)
        close(r->stop_fd);
    for (int i = 0; i < r->nseg; i++)
        munmap((void *)r->seg[i].start, r->seg[i].n * NV_GM_PAGE);
    if (r->stage)
        munmap(r->stage, NV_GM_STAGE_PAGES * NV_GM_PAGE);
    if (r->state)
        munmap(r->state, r->npages * sizeof *r->state);
    if (r->resmap)
        munmap(r->resmap, (r->npages + 63) / 64 * sizeof *r->resmap);
    if (r->ra_buf)
        munmap(r->ra_buf, NV_GM_RABUF * NV_GM_PAGE);
    if (r->wb_buf)
        munmap(r->wb_buf, NV_GM_STAGE * NV_GM_PAGE);
    if (r->child_buf)
        munmap(r->child_buf, NV_GM_PAGE);
    if (r->store)
        r->store->ops->close(r->store);
    free(r->fault_thr);
    free(r);
}

/* The region's uffd with the features it needs (of want); -1 with why. */
static int open_main_uffd(uint64_t want, struct nv_uffd_caps *caps, char *why, size_t cap)
{
    int fd = nv_uffd_open(want, caps, why, cap);
    if (fd < 0)
        return -1;
    if ((caps->features & NV_GM_FEATURES_NEEDED) != NV_GM_FEATURES_NEEDED) {
        snprintf(why, cap, "this kernel's userfaultfd lacks %s%s (Linux 6.8 or later has both)",
                 caps->features & UFFD_FEATURE_PAGEFAULT_FLAG_WP ? "" : "write-protect faults (dirty tracking) ",
                 caps->features & UFFD_FEATURE_MOVE ? "" : "UFFDIO_MOVE (atomic eviction)");
        close(fd);
        return -1;
    }
    return fd;
}

netvm_status_t nv_gmem_check_support(char *why, size_t cap)
{
    struct nv_uffd_caps caps;
    int fd = open_main_uffd(NV_GM_FEATURES_WANTED, &caps, why, cap);
    if (fd < 0)
        return NETVM_ERR_UNSUPPORTED;
    close(fd);
    return NETVM_OK;
}

static netvm_status_t open_uffds(struct nv_gm_region *r)
{
    char why[512];
    /* a reader's discards must raise no event (pager.h) */
    uint64_t wanted = NV_GM_FEATURES_WANTED & ~(r->read_only ? (uint64_t)UFFD_FEATURE_EVENT_REMOVE : 0);
    r->uffd = open_main_uffd(wanted, &r->caps, why, sizeof why);
    if (r->uffd < 0) {
        nv_error("gmem: %s", why);
        return NETVM_ERR_UNSUPPORTED;
    }
    struct nv_uffd_caps c2;
    r->stage_fd = nv_uffd_open(UFFD_FEATURE_MOVE, &c2, why, sizeof why);
    if (r->stage_fd < 0) {
        nv_error("gmem: %s", why);
        return NETVM_ERR_UNSUPPORTED;
    }
    return NETVM_OK;
}

/* A private region (name NULL), or a shared one opened in mode. */
static netvm_status_t map_region(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts, const char *name,
                                 int mode, nv_gm_store_opener opener, void *opener_arg, unsigned store_flags,
                                 netvm_gmem_t **region, void **addr)
{
    if (!len || !region || !addr)
        return NETVM_ERR_INVAL;
    struct opts o;
    netvm_status_t st = resolve(opts, &o);
    if (st != NETVM_OK)
        return st;
    if (!o.local && !ctx)
        return NETVM_ERR_INVAL;
    if ((name || opener) && o.local) {
        nv_error("gmem: shared region '%s': NETVM_GMEM_STORE=local keeps pages in this process; sharing needs "
                 "memory servers", name ? name : "(a file cache)");
        return NETVM_ERR_UNSUPPORTED;
    }
    struct nv_gm_region *r = calloc(1, sizeof(struct netvm_gmem));
    if (!r)
        return NETVM_ERR_NOMEM;
    r->read_only = (name && mode == NETVM_GMEM_SHARED_READ) || opener;
    if (r->read_only)
        o.write_policy = NETVM_GMEM_WRITE_BACK;   /* nothing is ever dirty */
    r->uffd = r->stage_fd = r->stop_fd = r->child_efd = -1;
    for (int i = 0; i < NV_GM_MAXCHILD; i++)
        r->child[i].fd = -1;
    r->ctx = ctx;
    r->npages = (len + NV_GM_PAGE - 1) / NV_GM_PAGE;
    r->len = r->npages * NV_GM_PAGE;
    r->budget = o.budget;
    r->low_water = o.budget - nv_gm_evict_gap(o.budget);
    r->ra_window = o.readahead;
    r->ra_run = o.readahead >= 128 ? 64 : 16;
    r->write_policy = o.write_policy;
    r->nthreads = o.threads;
    r->spin_ns = (uint64_t)nv_config_long("NETVM_GMEM_SPIN_US", 0, 1000000) * 1000u;
    r->spin_yield = (unsigned)nv_config_long("NETVM_SPIN_YIELD", 0, 1 << 30);
    r->rd_adapt = o.read_wp_auto;
    r->ra_wp_close = NV_GM_RD_WINDOW;   /* read-ahead's first window (pager_ra.c) */
    for (unsigned w = 0; w < NV_GM_RABUF / 64; w++)
        r->ra_free[w] = ~(uint64_t)0;
    pthread_rwlock_init(&r->seg_lock, NULL);
    pthread_mutex_init(&r->ev_lock, NULL);
    pthread_cond_init(&r->ev_cond, NULL);
    pthread_cond_init(&r->room_cond, NULL);
    pthread_mutex_init(&r->wb_lock, NULL);
    pthread_mutex_init(&r->drop_lock, NULL);
    pthread_mutex_init(&r->reuse_lock, NULL);
    r->reuse_on = (int)nv_config_long("NETVM_GMEM_REUSE", 0, 1);
    pthread_mutex_init(&r->read_lock, NULL);
    pthread_mutex_init(&r->ra_lock, NULL);
    pthread_mutex_init(&r->child_lock, NULL);

    st = open_uffds(r);
    if (st != NETVM_OK)
        goto fail;
    st = NETVM_ERR_NOMEM;
    void *base = map_anon(r->len);
    if (!base)
        goto fail;
    r->seg[0] = (struct nv_gm_seg){ (uintptr_t)base, 0, r->npages };
    r->nseg = 1;
    r->stage = map_anon(NV_GM_STAGE_PAGES * NV_GM_PAGE);
    r->state = map_anon(r->npages * sizeof *r->state);
    r->resmap = map_anon((r->npages + 63) / 64 * sizeof *r->resmap);
    r->ra_buf = map_anon(NV_GM_RABUF * NV_GM_PAGE);
    r->wb_buf = map_anon(NV_GM_STAGE * NV_GM_PAGE);
    r->child_buf = map_anon(NV_GM_PAGE);
    r->fault_thr = calloc((size_t)o.threads, sizeof *r->fault_thr);
    if (!r->stage || !r->state || !r->resmap || !r->ra_buf || !r->wb_buf || !r->child_buf || !r->fault_thr)
        goto fail;
    nv_gm_reuse_init(r);
    /* a huge page would be placed and evicted as one: the pager works in
     * 4 KiB pages */
    madvise(base, r->len, MADV_NOHUGEPAGE);
    madvise(r->stage, NV_GM_STAGE_PAGES * NV_GM_PAGE, MADV_NOHUGEPAGE);
    /* a forked child shares no staged page: UFFDIO_MOVE takes only pages
     * of this process alone, and the child runs no pager thread to use them */
    madvise(r->stage, NV_GM_STAGE_PAGES * NV_GM_PAGE, MADV_DONTFORK);
    int e = nv_uffd_register(r->uffd, base, r->len, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP);
    if (e == 0)
        e = nv_uffd_register(r->stage_fd, r->stage, NV_GM_STAGE_PAGES * NV_GM_PAGE, UFFDIO_REGISTER_MODE_MISSING);
    if (e) {
        nv_error("gmem: UFFDIO_REGISTER failed: %s", strerror(-e));
        st = NETVM_ERR_SYS;
        goto fail;
    }
    if (o.local) {
        st = nv_gstore_local_open(r->npages, &r->store);
    } else {
        /* the fault threads call netvm beside the program: through a
         * context that allows it (own_ctx.h) */
        netvm_ctx_t *own = nv_gmem_own_ctx(ctx, &st);
        if (own && opener)
            st = opener(opener_arg, own, r->npages, opts, &r->store);
        else if (own && name)
            st = nv_gstore_shared_open(own, name, r->npages, mode, opts, &r->store);   /* proto.h: same modes */
        else if (own)
            st = nv_gstore_remote_open_flags(own, r->npages, opts, store_flags, &r->store);
    }
    if (st != NETVM_OK)
        goto fail;
    if (r->read_only && mprotect(base, r->len, PROT_READ) != 0) {
        st = NETVM_ERR_SYS;
        goto fail;
    }
    r->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->stop_fd < 0) {
        st = NETVM_ERR_SYS;
        goto fail;
    }
    nv_gm_fork_init();
    int started = 0;
    for (; started < o.threads; started++)
        if (pthread_create(&r->fault_thr[started], NULL, nv_gm_fault_thread, r))
            break;
    if (started < o.threads || pthread_create(&r->evict_thr, NULL, nv_gm_evict_thread, r)) {
        uint64_t one = 1;
        if (write(r->stop_fd, &one, sizeof one) < 0) { /* joined below regardless */ }
        for (int i = 0; i < started; i++)
            pthread_join(r->fault_thr[i], NULL);
        st = NETVM_ERR_SYS;
        goto fail;
    }
    nv_gm_fork_track(r, 1);
    if (r->store->shared == NETVM_GMEM_SHARED_READ)   /* a cache's pages never change */
        nv_gstore_shared_hook(r->store, nv_gm_invalidate, r);
    nv_debug("gmem: region of %llu pages at %p, budget %llu pages, read-ahead %d, %d fault threads, %s store",
             (unsigned long long)r->npages, base, (unsigned long long)r->budget, r->ra_window, r->nthreads,
             o.local ? "local" : "remote");
    *region = (netvm_gmem_t *)r;
    *addr = base;
    return NETVM_OK;
fail:
    region_free(r);
    return st;
}

netvm_status_t netvm_gmem_map(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts, netvm_gmem_t **region,
                              void **addr)
{
    return map_region(ctx, len, opts, NULL, 0, NULL, NULL, 0, region, addr);
}

netvm_status_t nv_gmem_map_reserve(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts,
                                   netvm_gmem_t **region, void **addr)
{
    return map_region(ctx, len, opts, NULL, 0, NULL, NULL, NV_GSTORE_RESERVE, region, addr);
}

netvm_status_t netvm_gmem_map_shared(netvm_ctx_t *ctx, const char *name, size_t len, int mode,
                                     const netvm_gmem_opts_t *opts, netvm_gmem_t **region, void **addr)
{
    if (!ctx || !name || !*name || strlen(name) > NETVM_GMEM_NAME_MAX || !nv_log_printable(name, strlen(name)) ||
        (mode != NETVM_GMEM_SHARED_READ && mode != NETVM_GMEM_SHARED_WRITE))
        return NETVM_ERR_INVAL;
    return map_region(ctx, len, opts, name, mode, NULL, NULL, 0, region, addr);
}

netvm_status_t nv_gm_region_map_with(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts,
                                     nv_gm_store_opener opener, void *arg, netvm_gmem_t **region, void **addr)
{
    return map_region(ctx, len, opts, NULL, 0, opener, arg, 0, region, addr);
}

netvm_status_t netvm_gmem_shared_remove(netvm_ctx_t *ctx, const char *name, const netvm_gmem_opts_t *opts)
{
    if (!ctx || !name || !*name || strlen(name) > NETVM_GMEM_NAME_MAX || !nv_log_printable(name, strlen(name)))
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    netvm_ctx_t *own = nv_gmem_own_ctx(ctx, &st);
    return own ? nv_gstore_shared_remove(own, name, opts) : st;
}

netvm_status_t netvm_gmem_unmap(netvm_gmem_t *region)
{
    if (!region)
        return NETVM_ERR_INVAL;
    struct nv_gm_region *r = &region->r;
    if (r->forked_copy) {
        /* a forked child's copy: the parent serves it and keeps the store */
        for (int i = 0; i < r->nseg; i++)
            munmap((void *)r->seg[i].start, r->seg[i].n * NV_GM_PAGE);
        return NETVM_OK;
    }
    nv_gm_fork_track(r, 0);
    if (r->store->shared == NETVM_GMEM_SHARED_READ)   /* no invalidation may touch it from now on */
        nv_gstore_shared_hook(r->store, NULL, NULL);
    pthread_mutex_lock(&r->ev_lock);
    r->stopping = 1;
    pthread_cond_broadcast(&r->ev_cond);
    pthread_cond_broadcast(&r->room_cond);
    pthread_mutex_unlock(&r->ev_lock);
    uint64_t one = 1;
    if (write(r->stop_fd, &one, sizeof one) < 0)
        return NETVM_ERR_SYS;
    for (int i = 0; i < r->nthreads; i++)
        pthread_join(r->fault_thr[i], NULL);
    pthread_join(r->evict_thr, NULL);
    /* read-ahead completions run in the progress engine, not on the
     * threads above: every one ends (an answer, a failure or its timeout) */
    nv_gm_readahead_drain(r);
    nv_gm_child_stop(r);
    /* closing the uffd unregisters the range, so the munmap below raises
     * no event that nobody would read */
    close(r->uffd);
    r->uffd = -1;
    region_free(r);
    return NETVM_OK;
}

netvm_status_t netvm_gmem_sync(netvm_gmem_t *region)
{
    if (!region || region->r.forked_copy)
        return NETVM_ERR_INVAL;
    if (region->r.read_only)
        return NETVM_OK;   /* a reader writes nothing */
    netvm_status_t st = nv_gm_sync(&region->r);
    if (st == NETVM_OK && region->r.store->shared)
        st = nv_gstore_shared_publish(region->r.store);
    return st;
}

void *netvm_gmem_addr(const netvm_gmem_t *region)
{
    return region ? (void *)region->r.seg[0].start : NULL;
}

size_t netvm_gmem_len(const netvm_gmem_t *region)
{
    return region ? region->r.len : 0;
}

#define LD(f) __atomic_load_n(&r->c.f, __ATOMIC_RELAXED)

netvm_status_t netvm_gmem_stats(const netvm_gmem_t *region, netvm_gmem_stats_t *s)
{
    if (!region || !s)
        return NETVM_ERR_INVAL;
    const struct nv_gm_region *r = &region->r;
    const struct nv_gstore *st = r->store;
    *s = (netvm_gmem_stats_t){
        .faults = LD(faults), .zero_fills = LD(zero_fills),
        .remote_fetches = __atomic_load_n(&st->remote_fetches, __ATOMIC_RELAXED),
        .readahead_issued = LD(ra_issued), .readahead_hits = LD(ra_hits), .readahead_waste = LD(ra_waste),
        .evictions = LD(evictions), .evictions_dirty = LD(evictions_dirty),
        .writebacks = __atomic_load_n(&st->writebacks, __ATOMIC_RELAXED),
        .bytes_in = __atomic_load_n(&st->bytes_in, __ATOMIC_RELAXED),
        .bytes_out = __atomic_load_n(&st->bytes_out, __ATOMIC_RELAXED),
        .resident_pages = __atomic_load_n(&r->resident, __ATOMIC_RELAXED), .budget_pages = r->budget,
        .fault_ns_p50 = nv_gm_hist_pct(&r->hist, 0.50), .fault_ns_p99 = nv_gm_hist_pct(&r->hist, 0.99),
        .fault_ns_p999 = nv_gm_hist_pct(&r->hist, 0.999),
        .fault_ns_max = __atomic_load_n(&r->hist.max, __ATOMIC_RELAXED),
        .resident_peak = __atomic_load_n(&r->resident_peak, __ATOMIC_RELAXED),
        .wp_faults = LD(wp_faults), .placed_dirty = LD(placed_dirty),
        .direct_fetches = __atomic_load_n(&st->direct_fetches, __ATOMIC_RELAXED),
    };
    return NETVM_OK;
}

netvm_status_t netvm_gmem_health(const netvm_gmem_t *region, netvm_gmem_health_t *h)
{
    if (!region || !h)
        return NETVM_ERR_INVAL;
    region->r.store->ops->health(region->r.store, h);
    return NETVM_OK;
}
