/* The local registration cache: remembers which ranges of this process's
 * memory a link has registered (an RDMA memory region, an mlock) so that
 * an operation on a buffer registered before costs a lookup, not a
 * registration; and never hands out a registration whose memory was
 * unmapped, remapped or released since, however the program did it
 * (munmap, MAP_FIXED over it, brk, madvise DONTNEED/FREE/REMOVE, mremap,
 * shmdt, free of a large malloc block).
 *
 * Staleness is detected through userfaultfd's non-cooperative events
 * (UNMAP, REMOVE, REMAP), not by patching the allocator: the kernel holds
 * the releasing call until the cache has read the event, and the cache
 * invalidates before a lookup made after that call returned can hit.
 * Ranges userfaultfd cannot watch (file mappings other than shmem, System V
 * shared memory, ranges another userfaultfd owns, such as netvm's own
 * network memory) are registered per operation and never cached. Not seen:
 * a shared file or memfd truncated under a live mapping (docs/registration.md).
 *
 * The registrar's callbacks are called outside the cache's lock, from the
 * thread calling get, put, get_stats or destroy (never from the monitor):
 * an unused entry whose memory was released is deregistered by the cache's
 * next call.
 *
 * The cache knows nothing of what a registration is: the owner passes a
 * registrar (reg/dereg callbacks, link.h's types: core runs caches for
 * links through their lreg upcalls). */
#ifndef NV_REG_RCACHE_H
#define NV_REG_RCACHE_H

#include <netvm/netvm.h>
#include "link/link.h"   /* struct nv_lreg, struct nv_lreg_registrar: what links hold */

#include <stddef.h>
#include <stdint.h>

struct nv_rcache;

struct nv_rcache_params {
    size_t max_entries;   /* 0: a default; beyond it unused entries are evicted, oldest first */
    size_t max_bytes;     /* 0: no limit on the bytes registered and unused */
};

struct nv_rcache_stats {
    uint64_t hits, misses;      /* lookups served from the cache, and not */
    uint64_t uncached;          /* lookups on ranges the cache cannot watch (registered per use) */
    uint64_t invalidations;     /* entries dropped because their memory was released */
    uint64_t evictions;         /* unused entries dropped for room */
    uint64_t regs, deregs;      /* registrar calls */
};

netvm_status_t nv_rcache_create(struct nv_rcache **c, const struct nv_lreg_registrar *r,
                                const struct nv_rcache_params *p);
/* deregisters everything; no entry may be in use */
void           nv_rcache_destroy(struct nv_rcache *c);

/* A registration covering [addr, addr + len) with at least the access
 * bits asked (the registrar's, opaque here), registered now if none is
 * cached; valid until nv_rcache_put. Thread-safe. */
netvm_status_t nv_rcache_get(struct nv_rcache *c, const void *addr, size_t len, unsigned access,
                             struct nv_lreg **e);
/* done with it; an entry whose memory was released meanwhile is
 * deregistered here, once its last user put it */
void           nv_rcache_put(struct nv_rcache *c, struct nv_lreg *e);

void           nv_rcache_get_stats(struct nv_rcache *c, struct nv_rcache_stats *s);

#endif
