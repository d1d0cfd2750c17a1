#ifndef DEMO_GMEM_PHASE_H
#define DEMO_GMEM_PHASE_H
#include <netvm/netvm.h>
/* Run the demo's network-memory workload on a region of region_mib MiB
 * (budget a quarter of it); 1 if every byte checked out. */
int demo_gmem_phase(netvm_ctx_t *ctx, unsigned region_mib);
#endif
