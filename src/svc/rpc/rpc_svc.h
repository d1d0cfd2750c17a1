/* RPC for netvm's own services (network memory, later others): operation
 * codes of their own above the application's NETVM_RPC_MAX_OPS, so that a
 * service inside a process never takes an op code its application uses,
 * with everything else of the public calls (call records, continuations,
 * delegation, payload tokens, timeouts). Service k's op is
 * NETVM_RPC_MAX_OPS + k on both ends of a connection; a procedure sees
 * call->op as that number. */
#ifndef NV_SVC_RPC_SVC_H
#define NV_SVC_RPC_SVC_H

#include <netvm/rpc.h>

#define NV_RPC_SVC_OPS 64
#define NV_RPC_ALL_OPS (NETVM_RPC_MAX_OPS + NV_RPC_SVC_OPS)

/* Ranges of k by service, fixed so both ends agree. */
enum { NV_RPC_SVC_GMEM = 0 /* 0-31: network memory (src/gmem/proto.h) */ };

static inline unsigned nv_rpc_svc_op(unsigned k) { return NETVM_RPC_MAX_OPS + k; }

netvm_status_t nv_rpc_svc_register(netvm_ctx_t *ctx, unsigned k, netvm_rpc_proc_fn fn, void *arg);
netvm_status_t nv_rpc_svc_call(netvm_ctx_t *ctx, int peer, unsigned k, const uint64_t *args, unsigned nargs,
                               const void *payload, size_t len, void *reply_buf, size_t reply_cap, int timeout_ms,
                               netvm_rpc_result_t *res);
netvm_status_t nv_rpc_svc_issue(netvm_rpc_handle_t *h, int peer, unsigned k, const uint64_t *args,
                                unsigned nargs, const void *payload, size_t len, void *reply_buf,
                                size_t reply_cap, int timeout_ms);
netvm_status_t nv_rpc_svc_delegate(netvm_ctx_t *ctx, const netvm_rpc_call_t *call, int peer, unsigned k,
                                   const uint64_t *args, unsigned nargs, const void *payload, size_t len);

#endif
