/* The network-memory protocol between clients (src/gmem/store_remote*)
 * and memory servers (src/gmem/server*, `netvm memd`): RPC procedures in
 * the services' op range (svc/rpc/rpc_svc.h, k = NV_RPC_SVC_GMEM + NV_GM_*),
 * so a client's own RPC ops never meet them.
 *
 * A page is named by (client id, region id, page index): the client id is
 * a random 64-bit number the client draws once per context and binds to
 * its connection with HELLO; region ids are the client's. A server keeps
 * each page it holds in one NV_GMEM_PAGE slot of its pool and answers a
 * GET with the slot itself as the reply's payload (no copy in netvm); the
 * reply lands in the buffer the client's payload token names.
 *
 * Every argument is a uint64_t of the RPC call (call->args[i]); replies
 * carry a status (netvm_status_t) and the arguments listed. A server
 * checks that a client's page calls name the client id bound to that
 * connection (NETVM_ERR_KEY otherwise); a peer that said HELLO as a server
 * may name any client id (moves and delegated GETs).
 *
 * Shared regions (docs/gmem.md, "Shared regions"): a named region's pages
 * are keyed (shared id, 0, page), where the shared id is a hash of the
 * name with bit 63 set (NV_GM_SHARED_BIT); client ids never have that bit
 * (HELLO refuses them), so no client can pass for a named region. A page
 * call naming a shared id is served to a peer that opened that name here
 * (SHARED_OPEN): GET and GETN to its readers and writer, PUT and FREE to
 * its writer only (NETVM_ERR_RIGHTS otherwise, NETVM_ERR_KEY when it did
 * not open it). Its pages are counted against the region's own length,
 * not against any client's bound, and stay when its sharers leave or die,
 * until a SHARED_REMOVE. */
#ifndef NV_GMEM_PROTO_H
#define NV_GMEM_PROTO_H

#include "svc/rpc/rpc_svc.h"
#include <netvm/gmem.h>

/* 2: shared regions (SHARED_* ops, NOTICE INVALIDATE, client ids without
 * NV_GM_SHARED_BIT, nv_gm_stat's shared fields). 3: PUTV. */
#define NV_GM_VERSION 3
#define NV_GM_PAGE    NETVM_GMEM_PAGE
/* Pages one PUT may carry (a longer one is NETVM_ERR_INVAL). */
#define NV_GM_PUT_MAX 1024u
/* Pages one GETN may ask for: the reply's held-pages bitmap is one u64,
 * and 256 KiB is what the server copies into one reply buffer. */
#define NV_GM_GETN_MAX 64u
/* The bit that makes an id a named region's (never a client's). */
#define NV_GM_SHARED_BIT (1ull << 63)
/* A shared region's name: 1 .. NV_GM_NAME_MAX printable ASCII bytes. */
#define NV_GM_NAME_MAX 255u
/* (Bytes from the wire that a server writes in its log, a name or MOVE's
 * address, must be printable: util/log.h nv_log_printable.) */
/* Clients one server lets map a name at once (the writer included). */
#define NV_GM_SHARED_PEERS 64u

enum {
    /* args [version, role (NV_GM_ROLE_*), client id (a server: its own server id)]
     * (a fourth arg, flags: NV_GM_HELLO_VIEW asks for the pool's view)
     * reply args [server id, pool pages, pages one client may hold, pages free]
     * reply payload, to a client on this machine that asked, when the server
     * offers direct reads (direct.h): the netvm_seg_handle_t of its pool's
     * view; none otherwise (a caller without NV_GM_HELLO_VIEW needs no
     * reply buffer).
     * NETVM_ERR_UNSUPPORTED: another version. */
    NV_GM_HELLO = 0,
    /* args [client id, region, page, npages]; payload npages * NV_GM_PAGE bytes,
     * pages page .. page+npages-1 in order. Stores (or overwrites) them.
     * reply args [pages free]
     * NETVM_ERR_NOMEM: the pool or this client's bound is full: nothing of
     * this call was kept (pages it overwrote keep their old contents). */
    NV_GM_PUT = 1,
    /* args [client id, region, page]; reply payload: the page (NV_GM_PAGE).
     * A page this server moved away (NV_GM_MOVE) is delegated to the server
     * that took it, which answers the client directly (res.peer says who).
     * NETVM_ERR_NOTFOUND: not held and not moved. */
    NV_GM_GET = 2,
    /* args [client id, region, first page, npages (UINT64_MAX: the whole region)]
     * Drops them (and forwarding entries). reply args [pages dropped] */
    NV_GM_FREE = 3,
    /* args [client id, region, first page, npages]; payload: the destination
     * server's address ("tcp:HOST:PORT", no NUL needed). The server puts the
     * pages it holds of that range at the destination (connecting to it as a
     * server with its own credential), then drops its copies and remembers
     * where each went, so that a GET for one is delegated there.
     * reply args [pages moved] */
    NV_GM_MOVE = 4,
    /* no args; reply payload: struct nv_gm_stat (little-endian u64s) */
    NV_GM_STAT = 5,
    /* server -> client (a procedure the client registers): args [kind (NV_GM_NOTICE_*),
     * server id, deadline ms]. DRAIN: the server shuts down at the deadline;
     * the client moves its pages elsewhere (fetching from it meanwhile works)
     * and answers when done. INVALIDATE: args [kind, server id, 0, shared id],
     * payload the SHARED_SYNC's bitmap: the client drops its resident copies
     * of those pages of that region, then answers. */
    NV_GM_NOTICE = 6,
    /* args [client id, region, first page, npages (1 .. NV_GM_GETN_MAX)]
     * reply payload npages * NV_GM_PAGE bytes, page first+i at i * NV_GM_PAGE;
     * reply args [held: bit i set when page first+i was held here and is
     * in the payload]. A page not held (never stored here, moved away,
     * freed) reads as zeros in the payload and its bit is clear: the client
     * must not use it and fetches it with GET (which follows a move). One
     * round trip for a read-ahead run instead of one per page. */
    NV_GM_GETN = 7,
    /* args [shared id, npages, mode (NV_GM_SHARED_READ / _WRITE / _CACHE), placement hash, replicas];
     * payload: the name. Opens the named region for the calling client on
     * this server, making its record if none exists. The record keeps the
     * name, npages, the hash of the server set the opener places pages on
     * and R: a sharer naming other values gets NETVM_ERR_STATE (another
     * name with the same id: NETVM_ERR_EXISTS). A second writer gets
     * NETVM_ERR_BUSY. A client's opens end with SHARED_CLOSE or its death.
     * reply args [pages of the region held here] */
    NV_GM_SHARED_OPEN = 8,
    /* args [shared id]: the calling client no longer maps it (a writer
     * releases the name). reply args [] */
    NV_GM_SHARED_CLOSE = 9,
    /* args [shared id, npages]; payload: a bitmap of npages bits (u64
     * words, little-endian), the pages the writer changed since its last
     * SYNC. Only the region's writer. The server sends NOTICE INVALIDATE
     * with the bitmap to every other client that has the name open here
     * and answers once each one answered, left or died: after the reply no
     * reader holds an old copy of a page of the bitmap. A reader that
     * neither answers nor dies within the call's timeout makes it fail with
     * NETVM_ERR_TIMEOUT. reply args [readers told] */
    NV_GM_SHARED_SYNC = 10,
    /* args [shared id]. Frees the region's pages and its record here.
     * Any authenticated client may remove a name nobody has open here;
     * NETVM_ERR_BUSY while someone has; NETVM_ERR_NOTFOUND: no such name.
     * reply args [pages freed] */
    NV_GM_SHARED_REMOVE = 11,
    /* args [client id, region, npages (1 .. NV_GM_PUT_MAX)]; payload:
     * npages page numbers (u64, the host's order, each larger than the one
     * before), then npages * NV_GM_PAGE bytes, page i's at i * NV_GM_PAGE.
     * PUT of pages that need not be adjacent: an evictor's batch of
     * scattered victims in one call instead of one call a page. Replies,
     * and what a refusal keeps, as PUT. */
    NV_GM_PUTV = 12,
    NV_GM_NOPS
};

#define NV_GM_HELLO_VIEW 1u
enum { NV_GM_ROLE_CLIENT = 0, NV_GM_ROLE_SERVER = 1, NV_GM_ROLE_OBSERVER = 2 /* netvm stat: STAT only */ };
enum { NV_GM_NOTICE_DRAIN = 1, NV_GM_NOTICE_INVALIDATE = 2 };
/* CACHE: a file cache's region (gfile.h): its pages never change once
 * stored (its name is the file's content), so every opener may PUT them,
 * none writes otherwise, nothing is invalidated, and one client may open
 * it more than once (one CLOSE each). A name is a cache or not for good. */
enum { NV_GM_SHARED_READ = NETVM_GMEM_SHARED_READ, NV_GM_SHARED_WRITE = NETVM_GMEM_SHARED_WRITE,
       NV_GM_SHARED_CACHE = 3 };

/* What NV_GM_STAT answers (and `netvm stat ADDRESS` prints). */
struct nv_gm_stat {
    uint64_t version;          /* NV_GM_VERSION */
    uint64_t server_id;
    uint64_t pool_pages;       /* pool size in pages */
    uint64_t used_pages;       /* slots holding a page */
    uint64_t client_max_pages; /* bound per client */
    uint64_t clients;          /* clients connected now */
    uint64_t servers;          /* servers connected now (moves) */
    uint64_t forwards;         /* pages moved away and still forwarded */
    uint64_t puts, gets, frees, moves_out, moves_in, delegated, refused;  /* calls since start */
    uint64_t bytes_in, bytes_out;
    uint64_t uptime_ms;
    uint64_t draining;         /* 1 after SIGTERM */
    uint64_t shared_regions;   /* named regions with a record here (version 2) */
    uint64_t shared_pages;     /* of used_pages: those of named regions */
};

static inline unsigned nv_gm_k(unsigned op) { return NV_RPC_SVC_GMEM + op; }

#endif
