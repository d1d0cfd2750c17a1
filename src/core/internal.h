/* Core's private view of the public handles. */
#ifndef NV_CORE_INTERNAL_H
#define NV_CORE_INTERNAL_H

#include <netvm/netvm.h>
#include "boot/boot.h"
#include "core/atu.h"
#include "link/ep.h"
#include "link/link.h"
#include "reg/rcache.h"
#include "util/itree.h"
#include "util/thread.h"
#include "wire/am.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

struct nv_peer;
struct netvm_listener;
struct nv_tcp_hs_upcalls;
struct nv_uuid_slot {
    uint64_t uuid;   /* 0: empty */
    uint32_t index;
};

/* links a context can use at once: shm, tcp, and room for an RDMA link */
#define NV_MAX_LINKS 3

struct netvm_seg {
    netvm_ctx_t *ctx;
    uint32_t     slot;
    uint64_t     key;
    void        *addr;
    size_t       len;
    unsigned     rights;
    int          memfd;       /* netvm_alloc_shared: the backing memfd, else -1 */
    size_t       map_len;     /* netvm_alloc_shared: our mapping's length */
    int          keep_map;    /* nv_alloc_shared_kept: the mapping outlives the export */
    void        *mr[NV_MAX_LINKS];   /* each link's registration (NV_LCAP_REGISTER), by link index */
    int          name_set;
    char         name[64];
    struct netvm_seg *next, *prev;
};

struct netvm_rseg {
    netvm_ctx_t     *ctx;
    struct nv_peer  *peer;    /* holds a reference while the import lives */
    struct nv_link  *link;
    struct nv_rdesc  d;
    uint64_t         reg_base;   /* where the segment lies at the target (reg_core.c) */
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

/* --- requests --------------------------------------------------------------------- */

/* PENDING | ANSWERING: the link is writing the answer (a get's data) into
 * the caller's buffer; only the link's completion or the peer's death ends
 * it, never a timeout. */
/* PENDING | SETUP: its issuer is still filling it in (events, ordering, the
 * answer's place) and has not handed it to a link: nothing but the issuer
 * may end it, not a peer's death nor a timeout (nv_req_launch ends that).
 * PENDING | FINISHING: its completion is under way. */
enum { NV_REQ_FREE = 0, NV_REQ_PENDING, NV_REQ_DONE, NV_REQ_FINISHING = 0x100, NV_REQ_ANSWERING = 0x200,
       NV_REQ_SETUP = 0x400 };
/* The state word is what (low 16 bits: NV_REQ_* and flags) | the use's
 * generation << 16, so a change of state made for one use of a slot can
 * never land on the next (compare-and-swap on the whole word). */
#define NV_REQ_WHAT(s)   ((s) & 0xffffu)
#define NV_REQ_GEN(s)    ((uint16_t)((s) >> 16))
#define NV_REQ_STATE(what, gen) ((uint32_t)(what) | (uint32_t)(gen) << 16)

/* Who finishes a request: its caller (test, wait), or whoever completes it
 * (a continuation, or a request nobody holds: events to post). */
enum {
    NV_REQF_DONE    = 1u << 0,   /* completion happened */
    NV_REQF_THEN    = 1u << 1,   /* the completer runs `then` and frees the request */
};

struct netvm_req {
    _Atomic uint32_t state;    /* NV_REQ_*; also the futex word a sleeping waiter waits on */
    _Atomic uint32_t waiting;  /* a thread sleeps on state */
    _Atomic uint16_t gen;      /* matches replies to this use of the slot */
    uint16_t         index;
    struct nv_peer  *peer;     /* the target (counts in its outstanding) */
    _Atomic int      peer_id;  /* read by stale replies while the slot is reused */
    netvm_status_t   status;
    uint64_t        *result;
    uint64_t         issued_ns;
    netvm_ctx_t     *ctx;
    uint8_t          ordered;  /* counts in its peer's ord_inflight (nv_req_ordered) */
    /* a continuation, or what a request nobody holds posts when it completes */
    _Atomic unsigned fin;      /* NV_REQF_* */
    netvm_req_fn     then;
    void            *then_arg;
    unsigned         ev_kinds; /* NV_REQEV_* */
    uint64_t         ev_tag, ev_addr, ev_len;
    netvm_rseg_t    *ev_rseg;
    /* an active-message request: the reply token's key, where its answer goes */
    _Atomic uint64_t   key;       /* published last (release): a reply that matches it sees the rest */
    uint64_t           calls;     /* calls made with this slot: with its index, numbers each key */
    _Atomic uint64_t   pkey;      /* the payload key its reply must carry (a stale reply may
                                     read it while the slot is reused: atomic) */
    netvm_am_result_t *amres;
    void              *rbuf;
    size_t             rcap;
    netvm_am_result_t  own_res;   /* for requests whose caller gave no result */
    struct nv_rdesc   *import;    /* an import's answer fills it */
    /* a registration hold its operation took (reg_core.c): given back when
     * the request is freed, after the operation completed */
    int                reg_peer;
    uint32_t           reg_sid;    /* the segment's slot at reg_peer */
    uint64_t           reg_addr, reg_len;
};

enum {
    NV_REQEV_REQUESTER = 1u << 0,   /* post NETVM_EV_REQUESTER */
    NV_REQEV_COMPLETER = 1u << 1,   /* post NETVM_EV_COMPLETER (a get landed here) */
    NV_REQEV_RTRIP     = 1u << 2,   /* fire remote tripwires on [ev_addr, +ev_len) of ev_rseg */
    NV_REQEV_ERROR     = 1u << 3,   /* keep a failure for the next netvm_flush */
};

/* --- peers ------------------------------------------------------------------------- */

/* Peer ids: index (low NV_PEER_IDX_BITS) | generation << NV_PEER_IDX_BITS.
 * A job rank is index = rank, generation 0; a connected peer's index is
 * reused only with a new generation, so a stale id names nobody. */
#define NV_PEER_IDX_BITS 20
#define NV_PEER_IDX(id)  ((uint32_t)(id) & ((1u << NV_PEER_IDX_BITS) - 1))
#define NV_PEER_GEN(id)  ((uint32_t)(id) >> NV_PEER_IDX_BITS)
#define NV_PEER_MAX_GEN  ((1u << (31 - NV_PEER_IDX_BITS)) - 1)
#define NV_PEER_CHUNK    1024

struct nv_deferred;

struct nv_peer {
    struct nv_lpeer  lp;            /* first: what the links see */
    netvm_ctx_t     *ctx;
    int              is_rank;
    _Atomic uint32_t refs;          /* the table's, imports', operations' on connected peers */
    _Atomic unsigned outstanding;   /* requests awaiting an answer */
    /* operations its progress engine executes for us (emulated atomics,
     * signals) still in flight on a link whose other accesses we execute
     * ourselves (shm): a direct access must not overtake them */
    _Atomic unsigned ord_inflight;
    _Atomic int      dead;          /* failed or left: operations to it fail */
    _Atomic int      gone;          /* left the table (connected peers) */
    int              graceful;      /* it said goodbye */
    _Atomic int      async_err;     /* a detached request's failure, for the next flush */
    uint64_t         uuid;          /* its endpoint id */
    struct netvm_listener *via;      /* the listener it came through */
    struct nv_peer  *grave_next;    /* released, its link state not yet freed */
    /* active-message flow control */
    _Atomic int      am_credits;    /* one-way messages we may still send it */
    _Atomic uint32_t am_owed;       /* credits we owe it (messages of it we handled) */
    struct nv_deferred *deferred, *deferred_tail;   /* its messages handlers deferred (under ctx->am_lock) */
    unsigned         ndeferred;
};

static inline struct nv_peer *nv_peer_of(struct nv_lpeer *lp) { return (struct nv_peer *)lp; }

struct netvm_listener;

/* --- the context ------------------------------------------------------------------------ */

struct nv_am_handler {
    netvm_am_handler_fn fn;
    void               *arg;
};

/* Payload tokens: buffers a reply (or message) may land in once. */
struct nv_ptoken {
    _Atomic uint64_t key;      /* 0: free */
    void            *buf;
    uint64_t         cap;
    struct netvm_req *req;     /* the call whose reply lands here */
};

struct netvm_ctx {
    int              rank, size;
    int              thread_level;
    nv_boot_t       *boot;
    uint64_t         uuid;       /* this context's endpoint id (random) */
    uint8_t          token_key[16];   /* keys reply and payload tokens */
    struct nv_link  *shm;        /* this machine's peers, and ourselves */
    struct nv_link  *tcp;        /* other machines' peers, listeners (NETVM_LINKS=tcp: every other peer) */
    struct nv_link  *ofi;        /* NETVM_LINKS=ofi: the job's other ranks (libfabric) */
    struct nv_link  *links[NV_MAX_LINKS];   /* those in use, by index; added under seg_lock */
    _Atomic int      nlinks;     /* grows once: tcp opened when first needed */
    int              links_mode; /* NETVM_LINKS */
    struct nv_atu    atu;

    /* peers, by index; chunks allocated on demand and kept until finalize */
    struct nv_peer *_Atomic *peer_chunk[(1u << NV_PEER_IDX_BITS) / NV_PEER_CHUNK];
    pthread_mutex_t  peer_lock;  /* allocation, the free list, the uuid index */
    uint32_t        *peer_free;  /* FIFO of free connected-peer indices */
    uint32_t         peer_free_head, peer_free_len, peer_free_cap;
    uint32_t         peer_high;  /* indices below this have been used */
    struct { struct nv_uuid_slot *v; uint32_t cap, n; } uuids;   /* endpoint id -> peer index */
    /* the same, read without peer_lock (every reply looks its origin up):
     * a hint, checked against the peer it names */
    struct { _Atomic uint64_t uuid; _Atomic int id; } uuid_hint[64];
    struct nv_peer  *grave;      /* released peers whose link state waits to be freed */
    _Atomic int      npeers_connected;
    struct netvm_listener *listeners;
    int              listen_max_peers;
    void            *job_connect;    /* while init connects the job's tcp ranks */

    struct netvm_seg  *segs;     /* exported, for finalize and lookups by name */
    pthread_mutex_t    seg_lock; /* the list: the progress thread looks names up */
    struct netvm_rseg *rsegs;    /* imported, for finalize */
    pthread_mutex_t    rseg_lock;

    /* requests: a fixed pool, a lock-free free list */
    struct netvm_req *reqs;
    uint32_t          nreqs;
    _Atomic uint64_t  free_top;  /* tag << 32 | (index + 1); 0: empty */
    uint32_t         *req_next;  /* free-list links */
    unsigned          credits;   /* outstanding requests allowed per peer */

    /* active messages */
    struct nv_am_handler *am;    /* NETVM_AM_MAX_ID application handlers, then core's */
    struct nv_ptoken *ptok;
    uint32_t          nptok;
    _Atomic uint32_t  ptok_hint;
    pthread_mutex_t   am_lock;   /* deferred lists */
    pthread_mutex_t   svc_lock;  /* creating the services' state (core/svc.h) */
    struct {
        void *state;
        void (*destroy)(netvm_ctx_t *ctx, void *state);
        void (*quiesce)(netvm_ctx_t *ctx, void *state);   /* nv_svc_on_finalize */
    } svc[8];
    _Atomic int       ndeferred; /* messages deferred, all peers */
    unsigned          am_credits_init;
    unsigned          am_credits_return;   /* owed this many: returned alone (ctx.c) */
    struct {
        _Atomic uint64_t dropped_replies, dropped_no_handler, deferred, credit_waits;
    } am_stats;
    /* the counts every message bumps, a row per thread slot (util/thread.h)
     * so a count is a plain store, not a locked add; summed when read */
    struct nv_am_counts {
        _Atomic uint64_t sent, received, replies;
        uint64_t         pad_[5];   /* a row to a cache line */
    } am_counts[NV_THREAD_SLOTS + 1];

    /* progress: the epoll set P of every link's fds; the progress thread
     * waits on Q = {P, stop}; an application thread that waits takes P
     * over (disables it in Q) so the progress thread is not woken */
    int              have_thread;
    int              thread_up;  /* the progress thread runs (not yet during init) */
    pthread_t        thread;
    int              pfd, qfd, efd;   /* P, Q, and the user's event fd E = {ep wake, P when armed} */
    int              stopfd;
    int              kickfd;     /* in Q: the progress thread re-reads its timeout (a lease began) */
    char             kick_token;
    char             stop_token;
    char             p_token;
    char             wake_token;
    _Atomic int      pass_busy;  /* a thread is taking in P's events */
    unsigned         pass_seq;   /* passes by application threads (in the pass only) */
    pthread_mutex_t  lend_lock;  /* changes of P's place (Q or E) */
    _Atomic int      lent;       /* P is disabled in Q: an application thread serves it */
    _Atomic int      lent_sticky;/* ... and keeps it after its call returns (polling) */
    _Atomic int      in_e;       /* P is enabled in E (armed event queue) */
    _Atomic int      unwatched;  /* the links' connections are out of P (watch_links; under lend_lock) */
    unsigned         direct_run; /* direct passes since a thread last slept on P (in the pass only) */
    _Atomic int      rings_held; /* a polling loop counts as a poller of the links' rings
                                    (poll_enter), so producers do not ring the progress thread */
    _Atomic uint64_t next_timer; /* when the links' deadlines want a pass next (ns) */
    _Atomic unsigned app_inside; /* application threads inside a netvm wait or poll */
    _Atomic uint64_t app_calls;  /* application progress calls (a counter the lease watches) */
    _Atomic uint64_t last_poll_ns; /* an application thread's last progress call (any thread: relaxed) */
    uint64_t         lease_ns;
    uint64_t         loop_ns;    /* calls closer than this are a polling loop (NETVM_POLL_LOOP_US) */
    uint64_t         ack_delay_ns;  /* the progress thread's look while P is lent (held acknowledgements) */
    _Atomic uint32_t npending;      /* requests issued and not finished */
    _Atomic uint32_t next_gate;     /* the last gate a put with signal named (signal.c) */
    _Atomic uint64_t req_sweep_at;  /* next look for requests past NETVM_TIMEOUT (UINT64_MAX: none due) */

    /* events: the endpoint block peers post into, and what core keeps */
    struct nv_ep      ep;
    struct netvm_tripwire **trips;     /* by id */
    uint32_t         *trip_gen;        /* the generation each id had last */
    uint32_t          ntrips;          /* ids (NETVM_MAX_TRIPWIRES) */
    uint32_t          trip_free;       /* a hint: the lowest id that may be free */
    pthread_mutex_t   rtrip_lock;      /* remote tripwires: matched by the thread completing a put */
    pthread_mutex_t   evq_lock;        /* NETVM_THREAD_MULTIPLE: one consumer of the event ring */
    struct nv_evfifo  stash;           /* taken from the ring, not yet returned by netvm_evq_poll */
    uint64_t          evq_overflowed;  /* times the ring overflowed (logged once) */
    struct nv_counter_handler *handlers;
    uint32_t          ncounters;

    uint64_t         timeout_ns;
    uint64_t         spin_ns;
    unsigned         spin_yield;  /* NETVM_SPIN_YIELD: passes of a spin before it yields between them */
    /* netvm_wait_until's spin, adapted (core/signal.c): from spin_ns up to
     * word_spin_max while words arrive soon after their waiters slept */
    _Atomic uint64_t word_spin_ns;
    uint64_t         word_spin_max;
    uint64_t         linger_ns;  /* the progress thread polls this long after work before sleeping */
    int              timeout_ms;

    /* registration (reg_core.c, src/reg): the strategy's state; reg_remote:
     * operations on links other than shm take holds at their targets;
     * tcp_pinned: this process's tcp target refuses unpinned accesses */
    struct nv_reg   *reg;
    int              reg_remote;
    int              tcp_pinned;
    /* the link whose registrations are the strategy's pins (ofi), or
     * NULL: it registers no segment whole at export */
    struct nv_link  *reg_link;
    /* the local registration cache of the first link that keeps one
     * (lreg.c), and what a closed one had done */
    struct nv_rcache       *lreg_cache;
    struct nv_rcache_stats  lreg_closed;
    pthread_mutex_t         lreg_lock;
    /* NETVM_STATS_DIR's live statistics file (stats_file.c), or NULL */
    struct nv_ctx_stats_file *stats;
    uint64_t                  stats_next;   /* its next rewrite, ns */
    pthread_mutex_t           stats_lock;
};

/* Handler ids core uses for its own emulated operations (after the
 * application's). */
enum {
    NV_AMH_ATOMIC = NETVM_AM_MAX_ID,   /* atomics the link cannot run natively */
    NV_AMH_SIGNAL,                     /* put-with-signal's word */
    NV_AMH_NOTIFY,                     /* a notification put */
    NV_AMH_COUNT,                      /* a counting notification */
    NV_AMH_ERROR,                      /* a nonblocking operation failed at the target */
    NV_AMH_IMPORT,                     /* an import, answered with the segment's descriptor */
    NV_AMH_CREDIT,                     /* credits back, nothing else */
    NV_AMH_BYE,                        /* a connected peer leaves */
    NV_AMH_REG,                        /* a registration move: unpin some buckets, pin others */
    NV_AMH_SVC,                        /* the first of NV_AMH_NSVC ids of the services
                                          (core/svc.h): dispatched like the application's */
    NV_AMH_END = NV_AMH_SVC + 32
};


/* reg_core.c: registration strategies (src/reg) wired to core */
netvm_status_t nv_regc_init(netvm_ctx_t *ctx);
void           nv_regc_fini(netvm_ctx_t *ctx);
void           nv_regc_serve(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx);
void           nv_regc_peer_down(netvm_ctx_t *ctx, struct nv_peer *p);
/* target: NETVM_ERR_UNPINNED unless [addr, addr + len) is pinned */
netvm_status_t nv_regc_check(netvm_ctx_t *ctx, uint64_t addr, uint64_t len);
netvm_status_t nv_regc_export(netvm_ctx_t *ctx, void *addr, size_t len);
void           nv_regc_unexport(netvm_ctx_t *ctx, void *addr, size_t len);
/* initiator: hold [off, off + len) of r pinned at its target; the largest
 * range one hold covers (operations are split at multiples of it) */
struct nv_reg_key;
netvm_status_t nv_regc_acquire(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len, struct nv_reg_key *key);
/* after the links opened: a link with keyed registrations (ofi) becomes
 * the pin table's pinner; before they close: its pins are dropped */
void           nv_regc_links(netvm_ctx_t *ctx);
void           nv_regc_links_down(netvm_ctx_t *ctx);
void           nv_regc_release(netvm_ctx_t *ctx, netvm_rseg_t *r, uint64_t off, uint64_t len);
uint64_t       nv_regc_span(netvm_ctx_t *ctx);
/* the hold a request carries goes with it (req.c, when it is freed) */
void           nv_req_hold_release(struct netvm_req *q);
static inline int nv_regc_needed(const netvm_ctx_t *ctx, const netvm_rseg_t *r)
{
    return ctx->reg_remote && r->link != ctx->shm;
}

/* links.c: the links of the context, and the job's peers */
netvm_status_t nv_links_open(netvm_ctx_t *ctx, const void *shm_params, int timeout_ms);
netvm_status_t nv_links_connect_job(netvm_ctx_t *ctx);
/* The tcp link (opened at init for a job that may span machines, or when
 * the context first listens or connects); card: the job's card for it. */
struct nv_tcp_card;
netvm_status_t nv_links_open_tcp(netvm_ctx_t *ctx, int job_listen, struct nv_tcp_card *card);
/* The tcp handshake of a job rank (connect.c): the rank's peer, and its end. */
netvm_status_t nv_links_job_accept(netvm_ctx_t *ctx, int rank, struct nv_lpeer **lp);
void           nv_links_job_ready(netvm_ctx_t *ctx, netvm_status_t st);
void          *nv_job_cookie(void);
void           nv_links_destroy(netvm_ctx_t *ctx);
/* seg.c: take link l into use: every exported segment is registered with it
 * (NV_LCAP_REGISTER) and published to it, then it joins ctx->links. */
netvm_status_t nv_links_add(netvm_ctx_t *ctx, struct nv_link *l);
const char    *nv_link_name(const netvm_ctx_t *ctx, int peer);

/* peer.c */
netvm_status_t nv_peers_init(netvm_ctx_t *ctx);
/* finalize, every rank past its last collective: a graceful close to each
 * rank, so that its link reads our closing as a goodbye, not a failure */
void           nv_peers_bye(netvm_ctx_t *ctx);
void           nv_peers_fini(netvm_ctx_t *ctx);
/* Free the link state of released peers (at the start of a progress pass). */
void           nv_peers_reap(netvm_ctx_t *ctx);
struct nv_peer *nv_peer_slot(netvm_ctx_t *ctx, uint32_t index);
/* A job rank's peer (rank in range), no reference taken. */
static inline struct nv_peer *nv_rank_peer(netvm_ctx_t *ctx, int rank)
{
    return atomic_load_explicit(&ctx->peer_chunk[(uint32_t)rank / NV_PEER_CHUNK][(uint32_t)rank % NV_PEER_CHUNK],
                                memory_order_acquire);
}
/* Look a peer id up and take a reference (drop it with nv_peer_put):
 * NETVM_ERR_RANK if no such peer exists or ever existed under that id,
 * NETVM_ERR_PEER if it is gone. Job ranks need no reference (they live as
 * long as the context) but taking one is harmless. */
netvm_status_t  nv_peer_get(netvm_ctx_t *ctx, int id, struct nv_peer **out);
void            nv_peer_ref(struct nv_peer *p);
void            nv_peer_put(struct nv_peer *p);
/* A new connected peer (a fresh id, one reference: the table's). */
netvm_status_t  nv_peer_new(netvm_ctx_t *ctx, struct nv_peer **out);
struct nv_peer *nv_peer_by_uuid(netvm_ctx_t *ctx, uint64_t uuid);   /* a reference taken */
void            nv_peer_set_uuid(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t uuid);
/* The peer is dead or gone: fail what waits on it; connected peers leave
 * the table (posting NETVM_EV_PEER_DOWN once). */
void            nv_peer_down(netvm_ctx_t *ctx, struct nv_peer *p, int graceful);
/* A connected peer leaves the table (event: post NETVM_EV_PEER_DOWN). */
void            nv_peer_gone(netvm_ctx_t *ctx, struct nv_peer *p, int event);
static inline int nv_peer_id(const struct nv_peer *p) { return p->lp.id; }

/* count one in field f of ctx->am_counts: the calling thread's own row, or
 * the shared last one (a locked add) for threads beyond the slots */
#define NV_AM_COUNT(ctx, f)                                                                                  \
    do {                                                                                                     \
        int s_ = nv_thread_slot();                                                                           \
        _Atomic uint64_t *c_ = &(ctx)->am_counts[s_].f;                                                      \
        if (s_ < NV_THREAD_SLOTS)                                                                            \
            atomic_store_explicit(c_, atomic_load_explicit(c_, memory_order_relaxed) + 1, memory_order_relaxed); \
        else                                                                                                 \
            atomic_fetch_add_explicit(c_, 1, memory_order_relaxed);                                          \
    } while (0)

/* A failure of an operation to p that nobody waits for: the next flush to
 * p reports it (the first one kept). */
static inline void nv_peer_async_error(struct nv_peer *p, netvm_status_t st)
{
    int none = NETVM_OK;
    atomic_compare_exchange_strong(&p->async_err, &none, (int)st);
}

/* connect.c: listeners and connections beyond the job */
void           nv_listeners_close_all(netvm_ctx_t *ctx);
void           nv_listener_peer_left(struct netvm_listener *l);
void           nv_connected_leave_all(netvm_ctx_t *ctx);
extern const struct nv_tcp_hs_upcalls nv_hs_upcalls;

/* am.c, am_rx.c, am_core.c: active messages */
netvm_status_t nv_am_init(netvm_ctx_t *ctx);
/* am.c: the public calls without their id check (any id below NV_AMH_END
 * that a handler is registered for; core/svc.h's wrappers) */
netvm_status_t nv_am_register_id(netvm_ctx_t *ctx, unsigned id, netvm_am_handler_fn fn, void *arg);
netvm_status_t nv_am_send_id(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args, unsigned nargs,
                             const void *payload, size_t len, netvm_req_t **reqp, unsigned flags);
netvm_status_t nv_am_request_id(netvm_ctx_t *ctx, int peer, unsigned id, const uint64_t *args, unsigned nargs,
                                const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                                netvm_am_result_t *result, netvm_req_t **reqp);
netvm_status_t nv_am_forward_id(netvm_ctx_t *ctx, int peer, unsigned id, const netvm_am_token_t *token,
                                const uint64_t *args, unsigned nargs, const void *payload, size_t len);
/* mailbox.c: the mailbox's handler, registered before any peer can send */
netvm_status_t nv_msg_init(netvm_ctx_t *ctx);
/* svc.c: the services' state goes, once no handler can run any more */
void           nv_svc_fini(netvm_ctx_t *ctx);
void           nv_svc_quiesce(netvm_ctx_t *ctx);   /* core/svc.h nv_svc_on_finalize */
void           nv_am_fini(netvm_ctx_t *ctx);
void           nv_am_upcall(void *arg, struct nv_am_rx *rx);
void           nv_am_end_upcall(void *arg, struct nv_am_rx *rx, netvm_status_t st);
/* Send an active message to p. req: the request a reply or the
 * rendezvous completes (NULL: none); flags NV_AMS_*. Consumes a credit for
 * one-way messages (wait_credit: wait for one; else NETVM_ERR_AGAIN). */
netvm_status_t nv_am_send(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_hdr *h, const void *payload,
                          struct netvm_req *req, unsigned flags);
/* A core request with a reply: issue it (q reserved by nv_reserve_req).
 * lazy NV_AMS_LAZY: nobody waits for the reply now; an eager request may
 * wait for the polling loop's next frame (nv_progress_may_hold). */
netvm_status_t nv_am_call(netvm_ctx_t *ctx, struct nv_peer *p, struct netvm_req *q, uint16_t handler,
                          const uint64_t *args, unsigned nargs, const void *payload, size_t len, unsigned lazy);
/* A core reply to the request in h (from p). */
void           nv_am_answer(netvm_ctx_t *ctx, struct nv_peer *p, const struct nv_am_hdr *req,
                            netvm_status_t st, const uint64_t *args, unsigned nargs,
                            const void *payload, size_t len);
/* Core's handlers (am_core.c): the emulated operations' target side. */
void           nv_am_core_dispatch(netvm_ctx_t *ctx, struct nv_peer *p, struct nv_am_rx *rx);
/* Run deferred messages (the role holder, between passes); how many ran. */
int            nv_am_run_deferred(netvm_ctx_t *ctx);
/* Credits we owe peers: send them back where many are due. */
void           nv_am_return_credits(netvm_ctx_t *ctx, struct nv_peer *p, int force);
void           nv_am_peer_down(netvm_ctx_t *ctx, struct nv_peer *p);

/* progress.c */
void           nv_peer_down_upcall(void *arg, struct nv_lpeer *lp, int graceful);
void           nv_complete_upcall(void *arg, void *token, netvm_status_t st);
int            nv_claim_upcall(void *arg, void *token);
netvm_status_t nv_translate_upcall(void *arg, uint32_t slot, uint64_t key, uint64_t off, uint64_t len,
                                   unsigned need, uint64_t *addr);
netvm_status_t nv_progress_init(netvm_ctx_t *ctx);
netvm_status_t nv_progress_start(netvm_ctx_t *ctx);
void           nv_progress_stop(netvm_ctx_t *ctx);
/* One pass over everything that arrived (the links, deferred messages). */
int            nv_progress_pass(netvm_ctx_t *ctx);
/* Drive progress until req completes (or fails); returns its status. */
netvm_status_t nv_progress_wait_req(netvm_ctx_t *ctx, struct netvm_req *req);
/* Drive progress until done(arg) (or timeout_ms: NETVM_ERR_TIMEOUT; < 0 no
 * limit); spin NETVM_SPIN_US first if spin. */
netvm_status_t nv_progress_wait(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms, int spin);
/* The same for at most ns nanoseconds (a spin shorter than a millisecond
 * as one wait: one poller of the rings throughout, not one per look). */
netvm_status_t nv_progress_wait_ns(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, uint64_t ns, int spin);
/* The same for a done() that takes in the event queue (drains its ring):
 * a sleep also ends when an event arrives. */
netvm_status_t nv_progress_wait_events(netvm_ctx_t *ctx, int (*done)(void *arg), void *arg, int timeout_ms,
                                       int spin);
/* req.c: q is an operation the target executes that a later direct
 * access to its peer must not overtake (it counts in ord_inflight until it
 * completes). rma.c: wait until no such operation is in flight to p (unless
 * flags has NETVM_F_UNORDERED); NETVM_ERR_AGAIN inside a handler, which
 * must not wait. */
void           nv_req_ordered(struct netvm_req *q);
netvm_status_t nv_rma_keep_order(netvm_ctx_t *ctx, struct nv_peer *p, unsigned flags);
/* Drive progress until p (NULL: all) has no outstanding requests. */
netvm_status_t nv_progress_wait_idle(netvm_ctx_t *ctx, struct nv_peer *p);
/* An application thread enters / leaves a call that waits or polls: it
 * takes P over from the progress thread (sticky: keeps it after the call,
 * for polling loops) and gives it back. */
void           nv_progress_enter(netvm_ctx_t *ctx, int sticky);
void           nv_progress_leave(netvm_ctx_t *ctx);
/* Before this thread sleeps on something that is not P: give P back (and
 * the shm rings its polling holds). */
void           nv_progress_release(netvm_ctx_t *ctx);
/* May a frame this thread sends wait for its next call (NV_AMS_LAZY)? Yes
 * while a polling loop holds the links: that loop's next call, or the
 * progress thread within NETVM_ACK_DELAY_US, sends it. */
int            nv_progress_may_hold(netvm_ctx_t *ctx);
/* Send what the links gathered or held back for a next call (lazy
 * frames, acknowledgements): before a wait, at a give-back, and where a
 * call returns at once without a pass of progress. */
void           nv_progress_flush_tx(netvm_ctx_t *ctx);
/* The armed event queue: P joins the user's event fd. */
void           nv_progress_arm_e(netvm_ctx_t *ctx);
/* Blocking calls are refused inside handlers and continuations. */
static inline netvm_status_t nv_may_block(void) { return nv_in_handler ? NETVM_ERR_STATE : NETVM_OK; }

/* rma.c: requests for link operations that complete later */
/* Wait for a free request and a credit towards p (inside a handler:
 * NETVM_ERR_AGAIN instead of waiting). */
netvm_status_t nv_reserve_req(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t *result, struct netvm_req **out);
/* Given what the link returned for q's operation: wait if pending, free q,
 * return the operation's status. */
netvm_status_t nv_finish_req(netvm_ctx_t *ctx, struct netvm_req *q, netvm_status_t st);
/* The operations with every option: remote (put: return at remote
 * completion), flags (NETVM_F_*, and NV_F_QUIET for a put), the tag of
 * their notifications; a put's gate (nv_note.gate; 0: none, and never with
 * a notification). */
enum { NV_F_QUIET = NV_NOTE_QUIET };   /* nv_put without remote: its failure reaches no flush */
/* lreg.c: the link upcalls of the local registration caches, and what
 * this context's cache did so far */
void nv_lreg_upcalls(struct nv_link_upcalls *up);
void nv_lreg_stats(netvm_ctx_t *ctx, struct nv_rcache_stats *s);
/* stats_file.c: NETVM_STATS_DIR's file. open: at init; tick: from the
 * timers, returns when it wants the next call; close: final != 0 writes
 * it once more first */
void     nv_stats_open(netvm_ctx_t *ctx);
uint64_t nv_stats_tick(netvm_ctx_t *ctx, uint64_t now);
void     nv_stats_close(netvm_ctx_t *ctx, int final);

netvm_status_t nv_put(netvm_ctx_t *ctx, netvm_rseg_t *r, size_t off, const void *src, size_t len,
                      unsigned flags, int remote, uint64_t tag, uint32_t gate);
netvm_status_t nv_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off, size_t len,
                      unsigned flags, uint64_t tag, netvm_req_t **req);
/* nv_atomic's flag of its own: nobody waits for the answer now, so where
 * the target runs the atomic (an active message) the request may wait for
 * the polling loop's next frame (NV_AMS_LAZY). */
#define NV_RMA_LAZY (1u << 31)
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
/* A pending request to p, in setup (NV_REQ_SETUP); result (may be NULL)
 * receives the value. */
struct netvm_req  *nv_req_alloc(netvm_ctx_t *ctx, struct nv_peer *p, uint64_t *result);
/* Its issuer hands req to a link (call it just before the send): from now
 * on a reply, its peer's death or a timeout may end it. NETVM_ERR_PEER if
 * the peer is dead already (then send nothing: its death may not have seen
 * req, so the issuer ends it with the error). */
netvm_status_t     nv_req_launch(struct netvm_req *req);
/* The issuer ends a detached request whose start returned st at once (not
 * NV_LINK_PENDING), if that use id of it is still pending: once launched,
 * another thread may have finished and reused it. A failure is returned to
 * the caller, so it posts no events. */
void               nv_req_end_started(struct netvm_req *req, uint32_t id, netvm_status_t st);
void               nv_req_free(struct netvm_req *req);
/* Complete a pending request exactly once (from any thread); 0 if it was not pending. */
int                nv_req_complete(struct netvm_req *req, netvm_status_t st, uint64_t result);
/* Give up on a request (timeout): as nv_req_complete, unless its answer is
 * already arriving. */
int                nv_req_give_up(struct netvm_req *req, netvm_status_t st);
/* The link starts writing req's answer: 1 if it may (nv_req_give_up then fails). */
int                nv_req_claim(struct netvm_req *req);
/* The same for the use named by request id (nv_req_id): a reply looked up
 * by id claims only that use, never a later one of the slot. */
int                nv_req_claim_id(struct netvm_req *req, uint32_t id);
/* Complete (give_up 0) or give up the use whose state word was s, if it
 * is still that: for sweeps over the pool, which hold no request. */
int                nv_req_finish_state(struct netvm_req *req, uint32_t s, netvm_status_t st, int give_up);
/* A request nobody waits for exists: the progress engine's sweep for
 * requests past NETVM_TIMEOUT must be due (progress.c). */
void               nv_progress_sweep_due(netvm_ctx_t *ctx);
/* The request named by a wire id, if that use of it is still current. */
struct netvm_req  *nv_req_lookup(netvm_ctx_t *ctx, uint32_t id);
/* Give a request away: whoever completes it posts its events (ev_*) and
 * frees it. */
void               nv_req_detach(struct netvm_req *req);
/* Run fn at completion (now if done); the request is then netvm's. */
void               nv_req_set_then(struct netvm_req *req, netvm_req_fn fn, void *arg);
static inline uint32_t nv_req_id(const struct netvm_req *r)
{
    return (uint32_t)atomic_load_explicit(&r->gen, memory_order_relaxed) << 16 | r->index;
}
static inline int nv_req_done(struct netvm_req *r)
{
    return NV_REQ_WHAT(atomic_load_explicit(&r->state, memory_order_acquire)) == NV_REQ_DONE;
}

#endif
