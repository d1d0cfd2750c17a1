/* The remote store of one region (store_remote*.c): the per-page
 * directory and what its operations share with the server set's monitor.
 *
 * A directory entry is one 64-bit word per page, read and replaced
 * atomically, so the fault path reads it without a lock:
 *   bits 0-1   state: never stored (reads as zeros), stored, lost
 *   bit  2     W: a store of this page is under way
 *   bit  3     M: a mover (repair, drain, rebalance) is copying this page
 *   bits 4-31  generation: bumped by every store and discard, so a mover
 *              that copied an old version sees its copy is stale
 *   bits 32-63 the holders: R <= 4 bytes, each a server index + 1, 0 for
 *              none (so an all-zero word is a page never stored, and the
 *              directory is a lazily zero-filled mapping that costs
 *              nothing for pages never used: a region may be a large
 *              reservation, as `netvm gmem run`'s is).
 * A store waits for M to clear before it sets W; movers skip pages with W
 * set and retry later; so a mover's copy and a store's never cross. */
#ifndef NV_GMEM_STORE_REMOTE_H
#define NV_GMEM_STORE_REMOTE_H

#include "gmem/servers.h"
#include "gmem/store.h"

#define NV_GM_RMAX 4

enum { NV_GM_PG_NONE = 0, NV_GM_PG_STORED = 1, NV_GM_PG_LOST = 2 };
#define NV_GM_E_W      4ull
#define NV_GM_E_M      8ull
#define NV_GM_E_GEN1   16ull
#define NV_GM_E_GENMASK 0xFFFFFFF0ull

static inline unsigned nv_gm_e_state(uint64_t e) { return (unsigned)(e & 3); }
static inline unsigned nv_gm_e_holder(uint64_t e, int i)
{
    return (((unsigned)(e >> (32 + 8 * i)) & 0xFF) - 1u) & 0xFF;   /* 0 -> NV_GM_NO_SERVER */
}
static inline uint64_t nv_gm_e_with_holders(uint64_t e, const uint8_t h[NV_GM_RMAX])
{
    uint64_t w = e & 0xFFFFFFFFull;
    for (int i = 0; i < NV_GM_RMAX; i++)
        w |= (uint64_t)((h[i] + 1u) & 0xFF) << (32 + 8 * i);
    return w;
}
static inline uint64_t nv_gm_e_empty_holders(uint64_t e) { return e & 0xFFFFFFFFull; }
static inline uint64_t nv_gm_e_bump(uint64_t e)
{
    return (e & ~NV_GM_E_GENMASK) | ((e + NV_GM_E_GEN1) & NV_GM_E_GENMASK);
}
static inline int nv_gm_e_holds(uint64_t e, unsigned idx)
{
    for (int i = 0; i < NV_GM_RMAX; i++)
        if (nv_gm_e_holder(e, i) == idx)
            return 1;
    return 0;
}

/* A shared region's store (store_shared.c): the pages a writer changed
 * since its last sync, and where its readers drop invalidated pages. */
/* Where a file cache's missing pages come from (store_gfile.c). */
struct nv_gm_cache_src {
    int               fd;
    uint64_t          size;            /* bytes; the last page is padded with zeros */
    _Atomic uint64_t *file_reads;      /* pages read from the file (the file handle's counters) */
    _Atomic uint64_t *file_bytes;
};

struct nv_gm_shared_store {
    int                 mode;          /* NV_GM_SHARED_READ / _WRITE / _CACHE */
    struct nv_gm_cache_src src;        /* a cache's file */
    _Atomic uint64_t    filling;       /* a cache's pages being stored (store_gfile.c) */
    char                name[NV_GM_NAME_MAX + 1];
    _Atomic uint64_t   *written;       /* writer: a bit per page, set when a store or discard is issued */
    nv_gstore_inval_fn  inval;         /* reader: the pager's, under g->lock */
    void               *inval_arg;
    struct nv_gstore_remote *next;     /* in g->shared */
};

struct nv_gstore_remote {
    struct nv_gstore      base;
    struct nv_gm_servers *g;
    uint64_t              owner;      /* the id its pages are keyed by: the client id, or a shared id */
    uint64_t              region;     /* the owner's region id (0 for a shared region) */
    struct nv_gm_shared_store *shared;   /* NULL: a private region */
    uint64_t              npages;
    int                   replicas;
    int                   timeout_ms;
    _Atomic uint64_t     *dir;        /* npages words, mmap'd (zero: never stored) */
    _Atomic uint64_t      hi;         /* pages [hi, npages) were never stored: the
                                         whole-directory walks stop there */
    _Atomic uint64_t      lost, restored;
    _Atomic int           users;      /* the monitor working on it */
    struct nv_gstore_remote *next;    /* in g->regions */
    /* a PUTV payload buffer of NV_GM_PUTV_CACHED pages kept between calls
     * (store_remote_put.c): an evictor's batch would otherwise malloc and
     * free 256 KiB, an mmap and munmap each, every time */
    _Atomic(uint8_t *)    put_cache;
};

#define NV_GM_PUTV_CACHED 64u
/* Free the kept PUTV buffer; at close, when no store is in flight. */
void nv_gm_put_cache_free(struct nv_gstore_remote *r);

/* Replace page's entry old by new (a CAS), keeping the servers' pages_held
 * counts; 0 if the entry was not old any more. */
int nv_gm_dir_cas(struct nv_gstore_remote *r, uint64_t page, uint64_t old, uint64_t nw);

/* The operations of store_remote_fetch.c and store_remote_put.c. */
int            nv_gm_has(struct nv_gstore *s, uint64_t page);
netvm_status_t nv_gm_fetch(struct nv_gstore *s, uint64_t page, void *buf);
netvm_status_t nv_gm_fetch_nb(struct nv_gstore *s, uint64_t page, void *buf, nv_gstore_done_fn done, void *arg);
netvm_status_t nv_gm_fetchn_nb(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf,
                               nv_gstore_ndone_fn done, void *arg);
netvm_status_t nv_gm_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                              nv_gstore_done_fn done, void *arg);
netvm_status_t nv_gm_store_vec_nb(struct nv_gstore *s, const uint64_t *pages, const void *const *src, uint64_t n,
                                  nv_gstore_done_fn done, void *arg);

/* The shared store's operations that a file cache's store reuses. */
int            nv_gm_sh_has(struct nv_gstore *s, uint64_t page);
netvm_status_t nv_gm_sh_store_nb(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                                 nv_gstore_done_fn done, void *arg);
void           nv_gm_sh_discard(struct nv_gstore *s, uint64_t first, uint64_t n);
void           nv_gm_sh_close(struct nv_gstore *s);
extern const struct nv_gstore_ops nv_gm_cache_ops;   /* store_gfile.c */

/* A shared region's id: a hash of its name with NV_GM_SHARED_BIT. */
uint64_t nv_gm_shared_id(const char *name);

/* The private store's discard and health, which shared stores reuse. */
void nv_gm_discard(struct nv_gstore *s, uint64_t first, uint64_t n);
void nv_gm_health(struct nv_gstore *s, netvm_gmem_health_t *h);

/* R for a region of npages (opts, NETVM_GMEM_REPLICAS, the default) and
 * whether the servers can take it. */
netvm_status_t nv_gm_pick_replicas(struct nv_gm_servers *g, const netvm_gmem_opts_t *opts, uint64_t npages, int *rp);

/* FREE pages at server idx without waiting. */
void nv_gm_free_at(struct nv_gstore_remote *r, int idx, uint64_t first, uint64_t n);

/* The monitor's work on one region (store_remote_repair.c): restore R for
 * pages that lost a copy on a dead server, and move copies off servers
 * being drained or removed. Returns pages still to do (retry later). */
uint64_t nv_gm_repair(struct nv_gstore_remote *r);

#endif
