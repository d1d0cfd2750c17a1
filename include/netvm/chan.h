/*
 * netvm channels and distributed queues (NetVM thesis, chapter 7; CLAN's
 * distributed queue): one-way, ordered streams of messages written
 * one-sidedly into the receiver's memory, with credits written back into
 * the sender's memory, so that each side only ever polls or sleeps on its
 * own memory and the receiver's CPU does nothing to accept a message.
 *
 * A channel has one sender and one receiver. The receiver creates it
 * (netvm_chan_create: a ring allocated with netvm_alloc_shared under the
 * channel's name) and names the peer allowed to send; the sender connects
 * by the receiver's peer id and the name (netvm_chan_connect). Messages are
 * 0..max_msg bytes, delivered exactly once and in order.
 *
 * A distributed queue (netvm_dq_*) has one consumer and up to `producers`
 * producers, each a rank of the consumer's job: one ring per producer in
 * the consumer's memory, merged at the consumer. Every item is delivered
 * exactly once, in order per producer.
 *
 * Threads: at NETVM_THREAD_MULTIPLE any thread may call on an end; calls on
 * one end are serialised by the end's own lock (a thread blocked in send or
 * recv holds it). At NETVM_THREAD_SERIALIZED the context's rule holds.
 * No function here may be called from an active-message handler or a
 * request continuation (they block: NETVM_ERR_STATE).
 *
 * Timeouts: timeout_ms < 0 waits without limit, 0 never waits (NETVM_ERR_AGAIN
 * when the call would have to), > 0 waits at most that long
 * (NETVM_ERR_TIMEOUT). A waiting side looks at its peer's liveness every
 * NETVM_CHAN_POLL_MS (default 50) milliseconds, so a dead peer ends any
 * wait with NETVM_ERR_PEER whatever the timeout.
 */
#ifndef NETVM_CHAN_H
#define NETVM_CHAN_H

#include <netvm/netvm.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct netvm_chan_rx netvm_chan_rx_t;  /* a channel's receiving end */
typedef struct netvm_chan_tx netvm_chan_tx_t;  /* a channel's sending end */
typedef struct netvm_dq      netvm_dq_t;       /* a distributed queue's consumer */
typedef struct netvm_dq_prod netvm_dq_prod_t;  /* a distributed queue's producer */

/* Geometry of a ring, chosen by the receiver (or consumer); a zero field
 * takes the default. */
typedef struct {
    size_t ring_bytes;  /* ring capacity: a power of two, 256 B .. 1 GiB (default 64 KiB) */
    size_t max_msg;     /* largest message: at most ring_bytes - 8 (default ring_bytes / 4);
                           at most ring_bytes / 2 keeps credit write-backs lazy */
} netvm_chan_opts_t;

/* Longest channel name (without the terminating NUL). */
#define NETVM_CHAN_NAME_MAX 47

/* --- channels: the receiver's end ------------------------------------ */

/* Create the receiving end of channel `name` (1..NETVM_CHAN_NAME_MAX bytes,
 * unique among this process's channels and queues) for messages from
 * `peer` (a peer id; may be this process). opts may be NULL. Does not wait
 * for the sender. NETVM_ERR_INVAL (bad argument or geometry),
 * NETVM_ERR_EXISTS (name taken), NETVM_ERR_NOMEM. */
netvm_status_t netvm_chan_create(netvm_ctx_t *ctx, int peer, const char *name,
                                 const netvm_chan_opts_t *opts, netvm_chan_rx_t **rx);
/* Take the next message: copy it into buf (cap bytes) and set *len. Blocks
 * up to timeout_ms for one (see above). A message longer than cap stays
 * queued: NETVM_ERR_BOUNDS with *len = its length. NETVM_ERR_STATE once the
 * sender closed the channel and every message was taken; NETVM_ERR_PEER
 * once the sender died and every message it wrote was taken. buf may be
 * NULL when cap is 0. */
netvm_status_t netvm_chan_recv(netvm_chan_rx_t *rx, void *buf, size_t cap, size_t *len,
                               int timeout_ms);
/* Bytes of messages (with their 8-byte headers) waiting; never blocks. */
netvm_status_t netvm_chan_pending(netvm_chan_rx_t *rx, size_t *bytes);
/* Unexport the ring and free the end. A sender still writing fails with
 * NETVM_ERR_REVOKED (or NETVM_ERR_PEER once this process is gone). */
netvm_status_t netvm_chan_destroy(netvm_chan_rx_t *rx);

/* --- channels: the sender's end -------------------------------------- */

/* Connect to channel `name` created by `peer`. Retries while the channel
 * does not exist yet, for up to timeout_ms (NETVM_ERR_NOTFOUND after it;
 * 0: one look). NETVM_ERR_EXISTS if another sender holds it. Blocks for
 * round trips to peer. */
netvm_status_t netvm_chan_connect(netvm_ctx_t *ctx, int peer, const char *name, int timeout_ms,
                                  netvm_chan_tx_t **tx);
/* Send len (0..max_msg) bytes: blocks up to timeout_ms for credits (room
 * in the ring), then writes the message into the receiver's memory and
 * returns once buf is reusable (the message is on its way; a failure at
 * the target shows at the next send, netvm_chan_flush or close).
 * NETVM_ERR_BOUNDS if len > max_msg; NETVM_ERR_PEER if the receiver died;
 * NETVM_ERR_AGAIN (timeout_ms 0) / NETVM_ERR_TIMEOUT when the receiver did
 * not make room in time (nothing was sent). */
netvm_status_t netvm_chan_send(netvm_chan_tx_t *tx, const void *buf, size_t len, int timeout_ms);
/* Returns when every message sent so far is visible in the receiver's
 * memory (not necessarily received). */
netvm_status_t netvm_chan_flush(netvm_chan_tx_t *tx);
/* The receiver's largest message size. */
size_t         netvm_chan_max_msg(const netvm_chan_tx_t *tx);
/* Close: the receiver gets every message sent, then NETVM_ERR_STATE. Frees
 * the end whatever the status (which reports a failure to reach the
 * receiver). */
netvm_status_t netvm_chan_close(netvm_chan_tx_t *tx);

/* --- distributed queues ---------------------------------------------- */

/* Create queue `name` for up to `producers` producers (1..1024), each a
 * rank of this job; opts sizes each producer's ring. Errors as
 * netvm_chan_create. */
netvm_status_t netvm_dq_create(netvm_ctx_t *ctx, const char *name, int producers,
                               const netvm_chan_opts_t *opts, netvm_dq_t **dq);
/* Take the next item of any producer (round robin among those with
 * items): as netvm_chan_recv, plus *producer = the producer's index (0..,
 * in the order they joined; may be NULL) and *rank = its rank (may be
 * NULL). NETVM_ERR_PEER: producer *producer died, and every item it wrote
 * has been taken (reported once per dead producer; the queue goes on with
 * the others). NETVM_ERR_STATE: every producer slot joined and closed (or
 * died), every item taken. */
netvm_status_t netvm_dq_recv(netvm_dq_t *dq, void *buf, size_t cap, size_t *len, int *producer,
                             int *rank, int timeout_ms);
/* Unexport the rings and free the queue. */
netvm_status_t netvm_dq_destroy(netvm_dq_t *dq);

/* Join queue `name` of rank `consumer` as its next producer (a slot is
 * taken with one remote atomic); retries a missing queue as
 * netvm_chan_connect. NETVM_ERR_AGAIN if every slot is taken. */
netvm_status_t netvm_dq_join(netvm_ctx_t *ctx, int consumer, const char *name, int timeout_ms,
                             netvm_dq_prod_t **p);
/* As netvm_chan_send, netvm_chan_flush, netvm_chan_max_msg, netvm_chan_close. */
netvm_status_t netvm_dq_send(netvm_dq_prod_t *p, const void *buf, size_t len, int timeout_ms);
netvm_status_t netvm_dq_flush(netvm_dq_prod_t *p);
size_t         netvm_dq_max_msg(const netvm_dq_prod_t *p);
netvm_status_t netvm_dq_leave(netvm_dq_prod_t *p);

#ifdef __cplusplus
}
#endif
#endif /* NETVM_CHAN_H */
