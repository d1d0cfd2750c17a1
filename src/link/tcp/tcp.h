/* The tcp link: peers on other machines (or any peer, with NETVM_LINKS=tcp),
 * and every process that connects to a listener. One authenticated,
 * versioned stream per peer. The target's side of the link plays the NIC: it
 * checks every access against the ATU (core's translate upcall), receives
 * put payloads straight from the socket into the destination, answers gets
 * by sending straight from the source memory, and hands active messages to
 * core.
 *
 * Connections are made and authenticated by a nonblocking state machine in
 * the progress engine (tcp_hs.c): a listener accepts, the handshake runs as
 * bytes arrive, and a peer exists only once it has proved the secret. */
#ifndef NV_LINK_TCP_H
#define NV_LINK_TCP_H

#include "link/ep.h"
#include "link/link.h"
#include "wire/handshake.h"

#include <stddef.h>
#include <stdint.h>

struct nv_tcp_params {
    int            timeout_ms;
    const uint8_t *secret;       /* the job secret */
    size_t         secret_len;
    uint64_t       job_hash;     /* binds job connections to one job */
    int            rank;         /* this process's rank in its job */
    uint64_t       uuid;         /* this context's endpoint id */
    uint64_t       host_id;
    uint32_t       max_segments;
    uint32_t       max_requests; /* core's request ids index below this */
    const char    *bind_addr;    /* dotted IPv4 for the job's listener */
    int            job_listen;   /* open a listener for the job's ranks */
    int            handshake_ms; /* a connection that has not authenticated by then is closed */
    int            handshake_max;/* connections authenticating at once, per listener */
    struct nv_ep  *ep;           /* this process's endpoint block: the target's side posts events here */
};

/* How a job rank reaches this process. */
struct nv_tcp_card {
    uint32_t version;
    uint32_t ipv4;        /* network byte order */
    uint16_t port;        /* network byte order */
    uint16_t pad;
    uint32_t pad2;
};

/* What the handshake learns of a peer, for core's decisions. */
struct nv_tcp_hs_info {
    struct nv_hs_hello hello;     /* the peer's HELLO */
    const uint8_t     *card;      /* its card for a faster link (AUTH / WELCOME), may be empty */
    uint32_t           card_len;
    uint32_t           their_id;  /* its peer id for this process */
    void              *cookie;    /* core's: the listener (acceptor) or the connect call (connector) */
};

/* Core's part of the handshake. Each returns NETVM_OK to go on; anything
 * else refuses the connection with that status. */
struct nv_tcp_hs_upcalls {
    /* acceptor: the connector proved the secret: the peer it becomes (a job
     * rank's, or a new one), with its remote_id set to in->their_id before
     * anybody can send to it (the link does not write it after), and
     * whether both move to another link (*upgrade, with this process's card) */
    netvm_status_t (*accepted)(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp,
                               int *upgrade, uint8_t *card, uint32_t *card_len);
    /* connector: the acceptor proved the secret: the peer it becomes, and
     * this process's card (a faster link, if both are on one host) */
    netvm_status_t (*authenticated)(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer **lp,
                                    uint8_t *card, uint32_t *card_len);
    /* connector: WELCOME said upgrade: attach the other link (NETVM_OK: moved;
     * else stay on tcp) */
    netvm_status_t (*welcomed)(void *arg, const struct nv_tcp_hs_info *in, struct nv_lpeer *lp);
    /* acceptor: the connector's ATTACHED: moved (NETVM_OK) or not */
    void           (*attached)(void *arg, struct nv_lpeer *lp, netvm_status_t st);
    /* the handshake failed after accepted/authenticated gave lp: drop it */
    void           (*aborted)(void *arg, struct nv_lpeer *lp);
    /* the connection is ready on lp (moved: on another link), or failed
     * before there was a peer (lp NULL, st says why) */
    void           (*ready)(void *arg, void *cookie, struct nv_lpeer *lp, int moved, netvm_status_t st);
};

netvm_status_t nv_tcp_link_open(struct nv_link **link, int pfd, const struct nv_tcp_params *p,
                                const struct nv_link_upcalls *up, struct nv_tcp_card *card);
/* What the link declares (netvm info prints it). */
const struct nv_link_ops *nv_tcp_link_ops(void);
/* Connect to job rank lp->id at card (the higher rank connects to the
 * lower); cookie goes to the ready upcall. Returns at once. */
netvm_status_t nv_tcp_connect_job(struct nv_link *link, const struct nv_tcp_card *card, int rank, void *cookie);

/* A listener for processes beyond the job: addr "tcp:HOST:PORT". */
struct nv_tcp_listener;
netvm_status_t nv_tcp_listen(struct nv_link *link, const char *addr, const void *cred, size_t cred_len,
                             void *cookie, struct nv_tcp_listener **out, char *bound, size_t boundcap);
void           nv_tcp_listener_close(struct nv_link *link, struct nv_tcp_listener *l);
/* Connect to a listener at addr with its credential; cookie goes to the
 * ready upcall. Returns at once (NETVM_ERR_INVAL for a bad address). */
netvm_status_t nv_tcp_connect(struct nv_link *link, const char *addr, const void *cred, size_t cred_len,
                              void *cookie);
/* Parse "tcp:HOST:PORT". */
int            nv_tcp_parse_addr(const char *addr, uint32_t *ipv4, uint16_t *port);

#endif
