/*
 * netvm network memory: a region of this process's address space whose
 * pages live in other machines' RAM (memory servers, `netvm memd`),
 * fetched on fault, read ahead, evicted under a local budget and written
 * back, after GMS on Trapeze (docs/gmem.md).
 *
 * netvm_gmem_map returns a pointer usable like any memory. A page is
 * resident locally or held by R memory servers; a fault on a page that is
 * not resident is served through userfaultfd by fetching it from a server
 * that holds it (a page never written reads as zeros and costs no round
 * trip). When resident pages exceed the budget, victims chosen by the
 * policy of docs/gmem.md are dropped: a clean one at once, a dirty one
 * after R servers acknowledged its copy. Nothing stale or foreign is ever
 * read; a page whose every copy is lost fails the access with SIGBUS and a
 * logged reason.
 *
 * Servers: those named by the options or NETVM_GMEM_SERVERS; with none
 * named, netvm starts local ones on loopback for this process
 * (NETVM_GMEM_EMBEDDED), so nothing else is needed.
 *
 * Needs userfaultfd: root, or vm.unprivileged_userfaultfd=1, or read-write
 * access to /dev/userfaultfd; netvm_gmem_map says which is missing
 * (NETVM_ERR_UNSUPPORTED, logged) and never falls back silently.
 */
#ifndef NETVM_GMEM_H
#define NETVM_GMEM_H

#include <netvm/netvm.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The unit of paging. */
#define NETVM_GMEM_PAGE 4096u

typedef struct netvm_gmem netvm_gmem_t;

/* Write policy (netvm_gmem_opts_t.write_policy). */
enum {
    NETVM_GMEM_WRITE_BACK  = 0,  /* dirty pages go to the servers when evicted or synced (default) */
    NETVM_GMEM_WRITE_EARLY = 1,  /* also a background writer cleans dirty pages ahead of eviction,
                                    so a fault rarely waits for a write-back */
};

/* Options of a region. A zero field means "from the environment, else the
 * default" (NETVM_GMEM_*, see `netvm info`). */
typedef struct {
    size_t      budget;          /* bytes resident at most, rounded down to pages (NETVM_GMEM_BUDGET) */
    int         readahead;       /* pages read ahead on sequential faults; -1: none (NETVM_GMEM_READAHEAD) */
    int         replicas;        /* R: servers holding each page (NETVM_GMEM_REPLICAS; default 2 when
                                    two or more servers exist, else 1) */
    int         write_policy;    /* NETVM_GMEM_WRITE_* (NETVM_GMEM_WRITE) */
    int         fault_threads;   /* threads serving faults (NETVM_GMEM_THREADS; 0 and unset: 1 when
                                    the calling thread may run on two CPUs or fewer, else 2) */
    const char *servers;         /* "tcp:HOST:PORT,tcp:HOST:PORT,..." (NETVM_GMEM_SERVERS); none:
                                    local servers are started (NETVM_GMEM_EMBEDDED) */
    const void *credential;      /* the servers' credential (16-64 bytes); NULL: the file named by
                                    NETVM_GMEM_CREDENTIAL_FILE (embedded servers: a fresh one) */
    size_t      credential_len;
    int         timeout_ms;      /* a server that does not answer within this is taken as lost for
                                    the request and its replica used (NETVM_GMEM_TIMEOUT) */
} netvm_gmem_opts_t;

/* Map len bytes (rounded up to pages) of network memory; *addr receives
 * the region's start, page aligned. opts may be NULL. The memory reads as
 * zeros until written. NETVM_ERR_UNSUPPORTED: no userfaultfd for this
 * process (the log says why and what to change); NETVM_ERR_PEER: no
 * server reachable; NETVM_ERR_AUTH: a server refused the credential;
 * NETVM_ERR_NOMEM: the servers' pools cannot take len * R bytes for this
 * client. Any thread. */
netvm_status_t netvm_gmem_map(netvm_ctx_t *ctx, size_t len, const netvm_gmem_opts_t *opts,
                              netvm_gmem_t **region, void **addr);
/* Unmap the region and free its pages on every server. Accesses after it
 * fault as for any unmapped memory. Waits for faults in progress. */
netvm_status_t netvm_gmem_unmap(netvm_gmem_t *region);
/* Write every dirty resident page to its R servers and wait for their
 * acknowledgements. */
netvm_status_t netvm_gmem_sync(netvm_gmem_t *region);
void          *netvm_gmem_addr(const netvm_gmem_t *region);
size_t         netvm_gmem_len(const netvm_gmem_t *region);

/* --- shared regions ------------------------------------------------------
 * A named region that several clients (processes, on any hosts) map at
 * once: its pages live on the memory servers under its name, not under any
 * client, and stay there when its sharers unmap it, exit or die, until
 * netvm_gmem_shared_remove (docs/gmem.md, "Shared regions").
 *
 * Coherence: one writer at a time, readers invalidated through the
 * servers. At most one client maps a name NETVM_GMEM_SHARED_WRITE; others
 * map it NETVM_GMEM_SHARED_READ, read-only (a write by a reader is a
 * SIGSEGV, as for any read-only memory). A reader may read a page the
 * writer changed since its last netvm_gmem_sync either way; once the
 * writer's netvm_gmem_sync returned, every reader has dropped its copies
 * of the pages written before it, so a reader that learns of that sync
 * afterwards (through any message) reads the new data.
 *
 * Every sharer must name the same servers (the same NETVM_GMEM_SERVERS
 * set, in any order), the same length and the same R: placement is
 * rendezvous hashing of the name's pages over the servers' ids, so that
 * all compute the same holders; a server refuses a sharer whose set, R or
 * length differ from the name's (NETVM_ERR_STATE, logged). Embedded
 * servers are a process's own and cannot be shared. Sharers must hold the
 * servers' credential, which is also what lets a client remove a name. */

enum {
    NETVM_GMEM_SHARED_READ  = 1,   /* read-only; sees the writer's data as of its syncs */
    NETVM_GMEM_SHARED_WRITE = 2,   /* read-write; one client at a time */
};
/* A shared region's name: 1 to NETVM_GMEM_NAME_MAX printable ASCII
 * characters (space to '~'; anything else is NETVM_ERR_INVAL: the servers
 * write names in their logs). */
#define NETVM_GMEM_NAME_MAX 255

/* Map the shared region name of len bytes (rounded up to pages) in mode;
 * the first to map a name makes it (reading as zeros). opts as for
 * netvm_gmem_map (budget, read-ahead, servers, credential; R must match
 * the other sharers'). netvm_gmem_sync by the writer writes its dirty
 * pages back and returns once every reader has dropped its stale copies
 * (or NETVM_ERR_TIMEOUT: a reader neither answered nor died within the
 * timeout; its pages are told again at the next sync); on a reader it does
 * nothing. netvm_gmem_unmap leaves the pages on the servers and, for the
 * writer, frees the name for another writer (so does the writer's death).
 * NETVM_ERR_BUSY: another client maps it writable; NETVM_ERR_STATE: the
 * name exists with another length, R or server set; NETVM_ERR_EXISTS:
 * this client maps it already (or another name has the same 64-bit hash);
 * NETVM_ERR_UNSUPPORTED: also with NETVM_GMEM_STORE=local (no servers to
 * share). Not yet done for shared regions: restoring R after a server's
 * death and moving their pages when servers drain, join or leave (their
 * readers read the surviving replica). */
netvm_status_t netvm_gmem_map_shared(netvm_ctx_t *ctx, const char *name, size_t len, int mode,
                                     const netvm_gmem_opts_t *opts, netvm_gmem_t **region, void **addr);
/* Free the shared region name's pages on every server. Any client holding
 * the servers' credential may remove a name, once nobody maps it:
 * NETVM_ERR_BUSY while a client does (on some server; the others may have
 * freed theirs), NETVM_ERR_NOTFOUND if no server knows it. opts: which
 * servers (as netvm_gmem_map), may be NULL. */
netvm_status_t netvm_gmem_shared_remove(netvm_ctx_t *ctx, const char *name, const netvm_gmem_opts_t *opts);

/* --- the servers this process's regions use ---------------------------- */

/* Add the memory server at addr ("tcp:HOST:PORT", same credential as the
 * others) to those this context's regions use: new pages are placed on it
 * too, and existing ones are rebalanced onto it in the background (a page
 * being moved is still read through the server it left, which delegates
 * the request). Blocks until connected. NETVM_ERR_EXISTS: already used. */
netvm_status_t netvm_gmem_server_add(netvm_ctx_t *ctx, const char *addr);
/* Stop using the server at addr: its pages are moved to the others first
 * (keeping R copies), then it is disconnected. Blocks until done.
 * NETVM_ERR_NOTFOUND: not used; NETVM_ERR_NOMEM: the others cannot take
 * its pages (nothing is removed). */
netvm_status_t netvm_gmem_server_remove(netvm_ctx_t *ctx, const char *addr);

/* Counters of a region since it was mapped. */
typedef struct {
    uint64_t faults;             /* missing-page faults served */
    uint64_t zero_fills;         /* of them: pages never written, filled locally */
    uint64_t remote_fetches;     /* pages fetched from a server (faults and read-ahead) */
    uint64_t readahead_issued;   /* pages fetched ahead of a fault */
    uint64_t readahead_hits;     /* of them: touched before they were evicted */
    uint64_t readahead_waste;    /* of them: evicted or discarded untouched */
    uint64_t evictions;          /* pages dropped to keep within the budget */
    uint64_t evictions_dirty;    /* of them: written back first */
    uint64_t writebacks;         /* page copies sent to servers (a page to R servers counts R) */
    uint64_t bytes_in;           /* bytes received from servers */
    uint64_t bytes_out;          /* bytes sent to servers */
    uint64_t resident_pages;     /* resident now, by the pager's count */
    uint64_t budget_pages;
    uint64_t fault_ns_p50;       /* latency of a fault served remotely, from the fault's read to
                                    the page being in place: percentiles */
    uint64_t fault_ns_p99;
    uint64_t fault_ns_p999;
    uint64_t fault_ns_max;
    uint64_t resident_peak;      /* the most pages resident at once (the pager's count) */
    uint64_t wp_faults;          /* first writes to pages placed write-protected (a fault each) */
    uint64_t placed_dirty;       /* pages of read faults and of read-ahead runs placed writable and
                                    dirty, since most such pages were being written soon
                                    (NETVM_GMEM_READ_WP) */
    uint64_t direct_fetches;     /* of remote_fetches: read straight from the pool of a server on
                                    this machine, with no request to it (NETVM_GMEM_DIRECT) */
} netvm_gmem_stats_t;
netvm_status_t netvm_gmem_stats(const netvm_gmem_t *region, netvm_gmem_stats_t *stats);

/* The region's health: where its pages are and what failures cost. */
typedef struct {
    int      servers;            /* servers the region knows */
    int      servers_alive;      /* of them: answering */
    int      replicas;           /* R in force */
    uint64_t pages_stored;       /* pages held by servers (each counted once) */
    uint64_t pages_degraded;     /* of them: on fewer than R live servers (being restored) */
    uint64_t pages_lost;         /* pages with no copy left: their accesses fail with SIGBUS */
} netvm_gmem_health_t;
netvm_status_t netvm_gmem_health(const netvm_gmem_t *region, netvm_gmem_health_t *health);

#ifdef __cplusplus
}
#endif

#endif
