/* Storing pages: the range is cut at extent boundaries, each extent goes
 * to the first R servers of its placement in one PUT each, all in
 * parallel; a server that refuses (its pool or this client's bound is
 * full) or fails is replaced by the next server of the placement. When
 * every copy is settled the directory names the servers that took each
 * page, and copies left on servers no longer named are freed. Pages that
 * are not adjacent (an evictor's batch of scattered victims) are grouped
 * by placement instead, each group gathered into one PUTV a server: with
 * two servers and R = 2 a batch of 64 victims is 2 calls, not 128. */
#include "gmem/store_remote.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct put_chunk {
    uint64_t    first, n;
    uint32_t   *idx;       /* a PUTV's: its pages' indexes in the op; NULL: first .. first + n - 1 */
    uint8_t    *gather;    /* a PUTV's payload: n page numbers, then the n pages */
    uint8_t     order[NV_GM_MAX_SERVERS];
    int         norder;
    _Atomic int nextpos;
    _Atomic int nacked;
    uint8_t     acked[NV_GM_RMAX];
};

struct put_op;
struct put_copy {
    struct put_op    *op;
    struct put_chunk *c;
    int               server;
};

struct put_op {
    struct nv_gstore_remote *r;
    uint64_t          page, n;
    const uint64_t   *pages;    /* a vector's pages, ascending; NULL: page .. page + n - 1 */
    const uint8_t    *buf;
    uint8_t          *gather;   /* the PUTVs' payloads */
    nv_gstore_done_fn done;
    void             *arg;
    _Atomic int       pending;
    _Atomic int       status;
    int               nchunks;
    uint64_t         *start;    /* each page's entry when the store began (W set) */
    struct put_chunk *chunks;
    struct put_copy  *copies;
};

/* A PUTV payload buffer for n pages: the store's kept one when n fits. */
static uint8_t *gather_get(struct nv_gstore_remote *r, uint64_t n)
{
    uint8_t *b = n <= NV_GM_PUTV_CACHED ? atomic_exchange(&r->put_cache, NULL) : NULL;
    return b ? b : malloc((n > NV_GM_PUTV_CACHED ? n : NV_GM_PUTV_CACHED) * (sizeof(uint64_t) + NV_GM_PAGE));
}

static void gather_put(struct nv_gstore_remote *r, uint8_t *b, uint64_t n)
{
    uint8_t *none = NULL;
    if (b && (n > NV_GM_PUTV_CACHED || !atomic_compare_exchange_strong(&r->put_cache, &none, b)))
        free(b);
}

void nv_gm_put_cache_free(struct nv_gstore_remote *r)
{
    free(atomic_exchange(&r->put_cache, NULL));
}

/* The chunk's i-th page; *k: its index in the op (for op->start). */
static uint64_t chunk_page(const struct put_op *op, const struct put_chunk *c, uint64_t i, uint64_t *k)
{
    *k = c->idx ? c->idx[i] : c->first - op->page + i;
    return op->pages ? op->pages[*k] : op->page + *k;
}

/* Pages at or above top were never stored until now: the directory's
 * walks go up to it. */
static void raise_hi(struct nv_gstore_remote *r, uint64_t top)
{
    uint64_t hi = atomic_load(&r->hi);
    while (hi < top && !atomic_compare_exchange_weak(&r->hi, &hi, top)) {
    }
}

/* Wait until no mover works on the page, then mark a store under way. */
static uint64_t begin_page(struct nv_gstore_remote *r, uint64_t p)
{
    for (unsigned spins = 0;; spins++) {
        uint64_t e = atomic_load(&r->dir[p]);
        if (!(e & (NV_GM_E_M | NV_GM_E_W))) {
            if (atomic_compare_exchange_weak(&r->dir[p], &e, e | NV_GM_E_W))
                return e | NV_GM_E_W;
            continue;
        }
        if (spins < 100) {
            sched_yield();
        } else {
            struct timespec t = { 0, 50000 };
            nanosleep(&t, NULL);
        }
    }
}

/* Copies to free at the servers, gathered into runs a server: a page's
 * copies where it was discarded while stored, and its old copies on
 * servers no longer its holders. Only those pages: a chunk's other pages
 * keep the copies just stored (freeing a whole chunk for one discarded
 * page lost the rest, seen once chunks were scattered PUTVs). */
struct free_runs {
    uint64_t first[NV_GM_MAX_SERVERS], n[NV_GM_MAX_SERVERS];
};

static void free_add(struct nv_gstore_remote *r, struct free_runs *f, unsigned x, uint64_t p)
{
    if (f->n[x] && f->first[x] + f->n[x] == p) {
        f->n[x]++;
        return;
    }
    if (f->n[x])
        nv_gm_free_at(r, (int)x, f->first[x], f->n[x]);
    f->first[x] = p;
    f->n[x] = 1;
}

static void free_flush(struct nv_gstore_remote *r, struct free_runs *f)
{
    for (int x = 0; x < NV_GM_MAX_SERVERS; x++)
        if (f->n[x]) {
            nv_gm_free_at(r, x, f->first[x], f->n[x]);
            f->n[x] = 0;
        }
}

static void finalize(struct put_op *op)
{
    struct nv_gstore_remote *r = op->r;
    int want = r->replicas, st = NETVM_OK;
    struct free_runs fr;
    memset(fr.n, 0, sizeof fr.n);
    for (int ci = 0; ci < op->nchunks; ci++) {
        struct put_chunk *c = &op->chunks[ci];
        int na = atomic_load(&c->nacked);
        uint8_t h[NV_GM_RMAX];
        memset(h, NV_GM_NO_SERVER, sizeof h);
        memcpy(h, c->acked, (size_t)na);
        for (uint64_t i = 0; i < c->n; i++) {
            uint64_t k, p = chunk_page(op, c, i, &k);
            uint64_t e = atomic_load(&r->dir[p]), nw;
            int discarded;
            for (;;) {
                discarded = (e & NV_GM_E_GENMASK) != (op->start[k] & NV_GM_E_GENMASK);
                if (discarded)
                    nw = e & ~NV_GM_E_W;   /* discarded while we stored: our copies are not wanted */
                else if (na == 0)
                    nw = e & ~NV_GM_E_W;   /* the old copies (if any) stay what the page reads */
                else
                    nw = nv_gm_e_with_holders((nv_gm_e_bump(e) & ~(3ull | NV_GM_E_W)) | NV_GM_PG_STORED, h);
                uint64_t old = e;
                if (nv_gm_dir_cas(r, p, e, nw)) {
                    e = old;
                    break;
                }
                e = atomic_load(&r->dir[p]);
            }
            if (discarded) {
                for (int j = 0; j < na; j++)
                    free_add(r, &fr, c->acked[j], p);
                continue;
            }
            if (na && nv_gm_e_state(e) == NV_GM_PG_STORED)
                for (int j = 0; j < NV_GM_RMAX; j++) {
                    unsigned x = nv_gm_e_holder(e, j);
                    if (x != NV_GM_NO_SERVER && !nv_gm_e_holds(nw, x))
                        free_add(r, &fr, x, p);
                }
            if (na && nv_gm_e_state(e) == NV_GM_PG_LOST)
                atomic_fetch_sub(&r->lost, 1);
        }
        if (na < want && st == NETVM_OK)
            st = atomic_load(&op->status) != NETVM_OK ? atomic_load(&op->status) : NETVM_ERR_PEER;
    }
    free_flush(r, &fr);
    nv_gstore_done_fn done = op->done;
    void *arg = op->arg;
    gather_put(r, op->gather, op->n);
    free(op);
    done(arg, (netvm_status_t)st);
}

static void copy_settled(struct put_op *op)
{
    if (atomic_fetch_sub(&op->pending, 1) == 1)
        finalize(op);
}

static int put_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg);
static netvm_status_t send_copies(struct put_op *op, int nchunks, int R);

/* Send copy cp to the next server of its chunk's placement; 0 if none is
 * left. */
static int issue_copy(struct put_copy *cp)
{
    struct put_op *op = cp->op;
    struct put_chunk *c = cp->c;
    struct nv_gm_servers *g = op->r->g;
    for (;;) {
        int pos = atomic_fetch_add(&c->nextpos, 1);
        if (pos >= c->norder)
            return 0;
        int x = c->order[pos];
        if (!nv_gm_srv_placeable(g, x))
            continue;
        netvm_rpc_handle_t *h;
        if (netvm_rpc_begin(g->ctx, &h) != NETVM_OK)
            return 0;
        netvm_rpc_push(h, put_cont, cp);
        cp->server = x;
        netvm_status_t st;
        if (c->idx) {
            uint64_t args[3] = { op->r->owner, op->r->region, c->n };
            st = nv_rpc_svc_issue(h, g->srv[x].peer, nv_gm_k(NV_GM_PUTV), args, 3, c->gather,
                                  c->n * (sizeof(uint64_t) + NV_GM_PAGE), NULL, 0, op->r->timeout_ms);
        } else {
            uint64_t args[4] = { op->r->owner, op->r->region, c->first, c->n };
            st = nv_rpc_svc_issue(h, g->srv[x].peer, nv_gm_k(NV_GM_PUT), args, 4,
                                  op->buf + (c->first - op->page) * NV_GM_PAGE, c->n * NV_GM_PAGE, NULL, 0,
                                  op->r->timeout_ms);
        }
        netvm_rpc_drop(h);
        if (st == NETVM_OK)
            return 1;
    }
}

static int put_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct put_copy *cp = arg;
    struct put_op *op = cp->op;
    struct put_chunk *c = cp->c;
    struct nv_gm_servers *g = op->r->g;
    if (o->status == NETVM_OK) {
        nv_gm_srv_report(g, cp->server, NETVM_OK);
        c->acked[atomic_fetch_add(&c->nacked, 1)] = (uint8_t)cp->server;
        __atomic_fetch_add(&op->r->base.bytes_out, c->n * NV_GM_PAGE, __ATOMIC_RELAXED);
        __atomic_fetch_add(&op->r->base.writebacks, c->n, __ATOMIC_RELAXED);
        copy_settled(op);
        return NETVM_RPC_DONE;
    }
    /* another server is asked from the RPC worker, where issuing may wait
     * for a request slot; nothing changes before that */
    if (!o->deferred)
        return NETVM_RPC_DEFER;
    nv_gm_srv_report(g, cp->server, o->status);
    int expect = NETVM_OK;
    atomic_compare_exchange_strong(&op->status, &expect, o->status == NETVM_ERR_NOMEM ? NETVM_ERR_NOMEM : NETVM_ERR_PEER);
    if (!issue_copy(cp))
        copy_settled(op);
    return NETVM_RPC_DONE;
}

netvm_status_t nv_gm_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf, nv_gstore_done_fn done,
                              void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (!n || page >= r->npages || n > r->npages - page || !buf || !done)
        return NETVM_ERR_INVAL;
    raise_hi(r, page + n);
    uint64_t first_ext = page / NV_GM_EXTENT, last_ext = (page + n - 1) / NV_GM_EXTENT;
    int nchunks = (int)(last_ext - first_ext + 1), R = r->replicas;
    size_t sz = sizeof(struct put_op) + n * sizeof(uint64_t) + (size_t)nchunks * sizeof(struct put_chunk) +
                (size_t)nchunks * (size_t)R * sizeof(struct put_copy);
    struct put_op *op = calloc(1, sz);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->start = (uint64_t *)(op + 1);
    op->chunks = (struct put_chunk *)(op->start + n);
    op->copies = (struct put_copy *)(op->chunks + nchunks);
    op->r = r;
    op->page = page;
    op->n = n;
    op->buf = buf;
    op->done = done;
    op->arg = arg;
    op->nchunks = nchunks;
    atomic_init(&op->status, NETVM_OK);
    atomic_init(&op->pending, nchunks * R);
    for (uint64_t p = page; p < page + n; p++)
        op->start[p - page] = begin_page(r, p);
    for (int ci = 0; ci < nchunks; ci++) {
        struct put_chunk *c = &op->chunks[ci];
        uint64_t ext = first_ext + (uint64_t)ci, lo = ext * NV_GM_EXTENT, hi = lo + NV_GM_EXTENT;
        c->first = lo > page ? lo : page;
        c->n = (hi < page + n ? hi : page + n) - c->first;
        /* a shared region's pages are placed by its id: every sharer's
         * directory computes the same holders (store_shared.c) */
        c->norder = nv_gm_place(r->g, r->shared ? r->owner : r->region, ext, c->order, NV_GM_MAX_SERVERS);
    }
    return send_copies(op, nchunks, R);
}

/* Send every copy of the op's chunks; the op settles (done) when each is
 * answered or failed. */
static netvm_status_t send_copies(struct put_op *op, int nchunks, int R)
{
    /* every copy is counted in pending before the first is sent, since a
     * fast answer may settle the op while we still issue */
    int unsent = 0;
    for (int ci = 0; ci < nchunks; ci++)
        for (int k = 0; k < R; k++) {
            struct put_copy *cp = &op->copies[ci * R + k];
            cp->op = op;
            cp->c = &op->chunks[ci];
            cp->server = -1;
        }
    for (int i = 0; i < nchunks * R; i++)
        if (!issue_copy(&op->copies[i]))
            unsent++;
    if (unsent) {
        int expect = NETVM_OK;
        atomic_compare_exchange_strong(&op->status, &expect, NETVM_ERR_PEER);
        for (int i = 0; i < unsent; i++)
            copy_settled(op);
    }
    return NETVM_OK;
}

netvm_status_t nv_gm_store_vec_nb(struct nv_gstore *s, const uint64_t *pages, const void *const *src, uint64_t n,
                                  nv_gstore_done_fn done, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (!n || n > NV_GM_PUT_MAX || !pages || !src || !done)
        return NETVM_ERR_INVAL;
    for (uint64_t i = 0; i < n; i++)
        if (pages[i] >= r->npages || (i && pages[i] <= pages[i - 1]) || !src[i])
            return NETVM_ERR_INVAL;
    raise_hi(r, pages[n - 1] + 1);
    int R = r->replicas;
    size_t sz = sizeof(struct put_op) + n * (2 * sizeof(uint64_t) + sizeof(uint32_t) + sizeof(uint16_t)) +
                n * sizeof(struct put_chunk) + n * (size_t)R * sizeof(struct put_copy);
    struct put_op *op = calloc(1, sz);
    uint8_t *gather = op ? gather_get(r, n) : NULL;
    if (!gather) {
        free(op);
        return NETVM_ERR_NOMEM;
    }
    op->start = (uint64_t *)(op + 1);
    uint64_t *plist = op->start + n;
    op->chunks = (struct put_chunk *)(plist + n);
    op->copies = (struct put_copy *)(op->chunks + n);
    uint32_t *idx = (uint32_t *)(op->copies + n * (size_t)R);
    uint16_t *cid = (uint16_t *)(idx + n);
    memcpy(plist, pages, n * sizeof *plist);
    op->r = r;
    op->pages = plist;
    op->page = 0;
    op->n = n;
    op->gather = gather;
    op->done = done;
    op->arg = arg;
    /* group the pages by placement: each group goes to the same servers */
    int nchunks = 0, ci = 0;
    uint64_t ext = UINT64_MAX;
    for (uint64_t i = 0; i < n; i++) {
        if (pages[i] / NV_GM_EXTENT == ext) {   /* placed as the page before */
            op->chunks[ci].n++;
            cid[i] = (uint16_t)ci;
            continue;
        }
        ext = pages[i] / NV_GM_EXTENT;
        uint8_t order[NV_GM_MAX_SERVERS];
        int norder = nv_gm_place(r->g, r->shared ? r->owner : r->region, ext, order, NV_GM_MAX_SERVERS);
        ci = 0;
        while (ci < nchunks && !(op->chunks[ci].norder == norder &&
                                 !memcmp(op->chunks[ci].order, order, (size_t)norder)))
            ci++;
        if (ci == nchunks) {
            op->chunks[ci].norder = norder;
            memcpy(op->chunks[ci].order, order, (size_t)norder);
            nchunks++;
        }
        op->chunks[ci].n++;
        cid[i] = (uint16_t)ci;
    }
    /* each group's indexes and gathered payload, in page order */
    uint64_t at = 0;
    uint8_t *g = gather;
    for (int ci = 0; ci < nchunks; ci++) {
        struct put_chunk *c = &op->chunks[ci];
        c->idx = idx + at;
        c->gather = g;
        at += c->n;
        g += c->n * (sizeof(uint64_t) + NV_GM_PAGE);
        c->n = 0;   /* counted again as the pages are laid out */
    }
    for (uint64_t i = 0; i < n; i++) {
        struct put_chunk *c = &op->chunks[cid[i]];
        uint64_t j = c->n++;
        c->idx[j] = (uint32_t)i;
        memcpy(c->gather + j * sizeof(uint64_t), &pages[i], sizeof(uint64_t));
    }
    for (int ci = 0; ci < nchunks; ci++) {
        struct put_chunk *c = &op->chunks[ci];
        for (uint64_t j = 0; j < c->n; j++)
            memcpy(c->gather + c->n * sizeof(uint64_t) + j * NV_GM_PAGE, src[c->idx[j]], NV_GM_PAGE);
    }
    op->nchunks = nchunks;
    atomic_init(&op->status, NETVM_OK);
    atomic_init(&op->pending, nchunks * R);
    for (uint64_t i = 0; i < n; i++)
        op->start[i] = begin_page(r, pages[i]);
    return send_copies(op, nchunks, R);
}
