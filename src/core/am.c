/* Active messages, the sending side: handlers, one-way messages, requests
 * with reply tokens, replies and forwards. One path for the application's
 * messages and core's own (atomics, signals, notifications, imports). */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/config.h"
#include "util/log.h"
#include "util/random.h"
#include "util/siphash.h"
#include "util/time.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

netvm_status_t nv_am_init(netvm_ctx_t *ctx)
{
    ctx->am = calloc(NV_AMH_END, sizeof *ctx->am);
    if (!ctx->am)
        return NETVM_ERR_NOMEM;
    pthread_mutex_init(&ctx->am_lock, NULL);
    pthread_mutex_init(&ctx->svc_lock, NULL);
    if (nv_random_bytes(ctx->token_key, sizeof ctx->token_key) != 0)
        return NETVM_ERR_SYS;
    return NETVM_OK;
}

void nv_am_fini(netvm_ctx_t *ctx)
{
    free(ctx->am);
    ctx->am = NULL;
    pthread_mutex_destroy(&ctx->am_lock);
    pthread_mutex_destroy(&ctx->svc_lock);
}

netvm_status_t netvm_am_register(netvm_ctx_t *ctx, unsigned id, netvm_am_handler_fn fn, void *arg)
{
    if (!ctx || id >= NETVM_AM_MAX_ID)
        return NETVM_ERR_INVAL;
    return nv_am_register_id(ctx, id, fn, arg);
}

netvm_status_t nv_am_register_id(netvm_ctx_t *ctx, unsigned id, netvm_am_handler_fn fn, void *arg)
{
    pthread_mutex_lock(&ctx->am_lock);
    ctx->am[id].arg = arg;
    __atomic_store_n(&ctx->am[id].fn, fn, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->am_lock);
    return NETVM_OK;
}

netvm_status_t netvm_am_stats(netvm_ctx_t *ctx, netvm_am_stats_t *s)
{
    if (!ctx || !s)
        return NETVM_ERR_INVAL;
    s->sent = s->received = s->replies = 0;
    for (unsigned i = 0; i <= NV_THREAD_SLOTS; i++) {
        s->sent += atomic_load_explicit(&ctx->am_counts[i].sent, memory_order_relaxed);
        s->received += atomic_load_explicit(&ctx->am_counts[i].received, memory_order_relaxed);
        s->replies += atomic_load_explicit(&ctx->am_counts[i].replies, memory_order_relaxed);
    }
    s->dropped_replies = atomic_load(&ctx->am_stats.dropped_replies);
    s->dropped_no_handler = atomic_load(&ctx->am_stats.dropped_no_handler);
    s->deferred = atomic_load(&ctx->am_stats.deferred);
    s->credit_waits = atomic_load(&ctx->am_stats.credit_waits);
    return NETVM_OK;
}

/* --- flow control ------------------------------------------------------------- */

/* Messages that never wait for a credit: answers, and the control
 * messages that return credits or report failures. */
static int credit_free(const struct nv_am_hdr *h)
{
    return (h->flags & (NV_AMW_F_REPLY | NV_AMW_F_TOKEN)) || h->handler == NV_AMH_CREDIT ||
           h->handler == NV_AMH_ERROR || h->handler == NV_AMH_BYE;
}

static int credit_back(void *arg)
{
    struct nv_peer *p = arg;
    return atomic_load_explicit(&p->am_credits, memory_order_acquire) > 0 || atomic_load(&p->dead);
}

static netvm_status_t take_credit(netvm_ctx_t *ctx, struct nv_peer *p)
{
    for (;;) {
        int c = atomic_load_explicit(&p->am_credits, memory_order_relaxed);
        while (c > 0)
            if (atomic_compare_exchange_weak_explicit(&p->am_credits, &c, c - 1, memory_order_acquire,
                                                      memory_order_relaxed))
                return NETVM_OK;
        if (atomic_load(&p->dead))
            return NETVM_ERR_PEER;
        if (nv_in_handler)
            return NETVM_ERR_AGAIN;   /* a handler must not wait: defer and try again */
        atomic_fetch_add(&ctx->am_stats.credit_waits, 1);
        if (nv_progress_wait(ctx, credit_back, p, ctx->timeout_ms, 1) != NETVM_OK) {
            nv_warn("peer %d returned no active-message credits within NETVM_TIMEOUT", nv_peer_id(p));
            return NETVM_ERR_TIMEOUT;
        }
    }
}

/* Credits owed to p ride on the next message to it; this sends them alone
 * when many are due (force: any). Never blocks. */
void nv_am_return_credits(netvm_ctx_t *ctx, struct nv_peer *p, int force)
{
    uint32_t owed = atomic_load_explicit(&p->am_owed, memory_order_relaxed);
    if (!owed || (!force && owed < ctx->am_credits_return) || atomic_load(&p->dead))
        return;
    struct nv_am_hdr h = { .handler = NV_AMH_CREDIT };
    nv_am_send(ctx, p, &h, NULL, NULL, NV_AMS_REPLY | NV_AMS_NOW);
}

/* --- sending -------------------------------------------------------------------- */

netvm_status_t nv_am_send(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_hdr *h, const void *payload,
                          struct netvm_req *req, unsigned flags)
{
    if (req && nv_req_launch(req) != NETVM_OK)
        return NETVM_ERR_PEER;
    if (atomic_load_explicit(&p->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    struct nv_link *l = p->lp.link;
    if (!l)
        return NETVM_ERR_PEER;
    if (!credit_free(h)) {
        netvm_status_t st = take_credit(ctx, p);
        if (st != NETVM_OK)
            return st;
    }
    /* looked at before it is taken: most sends owe nothing (calls and
     * replies consume no credit), and the exchange is a locked instruction */
    uint32_t owed = atomic_load_explicit(&p->am_owed, memory_order_relaxed)
                        ? atomic_exchange_explicit(&p->am_owed, 0, memory_order_relaxed)
                        : 0;
    if (owed > UINT16_MAX) {
        atomic_fetch_add_explicit(&p->am_owed, owed - UINT16_MAX, memory_order_relaxed);
        owed = UINT16_MAX;
    }
    h->credits = (uint16_t)owed;
    /* a request's origin travels only when it is not its sender: a
     * forwarded call (wire/am.h) */
    if ((h->flags & NV_AMW_F_TOKEN) && h->token.origin != ctx->uuid)
        h->flags |= NV_AMW_F_ORIGIN;
    uint8_t hdr[NV_AM_HDR_MAX];
    size_t hlen = nv_am_hdr_encode(h, hdr);
    netvm_status_t st = l->ops->am_send(l, &p->lp, hdr, hlen, payload, (size_t)h->len, flags, req,
                                        req ? nv_req_id(req) : 0);
    if (st == NETVM_OK || st == NV_LINK_PENDING)
        NV_AM_COUNT(ctx, sent);
    else if (!credit_free(h))
        atomic_fetch_add_explicit(&p->am_credits, 1, memory_order_relaxed);
    if (st != NETVM_OK && st != NV_LINK_PENDING && owed)
        atomic_fetch_add_explicit(&p->am_owed, owed, memory_order_relaxed);
    return st;
}

static netvm_status_t check_msg(unsigned nargs, const uint64_t *args, const void *payload, size_t len)
{
    if (nargs > NETVM_AM_MAX_ARGS || (nargs && !args) || (len && !payload))
        return NETVM_ERR_INVAL;
    if (len > NETVM_AM_MAX_LEN)
        return NETVM_ERR_BOUNDS;
    return NETVM_OK;
}

/* Every field set one by one: a memset of the whole header compiles to a
 * `rep stos`, whose start-up alone was about a tenth of a request's
 * sending side in a profile of 0-byte round trips. */
static void fill(struct nv_am_hdr *h, unsigned id, const uint64_t *args, unsigned nargs, size_t len)
{
    h->flags = 0;
    h->handler = (uint16_t)id;
    h->nargs = (uint8_t)nargs;
    h->status = 0;
    h->credits = 0;
    h->len = len;
    for (unsigned i = 0; i < NV_AM_MAX_ARGS; i++)
        h->args[i] = i < nargs ? args[i] : 0;
    h->token = (struct nv_am_token){ 0 };
}

/* A one-way message's common start (send, forward): its arguments checked,
 * its peer taken (the caller puts it back), its header filled in. */
static netvm_status_t start_msg(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args, unsigned nargs,
                                const void *payload, size_t len, struct nv_peer **p, struct nv_am_hdr *h)
{
    netvm_status_t st = check_msg(nargs, args, payload, len);
    if (st == NETVM_OK && (st = nv_peer_get(ctx, peer, p)) == NETVM_OK)
        fill(h, id, args, nargs, len);
    return st;
}

static int is_large(struct nv_peer *p, size_t len)
{
    return len > p->lp.link->ops->caps.am_eager;
}

netvm_status_t netvm_am_send(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args,
                             unsigned nargs, const void *payload, size_t len, netvm_req_t **reqp)
{
    if (reqp)
        *reqp = NULL;
    if (!ctx || id >= NETVM_AM_MAX_ID)
        return NETVM_ERR_INVAL;
    return nv_am_send_id(ctx, peer, id, args, nargs, payload, len, reqp, 0);
}

/* NV_AMS_LAZY stays only where a polling loop will send the frame
 * (nv_progress_may_hold). */
static unsigned lazy_if_held(netvm_ctx_t *ctx, unsigned flags)
{
    return (flags & NV_AMS_LAZY) && !nv_progress_may_hold(ctx) ? flags & ~NV_AMS_LAZY : flags;
}

/* After a lazy frame was queued: if the loop let the links go meanwhile,
 * its flush may have come before the frame. */
static void lazy_sent(netvm_ctx_t *ctx, unsigned flags)
{
    if ((flags & NV_AMS_LAZY) && !nv_progress_may_hold(ctx))
        nv_progress_flush_tx(ctx);
}

netvm_status_t nv_am_send_id(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args, unsigned nargs,
                             const void *payload, size_t len, netvm_req_t **reqp, unsigned flags)
{
    struct nv_peer *p;
    struct nv_am_hdr h;
    netvm_status_t st = start_msg(ctx, peer, id, args, nargs, payload, len, &p, &h);
    if (st != NETVM_OK)
        return st;
    if (!p->lp.link || !is_large(p, len)) {
        flags = lazy_if_held(ctx, flags & NV_AMS_LAZY);
        st = nv_am_send(ctx, p, &h, payload, NULL, flags);
        lazy_sent(ctx, flags);
        nv_peer_put(p);
        return st;
    }
    /* a large payload: the link tells when the receiver has it */
    if (!reqp && (st = nv_may_block()) != NETVM_OK) {
        nv_peer_put(p);
        return st;
    }
    struct netvm_req *q;
    st = nv_reserve_req(ctx, p, NULL, &q);
    if (st == NETVM_OK) {
        st = nv_am_send(ctx, p, &h, payload, q, 0);
        if (st == NV_LINK_PENDING && reqp) {
            *reqp = q;
            st = NETVM_OK;
        } else {
            st = nv_finish_req(ctx, q, st);
        }
    }
    nv_peer_put(p);
    return st;
}

/* --- requests and replies ---------------------------------------------------------- */

static void make_token(netvm_ctx_t *ctx, struct netvm_req *q, struct nv_am_token *t)
{
    uint32_t id = nv_req_id(q);
    /* keyed by a number no other call of this context ever had: a call id
     * comes round again (a request slot's 16-bit use count wraps), the
     * slot's 64-bit count of calls never does, and the id holds the slot's
     * index. The slot is ours until the call is over: a plain increment */
    uint64_t n = ++q->calls;
    uint64_t key = nv_siphash2(ctx->token_key, n, 0x63616c6cull << 32 | id);   /* "call" */
    t->origin = ctx->uuid;
    t->call = id;
    t->key = key;
    /* a payload token even without a reply buffer: a reply with a payload
     * then reaches the caller, and fails its request (NETVM_ERR_BOUNDS);
     * its key comes from the call's (wire/am.h) */
    t->pindex = 1;
    t->pkey = nv_am_pkey(key);
    atomic_store_explicit(&q->pkey, t->pkey, memory_order_relaxed);
    atomic_store_explicit(&q->key, key, memory_order_release);
}

/* How a request's payload travels. Only the reply completes a request, so
 * the link gets no request to complete when a large payload has left: it
 * copies the payload instead (the caller may reuse it once the request
 * completes, and a replier may answer before the payload has even left). */
static unsigned request_flags(struct nv_peer *p, size_t len)
{
    return p->lp.link && is_large(p, len) ? NV_AMS_COPY : 0;
}

/* The payload key a reply must carry to land in q's reply buffer. */
uint64_t nv_am_reply_pkey(netvm_ctx_t *ctx, struct netvm_req *q)
{
    (void)ctx;
    return atomic_load_explicit(&q->pkey, memory_order_relaxed);   /* written before q->key was published */
}

netvm_status_t nv_am_call(netvm_ctx_t *ctx, struct nv_peer *p, struct netvm_req *q, uint16_t handler,
                          const uint64_t *args, unsigned nargs, const void *payload, size_t len, unsigned lazy)
{
    struct nv_am_hdr h;
    fill(&h, handler, args, nargs, len);
    h.flags = NV_AMW_F_TOKEN;
    make_token(ctx, q, &h.token);
    if (nv_req_launch(q) != NETVM_OK)
        return NETVM_ERR_PEER;
    unsigned flags = request_flags(p, len);
    if (!flags)   /* eager */
        flags = lazy_if_held(ctx, lazy & NV_AMS_LAZY);
    netvm_status_t st = nv_am_send(ctx, p, &h, payload, NULL, flags);
    lazy_sent(ctx, flags);
    return st == NETVM_OK ? NV_LINK_PENDING : st;
}

netvm_status_t netvm_am_request(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args,
                                unsigned nargs, const void *payload, size_t len, void *reply_buf,
                                size_t reply_cap, netvm_am_result_t *result, netvm_req_t **reqp)
{
    if (reqp)
        *reqp = NULL;
    if (!ctx || id >= NETVM_AM_MAX_ID)
        return NETVM_ERR_INVAL;
    return nv_am_request_id(ctx, peer, id, args, nargs, payload, len, reply_buf, reply_cap, result, reqp);
}

netvm_status_t nv_am_request_id(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args, unsigned nargs,
                                const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                                netvm_am_result_t *result, netvm_req_t **reqp)
{
    if (reply_cap && !reply_buf)
        return NETVM_ERR_INVAL;
    netvm_status_t st = check_msg(nargs, args, payload, len);
    if (st != NETVM_OK)
        return st;
    if (!reqp && (st = nv_may_block()) != NETVM_OK)
        return st;
    struct nv_peer *p;
    if ((st = nv_peer_get(ctx, peer, &p)) != NETVM_OK)
        return st;
    struct netvm_req *q;
    st = nv_reserve_req(ctx, p, NULL, &q);
    if (st == NETVM_OK) {
        q->amres = result ? result : &q->own_res;
        memset(q->amres, 0, sizeof *q->amres);
        q->amres->peer = -1;
        q->rbuf = reply_buf;
        q->rcap = reply_cap;
        st = nv_am_call(ctx, p, q, (uint16_t)id, args, nargs, payload, len, 0);   /* the reply completes it */
        if (st == NV_LINK_PENDING && reqp) {
            *reqp = q;
            st = NETVM_OK;
        } else {
            st = nv_finish_req(ctx, q, st);
        }
    }
    nv_peer_put(p);
    return st;
}

/* A token whose payload index the wire cannot carry (it only knows 0 and
 * 1): sent, the receiver would take the whole message as malformed and
 * drop it (shm) or the connection with it (tcp). */
static int token_bad(const netvm_am_token_t *pub)
{
    return (pub->w[1] >> 32) > 1;
}

/* A token whose payload key is not its call's (wire/am.h derives one from
 * the other and sends only the call's): altered, so refused here, where it
 * is held, rather than sent on with a key the wire would not carry. */
static int token_pkey_bad(const netvm_am_token_t *pub)
{
    return (pub->w[1] >> 32) == 1 && pub->w[3] != nv_am_pkey(pub->w[2]);
}

static void token_from_pub(const netvm_am_token_t *pub, struct nv_am_token *t)
{
    t->origin = pub->w[0];
    t->call = (uint32_t)pub->w[1];
    t->pindex = (uint32_t)(pub->w[1] >> 32);
    t->key = pub->w[2];
    t->pkey = pub->w[3];
}

void nv_am_token_to_pub(const struct nv_am_token *t, netvm_am_token_t *pub)
{
    pub->w[0] = t->origin;
    pub->w[1] = (uint64_t)t->pindex << 32 | t->call;
    pub->w[2] = t->key;
    pub->w[3] = t->pkey;
}

/* The peer a token's origin is: the sender of the message it came with, if
 * that is the origin (the common two-way call), else looked up. */
static struct nv_peer *origin_peer(netvm_ctx_t *ctx, const struct nv_am_token *t)
{
    if (t->origin == ctx->uuid) {
        struct nv_peer *me = nv_rank_peer(ctx, ctx->rank);
        return me;   /* a call to ourselves */
    }
    return nv_peer_by_uuid(ctx, t->origin);
}

/* Answers and forwards never block and never leave the caller's payload
 * referenced: what the link cannot send at once it copies. */
static netvm_status_t send_reply(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_token *t,
                                 netvm_status_t status, const uint64_t *args, unsigned nargs,
                                 const void *payload, size_t len)
{
    if (len && !t->pindex)
        return NETVM_ERR_BOUNDS;   /* the caller named no buffer for a reply's payload */
    struct nv_am_hdr h;
    fill(&h, 0, args, nargs, len);
    h.flags = NV_AMW_F_REPLY;
    h.status = (uint8_t)status;
    h.token = *t;
    return nv_am_send(ctx, p, &h, payload, NULL, NV_AMS_REPLY | NV_AMS_COPY);
}

netvm_status_t netvm_am_reply(netvm_ctx_t *ctx, const netvm_am_token_t *token, netvm_status_t status,
                              const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!ctx || !token || (unsigned)status >= NETVM_STATUS_COUNT || token_bad(token))
        return NETVM_ERR_INVAL;
    if (token_pkey_bad(token))
        return NETVM_ERR_KEY;
    netvm_status_t st = check_msg(nargs, args, payload, len);
    if (st != NETVM_OK)
        return st;
    struct nv_am_token t;
    token_from_pub(token, &t);
    struct nv_peer *p = origin_peer(ctx, &t);
    if (!p)
        return NETVM_ERR_PEER;
    NV_AM_COUNT(ctx, replies);
    st = send_reply(ctx, p, &t, status, args, nargs, payload, len);
    nv_peer_put(p);
    return st;
}

netvm_status_t netvm_am_forward(netvm_ctx_t *ctx, int peer, unsigned id, const netvm_am_token_t *token,
                                const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!ctx || id >= NETVM_AM_MAX_ID)
        return NETVM_ERR_INVAL;
    return nv_am_forward_id(ctx, peer, id, token, args, nargs, payload, len);
}

netvm_status_t nv_am_forward_id(netvm_ctx_t *ctx, int peer, unsigned id, const netvm_am_token_t *token,
                                const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!token || token_bad(token))
        return NETVM_ERR_INVAL;
    if (token_pkey_bad(token))
        return NETVM_ERR_KEY;
    struct nv_peer *p;
    struct nv_am_hdr h;
    netvm_status_t st = start_msg(ctx, peer, id, args, nargs, payload, len, &p, &h);
    if (st != NETVM_OK)
        return st;
    h.flags = NV_AMW_F_TOKEN;
    token_from_pub(token, &h.token);
    st = nv_am_send(ctx, p, &h, payload, NULL, NV_AMS_REPLY | NV_AMS_COPY);
    nv_peer_put(p);
    return st;
}

/* Core's answer to a request it served (am_core.c). */
void nv_am_answer(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *req, netvm_status_t st,
                  const uint64_t *args, unsigned nargs, const void *payload, size_t len)
{
    if (!(req->flags & NV_AMW_F_TOKEN))
        return;
    struct nv_peer *o = p;
    if (req->token.origin != p->uuid) {
        o = origin_peer(ctx, &req->token);
        if (!o) {
            nv_debug("answer to an unknown origin dropped");
            return;
        }
    }
    if (send_reply(ctx, o, &req->token, st, args, nargs, payload, len) != NETVM_OK)
        nv_debug("answer to peer %d dropped: it is gone", nv_peer_id(o));
    if (o != p)
        nv_peer_put(o);
}
