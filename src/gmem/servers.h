/* The memory servers a context's network-memory regions use (the client
 * side of proto.h): one set per context (nv_svc_state slot
 * NV_SVC_STATE_GMEM), made on the first region. It holds the client id,
 * the credential, the server table, placement (rendezvous hashing), the
 * embedded servers it started, the regions open on it, and a monitor
 * thread that watches the servers and restores replication
 * (docs/gmem-servers.md). */
#ifndef NV_GMEM_SERVERS_H
#define NV_GMEM_SERVERS_H

#include "gmem/direct.h"
#include "gmem/proto.h"
#include "gmem/server_cred.h"   /* the credential rules and reader memd uses too */

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

/* Server indexes fit a directory byte; 0xFF is "none". Indexes are never
 * reused within a context, so a directory byte can never name the wrong
 * server. */
#define NV_GM_MAX_SERVERS 128
#define NV_GM_NO_SERVER   0xFF
#define NV_GM_MAX_EMBEDDED 16
#define NV_GM_ADDR_MAX    64
/* Pages of one placement unit: sequential write-backs of an extent go to
 * the same servers in one PUT each. */
#define NV_GM_EXTENT      8
/* A suspect server silent for this many NETVM_GMEM_TIMEOUTs is taken as
 * dead: a hung machine must not keep its pages below R forever. */
#define NV_GM_TIMEOUTS_TO_DEAD 4

enum nv_gm_srv_state {
    NV_GM_SRV_ALIVE = 0,
    NV_GM_SRV_SUSPECT,     /* a request timed out: read from it last, place nothing new on it */
    NV_GM_SRV_DRAINING,    /* it is shutting down (NOTICE DRAIN) or being removed: read only */
    NV_GM_SRV_DEAD,        /* gone: its copies are lost, the monitor restores R */
    NV_GM_SRV_REMOVED,     /* left (server_remove, drain done): holds nothing of ours */
};

struct nv_gm_servers;
struct nv_gm_srv {
    struct nv_gm_servers *owner;
    char             addr[NV_GM_ADDR_MAX];
    int              peer;
    uint64_t         id;            /* from HELLO */
    uint64_t         pool_pages, client_max_pages;
    _Atomic int      state;
    _Atomic uint64_t pages_held;    /* page copies the directories place here */
    _Atomic int      ping_busy;     /* a monitor ping is under way */
    _Atomic uint64_t ping_ns;       /* when the ping under way was sent */
    _Atomic uint64_t last_ok_ns;    /* when it last answered anything */
    _Atomic uint64_t drain_token_set;
    netvm_am_token_t drain_token;   /* the DRAIN notice to answer when its pages are off */
    struct nv_gm_stat ping_buf;
    /* its pool's view, when this client reads it directly (direct.h);
     * readers count themselves in view_users while they use it */
    _Atomic(struct nv_gm_view *) view;
    _Atomic int      view_users;
};

struct nv_gstore_remote;

struct nv_gm_servers {
    netvm_ctx_t        *ctx;
    uint64_t            client_id;
    uint8_t             cred[NV_GM_CRED_MAX];
    size_t              cred_len;
    int                 timeout_ms;
    uint64_t            next_region;          /* __atomic */
    _Atomic int         nservers;             /* entries in use (published after being filled) */
    int                 direct;               /* NETVM_GMEM_DIRECT: read servers' views where offered */
    struct nv_gm_srv srv[NV_GM_MAX_SERVERS];
    pthread_mutex_t     admin;                /* adding and removing servers, draining */

    pid_t               embedded[NV_GM_MAX_EMBEDDED];
    int                 nembedded;

    pthread_mutex_t     lock;                 /* regions, monitor wake-ups */
    pthread_cond_t      cond;
    struct nv_gstore_remote *regions;
    struct nv_gstore_remote *shared;          /* shared regions open (store_shared.c), lock */
    struct nv_gm_inval_wait *inval_waits;     /* INVALIDATE notices kept until their pages are out, lock */
    int                 monitor_started, stopping, kick;
    pthread_t           monitor;
};

/* The context's set, connected to the servers opts / NETVM_GMEM_SERVERS
 * name (or to embedded ones); NULL with *st set on failure. A set that
 * failed is not kept: the next region tries again. */
struct nv_gm_servers *nv_gm_servers_get(netvm_ctx_t *ctx, const netvm_gmem_opts_t *opts, netvm_status_t *st);
/* The set if one exists (never creates one). */
struct nv_gm_servers *nv_gm_servers_if(netvm_ctx_t *ctx);

/* Connect to addr, HELLO as this client; *idx the new table entry. */
netvm_status_t nv_gm_srv_connect(struct nv_gm_servers *g, const char *addr, int *idx);
int  nv_gm_srv_by_peer(struct nv_gm_servers *g, int peer);
int  nv_gm_srv_by_addr(struct nv_gm_servers *g, const char *addr);
/* Failure reports from any request: TIMEOUT makes it suspect, PEER dead
 * (the monitor is woken to restore R); an answer makes a suspect alive. */
void nv_gm_srv_report(struct nv_gm_servers *g, int idx, netvm_status_t st);
/* A GET's status as it tells of the server asked (answered_peer: who
 * answered, -1 if nobody did): NETVM_ERR_PEER that came as an answer is the
 * death of the server the page moved to, which the server asked reports
 * (a delegate's death): that one answered, it is not gone. */
static inline netvm_status_t nv_gm_get_status(netvm_status_t st, int answered_peer)
{
    return st == NETVM_ERR_PEER && answered_peer >= 0 ? NETVM_ERR_AGAIN : st;
}
int  nv_gm_srv_readable(const struct nv_gm_servers *g, int idx);
/* Read the pages first + i (i < n <= 64, bit i of want set) of (owner,
 * region) from server idx's view into buf (page i at i * NV_GM_PAGE):
 * the bits of those that buf now holds; 0 for all when the view is absent
 * or the server is gone. The rest: ask the server. */
uint64_t nv_gm_srv_view_read(struct nv_gm_servers *g, int idx, uint64_t owner, uint64_t region, uint64_t first,
                             uint64_t n, void *buf, uint64_t want);
/* Stop reading server idx's view and drop it (a server dead or removed:
 * its pool's memory is not kept alive by our mapping). */
void nv_gm_srv_view_drop(struct nv_gm_servers *g, int idx);
/* Servers new copies may go to (alive only). */
int  nv_gm_srv_placeable(const struct nv_gm_servers *g, int idx);
int  nv_gm_servers_placeable_count(struct nv_gm_servers *g);

/* Placement of (region, extent): placeable servers by rendezvous weight,
 * highest first; returns how many were written to order (at most max). */
int  nv_gm_place(struct nv_gm_servers *g, uint64_t region, uint64_t extent, uint8_t *order, int max);

/* Regions: the monitor repairs and drains those registered. */
void nv_gm_region_add(struct nv_gm_servers *g, struct nv_gstore_remote *r);
void nv_gm_region_remove(struct nv_gm_servers *g, struct nv_gstore_remote *r);
void nv_gm_monitor_kick(struct nv_gm_servers *g);
netvm_status_t nv_gm_monitor_start(struct nv_gm_servers *g);
void nv_gm_monitor_stop(struct nv_gm_servers *g);

/* A NOTICE INVALIDATE for shared region id: its pages in bitmap (len
 * bytes) leave the region of this context mapping it, before this returns
 * (store_shared.c). NETVM_ERR_NOTFOUND: not mapped here. */
/* A NOTICE INVALIDATE for shared region id: its pages in bitmap leave
 * the region. The answer waits for the pages whose fetch was in flight
 * (it may carry the old contents): the notice is answered at once when
 * none is (1 returned, *st the answer), else kept and answered by the
 * monitor once they are placed and dropped (0 returned). */
int  nv_gm_shared_invalidate(struct nv_gm_servers *g, const netvm_am_token_t *token, uint64_t id,
                             const void *bitmap, size_t len, netvm_status_t *st);
/* The monitor: answer the kept notices whose pages are all out; 1 if some
 * still wait. all: answer every one (the monitor stops). */
int  nv_gm_shared_answer_waits(struct nv_gm_servers *g, int all);

/* Embedded servers (servers_embedded.c): start n `netvm memd` on loopback
 * with g's credential, connect to each. */
netvm_status_t nv_gm_embedded_start(struct nv_gm_servers *g, int n);
/* Start one `netvm memd` (bin) on loopback with a pool of size bytes
 * (a size string), handing it cred over a pipe; its address (NV_GM_ADDR_MAX)
 * and pid are returned. It exits when its parent dies. `netvm gmem run`
 * starts its servers this way too. */
netvm_status_t nv_gm_memd_spawn(const char *bin, const char *size, const void *cred, size_t cred_len, char *addr,
                                pid_t *pid);
void nv_gm_embedded_stop(struct nv_gm_servers *g);

/* Moving a server's pages elsewhere (drain, remove): every copy on idx
 * moves to the next server of its placement; 0 when none is left there. */
netvm_status_t nv_gm_evacuate(struct nv_gm_servers *g, int idx);
/* The batched part of it: runs of pages MOVEd by the server itself;
 * returns the pages moved. */
uint64_t nv_gm_move_off(struct nv_gm_servers *g, int idx);

#endif
