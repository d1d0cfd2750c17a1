/* Tripwires (CLAN): local ones live in the endpoint block's table, where
 * every link's NIC (the shm initiator, the tcp target, the progress engine)
 * matches accesses against them; remote ones are this process's own,
 * matched when its writes are known complete at the target. Ids index
 * ctx->trips; a generation per id tells a live tripwire's events from
 * those of an earlier one that had the id. */
#include "core/internal.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

netvm_status_t nv_trip_init(netvm_ctx_t *ctx)
{
    ctx->trips = calloc(ctx->ntrips, sizeof *ctx->trips);
    ctx->trip_gen = calloc(ctx->ntrips, sizeof *ctx->trip_gen);
    pthread_mutex_init(&ctx->rtrip_lock, NULL);
    return ctx->trips && ctx->trip_gen ? NETVM_OK : NETVM_ERR_NOMEM;
}

void nv_trip_fini(netvm_ctx_t *ctx)
{
    for (uint32_t i = 0; ctx->trips && i < ctx->ntrips; i++)
        free(ctx->trips[i]);   /* the user's handles die with the context */
    free(ctx->trips);
    free(ctx->trip_gen);
    ctx->trips = NULL;
    ctx->trip_gen = NULL;
    pthread_mutex_destroy(&ctx->rtrip_lock);
}

struct netvm_tripwire *nv_trip_lookup(netvm_ctx_t *ctx, uint32_t id, uint32_t gen)
{
    if (id >= ctx->ntrips)
        return NULL;
    struct netvm_tripwire *tw = ctx->trips[id];
    return tw && tw->gen == gen ? tw : NULL;
}

static netvm_status_t new_trip(netvm_ctx_t *ctx, unsigned flags, uint64_t user, netvm_tripset_t *set,
                               struct netvm_tripwire **out)
{
    uint32_t id = ctx->trip_free;
    while (id < ctx->ntrips && ctx->trips[id])
        id++;
    if (id >= ctx->ntrips)
        return NETVM_ERR_NOMEM;   /* NETVM_MAX_TRIPWIRES armed */
    struct netvm_tripwire *tw = calloc(1, sizeof *tw);
    if (!tw)
        return NETVM_ERR_NOMEM;
    tw->ctx = ctx;
    tw->id = id;
    /* never 0, so a zeroed record never matches */
    tw->gen = ++ctx->trip_gen[id];
    if (!tw->gen)
        tw->gen = ctx->trip_gen[id] = 1;
    tw->flags = flags;
    tw->user = user;
    tw->set = set;
    if (set) {
        tw->set_next = set->members;
        if (set->members)
            set->members->set_prev = tw;
        set->members = tw;
    }
    ctx->trips[id] = tw;
    ctx->trip_free = id + 1;
    *out = tw;
    return NETVM_OK;
}

static void free_trip(struct netvm_tripwire *tw)
{
    netvm_ctx_t *ctx = tw->ctx;
    netvm_tripset_t *set = tw->set;
    if (set) {
        if (tw->set_prev)
            tw->set_prev->set_next = tw->set_next;
        else
            set->members = tw->set_next;
        if (tw->set_next)
            tw->set_next->set_prev = tw->set_prev;
    }
    ctx->trips[tw->id] = NULL;
    if (tw->id < ctx->trip_free)
        ctx->trip_free = tw->id;
    free(tw);
}

static netvm_status_t check_set(netvm_ctx_t *ctx, netvm_tripset_t *set)
{
    return !set || set->ctx == ctx ? NETVM_OK : NETVM_ERR_INVAL;
}

netvm_status_t netvm_tripwire_arm(netvm_ctx_t *ctx, const void *addr, size_t len, unsigned flags,
                                  uint64_t user, netvm_tripset_t *set, netvm_tripwire_t **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !addr || !len || !out || !(flags & NETVM_TRIP_RW) ||
        (flags & ~(unsigned)(NETVM_TRIP_RW | NETVM_TRIP_ONCE)) || check_set(ctx, set) != NETVM_OK)
        return NETVM_ERR_INVAL;
    uint64_t start = (uint64_t)(uintptr_t)addr;
    if (start + len < start)
        return NETVM_ERR_BOUNDS;
    struct netvm_tripwire *tw;
    netvm_status_t st = new_trip(ctx, flags, user, set, &tw);
    if (st != NETVM_OK)
        return st;
    tw->start = start;
    tw->end = start + len;
    nv_ep_trip_add(&ctx->ep, tw->id, tw->gen, flags, user, tw->start, tw->end);
    *out = tw;
    return NETVM_OK;
}

netvm_status_t nv_trip_arm_wake(netvm_ctx_t *ctx, const void *addr, size_t len, netvm_tripwire_t **out)
{
    struct netvm_tripwire *tw;
    netvm_status_t st = new_trip(ctx, NETVM_TRIP_WRITE | NV_TRIP_WAKE, 0, NULL, &tw);
    if (st != NETVM_OK)
        return st;
    tw->start = (uint64_t)(uintptr_t)addr;
    tw->end = tw->start + len;
    nv_ep_trip_add(&ctx->ep, tw->id, tw->gen, tw->flags, 0, tw->start, tw->end);
    *out = tw;
    return NETVM_OK;
}

/* --- remote tripwires -------------------------------------------------------------- */

netvm_status_t netvm_tripwire_arm_remote(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, size_t len,
                                         unsigned flags, uint64_t user, netvm_tripset_t *set,
                                         netvm_tripwire_t **out)
{
    if (out)
        *out = NULL;
    if (!ctx || !r || r->ctx != ctx || !len || !out || !(flags & NETVM_TRIP_WRITE) ||
        (flags & ~(unsigned)(NETVM_TRIP_WRITE | NETVM_TRIP_ONCE)) || check_set(ctx, set) != NETVM_OK)
        return NETVM_ERR_INVAL;
    if (!nv_range_ok(off, len, r->d.len))
        return NETVM_ERR_BOUNDS;
    if (!(r->d.rights & NETVM_WRITE))
        return NETVM_ERR_RIGHTS;   /* this process can never write it */
    struct netvm_tripwire *tw;
    netvm_status_t st = new_trip(ctx, flags, user, set, &tw);
    if (st != NETVM_OK)
        return st;
    tw->rseg = r;
    tw->start = off;
    tw->end = off + len;
    pthread_mutex_lock(&ctx->rtrip_lock);
    if (r->nrtrips == r->rtrip_cap) {
        uint32_t cap = r->rtrip_cap ? r->rtrip_cap * 2 : 8;
        struct nv_itree_node *a = realloc(r->rtrips, (size_t)(cap + 1) * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&ctx->rtrip_lock);
            free_trip(tw);
            return NETVM_ERR_NOMEM;
        }
        r->rtrips = a;
        r->rtrip_cap = cap;
    }
    uint32_t n = (uint32_t)nv_itree_insert(r->rtrips, r->nrtrips, tw->start, tw->end,
                                           (uint64_t)tw->id << 32 | tw->gen);
    nv_itree_build(r->rtrips, n);
    __atomic_store_n(&r->nrtrips, n, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->rtrip_lock);
    *out = tw;
    return NETVM_OK;
}

struct rfire {
    netvm_ctx_t  *ctx;
    netvm_rseg_t *r;
    uint64_t      off, len;
};

static int rtrip_hit(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    struct rfire *f = arg;
    (void)start;
    (void)end;
    uint32_t id = (uint32_t)(data >> 32), gen = (uint32_t)data;
    struct netvm_tripwire *tw = f->ctx->trips[id];
    /* the table is ours and changes under rtrip_lock only: tw is live */
    if (!tw || tw->gen != gen)
        return 0;
    if ((tw->flags & NETVM_TRIP_ONCE) && atomic_exchange(&tw->spent, 1))
        return 0;
    struct nv_ep_rec rec = { .type = NETVM_EV_REMOTE_TRIPWIRE, .access = NETVM_TRIP_WRITE,
                             .rank = nv_peer_id(f->r->peer), .id = id, .gen = gen, .value = tw->user,
                             .addr = f->off, .len = f->len };
    nv_evq_post_local(f->ctx, &rec);
    return 0;
}

void nv_rtrip_fire(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len)
{
    if (!nv_rtrip_any(r) || !len)
        return;
    struct rfire f = { ctx, r, off, len };
    pthread_mutex_lock(&ctx->rtrip_lock);
    nv_itree_query(r->rtrips, r->nrtrips, off, off + len, rtrip_hit, &f);
    pthread_mutex_unlock(&ctx->rtrip_lock);
}

void nv_rtrip_release(netvm_rseg_t *r)
{
    netvm_ctx_t *ctx = r->ctx;
    for (uint32_t i = 0; ctx->trips && i < ctx->ntrips; i++)
        if (ctx->trips[i] && ctx->trips[i]->rseg == r)
            netvm_tripwire_disarm(ctx->trips[i]);
    free(r->rtrips);
    r->rtrips = NULL;
    r->nrtrips = r->rtrip_cap = 0;
}

/* --- disarm, test, sets -------------------------------------------------------------- */

netvm_status_t netvm_tripwire_disarm(netvm_tripwire_t *tw)
{
    if (!tw)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = tw->ctx;
    if (tw->rseg) {
        netvm_rseg_t *r = tw->rseg;
        pthread_mutex_lock(&ctx->rtrip_lock);
        uint32_t n = (uint32_t)nv_itree_remove(r->rtrips, r->nrtrips, tw->start,
                                               (uint64_t)tw->id << 32 | tw->gen);
        nv_itree_build(r->rtrips, n);
        __atomic_store_n(&r->nrtrips, n, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&ctx->rtrip_lock);
    } else {
        nv_ep_trip_del(&ctx->ep, tw->id, tw->start);
    }
    /* records still in the ring or stashed now fail the generation check
     * (the id's next user gets a new one); drop those already routed */
    if (tw->set) {
        struct nv_evfifo *q = &tw->set->q;
        size_t n = q->len;
        for (size_t i = 0; i < n; i++) {
            netvm_event_t ev;
            nv_evfifo_pop(q, &ev);
            if (ev.id != tw->id)
                nv_evfifo_push(q, &ev);
        }
    } else {
        struct nv_evfifo *q = &ctx->stash;
        size_t n = q->len;
        for (size_t i = 0; i < n; i++) {
            netvm_event_t ev;
            nv_evfifo_pop(q, &ev);
            if (!((ev.type == NETVM_EV_TRIPWIRE || ev.type == NETVM_EV_REMOTE_TRIPWIRE) && ev.id == tw->id))
                nv_evfifo_push(q, &ev);
        }
    }
    free_trip(tw);
    return NETVM_OK;
}

netvm_status_t netvm_tripwire_test(netvm_tripwire_t *tw, uint64_t *fired)
{
    if (!tw || !fired)
        return NETVM_ERR_INVAL;
    netvm_ctx_t *ctx = tw->ctx;
    /* route what waits, without blocking */
    nv_evq_wait_until(ctx, NULL, NULL, 0, 0);
    *fired = tw->fired;
    tw->fired = 0;
    return NETVM_OK;
}

uint32_t netvm_tripwire_id(const netvm_tripwire_t *tw)
{
    return tw ? tw->id : UINT32_MAX;
}

netvm_status_t netvm_tripset_create(netvm_ctx_t *ctx, netvm_tripset_t **out)
{
    if (!ctx || !out)
        return NETVM_ERR_INVAL;
    *out = calloc(1, sizeof **out);
    if (!*out)
        return NETVM_ERR_NOMEM;
    (*out)->ctx = ctx;
    return NETVM_OK;
}

netvm_status_t netvm_tripset_destroy(netvm_tripset_t *set)
{
    if (!set)
        return NETVM_ERR_INVAL;
    while (set->members)
        netvm_tripwire_disarm(set->members);
    nv_evfifo_free(&set->q);
    free(set);
    return NETVM_OK;
}

static int set_ready(void *arg)
{
    return ((netvm_tripset_t *)arg)->q.len != 0;
}

netvm_status_t netvm_tripset_wait(netvm_tripset_t *set, netvm_event_t *ev, int timeout_ms)
{
    if (!set || !ev)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_evq_wait_until(set->ctx, set_ready, set, timeout_ms, 1);
    if (st == NETVM_OK)
        nv_evfifo_pop(&set->q, ev);
    return st;
}
