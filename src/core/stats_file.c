/* A context's live statistics file (wire/ctx_stats.h), for `netvm stat
 * pid:PID`: made at netvm_init when NETVM_STATS_DIR is set, rewritten by
 * the progress engine's timers every 100 ms and once more at
 * netvm_finalize. Off by default: an idle process then wakes for nothing. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/config.h"
#include "util/log.h"
#include "util/time.h"
#include "wire/ctx_stats.h"

#include <errno.h>
#include <fcntl.h>
#include <netvm/reg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define PERIOD_NS 100000000ull

/* stats_lock held */
static void fill(netvm_ctx_t *ctx, int final)
{
    struct nv_ctx_stats_file *f = ctx->stats;
    netvm_reg_stats_t r;
    memset(&r, 0, sizeof r);
    if (ctx->reg)
        (void)netvm_reg_stats(ctx, &r);
    struct nv_rcache_stats c;
    nv_lreg_stats(ctx, &c);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    __atomic_fetch_add(&f->seq, 1, __ATOMIC_ACQ_REL);   /* odd: being written */
    snprintf(f->strategy, sizeof f->strategy, "%s", r.strategy ? r.strategy : "none");
    f->reg_hits = r.hits;
    f->reg_misses = r.misses;
    f->reg_moves = r.moves;
    f->reg_pins = r.pins;
    f->reg_unpins = r.unpins;
    f->reg_pinned_bytes = r.pinned_bytes;
    f->reg_pinned_high = r.pinned_high;
    f->reg_buckets = r.buckets;
    f->reg_victims = r.victims;
    f->reg_peer_releases = r.peer_releases;
    f->reg_refused = r.refused;
    f->lreg_hits = c.hits;
    f->lreg_misses = c.misses;
    f->lreg_uncached = c.uncached;
    f->lreg_invalidations = c.invalidations;
    f->lreg_evictions = c.evictions;
    f->lreg_regs = c.regs;
    f->lreg_deregs = c.deregs;
    f->updated_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    f->finalized = final;
    __atomic_fetch_add(&f->seq, 1, __ATOMIC_RELEASE);
}

/* DIR/PID.N.netvm, N the first free: a process may make several contexts */
static int open_file(const char *dir, char *path, size_t cap)
{
    for (int n = 0; n < 1000; n++) {
        snprintf(path, cap, "%s/%d.%d%s", dir, (int)getpid(), n, NV_CTX_STATS_SUFFIX);
        int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    errno = EEXIST;
    return -1;
}

void nv_stats_open(netvm_ctx_t *ctx)
{
    const char *dir = nv_config_str("NETVM_STATS_DIR");
    if (!dir || !*dir)
        return;
    char path[4096];
    int fd = open_file(dir, path, sizeof path);
    if (fd < 0) {
        nv_warn("NETVM_STATS_DIR=%s: cannot make a statistics file there: %s", dir, strerror(errno));
        return;
    }
    void *p = MAP_FAILED;
    if (ftruncate(fd, sizeof(struct nv_ctx_stats_file)) == 0)
        p = mmap(NULL, sizeof(struct nv_ctx_stats_file), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        nv_warn("NETVM_STATS_DIR: %s: %s", path, strerror(errno));
        unlink(path);
        return;
    }
    struct nv_ctx_stats_file *f = p;
    f->version = NV_CTX_STATS_VERSION;
    f->pid = getpid();
    f->rank = ctx->rank;
    f->size = ctx->size;
    snprintf(f->prog, sizeof f->prog, "%s", program_invocation_short_name ? program_invocation_short_name : "?");
    pthread_mutex_lock(&ctx->stats_lock);
    ctx->stats = f;
    fill(ctx, 0);
    __atomic_store_n(&f->magic, NV_CTX_STATS_MAGIC, __ATOMIC_RELEASE);
    ctx->stats_next = nv_now_ns() + PERIOD_NS;
    pthread_mutex_unlock(&ctx->stats_lock);
}

uint64_t nv_stats_tick(netvm_ctx_t *ctx, uint64_t now)
{
    if (!__atomic_load_n(&ctx->stats, __ATOMIC_RELAXED))
        return UINT64_MAX;   /* the common case, without the lock */
    pthread_mutex_lock(&ctx->stats_lock);
    uint64_t next = UINT64_MAX;
    if (ctx->stats) {
        if (now >= ctx->stats_next) {
            fill(ctx, 0);
            ctx->stats_next = now + PERIOD_NS;
        }
        next = ctx->stats_next;
    }
    pthread_mutex_unlock(&ctx->stats_lock);
    return next;
}

void nv_stats_close(netvm_ctx_t *ctx, int final)
{
    pthread_mutex_lock(&ctx->stats_lock);
    if (ctx->stats) {
        if (final)
            fill(ctx, 1);
        munmap(ctx->stats, sizeof(struct nv_ctx_stats_file));
        __atomic_store_n(&ctx->stats, NULL, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&ctx->stats_lock);
}
