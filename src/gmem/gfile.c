/* The file cache's API (include/netvm/gfile.h): a file handle over a
 * cache store (store_gfile.c), pread by runs of blocks and the whole-file
 * mapping (a read-only pager region); the windows are gfile_win.c's. */
#include "gmem/gfile_int.h"
#include "gmem/own_ctx.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <netvm/gfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The cache's name: the file's identity and every time that changes with
 * its content, so a changed file is another cache. */
static int cache_name(const struct stat *st, char *out, size_t cap)
{
    return snprintf(out, cap, "gfile:%llx:%llx:%llu:%lld.%09ld:%lld.%09ld", (unsigned long long)st->st_dev,
                    (unsigned long long)st->st_ino, (unsigned long long)st->st_size, (long long)st->st_mtim.tv_sec,
                    st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, st->st_ctim.tv_nsec) >= (int)cap;
}

static netvm_status_t stat_path(const char *path, int *fdp, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        nv_error("gfile: cannot open %s: %s", path, strerror(errno));
        return NETVM_ERR_SYS;
    }
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) {
        nv_error("gfile: %s is not a regular file", path);
        close(fd);
        return NETVM_ERR_INVAL;
    }
    *fdp = fd;
    return NETVM_OK;
}

const netvm_gmem_opts_t *nv_gfile_opts(const netvm_gfile_t *f) { return f->has_opts ? &f->opts : NULL; }

netvm_status_t nv_gfile_open_store(netvm_gfile_t *f, netvm_ctx_t *own, struct nv_gstore **s)
{
    struct nv_gm_cache_src src = { .fd = f->fd, .size = f->size, .file_reads = &f->file_reads,
                                   .file_bytes = &f->file_bytes };
    return nv_gstore_cache_open(own, f->name, f->npages, NV_GM_SHARED_CACHE, &src, nv_gfile_opts(f), s);
}

netvm_status_t netvm_gfile_open(netvm_ctx_t *ctx, const char *path, const netvm_gmem_opts_t *opts,
                                netvm_gfile_t **fp)
{
    if (!ctx || !path || !fp)
        return NETVM_ERR_INVAL;
    netvm_gfile_t *f = calloc(1, sizeof *f);
    if (!f)
        return NETVM_ERR_NOMEM;
    struct stat st;
    netvm_status_t s = stat_path(path, &f->fd, &st);
    if (s != NETVM_OK) {
        free(f);
        return s;
    }
    f->ctx = ctx;
    f->size = (uint64_t)st.st_size;
    f->npages = (f->size + NV_GM_PAGE - 1) / NV_GM_PAGE;
    if (opts) {
        f->opts = *opts;
        f->has_opts = 1;
    }
    pthread_mutex_init(&f->lock, NULL);
    cache_name(&st, f->name, sizeof f->name);
    if (f->npages) {
        f->own = nv_gmem_own_ctx(ctx, &s);
        if (f->own)
            s = nv_gfile_open_store(f, f->own, &f->store);
        if (s != NETVM_OK) {
            close(f->fd);
            pthread_mutex_destroy(&f->lock);
            free(f);
            return s;
        }
    }
    *fp = f;
    return NETVM_OK;
}

netvm_status_t netvm_gfile_size(const netvm_gfile_t *f, uint64_t *size)
{
    if (!f || !size)
        return NETVM_ERR_INVAL;
    *size = f->size;
    return NETVM_OK;
}

/* --- pread ----------------------------------------------------------------- */

/* A pread keeps this many GETN runs of NV_GSTORE_FETCHN_MAX blocks in
 * flight (1 MiB), so the servers' replies stream rather than wait on one
 * round trip each. */
#define NV_GFILE_RUNS 4

struct run_wait {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    int             pending;
    uint64_t        got[NV_GFILE_RUNS];
};

struct run_arg {
    struct run_wait *w;
    int              i;
};

static void run_done(void *arg, uint64_t got)
{
    struct run_arg *a = arg;
    struct run_wait *w = a->w;
    pthread_mutex_lock(&w->lock);
    w->got[a->i] = got;
    if (--w->pending == 0)
        pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Blocks [first, first + n) into buf (n <= NV_GFILE_RUNS runs): GETN runs
 * from the servers, all in flight at once, then the blocks they lack from
 * the file (stored for the next reader). */
static netvm_status_t read_runs(netvm_gfile_t *f, uint64_t first, uint64_t n, unsigned char *buf)
{
    const uint64_t run = NV_GSTORE_FETCHN_MAX;
    struct run_wait w = { .pending = 0 };
    struct run_arg args[NV_GFILE_RUNS];
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    int nruns = (int)((n + run - 1) / run);
    pthread_mutex_lock(&w.lock);
    w.pending = nruns;
    pthread_mutex_unlock(&w.lock);
    for (int i = 0; i < nruns; i++) {
        uint64_t k = n - (uint64_t)i * run < run ? n - (uint64_t)i * run : run;
        args[i] = (struct run_arg){ &w, i };
        w.got[i] = 0;
        if (f->store->ops->fetchn_nb(f->store, first + (uint64_t)i * run, k, buf + (uint64_t)i * run * NV_GM_PAGE,
                                     run_done, &args[i]) != NETVM_OK) {
            pthread_mutex_lock(&w.lock);
            w.pending--;   /* nothing started: all of it from the file */
            pthread_mutex_unlock(&w.lock);
        }
    }
    pthread_mutex_lock(&w.lock);
    while (w.pending)
        pthread_cond_wait(&w.cond, &w.lock);
    pthread_mutex_unlock(&w.lock);
    pthread_mutex_destroy(&w.lock);
    pthread_cond_destroy(&w.cond);
    for (uint64_t i = 0; i < n;) {
        uint64_t got = w.got[i / run];
        if (got >> (i % run) & 1) {
            atomic_fetch_add_explicit(&f->cache_blocks, 1, memory_order_relaxed);
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < n && !(w.got[j / run] >> (j % run) & 1))
            j++;
        netvm_status_t st = nv_gm_cache_fill(f->store, first + i, j - i, buf + i * NV_GM_PAGE);
        if (st != NETVM_OK)
            return st;
        i = j;
    }
    return NETVM_OK;
}

netvm_status_t netvm_gfile_pread(netvm_gfile_t *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    if (!f || (!buf && len) || !got)
        return NETVM_ERR_INVAL;
    *got = 0;
    if (off >= f->size || !len)
        return NETVM_OK;
    if (len > f->size - off)
        len = (size_t)(f->size - off);
    const uint64_t maxrun = NV_GSTORE_FETCHN_MAX * NV_GFILE_RUNS;
    uint64_t first = off / NV_GM_PAGE, last = (off + len - 1) / NV_GM_PAGE;
    uint64_t span = last - first + 1;
    unsigned char *tmp = malloc((size_t)((span < maxrun ? span : maxrun) * NV_GM_PAGE));
    if (!tmp)
        return NETVM_ERR_NOMEM;
    netvm_status_t st = NETVM_OK;
    size_t done = 0;
    for (uint64_t p = first; p <= last;) {
        uint64_t n = last - p + 1 < maxrun ? last - p + 1 : maxrun;
        st = read_runs(f, p, n, tmp);
        if (st != NETVM_OK)
            break;
        uint64_t from = off + done, to = (p + n) * NV_GM_PAGE;
        if (to > off + len)
            to = off + len;
        memcpy((char *)buf + done, tmp + (from - p * NV_GM_PAGE), (size_t)(to - from));
        done += (size_t)(to - from);
        p += n;
    }
    free(tmp);
    *got = done;
    return st;
}

/* --- the whole-file mapping --------------------------------------------------- */

static netvm_status_t map_opener(void *arg, netvm_ctx_t *own, uint64_t npages, const netvm_gmem_opts_t *opts,
                                 struct nv_gstore **s)
{
    (void)npages;
    (void)opts;
    return nv_gfile_open_store(arg, own, s);
}

netvm_status_t netvm_gfile_map(netvm_gfile_t *f, void **addr, size_t *len)
{
    if (!f || !addr || !len || !f->npages)
        return NETVM_ERR_INVAL;
    netvm_status_t st = NETVM_OK;
    pthread_mutex_lock(&f->lock);
    if (!f->map)
        st = nv_gm_region_map_with(f->ctx, (size_t)(f->npages * NV_GM_PAGE), nv_gfile_opts(f), map_opener, f, &f->map,
                                   &f->map_addr);
    if (st == NETVM_OK) {
        *addr = f->map_addr;
        *len = (size_t)f->size;
    }
    pthread_mutex_unlock(&f->lock);
    return st;
}

/* --- the rest ----------------------------------------------------------------- */

netvm_status_t netvm_gfile_stats(const netvm_gfile_t *f, netvm_gfile_stats_t *s)
{
    if (!f || !s)
        return NETVM_ERR_INVAL;
    s->file_reads = atomic_load_explicit(&f->file_reads, memory_order_relaxed);
    s->file_bytes = atomic_load_explicit(&f->file_bytes, memory_order_relaxed);
    s->cache_blocks = atomic_load_explicit(&f->cache_blocks, memory_order_relaxed);
    return NETVM_OK;
}

netvm_status_t netvm_gfile_close(netvm_gfile_t *f)
{
    if (!f)
        return NETVM_ERR_INVAL;
    nv_gfile_wins_close(f);
    if (f->map)
        netvm_gmem_unmap(f->map);
    if (f->store)
        f->store->ops->close(f->store);
    close(f->fd);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return NETVM_OK;
}

netvm_status_t netvm_gfile_remove(netvm_ctx_t *ctx, const char *path, const netvm_gmem_opts_t *opts)
{
    if (!ctx || !path)
        return NETVM_ERR_INVAL;
    int fd;
    struct stat st;
    netvm_status_t s = stat_path(path, &fd, &st);
    if (s != NETVM_OK)
        return s;
    close(fd);
    char name[NV_GM_NAME_MAX + 1];
    cache_name(&st, name, sizeof name);
    return netvm_gmem_shared_remove(ctx, name, opts);
}
