/* Network memory's own context. A region is served by fault threads that
 * call netvm at the same time as the program does, which a context made at
 * NETVM_THREAD_SERIALIZED (the default) does not allow. So the first region
 * of such a context makes a private context beside it (boot "none": a job
 * of one, NETVM_THREAD_MULTIPLE) that talks to the servers; the program's
 * context owns it and finalizes it. A context made at
 * NETVM_THREAD_MULTIPLE serves its network memory itself. */
#ifndef NV_GMEM_OWN_CTX_H
#define NV_GMEM_OWN_CTX_H

#include <netvm/netvm.h>

/* The context user's network memory uses: user itself at
 * NETVM_THREAD_MULTIPLE, else its private one, made on first use. NULL
 * (and *st) if it could not be made. */
netvm_ctx_t *nv_gmem_own_ctx(netvm_ctx_t *user, netvm_status_t *st);
/* The same, never making one: NULL if none was made. */
netvm_ctx_t *nv_gmem_own_ctx_if(netvm_ctx_t *user);

#endif
