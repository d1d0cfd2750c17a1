/* What netvm's own tools need of regions beyond include/netvm/gmem.h:
 * `netvm gmem run` checks that the process can have userfaultfd before it
 * starts a program, and its interposer maps one region that is a large
 * reservation of address space (src/preload/). */
#ifndef NV_GMEM_REGION_INT_H
#define NV_GMEM_REGION_INT_H

#include <netvm/gmem.h>

#include <stddef.h>

/* NETVM_OK if this process can map regions (userfaultfd with the features
 * the pager needs); else NETVM_ERR_UNSUPPORTED with the reason and what to
 * change, in words a user can act on, in why. */
netvm_status_t nv_gmem_check_support(char *why, size_t cap);

/* netvm_gmem_map for a reservation: len is address space, and the servers
 * are not asked up front for room for all of it (a store that finds them
 * full fails then, and its page stays resident). Every per-page array of
 * the pager and the store is mapped lazily, and the evictor and the
 * cleaner walk only the pages ever used, so an unused reservation costs no
 * memory and no time. */
netvm_status_t nv_gmem_map_reserve(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts,
                                   netvm_gmem_t **region, void **addr);

#endif
