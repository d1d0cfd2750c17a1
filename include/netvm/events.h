/*
 * netvm events: learning that data has arrived, three ways.
 *
 *  - Tripwires (CLAN): an event when a peer's put, get or atomic touches a
 *    watched local range; or, armed on a remote range, when this process's
 *    own writes to it are complete at the target.
 *  - Notifications (EXTOLL, NetVM): per-operation requester, completer and
 *    responder notifications carrying a user tag; the notification put (a
 *    64-bit value, no data); numbered counting notifications that coalesce.
 *  - Signals (OpenSHMEM style): put data, then set or add a 64-bit word at
 *    the target; the target waits until the word satisfies a comparison.
 *
 * Everything lands in one event queue per context. It is a ring in memory
 * (reading it is no system call); on the same machine the initiating
 * process writes into it directly, across machines the target's progress
 * engine does. Ordering: no event, notification or signal is ever
 * observable before the data it reports, on any link.
 *
 * Included by <netvm/netvm.h>; the same threading rule holds: one
 * application thread at a time uses a context.
 */
#ifndef NETVM_EVENTS_H
#define NETVM_EVENTS_H

#ifndef NETVM_NETVM_H
#error "include <netvm/netvm.h>, not <netvm/events.h>"
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct netvm_tripwire netvm_tripwire_t;
typedef struct netvm_tripset  netvm_tripset_t;

typedef enum {
    NETVM_EV_TRIPWIRE = 1,     /* a peer's access touched a local tripwire: id, value = its user
                                  value, addr/len = the access, access = NETVM_TRIP_READ/WRITE */
    NETVM_EV_REMOTE_TRIPWIRE,  /* this process's own write to a watched remote range is complete
                                  at the target: rank = target, id, value = user value,
                                  addr = offset in the segment, len */
    NETVM_EV_NOTIFY,           /* a notification put from rank: value */
    NETVM_EV_REQUESTER,        /* an operation this process issued with NETVM_F_NOTIFY_REQUESTER
                                  completed: rank = target, value = tag, status */
    NETVM_EV_COMPLETER,        /* the data of a put or atomic with NETVM_F_NOTIFY_COMPLETER is
                                  visible here (rank = initiator), or a get with it landed in
                                  this process (rank = source); value = tag, addr/len */
    NETVM_EV_RESPONDER,        /* this process's memory was read by a get with
                                  NETVM_F_NOTIFY_RESPONDER (rank = reader): the bytes have left,
                                  the range may be reused; value = tag, addr/len */
    NETVM_EV_COUNTER,          /* counting notification with no handler: id = counter,
                                  value = increments since the last delivery */
    NETVM_EV_OVERFLOW,         /* the queue was full: value events were lost (see NETVM_EVQ_SIZE) */
    NETVM_EV_PEER_UP,          /* a process connected through a listener of this context: rank = its
                                  peer id, value = the listener's port */
    NETVM_EV_PEER_DOWN,        /* a connected peer left (status NETVM_OK) or died or was lost
                                  (status NETVM_ERR_PEER): rank = its peer id; its operations fail */
    NETVM_EV_MESSAGE,          /* a message landed in the mailbox (<netvm/msg.h>, with events on):
                                  rank = source, value = tag, len = its length; a receive may
                                  already have taken it */
} netvm_event_type_t;

typedef struct {
    uint16_t type;     /* netvm_event_type_t */
    uint16_t access;   /* NETVM_TRIP_READ and/or NETVM_TRIP_WRITE: what the access did */
    int32_t  rank;     /* the peer it concerns, -1 if none */
    uint32_t id;       /* tripwire id (netvm_tripwire_id) or counter number */
    uint32_t status;   /* NETVM_EV_REQUESTER: the operation's netvm_status_t */
    uint64_t value;    /* user value, notification value, tag or count (see the type) */
    uint64_t addr;     /* the address (or segment offset) the event is about */
    uint64_t len;
} netvm_event_t;

/* --- the event queue ------------------------------------------------- */

/* Take up to max waiting events without blocking (and without a system
 * call); returns how many were stored in ev (0 if none, -1 if ctx or ev is
 * invalid). Counting notifications with a handler are delivered to it here
 * instead of being returned; events of tripwires in a tripset go to the
 * tripset (netvm_tripset_wait) instead. */
int            netvm_evq_poll(netvm_ctx_t *ctx, netvm_event_t *ev, int max);
/* Wait for at least one event, then take up to max: spin NETVM_SPIN_US,
 * then sleep until an event arrives or timeout_ms passes (-1: no limit,
 * 0: just poll). *n receives the count; NETVM_ERR_TIMEOUT if none came. */
netvm_status_t netvm_evq_wait(netvm_ctx_t *ctx, netvm_event_t *ev, int max, int *n, int timeout_ms);
/* A file descriptor for the caller's own poll/select/epoll loop: it becomes
 * readable when an event arrives after netvm_evq_arm. While armed it may
 * also become readable for traffic that brings no event yet (the fd then
 * carries the sockets netvm serves, so the caller's thread serves them):
 * after a wake-up, poll; an empty poll is not an error, arm again. */
int            netvm_evq_fd(netvm_ctx_t *ctx);
/* Ask for the fd to become readable at the next event (as
 * ibv_req_notify_cq). NETVM_OK: nothing waits, sleep on the fd;
 * NETVM_ERR_AGAIN: events already wait, poll them first. The loop:
 *   for (;;) { while (netvm_evq_poll(...) > 0) handle();
 *              if (netvm_evq_arm(ctx) == NETVM_OK) epoll_wait(...); } */
netvm_status_t netvm_evq_arm(netvm_ctx_t *ctx);

/* --- tripwires ------------------------------------------------------- */

enum {
    NETVM_TRIP_READ  = 1u << 0,   /* fire on peers' gets (and atomics) */
    NETVM_TRIP_WRITE = 1u << 1,   /* fire on peers' puts, signals (and atomics) */
    NETVM_TRIP_RW    = NETVM_TRIP_READ | NETVM_TRIP_WRITE,
    NETVM_TRIP_ONCE  = 1u << 2,   /* fire at most once, then stay inert until disarmed */
};

/* Arm a tripwire on [addr, addr+len) of this process (any memory; it fires
 * only for accesses by netvm operations, which reach only exported ranges).
 * An access overlapping the range by at least one byte fires it, once per
 * operation, after the operation's data is visible here. set may be NULL;
 * with a set the events go to netvm_tripset_wait, else to the event queue.
 * Every access that begins after this returns fires it, and the race of
 * "arm, then look at the memory, then wait" is safe: an access the look
 * missed fires the tripwire. The matching runs after an access's data has
 * landed, so an access that landed just before the arm may fire it too:
 * after an event, look at the memory itself, as after any wake-up. */
netvm_status_t netvm_tripwire_arm(netvm_ctx_t *ctx, const void *addr, size_t len, unsigned flags,
                                  uint64_t user, netvm_tripset_t *set, netvm_tripwire_t **tw);
/* Arm on a remote range: fires (NETVM_EV_REMOTE_TRIPWIRE) when a put or
 * signal of this process overlapping [off, off+len) of rseg is complete at
 * the target. flags: NETVM_TRIP_WRITE, optionally NETVM_TRIP_ONCE. */
netvm_status_t netvm_tripwire_arm_remote(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off, size_t len,
                                         unsigned flags, uint64_t user, netvm_tripset_t *set,
                                         netvm_tripwire_t **tw);
/* Disarm and free: once it returns, no event of this tripwire is returned
 * by any call (events already queued are dropped). */
netvm_status_t netvm_tripwire_disarm(netvm_tripwire_t *tw);
/* Without blocking: *fired = times it fired since it was armed or last
 * tested (takes what waits in the queue first). */
netvm_status_t netvm_tripwire_test(netvm_tripwire_t *tw, uint64_t *fired);
/* The id its events carry. */
uint32_t       netvm_tripwire_id(const netvm_tripwire_t *tw);

/* A tripset groups tripwires so a thread can wait for any of them. */
netvm_status_t netvm_tripset_create(netvm_ctx_t *ctx, netvm_tripset_t **set);
/* Disarms the set's tripwires that remain, then frees it. */
netvm_status_t netvm_tripset_destroy(netvm_tripset_t *set);
/* The next event of any tripwire in the set (spin, then sleep; timeout_ms
 * as netvm_evq_wait). Events for others stay queued for netvm_evq_poll. */
netvm_status_t netvm_tripset_wait(netvm_tripset_t *set, netvm_event_t *ev, int timeout_ms);

/* --- notifications --------------------------------------------------- */

/* Operation flags (with NETVM_F_UNORDERED) asking for notifications. */
enum {
    NETVM_F_NOTIFY_REQUESTER = 1u << 4,  /* at the initiator: the operation completed (put: visible
                                            at the target; get: data here; atomic: result here) */
    NETVM_F_NOTIFY_COMPLETER = 1u << 5,  /* where the data lands: put/atomic at the target, get here */
    NETVM_F_NOTIFY_RESPONDER = 1u << 6,  /* get: at the target, once the bytes have been read */
};

/* Put, get and atomic with notifications carrying tag. They return once
 * issued (src reusable, like netvm_put_nb); with NETVM_F_NOTIFY_REQUESTER
 * completion and its status arrive as an event, otherwise put completion is
 * known at netvm_flush, and get or atomic results only through
 * NETVM_F_NOTIFY_REQUESTER or NETVM_F_NOTIFY_COMPLETER (required for them).
 * dst / result must stay valid until the event. */
netvm_status_t netvm_put_notify(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                size_t len, unsigned flags, uint64_t tag);
netvm_status_t netvm_get_notify(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                                size_t len, unsigned flags, uint64_t tag);
netvm_status_t netvm_atomic_notify(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off,
                                   netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                                   uint64_t *result, unsigned flags, uint64_t tag);

/* Notification put: deliver value into peer's event queue (NETVM_EV_NOTIFY),
 * after every put this process issued to peer before it. Returns once
 * issued. */
netvm_status_t netvm_notify(netvm_ctx_t *ctx, int peer, uint64_t value);

/* Counting notifications: each process has NETVM_COUNTERS numbered
 * counters. netvm_counter_add adds n to counter `counter` of rank (ordered
 * after earlier puts to rank, like netvm_notify). Increments coalesce: an
 * armed counter is delivered once, with everything counted so far, and is
 * then disarmed until netvm_counter_ack; what arrives meanwhile is
 * delivered at the next delivery after the ack. Every increment is
 * delivered exactly once. */
typedef void (*netvm_counter_fn)(netvm_ctx_t *ctx, uint32_t counter, uint64_t count, void *arg);
netvm_status_t netvm_counter_add(netvm_ctx_t *ctx, int peer, uint32_t counter, uint64_t n);
/* fn NULL: deliveries are NETVM_EV_COUNTER events; else fn runs inside
 * netvm_evq_poll / netvm_evq_wait of this process. */
netvm_status_t netvm_counter_arm(netvm_ctx_t *ctx, uint32_t counter, netvm_counter_fn fn, void *arg);
/* Re-arm after a delivery (delivers at once if increments wait). */
netvm_status_t netvm_counter_ack(netvm_ctx_t *ctx, uint32_t counter);

/* --- signals ----------------------------------------------------------- */

typedef enum {
    NETVM_SIGNAL_SET,   /* *sig = value   (needs NETVM_WRITE on the signal's segment) */
    NETVM_SIGNAL_ADD,   /* *sig += value  (atomic; needs NETVM_ATOMIC) */
} netvm_signal_op_t;

/* Put len bytes, then set or add the 64-bit word at sig_off of sig (8-byte
 * aligned; sig may be dst itself); the word changes only after the data is
 * visible. Returns at remote completion. */
netvm_status_t netvm_put_signal(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                size_t len, netvm_rseg_t *sig, size_t sig_off, uint64_t value,
                                netvm_signal_op_t op, unsigned flags);
/* The same, returning at local completion (src reusable); netvm_flush
 * reports a failure at the target. */
netvm_status_t netvm_put_signal_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src,
                                   size_t len, netvm_rseg_t *sig, size_t sig_off, uint64_t value,
                                   netvm_signal_op_t op, unsigned flags);

typedef enum {
    NETVM_CMP_EQ, NETVM_CMP_NE, NETVM_CMP_GT, NETVM_CMP_GE, NETVM_CMP_LT, NETVM_CMP_LE,
} netvm_cmp_t;   /* unsigned 64-bit comparisons of *word against value */

enum {
    NETVM_WAIT_SPIN  = 1u << 0,   /* only spin (lowest latency, burns a core) */
    NETVM_WAIT_SLEEP = 1u << 1,   /* sleep at once, no spinning */
};

/* Wait until the local word at addr (8-byte aligned, written by peers'
 * puts, signals or atomics) compares to value as cmp says; flags 0 spins
 * NETVM_SPIN_US then sleeps, woken by the write itself. *seen (may be NULL)
 * receives the word's value. NETVM_ERR_TIMEOUT after timeout_ms (-1: no
 * limit). */
netvm_status_t netvm_wait_until(netvm_ctx_t *ctx, const uint64_t *addr, netvm_cmp_t cmp, uint64_t value,
                                 unsigned flags, int timeout_ms, uint64_t *seen);

#ifdef __cplusplus
}
#endif
#endif /* NETVM_EVENTS_H */
