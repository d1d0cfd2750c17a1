/* The endpoint block: what every link delivers into at a target. It is the
 * NIC-side half of CLAN's tripwires and of EXTOLL's notifications, kept in
 * one memfd per process so that on the same machine the initiator itself
 * plays the NIC (maps the block, matches the tripwire table, posts into the
 * event ring, wakes the owner only if it sleeps), and across machines the
 * target's progress engine does the same on its own block.
 *
 *   header    the ring's positions, the wake-up words, the tripwire table's
 *             sequence lock
 *   ring      events (MPSC ring of nv_ep_rec)
 *   tables    armed tripwires, an interval index (util/itree) sorted by
 *             address: O(log n) per access; two copies (see table_seq)
 *   states    one entry per tripwire id: flags, generation, user value, and
 *             the once-only claim
 *   counters  counting notifications: pending count and armed flag
 *
 * Peers on the machine can write the ring, the claims and the counters, as
 * they can write the shm link's block: the owner checks every record it
 * reads (ids in range, generations current) and never trusts a peer's
 * bytes for anything but events it could have posted.
 *
 * Ordering: a poster applies its data first, then calls nv_ep_access /
 * nv_ep_post; the ring's release publishes the data with the event. Arming
 * versus an access is a Dekker handshake (owner: store the table, heavy
 * fence, look at the data; initiator: store the data, light fence, look at
 * the table), so an owner that arms and then checks its memory never misses
 * a write that the table did not see. */
#ifndef NV_LINK_EP_H
#define NV_LINK_EP_H

#include <netvm/netvm.h>
#include "util/itree.h"
#include "util/mpsc_ring.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define NV_EP_MAGIC   0x3150454d564e4e4eull   /* "NNVMEP1" */
#define NV_EP_VERSION 1

/* Record types: the public netvm_event_type_t, and internal ones. */
enum {
    NV_EP_COUNTER = 100,   /* counter `id` has increments pending (payload in the counter) */
};

/* One event as it sits in the ring. */
struct nv_ep_rec {
    uint16_t type;     /* netvm_event_type_t or NV_EP_* */
    uint16_t access;   /* NETVM_TRIP_READ / NETVM_TRIP_WRITE */
    int32_t  rank;
    uint32_t id;       /* tripwire id or counter number */
    uint32_t gen;      /* tripwire generation when it fired */
    uint32_t status;
    uint32_t pad;
    uint64_t value;
    uint64_t addr;
    uint64_t len;
};

/* Tripwire state flags (the access bits are NETVM_TRIP_READ / WRITE). */
enum {
    NV_TRIP_ONCE = NETVM_TRIP_ONCE,
    NV_TRIP_WAKE = 1u << 3,    /* no event: wake threads sleeping in nv_ep_wake_wait */
    NV_TRIP_LIVE = 1u << 4,
};
#define NV_TRIP_WORD(gen, flags) ((uint64_t)(gen) << 8 | (flags))
#define NV_TRIP_GEN(w)   ((uint32_t)((w) >> 8))
#define NV_TRIP_FLAGS(w) ((unsigned)((w) & 0xff))
#define NV_TRIP_CLAIMED  (1u << 31)
#define NV_TRIP_CLAIM_GEN(gen) ((uint32_t)(gen) & ~NV_TRIP_CLAIMED)

struct nv_ep_trip {
    _Atomic uint64_t word;     /* generation << 8 | flags */
    _Atomic uint64_t user;
    _Atomic uint32_t claimed;  /* a once-only tripwire: its generation (low 31 bits),
                                  with NV_TRIP_CLAIMED once an access fired it */
    uint32_t         pad[3];
};

struct nv_ep_counter {
    _Atomic uint64_t pending;  /* increments not yet delivered */
    _Atomic uint32_t armed;
} __attribute__((aligned(64)));

struct nv_ep_hdr {
    uint64_t magic;
    uint32_t version;
    int32_t  rank;
    int32_t  wake_fd;          /* eventfd number in the owner */
    uint32_t ring_size;        /* power of two */
    uint32_t trip_cap;         /* tripwire ids and table entries */
    uint32_t ncounters;
    uint64_t ring_off, table_off, states_off, counters_off, block_len;

    _Atomic uint64_t ring_head __attribute__((aligned(64)));
    _Atomic uint64_t ring_tail __attribute__((aligned(64)));
    /* fd_armed: the owner asked for the eventfd at the next event;
     * wake_seq / wake_sleepers: a futex for threads waiting on memory */
    _Atomic uint32_t fd_armed __attribute__((aligned(64)));
    _Atomic uint32_t wake_seq;
    _Atomic uint32_t wake_sleepers;
    _Atomic uint64_t overflow;  /* events lost to a full ring, not yet reported */
    /* the table, in two copies: a change is written into the copy readers
     * are not using, then made current, so a reader never waits for the
     * owner (who may be descheduled, or dead, in the middle of a change).
     * table_seq: even, copy (seq / 2) & 1 is current; odd, the owner is
     * writing the other one. trips: entries in the current copy. */
    _Atomic uint64_t table_seq __attribute__((aligned(64)));
    _Atomic uint32_t table_n[2];
    _Atomic uint32_t trips;
};

/* A process's handle on a block (its own, or a peer's it mapped). */
struct nv_ep {
    struct nv_ep_hdr *h;
    size_t            len;
    int               memfd;     /* owner: the block's memfd */
    int               wake_fd;   /* owner: the eventfd; peer: our dup of it */
    int               owner;
    /* the layout, read once (checked, for a peer's block) and never again
     * from memory the block's owner can still write */
    struct nv_mpsc        ring;
    struct nv_itree_node *table[2];
    struct nv_ep_trip    *states;
    struct nv_ep_counter *counters;
    uint32_t              trip_cap, ncounters;
};

/* --- the owner ----------------------------------------------------------- */

netvm_status_t nv_ep_create(struct nv_ep *ep, int rank, uint32_t ring_size, uint32_t trip_cap,
                            uint32_t ncounters);
void           nv_ep_destroy(struct nv_ep *ep);
/* Next record; 1 if one was taken. Only one consumer thread at a time. */
int            nv_ep_pop(struct nv_ep *ep, struct nv_ep_rec *r);
int            nv_ep_nonempty(struct nv_ep *ep);
/* Events lost since the last call. */
uint64_t       nv_ep_take_overflow(struct nv_ep *ep);
/* Ask for the eventfd at the next event; 1 if events already wait. */
int            nv_ep_arm_fd(struct nv_ep *ep);
/* Tripwire table changes (the caller serialises them): set id's state and
 * insert it, or remove it. The range is [start, end). Arming ends with the
 * heavy fence (see above). */
void           nv_ep_trip_add(struct nv_ep *ep, uint32_t id, uint32_t gen, unsigned flags, uint64_t user,
                              uint64_t start, uint64_t end);
void           nv_ep_trip_del(struct nv_ep *ep, uint32_t id, uint64_t start);
/* Counters: arm (returns the pending count to deliver now, taking it, or 0
 * leaving the counter armed). */
uint64_t       nv_ep_counter_arm(struct nv_ep *ep, uint32_t c);
/* A NV_EP_COUNTER record arrived: the count to deliver (then the counter is
 * disarmed), 0 if nothing is due. */
uint64_t       nv_ep_counter_take(struct nv_ep *ep, uint32_t c);
/* Wait on memory: the wake sequence before checking a condition, then sleep
 * until it changes (or timeout_ns passes). */
uint32_t       nv_ep_wake_seq(struct nv_ep *ep);
void           nv_ep_wake_wait(struct nv_ep *ep, uint32_t seen, uint64_t timeout_ns);
/* After nv_ep_wake_seq, when the condition held and no sleep follows. */
void           nv_ep_wake_cancel(struct nv_ep *ep);

/* --- a peer (or the owner's own progress engine) ------------------------- */

/* Check a peer's block mapped at base (len bytes) and take it; wake_fd is
 * ours to close. 0 on success. */
int            nv_ep_attach(struct nv_ep *ep, void *base, size_t len, int wake_fd);
/* Post a record and wake the owner if it asked; 0, or -1 if the ring was
 * full (the loss is counted and reported to the owner). */
int            nv_ep_post(struct nv_ep *ep, const struct nv_ep_rec *r);
/* An access by src_rank to [addr, addr+len) of the owner is complete:
 * fire the tripwires it touched. */
void           nv_ep_access(struct nv_ep *ep, int src_rank, uint64_t addr, uint64_t len, unsigned access);
/* Add n to counter c; returns NETVM_ERR_INVAL if there is no such counter. */
netvm_status_t nv_ep_count(struct nv_ep *ep, int src_rank, uint32_t c, uint64_t n);

/* Fast check: is any tripwire armed? (skips the fence when not) */
static inline int nv_ep_has_trips(const struct nv_ep *ep)
{
    return atomic_load_explicit(&ep->h->trips, memory_order_relaxed) != 0;
}

/* Before an access that may fire: start fetching the ring slot the event
 * will take (see nv_mpsc_prefetch). */
static inline void nv_ep_prepare(const struct nv_ep *ep)
{
    if (nv_ep_has_trips(ep))
        nv_mpsc_prefetch(&ep->ring);
}

#endif
