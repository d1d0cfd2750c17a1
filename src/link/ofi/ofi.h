/* The ofi link: a job's ranks reach each other through libfabric (an
 * FI_EP_RDM endpoint), so InfiniBand, RoCE, EFA and Slingshot are driven by
 * the engine that already runs there; here it is tested on libfabric's tcp
 * (with ofi_rxm) and shm providers.
 *
 * Puts and gets are RDMA writes and reads into the target's registered
 * segment (fi_mr_reg per exported segment: NV_LCAP_REGISTER; the key
 * reaches the initiator in core's import answer, ops->mr_key). What the
 * target must see of an access (tripwires, notifications, a gated put's
 * failure, remote completion) follows the write as remote CQ data or as a
 * small link message, both ordered after the data (FI_ORDER_SAW / RMA
 * event after placement). Active messages are sends into pre-posted
 * receive buffers; larger payloads are read by the receiver from the
 * sender's buffer (rendezvous). Peers beyond the job stay on tcp. */
#ifndef NV_LINK_OFI_H
#define NV_LINK_OFI_H

#include "link/ep.h"
#include "link/link.h"

#include <stdint.h>

#define NV_OFI_ADDR_MAX 96

struct nv_ofi_params {
    const char   *provider;     /* NETVM_OFI_PROVIDER, or NULL: fi_getinfo chooses */
    uint32_t      max_segments;
    uint64_t      host_id;      /* same host: the peer's pidfd tells its death at once */
    struct nv_ep *ep;           /* this process's endpoint block: tripwires, notifications */
    int           timeout_ms;   /* NETVM_TIMEOUT: the longest a put waits for its local completion */
    int           force_mr_local; /* NETVM_OFI_MR_LOCAL: descriptors for local buffers even where
                                     the provider needs none (tests the FI_MR_LOCAL path) */
    int           atomics;      /* NETVM_OFI_ATOMICS: NV_OFI_AMO_* */
    int           odp;          /* NETVM_OFI_ODP: ask for on-demand paging where offered */
    unsigned      spin_yield;   /* NETVM_SPIN_YIELD: passes of a wait here before it yields
                                   between them (0: never) */
};
/* Who runs netvm's atomics on a peer's segment over the ofi link. */
enum {
    NV_OFI_AMO_EMULATED = 0,   /* core's active messages */
    NV_OFI_AMO_NATIVE,         /* the provider, wherever it validates them */
};

/* How a job rank reaches this process (through the bootstrap allgather). */
struct nv_ofi_card {
    uint32_t version;
    uint32_t addrlen;           /* 0: this rank has no ofi link */
    uint64_t host_id;
    int32_t  pid;
    uint32_t pad;
    uint8_t  addr[NV_OFI_ADDR_MAX];   /* fi_getname */
};

netvm_status_t nv_ofi_link_open(struct nv_link **link, int pfd, const struct nv_ofi_params *p,
                                const struct nv_link_upcalls *up, struct nv_ofi_card *card);
/* Reach the peer lp (a job rank) at card: after this, lp->link is the ofi link. */
netvm_status_t nv_ofi_attach(struct nv_link *link, struct nv_lpeer *lp, const struct nv_ofi_card *card);
/* What the link declares (netvm info prints it); the provider decides
 * ordering, one-sidedness and the largest transfer when the link opens. */
const struct nv_link_ops *nv_ofi_link_ops(void);
/* 1 if this build has the ofi link (defined by core, built either way). */
int nv_ofi_built(void);

#endif
