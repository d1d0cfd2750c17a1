/* The memory server (`netvm memd`, docs/memd.md) as library code: a pool
 * of NV_GM_PAGE slots served through the RPC procedures of proto.h. The
 * tool (tools/memd.c) and in-process tests drive it: they own the
 * context's event queue and hand it the peers that left. */
#ifndef NV_GMEM_SERVER_H
#define NV_GMEM_SERVER_H

#include "gmem/proto.h"

#include <stddef.h>

struct nv_gm_server;

struct nv_gm_server_opts {
    const char *listen;          /* "tcp:HOST:PORT" */
    size_t      size;            /* pool bytes, rounded down to pages */
    size_t      client_max;      /* bytes one client may hold (0: the whole pool) */
    const void *credential;      /* 16-64 bytes */
    size_t      credential_len;
    int         max_peers;       /* 0: NETVM_LISTEN_MAX_PEERS */
    int         no_direct;       /* 1: no direct reads of the pool (direct.h) */
};

/* Map the pool, register the procedures and listen. ctx must be at
 * NETVM_THREAD_MULTIPLE (moves run on a worker thread of the server).
 * The server lives until netvm_finalize. */
netvm_status_t nv_gm_server_start(netvm_ctx_t *ctx, const struct nv_gm_server_opts *o,
                                  struct nv_gm_server **srv);
const char    *nv_gm_server_addr(const struct nv_gm_server *srv);
/* A peer left (NETVM_EV_PEER_DOWN): a client's pages and forwarding
 * entries go with it. Not in a handler (it may take a while). */
void           nv_gm_server_peer_down(struct nv_gm_server *srv, int peer);
void           nv_gm_server_stat(struct nv_gm_server *srv, struct nv_gm_stat *st);

/* Shutting down: tell every client (NV_GM_NOTICE DRAIN, deadline_ms from
 * now) and refuse new pages from then on. */
void           nv_gm_server_drain_begin(struct nv_gm_server *srv, int deadline_ms);
/* 1 once every client told answered or holds no page here. */
int            nv_gm_server_drain_done(struct nv_gm_server *srv);
/* Clients told that neither answered nor hold no pages any more. */
int            nv_gm_server_drain_pending(struct nv_gm_server *srv);
/* Stop listening and serving (the procedures answer NETVM_ERR_STATE). */
void           nv_gm_server_stop(struct nv_gm_server *srv);

#endif
