/* Fetching a page: the directory names its holders, the first answering
 * one serves it (its reply lands in the caller's buffer), and a holder
 * that moved the page delegates the request to the server that took it,
 * which answers directly (GMS's 3-way getpage): the directory then learns
 * the new holder from who answered. The blocking fetch is the fault path:
 * it allocates nothing and takes no lock. */
#include "gmem/store_remote.h"

#include <stdlib.h>

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
        int n = read_order(g, e, order);
        for (int i = 0; i < n; i++) {
            int x = order[i];
            uint64_t args[3] = { g->client_id, r->region, page };
            netvm_rpc_result_t res;
            netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[x].peer, nv_gm_k(NV_GM_GET), args, 3, NULL, 0, buf,
                                                NV_GM_PAGE, r->timeout_ms, &res);
            if (st == NETVM_OK && res.len != NV_GM_PAGE)
                st = NETVM_ERR_UNSUPPORTED;
            nv_gm_srv_report(g, x, st);
            if (st == NETVM_OK) {
                note_answer(r, page, e, x, res.peer);
                count_in(r);
                return NETVM_OK;
            }
        }
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
        uint64_t args[3] = { g->client_id, op->r->region, op->page };
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
    netvm_status_t st = o->status;
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
    op->n = read_order(r->g, e, op->order);
    if (!issue_next(op)) {
        free(op);
        return NETVM_ERR_PEER;
    }
    return NETVM_OK;
}
