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
 * Threading: a context may be used by one application thread at a time
 * (MPI_THREAD_SERIALIZED); netvm's own progress thread runs beside it. Use
 * a lock around netvm calls if several threads share the context.
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
    NETVM_ERR_PEER,        /* the peer process died or left the job */
    NETVM_ERR_TIMEOUT,     /* the peer did not answer within NETVM_TIMEOUT */
    NETVM_ERR_NOMEM,       /* out of memory, or a fixed table (see NETVM_MAX_SEGMENTS) is full */
    NETVM_ERR_RANK,        /* no such rank in this job */
    NETVM_ERR_NOTFOUND,    /* no segment of that name is exported by that rank */
    NETVM_ERR_EXISTS,      /* a segment of that name is already exported by this process */
    NETVM_ERR_FAULT,       /* the exported range is no longer mapped in the target */
    NETVM_ERR_BOOT,        /* bootstrap failed: the launcher or rendezvous is unreachable */
    NETVM_ERR_SYS,         /* a system call failed unexpectedly (the log says which) */
    NETVM_ERR_UNSUPPORTED, /* no link between these ranks can do this */
    NETVM_ERR_STATE,       /* the context or request is in the wrong state for this call */
    NETVM_ERR_AGAIN,       /* not now: events already wait (netvm_evq_arm), or a queue is full */
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

/* Optional settings for netvm_init. A zero field means "take it from the
 * environment, else the default" (see `netvm info` for every NETVM_* variable). */
typedef struct {
    const char *boot;        /* bootstrap address, as NETVM_BOOT; NULL: environment or singleton */
    int         timeout_ms;  /* as NETVM_TIMEOUT */
    int         no_progress_thread; /* 1: no background progress (targets progress only inside netvm calls) */
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
/* Collective. Revokes every segment of this process and releases everything. */
netvm_status_t netvm_finalize(netvm_ctx_t *ctx);
int            netvm_rank(const netvm_ctx_t *ctx);
int            netvm_size(const netvm_ctx_t *ctx);
/* Collective: returns when every live rank has entered it; NETVM_ERR_PEER
 * if a rank of the job died. */
netvm_status_t netvm_barrier(netvm_ctx_t *ctx);
const char    *netvm_strerror(netvm_status_t status);
/* Serve peers' requests and complete this process's own once, without
 * blocking; returns how many events were handled. Never required (the
 * progress thread does it), but lets a process that polls anyway serve
 * requests sooner. */
int            netvm_progress(netvm_ctx_t *ctx);

/* --- segments -------------------------------------------------------- */

/* Export [addr, addr+len) of this process under a fresh random key.
 * Any mapping works (heap, stack, static data, mmap); nothing is pinned or
 * copied. name (at most 63 bytes) must be unique within this process; it may
 * be NULL for a segment reached only by handle. A range unmapped while
 * exported fails peers' accesses with NETVM_ERR_FAULT; one whose protection
 * is lowered below the rights exported (mprotect to read-only with
 * NETVM_WRITE given) is not detected, and a peer's write into it over tcp
 * faults this process: unexport first. */
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
netvm_status_t netvm_import(netvm_ctx_t *ctx, int rank, const char *name, netvm_rseg_t **rseg);
netvm_status_t netvm_import_handle(netvm_ctx_t *ctx, const netvm_seg_handle_t *handle,
                                   netvm_rseg_t **rseg);
/* Drop an import (and its mapping, if any). */
netvm_status_t netvm_release(netvm_rseg_t *rseg);
size_t         netvm_rseg_len(const netvm_rseg_t *rseg);
unsigned       netvm_rseg_rights(const netvm_rseg_t *rseg);
/* 1 if put/get/atomics on this segment are direct loads and stores. */
int            netvm_rseg_is_mapped(const netvm_rseg_t *rseg);

/* --- RMA (blocking: return at remote completion) --------------------- */

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

/* Ordering: operations issued to rank (rank < 0: every peer) after the fence
 * become visible only after those issued before it. */
netvm_status_t netvm_fence(netvm_ctx_t *ctx, int rank);
/* Remote completion: returns when every operation issued to rank
 * (rank < 0: every peer) before it is visible at the target. */
netvm_status_t netvm_flush(netvm_ctx_t *ctx, int rank);

#ifdef __cplusplus
}
#endif

#include <netvm/events.h>   /* tripwires, notifications, signals, the event queue */

#endif /* NETVM_NETVM_H */
