/* A node launcher meets the hub (node 0's launcher) at the rendezvous of a
 * multi-host job: connect (retrying while node 0 is not up yet), prove it
 * holds the job secret and check that the hub does too (node_auth.h), learn
 * the job id, then wait until every node has joined. Blocking, with
 * deadlines; it runs before the launcher starts anything. The connection it
 * leaves behind becomes the local boot server's link to the hub. */
#ifndef NV_BOOT_RENDEZVOUS_H
#define NV_BOOT_RENDEZVOUS_H

#include "boot/boot.h"
#include "boot/tcp.h"
#include "wire/boot_msg.h"

#include <stddef.h>
#include <stdint.h>

struct nv_rendezvous_opts {
    const char    *addr;        /* the hub's HOST:PORT */
    int            node;        /* 1..nnodes-1 */
    int            nnodes;
    int            nlocal;      /* processes on every host */
    unsigned       flags;       /* NV_BOOT_NODE_* */
    const uint8_t *secret;      /* NV_BOOT_SECRET_LEN bytes */
    int            timeout_ms;  /* how long to keep trying to reach the hub */
};

struct nv_rendezvous {
    int  fd;                                /* authenticated connection to the hub; -1 after failure */
    char job_id[NV_BOOT_JOB_ID_MAX + 1];
    char local_ip[NV_TCP_ADDR_MAX];         /* this host as the hub sees it (NETVM_TCP_ADDR) */
};

/* Reach the hub and be welcomed: 0, or -1 with a message in err (the hub
 * refused, the proofs failed, nobody answered in time). */
int nv_rendezvous_join(const struct nv_rendezvous_opts *o, struct nv_rendezvous *r, char *err, size_t errcap);

/* Wait up to timeout_ms for START (every node has joined): 0, or -1 with a
 * message in err and *code the exit status the hub asked for (1 if none)
 * when it aborted the job, the connection ended, or time ran out. Closes
 * r->fd on failure. */
int nv_rendezvous_wait_start(struct nv_rendezvous *r, int timeout_ms, int *code, char *err, size_t errcap);

#endif
