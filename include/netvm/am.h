/*
 * netvm active messages: everything that is not a one-sided access.
 *
 * A message names a handler (registered per context by id), carries up to
 * NETVM_AM_MAX_ARGS 64-bit arguments and a payload of any size up to
 * NETVM_AM_MAX_LEN. Small payloads travel with the header (eager); large
 * ones move zero-copy, straight into a buffer the receiving handler names
 * (netvm_am_recv), or into one named by a payload token.
 *
 * A request (netvm_am_request) carries a reply token: whoever holds the
 * token — the peer that received the request, or any peer it forwarded
 * the request to (netvm_am_forward) — may answer it once
 * (netvm_am_reply). The origin checks every reply against its pending
 * calls: unknown, stale and repeated replies are dropped and counted
 * (netvm_am_stats), never delivered. A reply's payload lands in the reply
 * buffer the caller named, checked by key before a byte lands.
 *
 * Handlers run in the progress engine: the progress thread, or an
 * application thread that is waiting inside netvm or calls netvm_progress.
 * Rules (docs/am.md):
 *  - a handler must not block: a netvm call that would wait (for a peer's
 *    answer, a request, a barrier: netvm_wait, a blocking
 *    netvm_am_request, netvm_flush, netvm_put or netvm_get over tcp or an
 *    atomic the target runs) returns NETVM_ERR_STATE inside a handler; the
 *    ones that complete at once (netvm_put, netvm_get and atomics on the
 *    shm link's paths) work. Use the nonblocking forms, with
 *    netvm_req_then for what follows;
 *  - it may send: netvm_am_send without a request pointer returns once the
 *    message is queued, netvm_am_reply and netvm_am_forward never block;
 *  - it may defer itself: returning NETVM_AM_DEFER keeps the message and
 *    calls the handler again later (its payload, eager or large, is kept
 *    with it; a handler that named a buffer with netvm_am_recv is not
 *    called again for that message: its done callback is);
 *  - it sees an eager payload only during the call: copy what it keeps.
 * Flow control: each peer may have NETVM_AM_CREDITS one-way messages not
 * yet handled at a receiver; a sender beyond that waits (or gets
 * NETVM_ERR_AGAIN inside a handler), so no peer can make another hold more
 * than NETVM_AM_CREDITS messages of it.
 *
 * Included by <netvm/netvm.h>.
 */
#ifndef NETVM_AM_H
#define NETVM_AM_H

#ifndef NETVM_NETVM_H
#error "include <netvm/netvm.h>, not <netvm/am.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define NETVM_AM_MAX_ARGS  6
#define NETVM_AM_MAX_LEN   (1ull << 30)
/* handler ids 0 .. NETVM_AM_MAX_ID - 1 are the application's */
#define NETVM_AM_MAX_ID    1024

/* A reply token: plain data, copy it anywhere (another thread, another
 * peer's message); it is good for one reply. */
typedef struct {
    uint64_t w[4];
} netvm_am_token_t;

/* A message as its handler sees it. */
typedef struct {
    int             peer;       /* the sender */
    unsigned        id;         /* the handler id */
    unsigned        nargs;
    uint64_t        args[NETVM_AM_MAX_ARGS];
    const void     *payload;    /* the payload, valid during the call; NULL when len > 0 and the
                                   payload is large: name a buffer with netvm_am_recv */
    size_t          len;
    int             has_token;  /* a request: token answers it */
    netvm_am_token_t token;
    unsigned        deferred;   /* how often this message was deferred before */
    void           *nv;         /* netvm's own */
} netvm_am_msg_t;

enum {
    NETVM_AM_DONE  = 0,   /* the handler is done with the message */
    NETVM_AM_DEFER = 1,   /* not now: call again later */
};

typedef int (*netvm_am_handler_fn)(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg);

/* Register fn for handler id (0 <= id < NETVM_AM_MAX_ID); fn NULL removes
 * it. A message for an id without a handler is dropped and counted (and a
 * request to it is answered with NETVM_ERR_NOTFOUND). */
netvm_status_t netvm_am_register(netvm_ctx_t *ctx, unsigned id, netvm_am_handler_fn fn, void *arg);

/* Send a one-way message to peer. req NULL: returns once payload may be
 * reused (for a large payload: once the receiver has it). req non-NULL:
 * returns at once, *req (NULL if already complete) completes when payload
 * may be reused. */
netvm_status_t netvm_am_send(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args,
                             unsigned nargs, const void *payload, size_t len, netvm_req_t **req);

/* The answer to a request. */
typedef struct {
    netvm_status_t status;   /* the status the replier gave (NETVM_OK, or its error); netvm's
                                own failure (peer died, timeout) is the request's status */
    unsigned       nargs;
    uint64_t       args[NETVM_AM_MAX_ARGS];
    size_t         len;      /* payload bytes that landed in reply_buf */
    int            peer;     /* who answered */
} netvm_am_result_t;

/* Send a request carrying a reply token and wait for the answer (req
 * NULL), or return at once with *req completing when the answer arrives.
 * The reply's payload lands in reply_buf (reply_cap bytes; a longer reply
 * fails the request with NETVM_ERR_BOUNDS); result receives the rest. */
netvm_status_t netvm_am_request(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args,
                                unsigned nargs, const void *payload, size_t len, void *reply_buf,
                                size_t reply_cap, netvm_am_result_t *result, netvm_req_t **req);

/* Answer a request (from any thread, any peer holding its token, once).
 * Never blocks. NETVM_ERR_PEER if the origin is not a peer of this
 * context; NETVM_ERR_KEY if the token's payload key is not its call's
 * (an altered token: the payload key is derived from the call key). */
netvm_status_t netvm_am_reply(netvm_ctx_t *ctx, const netvm_am_token_t *token, netvm_status_t status,
                              const uint64_t *args, unsigned nargs, const void *payload, size_t len);

/* Pass a request on to peer's handler id with its reply token: that
 * handler (or one it forwards to) answers the origin directly. Never
 * blocks. */
netvm_status_t netvm_am_forward(netvm_ctx_t *ctx, int peer, unsigned id, const netvm_am_token_t *token,
                                const uint64_t *args, unsigned nargs, const void *payload, size_t len);

/* Inside a handler whose msg->payload is NULL: land the payload in buf
 * (at least msg->len bytes). done (may be NULL) runs once it has landed,
 * or failed, in the progress engine. Without this call the payload is
 * discarded. */
typedef void (*netvm_am_recv_fn)(netvm_ctx_t *ctx, netvm_am_msg_t *msg, netvm_status_t status, void *arg);
netvm_status_t netvm_am_recv(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *buf, netvm_am_recv_fn done,
                             void *arg);

/* Counters of what the active-message layer dropped or did. */
typedef struct {
    uint64_t sent, received, replies;
    uint64_t dropped_replies;    /* unknown, stale, repeated or forged replies */
    uint64_t dropped_no_handler; /* messages for ids without a handler */
    uint64_t deferred;           /* times a handler deferred a message */
    uint64_t credit_waits;       /* sends that waited for a credit */
} netvm_am_stats_t;
netvm_status_t netvm_am_stats(netvm_ctx_t *ctx, netvm_am_stats_t *stats);

#ifdef __cplusplus
}
#endif

#endif
