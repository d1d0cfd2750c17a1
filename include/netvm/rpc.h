/*
 * netvm RPC: remote procedures by operation code, after gms.net of
 * GMS/Trapeze (docs/services-rpc.md).
 *
 * A process registers procedures by operation code (netvm_rpc_register);
 * any peer calls them, blocking (netvm_rpc_call) or not (netvm_rpc_begin,
 * netvm_rpc_push, netvm_rpc_issue). A call is one active-message request:
 * its reply token (the call record's id, key and the payload token of the
 * caller's reply buffer) travels with it, and whoever holds the token
 * answers: the procedure at once, later (it keeps the token: plain data),
 * or a peer it delegated the call to (netvm_rpc_delegate, any number of
 * hops), which answers the caller directly. The reply's payload lands
 * straight in the reply buffer the caller named. The caller accepts one
 * answer per call: forged, stale and repeated answers are dropped and
 * counted (netvm_am_stats().dropped_replies).
 *
 * Procedures and continuations run in the progress engine and follow the
 * active-message rules (docs/am.md): they must not block; they may send,
 * reply and delegate.
 *
 * Safe at NETVM_THREAD_MULTIPLE: any thread may call, wait, reply.
 */
#ifndef NETVM_RPC_H
#define NETVM_RPC_H

#include <netvm/netvm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Operation codes 0 .. NETVM_RPC_MAX_OPS - 1. */
#define NETVM_RPC_MAX_OPS   256
/* A call carries up to this many 64-bit arguments (the operation code takes
 * one of the active message's); a reply up to NETVM_AM_MAX_ARGS. */
#define NETVM_RPC_MAX_ARGS  (NETVM_AM_MAX_ARGS - 1)
/* Continuations one nonblocking call may hold. */
#define NETVM_RPC_MAX_CONT  8

/* A call as its procedure sees it. */
typedef struct {
    int              peer;      /* who sent it: the caller, or the peer that delegated it */
    unsigned         op;
    unsigned         nargs;
    uint64_t         args[NETVM_RPC_MAX_ARGS];
    const void      *payload;   /* the request's payload (any size), valid during the call */
    size_t           len;
    netvm_am_token_t token;     /* the reply token: copy it to answer later or elsewhere */
    unsigned         deferred;  /* how often the procedure deferred this call before */
} netvm_rpc_call_t;

/* What a procedure returns. */
enum {
    NETVM_RPC_DONE  = 0,   /* done with the call (answered, delegated, or kept its token) */
    NETVM_RPC_DEFER = 1,   /* procedure: not now, call again later with the same call;
                              continuation: not now, run me on the RPC worker thread */
};

typedef int (*netvm_rpc_proc_fn)(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg);

/* Register fn for op (< NETVM_RPC_MAX_OPS) on this process; fn NULL removes
 * it. A call to an op without a procedure is answered NETVM_ERR_NOTFOUND.
 * The procedure runs in the progress engine, must not block, and must
 * answer (netvm_rpc_reply), delegate (netvm_rpc_delegate) or keep the
 * token to answer later; returning NETVM_RPC_DEFER runs it again later
 * with the same call. Never blocks. NETVM_ERR_INVAL for a bad ctx or op,
 * NETVM_ERR_NOMEM if the RPC service could not start. Any thread. */
netvm_status_t netvm_rpc_register(netvm_ctx_t *ctx, unsigned op, netvm_rpc_proc_fn fn, void *arg);

/* Answer a call from any thread of any process holding its token, once:
 * status is the procedure's (the caller's netvm_rpc_call returns it),
 * args/payload the reply's: the payload lands in the caller's reply
 * buffer, checked by the payload token's key before a byte lands; one
 * longer than that buffer (or any, when the caller named none) fails the
 * call at the caller with NETVM_ERR_BOUNDS, the buffer untouched. A second
 * answer to one token, or one with an altered call key, is dropped by the
 * caller and counted (netvm_am_stats().dropped_replies). Never blocks.
 * NETVM_ERR_INVAL for bad arguments, NETVM_ERR_PEER if the caller is gone. */
netvm_status_t netvm_rpc_reply(netvm_ctx_t *ctx, const netvm_am_token_t *token, netvm_status_t status,
                               const uint64_t *args, unsigned nargs, const void *payload, size_t len);

/* Delegate call to procedure op of peer with new arguments and payload:
 * that procedure (or one it delegates to) answers the caller directly.
 * This process watches the delegate until the call's timeout (NETVM_TIMEOUT
 * here): if the delegate dies meanwhile it answers the caller
 * NETVM_ERR_PEER itself (a call already answered drops that). Never
 * blocks. NETVM_ERR_INVAL for bad arguments; NETVM_ERR_PEER if peer is
 * dead already (nothing was sent: answer the call or try another peer). */
netvm_status_t netvm_rpc_delegate(netvm_ctx_t *ctx, const netvm_rpc_call_t *call, int peer, unsigned op,
                                  const uint64_t *args, unsigned nargs, const void *payload, size_t len);

/* The answer to a call (the active-message result). */
typedef netvm_am_result_t netvm_rpc_result_t;

/* Call op at peer and wait for the answer. The reply's payload lands in
 * reply_buf (reply_cap bytes); res (may be NULL) receives the procedure's
 * status, reply arguments, reply length and the peer that answered.
 * timeout_ms 0: NETVM_TIMEOUT; > 0 this call's own. Returns netvm's
 * failure (NETVM_ERR_PEER: the peer died or a delegate did;
 * NETVM_ERR_TIMEOUT; NETVM_ERR_BOUNDS: the reply did not fit, reply_buf
 * untouched; NETVM_ERR_INVAL: bad arguments, more than
 * NETVM_RPC_MAX_ARGS) or else the procedure's status. Blocks
 * (NETVM_ERR_STATE in a handler or continuation). Any thread. */
netvm_status_t netvm_rpc_call(netvm_ctx_t *ctx, int peer, unsigned op, const uint64_t *args, unsigned nargs,
                              const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                              int timeout_ms, netvm_rpc_result_t *res);

/* --- nonblocking calls ------------------------------------------------- */

/* A nonblocking call's record. */
typedef struct netvm_rpc_handle netvm_rpc_handle_t;

/* What a continuation sees. */
typedef struct {
    netvm_status_t     status;    /* netvm_rpc_call's return value for this call */
    netvm_rpc_result_t res;       /* the answer (res.peer -1 if none came) */
    int                deferred;  /* 1: on the RPC worker thread, may block */
} netvm_rpc_outcome_t;

/* A continuation: runs exactly once per call (answer, failure or timeout).
 * In the progress engine it must not block; it returns NETVM_RPC_DONE, or
 * NETVM_RPC_DEFER with no side effect when it cannot take what it needs
 * now: it then runs again, with the continuations below it, on the RPC
 * service's worker thread (outcome->deferred 1), where it may block (a
 * netvm call there needs NETVM_THREAD_MULTIPLE, or no other application
 * thread in netvm meanwhile); NETVM_RPC_DEFER there runs it again 1 ms
 * later. */
typedef int (*netvm_rpc_cont_fn)(netvm_ctx_t *ctx, const netvm_rpc_outcome_t *outcome, void *arg);

/* A call record for a nonblocking call. Never blocks. NETVM_ERR_NOMEM. */
netvm_status_t netvm_rpc_begin(netvm_ctx_t *ctx, netvm_rpc_handle_t **h);
/* Push a continuation onto the call's stack before netvm_rpc_issue; they
 * run last pushed first. NETVM_ERR_NOMEM beyond NETVM_RPC_MAX_CONT,
 * NETVM_ERR_STATE once issued. */
netvm_status_t netvm_rpc_push(netvm_rpc_handle_t *h, netvm_rpc_cont_fn fn, void *arg);
/* Send the call (as netvm_rpc_call; payload may be reused on return,
 * reply_buf must stay valid until the call completed). Returns at once.
 * NETVM_OK: the call is under way, or it already failed (a dead peer; no
 * request slot free inside a handler or continuation: NETVM_ERR_AGAIN;
 * outside one the call waits for a slot): the continuations then ran
 * already, here. NETVM_ERR_INVAL
 * (bad arguments) or NETVM_ERR_STATE (issued before): nothing happened.
 * Never blocks (in a handler too). */
netvm_status_t netvm_rpc_issue(netvm_rpc_handle_t *h, int peer, unsigned op, const uint64_t *args,
                               unsigned nargs, const void *payload, size_t len, void *reply_buf,
                               size_t reply_cap, int timeout_ms);
/* Wait until the call and every continuation of it completed, free the
 * record and return its status (as netvm_rpc_call; res may be NULL).
 * Blocks (NETVM_ERR_STATE in a handler). */
netvm_status_t netvm_rpc_wait(netvm_rpc_handle_t *h, netvm_rpc_result_t *res);
/* Without blocking: *done 1 if complete (the record is then freed and the
 * status returned as by netvm_rpc_wait), else 0 and NETVM_OK. */
netvm_status_t netvm_rpc_test(netvm_rpc_handle_t *h, int *done, netvm_rpc_result_t *res);
/* Give the handle up: the call goes on, its continuations run, and its
 * record is freed when it completes (every call completes: an answer, a
 * failure, or its timeout). A record never issued is freed now. */
netvm_status_t netvm_rpc_drop(netvm_rpc_handle_t *h);

/* --- counters ---------------------------------------------------------- */

typedef struct {
    uint64_t records_live;      /* nonblocking call records not yet freed */
    uint64_t nb_calls;          /* nonblocking calls issued */
    uint64_t deferred_conts;    /* continuations run on the worker thread */
    uint64_t delegated;         /* calls this process delegated */
    uint64_t delegate_failures; /* calls answered NETVM_ERR_PEER because a delegate died */
} netvm_rpc_stats_t;
netvm_status_t netvm_rpc_stats(netvm_ctx_t *ctx, netvm_rpc_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif
