/* The mailbox (include/netvm/msg.h): tagged messages into a per-context
 * receive ring, carried as the services' eager active messages.
 *
 * A message is one one-way active message to service handler NV_SVC_MSG
 * with args {tag, seq}. On shm that is a record in the receiver's shared
 * ring: a few stores and no system call unless the receiver sleeps. The
 * receiving handler copies it into a slot of the mailbox (local memory)
 * and posts NETVM_EV_MESSAGE if asked; a full mailbox makes the handler
 * defer the message, which keeps the sender's credit, so a receiver that
 * stops reading holds its senders back and nothing is lost.
 *
 * Order: the active-message layer hands a peer's messages over in order,
 * but re-runs deferred ones later and possibly on several threads at once.
 * So each sender numbers its messages per destination (seq) and the
 * mailbox accepts only the next number of each source, deferring the
 * rest. The number is taken under a per-destination lock and committed
 * only when the send succeeded, so a failed send leaves no gap.
 *
 * A payload above the link's eager size arrives by rendezvous: its slot is
 * reserved in order and marked landing; later messages of that source are
 * not matched until it has landed. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "core/svc.h"
#include "util/config.h"
#include "util/log.h"
#include "util/spinlock.h"
#include "util/thread.h"

#include <netvm/msg.h>

#include <stdlib.h>
#include <string.h>

#define MB_NONE       UINT32_MAX
#define MB_MAX_LIMIT  (1u << 20)
#define MB_SLOTS_MAX  (1u << 20)
/* blocked sources a match scan remembers; more: stop scanning (found later) */
#define MB_BLOCKED    8
#define MB_DST_PAGE   256
#define MB_DST_PAGES  ((1u << NV_PEER_IDX_BITS) / MB_DST_PAGE)

enum { MB_ARG_TAG, MB_ARG_SEQ, MB_NARGS };

struct mb_slot {
    uint32_t next, prev;    /* arrival order; MB_NONE ends */
    int      src;
    int      landing;       /* a large payload not yet here: not matched */
    uint64_t tag;
    size_t   len;
    char    *buf;           /* kept across uses, grown on demand */
    size_t   bufcap;
};

/* The receive side of one source, by peer index. */
struct mb_src {
    int      id;            /* the peer id it was made for (a reused index resets it) */
    int      used;
    uint64_t expect;        /* the next seq to accept */
};

/* The send side of one destination, by peer index. */
struct mb_dst {
    nv_spinlock_t   lock;   /* numbering and sending, one at a time */
    int             id;
    int             used;
    uint64_t        next;
};

struct nv_mailbox {
    nv_spinlock_t   lock;   /* slots, lists, sources */
    size_t          max;
    uint32_t        nslots;
    int             events;
    struct mb_slot *slot;
    uint32_t        head, tail, free;
    uint32_t        used;       /* written under lock, read without it by a receive's first look */
    struct mb_src  *src;
    uint32_t        nsrc;
    /* the send side by peer index: pages of MB_DST_PAGE entries, made on
     * demand under dst_lock and never freed before the mailbox, so a send
     * finds its destination without a lock */
    pthread_mutex_t dst_lock;
    _Atomic(struct mb_dst *) *_Atomic dst_page[MB_DST_PAGES];
    uint64_t        dropped;    /* too large for this mailbox */
};

/* netvm_msg_setup's options, for the create callback it runs */
static _Thread_local const netvm_msg_opts_t *setup_opts NV_TLS_IE;

static void mb_destroy(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    struct nv_mailbox *mb = state;
    for (uint32_t i = 0; i < mb->nslots; i++)
        free(mb->slot[i].buf);
    for (uint32_t p = 0; p < MB_DST_PAGES; p++) {
        _Atomic(struct mb_dst *) *page = mb->dst_page[p];
        if (!page)
            continue;
        for (uint32_t i = 0; i < MB_DST_PAGE; i++) {
            struct mb_dst *d = page[i];
            free(d);
        }
        free((void *)page);
    }
    free(mb->src);
    free(mb->slot);
    pthread_mutex_destroy(&mb->dst_lock);
    free(mb);
}

static void *mb_create(netvm_ctx_t *ctx)
{
    (void)ctx;
    const netvm_msg_opts_t *o = setup_opts;
    struct nv_mailbox *mb = calloc(1, sizeof *mb);
    if (!mb)
        return NULL;
    mb->max = o && o->max_size ? o->max_size : (size_t)nv_config_long("NETVM_MSG_MAX", 0, MB_MAX_LIMIT);
    mb->nslots = o && o->slots ? o->slots : (uint32_t)nv_config_long("NETVM_MSG_SLOTS", 1, MB_SLOTS_MAX);
    mb->events = o && o->events ? o->events > 0 : (int)nv_config_long("NETVM_MSG_EVENTS", 0, 1);
    mb->slot = calloc(mb->nslots, sizeof *mb->slot);
    if (!mb->slot) {
        free(mb);
        return NULL;
    }
    for (uint32_t i = 0; i < mb->nslots; i++)
        mb->slot[i].next = i + 1 < mb->nslots ? i + 1 : MB_NONE;
    mb->free = 0;
    mb->head = mb->tail = MB_NONE;
    pthread_mutex_init(&mb->dst_lock, NULL);
    return mb;
}

static struct nv_mailbox *mailbox(netvm_ctx_t *ctx)
{
    return nv_svc_state(ctx, NV_SVC_STATE_MSG, mb_create, mb_destroy);
}

/* --- the receiving side ---------------------------------------------------------- */

/* The source state of peer id (under mb->lock); NULL: no memory. */
static struct mb_src *source_of(struct nv_mailbox *mb, int id)
{
    uint32_t i = NV_PEER_IDX(id);
    if (i >= mb->nsrc) {
        uint32_t n = mb->nsrc ? mb->nsrc : 16;
        while (n <= i)
            n *= 2;
        struct mb_src *s = realloc(mb->src, n * sizeof *s);
        if (!s)
            return NULL;
        memset(s + mb->nsrc, 0, (n - mb->nsrc) * sizeof *s);
        mb->src = s;
        mb->nsrc = n;
    }
    struct mb_src *s = &mb->src[i];
    if (!s->used || s->id != id) {
        s->used = 1;
        s->id = id;
        s->expect = 0;
    }
    return s;
}

static void link_tail(struct nv_mailbox *mb, uint32_t i)
{
    struct mb_slot *e = &mb->slot[i];
    e->next = MB_NONE;
    e->prev = mb->tail;
    if (mb->tail != MB_NONE)
        mb->slot[mb->tail].next = i;
    else
        mb->head = i;
    mb->tail = i;
    __atomic_store_n(&mb->used, mb->used + 1, __ATOMIC_RELEASE);
}

static void unlink_slot(struct nv_mailbox *mb, uint32_t i)
{
    struct mb_slot *e = &mb->slot[i];
    if (e->prev != MB_NONE)
        mb->slot[e->prev].next = e->next;
    else
        mb->head = e->next;
    if (e->next != MB_NONE)
        mb->slot[e->next].prev = e->prev;
    else
        mb->tail = e->prev;
    e->next = mb->free;
    mb->free = i;
    __atomic_store_n(&mb->used, mb->used - 1, __ATOMIC_RELAXED);
}

static void post_event(netvm_ctx_t *ctx, int src, uint64_t tag, size_t len)
{
    struct nv_ep_rec r = { .type = NETVM_EV_MESSAGE, .rank = src, .value = tag, .len = len };
    nv_evq_post_local(ctx, &r);
}

struct landing {
    struct nv_mailbox *mb;
    uint32_t           slot;
};

static void landed(netvm_ctx_t *ctx, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    (void)msg;
    struct landing *l = (struct landing *)arg;
    struct nv_mailbox *mb = l->mb;
    uint32_t i = l->slot;
    free(l);
    if (nv_svc_state_if(ctx, NV_SVC_STATE_MSG) != mb)
        return;   /* finalize: the mailbox is gone (a transfer the teardown failed) */
    nv_spin_lock(&mb->lock);
    int src = mb->slot[i].src;
    uint64_t tag = mb->slot[i].tag;
    size_t len = mb->slot[i].len;
    if (st == NETVM_OK)
        mb->slot[i].landing = 0;
    else
        unlink_slot(mb, i);   /* the sender died or its buffer went: nothing to receive */
    nv_spin_unlock(&mb->lock);
    if (st != NETVM_OK)
        nv_warn("a message of peer %d was lost while it landed: %s", src, netvm_strerror(st));
    else if (mb->events)
        post_event(ctx, src, tag, len);
}

static int on_message(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    struct nv_mailbox *mb = mailbox(ctx);
    if (!mb)
        return NETVM_AM_DEFER;   /* no memory now: the sender waits, nothing is lost */
    if (msg->nargs < MB_NARGS) {
        nv_warn("malformed message of peer %d dropped", msg->peer);
        return NETVM_AM_DONE;
    }
    uint64_t tag = msg->args[MB_ARG_TAG], seq = msg->args[MB_ARG_SEQ];
    nv_spin_lock(&mb->lock);
    struct mb_src *s = source_of(mb, msg->peer);
    if (!s || seq != s->expect || (mb->used == mb->nslots && msg->len <= mb->max)) {
        nv_spin_unlock(&mb->lock);
        return NETVM_AM_DEFER;
    }
    s->expect++;
    if (msg->len > mb->max) {
        mb->dropped++;
        nv_spin_unlock(&mb->lock);
        nv_warn("a message of %zu bytes from peer %d is above NETVM_MSG_MAX=%zu here: dropped", msg->len,
                msg->peer, mb->max);
        return NETVM_AM_DONE;
    }
    uint32_t i = mb->free;
    struct mb_slot *e = &mb->slot[i];
    if (e->bufcap < msg->len) {
        size_t cap = msg->len < 64 ? 64 : msg->len;
        char *b = realloc(e->buf, cap);
        if (!b) {
            s->expect--;
            nv_spin_unlock(&mb->lock);
            return NETVM_AM_DEFER;
        }
        e->buf = b;
        e->bufcap = cap;
    }
    mb->free = e->next;
    e->src = msg->peer;
    e->tag = tag;
    e->len = msg->len;
    int landing = e->landing = msg->len && !msg->payload;
    if (!landing && msg->len)
        memcpy(e->buf, msg->payload, msg->len);
    char *dst = e->buf;
    link_tail(mb, i);
    nv_spin_unlock(&mb->lock);
    if (!landing) {
        if (mb->events)
            post_event(ctx, msg->peer, tag, msg->len);
        return NETVM_AM_DONE;
    }
    struct landing *l = malloc(sizeof *l);
    if (l)
        *l = (struct landing){ mb, i };
    netvm_status_t st = l ? netvm_am_recv(ctx, msg, dst, landed, l) : NETVM_ERR_NOMEM;
    if (st != NETVM_OK) {
        free(l);
        nv_spin_lock(&mb->lock);
        unlink_slot(mb, i);
        nv_spin_unlock(&mb->lock);
        nv_warn("a message of peer %d was lost: %s", msg->peer, netvm_strerror(st));
    }
    return NETVM_AM_DONE;
}

netvm_status_t nv_msg_init(netvm_ctx_t *ctx)
{
    return nv_svc_register(ctx, NV_SVC_MSG + 0, on_message, NULL);
}

/* --- sending --------------------------------------------------------------------- */

static struct mb_dst *dest_of(struct nv_mailbox *mb, int id)
{
    uint32_t i = NV_PEER_IDX(id);
    _Atomic(struct mb_dst *) *page = atomic_load_explicit(&mb->dst_page[i / MB_DST_PAGE], memory_order_acquire);
    struct mb_dst *d = page ? atomic_load_explicit(&page[i % MB_DST_PAGE], memory_order_acquire) : NULL;
    if (d)
        return d;
    pthread_mutex_lock(&mb->dst_lock);
    page = mb->dst_page[i / MB_DST_PAGE];
    if (!page) {
        page = calloc(MB_DST_PAGE, sizeof *page);
        if (page)
            atomic_store_explicit(&mb->dst_page[i / MB_DST_PAGE], page, memory_order_release);
    }
    if (page && !(d = page[i % MB_DST_PAGE]) && (d = calloc(1, sizeof *d)) != NULL)
        atomic_store_explicit(&page[i % MB_DST_PAGE], d, memory_order_release);
    pthread_mutex_unlock(&mb->dst_lock);
    return d;
}

static netvm_status_t send_msg(netvm_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                               netvm_req_t **req)
{
    if (req)
        *req = NULL;
    if (!ctx || (!buf && len) || tag == NETVM_MSG_ANY_TAG)
        return NETVM_ERR_INVAL;
    struct nv_mailbox *mb = mailbox(ctx);
    if (!mb)
        return NETVM_ERR_NOMEM;
    if (len > mb->max)
        return NETVM_ERR_BOUNDS;
    if (peer < 0)
        return NETVM_ERR_RANK;
    struct mb_dst *d = dest_of(mb, peer);
    if (!d)
        return NETVM_ERR_NOMEM;
    if (nv_in_handler) {
        /* the holder may be this very thread, waiting below us */
        if (!nv_spin_trylock(&d->lock))
            return NETVM_ERR_AGAIN;
    } else {
        nv_spin_lock(&d->lock);
    }
    if (!d->used || d->id != peer) {
        d->used = 1;
        d->id = peer;
        d->next = 0;
    }
    uint64_t args[MB_NARGS] = { [MB_ARG_TAG] = tag, [MB_ARG_SEQ] = d->next };
    /* a nonblocking send from a polling loop may leave with the loop's
     * next call (a stream of them: one system call on tcp, not one each) */
    netvm_status_t st = nv_am_send_id(ctx, peer, nv_svc_am_id(NV_SVC_MSG + 0), args, MB_NARGS, buf, len, req,
                                      req ? NV_AMS_LAZY : 0);
    if (st == NETVM_OK)
        d->next++;
    nv_spin_unlock(&d->lock);
    return st;
}

netvm_status_t netvm_msg_send(netvm_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len)
{
    return send_msg(ctx, peer, tag, buf, len, NULL);
}

netvm_status_t netvm_msg_isend(netvm_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                               netvm_req_t **req)
{
    if (!req)
        return NETVM_ERR_INVAL;
    return send_msg(ctx, peer, tag, buf, len, req);
}

/* --- receiving and probing ------------------------------------------------------- */

/* The oldest matchable slot (under mb->lock), or MB_NONE. A landing slot
 * hides the later ones of its source: they must not overtake it. */
static uint32_t match(struct nv_mailbox *mb, int source, uint64_t tag)
{
    int blocked[MB_BLOCKED];
    unsigned nb = 0;
    for (uint32_t i = mb->head; i != MB_NONE; i = mb->slot[i].next) {
        const struct mb_slot *e = &mb->slot[i];
        if (source != NETVM_MSG_ANY_SOURCE && e->src != source)
            continue;
        int hidden = 0;
        for (unsigned k = 0; k < nb && !hidden; k++)
            hidden = blocked[k] == e->src;
        if (hidden)
            continue;
        if (e->landing) {
            if (nb == MB_BLOCKED)
                return MB_NONE;   /* too many to track: look again once they landed */
            blocked[nb++] = e->src;
            continue;
        }
        if (tag == NETVM_MSG_ANY_TAG || e->tag == tag)
            return i;
    }
    return MB_NONE;
}

/* NETVM_OK if source may still send or is a wildcard; else why not. */
static netvm_status_t source_state(netvm_ctx_t *ctx, int source)
{
    if (source == NETVM_MSG_ANY_SOURCE)
        return NETVM_OK;
    struct nv_peer *p;
    netvm_status_t st = nv_peer_get(ctx, source, &p);
    if (st != NETVM_OK)
        return st;
    int dead = atomic_load(&p->dead);
    nv_peer_put(p);
    return dead ? NETVM_ERR_PEER : NETVM_OK;
}

struct take {
    netvm_ctx_t       *ctx;
    struct nv_mailbox *mb;
    int                source;
    uint64_t           tag;
    void              *buf;     /* NULL with take 0: a probe */
    size_t             cap;
    int                take;
    netvm_msg_info_t  *info;
    netvm_status_t     st;      /* NETVM_ERR_AGAIN: nothing yet */
};

static int take_match_locked(struct take *t);

/* Take (or probe) the oldest match; 1 if there was one. */
static int take_match(struct take *t)
{
    nv_spin_lock(&t->mb->lock);
    return take_match_locked(t);
}

/* The same, except that an empty mailbox is seen without the lock (a
 * polling receiver mostly finds it empty): for a first look only, which
 * may miss a message stored this instant; the look that follows the
 * source's death takes the lock, and sees all the source ever sent. */
static int take_match_quick(struct take *t)
{
    if (!__atomic_load_n(&t->mb->used, __ATOMIC_ACQUIRE))
        return 0;
    nv_spin_lock(&t->mb->lock);
    return take_match_locked(t);
}

/* take_match with mb->lock held; drops it. */
static int take_match_locked(struct take *t)
{
    uint32_t i = match(t->mb, t->source, t->tag);
    if (i == MB_NONE) {
        nv_spin_unlock(&t->mb->lock);
        return 0;
    }
    struct mb_slot *e = &t->mb->slot[i];
    if (t->info)
        *t->info = (netvm_msg_info_t){ .source = e->src, .tag = e->tag, .len = e->len };
    if (!t->take) {
        t->st = NETVM_OK;
    } else if (e->len > t->cap) {
        t->st = NETVM_ERR_BOUNDS;
    } else {
        if (e->len)
            memcpy(t->buf, e->buf, e->len);
        unlink_slot(t->mb, i);
        t->st = NETVM_OK;
    }
    nv_spin_unlock(&t->mb->lock);
    return 1;
}

/* One look: a match is taken (or probed), a dead source ends the wait. */
static int look(void *arg)
{
    struct take *t = arg;
    if (take_match_quick(t))
        return 1;
    netvm_status_t alive = source_state(t->ctx, t->source);
    if (alive == NETVM_OK)
        return 0;
    /* what it sent before it was known dead is here by now: look again */
    if (take_match(t))
        return 1;
    t->st = alive;
    return 1;
}

static netvm_status_t start(struct take *t, netvm_ctx_t *ctx, int source, uint64_t tag, void *buf, size_t cap,
                            netvm_msg_info_t *info, int take)
{
    if (!ctx || source < NETVM_MSG_ANY_SOURCE || (take && !buf && cap))
        return NETVM_ERR_INVAL;
    struct nv_mailbox *mb = mailbox(ctx);
    if (!mb)
        return NETVM_ERR_NOMEM;
    *t = (struct take){ ctx, mb, source, tag, buf, cap, take, info, NETVM_ERR_AGAIN };
    return NETVM_OK;
}

/* Look; if nothing, one pass of progress (outside handlers) and look again. */
static netvm_status_t look_now(struct take *t)
{
    if (nv_in_handler) {
        look(t);
        return t->st;
    }
    nv_progress_flush_tx(t->ctx);   /* what this thread held for its next call */
    if (look(t))
        return t->st;
    netvm_progress(t->ctx);
    look(t);
    return t->st;
}

netvm_status_t netvm_msg_try_recv(netvm_ctx_t *ctx, int source, uint64_t tag, void *buf, size_t cap,
                                  netvm_msg_info_t *info)
{
    struct take t;
    netvm_status_t st = start(&t, ctx, source, tag, buf, cap, info, 1);
    return st != NETVM_OK ? st : look_now(&t);
}

netvm_status_t netvm_msg_probe(netvm_ctx_t *ctx, int source, uint64_t tag, netvm_msg_info_t *info)
{
    struct take t;
    netvm_status_t st = start(&t, ctx, source, tag, NULL, 0, info, 0);
    return st != NETVM_OK ? st : look_now(&t);
}

netvm_status_t netvm_msg_recv(netvm_ctx_t *ctx, int source, uint64_t tag, void *buf, size_t cap,
                              netvm_msg_info_t *info, int timeout_ms)
{
    struct take t;
    netvm_status_t st = start(&t, ctx, source, tag, buf, cap, info, 1);
    if (st != NETVM_OK)
        return st;
    if (timeout_ms == 0)
        return look_now(&t);
    if ((st = nv_may_block()) != NETVM_OK)
        return st;
    nv_progress_flush_tx(ctx);
    if (look(&t))
        return t.st;
    st = nv_progress_wait(ctx, look, &t, timeout_ms, 1);
    return st == NETVM_OK ? t.st : st;
}

netvm_status_t netvm_msg_setup(netvm_ctx_t *ctx, const netvm_msg_opts_t *opts)
{
    if (!ctx || (opts && opts->max_size > MB_MAX_LIMIT) || (opts && opts->slots > MB_SLOTS_MAX))
        return NETVM_ERR_INVAL;
    if (nv_svc_state_if(ctx, NV_SVC_STATE_MSG))
        return NETVM_ERR_STATE;
    netvm_msg_opts_t none = { 0 };
    setup_opts = opts ? opts : &none;
    struct nv_mailbox *mb = mailbox(ctx);
    setup_opts = NULL;
    if (!mb)
        return NETVM_ERR_NOMEM;
    /* a message that arrived meanwhile made it with the environment's */
    if (opts && ((opts->max_size && mb->max != opts->max_size) || (opts->slots && mb->nslots != opts->slots) ||
                 (opts->events && mb->events != (opts->events > 0))))
        return NETVM_ERR_STATE;
    return NETVM_OK;
}
