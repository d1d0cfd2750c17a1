/* The RPC service's per-context state and the pieces its files share
 * (include/netvm/rpc.h is the API). */
#ifndef NV_SVC_RPC_INT_H
#define NV_SVC_RPC_INT_H

#include "core/svc.h"
#include <netvm/rpc.h>
#include "svc/rpc/rpc_svc.h"

#include <pthread.h>
#include <stdatomic.h>

/* Service handler ids: RPC's range of core/svc.h (NV_SVC_RPC + k); the
 * mailbox owns 0-3, so a bare k would take its messages. */
enum { NV_RPC_K_CALL = NV_SVC_RPC + 0 };

/* Calls this process delegated and still watches (a ring: the oldest is
 * overwritten when full, the caller's timeout then being the last resort). */
#define NV_RPC_WATCH 256
/* How often the worker looks at the delegates it watches. */
#define NV_RPC_WATCH_NS (2 * 1000 * 1000)

struct nv_rpc_proc {
    netvm_rpc_proc_fn fn;   /* read and written with __atomic builtins */
    void             *arg;
};

struct nv_rpc_watch {
    netvm_am_token_t token;
    int              peer;
    int              used;
    uint64_t         expire_ns;
};

struct netvm_rpc_handle {
    netvm_ctx_t         *ctx;
    struct nv_rpc       *s;
    _Atomic int          refs;     /* the caller's handle and the call's completion */
    _Atomic int          done;     /* every continuation ran */
    int                  issued;
    netvm_rpc_outcome_t  out;
    unsigned             ncont;
    unsigned             next;     /* continuations [0, next) still to run, top first */
    struct { netvm_rpc_cont_fn fn; void *arg; } cont[NETVM_RPC_MAX_CONT];
    struct netvm_rpc_handle *qnext;   /* in the worker's queue */
};

struct nv_rpc {
    netvm_ctx_t        *ctx;
    struct nv_rpc_proc  procs[NV_RPC_ALL_OPS];   /* the application's ops, then the services' (rpc_svc.h) */
    /* the worker thread: deferred continuations, watched delegates */
    pthread_mutex_t     lock;
    pthread_cond_t      cond;
    pthread_t           worker;
    int                 worker_up, stop;
    struct netvm_rpc_handle *dq_head, *dq_tail;
    struct nv_rpc_watch watch[NV_RPC_WATCH];
    unsigned            watch_next, nwatch;
    _Atomic uint64_t    records_live, nb_calls, deferred_conts, delegated, delegate_failures;
};

/* The context's RPC state, made on first use (NULL: out of memory). */
struct nv_rpc *nv_rpc_state(netvm_ctx_t *ctx);
/* Queue h's remaining continuations for the worker thread. */
void           nv_rpc_defer(struct nv_rpc *s, struct netvm_rpc_handle *h);
/* Run h's continuations from h->next down (deferred: on the worker). */
void           nv_rpc_run_conts(struct netvm_rpc_handle *h, int deferred);
/* Watch the delegate of a call until the call's timeout. */
void           nv_rpc_watch(struct nv_rpc *s, const netvm_am_token_t *token, int peer);
/* Start the worker thread if it is not running (under s->lock). */
int            nv_rpc_worker_start_locked(struct nv_rpc *s);
void           nv_rpc_worker_stop(struct nv_rpc *s);

#endif
