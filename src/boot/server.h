/* The launcher side of bootstrap: a boot server that a job's processes
 * connect to (src/boot/client.c), authenticate with the job secret, and use
 * for allgather and barrier.
 *
 * It never blocks and owns no loop: nv_boot_server_fd() is one pollable fd
 * (an epoll set of its own sockets and timer) that the launcher watches in
 * its own loop beside child pipes and signals, calling
 * nv_boot_server_progress() whenever it is readable.
 *
 * No collective waits for a rank that cannot come: a rank whose connection
 * closes without BYE is dead, a rank whose BYE arrived has left, and the
 * launcher reports exits it sees with nv_boot_server_rank_exited(). A
 * collective completes once every rank that is still alive has entered it;
 * if any rank of the job is dead or has left, every participant gets
 * NETVM_ERR_PEER naming it (allgather slots of such ranks are zero).
 *
 * Members: today a connection speaks for one local process (one rank). The
 * rank table is kept apart from the connections (a rank points to the
 * connection that speaks for it, and a collective's result goes once to each
 * connection), so that a remote host's launcher joining over tcp can later be
 * a connection that speaks for all the ranks of its host. */
#ifndef NV_BOOT_SERVER_H
#define NV_BOOT_SERVER_H

#include "boot/boot.h"

typedef struct nv_boot_server nv_boot_server_t;

struct nv_boot_server_opts {
    int            size;              /* ranks in the job, 1..NV_BOOT_MAX_RANKS */
    const char    *job_id;            /* as NETVM_JOB_ID */
    const uint8_t *secret;            /* NV_BOOT_SECRET_LEN bytes */
    int            hello_timeout_ms;  /* a connection must authenticate within this; 0: 10 s */
};

enum nv_boot_rank_state {
    NV_BOOT_RANK_WAITING,   /* not connected yet */
    NV_BOOT_RANK_ACTIVE,    /* authenticated, connection open */
    NV_BOOT_RANK_LEFT,      /* said BYE, or exited cleanly without ever connecting */
    NV_BOOT_RANK_DEAD,      /* connection closed without BYE, or the process failed */
};

/* Creates a fresh 0700 directory under $TMPDIR (else /tmp) with the
 * listening socket in it. Both are removed as soon as every rank has joined
 * or gone (nobody else may connect after that), else by destroy. */
netvm_status_t nv_boot_server_create(nv_boot_server_t **srv, const struct nv_boot_server_opts *opts);
/* Closes every connection and removes the socket and its directory. */
void           nv_boot_server_destroy(nv_boot_server_t *srv);

/* The address for NETVM_BOOT ("unix:PATH"). */
const char    *nv_boot_server_addr(const nv_boot_server_t *srv);
/* Readable when nv_boot_server_progress has work. */
int            nv_boot_server_fd(const nv_boot_server_t *srv);
/* Accept, read, authenticate, run collectives, write replies: whatever is
 * ready now, without blocking. Fails only on an unexpected system error. */
netvm_status_t nv_boot_server_progress(nv_boot_server_t *srv);

/* The launcher saw rank's process end (clean: exit status 0). Whatever the
 * process sent before it ended is processed first. */
void           nv_boot_server_rank_exited(nv_boot_server_t *srv, int rank, int clean);

enum nv_boot_rank_state nv_boot_server_rank_state(const nv_boot_server_t *srv, int rank);
/* The first rank that died, or -1. */
int            nv_boot_server_first_dead(const nv_boot_server_t *srv);
/* Collectives completed so far. */
unsigned       nv_boot_server_rounds(const nv_boot_server_t *srv);

#endif
