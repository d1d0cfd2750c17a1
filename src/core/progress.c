/* The progress engine: runs what peers ask of this process, completes this
 * process's own requests, and makes both happen without the application
 * calling netvm.
 *
 * Every link registers its file descriptors (sockets, doorbells, pidfds)
 * in one epoll set, P. Exactly one thread at a time takes in P's events (a
 * "pass"). The progress thread sleeps on Q = {P, stop}: an idle process
 * costs no CPU. An application thread that waits inside netvm, or polls in
 * a loop, takes P over — it disables P in Q, so the kernel no longer wakes
 * the progress thread for what arrives — and serves P itself: spinning on
 * it, or sleeping on it, so its own answer reaches it with one wake-up and
 * no thread hand-off. It gives P back when its call returns, or, for a
 * polling loop (netvm_progress, an armed event queue), keeps it and the
 * progress thread takes it back once the application has not called for a
 * lease (NETVM_POLL_LEASE_US). The shm rings need no epoll set: a polling
 * loop counts itself as a poller of them (rings_held), so producers do not
 * ring the sleeping progress thread for what the loop takes in anyway, and
 * the progress thread ends that after the same lease. The user's event fd,
 * E, holds the endpoint block's eventfd and, while the event queue is
 * armed, P. */
#define _GNU_SOURCE
#include "core/internal.h"
#include "util/config.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

/* --- upcalls from the links -------------------------------------------------- */

void nv_complete_upcall(void *arg, void *token, netvm_status_t st)
{
    (void)arg;
    nv_req_complete(token, st, 0);
}

int nv_claim_upcall(void *arg, void *token)
{
    (void)arg;
    return nv_req_claim(token);
}

netvm_status_t nv_translate_upcall(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr)
{
    netvm_ctx_t *ctx = arg;
    netvm_status_t st = nv_atu_translate(&ctx->atu, slot, key, off, len, need, addr);
    if (st == NETVM_OK && ctx->tcp_pinned)
        st = nv_regc_check(ctx, *addr, len);
    return st;
}

void nv_peer_down_upcall(void *arg, struct nv_lpeer *lp, int graceful)
{
    nv_peer_down(arg, nv_peer_of(lp), graceful);
}

/* --- the epoll sets ------------------------------------------------------------ */

static int ep_mod(int epfd, int fd, unsigned events, void *token)
{
    struct epoll_event ev = { .events = events, .data.ptr = token };
    return epoll_ctl(epfd, EPOLL_CTL_MOD, fd, &ev);
}

netvm_status_t nv_progress_init(netvm_ctx_t *ctx)
{
    ctx->pfd = epoll_create1(EPOLL_CLOEXEC);
    ctx->qfd = epoll_create1(EPOLL_CLOEXEC);
    ctx->efd = epoll_create1(EPOLL_CLOEXEC);
    ctx->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    ctx->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ctx->pfd < 0 || ctx->qfd < 0 || ctx->efd < 0 || ctx->stopfd < 0 || ctx->kickfd < 0)
        return NETVM_ERR_SYS;
    pthread_mutex_init(&ctx->lend_lock, NULL);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &ctx->stop_token };
    if (epoll_ctl(ctx->qfd, EPOLL_CTL_ADD, ctx->stopfd, &ev) != 0)
        return NETVM_ERR_SYS;
    ev.data.ptr = &ctx->kick_token;
    if (epoll_ctl(ctx->qfd, EPOLL_CTL_ADD, ctx->kickfd, &ev) != 0)
        return NETVM_ERR_SYS;
    ev.data.ptr = &ctx->p_token;
    if (epoll_ctl(ctx->qfd, EPOLL_CTL_ADD, ctx->pfd, &ev) != 0)
        return NETVM_ERR_SYS;
    ev.data.ptr = &ctx->wake_token;
    if (epoll_ctl(ctx->efd, EPOLL_CTL_ADD, ctx->ep.wake_fd, &ev) != 0)
        return NETVM_ERR_SYS;
    ev.events = 0;
    ev.data.ptr = &ctx->p_token;
    if (epoll_ctl(ctx->efd, EPOLL_CTL_ADD, ctx->pfd, &ev) != 0)
        return NETVM_ERR_SYS;
    return NETVM_OK;
}

/* The links' connections out of P (on 0) while a polling loop reads them
 * directly, or back (on 1) before anyone sleeps on P or P goes back to the
 * progress thread. Callers hold lend_lock. */
static void watch_links(netvm_ctx_t *ctx, int on)
{
    if (ctx->unwatched != on)
        return;
    for (int i = 0; i < ctx->nlinks; i++)
        if (ctx->links[i]->ops->watch)
            ctx->links[i]->ops->watch(ctx->links[i], on);
    ctx->unwatched = !on;
}

static void watch_links_locking(netvm_ctx_t *ctx, int on)
{
    pthread_mutex_lock(&ctx->lend_lock);
    watch_links(ctx, on);
    pthread_mutex_unlock(&ctx->lend_lock);
}

/* Callers hold lend_lock. */
static void lend_locked(netvm_ctx_t *ctx)
{
    if (!ctx->lent) {
        if (ctx->have_thread)
            ep_mod(ctx->qfd, ctx->pfd, 0, &ctx->p_token);
        ctx->lent = 1;
    }
}

static void give_back_locked(netvm_ctx_t *ctx)
{
    /* no longer a loop's (nv_progress_may_hold), before the flush: a
     * message held after it sees that and flushes itself */
    ctx->lent_sticky = 0;
    watch_links(ctx, 1);
    /* what an application thread held back to send with its next call
     * (acknowledgements) leaves now: nobody else would send it */
    nv_progress_flush_tx(ctx);
    if (ctx->in_e) {
        ep_mod(ctx->efd, ctx->pfd, 0, &ctx->p_token);
        ctx->in_e = 0;
    }
    if (ctx->lent && ctx->have_thread) {
        ep_mod(ctx->qfd, ctx->pfd, EPOLLIN, &ctx->p_token);
        ctx->lent = 0;
    }
}


/* The lease only asks whether the application called since it last
 * looked: a change of the counter, not its count. So a plain increment,
 * no locked instruction on every poll. Threads racing may lose an
 * increment or, rarely, put back an older value the lease already saw:
 * the lease then ends early, and the next call lends P again. */
static inline void note_app_call(netvm_ctx_t *ctx)
{
    atomic_store_explicit(&ctx->app_calls, atomic_load_explicit(&ctx->app_calls, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* Only links with connections to watch (tcp; ofi's completion queue's
 * wait fd) make lending worth its system calls; on shm alone, spinning
 * threads already tell producers not to ring (poll_enter). */
static int lending_pays(netvm_ctx_t *ctx)
{
    struct nv_link *t = __atomic_load_n(&ctx->tcp, __ATOMIC_ACQUIRE);
    struct nv_link *o = __atomic_load_n(&ctx->ofi, __ATOMIC_ACQUIRE);
    return (t && t->ops->active(t)) || (o && o->ops->active(o));
}

/* A lease began: the progress thread, which may sleep with no timeout,
 * must start watching it. */
static void kick(netvm_ctx_t *ctx)
{
    if (ctx->thread_up) {
        uint64_t one = 1;
        ssize_t n = write(ctx->kickfd, &one, sizeof one);
        (void)n;
    }
}

/* This thread starts (enter) or stops polling every link's ring. */
static void poll_rings(netvm_ctx_t *ctx, int enter)
{
    for (int i = 0; i < ctx->nlinks; i++) {
        struct nv_link *l = ctx->links[i];
        if (enter)
            l->ops->poll_enter(l);
        else
            l->ops->poll_leave(l);
    }
}

/* Callers hold lend_lock. The loop that held the rings stopped (or the
 * context ends): producers ring the progress thread again, which looks
 * at the rings before it sleeps (sleep_prepare). */
static void release_rings_locked(netvm_ctx_t *ctx)
{
    if (!ctx->rings_held)
        return;
    poll_rings(ctx, 0);
    atomic_store(&ctx->rings_held, 0);
}

static void release_rings(netvm_ctx_t *ctx)
{
    pthread_mutex_lock(&ctx->lend_lock);
    release_rings_locked(ctx);
    pthread_mutex_unlock(&ctx->lend_lock);
}

/* A netvm_progress loop, or a loop of blocking calls, on links without an
 * epoll set to lend (shm): from its second call within loop_ns it counts
 * as a poller of the rings until the progress thread sees it stop for a
 * lease (a waiter does not enter and leave the poller count per call, a
 * store to a line every producer reads). */
static void hold_rings_at(netvm_ctx_t *ctx, uint64_t now)
{
    if (atomic_load_explicit(&ctx->rings_held, memory_order_relaxed) || !ctx->thread_up)
        return;
    if (now - atomic_exchange_explicit(&ctx->last_poll_ns, now, memory_order_relaxed) >= ctx->loop_ns)
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    if (!ctx->rings_held) {
        poll_rings(ctx, 1);
        atomic_store(&ctx->rings_held, 1);
        kick(ctx);   /* it watches the lease from now on */
    }
    pthread_mutex_unlock(&ctx->lend_lock);
}

static void hold_rings(netvm_ctx_t *ctx)
{
    if (!atomic_load_explicit(&ctx->rings_held, memory_order_relaxed))
        hold_rings_at(ctx, nv_now_ns());
}

int nv_progress_may_hold(netvm_ctx_t *ctx)
{
    /* a polling loop holds P: its next call, or the progress thread's next
     * look (check_lease, every NETVM_ACK_DELAY_US), sends what waits */
    return !nv_in_handler && !nv_is_progress_thread && ctx->have_thread && ctx->lent && ctx->lent_sticky;
}

void nv_progress_enter(netvm_ctx_t *ctx, int sticky)
{
    atomic_fetch_add_explicit(&ctx->app_inside, 1, memory_order_relaxed);
    note_app_call(ctx);
    if (!lending_pays(ctx))
        return;
    if (ctx->lent && ctx->lent_sticky)
        return;   /* the common case of a loop: nothing to change */
    uint64_t now = nv_now_ns();
    if (now - atomic_exchange_explicit(&ctx->last_poll_ns, now, memory_order_relaxed) < ctx->loop_ns)
        sticky = 1;   /* calls in a loop: give P back only once they stop (the lease) */
    if (ctx->lent && !sticky)
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    lend_locked(ctx);
    if (sticky && !ctx->lent_sticky) {
        ctx->lent_sticky = 1;
        kick(ctx);
    }
    pthread_mutex_unlock(&ctx->lend_lock);
}

void nv_progress_leave(netvm_ctx_t *ctx)
{
    unsigned left = atomic_fetch_sub_explicit(&ctx->app_inside, 1, memory_order_relaxed) - 1;
    /* P lent is given back even if lending no longer pays (the last tcp
     * connection went while it was lent): else nobody would serve it */
    if (!ctx->have_thread || !ctx->lent || ctx->lent_sticky || ctx->in_e || left)
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    if (ctx->lent && !ctx->lent_sticky && !ctx->in_e && !atomic_load(&ctx->app_inside))
        give_back_locked(ctx);
    pthread_mutex_unlock(&ctx->lend_lock);
}

void nv_progress_release(netvm_ctx_t *ctx)
{
    nv_progress_flush_tx(ctx);   /* nothing this thread issued may wait for its next call */
    /* rings held by this thread's polling: producers must ring the
     * progress thread again, or what arrives waits for the lease to end */
    if (atomic_load_explicit(&ctx->rings_held, memory_order_relaxed) && !atomic_load(&ctx->app_inside))
        release_rings(ctx);
    if (!ctx->have_thread || !ctx->lent || atomic_load(&ctx->app_inside))
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    if (ctx->lent && !atomic_load(&ctx->app_inside))
        give_back_locked(ctx);
    pthread_mutex_unlock(&ctx->lend_lock);
}

/* The armed event queue: P joins the user's event fd. */
void nv_progress_arm_e(netvm_ctx_t *ctx)
{
    if (!lending_pays(ctx))
        return;
    note_app_call(ctx);
    if (ctx->in_e)
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    lend_locked(ctx);
    if (!ctx->lent_sticky) {
        ctx->lent_sticky = 1;
        kick(ctx);
    }
    if (!ctx->in_e) {
        watch_links(ctx, 1);   /* the user sleeps on E, so on P */
        ep_mod(ctx->efd, ctx->pfd, EPOLLIN, &ctx->p_token);
        ctx->in_e = 1;
    }
    pthread_mutex_unlock(&ctx->lend_lock);
}

/* --- a pass ---------------------------------------------------------------------- */

static int take_pass(netvm_ctx_t *ctx)
{
    int free_ = 0;
    return atomic_compare_exchange_strong_explicit(&ctx->pass_busy, &free_, 1, memory_order_acquire,
                                                   memory_order_relaxed);
}

static void end_pass(netvm_ctx_t *ctx) { atomic_store_explicit(&ctx->pass_busy, 0, memory_order_release); }

/* Handle events already taken from P (the caller holds the pass). */
static int handle(netvm_ctx_t *ctx, struct epoll_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        struct nv_link *l = ((struct nv_link_ev *)ev[i].data.ptr)->link;
        l->ops->epoll_event(l, ev[i].data.ptr, ev[i].events);
    }
    return n;
}

static int poll_links(netvm_ctx_t *ctx)
{
    int n = 0;
    for (int i = 0; i < ctx->nlinks; i++)
        n += ctx->links[i]->ops->poll(ctx->links[i], NULL);
    return n;
}

void nv_progress_flush_tx(netvm_ctx_t *ctx)
{
    for (int i = 0; i < ctx->nlinks; i++)
        if (ctx->links[i]->ops->flush_tx)
            ctx->links[i]->ops->flush_tx(ctx->links[i], 1);
}

/* How often the pool is swept for requests past NETVM_TIMEOUT while some
 * are pending: an eighth of the timeout, within [10 ms, 1 s]. */
static uint64_t sweep_period(netvm_ctx_t *ctx)
{
    uint64_t p = ctx->timeout_ns / 8;
    return p < 10000000ull ? 10000000ull : p > 1000000000ull ? 1000000000ull : p;
}

static void lower_timer(netvm_ctx_t *ctx, uint64_t t)
{
    uint64_t cur = atomic_load_explicit(&ctx->next_timer, memory_order_relaxed);
    while (t < cur && !atomic_compare_exchange_weak(&ctx->next_timer, &cur, t))
        ;
}

/* A request nobody waits for (a continuation, a detached operation, one
 * only netvm_test looks at) is timed out by the sweep, not by a waiter:
 * make sure one is due. */
void nv_progress_sweep_due(netvm_ctx_t *ctx)
{
    uint64_t none = UINT64_MAX;
    if (atomic_load_explicit(&ctx->req_sweep_at, memory_order_relaxed) != UINT64_MAX)
        return;
    uint64_t t = nv_now_ns() + sweep_period(ctx);
    if (atomic_compare_exchange_strong(&ctx->req_sweep_at, &none, t)) {
        lower_timer(ctx, t);
        kick(ctx);   /* the progress thread may sleep with no timeout */
    }
}

/* Give up the requests older than NETVM_TIMEOUT; returns when to look
 * again (UINT64_MAX: nothing pending). */
static uint64_t sweep_requests(netvm_ctx_t *ctx, uint64_t now)
{
    uint64_t at = atomic_load_explicit(&ctx->req_sweep_at, memory_order_relaxed);
    if (at == UINT64_MAX && atomic_load(&ctx->npending)) {
        /* requests only netvm_test looks at time out here too */
        uint64_t t = now + sweep_period(ctx);
        return atomic_compare_exchange_strong(&ctx->req_sweep_at, &at, t) ? t : at;
    }
    if (at == UINT64_MAX || now < at)
        return at;
    for (uint32_t i = 0; i < ctx->nreqs && atomic_load(&ctx->npending); i++) {
        struct netvm_req *r = &ctx->reqs[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        /* (issued after now was read: not late, and now - issued would wrap) */
        if (NV_REQ_WHAT(s) != NV_REQ_PENDING ||
            __atomic_load_n(&r->issued_ns, __ATOMIC_RELAXED) + ctx->timeout_ns >= now)
            continue;
        /* the CAS on s fails if the slot was reused since (issued_ns then
         * was the new use's) */
        if (nv_req_finish_state(r, s, NETVM_ERR_TIMEOUT, 1))
            nv_warn("peer %d did not answer within NETVM_TIMEOUT", atomic_load(&r->peer_id));
    }
    uint64_t next = UINT64_MAX;
    atomic_store(&ctx->req_sweep_at, UINT64_MAX);
    if (atomic_load(&ctx->npending)) {
        uint64_t none = UINT64_MAX;
        next = now + sweep_period(ctx);
        if (!atomic_compare_exchange_strong(&ctx->req_sweep_at, &none, next))
            next = none;   /* scheduled meanwhile */
    }
    return next;
}

/* Deadlines the links keep (handshakes) and the request sweep, run by the
 * pass holder only (they free connections the pass may be dispatching
 * events of); the next one is kept for the progress thread's sleep. */
static void pass_timers(netvm_ctx_t *ctx)
{
    /* an application thread that spins passes millions of times a second
     * and a clock read costs as much as a look at a ring: it looks at the
     * (millisecond) deadlines every 64th pass; the progress thread, whose
     * sleep they bound, at every one */
    static _Thread_local unsigned passes NV_TLS_IE;
    if (!nv_is_progress_thread && (++passes & 63))
        return;
    uint64_t now = nv_now_ns(), due = atomic_load_explicit(&ctx->next_timer, memory_order_relaxed);
    /* deadlines only ever come later than those known (or are lowered
     * into next_timer): look again when one is due, or when none was known
     * (a handshake may have begun) */
    if (due != UINT64_MAX && now < due)
        return;
    uint64_t next = sweep_requests(ctx, now), st = nv_stats_tick(ctx, now);
    if (st < next)
        next = st;
    for (int i = 0; i < ctx->nlinks; i++)
        if (ctx->links[i]->ops->timer) {
            uint64_t t = ctx->links[i]->ops->timer(ctx->links[i], now);
            if (t < next)
                next = t;
        }
    /* a sweep scheduled while this ran lowered next_timer: keep it */
    uint64_t sw = atomic_load(&ctx->req_sweep_at);
    if (sw < next)
        next = sw;
    atomic_store_explicit(&ctx->next_timer, next, memory_order_relaxed);
    lower_timer(ctx, atomic_load(&ctx->req_sweep_at));
}

/* How often a spinning application thread looks at P while the links read
 * their connections directly (poll_direct). */
#define P_LOOK 16u

/* Direct passes in a row, without a sleep on P, before the connections
 * leave P (watch_links): a loop that polls on, not a waiter that spins a
 * while (NETVM_SPIN_US, up to NETVM_SPIN_MAX_US) and then sleeps, which
 * would put them back each time (two epoll_ctl a connection). */
#define UNWATCH_AFTER 4096u

/* 0 when every link that can read its connections directly did (their
 * messages added to *n), -1 when one cannot: P must be asked. */
static int poll_direct(netvm_ctx_t *ctx, int *n)
{
    int rc = -1;
    for (int i = 0; i < ctx->nlinks; i++) {
        struct nv_link *l = ctx->links[i];
        if (!l->ops->poll_direct)
            continue;
        int k = l->ops->poll_direct(l);
        if (k < 0)
            return -1;
        *n += k;
        rc = 0;
    }
    return rc;
}

int nv_progress_pass(netvm_ctx_t *ctx)
{
    int n = 0;
    /* acknowledgements may wait for this thread's next frame only while it
     * keeps P for a loop: giving P back (or the lease running out) sends
     * them; otherwise nobody would */
    int held = nv_hold_acks;
    nv_hold_acks = !nv_is_progress_thread && ctx->lent_sticky;
    if (take_pass(ctx)) {
        nv_peers_reap(ctx);
        /* the progress thread was woken by P; an application thread looks
         * at it only where arrivals are reported nowhere else */
        if (nv_is_progress_thread || !ctx->thread_up || ctx->lent || lending_pays(ctx)) {
            /* an application thread that holds P (lent: its loop is all
             * that looks at P) reads the connections itself, and asks P
             * only every P_LOOK passes (listeners, handshakes, pidfds);
             * the progress thread was woken by P */
            int direct = !nv_is_progress_thread && ctx->lent && poll_direct(ctx, &n) == 0;
            if (direct && !ctx->unwatched && ++ctx->direct_run >= UNWATCH_AFTER && ctx->lent_sticky) {
                pthread_mutex_lock(&ctx->lend_lock);
                if (ctx->lent && ctx->lent_sticky && !ctx->in_e)
                    watch_links(ctx, 0);
                pthread_mutex_unlock(&ctx->lend_lock);
            } else if (!direct && ctx->unwatched) {
                watch_links_locking(ctx, 1);   /* P is asked: it must see them */
            }
            if (!direct || (++ctx->pass_seq % P_LOOK) == 0) {
                struct epoll_event ev[32];
                int k = epoll_wait(ctx->pfd, ev, 32, 0);
                if (k > 0)
                    n += handle(ctx, ev, k);
            }
        }
        pass_timers(ctx);   /* after the events: connections accepted now count */
        end_pass(ctx);
    }
    n += poll_links(ctx);
    if (atomic_load_explicit(&ctx->ndeferred, memory_order_relaxed))
        n += nv_am_run_deferred(ctx);
    nv_hold_acks = held;
    return n;
}

/* Sleep until something arrives on P (and, for event waits, the endpoint
 * block's eventfd) or max_ns pass. The caller has lent P (or there is no
 * progress thread). */
static void sleep_on_p(netvm_ctx_t *ctx, int with_ep_fd, uint64_t max_ns)
{
    int ms = max_ns > (uint64_t)INT_MAX * 1000000ull ? INT_MAX : (int)((max_ns + 999999) / 1000000);
    if (!take_pass(ctx)) {
        /* another thread serves P: let it, and look again shortly */
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
        return;
    }
    ctx->direct_run = 0;
    if (ctx->unwatched)
        watch_links_locking(ctx, 1);   /* P wakes this sleep */
    int busy = 0, nl = ctx->nlinks;
    for (int i = 0; i < nl; i++)
        if (ctx->links[i]->ops->sleep_prepare(ctx->links[i])) {
            for (int k = 0; k < i; k++)
                ctx->links[k]->ops->sleep_done(ctx->links[k]);
            busy = 1;
            break;
        }
    if (!busy) {
        struct pollfd p[2] = { { .fd = ctx->pfd, .events = POLLIN }, { .fd = ctx->ep.wake_fd, .events = POLLIN } };
        if (poll(p, with_ep_fd ? 2 : 1, ms) < 0 && errno != EINTR)
            nv_error("progress: poll failed: %s", strerror(errno));
        for (int i = 0; i < nl; i++)
            ctx->links[i]->ops->sleep_done(ctx->links[i]);
    }
    end_pass(ctx);
}

/* --- the progress thread ------------------------------------------------------------- */

/* While an application thread holds P beyond its calls (a polling loop, an
 * armed event queue), take P back once it has not called for a lease. The
 * acknowledgements it holds back for its next frame leave sooner: once it
 * has not called for one look (NETVM_ACK_DELAY_US), a peer's blocking put
 * must not wait for the lease. */
static void check_lease(netvm_ctx_t *ctx, uint64_t *seen_calls, uint64_t *seen_ns)
{
    uint64_t calls = atomic_load_explicit(&ctx->app_calls, memory_order_relaxed), now = nv_now_ns();
    /* messages held for a next call (nv_progress_may_hold) wait at most
     * one look, whoever calls or waits meanwhile */
    nv_progress_flush_tx(ctx);
    if (calls != *seen_calls || atomic_load(&ctx->app_inside)) {
        *seen_calls = calls;
        *seen_ns = now;
        return;
    }
    if (now - *seen_ns < ctx->lease_ns)
        return;
    pthread_mutex_lock(&ctx->lend_lock);
    if (!atomic_load(&ctx->app_inside) && atomic_load(&ctx->app_calls) == calls) {
        if (ctx->lent)
            give_back_locked(ctx);
        release_rings_locked(ctx);
    }
    pthread_mutex_unlock(&ctx->lend_lock);
}

static void *progress_main(void *arg)
{
    netvm_ctx_t *ctx = arg;
    struct epoll_event ev[16];
    nv_is_progress_thread = 1;
    uint64_t seen_calls = 0, seen_ns = 0;
    for (;;) {
        /* after a wake-up, linger: a burst of requests then costs one
         * wake-up, not one each */
        uint64_t until = nv_now_ns() + ctx->linger_ns;
        unsigned idle = 0;
        do {
            if (!ctx->lent && nv_progress_pass(ctx)) {
                until = nv_now_ns() + ctx->linger_ns;
                idle = 0;
            } else {
                /* yields as a waiting spin does: a lingering thread gives
                 * the CPU to whoever shares it */
                nv_spin_pause(ctx->spin_yield, idle++);
            }
        } while (ctx->linger_ns && nv_now_ns() < until);
        /* asleep on P (not lent): producers must ring; prepared and done
         * on the same decision, the counts stay balanced */
        int lent = ctx->lent, nl = ctx->nlinks, busy = 0, prepared = !lent;
        if (prepared)
            for (int i = 0; i < nl && !busy; i++)
                if (ctx->links[i]->ops->sleep_prepare(ctx->links[i])) {
                    for (int k = 0; k < i; k++)
                        ctx->links[k]->ops->sleep_done(ctx->links[k]);
                    busy = 1;
                }
        /* Something is pending. While an application thread polls the
         * rings (rings_held) it is that thread's to take in: this one
         * sleeps for the lease anyway, unprepared (producers do not ring
         * while the rings are polled), and looks at them after it. Else
         * under a steady stream it found a ring nonempty at every try,
         * lost it to the poller, and tried again: 17% of both CPUs in
         * epoll_wait(0) and clock reads in one profile, taken from the
         * application threads. */
        int held = atomic_load(&ctx->rings_held);
        if (busy && !held)
            continue;
        prepared = prepared && !busy;
        /* nanosecond timeouts: while P is lent, look every
         * NETVM_ACK_DELAY_US (held acknowledgements, the lease); asleep
         * unprepared, at most a lease (the rings may be let go meanwhile,
         * and then nobody rings for this thread) */
        int deferred = atomic_load(&ctx->ndeferred) != 0;
        uint64_t wait_ns = lent ? ctx->ack_delay_ns
                         : held ? ctx->lease_ns
                         : deferred ? 1000000ull : UINT64_MAX;
        uint64_t due = atomic_load_explicit(&ctx->next_timer, memory_order_relaxed);
        /* the statistics file is rewritten here too: this thread may not
         * hold P (lent to an application thread) for a long while */
        uint64_t sdue = __atomic_load_n(&ctx->stats, __ATOMIC_RELAXED) ? nv_stats_tick(ctx, nv_now_ns()) : UINT64_MAX;
        if (sdue < due)
            due = sdue;
        if (due != UINT64_MAX) {
            uint64_t now = nv_now_ns();
            if (due <= now)
                wait_ns = 0;
            else if (due - now < wait_ns)
                wait_ns = due - now;
        }
        struct timespec ts = { (time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull) };
        int n = epoll_pwait2(ctx->qfd, ev, 16, wait_ns == UINT64_MAX ? NULL : &ts, NULL);
        if (prepared)
            for (int i = 0; i < nl; i++)
                ctx->links[i]->ops->sleep_done(ctx->links[i]);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.ptr == &ctx->stop_token)
                return NULL;
            if (ev[i].data.ptr == &ctx->kick_token) {
                uint64_t v;
                ssize_t r = read(ctx->kickfd, &v, sizeof v);
                (void)r;
            }
        }
        if (ctx->lent || atomic_load(&ctx->rings_held))
            check_lease(ctx, &seen_calls, &seen_ns);
        if (!ctx->lent && n > 0 && atomic_load(&ctx->pass_busy)) {
            /* an application thread is in a pass: P stays readable until it
             * is done; do not spin on it */
            for (unsigned i = 0; atomic_load(&ctx->pass_busy) && i < 4096; i++)
                nv_cpu_relax();
            if (atomic_load(&ctx->pass_busy))
                sched_yield();
        }
    }
}

netvm_status_t nv_progress_start(netvm_ctx_t *ctx)
{
    ctx->lease_ns = (uint64_t)nv_config_long("NETVM_POLL_LEASE_US", 100, 10000000) * 1000ull;
    ctx->loop_ns = (uint64_t)nv_config_long("NETVM_POLL_LOOP_US", 1, 10000000) * 1000ull;
    ctx->ack_delay_ns = (uint64_t)nv_config_long("NETVM_ACK_DELAY_US", 10, 10000000) * 1000ull;
    if (ctx->ack_delay_ns > ctx->lease_ns)
        ctx->ack_delay_ns = ctx->lease_ns;
    if (!ctx->have_thread) {
        ctx->lent = 1;   /* nobody waits on Q: whoever waits serves P */
        return NETVM_OK;
    }
    int err = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (!err) {
        ctx->thread_up = 1;
        pthread_setname_np(ctx->thread, "netvm-progress");   /* top -H, gdb, /proc: which is ours */
    }
    if (err) {
        nv_error("cannot start the progress thread: %s", strerror(err));
        ctx->have_thread = 0;
        ctx->lent = 1;
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

void nv_progress_stop(netvm_ctx_t *ctx)
{
    release_rings(ctx);
    if (ctx->have_thread) {
        uint64_t one = 1;
        ssize_t n = write(ctx->stopfd, &one, sizeof one);
        (void)n;
        pthread_join(ctx->thread, NULL);
        ctx->have_thread = 0;
        ctx->thread_up = 0;
    }
    for (int *fd = &ctx->pfd; fd <= &ctx->efd; fd++)
        if (*fd > 0)
            close(*fd);
    if (ctx->stopfd > 0)
        close(ctx->stopfd);
    if (ctx->kickfd > 0)
        close(ctx->kickfd);
    ctx->pfd = ctx->qfd = ctx->efd = ctx->stopfd = ctx->kickfd = -1;
    pthread_mutex_destroy(&ctx->lend_lock);
}

/* --- waiting ---------------------------------------------------------------------------- */

/* Without a progress thread nobody watches the pidfds: look ourselves. The
 * peer-down sweep may also have run between this request's credit check and
 * its becoming pending (it then missed it), so a dead peer fails the request
 * we wait for here whoever marked it dead. */
static void check_peer(netvm_ctx_t *ctx, struct netvm_req *r)
{
    struct nv_peer *p = r->peer;
    struct nv_link *l = p->lp.link;
    if (atomic_load(&p->dead) || (l && l->ops->peer_dead(l, &p->lp))) {
        nv_peer_down(ctx, p, 0);
        nv_req_give_up(r, NETVM_ERR_PEER);
    }
}

static int req_done_cb(void *arg) { return nv_req_done(arg); }

static void req_timeouts(netvm_ctx_t *ctx, void *arg)
{
    struct netvm_req *r = arg;
    check_peer(ctx, r);
    uint64_t now = nv_now_ns(), issued = __atomic_load_n(&r->issued_ns, __ATOMIC_RELAXED);
    if (now > issued && now - issued > ctx->timeout_ns && nv_req_give_up(r, NETVM_ERR_TIMEOUT))
        nv_warn("peer %d did not answer within NETVM_TIMEOUT", nv_peer_id(r->peer));
}

/* One sleep of a waiting application thread, at most slice_ns. Where
 * lending P pays (tcp) or nobody else serves it, the thread sleeps on P
 * itself, so what it waits for wakes it directly. On shm alone the
 * progress thread serves the ring: a request's waiter sleeps on the
 * request's futex, an event's waiter on the event queue's eventfd (shm
 * initiators post events and wake it themselves). */
static void sleep_once(netvm_ctx_t *ctx, struct netvm_req *r, int events, uint64_t slice)
{
    /* P already lent (lending paid when this wait began; the last tcp
     * connection may have gone since): the progress thread does not serve
     * it, so this thread does */
    if (lending_pays(ctx) || !ctx->thread_up || ctx->lent) {
        if (!ctx->lent) {
            pthread_mutex_lock(&ctx->lend_lock);
            lend_locked(ctx);
            pthread_mutex_unlock(&ctx->lend_lock);
        }
        if (events && nv_ep_arm_fd(&ctx->ep))
            return;
        if (r && nv_req_done(r))
            return;
        nv_progress_flush_tx(ctx);
        sleep_on_p(ctx, events, slice);
        nv_progress_pass(ctx);
        return;
    }
    if (r) {
        atomic_store_explicit(&r->waiting, 1, memory_order_seq_cst);
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (NV_REQ_WHAT(s) != NV_REQ_DONE) {
            struct timespec ts = { 0, (long)(slice < 10000000ull ? slice : 10000000ull) };
            syscall(SYS_futex, &r->state, FUTEX_WAIT_PRIVATE, s, &ts, NULL, 0);
        }
        return;
    }
    if (!events) {
        /* what it waits for is the progress thread's to serve, and nothing
         * wakes this thread for it: look again shortly */
        struct timespec ts = { 0, 200000 };
        nanosleep(&ts, NULL);
        return;
    }
    if (nv_ep_arm_fd(&ctx->ep))
        return;
    struct pollfd p = { .fd = ctx->ep.wake_fd, .events = POLLIN };
    int ms = (int)((slice + 999999) / 1000000);
    if (poll(&p, 1, ms) < 0 && errno != EINTR)
        nv_error("progress: poll failed: %s", strerror(errno));
}

/* The one waiting loop: spin (serving P and the rings), then sleep. */
static netvm_status_t wait_loop(netvm_ctx_t *ctx, int (*done)(void *), void *arg, struct netvm_req *r,
                                uint64_t deadline, int spin, int events)
{
    /* the spin's end is set at the first look at the clock (64 passes in):
     * an answer that comes sooner costs no clock read */
    uint64_t spin_until = 0;
    netvm_status_t st = NETVM_OK;
    nv_progress_enter(ctx, 0);
    if (spin && !lending_pays(ctx))
        hold_rings(ctx);
    /* rings held by a loop: this thread is already counted as polling them */
    int own_poll = !atomic_load(&ctx->rings_held);
    if (own_poll)
        poll_rings(ctx, 1);
    unsigned iter = 0;
    int spinning = 1;
    nv_progress_flush_tx(ctx);   /* what this thread issued goes before it waits */
    while (!done(arg)) {
        if (spinning) {
            nv_progress_pass(ctx);
            if (done(arg))
                break;
            /* still waiting: nothing it owes may wait for its next frame */
            nv_progress_flush_tx(ctx);
            if ((++iter & 63) == 0) {
                uint64_t now = nv_now_ns();
                if (now >= deadline) {
                    st = NETVM_ERR_TIMEOUT;
                    break;
                }
                if (!spin_until)
                    spin_until = spin ? now + ctx->spin_ns : now;
                if (now >= spin_until) {
                    /* about to sleep: producers must ring again */
                    spinning = 0;
                    if (own_poll)
                        poll_rings(ctx, 0);
                    else
                        release_rings(ctx);
                    continue;
                }
                if ((iter & 4095) == 0 && r)
                    req_timeouts(ctx, r);
                if (!ctx->have_thread && (iter & 4095) == 0)
                    sched_yield();
            }
            nv_spin_pause(ctx->spin_yield, iter);
            continue;
        }
        if (r)
            req_timeouts(ctx, r);
        if (done(arg))
            break;
        uint64_t now = nv_now_ns();
        if (now >= deadline) {
            st = NETVM_ERR_TIMEOUT;
            break;
        }
        uint64_t slice = 100000000ull;
        if (deadline - now < slice)
            slice = deadline - now;
        sleep_once(ctx, r, events, slice);
    }
    if (spinning && own_poll)
        poll_rings(ctx, 0);
    nv_progress_leave(ctx);
    return st;
}

netvm_status_t nv_progress_wait_req(netvm_ctx_t *ctx, struct netvm_req *r)
{
    if (!nv_req_done(r))
        wait_loop(ctx, req_done_cb, r, r, UINT64_MAX, 1, 0);
    return r->status;
}

static netvm_status_t wait_until(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms, int spin,
                                 int events)
{
    if (done && done(arg))
        return NETVM_OK;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : nv_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    return wait_loop(ctx, done, arg, NULL, deadline, spin, events);
}

netvm_status_t nv_progress_wait(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms, int spin)
{
    return wait_until(ctx, done, arg, timeout_ms, spin, 0);
}

netvm_status_t nv_progress_wait_ns(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, uint64_t ns, int spin)
{
    if (done(arg))
        return NETVM_OK;
    return wait_loop(ctx, done, arg, NULL, nv_now_ns() + ns, spin, 0);
}

netvm_status_t nv_progress_wait_events(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms,
                                       int spin)
{
    return wait_until(ctx, done, arg, timeout_ms, spin, 1);
}

/* A request completes or is reused (a request nobody holds is freed by
 * whoever completes it). */
struct use { struct netvm_req *r; uint16_t gen; };

static int use_over(void *arg)
{
    struct use *u = arg;
    return atomic_load_explicit(&u->r->gen, memory_order_acquire) != u->gen ||
           (atomic_load_explicit(&u->r->state, memory_order_acquire) & 0xff) != NV_REQ_PENDING;
}

netvm_status_t nv_progress_wait_idle(netvm_ctx_t *ctx, struct nv_peer *p)
{
    int id = p ? nv_peer_id(p) : -1;
    if (p && !atomic_load_explicit(&p->outstanding, memory_order_acquire))
        return NETVM_OK;   /* the common case: nothing to scan the pool for */
    uint64_t deadline = nv_now_ns() + ctx->timeout_ns + 1000000000ull;
    for (uint32_t i = 0; i < ctx->nreqs; i++) {
        struct netvm_req *r = &ctx->reqs[i];
        uint32_t s = atomic_load_explicit(&r->state, memory_order_acquire);
        if (NV_REQ_WHAT(s) == NV_REQ_FREE || NV_REQ_WHAT(s) == NV_REQ_DONE || (id >= 0 && atomic_load(&r->peer_id) != id))
            continue;
        struct use u = { r, atomic_load(&r->gen) };
        if (use_over(&u))
            continue;
        /* held by a caller, or by nobody: either way wait for its
         * completion, bounded (its own timeout fails it) */
        wait_loop(ctx, use_over, &u, NULL, deadline, 1, 0);
    }
    return NETVM_OK;
}

int netvm_progress(netvm_ctx_t *ctx)
{
    if (!ctx)
        return 0;
    /* a loop that calls this keeps P until it stops (the lease) */
    int loop = 0;
    if (lending_pays(ctx)) {
        uint64_t now = nv_now_ns();
        loop = now - atomic_exchange_explicit(&ctx->last_poll_ns, now, memory_order_relaxed) < ctx->loop_ns;
    }
    if (loop && !nv_in_handler) {
        nv_progress_enter(ctx, 1);
        nv_progress_flush_tx(ctx);
        int n = nv_progress_pass(ctx);
        atomic_fetch_sub_explicit(&ctx->app_inside, 1, memory_order_relaxed);
        return n;
    }
    note_app_call(ctx);
    if (!loop && !nv_in_handler && !lending_pays(ctx))
        hold_rings(ctx);
    nv_progress_flush_tx(ctx);
    return nv_progress_pass(ctx);
}
