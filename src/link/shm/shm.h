/* The shm link: peers on the same machine. Memory allocated through netvm is
 * memfd-backed and peers map it (put/get/atomics are loads, stores and CPU
 * atomics); any other exported range is reached with process_vm_writev/readv,
 * which translates the target's virtual addresses and faults its pages in
 * without pinning. Atomics on such ranges, and every active message, go to
 * the target through its message ring; a large message's payload stays
 * with the sender until the receiver copies it with process_vm_readv
 * (rendezvous, one copy). */
#ifndef NV_LINK_SHM_H
#define NV_LINK_SHM_H

#include "link/ep.h"
#include "link/link.h"

#include <stddef.h>
#include <stdint.h>

/* What a process tells a peer on its machine so it can attach. */
struct nv_shm_card {
    uint32_t version;
    int32_t  pid;
    int32_t  block_fd;
    int32_t  ep_fd;       /* the endpoint block's memfd (link/ep.h), -1 if none */
    uint64_t host_id;     /* peers with another host_id are not reachable by shm */
};
#define NV_SHM_CARD_LEN 24

struct nv_shm_params {
    uint32_t max_segments;
    int      use_mapping;   /* 0: never map peers' memfds (process_vm_* only) */
    int      timeout_ms;
    size_t   eager;         /* active-message payloads up to this travel through the ring */
    struct nv_ep *ep;       /* this process's endpoint block (peers map it) */
};

/* Create this process's side of the link (its fds join pfd) and the card
 * to give peers. */
netvm_status_t nv_shm_link_open(struct nv_link **link, int pfd, const struct nv_shm_params *p,
                                const struct nv_link_upcalls *up, struct nv_shm_card *card);
/* What the link declares (netvm info prints it; am_eager is set at open). */
const struct nv_link_ops *nv_shm_link_ops(void);
/* The card this process gives peers on its machine. */
void           nv_shm_card_of(struct nv_link *link, struct nv_shm_card *card);
/* Attach to the peer described by card (self: this process itself):
 * lp->conn becomes the link's state for it. NETVM_ERR_UNSUPPORTED if it is
 * not on this machine or runs another version. */
netvm_status_t nv_shm_attach(struct nv_link *link, struct nv_lpeer *lp, const struct nv_shm_card *card,
                             int self);
/* Let peers on this machine reach this process (they attach and use
 * process_vm_* on it): under Yama ptrace_scope 1, declare any process of
 * this user a tracer. Called before handing a card to a peer. */
void           nv_shm_allow_peers(void);
/* An identity shared by exactly the processes that can reach each other. */
uint64_t       nv_shm_host_id(void);
void           nv_shm_card_encode(const struct nv_shm_card *c, uint8_t out[NV_SHM_CARD_LEN]);
int            nv_shm_card_decode(const uint8_t *in, size_t len, struct nv_shm_card *c);

#endif
