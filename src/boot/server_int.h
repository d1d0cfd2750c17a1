/* The boot server's insides, shared by its two files: server.c (processes,
 * the rank table, collectives) and server_node.c (the launchers of a
 * multi-host job: the hub's tcp rendezvous and node connections, a relay's
 * connection to the hub). Nothing outside src/boot/server*.c includes this. */
#ifndef NV_BOOT_SERVER_INT_H
#define NV_BOOT_SERVER_INT_H

#include "boot/server.h"
#include "boot/tcp.h"
#include "wire/boot_msg.h"

#include <sys/types.h>

/* A reply is encoded once and shared by every connection it goes to: an
 * allgather result can be 16 MiB and go to a thousand ranks. */
struct obuf {
    unsigned refs;
    size_t   len;
    uint8_t  data[];
};

struct outq {
    struct obuf *buf;
    size_t       off;
    struct outq *next;
};

enum conn_kind {
    CONN_PENDING,       /* a local process, not authenticated: may send only HELLO */
    CONN_PROCESS,       /* speaks for one local rank */
    CONN_NODE_PENDING,  /* hub: a tcp peer that was sent a CHALLENGE; may send only NODE_HELLO */
    CONN_NODE,          /* hub: a node launcher speaking for all the ranks of its host */
    CONN_UPSTREAM,      /* relay: the connection to the hub */
};

struct conn {
    int            fd;
    enum conn_kind kind;
    int            rank;          /* CONN_PROCESS */
    int            node;          /* CONN_NODE */
    pid_t          pid;           /* local processes, from SO_PEERCRED, for log messages */
    char           peer[NV_TCP_ADDR_MAX];   /* tcp peers, for log messages */
    uint8_t        nonce[NV_BOOT_NONCE_LEN]; /* CONN_NODE_PENDING: the challenge it was sent */
    uint64_t       deadline_ns;   /* pending kinds: authenticate by then */
    uint32_t       replied_seq;   /* last round whose result was queued here */
    /* the frame being received */
    uint8_t        hdr[NV_BOOT_HDR_LEN];
    size_t         hdr_have;
    struct nv_boot_hdr h;
    uint8_t       *payload;
    size_t         payload_have;
    /* queued output */
    struct outq   *out_head, *out_tail;
    uint32_t       events;        /* what epoll watches for it */
    int            closing;       /* close once the output drains */
    int            gone;          /* closed; freed at the end of progress */
    struct conn   *next;
};

struct rank_slot {
    enum nv_boot_rank_state st;
    struct conn *conn;            /* while ACTIVE: its process's, or its node's */
    uint16_t     entered;         /* the request type it entered the current round with, or 0 */
};

struct round {
    uint32_t       seq;           /* rounds completed + 1 */
    uint16_t       type;          /* ALLGATHER or BARRIER; 0 while nobody has entered */
    uint32_t       each;          /* allgather bytes per rank */
    uint8_t       *data;          /* size * each */
    int            entered;
    netvm_status_t fail;          /* ranks disagreed about the collective */
};

struct event_node {
    struct nv_boot_event ev;
    struct event_node   *next;
};

struct nv_boot_server {
    int               size;
    char              job_id[NV_BOOT_JOB_ID_MAX + 1];
    uint8_t           secret[NV_BOOT_SECRET_LEN];
    int               hello_timeout_ms;
    char              dir[80];
    char              path[96];
    char              addr[104];
    int               ep, lfd, tfd;
    int               accept_paused;  /* out of fds: resume when a connection closes */
    int               completing;     /* inside round_complete: no re-entry */
    int               destroying;
    struct conn      *conns;
    int               npending;
    struct rank_slot *ranks;
    int               first_local;    /* the ranks whose processes connect here */
    int               nlocal;
    int               nwaiting;       /* local ranks that may still connect */
    int               first_dead;
    int               first_gone;     /* first rank dead or left: what PEER names */
    struct round      round;
    /* multi-host */
    int               nnodes;         /* 0: a single host */
    int               node;
    unsigned          flags;
    int               tcp_lfd;        /* hub: the rendezvous listener, until every node joined */
    int               tcp_paused;     /* out of fds: resume when a connection closes */
    int               aborted;        /* hub: the launcher ended the job; nobody joins any more */
    char              abort_text[NV_BOOT_TEXT_MAX + 1];
    int               npending_nodes;
    enum nv_boot_node_state *node_st; /* hub: per node */
    int               nodes_joined;
    char              tcp_addr[NV_TCP_ADDR_MAX];  /* hub: NETVM_TCP_ADDR */
    int               relay;          /* a node other than 0: collectives go to the hub */
    struct conn      *upstream;       /* relay: the connection to the hub, NULL once lost */
    struct event_node *ev_head, *ev_tail;
};

/* epoll tags for the fds that are not connections */
#define TAG_LISTEN     ((void *)1)
#define TAG_TIMER      ((void *)2)
#define TAG_TCP_LISTEN ((void *)3)

/* server.c */
struct obuf *nv_srv_obuf_encode(const struct nv_boot_msg *m);
void         nv_srv_obuf_put(struct obuf *b);
void         nv_srv_send(nv_boot_server_t *s, struct conn *c, struct obuf *b);
void         nv_srv_send_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m);
void         nv_srv_update_events(nv_boot_server_t *s, struct conn *c);
void         nv_srv_conn_close(nv_boot_server_t *s, struct conn *c, const char *why);
struct conn *nv_srv_conn_new(nv_boot_server_t *s, int fd, enum conn_kind kind);
void         nv_srv_rank_gone(nv_boot_server_t *s, int rank, enum nv_boot_rank_state st);
void         nv_srv_round_enter(nv_boot_server_t *s, struct conn *c, int rank, uint16_t type,
                                uint32_t seq, const uint8_t *data, uint32_t len);
void         nv_srv_event(nv_boot_server_t *s, enum nv_boot_event_kind kind, int node, int rank,
                          int code, const char *text);
int          nv_srv_is_local(const nv_boot_server_t *s, int rank);

/* server_node.c */
netvm_status_t nv_srv_node_setup(nv_boot_server_t *s, const struct nv_boot_server_opts *o);
void           nv_srv_node_teardown(nv_boot_server_t *s);
void           nv_srv_accept_nodes(nv_boot_server_t *s);
/* A connection closed: listening for launchers may resume. */
void           nv_srv_resume_nodes(nv_boot_server_t *s);
/* A message on a launcher connection (CONN_NODE_PENDING, CONN_NODE, CONN_UPSTREAM). */
void           nv_srv_node_msg(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m);
/* A launcher connection closed (before it is freed). */
void           nv_srv_node_closed(nv_boot_server_t *s, struct conn *c, const char *why);
/* Relay: a local rank entered a collective / is gone. */
void           nv_srv_relay_enter(nv_boot_server_t *s, struct conn *c, const struct nv_boot_msg *m);
void           nv_srv_relay_gone(nv_boot_server_t *s, int rank, enum nv_boot_rank_state st);

#endif
