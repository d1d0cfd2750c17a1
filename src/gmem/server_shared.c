/* The memory server's named regions (proto.h SHARED_*, docs/gmem.md
 * "Shared regions"): their records, who has each open, the single-writer
 * rule, and the writer's sync, which tells every other sharer to drop its
 * copies of the pages written (NOTICE INVALIDATE) and answers the writer
 * once they all answered or left.
 *
 * The records are few (one per name in use) and guarded by one mutex;
 * every page call naming a shared id looks its record up under it. */
#include "gmem/server_int.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

static struct nv_gm_shared *find_locked(struct nv_gm_server *s, uint64_t id)
{
    struct nv_gm_shared *r = s->shared;
    while (r && r->id != id)
        r = r->next;
    return r;
}

static int has_peer(const struct nv_gm_shared *r, int peer)
{
    for (int i = 0; i < r->npeers; i++)
        if (r->peers[i] == peer)
            return 1;
    return 0;
}

static void drop_peer(struct nv_gm_shared *r, int peer)
{
    for (int i = 0; i < r->npeers; i++)
        if (r->peers[i] == peer) {
            r->peers[i] = r->peers[--r->npeers];
            break;
        }
    if (r->writer == peer)
        r->writer = -1;
}

netvm_status_t nv_gm_shared_caller(struct nv_gm_server *s, int peer, uint64_t id, int write,
                                   struct nv_gm_client **c, uint64_t *bound)
{
    netvm_status_t st = NETVM_OK;
    pthread_mutex_lock(&s->shared_lock);
    struct nv_gm_shared *r = find_locked(s, id);
    if (!r || !has_peer(r, peer))
        st = NETVM_ERR_KEY;
    else if (write && r->writer != peer && !r->cache)
        st = NETVM_ERR_RIGHTS;
    else {
        *c = r->pages;
        *bound = r->npages;
    }
    pthread_mutex_unlock(&s->shared_lock);
    return st;
}

void nv_gm_shared_peer_down(struct nv_gm_server *s, int peer)
{
    pthread_mutex_lock(&s->shared_lock);
    for (struct nv_gm_shared *r = s->shared; r; r = r->next)
        if (has_peer(r, peer)) {
            if (r->writer == peer)
                nv_info("memd: the writer of shared region '%s' left: the name is free for another", r->name);
            while (has_peer(r, peer))   /* a cache may be open more than once */
                drop_peer(r, peer);
        }
    pthread_mutex_unlock(&s->shared_lock);
}

void nv_gm_shared_stat(struct nv_gm_server *s, uint64_t *regions, uint64_t *pages)
{
    *regions = *pages = 0;
    pthread_mutex_lock(&s->shared_lock);
    for (struct nv_gm_shared *r = s->shared; r; r = r->next) {
        (*regions)++;
        *pages += atomic_load_explicit(&r->pages->pages, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->shared_lock);
}

void nv_gm_shared_fini(struct nv_gm_server *s)
{
    while (s->shared) {
        struct nv_gm_shared *r = s->shared;
        s->shared = r->next;
        free(r);   /* its page record is in s->clients, freed with them */
    }
}

/* The caller must be a client (its HELLO said so). */
static netvm_status_t client_caller(struct nv_gm_server *s, const netvm_rpc_call_t *call)
{
    struct nv_gm_bind b;
    if (atomic_load_explicit(&s->stopped, memory_order_relaxed))
        return NETVM_ERR_STATE;
    if (!nv_gm_bind_find(s, call->peer, &b))
        return NETVM_ERR_STATE;
    return b.role == NV_GM_ROLE_CLIENT ? NETVM_OK : NETVM_ERR_RIGHTS;
}

static netvm_status_t open_locked(struct nv_gm_server *s, const netvm_rpc_call_t *call, const char *name,
                                  size_t name_len, uint64_t *held)
{
    uint64_t id = call->args[0], npages = call->args[1], mode = call->args[2], hash = call->args[3],
             replicas = call->args[4];
    struct nv_gm_shared *r = find_locked(s, id);
    if (!r) {
        /* the name's page record: a client record no connection binds */
        struct nv_gm_client *c = nv_gm_client_get(s, id, 1);
        if (!c || !(r = calloc(1, sizeof *r)))
            return NETVM_ERR_NOMEM;
        r->id = id;
        r->npages = npages;
        r->place_hash = hash;
        r->replicas = replicas;
        memcpy(r->name, name, name_len);
        r->writer = -1;
        r->cache = mode == NV_GM_SHARED_CACHE;
        r->pages = c;
        r->next = s->shared;
        s->shared = r;
        nv_info("memd: shared region '%s' made: %llu pages, %llu replicas", r->name, (unsigned long long)npages,
                (unsigned long long)replicas);
    } else if (strlen(r->name) != name_len || memcmp(r->name, name, name_len)) {
        return NETVM_ERR_EXISTS;   /* two names with one hash */
    } else if (r->npages != npages || r->place_hash != hash || r->replicas != replicas ||
               r->cache != (mode == NV_GM_SHARED_CACHE)) {
        nv_warn("memd: shared region '%s' opened with %llu pages, %llu replicas and server set %016llx, but it "
                "has %llu pages, %llu replicas and server set %016llx: every sharer must name the same length, R and servers",
                r->name, (unsigned long long)npages, (unsigned long long)replicas, (unsigned long long)hash,
                (unsigned long long)r->npages, (unsigned long long)r->replicas, (unsigned long long)r->place_hash);
        return NETVM_ERR_STATE;
    }
    if (has_peer(r, call->peer) && !r->cache)
        return NETVM_ERR_EXISTS;   /* a client maps a name once (a cache's pages never change: any times) */
    if (mode == NV_GM_SHARED_WRITE && r->writer >= 0)
        return NETVM_ERR_BUSY;
    if (r->npeers == (int)NV_GM_SHARED_PEERS)
        return NETVM_ERR_NOMEM;
    r->peers[r->npeers++] = call->peer;
    if (mode == NV_GM_SHARED_WRITE)
        r->writer = call->peer;
    *held = atomic_load_explicit(&r->pages->pages, memory_order_relaxed);
    return NETVM_OK;
}

static int proc_open(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    netvm_status_t st = client_caller(s, call);
    if (st == NETVM_OK && (call->nargs < 5 || !(call->args[0] & NV_GM_SHARED_BIT) || !call->args[1] ||
                           (call->args[2] != NV_GM_SHARED_READ && call->args[2] != NV_GM_SHARED_WRITE &&
                            call->args[2] != NV_GM_SHARED_CACHE) ||
                           !call->len || call->len > NV_GM_NAME_MAX || !nv_log_printable(call->payload, call->len)))
        st = NETVM_ERR_INVAL;
    uint64_t held = 0;
    if (st == NETVM_OK) {
        pthread_mutex_lock(&s->shared_lock);
        st = open_locked(s, call, call->payload, call->len, &held);
        pthread_mutex_unlock(&s->shared_lock);
    }
    if (st != NETVM_OK)
        atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
    netvm_rpc_reply(ctx, &call->token, st, &held, st == NETVM_OK, NULL, 0);
    return NETVM_RPC_DONE;
}

static int proc_close(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    netvm_status_t st = client_caller(s, call);
    if (st == NETVM_OK && call->nargs < 1)
        st = NETVM_ERR_INVAL;
    if (st == NETVM_OK) {
        pthread_mutex_lock(&s->shared_lock);
        struct nv_gm_shared *r = find_locked(s, call->args[0]);
        if (r && has_peer(r, call->peer))
            drop_peer(r, call->peer);
        else
            st = NETVM_ERR_NOTFOUND;
        pthread_mutex_unlock(&s->shared_lock);
    }
    netvm_rpc_reply(ctx, &call->token, st, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

static int proc_remove(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    netvm_status_t st = client_caller(s, call);
    if (st == NETVM_OK && call->nargs < 1)
        st = NETVM_ERR_INVAL;
    struct nv_gm_shared *r = NULL;
    if (st == NETVM_OK) {
        pthread_mutex_lock(&s->shared_lock);
        struct nv_gm_shared **l = &s->shared;
        while (*l && (*l)->id != call->args[0])
            l = &(*l)->next;
        if (!*l)
            st = NETVM_ERR_NOTFOUND;
        else if ((*l)->npeers)
            st = NETVM_ERR_BUSY;
        else {
            r = *l;
            *l = r->next;
        }
        pthread_mutex_unlock(&s->shared_lock);
    }
    uint64_t freed = 0;
    if (r) {
        /* nobody has it open, and nobody can open it again under this
         * record: its pages go */
        freed = nv_gm_drop_range(s, r->pages, r->id, UINT64_MAX, 0, UINT64_MAX);
        nv_info("memd: shared region '%s' removed: %llu pages freed", r->name, (unsigned long long)freed);
        free(r);
    }
    netvm_rpc_reply(ctx, &call->token, st, &freed, st == NETVM_OK, NULL, 0);
    return NETVM_RPC_DONE;
}

/* --- the writer's sync ------------------------------------------------------ */

struct sync_op {
    netvm_am_token_t token;      /* the writer's call */
    _Atomic int      pending;    /* notices under way, + 1 while issuing */
    _Atomic int      failed;     /* a status: a reader not told for sure */
    uint64_t         told;
};

static void sync_part_done(netvm_ctx_t *ctx, struct sync_op *op)
{
    if (atomic_fetch_sub_explicit(&op->pending, 1, memory_order_acq_rel) != 1)
        return;
    uint64_t told = op->told;
    netvm_status_t st = (netvm_status_t)atomic_load(&op->failed);
    netvm_rpc_reply(ctx, &op->token, st, &told, 1, NULL, 0);
    free(op);
}

static int notice_done(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *o, void *arg)
{
    struct sync_op *op = arg;
    /* answered, or gone (PEER), or without the region (NOTFOUND: it
     * closed it): none holds an old copy. A reader that did not answer in
     * time, or could not be sent the notice (AGAIN: no request slot), may */
    if (o->status == NETVM_ERR_TIMEOUT || o->status == NETVM_ERR_AGAIN)
        atomic_store(&op->failed, (int)o->status);
    sync_part_done(ctx, op);
    return NETVM_RPC_DONE;
}

static int proc_sync(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg)
{
    struct nv_gm_server *s = arg;
    netvm_status_t st = client_caller(s, call);
    if (st == NETVM_OK && (call->nargs < 3 || call->len != (call->args[1] + 63) / 64 * 8))
        st = NETVM_ERR_INVAL;
    int peers[NV_GM_SHARED_PEERS], n = 0;
    if (st == NETVM_OK) {
        pthread_mutex_lock(&s->shared_lock);
        struct nv_gm_shared *r = find_locked(s, call->args[0]);
        if (!r || !has_peer(r, call->peer))
            st = NETVM_ERR_KEY;
        else if (r->writer != call->peer)
            st = NETVM_ERR_RIGHTS;
        else if (r->npages != call->args[1])
            st = NETVM_ERR_INVAL;
        else
            for (int i = 0; i < r->npeers; i++)
                if (r->peers[i] != call->peer)
                    peers[n++] = r->peers[i];
        pthread_mutex_unlock(&s->shared_lock);
    }
    struct sync_op *op = st == NETVM_OK ? calloc(1, sizeof *op) : NULL;
    if (st == NETVM_OK && !op)
        st = NETVM_ERR_NOMEM;
    if (st != NETVM_OK) {
        atomic_fetch_add_explicit(&s->refused, 1, memory_order_relaxed);
        netvm_rpc_reply(ctx, &call->token, st, NULL, 0, NULL, 0);
        return NETVM_RPC_DONE;
    }
    op->token = call->token;
    op->told = (uint64_t)n;
    atomic_init(&op->pending, n + 1);
    int timeout_ms = call->args[2] > 0 && call->args[2] < 3600000 ? (int)call->args[2] : 30000;
    uint64_t a[4] = { NV_GM_NOTICE_INVALIDATE, s->server_id, 0, call->args[0] };
    for (int i = 0; i < n; i++) {
        netvm_rpc_handle_t *h;
        if (netvm_rpc_begin(ctx, &h) != NETVM_OK) {
            /* no request slot: the reader cannot be told, the sync fails */
            atomic_store(&op->failed, (int)NETVM_ERR_NOMEM);
            sync_part_done(ctx, op);
            continue;
        }
        netvm_rpc_push(h, notice_done, op);
        if (nv_rpc_svc_issue(h, peers[i], nv_gm_k(NV_GM_NOTICE), a, 4, call->payload, call->len, NULL, 0,
                             timeout_ms) != NETVM_OK) {
            /* a peer already gone holds nothing */
            sync_part_done(ctx, op);
        }
        netvm_rpc_drop(h);
    }
    sync_part_done(ctx, op);
    return NETVM_RPC_DONE;
}

netvm_status_t nv_gm_shared_register(struct nv_gm_server *s)
{
    static const struct { unsigned op; netvm_rpc_proc_fn fn; } procs[] = {
        { NV_GM_SHARED_OPEN, proc_open },
        { NV_GM_SHARED_CLOSE, proc_close },
        { NV_GM_SHARED_SYNC, proc_sync },
        { NV_GM_SHARED_REMOVE, proc_remove },
    };
    for (size_t i = 0; i < sizeof procs / sizeof procs[0]; i++) {
        netvm_status_t st = nv_rpc_svc_register(s->ctx, nv_gm_k(procs[i].op), procs[i].fn, s);
        if (st != NETVM_OK)
            return st;
    }
    return NETVM_OK;
}
