/* The memory server's state and what its files share (server.h is what
 * the tool sees).
 *
 * The pool is one mapping of npages NV_GM_PAGE slots. A slot holding a
 * page has a meta entry: the page's key (client, region, page), its hash
 * chain link and its links in its client's list. Buckets of the page
 * table belong to shards by their low bits, and one mutex per shard guards
 * the buckets, chains and meta entries of its pages and the forwarding
 * entries that hash there: a GET takes one shard lock and does one chain
 * walk. A client's list (for freeing everything of a dead client or a
 * region) has its own lock, always taken after a shard's. */
#ifndef NV_GMEM_SERVER_INT_H
#define NV_GMEM_SERVER_INT_H

#include "gmem/direct.h"
#include "gmem/server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define NV_GM_NIL      UINT32_MAX
#define NV_GM_SHARDS   64u
#define NV_GM_FWD_BUCKETS 4096u   /* a multiple of NV_GM_SHARDS: a bucket's shard is its low bits */
#define NV_GM_BINDS    8192u      /* peer bindings (a power of two, well above the peers a listener takes) */
#define NV_GM_BATCH    64u        /* pages one PUT of a move carries */

struct nv_gm_key {
    uint64_t client, region, page;
};

/* key and next lead, as struct nv_gm_view_entry says (direct reads). */
struct nv_gm_meta {
    struct nv_gm_key key;
    uint32_t next;            /* hash chain */
    uint32_t cprev, cnext;    /* the client's list */
    uint32_t gen;             /* bumped on every write: a move sees whether the page changed */
    struct nv_gm_client *client;
};

struct nv_gm_fwd {
    struct nv_gm_key  key;
    int               peer;   /* the server that took the page */
    struct nv_gm_fwd *next;
};

struct nv_gm_shard {
    pthread_mutex_t lock;
} __attribute__((aligned(64)));

/* A client id's pages here; made by its HELLO or by a server moving its
 * pages in. */
struct nv_gm_client {
    uint64_t             id;
    int                  peer;          /* bound connection, -1 if none */
    _Atomic uint64_t     pages;
    pthread_mutex_t      lock;          /* the list */
    uint32_t             head;
    struct nv_gm_meta   *meta;          /* the server's meta array, which the list threads through */
    int                  drain_told;    /* NOTICE sent */
    _Atomic int          drain_answered;
    struct nv_gm_client *next;          /* in the server's list (srv->clients_lock) */
};

enum { NV_GM_BIND_FREE = -1, NV_GM_BIND_GONE = -2 };

/* What a peer said in its HELLO. Readers take it without a lock: peer is
 * published last (release) and read first (acquire), then read again. */
struct nv_gm_bind {
    _Atomic int          peer;
    int                  role;
    uint64_t             id;
    struct nv_gm_client *client;    /* role client */
};

struct nv_gm_move;

/* A named region's record (server_shared.c, proto.h SHARED_*): what its
 * sharers must agree on, who has it open here, and the record of its
 * pages (a client record no connection is bound to, so that no peer's
 * death frees them). */
struct nv_gm_shared {
    uint64_t             id, npages, place_hash, replicas;
    char                 name[NV_GM_NAME_MAX + 1];
    int                  writer;                       /* peer, -1: none */
    int                  cache;                        /* a file cache (NV_GM_SHARED_CACHE) */
    int                  peers[NV_GM_SHARED_PEERS];    /* every peer that has it open, the writer too */
    int                  npeers;
    struct nv_gm_client *pages;
    struct nv_gm_shared *next;
};

struct nv_gm_server {
    netvm_ctx_t        *ctx;
    netvm_listener_t   *lis;
    uint64_t            server_id;
    uint8_t            *pool;
    size_t              pool_bytes;
    /* direct reads (direct.h): pool, buckets, meta and the shards'
     * sequence words live in view_seg, read-only to the clients given its
     * handle; NULL when off (then seq is private memory) */
    int                 direct;       /* asked for (nv_gm_server_opts.no_direct unset) */
    netvm_seg_t        *view_seg;
    uint8_t            *seq;          /* NV_GM_SHARDS words, NV_GM_VIEW_SEQ_STRIDE apart */
    uint32_t            npages;
    uint64_t            client_max;    /* pages */
    uint64_t            start_ns;
    const void         *cred;          /* for moves: the destination has the same credential */
    size_t              cred_len;
    uint8_t             cred_buf[64];

    struct nv_gm_meta  *meta;          /* npages entries */
    uint32_t           *buckets;       /* nbuckets heads */
    uint32_t            nbuckets;      /* a power of two >= NV_GM_SHARDS */
    struct nv_gm_shard  shards[NV_GM_SHARDS];
    struct nv_gm_fwd   *fwd[NV_GM_FWD_BUCKETS];

    pthread_mutex_t     free_lock;
    uint32_t           *free_stack;    /* free slots */
    uint32_t            nfree;

    pthread_mutex_t     clients_lock;
    struct nv_gm_client *clients;

    struct nv_gm_bind   binds[NV_GM_BINDS];
    pthread_mutex_t     binds_lock;    /* writers */

    /* moves: a worker thread, started on the first MOVE */
    pthread_mutex_t     move_lock;
    pthread_cond_t      move_cond;
    pthread_t           move_thread;
    int                 move_up, move_stop;
    struct nv_gm_move  *move_head, *move_tail;
    struct { char addr[64]; int peer; } dests[16];   /* destinations connected (move_lock) */
    int                 ndests;

    pthread_mutex_t     shared_lock;   /* the named regions' records */
    struct nv_gm_shared *shared;

    /* GETN's reply buffer (NV_GM_GETN_MAX pages), kept: one malloc'd per
     * call came back from the kernel as fresh pages to fault and zero each
     * time. Taken with trylock; a call that finds it busy mallocs. */
    pthread_mutex_t     getn_lock;
    uint8_t            *getn_buf;

    _Atomic int         stopped, draining;
    uint64_t            drain_deadline_ns;

    _Atomic uint64_t    used, clients_now, servers_now, forwards;
    _Atomic uint64_t    puts, gets, frees, moves_out, moves_in, delegated, refused, bytes_in, bytes_out;
};

/* --- server_table.c: slots, the page table, forwarding entries --------- */
int      nv_gm_table_init(struct nv_gm_server *s);
void     nv_gm_table_fini(struct nv_gm_server *s);
uint64_t nv_gm_key_hash(const struct nv_gm_key *k);
static inline struct nv_gm_shard *nv_gm_shard_of(struct nv_gm_server *s, uint64_t h)
{
    return &s->shards[h & (NV_GM_SHARDS - 1)];
}
static inline uint8_t *nv_gm_slot_addr(struct nv_gm_server *s, uint32_t slot)
{
    return s->pool + (size_t)slot * NV_GM_PAGE;
}
/* Around every change of a shard's entries or of its pages' bytes, under
 * its lock: the sequence word is odd meanwhile (direct.h's seqlock). */
static inline _Atomic uint64_t *nv_gm_seq_of(struct nv_gm_server *s, uint64_t h)
{
    return (_Atomic uint64_t *)(s->seq + (h & (NV_GM_SHARDS - 1)) * NV_GM_VIEW_SEQ_STRIDE);
}
static inline void nv_gm_shard_wbegin(struct nv_gm_server *s, uint64_t h)
{
    atomic_fetch_add_explicit(nv_gm_seq_of(s, h), 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);   /* the odd word before the changes */
}
static inline void nv_gm_shard_wend(struct nv_gm_server *s, uint64_t h)
{
    atomic_fetch_add_explicit(nv_gm_seq_of(s, h), 1, memory_order_release);
}
/* Under the key's shard lock: its slot, or NV_GM_NIL. */
uint32_t nv_gm_lookup_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k);
/* Under the shard lock: take slot into the table for k, owned by c. */
void     nv_gm_insert_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k, uint32_t slot,
                             struct nv_gm_client *c);
/* Under the shard lock: drop k's page (its slot back to the free list).
 * 1 if it was held. */
int      nv_gm_remove_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k);
/* Take n free slots (all or none). */
int      nv_gm_slots_take(struct nv_gm_server *s, uint32_t *out, uint32_t n);
void     nv_gm_slots_give(struct nv_gm_server *s, const uint32_t *slots, uint32_t n);
uint64_t nv_gm_slots_free(struct nv_gm_server *s);
/* Forwarding entries, under the key's shard lock: the peer, or -1. */
int      nv_gm_fwd_find_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k);
void     nv_gm_fwd_set_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k, int peer);
int      nv_gm_fwd_drop_locked(struct nv_gm_server *s, uint64_t h, const struct nv_gm_key *k);
/* Drop the forwarding entries of client (region: UINT64_MAX any) with page
 * in [first, first + n); how many. Takes the shard locks itself. */
uint64_t nv_gm_fwd_drop_range(struct nv_gm_server *s, uint64_t client, uint64_t region, uint64_t first,
                              uint64_t n);
/* Up to max keys of c's pages in region (UINT64_MAX: any) with page in
 * [first, first + n), from the start of its list. */
uint32_t nv_gm_client_keys(struct nv_gm_client *c, uint64_t region, uint64_t first, uint64_t n,
                           struct nv_gm_key *out, uint32_t max);
/* Drop one page by key (takes its shard lock); 1 if it was held. */
int      nv_gm_drop_page(struct nv_gm_server *s, const struct nv_gm_key *k);
/* Drop c's pages in region/range (as nv_gm_client_keys) and their
 * forwarding entries; pages dropped. */
uint64_t nv_gm_drop_range(struct nv_gm_server *s, struct nv_gm_client *c, uint64_t client, uint64_t region,
                          uint64_t first, uint64_t n);

/* --- server_bind.c: who a peer is --------------------------------------- */
struct nv_gm_bind *nv_gm_bind_find(struct nv_gm_server *s, int peer, struct nv_gm_bind *copy);
netvm_status_t     nv_gm_bind_add(struct nv_gm_server *s, int peer, int role, uint64_t id);
/* The binding's copy is taken out of the table; NULL if none. */
int                nv_gm_bind_remove(struct nv_gm_server *s, int peer, struct nv_gm_bind *copy);
/* The record of client id, made if new (NULL: out of memory). */
struct nv_gm_client *nv_gm_client_get(struct nv_gm_server *s, uint64_t id, int make);

/* --- server_proc.c: the procedures -------------------------------------- */
netvm_status_t nv_gm_procs_register(struct nv_gm_server *s);

/* --- server_shared.c: named regions ------------------------------------ */
netvm_status_t nv_gm_shared_register(struct nv_gm_server *s);
/* May peer make a page call naming shared id (write: PUT, FREE)? *c:
 * the region's page record, *bound: its pages. */
netvm_status_t nv_gm_shared_caller(struct nv_gm_server *s, int peer, uint64_t id, int write,
                                   struct nv_gm_client **c, uint64_t *bound);
/* peer left: it has nothing open any more (a writer releases its name) */
void           nv_gm_shared_peer_down(struct nv_gm_server *s, int peer);
void           nv_gm_shared_stat(struct nv_gm_server *s, uint64_t *regions, uint64_t *pages);
void           nv_gm_shared_fini(struct nv_gm_server *s);

/* --- server_move.c: moves and the worker -------------------------------- */
int  nv_gm_proc_move(netvm_ctx_t *ctx, netvm_rpc_call_t *call, void *arg);
void nv_gm_move_stop(struct nv_gm_server *s);

#endif
