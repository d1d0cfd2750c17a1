/* The file cache's mapped blocks (the GMS paper's MMB, gfile.h
 * netvm_gfile_window): a window set is one read-only pager region whose
 * page p shows file block first[p / wpages] + p % wpages, through a store
 * over the file's cache store that translates pages. A move publishes the
 * window's new first block and then drops its pages (pager_shared.c), so a
 * fetch that read the old one is of a page that was busy or resident then,
 * and is dropped with it. */
#include "gmem/gfile_int.h"

#include <stdlib.h>

struct win_store {
    struct nv_gstore  base;
    struct nv_gstore *inner;
    uint64_t          wpages, file_pages;
    unsigned          nwin;
    _Atomic uint64_t *first;          /* per window: its first file block */
};

struct netvm_gfile_win {
    netvm_gfile_t     *f;
    netvm_gmem_t      *g;
    struct win_store  *ws;            /* the region's store (freed by its close) */
    unsigned           nwin;
    uint64_t           wpages;
    netvm_gfile_win_t *next;
};

static uint64_t file_page(struct win_store *w, uint64_t p)
{
    return atomic_load_explicit(&w->first[p / w->wpages], memory_order_acquire) + p % w->wpages;
}

static int ws_has(struct nv_gstore *s, uint64_t p)
{
    struct win_store *w = (struct win_store *)s;
    return file_page(w, p) < w->file_pages;   /* past the end: zeros, no round trip */
}

static netvm_status_t ws_fetch(struct nv_gstore *s, uint64_t p, void *buf)
{
    struct win_store *w = (struct win_store *)s;
    uint64_t fp = file_page(w, p);
    return fp < w->file_pages ? w->inner->ops->fetch(w->inner, fp, buf) : NETVM_ERR_NOTFOUND;
}

static netvm_status_t ws_fetch_nb(struct nv_gstore *s, uint64_t p, void *buf, nv_gstore_done_fn done, void *arg)
{
    struct win_store *w = (struct win_store *)s;
    uint64_t fp = file_page(w, p);
    return fp < w->file_pages ? w->inner->ops->fetch_nb(w->inner, fp, buf, done, arg) : NETVM_ERR_NOTFOUND;
}

static netvm_status_t ws_fetchn_nb(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf,
                                   nv_gstore_ndone_fn done, void *arg)
{
    struct win_store *w = (struct win_store *)s;
    /* a run stops at its window's end and the file's: the pages after it
     * are not in got, and their faults fetch them */
    uint64_t in_win = w->wpages - first % w->wpages, fp = file_page(w, first);
    if (n > in_win)
        n = in_win;
    if (fp >= w->file_pages)
        return NETVM_ERR_NOTFOUND;
    if (n > w->file_pages - fp)
        n = w->file_pages - fp;
    return w->inner->ops->fetchn_nb(w->inner, fp, n, buf, done, arg);
}

static netvm_status_t ws_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                                  nv_gstore_done_fn done, void *arg)
{
    (void)s, (void)page, (void)n, (void)buf, (void)done, (void)arg;
    return NETVM_ERR_RIGHTS;   /* read-only: never dirty */
}

static void ws_discard(struct nv_gstore *s, uint64_t first, uint64_t n) { (void)s, (void)first, (void)n; }

static void ws_health(struct nv_gstore *s, netvm_gmem_health_t *h)
{
    struct win_store *w = (struct win_store *)s;
    w->inner->ops->health(w->inner, h);
}

static void ws_close(struct nv_gstore *s)
{
    struct win_store *w = (struct win_store *)s;
    w->inner->ops->close(w->inner);
    free(w->first);
    free(w);
}

static const struct nv_gstore_ops win_ops = {
    .has = ws_has, .fetch = ws_fetch, .fetch_nb = ws_fetch_nb, .fetchn_nb = ws_fetchn_nb,
    .store_nb = ws_store_nb, .discard = ws_discard, .health = ws_health, .close = ws_close,
};

struct win_open {
    netvm_gfile_t    *f;
    struct win_store *ws;
    int               owned;   /* the region took ws: its close frees it */
};

static netvm_status_t win_opener(void *arg, netvm_ctx_t *own, uint64_t npages, const netvm_gmem_opts_t *opts,
                                 struct nv_gstore **s)
{
    (void)npages;
    (void)opts;
    struct win_open *o = arg;
    netvm_status_t st = nv_gfile_open_store(o->f, own, &o->ws->inner);
    if (st == NETVM_OK) {
        *s = &o->ws->base;
        o->owned = 1;
    }
    return st;
}

netvm_status_t netvm_gfile_window(netvm_gfile_t *f, unsigned nwin, size_t wsize, netvm_gfile_win_t **wp,
                                  void **addr)
{
    if (!f || !nwin || !wsize || wsize % NV_GM_PAGE || !wp || !addr || !f->npages)
        return NETVM_ERR_INVAL;
    netvm_gfile_win_t *w = calloc(1, sizeof *w);
    struct win_store *ws = calloc(1, sizeof *ws);
    if (!w || !ws || !(ws->first = calloc(nwin, sizeof *ws->first))) {
        free(w);
        if (ws)
            free(ws->first);
        free(ws);
        return NETVM_ERR_NOMEM;
    }
    ws->base.ops = &win_ops;
    ws->base.shared = NV_GM_SHARED_CACHE;
    ws->wpages = wsize / NV_GM_PAGE;
    ws->file_pages = f->npages;
    ws->nwin = nwin;
    w->f = f;
    w->nwin = nwin;
    w->wpages = ws->wpages;
    w->ws = ws;
    struct win_open o = { f, ws, 0 };
    netvm_status_t st = nv_gm_region_map_with(f->ctx, (size_t)nwin * wsize, nv_gfile_opts(f), win_opener, &o, &w->g, addr);
    if (st != NETVM_OK) {
        if (!o.owned) {   /* else the failed region closed it, and ws with it */
            free(ws->first);
            free(ws);
        }
        free(w);
        return st;
    }
    pthread_mutex_lock(&f->lock);
    w->next = f->wins;
    f->wins = w;
    pthread_mutex_unlock(&f->lock);
    *wp = w;
    return NETVM_OK;
}

netvm_status_t netvm_gfile_window_move(netvm_gfile_win_t *w, unsigned i, uint64_t off)
{
    if (!w || i >= w->nwin || off % NV_GM_PAGE)
        return NETVM_ERR_INVAL;
    atomic_store_explicit(&w->ws->first[i], off / NV_GM_PAGE, memory_order_release);
    nv_gm_region_refetch(w->g, (uint64_t)i * w->wpages, w->wpages);
    return NETVM_OK;
}

static void win_free(netvm_gfile_win_t *w)
{
    netvm_gmem_unmap(w->g);   /* closes its store and the cache store under it */
    free(w);
}

netvm_status_t netvm_gfile_window_close(netvm_gfile_win_t *w)
{
    if (!w)
        return NETVM_ERR_INVAL;
    netvm_gfile_t *f = w->f;
    pthread_mutex_lock(&f->lock);
    for (netvm_gfile_win_t **l = &f->wins; *l; l = &(*l)->next)
        if (*l == w) {
            *l = w->next;
            break;
        }
    pthread_mutex_unlock(&f->lock);
    win_free(w);
    return NETVM_OK;
}

void nv_gfile_wins_close(netvm_gfile_t *f)
{
    while (f->wins) {
        netvm_gfile_win_t *w = f->wins;
        f->wins = w->next;
        win_free(w);
    }
}
