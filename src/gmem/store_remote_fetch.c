/* Fetching a page: the directory names its holders, the first answering
 * one serves it (its reply lands in the caller's buffer), and a holder
 * that moved the page delegates the request to the server that took it,
 * which answers directly (GMS's 3-way getpage): the directory then learns
 * the new holder from who answered. A holder on this machine whose pool
 * this client reads directly (direct.h) is read first, with no request at
 * all; what its view does not show is asked as above. The blocking fetch
 * is the fault path: it allocates nothing and takes no lock. */
#include "gmem/store_remote.h"

#include <stdlib.h>
#include <string.h>

/* Holders of e in the order to try them: answering servers first, a
 * suspect one last. */
static int read_order(struct nv_gm_servers *g, uint64_t e, uint8_t *out)
{
    int n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < NV_GM_RMAX; i++) {
            unsigned x = nv_gm_e_holder(e, i);
            if (x == NV_GM_NO_SERVER || !nv_gm_srv_readable(g, (int)x))
                continue;
            int suspect = atomic_load(&g->srv[x].state) == NV_GM_SRV_SUSPECT;
            if (suspect == pass)
                out[n++] = (uint8_t)x;
        }
    return n;
}

/* An answer came from a server other than the one asked: the page moved
 * there; the directory says so from now on (unless it changed meanwhile). */
static void note_answer(struct nv_gstore_remote *r, uint64_t page, uint64_t e, int asked, int answered_peer)
{
    struct nv_gm_servers *g = r->g;
    if (answered_peer == g->srv[asked].peer || (e & NV_GM_E_M))
        return;
    int to = nv_gm_srv_by_peer(g, answered_peer);
    if (to < 0 || nv_gm_e_holds(e, (unsigned)to))
        return;
    uint8_t h[NV_GM_RMAX];
    for (int i = 0; i < NV_GM_RMAX; i++)
        h[i] = (uint8_t)(nv_gm_e_holder(e, i) == (unsigned)asked ? (unsigned)to : nv_gm_e_holder(e, i));
    nv_gm_dir_cas(r, page, e, nv_gm_e_with_holders(e, h));
}

static void count_in(struct nv_gstore_remote *r)
{
    __atomic_fetch_add(&r->base.bytes_in, NV_GM_PAGE, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->base.remote_fetches, 1, __ATOMIC_RELAXED);
}

/* Pages first + i (i < n, bit i of want) from the views of their holders
 * (order, nord of them): the bits of those now in buf. Not counted. */
static uint64_t view_pages(struct nv_gstore_remote *r, const uint8_t *order, int nord, uint64_t first, uint64_t n,
                           uint8_t *buf, uint64_t want)
{
    uint64_t got = 0;
    for (int i = 0; i < nord && got != want; i++)
        got |= nv_gm_srv_view_read(r->g, order[i], r->owner, r->region, first, n, buf, want & ~got);
    return got;
}

static void count_direct(struct nv_gstore_remote *r, uint64_t k)
{
    __atomic_fetch_add(&r->base.bytes_in, k * NV_GM_PAGE, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->base.remote_fetches, k, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->base.direct_fetches, k, __ATOMIC_RELAXED);
}

/* One page from its holders' views, counted: 1 when it is in buf. */
static int read_direct(struct nv_gstore_remote *r, const uint8_t *order, int nord, uint64_t page, void *buf)
{
    if (!view_pages(r, order, nord, page, 1, buf, 1))
        return 0;
    count_direct(r, 1);
    return 1;
}

netvm_status_t nv_gm_fetch(struct nv_gstore *s, uint64_t page, void *buf)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    struct nv_gm_servers *g = r->g;
    if (page >= r->npages)
        return NETVM_ERR_INVAL;
    /* a holder that no longer has the page (it was moved and the
     * forwarding dropped, or re-placed) means the directory changed under
     * us: read it again, a bounded number of times */
    for (int round = 0; round < 4; round++) {
        uint64_t e = atomic_load_explicit(&r->dir[page], memory_order_acquire);
        if (nv_gm_e_state(e) == NV_GM_PG_NONE)
            return NETVM_ERR_NOTFOUND;
        if (nv_gm_e_state(e) == NV_GM_PG_LOST)
            return NETVM_ERR_PEER;
        uint8_t order[NV_GM_RMAX];
        int n = read_order(g, e, order), notfound = 0;
        if (read_direct(r, order, n, page, buf))
            return NETVM_OK;
        for (int i = 0; i < n; i++) {
            int x = order[i];
            uint64_t args[3] = { r->owner, r->region, page };
            netvm_rpc_result_t res = { .peer = -1 };
            netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[x].peer, nv_gm_k(NV_GM_GET), args, 3, NULL, 0, buf,
                                                NV_GM_PAGE, r->timeout_ms, &res);
            st = nv_gm_get_status(st, res.peer);
            if (st == NETVM_OK && res.len != NV_GM_PAGE)
                st = NETVM_ERR_UNSUPPORTED;
            nv_gm_srv_report(g, x, st);
            if (st == NETVM_OK) {
                note_answer(r, page, e, x, res.peer);
                count_in(r);
                return NETVM_OK;
            }
            notfound += st == NETVM_ERR_NOTFOUND;
        }
        /* a shared region's directory names where a page would be, not
         * whether its writer ever stored it: held nowhere, it reads as
         * zeros (store_shared.c) */
        if (r->shared && n && notfound == n)
            return NETVM_ERR_NOTFOUND;
        if (atomic_load_explicit(&r->dir[page], memory_order_acquire) == e)
            break;
    }
    return NETVM_ERR_PEER;
}

/* --- without blocking ---------------------------------------------------- */

struct fetch_op {
    struct nv_gstore_remote *r;
    uint64_t page, e;
    void *buf;
    nv_gstore_done_fn done;
    void *arg;
    uint8_t order[NV_GM_RMAX];
    int n, next, asked;
};

static int fetch_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg);

/* Issue the GET to the next holder; 0 when none is left (op untouched). */
static int issue_next(struct fetch_op *op)
{
    struct nv_gm_servers *g = op->r->g;
    while (op->next < op->n) {
        int x = op->order[op->next++];
        if (!nv_gm_srv_readable(g, x))
            continue;
        netvm_rpc_handle_t *h;
        if (netvm_rpc_begin(g->ctx, &h) != NETVM_OK)
            return 0;
        netvm_rpc_push(h, fetch_cont, op);
        op->asked = x;
        uint64_t args[3] = { op->r->owner, op->r->region, op->page };
        if (nv_rpc_svc_issue(h, g->srv[x].peer, nv_gm_k(NV_GM_GET), args, 3, NULL, 0, op->buf, NV_GM_PAGE,
                             op->r->timeout_ms) != NETVM_OK) {
            netvm_rpc_drop(h);
            continue;
        }
        netvm_rpc_drop(h);   /* the continuation finishes the op */
        return 1;
    }
    return 0;
}

static void finish(struct fetch_op *op, netvm_status_t st)
{
    nv_gstore_done_fn done = op->done;
    void *arg = op->arg;
    free(op);
    done(arg, st);
}

static int fetch_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct fetch_op *op = arg;
    netvm_status_t st = nv_gm_get_status(o->status, o->res.peer);
    if (st == NETVM_OK && o->res.len != NV_GM_PAGE)
        st = NETVM_ERR_UNSUPPORTED;
    if (st == NETVM_OK) {
        nv_gm_srv_report(op->r->g, op->asked, st);
        note_answer(op->r, op->page, op->e, op->asked, o->res.peer);
        count_in(op->r);
        finish(op, NETVM_OK);
        return NETVM_RPC_DONE;
    }
    /* the next replica is asked from the RPC worker, where issuing may
     * wait for a request slot; nothing is changed before that */
    if (!o->deferred && op->next < op->n)
        return NETVM_RPC_DEFER;
    nv_gm_srv_report(op->r->g, op->asked, st);
    if (!issue_next(op))
        finish(op, NETVM_ERR_PEER);
    return NETVM_RPC_DONE;
}

netvm_status_t nv_gm_fetch_nb(struct nv_gstore *s, uint64_t page, void *buf, nv_gstore_done_fn done, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (page >= r->npages || !done)
        return NETVM_ERR_INVAL;
    uint64_t e = atomic_load_explicit(&r->dir[page], memory_order_acquire);
    if (nv_gm_e_state(e) == NV_GM_PG_NONE)
        return NETVM_ERR_NOTFOUND;
    if (nv_gm_e_state(e) == NV_GM_PG_LOST)
        return NETVM_ERR_PEER;
    uint8_t order[NV_GM_RMAX];
    int n = read_order(r->g, e, order);
    if (read_direct(r, order, n, page, buf)) {
        done(arg, NETVM_OK);
        return NETVM_OK;
    }
    struct fetch_op *op = malloc(sizeof *op);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->r = r;
    op->page = page;
    op->e = e;
    op->buf = buf;
    op->done = done;
    op->arg = arg;
    op->next = 0;
    op->n = n;
    memcpy(op->order, order, sizeof order);
    if (!issue_next(op)) {
        free(op);
        return NETVM_ERR_PEER;
    }
    return NETVM_OK;
}

/* --- runs of pages (read-ahead) -------------------------------------------
 * One NV_GM_GETN per run of consecutive pages whose directory entries name
 * the same holders (an extent's pages share them, and neighbouring extents
 * often do too), asked of the first holder in read order; the pages it did
 * not hold (moved, re-placed) and every page of a GETN that failed (a dead
 * server, an older server without GETN) are fetched one by one as
 * fetch_nb does, which tries the other replicas and follows moves. */

struct fetchn_op {
    struct nv_gstore_remote *r;
    uint64_t first;
    uint8_t *buf;
    nv_gstore_ndone_fn done;
    void *arg;
    _Atomic uint64_t got;
    _Atomic int parts;        /* calls under way, + 1 while issuing */
};

struct getn_part {
    struct fetchn_op *op;
    uint64_t first, n;        /* this run */
    int asked;
};

static void fetchn_part_done(struct fetchn_op *op)
{
    if (atomic_fetch_sub_explicit(&op->parts, 1, memory_order_acq_rel) != 1)
        return;
    nv_gstore_ndone_fn done = op->done;
    void *arg = op->arg;
    uint64_t got = atomic_load_explicit(&op->got, memory_order_acquire);
    free(op);
    done(arg, got);
}

static void single_done(void *arg, netvm_status_t st)
{
    struct getn_part *one = arg;   /* a part of one page */
    struct fetchn_op *op = one->op;
    if (st == NETVM_OK)
        atomic_fetch_or_explicit(&op->got, (uint64_t)1 << (one->first - op->first), memory_order_acq_rel);
    free(one);
    fetchn_part_done(op);
}

/* Fetch page (of op) alone; counted in op->parts while under way. */
static void fetch_single(struct fetchn_op *op, uint64_t page)
{
    struct getn_part *one = malloc(sizeof *one);
    if (!one)
        return;
    *one = (struct getn_part){ .op = op, .first = page, .n = 1, .asked = -1 };
    atomic_fetch_add_explicit(&op->parts, 1, memory_order_relaxed);
    if (nv_gm_fetch_nb(&op->r->base, page, op->buf + (page - op->first) * NV_GM_PAGE, single_done, one) !=
        NETVM_OK) {
        free(one);
        atomic_fetch_sub_explicit(&op->parts, 1, memory_order_relaxed);
    }
}

/* Pages of the run not in held, one by one. */
static void fetch_rest(struct getn_part *p, uint64_t held)
{
    for (uint64_t i = 0; i < p->n; i++)
        if (!(held & ((uint64_t)1 << i)))
            fetch_single(p->op, p->first + i);
}

static int getn_cont(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    (void)ctx;
    struct getn_part *p = arg;
    struct fetchn_op *op = p->op;
    uint64_t all = p->n == 64 ? UINT64_MAX : ((uint64_t)1 << p->n) - 1;
    netvm_status_t st = o->status;
    if (st == NETVM_OK && (o->res.len != p->n * NV_GM_PAGE || o->res.nargs < 1))
        st = NETVM_ERR_UNSUPPORTED;
    uint64_t held = st == NETVM_OK ? o->res.args[0] & all : 0;
    /* the rest is fetched from the RPC worker, where issuing may wait for
     * a request slot; nothing is changed before that */
    if (held != all && !o->deferred)
        return NETVM_RPC_DEFER;
    nv_gm_srv_report(op->r->g, p->asked, st);
    if (held) {
        uint64_t k = (uint64_t)__builtin_popcountll(held);
        __atomic_fetch_add(&op->r->base.bytes_in, k * NV_GM_PAGE, __ATOMIC_RELAXED);
        __atomic_fetch_add(&op->r->base.remote_fetches, k, __ATOMIC_RELAXED);
        atomic_fetch_or_explicit(&op->got, held << (p->first - op->first), memory_order_acq_rel);
    }
    /* a file cache's page the holder lacks is not cached: the caller reads
     * the file rather than ask every replica (store_gfile.c) */
    if (st != NETVM_OK || !op->r->shared || op->r->shared->mode != NV_GM_SHARED_CACHE)
        fetch_rest(p, held);
    free(p);
    fetchn_part_done(op);
    return NETVM_RPC_DONE;
}

/* Ask the run [first, first + n), whose holders are those of e, with one
 * GETN; one by one if it cannot be sent. */
static void issue_getn(struct fetchn_op *op, uint64_t first, uint64_t n, uint64_t e)
{
    struct nv_gm_servers *g = op->r->g;
    uint8_t order[NV_GM_RMAX];
    struct getn_part *p = malloc(sizeof *p);
    if (!p)
        return;
    *p = (struct getn_part){ .op = op, .first = first, .n = n, .asked = -1 };
    int nord = read_order(g, e, order);
    /* from the holders' views first: a run they show whole needs no
     * request. A run they show in part is asked whole as before, which
     * also keeps a GETN's order after a PUT still under way on the same
     * connection (a file cache's fill: store_gfile.c) */
    uint64_t all = n == 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
    if (view_pages(op->r, order, nord, first, n, op->buf + (first - op->first) * NV_GM_PAGE, all) == all) {
        count_direct(op->r, n);
        atomic_fetch_or_explicit(&op->got, all << (first - op->first), memory_order_acq_rel);
        free(p);
        return;
    }
    netvm_rpc_handle_t *h = NULL;
    if (n > 1 && nord > 0 && netvm_rpc_begin(g->ctx, &h) == NETVM_OK) {
        p->asked = order[0];
        netvm_rpc_push(h, getn_cont, p);
        atomic_fetch_add_explicit(&op->parts, 1, memory_order_relaxed);
        uint64_t args[4] = { op->r->owner, op->r->region, first, n };
        netvm_status_t st = nv_rpc_svc_issue(h, g->srv[p->asked].peer, nv_gm_k(NV_GM_GETN), args, 4, NULL, 0,
                                             op->buf + (first - op->first) * NV_GM_PAGE, n * NV_GM_PAGE,
                                             op->r->timeout_ms);
        netvm_rpc_drop(h);
        if (st == NETVM_OK)
            return;   /* getn_cont finishes the part */
        atomic_fetch_sub_explicit(&op->parts, 1, memory_order_relaxed);
    }
    fetch_rest(p, 0);
    free(p);
}

/* Whether e and f name the same servers, in any order (placement may
 * order an extent's holders differently from its neighbour's). */
static int same_holders(uint64_t e, uint64_t f)
{
    for (int i = 0; i < NV_GM_RMAX; i++) {
        unsigned a = nv_gm_e_holder(e, i), b = nv_gm_e_holder(f, i);
        if ((a != NV_GM_NO_SERVER && !nv_gm_e_holds(f, a)) || (b != NV_GM_NO_SERVER && !nv_gm_e_holds(e, b)))
            return 0;
    }
    return 1;
}

/* The pages from page on that form one run: stored, with the holders of
 * page's entry *e. 0 when page itself is not stored. */
static uint64_t run_at(struct nv_gstore_remote *r, uint64_t page, uint64_t end, uint64_t *e)
{
    *e = atomic_load_explicit(&r->dir[page], memory_order_acquire);
    if (nv_gm_e_state(*e) != NV_GM_PG_STORED)
        return 0;
    uint64_t q = page + 1;
    while (q < end) {
        uint64_t f = atomic_load_explicit(&r->dir[q], memory_order_acquire);
        if (nv_gm_e_state(f) != NV_GM_PG_STORED || !same_holders(*e, f))
            break;
        q++;
    }
    return q - page;
}

netvm_status_t nv_gm_fetchn_nb(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf,
                               nv_gstore_ndone_fn done, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (!n || n > NV_GSTORE_FETCHN_MAX || first >= r->npages || n > r->npages - first || !done)
        return NETVM_ERR_INVAL;
    struct fetchn_op *op = malloc(sizeof *op);
    if (!op)
        return NETVM_ERR_NOMEM;
    op->r = r;
    op->first = first;
    op->buf = buf;
    op->done = done;
    op->arg = arg;
    atomic_init(&op->got, 0);
    atomic_init(&op->parts, 1);
    for (uint64_t q = first; q < first + n;) {
        uint64_t e, k = run_at(r, q, first + n, &e);
        if (!k) {
            q++;          /* never stored or lost: not fetched, not in got */
            continue;
        }
        issue_getn(op, q, k, e);
        q += k;
    }
    fetchn_part_done(op);
    return NETVM_OK;
}
