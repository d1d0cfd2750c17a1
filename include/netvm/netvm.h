/*
 * netvm — network virtual memory: one-sided put, get and atomics on the
 * virtual memory of other processes.
 *
 * A process attaches with netvm_init(); under the launcher (`netvm run`) it
 * learns its rank, the job size and how to reach its peers from the
 * environment. It exports any range of its address space as a segment
 * (netvm_export: nothing is pinned or copied) or allocates memory that peers
 * on the same machine map directly (netvm_alloc_shared). Peers import a
 * segment by name or handle and then put, get and run 64-bit atomics on it.
 * Every access is checked against the segment's key, bounds and rights
 * before a byte moves; a failed check is an error at the initiator and leaves
 * the target untouched.
 *
 * Peers: a job's ranks are its first peers (peer id = rank); a context can
 * also listen (netvm_listen) and any process may connect to it at any time
 * (netvm_connect), in a job or not. Every call that names a target names a
 * peer id; peers join and leave without disturbing the others.
 *
 * Threading: a context is created at a thread level (netvm_config_t):
 * NETVM_THREAD_SERIALIZED (the default: one application thread at a time
 * calls netvm, like MPI_THREAD_SERIALIZED; the data path takes no lock) or
 * NETVM_THREAD_MULTIPLE (any thread, any call, at once). In both, netvm's
 * progress thread runs beside the application, and active-message handlers
 * and request continuations running on it may issue operations
 * (nonblocking ones: docs/am.md).
 *
 * Every function returning netvm_status_t returns NETVM_OK on success;
 * netvm_strerror() explains any other value.
 */
#ifndef NETVM_NETVM_H
#define NETVM_NETVM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NETVM_VERSION_MAJOR 0
#define NETVM_VERSION_MINOR 1

typedef struct netvm_ctx  netvm_ctx_t;   /* a process's attachment: endpoint, links, progress */
typedef struct netvm_seg  netvm_seg_t;   /* a local exported segment */
typedef struct netvm_rseg netvm_rseg_t;  /* an imported remote segment (cached descriptor) */
typedef struct netvm_req  netvm_req_t;   /* a nonblocking operation */

typedef enum {
    NETVM_OK = 0,
    NETVM_ERR_INVAL,       /* an argument is invalid (NULL, zero length where not allowed, unknown flag) */
    NETVM_ERR_KEY,         /* the segment key does not match: forged or stale handle */
    NETVM_ERR_BOUNDS,      /* the range lies (partly) outside the segment */
    NETVM_ERR_RIGHTS,      /* the segment was not exported with the right this operation needs */
    NETVM_ERR_REVOKED,     /* the segment was unexported (or its owner finalized) */
    NETVM_ERR_PEER,        /* the peer process died, left, or is not connected */
    NETVM_ERR_TIMEOUT,     /* the peer did not answer within NETVM_TIMEOUT */
    NETVM_ERR_NOMEM,       /* out of memory, or a fixed table (see NETVM_MAX_SEGMENTS) is full */
    NETVM_ERR_RANK,        /* no such peer (rank of this job, or connected peer) */
    NETVM_ERR_NOTFOUND,    /* no segment of that name is exported by that rank */
    NETVM_ERR_EXISTS,      /* a segment of that name is already exported by this process */
    NETVM_ERR_FAULT,       /* the exported range is no longer mapped in the target */
    NETVM_ERR_BOOT,        /* bootstrap failed: the launcher or rendezvous is unreachable */
    NETVM_ERR_SYS,         /* a system call failed unexpectedly (the log says which) */
    NETVM_ERR_UNSUPPORTED, /* no link between these ranks can do this */
    NETVM_ERR_STATE,       /* the context or request is in the wrong state for this call */
    NETVM_ERR_AGAIN,       /* not now: events already wait (netvm_evq_arm), a queue is full, or a
                              listener has all the peers it takes */
    NETVM_ERR_AUTH,        /* authentication failed: wrong job secret or listener credential */
    NETVM_ERR_BUSY,        /* held by another: a shared region's writer (netvm_gmem_map_shared), or a
                              name still mapped (netvm_gmem_shared_remove) */
    NETVM_ERR_UNPINNED,    /* the target requires pinned memory (NETVM_TCP_PINNED) and the range was
                              not pinned for this access (netvm/reg.h, docs/registration.md) */
    NETVM_STATUS_COUNT
} netvm_status_t;

/* Rights of an exported segment, and what each operation needs. */
enum {
    NETVM_READ   = 1u << 0,  /* get */
    NETVM_WRITE  = 1u << 1,  /* put, immediate put */
    NETVM_ATOMIC = 1u << 2,  /* every atomic operation */
    NETVM_RW     = NETVM_READ | NETVM_WRITE,
    NETVM_RWA    = NETVM_READ | NETVM_WRITE | NETVM_ATOMIC,
};

/* 64-bit atomics on a naturally aligned word (offset a multiple of 8). Every
 * netvm atomic on a word is atomic with respect to every other one. */
typedef enum {
    NETVM_AOP_ADD,    /* *w += operand;                            no result */
    NETVM_AOP_FADD,   /* old = *w; *w += operand;                   result = old */
    NETVM_AOP_SWAP,   /* old = *w; *w = operand;                    result = old */
    NETVM_AOP_CSWAP,  /* old = *w; if (old == compare) *w = operand; result = old */
    NETVM_AOP_FCAA,   /* EXTOLL fetch-compare-and-add (unsigned):
                         old = *w; if (old <= compare) *w += operand; result = old;
                         the add happened iff result <= compare */
    NETVM_AOP_COUNT
} netvm_atomic_op_t;

/* Operation flags. 0 is the default: ordered, blocking calls return at
 * remote completion. */
enum {
    NETVM_F_UNORDERED = 1u << 0,  /* may become visible out of issue order */
};

/* Thread levels (netvm_config_t.thread_level). */
enum {
    NETVM_THREAD_SERIALIZED = 0,   /* one application thread at a time (the default) */
    NETVM_THREAD_MULTIPLE   = 1,   /* any number of threads at once */
};

/* Optional settings for netvm_init. A zero field means "take it from the
 * environment, else the default" (see `netvm info` for every NETVM_* variable). */
typedef struct {
    const char *boot;        /* bootstrap address, as NETVM_BOOT; NULL: environment or singleton;
                                "none": a job of one whatever the environment says (a private
                                context beside the job's, reached only by netvm_connect) */
    int         timeout_ms;  /* as NETVM_TIMEOUT */
    int         no_progress_thread; /* 1: no background progress (targets progress only inside netvm calls) */
    int         thread_level;       /* NETVM_THREAD_*, as NETVM_THREADS */
} netvm_config_t;

/* A segment handle: enough for any rank of the job to import the segment
 * without a name lookup. Plain data; send it however you like. */
typedef struct {
    int32_t  rank;
    uint32_t slot;
    uint64_t key;
} netvm_seg_handle_t;

/* --- context --------------------------------------------------------- */

/* cfg may be NULL. Collective: every rank of the job calls it. */
netvm_status_t netvm_init(netvm_ctx_t **ctx, const netvm_config_t *cfg);
/* Collective. Revokes every segment of this process, says goodbye to every
 * connected peer and releases everything. */
netvm_status_t netvm_finalize(netvm_ctx_t *ctx);
/* This process's rank in its job and the job's size (a process started
 * without the launcher is rank 0 of 1). Ranks 0..size-1 are peer ids. */
int            netvm_rank(const netvm_ctx_t *ctx);
int            netvm_size(const netvm_ctx_t *ctx);
/* The level the context was created at (NETVM_THREAD_*). */
int            netvm_thread_level(const netvm_ctx_t *ctx);
/* Collective: returns when every live rank has entered it; NETVM_ERR_PEER
 * if a rank of the job died. */
netvm_status_t netvm_barrier(netvm_ctx_t *ctx);
const char    *netvm_strerror(netvm_status_t status);
/* Serve peers' requests and complete this process's own once, without
 * blocking; returns how many events were handled. Never required (the
 * progress thread does it), but lets a process that polls anyway serve
 * requests sooner. */
int            netvm_progress(netvm_ctx_t *ctx);

/* --- peers beyond the job ---------------------------------------------- */

typedef struct netvm_listener netvm_listener_t;

/* How a listener admits peers. */
typedef struct {
    const void *credential;      /* the secret a connecting process must prove (HMAC); at least
                                    16 bytes, at most 64; required */
    size_t      credential_len;
    int         max_peers;       /* peers connected through it at once (0: NETVM_LISTEN_MAX_PEERS) */
} netvm_listen_opts_t;

/* Open a service endpoint at addr, "tcp:HOST:PORT" (HOST an IPv4 address;
 * PORT 0: the kernel picks one, see netvm_listener_addr). Processes that
 * prove the credential become peers of this context (a NETVM_EV_PEER_UP
 * event names each); the handshake runs in the progress engine and blocks
 * nothing; a process that connects and never authenticates holds no peer
 * slot and is dropped after NETVM_HANDSHAKE_MS. A peer on the same machine
 * is moved to the shm link after authenticating. */
netvm_status_t netvm_listen(netvm_ctx_t *ctx, const char *addr, const netvm_listen_opts_t *opts,
                            netvm_listener_t **listener);
/* The address peers connect to ("tcp:127.0.0.1:40123"). */
const char    *netvm_listener_addr(const netvm_listener_t *listener);
/* Peers currently connected through the listener. */
int            netvm_listener_peers(const netvm_listener_t *listener);
/* Stop admitting peers; peers already connected stay. The handle stays
 * valid until netvm_finalize (netvm_listener_peers goes on counting the
 * peers that stay; closing it again is NETVM_ERR_INVAL). */
netvm_status_t netvm_listener_close(netvm_listener_t *listener);

/* Connect to a listening process at addr and authenticate with its
 * credential; *peer receives the peer id. Waits at most timeout_ms (<= 0:
 * NETVM_TIMEOUT). NETVM_ERR_AUTH if the credential is refused,
 * NETVM_ERR_AGAIN if the listener is full, NETVM_ERR_PEER if nobody
 * listens there. */
netvm_status_t netvm_connect(netvm_ctx_t *ctx, const char *addr, const void *credential,
                             size_t credential_len, int timeout_ms, int *peer);
/* Leave a connected peer: operations already issued to it complete first
 * (as netvm_flush), then both sides forget each other (the peer gets
 * NETVM_EV_PEER_DOWN with status NETVM_OK). Imports from it fail from then
 * on; release them. A job rank cannot be disconnected (NETVM_ERR_INVAL). */
netvm_status_t netvm_disconnect(netvm_ctx_t *ctx, int peer);

typedef struct {
    int         is_rank;      /* a rank of this job (peer id = rank) */
    int         alive;        /* connected, not known dead or gone */
    const char *link;         /* "shm" or "tcp" */
} netvm_peer_info_t;
netvm_status_t netvm_peer_info(netvm_ctx_t *ctx, int peer, netvm_peer_info_t *info);

/* --- segments -------------------------------------------------------- */

/* Export [addr, addr+len) of this process under a fresh random key.
 * Any mapping works (heap, stack, static data, mmap); nothing is pinned or
 * copied. name (at most 63 bytes) must be unique within this process; it may
 * be NULL for a segment reached only by handle. A part of the range that
 * goes away while exported (munmap, mprotect to PROT_NONE, or to read-only
 * against a write, a file mapping truncated under it) fails the peers'
 * accesses that touch it with NETVM_ERR_FAULT, on every link, and nothing
 * else: this process is not disturbed, and accesses work again once the
 * memory is back. A failed write may have written some of its bytes that
 * were still there. (Memory from netvm_alloc_shared is mapped by peers on
 * the same machine: what this process does to its own mapping does not
 * reach theirs.) */
netvm_status_t netvm_export(netvm_ctx_t *ctx, void *addr, size_t len, unsigned rights,
                            const char *name, netvm_seg_t **seg);
/* Allocate len zeroed bytes that peers on this machine map directly, and
 * export them. netvm_unexport frees them. */
netvm_status_t netvm_alloc_shared(netvm_ctx_t *ctx, size_t len, unsigned rights,
                                  const char *name, void **addr, netvm_seg_t **seg);
/* Revoke: waits until operations already touching the segment finish; every
 * later operation on it fails with NETVM_ERR_REVOKED. */
netvm_status_t netvm_unexport(netvm_seg_t *seg);
netvm_status_t netvm_seg_handle(const netvm_seg_t *seg, netvm_seg_handle_t *handle);
void          *netvm_seg_addr(const netvm_seg_t *seg);
size_t         netvm_seg_len(const netvm_seg_t *seg);

/* Import a peer's segment by name. NETVM_ERR_NOTFOUND if it is not (yet)
 * exported; callers that race with the exporter synchronise first (e.g.
 * netvm_barrier). Importing one's own segments works too. */
netvm_status_t netvm_import(netvm_ctx_t *ctx, int peer, const char *name, netvm_rseg_t **rseg);
/* By handle: from the job rank handle->rank ... */
netvm_status_t netvm_import_handle(netvm_ctx_t *ctx, const netvm_seg_handle_t *handle,
                                   netvm_rseg_t **rseg);
/* ... or from any peer (a connected one: its handle's rank field means
 * nothing here). */
netvm_status_t netvm_import_handle_peer(netvm_ctx_t *ctx, int peer, const netvm_seg_handle_t *handle,
                                        netvm_rseg_t **rseg);
/* Drop an import (and its mapping, if any). */
netvm_status_t netvm_release(netvm_rseg_t *rseg);
size_t         netvm_rseg_len(const netvm_rseg_t *rseg);
unsigned       netvm_rseg_rights(const netvm_rseg_t *rseg);
/* 1 if put/get/atomics on this segment are direct loads and stores. */
int            netvm_rseg_is_mapped(const netvm_rseg_t *rseg);
/* The peer that exports it. */
int            netvm_rseg_peer(const netvm_rseg_t *rseg);
/* A direct pointer to byte off of a mapped segment (NULL where the path is
 * not mapped: another machine, memory not from netvm_alloc_shared,
 * NETVM_SHM_MAPPED=0, or off out of bounds), like OpenSHMEM's shmem_ptr and
 * UCX's ucp_rkey_ptr. Loads and stores through it are the fastest access
 * there is, and bypass netvm: they fire no tripwires and post no
 * notifications, order only as the CPU orders them (use C11 atomics or
 * fences of your own), and are not checked against revocation — the
 * pointer stays valid until netvm_release(rseg) whatever the exporter
 * does (after an unexport it points at memory the exporter no longer
 * shares with anyone). */
void          *netvm_ptr(netvm_rseg_t *rseg, size_t off);

/* --- RMA (blocking: return at remote completion) --------------------- */

/* The caller's own buffers (src, dst, result, payloads) must be mapped. A
 * put from or a get into memory that is not fails with NETVM_ERR_FAULT on
 * the process_vm and tcp paths (the failed put's target range then holds
 * unspecified bytes), but on a mapped segment (netvm_rseg_is_mapped) the
 * copy is the caller's own load and store and faults it as memcpy would. */

netvm_status_t netvm_put(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                         const void *src, size_t len, unsigned flags);
netvm_status_t netvm_get(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                         size_t len, unsigned flags);
/* Immediate put: the 64-bit value travels in the request (off 8-aligned). */
netvm_status_t netvm_put_imm(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                             uint64_t value, unsigned flags);
/* result may be NULL when the old value is not wanted. */
netvm_status_t netvm_atomic(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off,
                            netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                            uint64_t *result);

/* --- RMA (nonblocking) ------------------------------------------------ */

/* Start an operation; *req is NULL when it already completed with the
 * returned status, else complete it with netvm_test / netvm_wait /
 * netvm_wait_all. src/dst/result must stay valid until completion. */
netvm_status_t netvm_put_nb(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off,
                            const void *src, size_t len, unsigned flags, netvm_req_t **req);
netvm_status_t netvm_get_nb(netvm_ctx_t *ctx, void *dst, netvm_rseg_t *src, size_t off,
                            size_t len, unsigned flags, netvm_req_t **req);
netvm_status_t netvm_atomic_nb(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off,
                               netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                               uint64_t *result, netvm_req_t **req);
/* *done = 1 and *req = NULL once complete; the return value is then the
 * operation's status. A NULL *req counts as complete with NETVM_OK. */
netvm_status_t netvm_test(netvm_req_t **req, int *done);
/* Wait for completion and free the request; returns the operation's status. */
netvm_status_t netvm_wait(netvm_req_t **req);
/* Wait for all; returns the first failure (all are completed and freed). */
netvm_status_t netvm_wait_all(netvm_req_t **reqs, size_t n);
/* A continuation: fn runs exactly once when the request completes (at
 * once, in this thread, if it already has), with its status (a request
 * nobody waits for still fails with NETVM_ERR_TIMEOUT: the progress engine
 * sweeps for requests past NETVM_TIMEOUT, every eighth of it within
 * [10 ms, 1 s], and netvm_test sees the same), in the
 * progress engine: it must not block (as an active-message handler) and
 * may issue nonblocking operations. The request then belongs to netvm (the
 * caller must not test or wait on it again); *req is set to NULL. */
typedef void (*netvm_req_fn)(netvm_ctx_t *ctx, netvm_status_t status, void *arg);
netvm_status_t netvm_req_then(netvm_ctx_t *ctx, netvm_req_t **req, netvm_req_fn fn, void *arg);

/* Ordering: operations issued to peer (peer < 0: every peer) after the fence
 * become visible only after those issued before it. */
netvm_status_t netvm_fence(netvm_ctx_t *ctx, int peer);
/* Remote completion: returns when every operation issued to peer
 * (peer < 0: every peer) before it is visible at the target. */
netvm_status_t netvm_flush(netvm_ctx_t *ctx, int peer);

#ifdef __cplusplus
}
#endif

#include <netvm/events.h>   /* tripwires, notifications, signals, the event queue */
#include <netvm/am.h>       /* active messages */

#endif /* NETVM_NETVM_H */
