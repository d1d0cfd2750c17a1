/* The shm link: peers on the same machine. Memory allocated through netvm is
 * memfd-backed and peers map it (put/get/atomics are loads, stores and CPU
 * atomics); any other exported range is reached with process_vm_writev/readv,
 * which translates the target's virtual addresses and faults its pages in
 * without pinning. Atomics on such ranges go to the target's progress engine
 * as active messages. */
#ifndef NV_LINK_SHM_H
#define NV_LINK_SHM_H

#include "link/ep.h"
#include "link/link.h"

#include <stddef.h>
#include <stdint.h>

/* What a process tells its peers (through the bootstrap) so they can reach it. */
struct nv_shm_card {
    uint32_t version;
    int32_t  pid;
    int32_t  block_fd;
    int32_t  ep_fd;       /* the endpoint block's memfd (link/ep.h), -1 if none */
    uint64_t host_id;     /* peers with another host_id are not reachable by shm */
};

struct nv_shm_params {
    uint32_t max_segments;
    int      use_mapping;   /* 0: never map peers' memfds (process_vm_* only) */
    int      timeout_ms;
    struct nv_ep *ep;       /* this process's endpoint block (peers map it) */
};

/* Create this process's side of the link and the card to publish. */
netvm_status_t nv_shm_link_open(struct nv_link **link, int rank, int size,
                                const struct nv_shm_params *p,
                                const struct nv_link_upcalls *up, struct nv_shm_card *card);
/* Attach to every rank r with use[r] != 0; rank r's card is at
 * (const char *)cards + r * stride. */
netvm_status_t nv_shm_link_connect(struct nv_link *link, const struct nv_shm_card *cards, size_t stride,
                                   const uint8_t *use);

#endif
