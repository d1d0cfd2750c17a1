/* Peers: a job's ranks, created at init, and processes connected later
 * (netvm_connect, or through a listener), created when they connect and
 * released when they leave. A peer id names one incarnation: the index of
 * its slot and a generation, so an id kept after its peer left names
 * nobody, even once the slot serves another peer.
 *
 * A connected peer is reference-counted: the table holds one reference
 * until the peer leaves, every import and every operation in flight holds
 * one. When the last goes, the peer's link state is released — not at once
 * (a link may be inside its own code for that peer, several frames up), but
 * at the start of the next progress pass, where no link code runs. Job
 * ranks live as long as the context and take no references. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

/* --- the uuid index: a reply token names its origin by endpoint id --------- */

struct uuid_map {
    struct nv_uuid_slot *v;
    uint32_t             cap, n;
};

static struct uuid_map *umap(netvm_ctx_t *ctx) { return (struct uuid_map *)(void *)&ctx->uuids; }

static uint32_t uhash(uint64_t u, uint32_t cap)
{
    u ^= u >> 33;
    u *= 0xff51afd7ed558ccdull;
    u ^= u >> 33;
    return (uint32_t)u & (cap - 1);
}

static int umap_grow(struct uuid_map *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 64;
    struct nv_uuid_slot *v = calloc(cap, sizeof *v);
    if (!v)
        return -1;
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->v[i].uuid) {
            uint32_t h = uhash(m->v[i].uuid, cap);
            while (v[h].uuid)
                h = (h + 1) & (cap - 1);
            v[h] = m->v[i];
        }
    free(m->v);
    m->v = v;
    m->cap = cap;
    return 0;
}

static void umap_put(struct uuid_map *m, uint64_t uuid, uint32_t index)
{
    if (!uuid || ((m->n + 1) * 2 > m->cap && umap_grow(m) != 0))
        return;   /* without memory the peer is only unreachable by token */
    uint32_t h = uhash(uuid, m->cap);
    while (m->v[h].uuid && m->v[h].uuid != uuid)
        h = (h + 1) & (m->cap - 1);
    if (!m->v[h].uuid)
        m->n++;
    m->v[h].uuid = uuid;
    m->v[h].index = index;
}

static int umap_get(const struct uuid_map *m, uint64_t uuid, uint32_t *index)
{
    if (!m->cap || !uuid)
        return -1;
    for (uint32_t h = uhash(uuid, m->cap); m->v[h].uuid; h = (h + 1) & (m->cap - 1))
        if (m->v[h].uuid == uuid) {
            *index = m->v[h].index;
            return 0;
        }
    return -1;
}

/* Linear probing deletion without tombstones: shift later entries back. */
static void umap_del(struct uuid_map *m, uint64_t uuid)
{
    if (!m->cap || !uuid)
        return;
    uint32_t h = uhash(uuid, m->cap);
    while (m->v[h].uuid && m->v[h].uuid != uuid)
        h = (h + 1) & (m->cap - 1);
    if (!m->v[h].uuid)
        return;
    m->v[h].uuid = 0;
    m->n--;
    for (uint32_t j = (h + 1) & (m->cap - 1); m->v[j].uuid; j = (j + 1) & (m->cap - 1)) {
        struct nv_uuid_slot s = m->v[j];
        m->v[j].uuid = 0;
        m->n--;
        umap_put(m, s.uuid, s.index);
    }
}

/* --- the table ---------------------------------------------------------------- */

struct nv_peer *nv_peer_slot(netvm_ctx_t *ctx, uint32_t index)
{
    struct nv_peer *_Atomic *chunk = ctx->peer_chunk[index / NV_PEER_CHUNK];
    return chunk ? atomic_load_explicit(&chunk[index % NV_PEER_CHUNK], memory_order_acquire) : NULL;
}

static netvm_status_t place(netvm_ctx_t *ctx, uint32_t index, struct nv_peer *p)
{
    uint32_t c = index / NV_PEER_CHUNK;
    if (!ctx->peer_chunk[c]) {
        ctx->peer_chunk[c] = calloc(NV_PEER_CHUNK, sizeof *ctx->peer_chunk[c]);
        if (!ctx->peer_chunk[c])
            return NETVM_ERR_NOMEM;
    }
    atomic_store_explicit(&ctx->peer_chunk[c][index % NV_PEER_CHUNK], p, memory_order_release);
    return NETVM_OK;
}

netvm_status_t nv_peers_init(netvm_ctx_t *ctx)
{
    pthread_mutex_init(&ctx->peer_lock, NULL);
    ctx->peer_free = calloc(64, sizeof *ctx->peer_free);
    if (!ctx->peer_free)
        return NETVM_ERR_NOMEM;
    ctx->peer_free_cap = 64;
    for (int r = 0; r < ctx->size; r++) {
        struct nv_peer *p = calloc(1, sizeof *p);
        if (!p || place(ctx, (uint32_t)r, p) != NETVM_OK) {
            free(p);
            return NETVM_ERR_NOMEM;
        }
        p->ctx = ctx;
        p->is_rank = 1;
        p->lp.id = r;
        atomic_store(&p->refs, 1);
        atomic_store(&p->am_credits, (int)ctx->am_credits_init);
    }
    ctx->peer_high = (uint32_t)ctx->size;
    return NETVM_OK;
}

static void free_link_state(struct nv_peer *p)
{
    if (p->lp.link && p->lp.link->ops->peer_free)
        p->lp.link->ops->peer_free(p->lp.link, &p->lp);
    p->lp.link = NULL;
    p->lp.conn = NULL;
}

/* Free what released peers kept (the start of a progress pass, finalize). */
static void reap(netvm_ctx_t *ctx)
{
    if (!__atomic_load_n(&ctx->grave, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&ctx->peer_lock);
    struct nv_peer *p = ctx->grave;
    ctx->grave = NULL;
    pthread_mutex_unlock(&ctx->peer_lock);
    while (p) {
        struct nv_peer *next = p->grave_next;
        free_link_state(p);
        uint32_t idx = NV_PEER_IDX(p->lp.id);
        pthread_mutex_lock(&ctx->peer_lock);
        if (ctx->peer_free_len == ctx->peer_free_cap) {
            uint32_t cap = ctx->peer_free_cap * 2;
            uint32_t *f = calloc(cap, sizeof *f);
            if (f) {
                for (uint32_t i = 0; i < ctx->peer_free_len; i++)
                    f[i] = ctx->peer_free[(ctx->peer_free_head + i) % ctx->peer_free_cap];
                free(ctx->peer_free);
                ctx->peer_free = f;
                ctx->peer_free_head = 0;
                ctx->peer_free_cap = cap;
            }
        }
        /* without memory for the list the slot is simply not reused */
        if (ctx->peer_free_len < ctx->peer_free_cap) {
            ctx->peer_free[(ctx->peer_free_head + ctx->peer_free_len) % ctx->peer_free_cap] = idx;
            ctx->peer_free_len++;
        }
        pthread_mutex_unlock(&ctx->peer_lock);
        p = next;
    }
}

void nv_peers_reap(netvm_ctx_t *ctx) { reap(ctx); }

void nv_peers_bye(netvm_ctx_t *ctx)
{
    for (int i = 0; i < ctx->size; i++) {
        struct nv_peer *p = nv_peer_slot(ctx, (uint32_t)i);
        if (p && p->lp.link && !atomic_load(&p->dead))
            p->lp.link->ops->peer_close(p->lp.link, &p->lp, 1);
    }
}

void nv_peers_fini(netvm_ctx_t *ctx)
{
    if (!ctx->peer_free)
        return;
    reap(ctx);
    for (uint32_t c = 0; c < sizeof ctx->peer_chunk / sizeof ctx->peer_chunk[0]; c++) {
        if (!ctx->peer_chunk[c])
            continue;
        for (uint32_t i = 0; i < NV_PEER_CHUNK; i++) {
            struct nv_peer *p = ctx->peer_chunk[c][i];
            if (p && p->lp.link)
                free_link_state(p);
            free(p);
        }
        free(ctx->peer_chunk[c]);
        ctx->peer_chunk[c] = NULL;
    }
    free(ctx->uuids.v);
    ctx->uuids.v = NULL;
    free(ctx->peer_free);
    ctx->peer_free = NULL;
    pthread_mutex_destroy(&ctx->peer_lock);
}

void nv_peer_ref(struct nv_peer *p)
{
    if (!p->is_rank)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
}

void nv_peer_put(struct nv_peer *p)
{
    if (p->is_rank)
        return;
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    /* the last reference: to the grave, freed at the next pass */
    netvm_ctx_t *ctx = p->ctx;
    pthread_mutex_lock(&ctx->peer_lock);
    p->grave_next = ctx->grave;
    __atomic_store_n(&ctx->grave, p, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->peer_lock);
}

netvm_status_t nv_peer_get(netvm_ctx_t *ctx, int id, struct nv_peer **out)
{
    *out = NULL;
    if (!ctx || id < 0)
        return NETVM_ERR_RANK;
    uint32_t idx = NV_PEER_IDX(id);
    if (idx >= __atomic_load_n(&ctx->peer_high, __ATOMIC_ACQUIRE))
        return NETVM_ERR_RANK;
    struct nv_peer *p = nv_peer_slot(ctx, idx);
    if (!p)
        return NETVM_ERR_RANK;
    /* (atomic: a fresh slot is placed before nv_peer_new fills it in; its
     * refs are 0 until then, which sends this reader away below) */
    if (__atomic_load_n(&p->is_rank, __ATOMIC_RELAXED)) {
        if (NV_PEER_GEN(id))
            return NETVM_ERR_RANK;
        *out = p;
        return NETVM_OK;
    }
    uint32_t n = atomic_load_explicit(&p->refs, memory_order_relaxed);
    do {
        if (!n)
            return NETVM_ERR_PEER;   /* released, not yet in use again */
    } while (!atomic_compare_exchange_weak_explicit(&p->refs, &n, n + 1, memory_order_acquire,
                                                    memory_order_relaxed));
    int cur = __atomic_load_n(&p->lp.id, __ATOMIC_ACQUIRE);
    if (cur != id || atomic_load(&p->gone)) {
        nv_peer_put(p);
        /* an earlier incarnation: it existed and left */
        return NV_PEER_GEN(id) <= NV_PEER_GEN(cur) || cur == id ? NETVM_ERR_PEER : NETVM_ERR_RANK;
    }
    *out = p;
    return NETVM_OK;
}

netvm_status_t nv_peer_new(netvm_ctx_t *ctx, struct nv_peer **out)
{
    pthread_mutex_lock(&ctx->peer_lock);
    uint32_t idx;
    if (ctx->peer_free_len) {
        idx = ctx->peer_free[ctx->peer_free_head];
        ctx->peer_free_head = (ctx->peer_free_head + 1) % ctx->peer_free_cap;
        ctx->peer_free_len--;
    } else if (ctx->peer_high < (1u << NV_PEER_IDX_BITS)) {
        idx = ctx->peer_high;
    } else {
        pthread_mutex_unlock(&ctx->peer_lock);
        return NETVM_ERR_NOMEM;
    }
    struct nv_peer *p = nv_peer_slot(ctx, idx);
    int fresh = !p;
    if (fresh) {
        p = calloc(1, sizeof *p);
        if (!p || place(ctx, idx, p) != NETVM_OK) {
            free(p);
            pthread_mutex_unlock(&ctx->peer_lock);
            return NETVM_ERR_NOMEM;
        }
    }
    uint32_t gen = fresh ? 1 : NV_PEER_GEN(p->lp.id) + 1;
    if (gen > NV_PEER_MAX_GEN)
        gen = 1;
    p->ctx = ctx;
    __atomic_store_n(&p->is_rank, 0, __ATOMIC_RELAXED);
    memset(&p->lp, 0, sizeof p->lp);
    atomic_store(&p->outstanding, 0);
    atomic_store(&p->dead, 0);
    atomic_store(&p->gone, 0);
    p->graceful = 0;
    atomic_store(&p->async_err, 0);
    p->uuid = 0;
    p->via = NULL;
    p->grave_next = NULL;
    atomic_store(&p->am_credits, (int)ctx->am_credits_init);
    atomic_store(&p->am_owed, 0);
    /* the progress thread's look for deferred messages reads this of
     * every slot without the lock (am_rx.c, nv_am_run_deferred) */
    __atomic_store_n(&p->deferred, NULL, __ATOMIC_RELAXED);
    p->deferred_tail = NULL;
    p->ndeferred = 0;
    __atomic_store_n(&p->lp.id, (int)(gen << NV_PEER_IDX_BITS | idx), __ATOMIC_RELEASE);
    atomic_store_explicit(&p->refs, 1, memory_order_release);
    if (fresh)
        __atomic_store_n(&ctx->peer_high, idx + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->peer_lock);
    atomic_fetch_add(&ctx->npeers_connected, 1);
    *out = p;
    return NETVM_OK;
}

static unsigned hint_slot(uint64_t uuid) { return (unsigned)(uuid ^ uuid >> 32) & 63; }

void nv_peer_set_uuid(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t uuid)
{
    pthread_mutex_lock(&ctx->peer_lock);
    p->uuid = uuid;
    umap_put(umap(ctx), uuid, NV_PEER_IDX(p->lp.id));
    unsigned h = hint_slot(uuid);
    atomic_store_explicit(&ctx->uuid_hint[h].id, p->lp.id, memory_order_relaxed);
    atomic_store_explicit(&ctx->uuid_hint[h].uuid, uuid, memory_order_release);
    pthread_mutex_unlock(&ctx->peer_lock);
}

/* The peer with this id, taken, if it is the one with that uuid (the id
 * may come from a stale or torn hint, or have been reused). */
static struct nv_peer *get_if_uuid(netvm_ctx_t *ctx, int id, uint64_t uuid)
{
    struct nv_peer *got;
    if (nv_peer_get(ctx, id, &got) != NETVM_OK)
        return NULL;
    if (got->uuid != uuid) {
        nv_peer_put(got);
        return NULL;
    }
    if (got->is_rank)
        nv_peer_ref(got);
    return got;
}

struct nv_peer *nv_peer_by_uuid(netvm_ctx_t *ctx, uint64_t uuid)
{
    unsigned h = hint_slot(uuid);
    if (atomic_load_explicit(&ctx->uuid_hint[h].uuid, memory_order_acquire) == uuid) {
        struct nv_peer *got =
            get_if_uuid(ctx, atomic_load_explicit(&ctx->uuid_hint[h].id, memory_order_relaxed), uuid);
        if (got)
            return got;
    }
    uint32_t idx;
    pthread_mutex_lock(&ctx->peer_lock);
    int found = umap_get(umap(ctx), uuid, &idx);
    pthread_mutex_unlock(&ctx->peer_lock);
    if (found != 0)
        return NULL;
    struct nv_peer *p = nv_peer_slot(ctx, idx);
    if (!p)
        return NULL;
    return get_if_uuid(ctx, __atomic_load_n(&p->lp.id, __ATOMIC_ACQUIRE), uuid);
}

void nv_peer_down(netvm_ctx_t *ctx, struct nv_peer *p, int graceful)
{
    if (atomic_exchange(&p->dead, 1))
        return;
    p->graceful = graceful;
    int id = nv_peer_id(p);
    if (p->is_rank)
        nv_info("rank %d %s", id, graceful ? "finished" : "is gone");
    else
        nv_info("peer %d %s", id, graceful ? "left" : "is gone");
    /* nothing more will come from it: fail what waits on it */
    for (uint32_t i = 0; i < ctx->nreqs; i++) {
        struct netvm_req *r = &ctx->reqs[i];
        uint32_t s = atomic_load(&r->state);
        /* (an answer being written ends too: nothing more comes; one in
         * setup is its issuer's: nv_req_launch sees the death) */
        if ((s & 0xff) == NV_REQ_PENDING && !(s & (NV_REQ_FINISHING | NV_REQ_SETUP)) &&
            atomic_load(&r->peer_id) == id)
            nv_req_finish_state(r, s, NETVM_ERR_PEER, 0);   /* that use only */
    }
    nv_am_peer_down(ctx, p);
    nv_regc_peer_down(ctx, p);   /* its pins here go back */
    if (p->is_rank)
        return;
    nv_peer_gone(ctx, p, 1);
}

void nv_peer_gone(netvm_ctx_t *ctx, struct nv_peer *p, int event)
{
    if (atomic_exchange(&p->gone, 1))
        return;
    pthread_mutex_lock(&ctx->peer_lock);
    if (p->uuid)
        umap_del(umap(ctx), p->uuid);
    pthread_mutex_unlock(&ctx->peer_lock);
    atomic_fetch_sub(&ctx->npeers_connected, 1);
    if (p->via)
        nv_listener_peer_left(p->via);
    p->via = NULL;
    /* last: whoever takes the event sees the peer gone everywhere (its
     * listener no longer counts it) */
    if (event) {
        struct nv_ep_rec e = { .type = NETVM_EV_PEER_DOWN, .rank = nv_peer_id(p),
                               .status = p->graceful ? NETVM_OK : NETVM_ERR_PEER };
        nv_evq_post_local(ctx, &e);
    }
    nv_peer_put(p);   /* the table's */
}
