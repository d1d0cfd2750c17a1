/* svc/sync internals: the per-context state (wait nodes, the objects this
 * process is home of), the handle every public type wraps, and the
 * messages between waiters, wakers and homes. */
#ifndef NV_SVC_SYNC_INT_H
#define NV_SVC_SYNC_INT_H

#include <netvm/sync.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/svc.h"

/* Service handlers (NV_SVC_SYNC + k). */
enum {
    NV_SYNC_AM_WAKE = 0,   /* one-way: args slot, ticket, status: let a waiter go */
    NV_SYNC_AM_LINK = 1,   /* one-way: args slot, ticket, successor ref: MCS link */
    NV_SYNC_AM_HOME = 2,   /* request or one-way: args op, id, key, ref, arg: an operation at the home */
};

enum { NV_SYNC_LOCK = 1, NV_SYNC_RWLOCK, NV_SYNC_SEM, NV_SYNC_WAITQ, NV_SYNC_MONITOR, NV_SYNC_BARRIER };

/* Home operations (args[0] of NV_SYNC_AM_HOME). */
enum { NV_SYNC_OP_INFO = 1, NV_SYNC_OP_SEM_WAIT, NV_SYNC_OP_SEM_KICK, NV_SYNC_OP_WQ_WAIT,
       NV_SYNC_OP_WQ_SIGNAL, NV_SYNC_OP_WQ_BROADCAST, NV_SYNC_OP_BAR_ARRIVE,
       NV_SYNC_OP_MCS_ENQ   /* a queue lock's acquire: swap ref into the tail, link it behind the old one */ };

/* The object's words at the home (netvm_alloc_shared, "nvsync:<name>");
 * hot words on lines of their own. */
enum {
    NV_SYNC_W_MAGIC = 0, NV_SYNC_W_KIND = 8, NV_SYNC_W_ID = 16, NV_SYNC_W_KEY = 24,
    NV_SYNC_W_NMEMB = 32,   /* barrier: members, listed as int32 from NV_SYNC_SEG_LEN */
    NV_SYNC_W_TAIL = 64,    /* MCS tail: a node ref, 0 free, NV_SYNC_BROKEN */
    NV_SYNC_W_BROKEN = 72,  /* 1: a holder died */
    NV_SYNC_W_RW = 128,     /* readers in bits 0-31, registered writers above */
    NV_SYNC_W_WRITER = 136, /* ref of the writer waiting for readers to leave */
    NV_SYNC_W_SEM = 192,    /* K - count, NV_SYNC_SEM_QUEUED while waiters queue */
    NV_SYNC_SEG_LEN = 256
};
#define NV_SYNC_MAGIC      0x6e7673796e633031ull
#define NV_SYNC_BROKEN     UINT64_MAX
#define NV_SYNC_SEM_K      (1ull << 62)
#define NV_SYNC_SEM_QUEUED (1ull << 63)
#define NV_SYNC_RW_WRITER  (1ull << 32)
#define NV_SYNC_RW_READERS 0xffffffffull

/* A wait node: where one waiting thread of this process sleeps. A node ref
 * names it from anywhere: peer << 44 | slot << 32 | ticket (ticket != 0,
 * fresh for every use, so a late message for an earlier use is ignored).
 *
 * The words a waker writes are in memory peers on this machine map
 * (struct nv_sync_shnode, exported as NV_SYNC_NODES_SEG): a waker there
 * stores its wake or link itself, as the message's handler would here,
 * and a spinning waiter sees it a cache line later (direct.c). The rest
 * is the owner's alone. */
#define NV_SYNC_NODES 1024
struct nv_sync_shnode {
    _Atomic uint64_t wake;     /* ticket while waiting; | (status + 1) << 32 once woken */
    _Atomic uint64_t next;     /* MCS successor ref, 0 until linked */
    _Atomic uint32_t ticket;
    /* futex word (process-shared: a waker elsewhere wakes it): a count
     * bumped at every wake or link that finds a flag, NV_SYNC_SLEEPING while a thread
     * sleeps on it, NV_SYNC_WANT_MSG while one sleeps in core's loop
     * (which a store does not wake: a waker that stored sends the
     * message as well) */
    _Atomic uint32_t seq;
    uint8_t pad[40];
};
#define NV_SYNC_SLEEPING   0x80000000u
#define NV_SYNC_WANT_MSG   0x40000000u
#define NV_SYNC_SEQ_COUNT  0x3fffffffu
/* the exported nodes' name: "nvsync:" and no object name (object names
 * are never empty) */
#define NV_SYNC_NODES_SEG "nvsync:"

struct nv_sync_node {
    uint32_t uses;             /* the last ticket given to this slot */
    /* a release that went on without waiting for the home (lock.c) */
    uint64_t rel_ref;          /* the ref it released */
    uint64_t rel_old;          /* the tail its compare-swap found */
    _Atomic unsigned rel;      /* NV_SYNC_REL_*: who of the two ends has come */
};
/* n->next of a node whose holder released it before any successor linked,
 * its compare-swap at the home still on the way (a slot no node has, ticket
 * 0: never a ref) */
#define NV_SYNC_RELEASING ((uint64_t)0xfff << 32)
enum { NV_SYNC_REL_CAS = 1, NV_SYNC_REL_LINK = 2 };

static inline uint64_t nv_sync_ref(int peer, unsigned slot, uint32_t ticket)
{
    return (uint64_t)(uint32_t)peer << 44 | (uint64_t)slot << 32 | ticket;
}
static inline int      nv_sync_ref_peer(uint64_t ref)   { return (int)(ref >> 44); }
static inline unsigned nv_sync_ref_slot(uint64_t ref)   { return (unsigned)(ref >> 32) & 0xfffu; }
static inline uint32_t nv_sync_ref_ticket(uint64_t ref) { return (uint32_t)ref; }

/* A queued waiter at the home. */
struct nv_sync_waiter {
    uint64_t ref;
    struct nv_sync_waiter *next;
};
struct nv_sync_fifo {
    struct nv_sync_waiter *head, *tail;
    unsigned n;
};

/* An object this process is home of. */
struct nv_sync_home {
    int kind;
    uint32_t id;
    uint64_t key;
    uint64_t *words;          /* the segment, local */
    unsigned nq;
    struct nv_sync_fifo *q;   /* sem: q[0]; waitq: q[0]; monitor: q[0..ncond-1]; barrier: arrivals */
    int *members;             /* barrier */
    unsigned nmembers, arrived;
};

/* A wake (or a link) the home sends once its operation is answered, and
 * keeps while it finds no credit inside a handler. */
struct nv_sync_pending {
    uint64_t ref;
    uint64_t succ;            /* != 0: link succ behind ref's node, instead of waking it */
    netvm_status_t status;
    uint32_t sem_id;          /* != UINT32_MAX: a semaphore unit goes with it */
    uint64_t sem_key;
    struct nv_sync_pending *next;
};

struct nv_sync_state {
    netvm_ctx_t *ctx;
    int me;
    pthread_mutex_t lock;     /* homes, fifos, pending */
    struct nv_sync_node nodes[NV_SYNC_NODES];
    struct nv_sync_shnode *sh;   /* NV_SYNC_NODES of them: shared, or this process's own */
    size_t sh_map_len;           /* shared: the mapping's length (0: this process's own) */
    netvm_seg_t *sh_seg;         /* shared: its export (netvm_finalize unexports it) */
    /* the job ranks' nodes as this process maps them (direct.c) */
    struct nv_sync_peer_nodes *peer_nodes;
    int npeer_nodes;
    pthread_mutex_t direct_lock;
    _Atomic int direct_off;      /* finalize began: its imports go */
    _Atomic int direct_users;    /* handlers storing into peers' nodes now */
    _Atomic int quiesce_set;     /* nv_svc_on_finalize done */
    _Atomic uint64_t used[NV_SYNC_NODES / 64];   /* allocation bitmap (lock-free: on every acquire) */
    uint64_t uid;             /* unique in the process: names it in a thread's spare node */
    struct nv_sync_state *live_next;   /* the process's live states (state.c) */
    struct nv_sync_home **homes;
    uint32_t nhomes;
    struct nv_sync_pending *pending, *pending_tail;
};

/* What every public handle is. */
struct nv_sync_handle {
    netvm_ctx_t *ctx;
    struct nv_sync_state *st;
    int kind, home;
    uint32_t id;
    uint64_t key;
    netvm_rseg_t *rseg;
    struct nv_sync_home *owned;   /* at the home: the object */
    netvm_seg_t *seg;             /* at the home: its segment */
    _Atomic unsigned held;        /* MCS: the holder's node slot + 1 (0: free) */
    /* the object's words as this process maps them (netvm_ptr), NULL
     * where the home is not mapped; and the home's liveness as core
     * keeps it, which a CPU atomic on the words does not check */
    unsigned char *direct;
    const _Atomic int *home_dead;
    unsigned ncond;
    int *members;                 /* barrier: the members (liveness checks) */
    unsigned nmembers;
};

struct nv_sync_state *nv_sync_state(netvm_ctx_t *ctx);

/* Wait nodes. */
netvm_status_t nv_sync_node_get(struct nv_sync_state *st, unsigned *slot, uint64_t *ref);
void           nv_sync_node_put(struct nv_sync_state *st, unsigned slot);
/* A fresh ticket on a held node (a second wait on it); returns the new ref. */
uint64_t       nv_sync_node_renew(struct nv_sync_state *st, unsigned slot);
/* The state named uid if it still lives, held against its destruction
 * until nv_sync_live_leave (NULL: gone, nothing held). For what may run
 * after netvm_finalize destroyed the state: a continuation of a request
 * that the teardown fails. */
struct nv_sync_state *nv_sync_live_enter(uint64_t uid);
void           nv_sync_live_leave(void);
/* The end of a releasing node's hand-over (NV_SYNC_REL_CAS or _LINK came):
 * the second of the two frees it. */
void           nv_sync_rel_end(struct nv_sync_state *st, struct nv_sync_node *n, unsigned what);

/* Sleep until the node is woken (next == 0: its wake word; else its next
 * word becomes non-zero, stored in *next). waker: the peer expected to
 * send the message (-1: unknown). watch runs every NETVM_SYNC_CHECK_MS: a
 * status other than NETVM_OK ends the wait with it. Returns the waker's
 * status. */
typedef netvm_status_t (*nv_sync_watch_fn)(struct nv_sync_handle *h, void *arg);
netvm_status_t nv_sync_sleep(struct nv_sync_handle *h, unsigned slot, uint64_t *next, int waker,
                             nv_sync_watch_fn watch, void *arg);
/* Does this process reach peer over the shm link? */
int            nv_sync_on_shm(struct nv_sync_state *st, int peer);
/* Is peer alive (NETVM_OK) or not (NETVM_ERR_PEER). */
netvm_status_t nv_sync_alive(struct nv_sync_state *st, int peer);
netvm_status_t nv_sync_watch_home(struct nv_sync_handle *h, void *arg);

/* Store a wake / a link into node n (local or a peer's mapped one), as
 * the message's handler does. wake: 1 if it was this wait's wake (and
 * n->seq said *want_msg); link: 1 linked, 0 stale, -1 the node is
 * releasing (lock.c: only its owner may hand over). */
int  nv_sync_wake_node(struct nv_sync_shnode *n, uint32_t ticket, netvm_status_t status, int *want_msg);
int  nv_sync_link_node(struct nv_sync_shnode *n, uint32_t ticket, uint64_t succ, int *want_msg);

/* direct.c: the shared nodes (made with the state, freed with it); the
 * node ref names where this process maps it, to store into until
 * nv_sync_direct_leave: NULL if not mapped (another machine, a connected
 * peer, finalize begun); off: finalize begins, no store from now on. */
void                   nv_sync_nodes_make(struct nv_sync_state *st);
void                   nv_sync_nodes_free(struct nv_sync_state *st);
void                   nv_sync_direct_off(struct nv_sync_state *st);
struct nv_sync_shnode *nv_sync_direct_enter(struct nv_sync_state *st, uint64_t ref);
void                   nv_sync_direct_leave(struct nv_sync_state *st);

/* Let the waiter ref go with status / link succ behind node ref. Outside a
 * handler these may wait for flow-control credit; inside one they may
 * return NETVM_ERR_AGAIN. */
netvm_status_t nv_sync_send_wake(struct nv_sync_state *st, uint64_t ref, netvm_status_t status);
netvm_status_t nv_sync_send_link(struct nv_sync_state *st, uint64_t ref, uint64_t succ);

/* An operation at h's home; reply args in out (may be NULL). */
netvm_status_t nv_sync_home_call(struct nv_sync_handle *h, unsigned op, uint64_t ref, uint64_t arg,
                                 uint64_t *out, unsigned nout);
netvm_status_t nv_sync_home_send(struct nv_sync_handle *h, unsigned op, uint64_t ref, uint64_t arg);

/* Create the object at this process (words and the home record) / open a
 * peer's by name; close either. */
netvm_status_t nv_sync_create(netvm_ctx_t *ctx, const char *name, int kind, unsigned nq, const int *members,
                              unsigned nmembers, struct nv_sync_handle *h);
netvm_status_t nv_sync_open(netvm_ctx_t *ctx, int home, const char *name, int kind, struct nv_sync_handle *h);
netvm_status_t nv_sync_close(struct nv_sync_handle *h);

/* The home side (home.c). home_op and home_drop run under st->lock and
 * only queue the wakes they make; flush_pending sends them, without the
 * lock held (a send outside a handler may wait for credit, serving
 * progress, which may run on_home). */
netvm_status_t nv_sync_home_op(struct nv_sync_state *st, int from, const uint64_t *a, uint64_t *out,
                               unsigned *nout);
void           nv_sync_flush_pending(struct nv_sync_state *st);
void           nv_sync_home_drop(struct nv_sync_state *st, struct nv_sync_home *o);

/* MCS on h's tail word (lock.c), used by the lock, rwlock and monitor. */
netvm_status_t nv_sync_mcs_acquire(struct nv_sync_handle *h);
netvm_status_t nv_sync_mcs_release(struct nv_sync_handle *h);

int nv_sync_check_ms(void);
/* NETVM_ERR_INVAL for a NULL or foreign handle, NETVM_ERR_STATE inside a
 * handler (every sync call may block), else NETVM_OK. */
netvm_status_t nv_sync_enter(const struct nv_sync_handle *h, int kind);
/* Sets h->direct and h->home_dead once h->rseg is imported. */
void nv_sync_map_words(struct nv_sync_handle *h);
/* A word of the object at the home (off: NV_SYNC_W_*). */
netvm_status_t nv_sync_atomic_api(struct nv_sync_handle *h, size_t off, netvm_atomic_op_t op, uint64_t operand,
                                  uint64_t compare, uint64_t *old);
/* The same; a swap or compare-swap on a mapped home is a CPU atomic on
 * the word itself, what netvm_atomic's mapped path does less its checks
 * (arguments, bounds, rights, ordering behind earlier emulated
 * operations: none apply to the lock's tail word), which were half of an
 * uncontended acquire + release (performance.md, "The queue lock's
 * direct words"). A dead home or a closed object still fails as
 * netvm_atomic fails; one that closes while the atomic runs may leave it
 * to act on memory the home no longer shares (a use racing the object's
 * destruction, which no lock call can order). */
static inline netvm_status_t nv_sync_atomic(struct nv_sync_handle *h, size_t off, netvm_atomic_op_t op,
                                            uint64_t operand, uint64_t compare, uint64_t *old)
{
    if (h->direct && (op == NETVM_AOP_SWAP || op == NETVM_AOP_CSWAP)) {
        if (atomic_load_explicit(h->home_dead, memory_order_acquire))
            return NETVM_ERR_PEER;
        /* the home clears the magic before it unexports (nv_sync_close):
         * a closed object fails as a revoked segment does */
        if (__atomic_load_n((uint64_t *)(void *)(h->direct + NV_SYNC_W_MAGIC), __ATOMIC_ACQUIRE) != NV_SYNC_MAGIC)
            return NETVM_ERR_REVOKED;
        uint64_t *w = (uint64_t *)(void *)(h->direct + off), v;
        if (op == NETVM_AOP_SWAP) {
            v = __atomic_exchange_n(w, operand, __ATOMIC_SEQ_CST);
        } else {
            v = compare;
            __atomic_compare_exchange_n(w, &v, operand, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        }
        if (old)
            *old = v;
        return NETVM_OK;
    }
    return nv_sync_atomic_api(h, off, op, operand, compare, old);
}

/* The public types are handles. */
struct netvm_lock     { struct nv_sync_handle h; };
struct netvm_rwlock   { struct nv_sync_handle h; };
struct netvm_sem      { struct nv_sync_handle h; };
struct netvm_waitq    { struct nv_sync_handle h; };
struct netvm_monitor  { struct nv_sync_handle h; };
struct netvm_gbarrier { struct nv_sync_handle h; };

/* create / open / close of a public type T wrapping a handle of kind K */
#define NV_SYNC_OPEN_CLOSE(T, K, open_fn, close_fn) \
    netvm_status_t open_fn(netvm_ctx_t *ctx, int home, const char *name, struct T **out) \
    { \
        if (!out) \
            return NETVM_ERR_INVAL; \
        *out = NULL; \
        if (!ctx) \
            return NETVM_ERR_INVAL; \
        struct T *o = calloc(1, sizeof *o); \
        if (!o) \
            return NETVM_ERR_NOMEM; \
        netvm_status_t s = nv_sync_open(ctx, home, name, K, &o->h); \
        if (s != NETVM_OK) { \
            free(o); \
            return s; \
        } \
        *out = o; \
        return NETVM_OK; \
    } \
    netvm_status_t close_fn(struct T *o) \
    { \
        if (!o || o->h.kind != K) \
            return NETVM_ERR_INVAL; \
        return nv_sync_close(&o->h); \
    }

#endif
