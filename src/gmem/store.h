/* Where a region's pages are when they are not resident: the pager's
 * backing store (as UMap's store interface, one table of operations).
 *
 * Two stores exist: the remote one (store_remote*.c: memory servers,
 * placement on R of them, the directory, failures), which every region
 * uses, and the local one (store_local.c: pages kept in this process's own
 * memory), which is what "a bare userfaultfd fault resolved locally by the
 * same kind of handler" means in the benchmarks (NETVM_GMEM_STORE=local).
 *
 * Pages are numbered from 0 within the region; every buffer is NV_GM_PAGE
 * bytes (a multiple for the n-page calls) of the pager's own memory, never
 * the managed region. Every call is safe from any thread at once. Callbacks
 * (done) run exactly once, in the progress engine or on the calling thread,
 * and must not block. */
#ifndef NV_GMEM_STORE_H
#define NV_GMEM_STORE_H

#include <netvm/gmem.h>
#include <stdint.h>

struct nv_gstore;

typedef void (*nv_gstore_done_fn)(void *arg, netvm_status_t status);
/* fetchn_nb's completion: bit i of got set when page first+i is in buf. */
typedef void (*nv_gstore_ndone_fn)(void *arg, uint64_t got);

/* Pages one fetchn_nb may ask for (got is one u64). */
#define NV_GSTORE_FETCHN_MAX 64u

struct nv_gstore_ops {
    /* Whether page was ever stored and not discarded since: 0 means it
     * reads as zeros (the pager fills it locally, no round trip). Never
     * blocks, no round trip. */
    int (*has)(struct nv_gstore *s, uint64_t page);
    /* Fetch page into buf. NETVM_OK; NETVM_ERR_NOTFOUND: never stored
     * (zeros); any other status: no live copy could be read (the pager
     * poisons the page: SIGBUS for the program, logged). Tries every
     * replica before failing. Blocks (not in a handler). */
    netvm_status_t (*fetch)(struct nv_gstore *s, uint64_t page, void *buf);
    /* The same without blocking: done(arg, status) when buf holds the page
     * or the fetch failed. NETVM_OK: done will run (maybe already ran);
     * otherwise it will not and nothing was started. */
    netvm_status_t (*fetch_nb)(struct nv_gstore *s, uint64_t page, void *buf, nv_gstore_done_fn done,
                               void *arg);
    /* Fetch pages [first, first + n) (n <= NV_GSTORE_FETCHN_MAX) into buf
     * (n pages) without blocking: done(arg, got) when every page is in buf
     * or failed; a page not in got (never stored, or no live copy) must
     * not be used: a fault on it fetches it itself. The remote store asks
     * each run of pages sharing their servers with one NV_GM_GETN and the
     * pages a holder did not have one by one (as fetch_nb: replicas,
     * moved pages). NETVM_OK: done will run (maybe already ran); otherwise
     * it will not and nothing was started. */
    netvm_status_t (*fetchn_nb)(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf,
                                nv_gstore_ndone_fn done, void *arg);
    /* Store pages [page, page + n) from buf on R servers; done when every
     * copy is acknowledged (status NETVM_OK), or when fewer than R could
     * take it (a status; the pages that were stored somewhere are readable;
     * the pager keeps a page it could not store anywhere resident and
     * dirty). buf stays the caller's until done. */
    netvm_status_t (*store_nb)(struct nv_gstore *s, uint64_t page, uint64_t n, const void *buf,
                               nv_gstore_done_fn done, void *arg);
    /* The same for n pages that need not be adjacent: pages ascending,
     * page i's bytes at src[i]; src is the caller's until done. Optional
     * (NULL: the caller stores runs with store_nb); the remote store sends
     * one PUTV a server for each group of pages placed alike, where
     * store_nb would send a PUT a run. n <= NV_GM_PUT_MAX. */
    netvm_status_t (*store_vec_nb)(struct nv_gstore *s, const uint64_t *pages, const void *const *src, uint64_t n,
                                   nv_gstore_done_fn done, void *arg);
    /* Forget pages [first, first + n): the program discarded them
     * (MADV_DONTNEED, munmap of part): they read as zeros from now. Frees
     * them at the servers without waiting. */
    void (*discard)(struct nv_gstore *s, uint64_t first, uint64_t n);
    void (*health)(struct nv_gstore *s, netvm_gmem_health_t *h);
    /* Free every page at the servers and the store itself. */
    void (*close)(struct nv_gstore *s);
};

struct nv_gstore {
    const struct nv_gstore_ops *ops;
    int shared;   /* 0: a private region's store; a shared one's: NV_GM_SHARED_READ or _WRITE */
    /* counted by the store, read by netvm_gmem_stats */
    uint64_t bytes_in, bytes_out, writebacks, remote_fetches, direct_fetches;   /* __atomic */
};

/* Open a region's store of npages pages. The servers must be able to take
 * npages * R pages of this client (NETVM_ERR_NOMEM otherwise), unless
 * flags has NV_GSTORE_RESERVE: the region is a reservation of address
 * space (`netvm gmem run`'s), most of it never used, and a store that
 * finds the servers full fails then (the page stays resident). */
#define NV_GSTORE_RESERVE 1u
netvm_status_t nv_gstore_remote_open(netvm_ctx_t *ctx, uint64_t npages, const netvm_gmem_opts_t *opts,
                                     struct nv_gstore **s);
netvm_status_t nv_gstore_remote_open_flags(netvm_ctx_t *ctx, uint64_t npages, const netvm_gmem_opts_t *opts,
                                           unsigned flags, struct nv_gstore **s);
netvm_status_t nv_gstore_local_open(uint64_t npages, struct nv_gstore **s);

/* A shared region's store (store_shared.c, docs/gmem.md "Shared regions"):
 * named, mapped by several clients, one writer (mode NV_GM_SHARED_WRITE)
 * and readers. NETVM_ERR_BUSY: the name has a writer; NETVM_ERR_STATE: it
 * exists with another length, R or server set. */
netvm_status_t nv_gstore_shared_open(netvm_ctx_t *ctx, const char *name, uint64_t npages, int mode,
                                     const netvm_gmem_opts_t *opts, struct nv_gstore **s);
/* A read-only region over a store of the caller's (region.c): opener
 * opens it on own, the context network memory uses. The file cache's
 * mappings (gfile.c) are made so. */
typedef netvm_status_t (*nv_gm_store_opener)(void *arg, netvm_ctx_t *own, uint64_t npages,
                                             const netvm_gmem_opts_t *opts, struct nv_gstore **s);
netvm_status_t nv_gm_region_map_with(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts,
                                     nv_gm_store_opener opener, void *arg, netvm_gmem_t **region, void **addr);
/* Pages [first, first + n) of such a region now show other data (a
 * window moved): their local copies leave, and read-ahead starts at first
 * (pager_shared.c). */
void nv_gm_region_refetch(netvm_gmem_t *region, uint64_t first, uint64_t n);

/* A file cache's store (store_gfile.c): a shared region in mode
 * NV_GM_SHARED_CACHE whose pages missing from the servers are read from
 * src's file (and stored for the next reader). */
struct nv_gm_cache_src;
netvm_status_t nv_gstore_cache_open(netvm_ctx_t *ctx, const char *name, uint64_t npages, int mode,
                                    const struct nv_gm_cache_src *src, const netvm_gmem_opts_t *opts,
                                    struct nv_gstore **s);
/* Read pages [first, first + n) of a cache store's file into buf (n
 * pages, the part past the end zeros) and store them on the servers
 * without waiting. */
netvm_status_t nv_gm_cache_fill(struct nv_gstore *s, uint64_t first, uint64_t n, void *buf);
/* Where a reader's store drops pages a writer's sync invalidated: fn runs
 * in the progress engine, must not block, and (drop) must have taken the
 * resident pages out of the region when it returns. It returns the pages
 * of the range still being fetched: their fetch may carry the old
 * contents, and they leave when placed, so the store answers the sync
 * only once none is left (fn with drop 0 counts them). fn NULL: none
 * (before the region is freed). */
typedef uint64_t (*nv_gstore_inval_fn)(void *arg, uint64_t first, uint64_t n, int drop);
void           nv_gstore_shared_hook(struct nv_gstore *s, nv_gstore_inval_fn fn, void *arg);
/* The writer's half of a sync, after its dirty pages are stored: every
 * reader drops its copies of the pages written since the last one. */
netvm_status_t nv_gstore_shared_publish(struct nv_gstore *s);
/* Free a name's pages and records on the servers (nobody may map it). */
netvm_status_t nv_gstore_shared_remove(netvm_ctx_t *ctx, const char *name, const netvm_gmem_opts_t *opts);

#endif
