/* Active messages, the receiving side: replies matched to this process's
 * pending calls (and dropped when they match none), the application's
 * handlers, core's own, payloads landing where a handler or a payload
 * token says, deferred messages, and the credits that bound what a peer
 * can make this process hold. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/guard.h"
#include "util/log.h"

#include <stdlib.h>
#include <string.h>

uint64_t nv_am_reply_pkey(netvm_ctx_t *ctx, struct netvm_req *q);
void     nv_am_token_to_pub(const struct nv_am_token *t, netvm_am_token_t *pub);

/* What a large payload's landing needs at its end (am_end). */
struct landing {
    struct netvm_req *q;            /* a reply's request, or NULL */
    struct nv_deferred *d;          /* a deferred message whose payload lands in it, or NULL */
    struct nv_peer   *p;            /* the sender (a reference) */
    netvm_am_recv_fn  fn;           /* a handler's netvm_am_recv */
    void             *arg;
    int               owe;          /* a credit to return once landed */
    netvm_am_msg_t    msg;
};

struct nv_deferred {
    struct nv_deferred *next;
    struct nv_peer     *p;          /* a reference */
    int                 owe;
    netvm_am_msg_t      msg;
    uint8_t             payload[];
};

static void owe_credit(netvm_ctx_t *ctx, struct nv_peer *p)
{
    uint32_t owed = atomic_fetch_add_explicit(&p->am_owed, 1, memory_order_relaxed) + 1;
    if (owed >= ctx->am_credits_return)
        nv_am_return_credits(ctx, p, 0);
}

static int consumed_credit(const struct nv_am_hdr *h)
{
    return !(h->flags & (NV_AMW_F_REPLY | NV_AMW_F_TOKEN)) && h->handler != NV_AMH_CREDIT &&
           h->handler != NV_AMH_ERROR && h->handler != NV_AMH_BYE;
}

static void dropped_reply(netvm_ctx_t *ctx, struct nv_peer *p, const char *why)
{
    atomic_fetch_add_explicit(&ctx->am_stats.dropped_replies, 1, memory_order_relaxed);
    nv_debug("reply from peer %d dropped: %s", nv_peer_id(p), why);
}

/* --- replies --------------------------------------------------------------------- */

/* Where a reply's results go; the payload is the caller's business. *res:
 * the value a core request's result word receives. */
static netvm_status_t take_results(struct netvm_req *q, struct nv_peer *from, const struct nv_am_hdr *h,
                                   uint64_t *res)
{
    *res = h->nargs ? h->args[0] : 0;
    netvm_status_t st = (netvm_status_t)h->status;
    if (q->amres) {
        q->amres->status = st;
        q->amres->nargs = h->nargs;
        for (unsigned i = 0; i < NETVM_AM_MAX_ARGS; i++)
            q->amres->args[i] = h->args[i];
        q->amres->len = (size_t)h->len;
        q->amres->peer = nv_peer_id(from);
        return NETVM_OK;   /* the replier's status is the caller's to read */
    }
    if (st == NETVM_OK && q->import) {
        if (h->nargs < 4)
            return NETVM_ERR_SYS;
        q->import->slot = (uint32_t)h->args[0];
        q->import->key = h->args[1];
        q->import->len = h->args[2];
        q->import->rights = (unsigned)h->args[3];
        /* where the segment lies at the target: the buckets a registration
         * strategy pins are in the target's addresses (reg_core.c), and a
         * link with ops->mr_key addresses it there with its key */
        if (h->nargs >= 5)
            q->import->addr = h->args[4];
        if (h->nargs >= 6)
            q->import->mr_key = h->args[5];
    }
    return st;
}

static void take_reply(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    const struct nv_am_hdr *h = &rx->h;
    const struct nv_am_token *t = &h->token;
    if (t->origin != ctx->uuid)
        return dropped_reply(ctx, p, "not ours");
    struct netvm_req *q = nv_req_lookup(ctx, t->call);
    if (!q || atomic_load_explicit(&q->key, memory_order_acquire) != t->key || t->key == 0)
        return dropped_reply(ctx, p, "unknown or stale call");
    if (h->len) {
        if (t->pindex != 1 || t->pkey != nv_am_reply_pkey(ctx, q))
            return dropped_reply(ctx, p, "no payload token for its payload");
    }
    if (!nv_req_claim_id(q, t->call))
        return dropped_reply(ctx, p, "the call is over (answered, failed or timed out)");
    if (h->len > q->rcap) {
        nv_req_complete(q, NETVM_ERR_BOUNDS, 0);   /* its buffer is too small: the caller learns */
        return;
    }
    uint64_t res;
    netvm_status_t st = take_results(q, p, h, &res);
    if (!h->len) {
        nv_req_complete(q, st, res);
        return;
    }
    if (rx->payload) {
        if (nv_guarded_copy(q->rbuf, rx->payload, (size_t)h->len) != 0)
            st = NETVM_ERR_FAULT;
        nv_req_complete(q, st, res);
        return;
    }
    /* large: it lands straight in the caller's buffer, then completes */
    struct landing *ld = calloc(1, sizeof *ld);
    if (!ld) {
        nv_req_complete(q, NETVM_ERR_NOMEM, 0);
        return;
    }
    ld->q = q;
    rx->dst = q->rbuf;
    rx->cookie = ld;
}

/* --- the application's handlers ---------------------------------------------------------- */

static int call_handler(netvm_ctx_t *ctx, netvm_am_handler_fn fn, void *arg, netvm_am_msg_t *msg)
{
    int was = nv_in_handler;
    nv_in_handler = 1;
    int r = fn(ctx, msg, arg);
    nv_in_handler = was;
    return r;
}

/* A deferred message with room for its payload (not yet copied), or NULL
 * (logged; the credit it holds is returned). */
static struct nv_deferred *deferred_new(netvm_ctx_t *ctx, struct nv_peer *p, const netvm_am_msg_t *msg, int owe)
{
    struct nv_deferred *d = malloc(sizeof *d + msg->len);
    if (!d) {
        nv_error("out of memory deferring a message of peer %d: dropped", nv_peer_id(p));
        if (owe)
            owe_credit(ctx, p);
        return NULL;
    }
    d->next = NULL;
    d->p = p;
    nv_peer_ref(p);
    d->owe = owe;
    d->msg = *msg;
    d->msg.deferred++;
    d->msg.nv = NULL;
    d->msg.payload = msg->len ? d->payload : NULL;
    atomic_fetch_add_explicit(&ctx->am_stats.deferred, 1, memory_order_relaxed);
    return d;
}

static void deferred_free(netvm_ctx_t *ctx, struct nv_deferred *d)
{
    if (d->owe)
        owe_credit(ctx, d->p);
    nv_peer_put(d->p);
    free(d);
}

/* Queue d for its handler's next call. */
static void deferred_queue(netvm_ctx_t *ctx, struct nv_deferred *d)
{
    struct nv_peer *p = d->p;
    pthread_mutex_lock(&ctx->am_lock);
    if (p->deferred_tail)
        p->deferred_tail->next = d;
    else
        __atomic_store_n(&p->deferred, d, __ATOMIC_RELAXED);   /* peeked at without the lock */
    p->deferred_tail = d;
    p->ndeferred++;
    atomic_fetch_add(&ctx->ndeferred, 1);
    pthread_mutex_unlock(&ctx->am_lock);
}

static void defer(netvm_ctx_t *ctx, struct nv_peer *p, const netvm_am_msg_t *msg, int owe)
{
    struct nv_deferred *d = deferred_new(ctx, p, msg, owe);
    if (!d)
        return;
    if (msg->len)
        memcpy(d->payload, msg->payload, msg->len);
    deferred_queue(ctx, d);
}

/* A large payload its handler deferred without taking it: it lands in the
 * deferred message, which is queued once it has (nv_am_end_upcall). */
static void defer_large(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx, const netvm_am_msg_t *msg,
                        int owe)
{
    struct landing *ld = calloc(1, sizeof *ld);
    struct nv_deferred *d = ld ? deferred_new(ctx, p, msg, owe) : NULL;
    if (!d) {
        if (!ld) {
            nv_error("out of memory deferring a message of peer %d: dropped", nv_peer_id(p));
            if (owe)
                owe_credit(ctx, p);
        }
        free(ld);
        return;
    }
    ld->d = d;
    rx->dst = d->payload;
    rx->cookie = ld;
}

static void no_handler(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    atomic_fetch_add_explicit(&ctx->am_stats.dropped_no_handler, 1, memory_order_relaxed);
    nv_debug("message for handler %u of peer %d dropped: no handler", rx->h.handler, nv_peer_id(p));
    nv_am_answer(ctx, p, &rx->h, NETVM_ERR_NOTFOUND, NULL, 0, NULL, 0);
}

static void user_message(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx)
{
    int owe = consumed_credit(&rx->h);
    netvm_am_handler_fn fn = __atomic_load_n(&ctx->am[rx->h.handler].fn, __ATOMIC_ACQUIRE);
    if (!fn) {
        no_handler(ctx, p, rx);
        if (owe)
            owe_credit(ctx, p);
        return;
    }
    /* field by field: a zeroing initializer of the whole message is a
     * `rep stos`, slow to start for a few words */
    netvm_am_msg_t msg;
    msg.peer = nv_peer_id(p);
    msg.id = rx->h.handler;
    msg.nargs = rx->h.nargs;
    memcpy(msg.args, rx->h.args, sizeof msg.args);
    msg.payload = rx->payload;
    msg.len = (size_t)rx->h.len;
    msg.has_token = (rx->h.flags & NV_AMW_F_TOKEN) != 0;
    if (msg.has_token)
        nv_am_token_to_pub(&rx->h.token, &msg.token);
    else
        msg.token = (netvm_am_token_t){ { 0 } };
    msg.deferred = 0;
    msg.nv = rx;
    rx->cookie = NULL;
    int r = call_handler(ctx, fn, ctx->am[rx->h.handler].arg, &msg);
    if (!rx->payload && rx->h.len) {
        /* large: netvm_am_recv named where it lands, or it is kept with a
         * deferred message, or it is discarded */
        struct landing *ld = rx->cookie;
        if (r == NETVM_AM_DEFER && !ld) {
            defer_large(ctx, p, rx, &msg, owe);
            return;
        }
        if (r == NETVM_AM_DEFER)
            nv_warn("handler %u deferred a message whose payload it took (netvm_am_recv): "
                    "the payload is the handler's, the message is not called again", rx->h.handler);
        if (ld) {
            ld->owe = owe;
            ld->msg.nv = NULL;
        } else if (owe) {
            owe_credit(ctx, p);
        }
        return;
    }
    if (r == NETVM_AM_DEFER) {
        defer(ctx, p, &msg, owe);
        return;
    }
    if (owe)
        owe_credit(ctx, p);
}

netvm_status_t netvm_am_recv(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *buf, netvm_am_recv_fn done,
                             void *arg)
{
    if (!ctx || !msg || (!buf && msg->len))
        return NETVM_ERR_INVAL;
    struct nv_am_rx *rx = msg->nv;
    if (msg->payload || !rx) {
        /* here already (eager, or deferred): a copy, and done at once */
        netvm_status_t st = NETVM_OK;
        if (msg->len && nv_guarded_copy(buf, msg->payload, msg->len) != 0)
            st = NETVM_ERR_FAULT;
        if (done)
            done(ctx, msg, st, arg);
        return st;
    }
    if (rx->cookie)
        return NETVM_ERR_STATE;   /* called twice */
    struct landing *ld = calloc(1, sizeof *ld);
    if (!ld)
        return NETVM_ERR_NOMEM;
    ld->fn = done;
    ld->arg = arg;
    ld->msg = *msg;
    ld->msg.payload = buf;
    ld->p = nv_peer_of(rx->from);
    nv_peer_ref(ld->p);
    rx->dst = buf;
    rx->cookie = ld;
    return NETVM_OK;
}

void nv_am_end_upcall(void *arg, struct nv_am_rx *rx, netvm_status_t st)
{
    netvm_ctx_t *ctx = arg;
    struct landing *ld = rx->cookie;
    rx->cookie = NULL;
    if (!ld)
        return;
    if (ld->d) {
        if (st == NETVM_OK) {
            deferred_queue(ctx, ld->d);
        } else {
            nv_warn("a deferred message of peer %d lost its payload (%s): dropped", nv_peer_id(ld->d->p),
                    netvm_strerror(st));
            deferred_free(ctx, ld->d);
        }
    } else if (ld->q) {
        nv_req_complete(ld->q, st != NETVM_OK ? st : NETVM_OK, 0);
    } else {
        if (ld->fn) {
            int was = nv_in_handler;
            nv_in_handler = 1;
            ld->fn(ctx, &ld->msg, st, ld->arg);
            nv_in_handler = was;
        }
        if (ld->owe)
            owe_credit(ctx, ld->p);
        nv_peer_put(ld->p);
    }
    free(ld);
}

/* --- dispatch ------------------------------------------------------------------------- */

void nv_am_upcall(void *arg, struct nv_am_rx *rx)
{
    netvm_ctx_t *ctx = arg;
    struct nv_peer *p = nv_peer_of(rx->from);
    NV_AM_COUNT(ctx, received);
    rx->dst = NULL;
    rx->cookie = NULL;
    /* a token's origin not sent is the sender's (a request) or ours (a
     * reply), wire/am.h; a sender whose endpoint id is unknown (none yet)
     * leaves 0, which no reply can be routed to */
    if ((rx->h.flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) && !(rx->h.flags & NV_AMW_F_ORIGIN))
        rx->h.token.origin = rx->h.flags & NV_AMW_F_REPLY ? ctx->uuid : p->uuid;
    if (rx->h.credits)
        atomic_fetch_add_explicit(&p->am_credits, rx->h.credits, memory_order_release);
    if (rx->h.flags & NV_AMW_F_REPLY) {
        take_reply(ctx, p, rx);
        return;
    }
    if (rx->h.handler < NETVM_AM_MAX_ID || (rx->h.handler >= NV_AMH_SVC && rx->h.handler < NV_AMH_END)) {
        user_message(ctx, p, rx);
        return;
    }
    if (rx->h.handler >= NV_AMH_END || (!rx->payload && rx->h.len)) {
        nv_warn("peer %d sent a message for unknown core handler %u: dropped", nv_peer_id(p), rx->h.handler);
        return;
    }
    nv_am_core_dispatch(ctx, p, rx);
    if (consumed_credit(&rx->h))
        owe_credit(ctx, p);
}

/* --- deferred messages ------------------------------------------------------------------- */

int nv_am_run_deferred(netvm_ctx_t *ctx)
{
    int ran = 0;
    uint32_t high = __atomic_load_n(&ctx->peer_high, __ATOMIC_ACQUIRE);
    for (uint32_t i = 0; i < high && atomic_load(&ctx->ndeferred); i++) {
        struct nv_peer *p = nv_peer_slot(ctx, i);
        if (!p || !__atomic_load_n(&p->deferred, __ATOMIC_RELAXED))
            continue;
        pthread_mutex_lock(&ctx->am_lock);
        unsigned n = p->ndeferred;   /* those deferred again go to the back, for the next pass */
        pthread_mutex_unlock(&ctx->am_lock);
        while (n--) {
            pthread_mutex_lock(&ctx->am_lock);
            struct nv_deferred *d = p->deferred;
            if (d) {
                __atomic_store_n(&p->deferred, d->next, __ATOMIC_RELAXED);
                if (!p->deferred)
                    p->deferred_tail = NULL;
                p->ndeferred--;
                atomic_fetch_sub(&ctx->ndeferred, 1);
            }
            pthread_mutex_unlock(&ctx->am_lock);
            if (!d)
                break;
            netvm_am_handler_fn fn = __atomic_load_n(&ctx->am[d->msg.id].fn, __ATOMIC_ACQUIRE);
            int r = fn && !atomic_load(&d->p->dead) ? call_handler(ctx, fn, ctx->am[d->msg.id].arg, &d->msg)
                                                    : NETVM_AM_DONE;
            ran++;
            if (r == NETVM_AM_DEFER && fn && !atomic_load(&d->p->dead)) {
                d->msg.deferred++;
                atomic_fetch_add_explicit(&ctx->am_stats.deferred, 1, memory_order_relaxed);
                pthread_mutex_lock(&ctx->am_lock);
                d->next = NULL;
                if (p->deferred_tail)
                    p->deferred_tail->next = d;
                else
                    __atomic_store_n(&p->deferred, d, __ATOMIC_RELAXED);
                p->deferred_tail = d;
                p->ndeferred++;
                atomic_fetch_add(&ctx->ndeferred, 1);
                pthread_mutex_unlock(&ctx->am_lock);
                continue;
            }
            deferred_free(ctx, d);
        }
    }
    return ran;
}

/* A peer that is gone: its deferred messages go with it. */
void nv_am_peer_down(netvm_ctx_t *ctx, struct nv_peer *p)
{
    pthread_mutex_lock(&ctx->am_lock);
    struct nv_deferred *d = p->deferred;
    __atomic_store_n(&p->deferred, NULL, __ATOMIC_RELAXED);
    p->deferred_tail = NULL;
    atomic_fetch_sub(&ctx->ndeferred, (int)p->ndeferred);
    p->ndeferred = 0;
    pthread_mutex_unlock(&ctx->am_lock);
    while (d) {
        struct nv_deferred *n = d->next;
        nv_peer_put(d->p);
        free(d);
        d = n;
    }
}
