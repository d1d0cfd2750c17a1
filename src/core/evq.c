/* The event queue: the ring of this process's endpoint block, which peers
 * (shm) and the progress engine (tcp, active messages) fill, and what core
 * does with each record as the application takes it: drops events of
 * disarmed tripwires, routes tripset members' events to their set, runs
 * counter handlers, and hands the rest out. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/config.h"
#include "util/log.h"
#include "util/time.h"

#include <stdlib.h>
#include <string.h>

netvm_status_t nv_evq_init(netvm_ctx_t *ctx)
{
    uint32_t size = (uint32_t)nv_config_long("NETVM_EVQ_SIZE", 64, 1 << 22);
    uint32_t pow2 = 64;
    while (pow2 < size)
        pow2 <<= 1;
    if (pow2 != size)
        nv_warn("NETVM_EVQ_SIZE=%u is not a power of two; using %u", size, pow2);
    ctx->ntrips = (uint32_t)nv_config_long("NETVM_MAX_TRIPWIRES", 16, 1 << 22);
    ctx->ncounters = (uint32_t)nv_config_long("NETVM_COUNTERS", 1, 1 << 20);
    ctx->handlers = calloc(ctx->ncounters, sizeof *ctx->handlers);
    if (!ctx->handlers)
        return NETVM_ERR_NOMEM;
    pthread_mutex_init(&ctx->evq_lock, NULL);
    netvm_status_t st = nv_ep_create(&ctx->ep, ctx->rank, pow2, ctx->ntrips, ctx->ncounters);
    return st == NETVM_OK ? nv_trip_init(ctx) : st;
}

void nv_evq_fini(netvm_ctx_t *ctx)
{
    nv_trip_fini(ctx);
    nv_ep_destroy(&ctx->ep);
    nv_evfifo_free(&ctx->stash);
    free(ctx->handlers);
    ctx->handlers = NULL;
    pthread_mutex_destroy(&ctx->evq_lock);
}

void nv_evq_post_local(netvm_ctx_t *ctx, const struct nv_ep_rec *r)
{
    nv_ep_post(&ctx->ep, r);
}

/* --- a growable FIFO -------------------------------------------------------- */

int nv_evfifo_push(struct nv_evfifo *f, const netvm_event_t *ev)
{
    if (f->len == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 64;
        netvm_event_t *v = malloc(cap * sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < f->len; i++)
            v[i] = f->v[(f->head + i) % f->cap];
        free(f->v);
        f->v = v;
        f->cap = cap;
        f->head = 0;
    }
    f->v[(f->head + f->len) % f->cap] = *ev;
    f->len++;
    return 0;
}

int nv_evfifo_pop(struct nv_evfifo *f, netvm_event_t *ev)
{
    if (!f->len)
        return 0;
    *ev = f->v[f->head];
    f->head = (f->head + 1) % f->cap;
    f->len--;
    return 1;
}

void nv_evfifo_free(struct nv_evfifo *f)
{
    free(f->v);
    memset(f, 0, sizeof *f);
}

/* --- routing ------------------------------------------------------------------ */

/* Where drain puts the events netvm_evq_poll returns: straight into the
 * caller's array while the stash is empty (the common case, no copy). */
struct sink {
    netvm_event_t *ev;
    int            max, n;
};

static void stash_to(netvm_ctx_t *ctx, struct nv_evfifo *f, const netvm_event_t *ev, struct sink *out)
{
    if (out && f == &ctx->stash && !f->len && out->n < out->max) {
        out->ev[out->n++] = *ev;
        return;
    }
    if (nv_evfifo_push(f, ev) != 0) {
        /* no memory for it: say so the way a full ring does */
        nv_error("out of memory for an event; reported as lost");
        atomic_fetch_add(&ctx->ep.h->overflow, 1);
    }
}

static void route_trip(netvm_ctx_t *ctx, const struct nv_ep_rec *r, struct sink *out)
{
    struct netvm_tripwire *tw = nv_trip_lookup(ctx, r->id, r->gen);
    if (!tw)
        return;   /* disarmed (or re-armed) since it fired */
    netvm_event_t ev = { .type = r->type, .access = r->access, .rank = r->rank, .id = r->id,
                         .value = tw->user, .addr = r->addr, .len = r->len };
    tw->fired++;
    stash_to(ctx, tw->set ? &tw->set->q : &ctx->stash, &ev, out);
}

static void route_counter(netvm_ctx_t *ctx, const struct nv_ep_rec *r, struct sink *out)
{
    uint64_t n = nv_ep_counter_take(&ctx->ep, r->id);
    if (!n)
        return;   /* taken by an earlier record or an ack */
    struct nv_counter_handler *h = &ctx->handlers[r->id];
    if (h->fn) {
        h->fn(ctx, r->id, n, h->arg);
        return;
    }
    netvm_event_t ev = { .type = NETVM_EV_COUNTER, .rank = -1, .id = r->id, .value = n };
    stash_to(ctx, &ctx->stash, &ev, out);
}

/* A peer on this machine wrote the record: check what it claims. */
static void route(netvm_ctx_t *ctx, const struct nv_ep_rec *r, struct sink *out)
{
    if (r->rank < -1)
        goto bad;
    switch (r->type) {
    case NETVM_EV_TRIPWIRE:
    case NETVM_EV_REMOTE_TRIPWIRE:
        route_trip(ctx, r, out);
        return;
    case NV_EP_COUNTER:
        if (r->id >= ctx->ncounters)
            goto bad;
        route_counter(ctx, r, out);
        return;
    case NETVM_EV_NOTIFY:
    case NETVM_EV_REQUESTER:
    case NETVM_EV_COMPLETER:
    case NETVM_EV_RESPONDER:
    case NETVM_EV_PEER_UP:
    case NETVM_EV_PEER_DOWN:
    case NETVM_EV_MESSAGE: {
        netvm_event_t ev = { .type = r->type, .access = r->access, .rank = r->rank, .id = r->id,
                             .status = r->status, .value = r->value, .addr = r->addr, .len = r->len };
        stash_to(ctx, &ctx->stash, &ev, out);
        return;
    }
    default:
        break;
    }
bad:
    nv_warn("malformed event record (type %u, rank %d) dropped", r->type, r->rank);
}

/* Take what the ring holds (at most max records, 0: all) and route it;
 * returns how many records were taken. */
static int drain(netvm_ctx_t *ctx, size_t max, struct sink *out)
{
    int n = 0;
    uint64_t lost = nv_ep_take_overflow(&ctx->ep);
    if (lost) {
        netvm_event_t ev = { .type = NETVM_EV_OVERFLOW, .rank = -1, .value = lost };
        if (!ctx->evq_overflowed++)   /* once: the events say the rest */
            nv_warn("event queue full: %llu events lost (raise NETVM_EVQ_SIZE)", (unsigned long long)lost);
        stash_to(ctx, &ctx->stash, &ev, out);
        n++;
    }
    struct nv_ep_rec r;
    while ((!max || (size_t)n < max) && nv_ep_pop(&ctx->ep, &r)) {
        route(ctx, &r, out);
        n++;
    }
    return n;
}

static void evq_lock(netvm_ctx_t *ctx)
{
    if (ctx->thread_level == NETVM_THREAD_MULTIPLE)
        pthread_mutex_lock(&ctx->evq_lock);
}

static void evq_unlock(netvm_ctx_t *ctx)
{
    if (ctx->thread_level == NETVM_THREAD_MULTIPLE)
        pthread_mutex_unlock(&ctx->evq_lock);
}

int netvm_evq_poll(netvm_ctx_t *ctx, netvm_event_t *ev, int max)
{
    if (!ctx || (!ev && max > 0) || max < 0)
        return -1;
    /* an armed queue holds P for the caller's loop: what arrived on the
     * sockets becomes events now */
    if (ctx->in_e)
        nv_progress_pass(ctx);
    evq_lock(ctx);
    struct sink out = { ev, max, 0 };
    while (out.n < max && nv_evfifo_pop(&ctx->stash, &ev[out.n]))
        out.n++;
    while (out.n < max && drain(ctx, (size_t)(max - out.n), &out) > 0)
        while (out.n < max && nv_evfifo_pop(&ctx->stash, &ev[out.n]))
            out.n++;
    evq_unlock(ctx);
    return out.n;
}

int netvm_evq_fd(netvm_ctx_t *ctx)
{
    return ctx ? ctx->efd : -1;
}

netvm_status_t netvm_evq_arm(netvm_ctx_t *ctx)
{
    if (!ctx)
        return NETVM_ERR_INVAL;
    if (ctx->stash.len)
        return NETVM_ERR_AGAIN;
    /* what gathered for sending leaves before the caller sleeps; then the
     * sockets join the caller's fd, so what arrives wakes it directly */
    nv_progress_flush_tx(ctx);
    nv_progress_arm_e(ctx);
    if (ctx->in_e && nv_progress_pass(ctx))
        return NETVM_ERR_AGAIN;
    return nv_ep_arm_fd(&ctx->ep) ? NETVM_ERR_AGAIN : NETVM_OK;
}

/* --- waiting ------------------------------------------------------------------ */

struct until {
    netvm_ctx_t *ctx;
    int        (*done)(void *arg);
    void        *arg;
};

static int route_then_check(void *arg)
{
    struct until *u = arg;
    evq_lock(u->ctx);
    drain(u->ctx, 0, NULL);
    int d = u->done ? u->done(u->arg) : 0;
    evq_unlock(u->ctx);
    return d;
}

netvm_status_t nv_evq_wait_until(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms,
                                 int spin)
{
    struct until u = { ctx, done, arg };
    if (timeout_ms == 0) {
        nv_progress_pass(ctx);
        return route_then_check(&u) ? NETVM_OK : NETVM_ERR_TIMEOUT;
    }
    if (nv_in_handler)
        return route_then_check(&u) ? NETVM_OK : NETVM_ERR_STATE;
    return nv_progress_wait_events(ctx, route_then_check, &u, timeout_ms, spin);
}

static int stash_nonempty(void *arg)
{
    return ((netvm_ctx_t *)arg)->stash.len != 0;
}

netvm_status_t netvm_evq_wait(netvm_ctx_t *ctx, netvm_event_t *ev, int max, int *n, int timeout_ms)
{
    if (n)
        *n = 0;
    if (!ctx || !ev || max <= 0 || !n)
        return NETVM_ERR_INVAL;
    netvm_status_t st = nv_evq_wait_until(ctx, stash_nonempty, ctx, timeout_ms, 1);
    if (st == NETVM_OK)
        *n = netvm_evq_poll(ctx, ev, max);
    return st;
}
