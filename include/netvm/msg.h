/*
 * netvm messages: small tagged messages into a per-context mailbox (EXTOLL's
 * VELO, CLAN's out-of-band queues).
 *
 * Every context has a mailbox: a receive ring of at most NETVM_MSG_SLOTS
 * messages of at most NETVM_MSG_MAX bytes each. A message carries its
 * source peer and a 64-bit user tag. A receive takes the oldest message
 * that matches a source and a tag (either may be a wildcard); a probe looks
 * without taking.
 *
 * Order: messages from one source are received in the order they were
 * sent (among those a receive matches: a receive by tag may take a later
 * message of the same source whose tag matches before an earlier one that
 * does not). Sends by several threads to one peer are ordered as the
 * threads' calls are serialized.
 *
 * Flow control: a full mailbox holds further messages back at their
 * senders (the active-message credits of docs/am.md): a receiver that stops
 * reading slows its senders down and loses nothing.
 *
 * Events: with events on (netvm_msg_setup, or NETVM_MSG_EVENTS=1) each
 * message that lands posts NETVM_EV_MESSAGE (rank = source, value = tag,
 * len = length) into the event queue, so a program can sleep in
 * netvm_evq_wait or on netvm_evq_fd and then receive.
 *
 * Threads: every call is safe at NETVM_THREAD_MULTIPLE; at SERIALIZED the
 * usual rule holds (one application thread at a time). Inside an
 * active-message handler or continuation the blocking calls
 * (netvm_msg_send, netvm_msg_recv) return NETVM_ERR_STATE, except that
 * netvm_msg_send of a message up to the link's eager size queues it
 * without blocking (or returns NETVM_ERR_AGAIN when it would have to wait
 * for a credit); netvm_msg_try_recv and netvm_msg_probe work anywhere.
 *
 * Guide: docs/services-msg.md.
 */
#ifndef NETVM_MSG_H
#define NETVM_MSG_H

#include <netvm/netvm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Wildcards of a receive or a probe. NETVM_MSG_ANY_TAG is not a tag a
 * message may carry. */
#define NETVM_MSG_ANY_SOURCE (-1)
#define NETVM_MSG_ANY_TAG    UINT64_MAX

/* What a receive or a probe found. */
typedef struct {
    int      source;   /* the sender's peer id */
    uint64_t tag;
    size_t   len;      /* the message's length in bytes */
} netvm_msg_info_t;

/* The mailbox's settings. A zero field takes the environment's value. */
typedef struct {
    size_t   max_size;  /* largest message in bytes (NETVM_MSG_MAX, default 4096; at most 1 MiB) */
    unsigned slots;     /* messages the mailbox holds (NETVM_MSG_SLOTS, default 256) */
    int      events;    /* 1: NETVM_EV_MESSAGE per message, -1: none, 0: NETVM_MSG_EVENTS
                           (default 0) */
} netvm_msg_opts_t;

/* Set up this context's mailbox with opts (NULL: the environment). Only
 * before the mailbox exists, that is before this process's first msg call
 * and before the first message reaches it (call it right after netvm_init,
 * before the barrier that tells peers to send): NETVM_ERR_STATE after.
 * Use the same max_size on every process: a sender checks its own, a
 * receiver drops (and logs) a message larger than its own.
 * NETVM_ERR_INVAL: ctx NULL or max_size above 1 MiB; NETVM_ERR_NOMEM. */
netvm_status_t netvm_msg_setup(netvm_ctx_t *ctx, const netvm_msg_opts_t *opts);

/* Send len bytes of buf (len may be 0) with tag to peer's mailbox (peer
 * may be this process). Returns once buf may be reused. Blocks while peer
 * has no room for it (its mailbox is full, or its active-message credits
 * for this process are spent), at most NETVM_TIMEOUT (NETVM_ERR_TIMEOUT).
 * Errors: NETVM_ERR_INVAL (ctx NULL, buf NULL with len > 0, tag
 * NETVM_MSG_ANY_TAG), NETVM_ERR_BOUNDS (len > the maximum message size),
 * NETVM_ERR_RANK (no such peer), NETVM_ERR_PEER (peer dead or gone),
 * NETVM_ERR_AGAIN (inside a handler: no credit now, or another send to
 * peer is under way on this thread's stack), NETVM_ERR_STATE (inside a
 * handler, a message above the link's eager size). */
netvm_status_t netvm_msg_send(netvm_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len);

/* The same, without waiting for the receiver to copy a large message:
 * *req (NULL when already complete) completes, through netvm_test /
 * netvm_wait / netvm_req_then, once buf may be reused. It still waits for
 * a credit when none is left (inside a handler: NETVM_ERR_AGAIN). req
 * must not be NULL.
 * Sent while a polling loop (netvm_progress, netvm_msg_try_recv, ...)
 * holds the connections, a small message may wait to leave with the next
 * ones: on tcp a stream of them then costs one system call, not one
 * each. It leaves at the next netvm call of that loop that polls, waits
 * or receives, and at most NETVM_ACK_DELAY_US later if none comes.
 * netvm_msg_send always sends at once. */
netvm_status_t netvm_msg_isend(netvm_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                               netvm_req_t **req);

/* Take the oldest message from source (or NETVM_MSG_ANY_SOURCE) with tag
 * (or NETVM_MSG_ANY_TAG) into buf (cap bytes); info (may be NULL) says
 * what it was. Waits for one at most timeout_ms (< 0: no limit; 0: as
 * netvm_msg_try_recv): NETVM_ERR_TIMEOUT if none came. Errors:
 * NETVM_ERR_BOUNDS (the matched message is longer than cap: it stays in
 * the mailbox, info says its length), NETVM_ERR_PEER (source names a peer
 * that is dead or gone and nothing of it matches: its messages that had
 * reached the mailbox stay receivable until then), NETVM_ERR_RANK (no
 * such peer), NETVM_ERR_INVAL (ctx NULL, buf NULL with cap > 0, source
 * below -1), NETVM_ERR_STATE (inside a handler: use
 * netvm_msg_try_recv). */
netvm_status_t netvm_msg_recv(netvm_ctx_t *ctx, int source, uint64_t tag, void *buf, size_t cap,
                              netvm_msg_info_t *info, int timeout_ms);

/* The same without waiting: NETVM_ERR_AGAIN if nothing matches now. Does
 * one pass of progress first when nothing matches (outside handlers), so
 * a loop of it needs no progress thread. Any thread, handlers included. */
netvm_status_t netvm_msg_try_recv(netvm_ctx_t *ctx, int source, uint64_t tag, void *buf, size_t cap,
                                  netvm_msg_info_t *info);

/* Is there a message that a receive with source and tag would take now?
 * NETVM_OK and *info filled (nothing taken), NETVM_ERR_AGAIN if none,
 * NETVM_ERR_PEER / NETVM_ERR_RANK / NETVM_ERR_INVAL as a receive. Never
 * blocks; one pass of progress as netvm_msg_try_recv. */
netvm_status_t netvm_msg_probe(netvm_ctx_t *ctx, int source, uint64_t tag, netvm_msg_info_t *info);

#ifdef __cplusplus
}
#endif

#endif /* NETVM_MSG_H */
