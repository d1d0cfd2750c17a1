/* Core's private view of the public handles. */
#ifndef NV_CORE_INTERNAL_H
#define NV_CORE_INTERNAL_H

#include <netvm/netvm.h>
#include "boot/boot.h"
#include "core/atu.h"
#include "link/ep.h"
#include "link/link.h"
#include "util/itree.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct netvm_seg {
    netvm_ctx_t *ctx;
    uint32_t     slot;
    uint64_t     key;
    void        *addr;
    size_t       len;
    unsigned     rights;
    int          memfd;       /* netvm_alloc_shared: the backing memfd, else -1 */
    size_t       map_len;     /* netvm_alloc_shared: our mapping's length */
    int          name_set;
    char         name[64];
    struct netvm_seg *next, *prev;
};

struct netvm_rseg {
    netvm_ctx_t     *ctx;
    struct nv_link  *link;
    struct nv_rdesc  d;
    struct netvm_rseg *next, *prev;
    /* remote tripwires on this segment, by offset (under ctx->rtrip_lock) */
    struct nv_itree_node *rtrips;
    uint32_t              nrtrips, rtrip_cap;
};

struct netvm_tripwire {
    netvm_ctx_t      *ctx;
    uint32_t          id, gen;
    unsigned          flags;       /* NETVM_TRIP_* (and NV_TRIP_WAKE for internal ones) */
    uint64_t          user;
    uint64_t          start, end;  /* local: addresses; remote: offsets in rseg */
    netvm_rseg_t     *rseg;        /* remote tripwires */
    netvm_tripset_t  *set;
    struct netvm_tripwire *set_next, *set_prev;
    uint64_t          fired;       /* events taken since the last netvm_tripwire_test */
    _Atomic int       spent;       /* a once-only remote tripwire that fired */
};

/* A FIFO of events taken from the ring but not yet handed out. */
struct nv_evfifo {
    netvm_event_t *v;
    size_t         head, len, cap;
};

struct netvm_tripset {
    netvm_ctx_t           *ctx;
    struct netvm_tripwire *members;
    struct nv_evfifo       q;
};

struct nv_counter_handler {
    netvm_counter_fn fn;
    void            *arg;
};

/* PENDING | ANSWERING: the link is writing the answer (a get's data) into
 * the caller's buffer; only the link's completion or the peer's death ends
 * it, never a timeout. */
enum { NV_REQ_FREE = 0, NV_REQ_PENDING, NV_REQ_DONE, NV_REQ_ANSWERING = 0x200 };

struct netvm_req {
    _Atomic uint32_t state;    /* NV_REQ_*; also the futex word a sleeping waiter waits on */
    _Atomic uint32_t waiting;  /* a thread sleeps on state */
    _Atomic uint16_t gen;      /* matches replies to this use of the slot */
    uint16_t         index;
    _Atomic int      rank;     /* atomics: a stale reply may read them while the slot is reused */
    netvm_status_t   status;
    uint64_t        *result;
    uint64_t         issued_ns;
    netvm_ctx_t     *ctx;
    uint32_t         next_free;
    /* a request no caller holds (notifications, nonblocking signals): at
     * completion the completing thread posts its events; the pool takes it
     * back later (nv_req_sweep) */
    _Atomic int      detached;     /* set (release) after ev_*; read (acquire) by the completer */
    unsigned         ev_kinds;     /* NV_REQEV_* */
    uint64_t         ev_tag, ev_addr, ev_len;
    netvm_rseg_t    *ev_rseg;
};

enum {
    NV_REQEV_REQUESTER = 1u << 0,   /* post NETVM_EV_REQUESTER */
    NV_REQEV_COMPLETER = 1u << 1,   /* post NETVM_EV_COMPLETER (a get landed here) */
    NV_REQEV_RTRIP     = 1u << 2,   /* fire remote tripwires on [ev_addr, +ev_len) of ev_rseg */
    NV_REQEV_ERROR     = 1u << 3,   /* keep a failure for the next netvm_flush */
};

struct nv_peer {
    struct nv_link  *link;
    _Atomic unsigned outstanding;   /* requests awaiting a reply */
    _Atomic int      dead;
    _Atomic int      async_err;     /* a detached request's failure, for the next flush */
};

struct netvm_ctx {
    int              rank, size;
    nv_boot_t       *boot;
    struct nv_link  *shm;        /* this machine's peers, and ourselves */
    struct nv_link  *tcp;        /* other machines' peers (NETVM_LINKS=tcp: every other peer) */
    struct nv_link  *links[2];   /* those in use, for progress */
    int              nlinks;
    struct nv_peer  *peers;
    struct nv_atu    atu;

    struct netvm_seg  *segs;     /* exported, for finalize and lookups by name */
    pthread_mutex_t    seg_lock; /* the list: the progress thread looks names up */
    struct netvm_rseg *rsegs;    /* imported, for finalize */

    /* requests executed by targets (atomics the link cannot do itself) */
    struct netvm_req *reqs;
    uint32_t          nreqs;
    uint32_t          free_req;  /* head of the free list; nreqs: empty */
    unsigned          credits;   /* outstanding requests allowed per peer */

    /* progress */
    int              have_thread;
    pthread_t        thread;
    int              epfd;
    int              stopfd;
    char             stop_token;

    /* events: the endpoint block peers post into, and what core keeps */
    struct nv_ep      ep;
    struct netvm_tripwire **trips;     /* by id */
    uint32_t         *trip_gen;        /* the generation each id had last */
    uint32_t          ntrips;          /* ids (NETVM_MAX_TRIPWIRES) */
    uint32_t          trip_free;       /* a hint: the lowest id that may be free */
    pthread_mutex_t   rtrip_lock;      /* remote tripwires: matched by the thread completing a put */
    struct nv_evfifo  stash;           /* taken from the ring, not yet returned by netvm_evq_poll */
    uint64_t          evq_overflowed;  /* times the ring overflowed (logged once) */
    struct nv_counter_handler *handlers;
    uint32_t          ncounters;
    _Atomic unsigned  detached_done;   /* detached requests waiting for nv_req_sweep */

    uint64_t         timeout_ns;
    uint64_t         spin_ns;
    uint64_t         linger_ns;  /* the progress thread polls this long after work before sleeping */
};

/* links.c: choosing and connecting a link per peer */
netvm_status_t nv_links_connect(netvm_ctx_t *ctx, const void *shm_params, int timeout_ms);
void           nv_links_destroy(netvm_ctx_t *ctx);
/* The link a peer is reached through, and why, for the log and netvm info. */
const char    *nv_link_name(const netvm_ctx_t *ctx, int rank);

/* progress.c */
void           nv_am_upcall(void *arg, int src_rank, const uint8_t *msg, size_t len);
/* A failure of an operation to rank that nobody waits for: the next flush
 * to rank reports it (the first one kept). */
static inline void nv_peer_async_error(netvm_ctx_t *ctx, int rank, netvm_status_t st)
{
    int none = NETVM_OK;
    atomic_compare_exchange_strong(&ctx->peers[rank].async_err, &none, (int)st);
}
void           nv_peer_down_upcall(void *arg, int rank);
void           nv_complete_upcall(void *arg, void *token, netvm_status_t st);
int            nv_claim_upcall(void *arg, void *token);
netvm_status_t nv_translate_upcall(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr);
/* seg.c */
netvm_status_t nv_lookup_upcall(void *arg, const char *name, uint32_t slot, uint64_t key,
                                struct nv_seg_desc *out);
netvm_status_t nv_progress_start(netvm_ctx_t *ctx);
void           nv_progress_stop(netvm_ctx_t *ctx);
/* Drive progress until req completes (or fails); returns its status. */
netvm_status_t nv_progress_wait_req(netvm_ctx_t *ctx, struct netvm_req *req);
/* Drive progress until rank (rank < 0: all) has no outstanding requests. */
netvm_status_t nv_progress_wait_idle(netvm_ctx_t *ctx, int rank);

/* rma.c: requests for link operations that complete later */
/* Wait for a free request and a credit towards rank. */
netvm_status_t nv_reserve_req(netvm_ctx_t *ctx, int rank, uint64_t *result, struct netvm_req **out);
/* Given what the link returned for q's operation: wait if pending, free q,
 * return the operation's status. */
netvm_status_t nv_finish_req(netvm_ctx_t *ctx, struct netvm_req *q, netvm_status_t st);
/* The operations with every option: remote (put: return at remote
 * completion), flags (NETVM_F_*), the tag of their notifications. */
netvm_status_t nv_put(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const void *src, size_t len,
                      unsigned flags, int remote, uint64_t tag);
netvm_status_t nv_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off, size_t len,
                      unsigned flags, uint64_t tag, netvm_req_t **req);
netvm_status_t nv_atomic(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, netvm_atomic_op_t op,
                         uint64_t operand, uint64_t compare, uint64_t *result, unsigned flags,
                         uint64_t tag, netvm_req_t **req);

/* evq.c: the event queue */
netvm_status_t nv_evq_init(netvm_ctx_t *ctx);
void           nv_evq_fini(netvm_ctx_t *ctx);
/* Post an event into this process's own queue (any thread). */
void           nv_evq_post_local(netvm_ctx_t *ctx, const struct nv_ep_rec *r);
/* Take records from the ring and route them (tripsets, handlers, stash)
 * until done(arg) says so or the ring is empty; then, with a timeout, wait.
 * NETVM_OK once done(arg), NETVM_ERR_TIMEOUT otherwise. */
netvm_status_t nv_evq_wait_until(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms,
                                 int spin);
int            nv_evfifo_push(struct nv_evfifo *f, const netvm_event_t *ev);
int            nv_evfifo_pop(struct nv_evfifo *f, netvm_event_t *ev);
void           nv_evfifo_free(struct nv_evfifo *f);

/* tripwire.c */
netvm_status_t nv_trip_init(netvm_ctx_t *ctx);
void           nv_trip_fini(netvm_ctx_t *ctx);
/* A record for tripwire (id, gen) arrived: the tripwire, or NULL if stale. */
struct netvm_tripwire *nv_trip_lookup(netvm_ctx_t *ctx, uint32_t id, uint32_t gen);
/* This process's write to [off, off+len) of r is complete at the target. */
void           nv_rtrip_fire(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len);
static inline int nv_rtrip_any(netvm_rseg_t *r)
{
    return __atomic_load_n(&r->nrtrips, __ATOMIC_RELAXED) != 0;
}
void           nv_rtrip_release(netvm_rseg_t *r);
/* Internal tripwires that only wake memory waiters (netvm_wait_until). */
netvm_status_t nv_trip_arm_wake(netvm_ctx_t *ctx, const void *addr, size_t len, netvm_tripwire_t **tw);

/* notify.c: the events a finished request posts (any thread) */
void           nv_req_post_events(struct netvm_req *r);

/* req.c */
netvm_status_t     nv_req_pool_init(netvm_ctx_t *ctx, uint32_t n);
void               nv_req_pool_fini(netvm_ctx_t *ctx);
/* A pending request to rank; result (may be NULL) receives the value. */
struct netvm_req  *nv_req_alloc(netvm_ctx_t *ctx, int rank, uint64_t *result);
void               nv_req_free(struct netvm_req *req);
/* Complete a pending request exactly once (from any thread); 0 if it was not pending. */
int                nv_req_complete(struct netvm_req *req, netvm_status_t st, uint64_t result);
/* Give up on a request (timeout): as nv_req_complete, unless its answer is
 * already arriving. */
int                nv_req_give_up(struct netvm_req *req, netvm_status_t st);
/* The link starts writing req's answer: 1 if it may (nv_req_give_up then fails). */
int                nv_req_claim(struct netvm_req *req);
struct netvm_req  *nv_req_lookup(netvm_ctx_t *ctx, uint32_t id);
/* Give a request away: whoever completes it posts its events (ev_*), and
 * the pool takes it back. */
void               nv_req_detach(struct netvm_req *req);
/* Take back detached requests that completed (application thread). */
void               nv_req_sweep(netvm_ctx_t *ctx);
static inline uint32_t nv_req_id(const struct netvm_req *r)
{
    return (uint32_t)atomic_load_explicit(&r->gen, memory_order_relaxed) << 16 | r->index;
}

static inline struct nv_link *nv_link_to(netvm_ctx_t *ctx, int rank) { return ctx->peers[rank].link; }

#endif
