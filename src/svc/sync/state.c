/* svc/sync: the per-context state, wait nodes and the messages that wake
 * them. A waiter sleeps on a node of its own process; wakes and MCS links
 * arrive as one-way service messages whose handlers store into the node;
 * the waiter waits in core's progress loop, which serves them. */
#include "svc/sync/sync_int.h"
#include "core/internal.h"   /* nv_in_handler, and core's waiting loop (nv_progress_wait) */
#include "util/config.h"
#include "util/time.h"

#include <linux/futex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int nv_sync_check_ms(void)
{
    static _Atomic int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v > 0)
        return v;
    v = (int)nv_config_long("NETVM_SYNC_CHECK_MS", 1, 60000);
    atomic_store_explicit(&cached, v, memory_order_relaxed);
    return v;
}

/* --- the effects of wake and link on a node -------------------------------- */

/* Process-shared (no FUTEX_PRIVATE_FLAG): a waker on this machine that
 * stored into the node through its own mapping wakes the sleeper too. */
static void futex_wake_all(_Atomic uint32_t *w)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Bump the node's futex word, waking a thread asleep on it; *want_msg:
 * its waiter sleeps in core's loop and wants the message too. */
static void bump(struct nv_sync_shnode *n, int *want_msg)
{
    /* The store before this (a compare-swap) and this load, against the
     * waiter's flag and its next look at the node (sleep): either the
     * waiter sees the store, or this sees the flag. No flag: nothing to
     * do, and no locked instruction on the waiter's line while it spins
     * on it. NV_SYNC_WANT_MSG stays: it is the waiter's to clear (a link
     * behind a waiter bumps its node while it still waits for its wake). */
    uint32_t old = atomic_load(&n->seq);
    if (!(old & (NV_SYNC_SLEEPING | NV_SYNC_WANT_MSG))) {
        if (want_msg)
            *want_msg = 0;
        return;
    }
    while (!atomic_compare_exchange_weak(&n->seq, &old, ((old + 1) & NV_SYNC_SEQ_COUNT) | (old & NV_SYNC_WANT_MSG)))
        ;
    if (old & NV_SYNC_SLEEPING)
        futex_wake_all(&n->seq);
    if (want_msg)
        *want_msg = (old & NV_SYNC_WANT_MSG) != 0;
}

int nv_sync_wake_node(struct nv_sync_shnode *n, uint32_t ticket, netvm_status_t status, int *want_msg)
{
    uint64_t want = ticket;   /* only the wait this ticket names, and only once */
    if (!atomic_compare_exchange_strong(&n->wake, &want, (uint64_t)ticket | ((uint64_t)status + 1) << 32))
        return 0;
    bump(n, want_msg);
    return 1;
}

int nv_sync_link_node(struct nv_sync_shnode *n, uint32_t ticket, uint64_t succ, int *want_msg)
{
    /* a link always reaches a live use: the predecessor waits for it
     * before it frees the node (nv_sync_mcs_release) */
    if (succ == 0 || atomic_load(&n->ticket) != ticket)
        return 0;
    uint64_t seen = 0;
    if (atomic_compare_exchange_strong(&n->next, &seen, succ)) {
        bump(n, want_msg);
        return 1;
    }
    return seen == NV_SYNC_RELEASING ? -1 : 0;
}

static void apply_wake(struct nv_sync_state *st, unsigned slot, uint32_t ticket, netvm_status_t status)
{
    if (slot < NV_SYNC_NODES)
        nv_sync_wake_node(&st->sh[slot], ticket, status, NULL);
}

/* 0, or -1: try again later (no credit for the wake, inside a handler) */
static int apply_link(struct nv_sync_state *st, unsigned slot, uint32_t ticket, uint64_t succ)
{
    if (slot >= NV_SYNC_NODES || nv_sync_link_node(&st->sh[slot], ticket, succ, NULL) >= 0)
        return 0;
    /* the holder released without waiting for its compare-swap at the
     * home, which this successor's swap made fail: the lock is handed over
     * here (a successor that died meanwhile is seen by the waiters behind
     * it, which watch their predecessor) */
    netvm_status_t s = nv_sync_send_wake(st, succ, NETVM_OK);
    if (s == NETVM_ERR_AGAIN)
        return -1;
    nv_sync_rel_end(st, &st->nodes[slot], NV_SYNC_REL_LINK);
    return 0;
}

void nv_sync_rel_end(struct nv_sync_state *st, struct nv_sync_node *n, unsigned what)
{
    const unsigned both = NV_SYNC_REL_CAS | NV_SYNC_REL_LINK;
    unsigned before = atomic_fetch_or(&n->rel, what);
    if (before != both && (before | what) == both)
        nv_sync_node_put(st, (unsigned)(n - st->nodes));
}

static int on_wake(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    if (m->nargs == 3)
        apply_wake(arg, (unsigned)m->args[0], (uint32_t)m->args[1], (netvm_status_t)m->args[2]);
    return NETVM_AM_DONE;
}

static int on_link(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    if (m->nargs == 3 && apply_link(arg, (unsigned)m->args[0], (uint32_t)m->args[1], m->args[2]) != 0)
        return NETVM_AM_DEFER;
    return NETVM_AM_DONE;
}

/* An operation at this home. It is applied once (the first call) and
 * answered at once; the wakes it makes that found no flow-control credit
 * wait in st->pending, and the message defers itself until they are
 * sent. */
static int on_home(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    struct nv_sync_state *st = arg;
    if (m->deferred == 0) {
        uint64_t out[4] = { 0 };
        unsigned nout = 0;
        netvm_status_t s = NETVM_ERR_INVAL;
        pthread_mutex_lock(&st->lock);
        if (m->nargs == 5)
            s = nv_sync_home_op(st, m->peer, m->args, out, &nout);
        pthread_mutex_unlock(&st->lock);
        if (m->has_token)
            netvm_am_reply(ctx, &m->token, s, out, nout, NULL, 0);
    }
    nv_sync_flush_pending(st);
    pthread_mutex_lock(&st->lock);
    int more = st->pending != NULL;
    pthread_mutex_unlock(&st->lock);
    return more ? NETVM_AM_DEFER : NETVM_AM_DONE;
}

/* --- the state -------------------------------------------------------------- */

/* The last node a thread put back stays marked used, kept for that
 * thread's next get: an uncontended acquire and release then take no
 * locked instruction for their node. uid names the state (a state freed
 * and another made at its address do not share spares); a thread that
 * exits gives its spare back to its state if that still lives (the live
 * list), so threads that come and go leak no nodes. */
static __thread struct {
    uint64_t uid;    /* 0: none */
    unsigned slot;
    int      keyed;  /* the exit hook is set for this thread */
} spare NV_TLS_IE;

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nv_sync_state *live;
static pthread_key_t spare_key;
static int spare_key_ok;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void node_unmark(struct nv_sync_state *st, unsigned slot)
{
    atomic_fetch_and_explicit(&st->used[slot / 64], ~(1ull << (slot % 64)), memory_order_release);
}

static void spare_give_back(void *unused)
{
    (void)unused;
    struct nv_sync_state *st = spare.uid ? nv_sync_live_enter(spare.uid) : NULL;
    if (st) {
        node_unmark(st, spare.slot);
        nv_sync_live_leave();
    }
    spare.uid = 0;
}

static void spare_key_make(void)
{
    spare_key_ok = pthread_key_create(&spare_key, spare_give_back) == 0;
}

/* May this thread keep a spare? Only once its exit hook is set. */
static int spare_keyable(void)
{
    if (spare.keyed)
        return 1;
    pthread_once(&spare_once, spare_key_make);
    if (!spare_key_ok || pthread_setspecific(spare_key, (void *)1) != 0)
        return 0;
    return spare.keyed = 1;
}

struct nv_sync_state *nv_sync_live_enter(uint64_t uid)
{
    pthread_mutex_lock(&live_lock);
    for (struct nv_sync_state *st = live; st; st = st->live_next)
        if (st->uid == uid)
            return st;
    pthread_mutex_unlock(&live_lock);
    return NULL;
}

void nv_sync_live_leave(void)
{
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(struct nv_sync_state *st)
{
    pthread_mutex_lock(&live_lock);
    for (struct nv_sync_state **p = &live; *p; p = &(*p)->live_next)
        if (*p == st) {
            *p = st->live_next;
            break;
        }
    pthread_mutex_unlock(&live_lock);
}

/* finalize begins: stop using the peers' nodes before its imports go */
static void quiesce(netvm_ctx_t *ctx, void *state)
{
    (void)ctx;
    nv_sync_direct_off(state);
}

static void *state_create(netvm_ctx_t *ctx)
{
    struct nv_sync_state *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    static _Atomic uint64_t uids;
    st->ctx = ctx;
    st->me = netvm_rank(ctx);
    st->uid = atomic_fetch_add(&uids, 1) + 1;
    pthread_mutex_init(&st->lock, NULL);
    pthread_mutex_init(&st->direct_lock, NULL);
    nv_sync_nodes_make(st);
    if (!st->sh) {
        pthread_mutex_destroy(&st->direct_lock);
        pthread_mutex_destroy(&st->lock);
        free(st);
        return NULL;
    }
    pthread_mutex_lock(&live_lock);
    st->live_next = live;
    live = st;
    pthread_mutex_unlock(&live_lock);
    if (nv_svc_register(ctx, NV_SVC_SYNC + NV_SYNC_AM_WAKE, on_wake, st) != NETVM_OK ||
        nv_svc_register(ctx, NV_SVC_SYNC + NV_SYNC_AM_LINK, on_link, st) != NETVM_OK ||
        nv_svc_register(ctx, NV_SVC_SYNC + NV_SYNC_AM_HOME, on_home, st) != NETVM_OK) {
        live_remove(st);
        if (st->sh_seg)
            netvm_unexport(st->sh_seg);   /* (later, netvm_finalize does) */
        nv_sync_nodes_free(st);
        pthread_mutex_destroy(&st->direct_lock);
        pthread_mutex_destroy(&st->lock);
        free(st);
        return NULL;
    }
    return st;
}

static void state_destroy(netvm_ctx_t *ctx, void *p)
{
    (void)ctx;
    struct nv_sync_state *st = p;
    live_remove(st);
    for (uint32_t i = 0; i < st->nhomes; i++)
        if (st->homes[i])
            nv_sync_home_drop(st, st->homes[i]);
    free(st->homes);
    while (st->pending) {
        struct nv_sync_pending *n = st->pending->next;
        free(st->pending);
        st->pending = n;
    }
    nv_sync_nodes_free(st);
    pthread_mutex_destroy(&st->direct_lock);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

struct nv_sync_state *nv_sync_state(netvm_ctx_t *ctx)
{
    struct nv_sync_state *st = nv_svc_state(ctx, NV_SVC_STATE_SYNC, state_create, state_destroy);
    /* here, not in state_create: nv_svc_state runs create under the lock
     * this takes */
    if (st && !atomic_load_explicit(&st->quiesce_set, memory_order_acquire)) {
        nv_svc_on_finalize(ctx, NV_SVC_STATE_SYNC, quiesce);
        atomic_store_explicit(&st->quiesce_set, 1, memory_order_release);
    }
    return st;
}

/* --- nodes ------------------------------------------------------------------ */

/* A ticket for a new use of a slot: a link or wake message for one of its
 * earlier uses names another ticket and is ignored. Per slot, so taking
 * one needs no shared counter (the slot's owner alone counts); 0 is never
 * a ticket. */
static uint32_t fresh_ticket(struct nv_sync_node *n)
{
    if (++n->uses == 0)
        n->uses = 1;
    return n->uses;
}

netvm_status_t nv_sync_node_get(struct nv_sync_state *st, unsigned *slot, uint64_t *ref)
{
    if (spare.uid == st->uid) {
        spare.uid = 0;
        *slot = spare.slot;
        *ref = nv_sync_node_renew(st, *slot);
        return NETVM_OK;
    }
    for (unsigned w = 0; w < NV_SYNC_NODES / 64; w++) {
        uint64_t v = atomic_load(&st->used[w]);
        while (v != UINT64_MAX) {
            unsigned b = (unsigned)__builtin_ctzll(~v);
            if (atomic_compare_exchange_weak(&st->used[w], &v, v | 1ull << b)) {
                *slot = w * 64 + b;
                *ref = nv_sync_node_renew(st, *slot);
                return NETVM_OK;
            }
        }
    }
    return NETVM_ERR_NOMEM;
}

uint64_t nv_sync_node_renew(struct nv_sync_state *st, unsigned slot)
{
    struct nv_sync_shnode *n = &st->sh[slot];
    uint32_t t = fresh_ticket(&st->nodes[slot]);
    /* release stores: the ref is published by a remote swap or a message,
     * both full barriers, and the handler that reads these words reads
     * them with acquire after seeing the ref (a locked store each would
     * cost the uncontended lock a fifth of its time) */
    atomic_store_explicit(&n->next, 0, memory_order_release);
    atomic_store_explicit(&n->wake, t, memory_order_release);
    atomic_store_explicit(&n->ticket, t, memory_order_release);
    return nv_sync_ref(st->me, slot, t);
}

void nv_sync_node_put(struct nv_sync_state *st, unsigned slot)
{
    atomic_store_explicit(&st->sh[slot].ticket, 0, memory_order_release);
    atomic_store_explicit(&st->sh[slot].wake, 0, memory_order_release);
    if (!spare.uid && spare_keyable()) {
        spare.uid = st->uid;
        spare.slot = slot;
        return;
    }
    node_unmark(st, slot);
}

/* --- sleeping ----------------------------------------------------------------- */

netvm_status_t nv_sync_alive(struct nv_sync_state *st, int peer)
{
    if (peer == st->me)
        return NETVM_OK;
    netvm_peer_info_t info;
    if (netvm_peer_info(st->ctx, peer, &info) != NETVM_OK || !info.alive)
        return NETVM_ERR_PEER;
    return NETVM_OK;
}

netvm_status_t nv_sync_watch_home(struct nv_sync_handle *h, void *arg)
{
    (void)arg;
    return nv_sync_alive(h->st, h->home);
}

struct sleeper {
    struct nv_sync_shnode *n;
    uint64_t *next;
};

static int woken(void *arg)
{
    struct sleeper *w = arg;
    if (w->next)
        return atomic_load(&w->n->next) != 0;
    return (atomic_load(&w->n->wake) >> 32) != 0;
}

int nv_sync_on_shm(struct nv_sync_state *st, int peer)
{
    netvm_peer_info_t info;
    return netvm_peer_info(st->ctx, peer, &info) == NETVM_OK && info.link && !strcmp(info.link, "shm");
}

/* May this thread sleep on the node's futex? Only if the progress thread
 * serves the waker's link without it: shm (the progress thread serves the
 * rings) or this very process. On tcp the thread sleeps in core's loop,
 * on the sockets themselves, so the wake message wakes it directly. */
static int futex_sleep_ok(struct nv_sync_state *st, int waker)
{
    if (!st->ctx->have_thread || waker < 0)
        return 0;
    return waker == st->me || nv_sync_on_shm(st, waker);
}

/* Spin in core's waiting loop (serving progress) for NETVM_SPIN_US, then
 * sleep: on the node's futex, woken by the handler that stores the wake,
 * or in core's loop. Every NETVM_SYNC_CHECK_MS, look at the peers the
 * wait depends on. */
netvm_status_t nv_sync_sleep(struct nv_sync_handle *h, unsigned slot, uint64_t *next, int waker,
                             nv_sync_watch_fn watch, void *arg)
{
    struct nv_sync_state *st = h->st;
    struct sleeper w = { &st->sh[slot], next };
    /* one spin of core's loop for NETVM_SPIN_US: it counts as a poller of
     * the shm rings throughout, so the waker's message rings no doorbell
     * (a loop of short waits left the rings between looks, and every wake
     * woke this process's progress thread: performance.md, "The lock's
     * wait") */
    if (st->ctx->spin_ns)
        nv_progress_wait_ns(st->ctx, woken, &w, st->ctx->spin_ns, 1);
    int futex = !woken(&w) && futex_sleep_ok(st, waker);
    if (futex)
        nv_progress_release(st->ctx);   /* the progress thread serves the wake from now on */
    const int check = nv_sync_check_ms();
    while (!woken(&w)) {
        netvm_status_t s = NETVM_ERR_TIMEOUT;
        if (futex) {
            /* flagged before the look at the node: a waker either sees
             * the flag (and wakes the futex) or this look sees its store */
            uint32_t seq = atomic_fetch_or(&w.n->seq, NV_SYNC_SLEEPING) | NV_SYNC_SLEEPING;
            if (woken(&w))
                break;
            struct timespec ts = { check / 1000, (long)(check % 1000) * 1000000L };
            syscall(SYS_futex, (uint32_t *)&w.n->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
            if (atomic_load(&w.n->seq) != seq)
                continue;
        } else {
            /* a waker on this machine may store the wake without a
             * message, which would not end this sleep: ask for both */
            atomic_fetch_or(&w.n->seq, NV_SYNC_WANT_MSG);
            if (woken(&w))
                break;
            s = nv_progress_wait(st->ctx, woken, &w, check, 0);
        }
        if (woken(&w))
            break;
        if ((s != NETVM_OK && s != NETVM_ERR_TIMEOUT) || (watch && (s = watch(h, arg)) != NETVM_OK)) {
            if (!futex)
                atomic_fetch_and(&w.n->seq, ~NV_SYNC_WANT_MSG);
            return s;
        }
    }
    if (!futex)
        atomic_fetch_and(&w.n->seq, ~NV_SYNC_WANT_MSG);
    if (next) {
        *next = atomic_load(&w.n->next);
        return NETVM_OK;
    }
    return (netvm_status_t)((atomic_load(&w.n->wake) >> 32) - 1);
}

/* --- sending ------------------------------------------------------------------ */

netvm_status_t nv_sync_send_wake(struct nv_sync_state *st, uint64_t ref, netvm_status_t status)
{
    int peer = nv_sync_ref_peer(ref);
    if (peer == st->me) {
        apply_wake(st, nv_sync_ref_slot(ref), nv_sync_ref_ticket(ref), status);
        return NETVM_OK;
    }
    struct nv_sync_shnode *n = nv_sync_direct_enter(st, ref);
    int want_msg = 0;
    if (n) {
        int woke = nv_sync_wake_node(n, nv_sync_ref_ticket(ref), status, &want_msg);
        nv_sync_direct_leave(st);
        /* stored: the peer's state, as a message to it would have found
         * it (a dead peer's waiter is gone; its own waiters see that) */
        if (!woke || !want_msg)
            return nv_sync_alive(st, peer);
    }
    /* the message (also after a store, when the waiter sleeps in core's
     * loop: its handler finds the wake done, and its arrival ends that
     * sleep) */
    uint64_t a[3] = { nv_sync_ref_slot(ref), nv_sync_ref_ticket(ref), (uint64_t)status };
    return nv_svc_send(st->ctx, peer, NV_SVC_SYNC + NV_SYNC_AM_WAKE, a, 3, NULL, 0, NULL);
}

netvm_status_t nv_sync_send_link(struct nv_sync_state *st, uint64_t ref, uint64_t succ)
{
    int peer = nv_sync_ref_peer(ref);
    if (peer == st->me)
        /* the wake it may send finds no credit only inside a handler (a
         * home's link: home.c), which then sends it again later */
        return apply_link(st, nv_sync_ref_slot(ref), nv_sync_ref_ticket(ref), succ) ? NETVM_ERR_AGAIN : NETVM_OK;
    struct nv_sync_shnode *n = nv_sync_direct_enter(st, ref);
    int want_msg = 0;
    if (n) {
        int r = nv_sync_link_node(n, nv_sync_ref_ticket(ref), succ, &want_msg);
        nv_sync_direct_leave(st);
        if (r == 0 || (r == 1 && !want_msg))
            return nv_sync_alive(st, peer);
        /* releasing: the hand-over is its owner's (apply_link, on the
         * message); or linked, and the message wakes core's loop */
    }
    uint64_t a[3] = { nv_sync_ref_slot(ref), nv_sync_ref_ticket(ref), succ };
    return nv_svc_send(st->ctx, peer, NV_SVC_SYNC + NV_SYNC_AM_LINK, a, 3, NULL, 0, NULL);
}

netvm_status_t nv_sync_home_call(struct nv_sync_handle *h, unsigned op, uint64_t ref, uint64_t arg,
                                 uint64_t *out, unsigned nout)
{
    if (nv_in_handler)
        return NETVM_ERR_STATE;
    struct nv_sync_state *st = h->st;
    uint64_t a[5] = { op, h->id, h->key, ref, arg };
    if (h->home == st->me) {
        uint64_t r[4] = { 0 };
        unsigned nr = 0;
        pthread_mutex_lock(&st->lock);
        netvm_status_t s = nv_sync_home_op(st, st->me, a, r, &nr);
        pthread_mutex_unlock(&st->lock);
        nv_sync_flush_pending(st);
        for (unsigned i = 0; i < nout; i++)
            out[i] = i < nr ? r[i] : 0;
        return s;
    }
    netvm_am_result_t res;
    netvm_status_t s = nv_svc_request(st->ctx, h->home, NV_SVC_SYNC + NV_SYNC_AM_HOME, a, 5, NULL, 0, NULL, 0,
                                      &res, NULL);
    if (s != NETVM_OK)
        return s;
    for (unsigned i = 0; i < nout; i++)
        out[i] = i < res.nargs ? res.args[i] : 0;
    return res.status;
}

netvm_status_t nv_sync_home_send(struct nv_sync_handle *h, unsigned op, uint64_t ref, uint64_t arg)
{
    struct nv_sync_state *st = h->st;
    if (h->home == st->me)
        return nv_sync_home_call(h, op, ref, arg, NULL, 0);
    uint64_t a[5] = { op, h->id, h->key, ref, arg };
    return nv_svc_send(st->ctx, h->home, NV_SVC_SYNC + NV_SYNC_AM_HOME, a, 5, NULL, 0, NULL);
}

netvm_status_t nv_sync_enter(const struct nv_sync_handle *h, int kind)
{
    if (!h || h->kind != kind || !h->ctx)
        return NETVM_ERR_INVAL;
    return nv_in_handler ? NETVM_ERR_STATE : NETVM_OK;
}

void nv_sync_map_words(struct nv_sync_handle *h)
{
    h->direct = netvm_rseg_is_mapped(h->rseg) ? netvm_ptr(h->rseg, 0) : NULL;
    h->home_dead = &h->rseg->peer->dead;
}

netvm_status_t nv_sync_atomic_api(struct nv_sync_handle *h, size_t off, netvm_atomic_op_t op, uint64_t operand,
                                  uint64_t compare, uint64_t *old)
{
    return netvm_atomic(h->ctx, h->rseg, off, op, operand, compare, old);
}
