/* Core's private view of the public handles. */
#ifndef NV_CORE_INTERNAL_H
#define NV_CORE_INTERNAL_H

#include <netvm/netvm.h>
#include "boot/boot.h"
#include "core/atu.h"
#include "link/link.h"

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
};

enum { NV_REQ_FREE = 0, NV_REQ_PENDING, NV_REQ_DONE };

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
};

struct nv_peer {
    struct nv_link  *link;
    _Atomic unsigned outstanding;   /* requests awaiting a reply */
    _Atomic int      dead;
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
void           nv_peer_down_upcall(void *arg, int rank);
void           nv_complete_upcall(void *arg, void *token, netvm_status_t st);
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

/* req.c */
netvm_status_t     nv_req_pool_init(netvm_ctx_t *ctx, uint32_t n);
void               nv_req_pool_fini(netvm_ctx_t *ctx);
/* A pending request to rank; result (may be NULL) receives the value. */
struct netvm_req  *nv_req_alloc(netvm_ctx_t *ctx, int rank, uint64_t *result);
void               nv_req_free(struct netvm_req *req);
/* Complete a pending request exactly once (from any thread); 0 if it was not pending. */
int                nv_req_complete(struct netvm_req *req, netvm_status_t st, uint64_t result);
struct netvm_req  *nv_req_lookup(netvm_ctx_t *ctx, uint32_t id);
static inline uint32_t nv_req_id(const struct netvm_req *r)
{
    return (uint32_t)atomic_load_explicit(&r->gen, memory_order_relaxed) << 16 | r->index;
}

static inline struct nv_link *nv_link_to(netvm_ctx_t *ctx, int rank) { return ctx->peers[rank].link; }

#endif
