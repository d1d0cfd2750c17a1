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
 * Multi-host jobs: one server per host. Node 0's is the hub: it runs every
 * collective of the job, and besides its own processes it accepts the other
 * hosts' launchers on a tcp rendezvous address, each authenticated by
 * challenge-response (node_auth.h) and then one connection that speaks for
 * all the ranks of its host (a rank points to the connection that speaks
 * for it; a collective's result goes once to each connection). Every other
 * host's server is a relay: its processes connect to it as on a single host,
 * and it forwards their collectives and departures to the hub over the
 * connection its launcher made (rendezvous.h), fanning the results out.
 * What the launchers must act on (a node joined, failed, finished or was
 * lost; the hub aborted the job) comes out as events. */
#ifndef NV_BOOT_SERVER_H
#define NV_BOOT_SERVER_H

#include "boot/boot.h"
#include "wire/boot_msg.h"

typedef struct nv_boot_server nv_boot_server_t;

struct nv_boot_server_opts {
    int            size;              /* ranks in the job, 1..NV_BOOT_MAX_RANKS */
    const char    *job_id;            /* as NETVM_JOB_ID */
    const uint8_t *secret;            /* NV_BOOT_SECRET_LEN bytes */
    int            hello_timeout_ms;  /* a connection must authenticate within this; 0: 10 s */
    /* multi-host jobs only (nnodes 0 or 1: a single host, the rest ignored) */
    int            nnodes;            /* hosts in the job */
    int            node;              /* this host, 0..nnodes-1; 0 is the hub */
    int            nlocal;            /* processes per host: size == nnodes * nlocal */
    unsigned       flags;             /* NV_BOOT_NODE_*: what every host must agree on */
    const char    *listen;            /* hub: HOST:PORT where the other launchers join */
    int            upstream_fd;       /* relay: its authenticated connection to the hub; the
                                       * server owns it from now on */
};

enum nv_boot_event_kind {
    /* at the hub */
    NV_BOOT_EV_NODE_JOINED,   /* node authenticated and joined */
    NV_BOOT_EV_ALL_JOINED,    /* every node has joined and was sent START */
    NV_BOOT_EV_NODE_FAILED,   /* node reports: rank (or -1) failed with code; text says how */
    NV_BOOT_EV_NODE_DONE,     /* node's ranks have all ended; code is its exit status */
    NV_BOOT_EV_NODE_LOST,     /* node's connection ended before NODE_DONE: its ranks are
                               * dead; text says why */
    /* at a relay */
    NV_BOOT_EV_ABORT,         /* the hub ended the job: rank (or -1) on node, code, text */
    NV_BOOT_EV_HUB_LOST,      /* the connection to the hub ended; text says why */
};

struct nv_boot_event {
    enum nv_boot_event_kind kind;
    int  node;
    int  rank;
    int  code;
    char text[NV_BOOT_TEXT_MAX + 1];
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

/* The next event, oldest first: 1 if there was one (copied to *ev), else 0.
 * The launcher asks after every nv_boot_server_progress. */
int            nv_boot_server_next_event(nv_boot_server_t *srv, struct nv_boot_event *ev);

/* Hub: ABORT to every node that joined (rank may be -1; text: what
 * happened, printable ASCII, cut at NV_BOOT_TEXT_MAX). */
void           nv_boot_server_abort(nv_boot_server_t *srv, int rank, int node, int code, const char *text);
/* Relay: tell the hub a local rank failed (rank -1: this launcher gave up
 * for another reason, e.g. a signal), so it can end the job everywhere. */
void           nv_boot_server_report_failure(nv_boot_server_t *srv, int rank, int code, const char *text);
/* Relay: every local rank has ended; code is this host's exit status. */
void           nv_boot_server_node_done(nv_boot_server_t *srv, int code);
/* Block until what is queued for the hub or the nodes has been sent (or
 * the connection is gone), at most timeout_ms: a launcher's last words
 * must not die with it. */
void           nv_boot_server_flush(nv_boot_server_t *srv, int timeout_ms);

enum nv_boot_node_state {
    NV_BOOT_NODE_WAITING,     /* has not joined */
    NV_BOOT_NODE_JOINED,
    NV_BOOT_NODE_DONE,        /* said NODE_DONE */
    NV_BOOT_NODE_LOST,        /* connection ended before NODE_DONE */
};
/* Hub: what became of node (node 0 is the hub itself: JOINED). */
enum nv_boot_node_state nv_boot_server_node_state(const nv_boot_server_t *srv, int node);
/* Hub: the address of this host as the nodes reach it (NETVM_TCP_ADDR):
 * the listening address if it names one, else the local address of the
 * first node connection; "" before any node joined. */
const char    *nv_boot_server_tcp_addr(const nv_boot_server_t *srv);

enum nv_boot_rank_state nv_boot_server_rank_state(const nv_boot_server_t *srv, int rank);
/* The first rank that died, or -1. */
int            nv_boot_server_first_dead(const nv_boot_server_t *srv);
/* Collectives completed so far. */
unsigned       nv_boot_server_rounds(const nv_boot_server_t *srv);

#endif
