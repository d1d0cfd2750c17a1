/* What core offers the services layer (src/svc: RPC, synchronisation) and
 * core's own mailbox: active-message handler ids of their own, outside the
 * application's range, with the full semantics of the public calls
 * (payloads of any size, reply tokens, forwarding, deferral, credits), and
 * a place for each service's per-context state.
 *
 * Handler ids: a service names its ids by NV_SVC_* + k; the ranges below
 * are fixed so that services never collide and both ends of a connection
 * agree on them. */
#ifndef NV_CORE_SVC_H
#define NV_CORE_SVC_H

#include <netvm/netvm.h>

enum {
    NV_SVC_MSG   = 0,    /* 0-3: mailbox messages (core/mailbox.c) */
    NV_SVC_RPC   = 4,    /* 4-11: RPC (svc/rpc) */
    NV_SVC_SYNC  = 12,   /* 12-21: locks, semaphores, wait queues, monitors, barriers (svc/sync) */
    NV_SVC_CHAN  = 22,   /* 22-27: channels and distributed queues (svc/chan) */
    NV_SVC_NIDS  = 32    /* 28-31: free */
};

/* Per-context state slots, one per service. */
enum { NV_SVC_STATE_MSG, NV_SVC_STATE_RPC, NV_SVC_STATE_SYNC, NV_SVC_STATE_CHAN, NV_SVC_STATE_GMEM,
       NV_SVC_STATE_GMEM_SERVER, NV_SVC_STATE_GMEM_OWN, NV_SVC_NSTATE = 8 };

/* Handler k (< NV_SVC_NIDS) of the services; fn NULL removes it. */
netvm_status_t nv_svc_register(netvm_ctx_t *ctx, unsigned k, netvm_am_handler_fn fn, void *arg);
/* netvm_am_send, netvm_am_request and netvm_am_forward to service handler
 * k; the handler sees msg->id == nv_svc_am_id(k). */
netvm_status_t nv_svc_send(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                           const void *payload, size_t len, netvm_req_t **req);
netvm_status_t nv_svc_request(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                              const void *payload, size_t len, void *reply_buf, size_t reply_cap,
                              netvm_am_result_t *result, netvm_req_t **req);
netvm_status_t nv_svc_forward(netvm_ctx_t *ctx, int peer, unsigned k, const netvm_am_token_t *token,
                              const uint64_t *args, unsigned nargs, const void *payload, size_t len);
unsigned       nv_svc_am_id(unsigned k);

/* netvm_put_nb (local completion) whose failure at the target is dropped
 * rather than kept for the next netvm_flush to this peer: for a write the
 * service knows may find its segment gone (a channel's credit going back
 * to a sender that closed), which must not surface as an unrelated later
 * flush's error. */
netvm_status_t nv_svc_put_quiet(netvm_ctx_t *ctx, netvm_rseg_t *dst, size_t off, const void *src, size_t len);

/* netvm_atomic_nb whose answer nobody waits for now (a continuation takes
 * it): from a polling loop, where the target runs the atomic, the request
 * may leave with that loop's next frame (a queue lock's release, whose
 * compare-swap then rides with the next acquire). */
netvm_status_t nv_svc_atomic_lazy(netvm_ctx_t *ctx, netvm_rseg_t *rseg, size_t off, netvm_atomic_op_t op,
                                  uint64_t operand, uint64_t compare, uint64_t *result, netvm_req_t **req);

/* netvm_alloc_shared whose mapping outlives the export: netvm_finalize
 * unexports every segment before the progress engine stops, and a
 * service whose handlers store into the memory (wait nodes) unmaps it
 * itself (munmap(*addr, *map_len)) in its state's destroy, when no
 * handler runs any more. */
netvm_status_t nv_alloc_shared_kept(netvm_ctx_t *ctx, size_t len, unsigned rights, const char *name,
                                    void **addr, size_t *map_len, netvm_seg_t **seg);

/* The state of service slot (< NV_SVC_NSTATE): made by create(ctx) on the
 * first call (once, under a lock; NULL if create failed), freed by
 * destroy(ctx, state) at netvm_finalize once the progress engine has
 * stopped (no handler or continuation runs any more). */
void *nv_svc_state(netvm_ctx_t *ctx, unsigned slot, void *(*create)(netvm_ctx_t *ctx),
                   void (*destroy)(netvm_ctx_t *ctx, void *state));
/* The state of slot if it was made, else NULL (never creates it). */
void *nv_svc_state_if(netvm_ctx_t *ctx, unsigned slot);
/* fn(ctx, state) runs at the start of netvm_finalize, before anything is
 * flushed, disconnected or released: a service that reads peers' mapped
 * segments from threads of its own (network memory's direct reads) stops
 * them there, while its imports are still valid. Set once the slot's
 * state exists. */
void  nv_svc_on_finalize(netvm_ctx_t *ctx, unsigned slot, void (*fn)(netvm_ctx_t *ctx, void *state));

#endif
