/* The tcp link: peers on other machines (or any peer, with NETVM_LINKS=tcp).
 * One authenticated, versioned stream per pair of ranks. The target's side
 * of the link plays the NIC: it checks every access against the ATU (through
 * core's translate upcall), receives put payloads straight from the socket
 * into the destination, answers gets by sending straight from the source
 * memory, and hands atomics to core's progress engine. */
#ifndef NV_LINK_TCP_H
#define NV_LINK_TCP_H

#include "link/ep.h"
#include "link/link.h"

#include <stddef.h>
#include <stdint.h>

struct nv_tcp_card {
    uint32_t version;
    uint32_t ipv4;        /* network byte order */
    uint16_t port;        /* network byte order */
    uint16_t pad;
    uint32_t pad2;
};

struct nv_tcp_params {
    int            timeout_ms;
    const uint8_t *secret;       /* the job secret */
    size_t         secret_len;
    uint32_t       max_segments;
    const char    *bind_addr;    /* dotted IPv4 to listen on and advertise */
    struct nv_ep  *ep;           /* this process's endpoint block: the target's side posts events here */
};

netvm_status_t nv_tcp_link_open(struct nv_link **link, int rank, int size,
                                const struct nv_tcp_params *p,
                                const struct nv_link_upcalls *up, struct nv_tcp_card *card);
/* Connect to and authenticate every rank r with use[r] != 0. */
netvm_status_t nv_tcp_link_connect(struct nv_link *link, const struct nv_tcp_card *cards,
                                   const uint8_t *use);

#endif
