/* A shared (named) region's store: the remote store's fetch and store
 * paths on pages keyed by the name's id, opened on every server of the
 * context's set (proto.h SHARED_OPEN), with the coherence of docs/gmem.md
 * "Shared regions": one writer, readers that drop the pages a writer's
 * sync names (NOTICE INVALIDATE) before the sync returns.
 *
 * Placement is rendezvous hashing of (shared id, extent) over the servers'
 * ids, so every sharer naming the same servers computes the same holders.
 * Each server's record keeps a hash of the server set and R, and refuses a
 * sharer whose differ. A sharer's directory starts with every page STORED
 * on its placement: whether the writer ever stored a page is known only
 * to the servers (a page held by none reads as zeros, store_remote_fetch.c).
 *
 * Not done for shared regions (documented): repair after a server's death
 * (readers read the surviving replica; the monitor does not restore R),
 * moves when a server drains or is added or removed. */
#include "gmem/store_remote.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t nv_gm_shared_id(const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull;   /* FNV-1a, then mixed */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return mix64(h) | NV_GM_SHARED_BIT;
}

/* The server set as placement sees it: a hash of the sorted server ids. */
static uint64_t place_hash(struct nv_gm_servers *g)
{
    uint64_t ids[NV_GM_MAX_SERVERS];
    int n = 0, all = atomic_load_explicit(&g->nservers, memory_order_acquire);
    for (int i = 0; i < all; i++)
        if (nv_gm_srv_placeable(g, i))
            ids[n++] = g->srv[i].id;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j - 1] > ids[j]; j--) {
            uint64_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
    uint64_t h = 0x51ed270b27a3c7f5ull ^ (uint64_t)n;
    for (int i = 0; i < n; i++)
        h = mix64(h ^ ids[i]);
    return h;
}

static struct nv_gm_shared_store *sh_of(struct nv_gstore *s)
{
    return ((struct nv_gstore_remote *)s)->shared;
}

static void mark(struct nv_gstore_remote *r, uint64_t first, uint64_t n)
{
    for (uint64_t p = first; p < first + n && p < r->npages; p++)
        atomic_fetch_or_explicit(&r->shared->written[p / 64], 1ull << (p % 64), memory_order_relaxed);
}

netvm_status_t nv_gm_sh_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                                  nv_gstore_done_fn done, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (r->shared->mode == NV_GM_SHARED_READ)
        return NETVM_ERR_RIGHTS;   /* a reader's pages are never dirty: its mapping is read-only */
    /* marked when issued: sync writes back and waits before it collects
     * (a cache's pages never change: nothing to tell) */
    if (r->shared->mode == NV_GM_SHARED_WRITE)
        mark(r, page, n);
    return nv_gm_store_nb(s, page, n, buf, done, arg);
}

static netvm_status_t sh_store_vec_nb(struct nv_gstore *s, const uint64_t *pages, const void *const *src, uint64_t n,
                                      nv_gstore_done_fn done, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    if (r->shared->mode == NV_GM_SHARED_READ)
        return NETVM_ERR_RIGHTS;
    if (r->shared->mode == NV_GM_SHARED_WRITE && pages)
        for (uint64_t i = 0; i < n; i++)
            mark(r, pages[i], 1);
    return nv_gm_store_vec_nb(s, pages, src, n, done, arg);
}

void nv_gm_sh_discard(struct nv_gstore *s, uint64_t first, uint64_t n)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    /* a reader's discard leaves the servers' pages alone: its next access
     * fetches them again (the directory is not changed) */
    if (r->shared->mode != NV_GM_SHARED_WRITE)
        return;
    mark(r, first, n);
    nv_gm_discard(s, first, n);
}

int nv_gm_sh_has(struct nv_gstore *s, uint64_t page) { return nv_gm_has(s, page); }

/* Tell every server this client no longer maps the name. */
static void close_at(struct nv_gstore_remote *r, int upto)
{
    struct nv_gm_servers *g = r->g;
    uint64_t a[1] = { r->owner };
    for (int i = 0; i < upto; i++) {
        int st = atomic_load(&g->srv[i].state);
        if (st == NV_GM_SRV_REMOVED || st == NV_GM_SRV_DEAD)
            continue;
        nv_rpc_svc_call(g->ctx, g->srv[i].peer, nv_gm_k(NV_GM_SHARED_CLOSE), a, 1, NULL, 0, NULL, 0, r->timeout_ms,
                        NULL);
    }
}

void nv_gm_sh_close(struct nv_gstore *s)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    struct nv_gm_servers *g = r->g;
    /* a cache's fills complete on their own (store_gfile.c) and use the
     * directory until then: each ends (stored, refused or timed out) */
    while (atomic_load_explicit(&r->shared->filling, memory_order_acquire)) {
        struct timespec t = { 0, 100000 };
        nanosleep(&t, NULL);
    }
    pthread_mutex_lock(&g->lock);
    for (struct nv_gstore_remote **l = &g->shared; *l; l = &(*l)->shared->next)
        if (*l == r) {
            *l = r->shared->next;
            break;
        }
    pthread_mutex_unlock(&g->lock);
    /* the pages stay on the servers: only a remove frees them */
    close_at(r, atomic_load_explicit(&g->nservers, memory_order_acquire));
    for (uint64_t p = 0; p < r->npages; p++)
        nv_gm_dir_cas(r, p, atomic_load(&r->dir[p]), 0);
    free(r->shared->written);
    free(r->shared);
    free((void *)r->dir);
    nv_gm_put_cache_free(r);
    free(r);
}

static const struct nv_gstore_ops shared_ops = {
    .has = nv_gm_sh_has,
    .fetch = nv_gm_fetch,
    .fetch_nb = nv_gm_fetch_nb,
    .fetchn_nb = nv_gm_fetchn_nb,
    .store_nb = nv_gm_sh_store_nb,
    .store_vec_nb = sh_store_vec_nb,
    .discard = nv_gm_sh_discard,
    .health = nv_gm_health,
    .close = nv_gm_sh_close,
};

static netvm_status_t open_everywhere(struct nv_gstore_remote *r, uint64_t hash)
{
    struct nv_gm_servers *g = r->g;
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
    uint64_t a[5] = { r->owner, r->npages, (uint64_t)r->shared->mode, hash, (uint64_t)r->replicas };
    for (int i = 0; i < n; i++) {
        if (!nv_gm_srv_placeable(g, i))
            continue;
        netvm_status_t st = nv_rpc_svc_call(g->ctx, g->srv[i].peer, nv_gm_k(NV_GM_SHARED_OPEN), a, 5,
                                            r->shared->name, strlen(r->shared->name), NULL, 0, r->timeout_ms, NULL);
        if (st != NETVM_OK) {
            if (st == NETVM_ERR_BUSY)
                nv_info("gmem: shared region '%s' already has a writer", r->shared->name);
            else if (st == NETVM_ERR_STATE)
                nv_error("gmem: shared region '%s' exists with another length, R or set of servers (server %s "
                         "refused it): every sharer must name the same servers and length",
                         r->shared->name, g->srv[i].addr);
            else
                nv_error("gmem: server %s refused to open shared region '%s': %s", g->srv[i].addr,
                         r->shared->name, netvm_strerror(st));
            close_at(r, i);
            return st;
        }
    }
    return NETVM_OK;
}

netvm_status_t nv_gstore_shared_open(netvm_ctx_t *ctx, const char *name, uint64_t npages, int mode,
                                     const netvm_gmem_opts_t *opts, struct nv_gstore **sp)
{
    return nv_gstore_cache_open(ctx, name, npages, mode, NULL, opts, sp);
}

netvm_status_t nv_gstore_cache_open(netvm_ctx_t *ctx, const char *name, uint64_t npages, int mode,
                                    const struct nv_gm_cache_src *src, const netvm_gmem_opts_t *opts,
                                    struct nv_gstore **sp)
{
    *sp = NULL;
    if (!ctx || !npages || !name || !*name || strlen(name) > NV_GM_NAME_MAX ||
        (mode != NV_GM_SHARED_READ && mode != NV_GM_SHARED_WRITE && mode != NV_GM_SHARED_CACHE) ||
        (mode == NV_GM_SHARED_CACHE) != (src != NULL))
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    struct nv_gm_servers *g = nv_gm_servers_get(ctx, opts, &st);
    if (!g)
        return st;
    int replicas;
    if ((st = nv_gm_pick_replicas(g, opts, npages, &replicas)) != NETVM_OK)
        return st;
    struct nv_gstore_remote *r = calloc(1, sizeof *r);
    struct nv_gm_shared_store *sh = calloc(1, sizeof *sh);
    if (!r || !sh || !(r->dir = malloc(npages * sizeof *r->dir)) ||
        !(sh->written = calloc((npages + 63) / 64, sizeof *sh->written))) {
        if (r)
            free((void *)r->dir);
        free(r);
        free(sh);
        return NETVM_ERR_NOMEM;
    }
    sh->mode = mode;
    if (src)
        sh->src = *src;
    strcpy(sh->name, name);
    r->base.ops = src ? &nv_gm_cache_ops : &shared_ops;
    r->base.shared = mode;
    r->g = g;
    r->shared = sh;
    r->owner = nv_gm_shared_id(name);
    r->region = 0;
    r->npages = npages;
    atomic_init(&r->hi, npages);   /* every page is stored: the whole-directory walks cover them all */
    r->replicas = replicas;
    r->timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : g->timeout_ms;
    /* every page where placement puts it (the header says why) */
    for (uint64_t p = 0; p < npages; p++) {
        uint8_t order[NV_GM_RMAX], h[NV_GM_RMAX];
        int k = nv_gm_place(g, r->owner, p / NV_GM_EXTENT, order, replicas);
        for (int i = 0; i < NV_GM_RMAX; i++)
            h[i] = i < k ? order[i] : NV_GM_NO_SERVER;
        atomic_init(&r->dir[p], 0);
        nv_gm_dir_cas(r, p, 0, nv_gm_e_with_holders(NV_GM_PG_STORED, h));
    }
    if ((st = open_everywhere(r, place_hash(g))) != NETVM_OK) {
        for (uint64_t p = 0; p < npages; p++)
            nv_gm_dir_cas(r, p, atomic_load(&r->dir[p]), 0);
        free(sh->written);
        free(sh);
        free((void *)r->dir);
        free(r);
        return st;
    }
    pthread_mutex_lock(&g->lock);
    sh->next = g->shared;
    g->shared = r;
    pthread_mutex_unlock(&g->lock);
    *sp = &r->base;
    return NETVM_OK;
}

void nv_gstore_shared_hook(struct nv_gstore *s, nv_gstore_inval_fn fn, void *arg)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    pthread_mutex_lock(&r->g->lock);
    r->shared->inval = fn;
    r->shared->inval_arg = arg;
    pthread_mutex_unlock(&r->g->lock);
}

/* An INVALIDATE notice kept until the pages fetched before it are out. */
struct nv_gm_inval_wait {
    struct nv_gm_inval_wait *next;
    netvm_am_token_t         token;
    uint64_t                 id;
    size_t                   len;
    unsigned char            bits[];
};

/* Run fn over the runs of set bits; the sum of what it returns. */
static uint64_t each_run(struct nv_gstore_remote *r, const unsigned char *b, int drop)
{
    uint64_t busy = 0;
    for (uint64_t p = 0; p < r->npages;) {
        if (!(b[p / 8] >> (p % 8) & 1)) {
            p++;
            continue;
        }
        uint64_t first = p;
        while (p < r->npages && (b[p / 8] >> (p % 8) & 1))
            p++;
        busy += r->shared->inval(r->shared->inval_arg, first, p - first, drop);
    }
    return busy;
}

static struct nv_gstore_remote *shared_by_id(struct nv_gm_servers *g, uint64_t id)
{
    for (struct nv_gstore_remote *r = g->shared; r; r = r->shared->next)
        if (r->owner == id)
            return r;
    return NULL;
}

int nv_gm_shared_invalidate(struct nv_gm_servers *g, const netvm_am_token_t *token, uint64_t id,
                            const void *bitmap, size_t len, netvm_status_t *st)
{
    pthread_mutex_lock(&g->lock);
    struct nv_gstore_remote *r = shared_by_id(g, id);
    *st = !r ? NETVM_ERR_NOTFOUND : len != (r->npages + 63) / 64 * 8 ? NETVM_ERR_INVAL : NETVM_OK;
    if (*st != NETVM_OK || !r->shared->inval || !each_run(r, bitmap, 1)) {
        pthread_mutex_unlock(&g->lock);
        return 1;
    }
    struct nv_gm_inval_wait *w = malloc(sizeof *w + len);
    if (!w) {
        /* answered now: the pages in flight still leave when placed, and
         * only a read in that moment could see their old contents */
        pthread_mutex_unlock(&g->lock);
        return 1;
    }
    w->token = *token;
    w->id = id;
    w->len = len;
    memcpy(w->bits, bitmap, len);
    w->next = g->inval_waits;
    g->inval_waits = w;
    pthread_mutex_unlock(&g->lock);
    return 0;
}

int nv_gm_shared_answer_waits(struct nv_gm_servers *g, int all)
{
    pthread_mutex_lock(&g->lock);
    struct nv_gm_inval_wait **l = &g->inval_waits, *done = NULL;
    while (*l) {
        struct nv_gm_inval_wait *w = *l;
        struct nv_gstore_remote *r = shared_by_id(g, w->id);
        /* a region closed meanwhile holds no page of it any more */
        if (all || !r || !r->shared->inval || !each_run(r, w->bits, 0)) {
            *l = w->next;
            w->next = done;
            done = w;
        } else {
            l = &w->next;
        }
    }
    int left = g->inval_waits != NULL;
    pthread_mutex_unlock(&g->lock);
    while (done) {
        struct nv_gm_inval_wait *w = done;
        done = w->next;
        netvm_rpc_reply(g->ctx, &w->token, NETVM_OK, NULL, 0, NULL, 0);
        free(w);
    }
    return left;
}

netvm_status_t nv_gstore_shared_publish(struct nv_gstore *s)
{
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    struct nv_gm_shared_store *sh = sh_of(s);
    if (sh->mode != NV_GM_SHARED_WRITE)
        return NETVM_OK;   /* a reader has nothing to publish */
    size_t words = (r->npages + 63) / 64;
    uint64_t *bits = malloc(words * 8);
    if (!bits)
        return NETVM_ERR_NOMEM;
    int any = 0;
    for (size_t i = 0; i < words; i++) {
        uint64_t w = atomic_exchange_explicit(&sh->written[i], 0, memory_order_acq_rel);
        any |= w != 0;
        /* little-endian words on the wire (proto.h) */
        unsigned char *o = (unsigned char *)&bits[i];
        for (int k = 0; k < 8; k++)
            o[k] = (unsigned char)(w >> (8 * k));
    }
    netvm_status_t st = NETVM_OK;
    if (any) {
        /* any one server knows every sharer (each opened the name on all) */
        struct nv_gm_servers *g = r->g;
        int n = atomic_load_explicit(&g->nservers, memory_order_acquire);
        uint64_t a[3] = { r->owner, r->npages, (uint64_t)r->timeout_ms };
        st = NETVM_ERR_PEER;
        for (int i = 0; i < n && st != NETVM_OK; i++) {
            if (!nv_gm_srv_readable(g, i))
                continue;
            st = nv_rpc_svc_call(g->ctx, g->srv[i].peer, nv_gm_k(NV_GM_SHARED_SYNC), a, 3, bits, words * 8, NULL,
                                 0, 2 * r->timeout_ms + 1000, NULL);
            if (st == NETVM_ERR_TIMEOUT || st == NETVM_ERR_AGAIN)
                break;   /* a reader was not told: another server would not tell it either */
        }
        if (st != NETVM_OK) {
            /* told again at the next sync */
            for (size_t i = 0; i < words; i++) {
                const unsigned char *o = (const unsigned char *)&bits[i];
                uint64_t w = 0;
                for (int k = 0; k < 8; k++)
                    w |= (uint64_t)o[k] << (8 * k);
                atomic_fetch_or_explicit(&sh->written[i], w, memory_order_relaxed);
            }
            nv_error("gmem: shared region '%s': readers could not all be told of the sync: %s", sh->name,
                     netvm_strerror(st));
        }
    }
    free(bits);
    return st;
}

netvm_status_t nv_gstore_shared_remove(netvm_ctx_t *ctx, const char *name, const netvm_gmem_opts_t *opts)
{
    if (!ctx || !name || !*name || strlen(name) > NV_GM_NAME_MAX)
        return NETVM_ERR_INVAL;
    netvm_status_t st;
    struct nv_gm_servers *g = nv_gm_servers_get(ctx, opts, &st);
    if (!g)
        return st;
    uint64_t a[1] = { nv_gm_shared_id(name) };
    int n = atomic_load_explicit(&g->nservers, memory_order_acquire), found = 0;
    netvm_status_t res = NETVM_OK;
    for (int i = 0; i < n; i++) {
        if (!nv_gm_srv_readable(g, i))
            continue;
        st = nv_rpc_svc_call(g->ctx, g->srv[i].peer, nv_gm_k(NV_GM_SHARED_REMOVE), a, 1, NULL, 0, NULL, 0,
                             g->timeout_ms, NULL);
        nv_gm_srv_report(g, i, st);
        if (st == NETVM_OK)
            found = 1;
        else if (st != NETVM_ERR_NOTFOUND && res == NETVM_OK)
            res = st;
    }
    if (res == NETVM_OK && !found)
        res = NETVM_ERR_NOTFOUND;
    return res;
}
