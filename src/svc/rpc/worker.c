/* The RPC service's worker thread, started on first need and stopped at
 * netvm_finalize: it runs deferred continuations (those that returned
 * NETVM_RPC_DEFER in the progress engine; here they may block), and it
 * watches the delegates of calls this process delegated, answering such a
 * call NETVM_ERR_PEER when its delegate dies. Watching by polling costs a
 * look at most every NV_RPC_WATCH_NS while calls are watched, and nothing
 * on the call path but a ring slot under a lock. */
#include "core/internal.h"
#include "svc/rpc/rpc_int.h"
#include "util/log.h"
#include "util/time.h"

#include <errno.h>
#include <time.h>

void nv_rpc_watch(struct nv_rpc *s, const netvm_am_token_t *token, int peer)
{
    pthread_mutex_lock(&s->lock);
    struct nv_rpc_watch *w = &s->watch[s->watch_next];
    s->watch_next = (s->watch_next + 1) % NV_RPC_WATCH;
    if (!w->used)
        s->nwatch++;
    w->token = *token;
    w->peer = peer;
    w->used = 1;
    w->expire_ns = nv_now_ns() + s->ctx->timeout_ns;
    /* a worker asleep without a deadline must start looking */
    if (nv_rpc_worker_start_locked(s) == 0 && s->nwatch == 1)
        pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

void nv_rpc_defer(struct nv_rpc *s, struct netvm_rpc_handle *h)
{
    pthread_mutex_lock(&s->lock);
    h->qnext = NULL;
    if (s->dq_tail)
        s->dq_tail->qnext = h;
    else
        s->dq_head = h;
    s->dq_tail = h;
    int started = nv_rpc_worker_start_locked(s);
    if (started == 0)
        pthread_cond_signal(&s->cond);
    if (started < 0) {
        /* no worker (finalizing, or no thread to be had): run them here,
         * the one place left; they may block */
        s->dq_head = s->dq_tail = NULL;
        pthread_mutex_unlock(&s->lock);
        nv_rpc_run_conts(h, 1);
        return;
    }
    pthread_mutex_unlock(&s->lock);
}

static int peer_alive(netvm_ctx_t *ctx, int peer)
{
    netvm_peer_info_t pi;
    return netvm_peer_info(ctx, peer, &pi) == NETVM_OK && pi.alive;
}

/* One look at the watched delegates (under s->lock; answers outside it). */
static void check_watch(struct nv_rpc *s)
{
    netvm_am_token_t dead[32];
    unsigned ndead = 0;
    uint64_t now = nv_now_ns();
    for (unsigned i = 0; i < NV_RPC_WATCH && s->nwatch; i++) {
        struct nv_rpc_watch *w = &s->watch[i];
        if (!w->used)
            continue;
        int gone = now >= w->expire_ns;
        if (!gone && !peer_alive(s->ctx, w->peer) && ndead < 32) {
            dead[ndead++] = w->token;
            gone = 1;
        }
        if (gone) {
            w->used = 0;
            s->nwatch--;
        }
    }
    if (!ndead)
        return;
    pthread_mutex_unlock(&s->lock);
    for (unsigned i = 0; i < ndead; i++) {
        /* a call already answered drops this one: tokens are good once */
        netvm_am_reply(s->ctx, &dead[i], NETVM_ERR_PEER, NULL, 0, NULL, 0);
        atomic_fetch_add_explicit(&s->delegate_failures, 1, memory_order_relaxed);
    }
    pthread_mutex_lock(&s->lock);
}

static void *worker_main(void *arg)
{
    struct nv_rpc *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        struct netvm_rpc_handle *h = s->dq_head;
        if (h) {
            s->dq_head = h->qnext;
            if (!s->dq_head)
                s->dq_tail = NULL;
            pthread_mutex_unlock(&s->lock);
            nv_rpc_run_conts(h, 1);
            pthread_mutex_lock(&s->lock);
            continue;
        }
        if (s->stop)
            break;
        if (s->nwatch) {
            check_watch(s);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += NV_RPC_WATCH_NS;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (!s->dq_head && !s->stop)
                pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        } else {
            pthread_cond_wait(&s->cond, &s->lock);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

int nv_rpc_worker_start_locked(struct nv_rpc *s)
{
    if (s->worker_up)
        return 0;
    if (s->stop)
        return -1;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        nv_error("rpc: cannot start the worker thread");
        return -1;
    }
    s->worker_up = 1;
    return 1;
}

void nv_rpc_worker_stop(struct nv_rpc *s)
{
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    int up = s->worker_up;
    pthread_cond_signal(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (up)
        pthread_join(s->worker, NULL);
}
