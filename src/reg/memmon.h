/* The memory monitor: tells its clients (registration caches) which ranges
 * of this process's memory were released (unmapped, remapped away, shrunk
 * with brk, dropped with madvise), through userfaultfd's non-cooperative
 * events, never by patching the allocator.
 *
 * One per process: one userfaultfd (UFFD_FEATURE_EVENT_UNMAP | REMOVE |
 * REMAP, and WP_HUGETLBFS_SHMEM where the kernel has it so shmem can be
 * watched) and one thread that reads it, started with the first client and
 * stopped with the last. A watched range is registered in write-protect
 * mode only: nothing is ever write-protected, so no fault arrives; the
 * registration exists for the events.
 *
 * The guarantee (see memmon.c for the reasoning): a client that calls
 * nv_memmon_sync() before searching, after a releasing call on a watched
 * range returned, finds that its invalidate callback for that range has
 * already run. */
#ifndef NV_REG_MEMMON_H
#define NV_REG_MEMMON_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct nv_memmon_client {
    void *arg;
    /* [start, end) was released. Runs on the monitor thread with the
     * monitor's lock held: it must not block on anything a thread inside a
     * releasing call could hold (no malloc or free, no registrar call, no
     * munmap), only take the client's own lock, which nobody holds across
     * such a call. */
    void (*invalidate)(void *arg, uintptr_t start, uintptr_t end);
    /* fork: prepare takes the client's lock so the child gets it in a known
     * state, parent releases it, child releases it and forgets what the
     * child's memory no longer guarantees (without EVENT_FORK the kernel
     * unregisters every range in the child) */
    void (*fork_prepare)(void *arg);
    void (*fork_parent)(void *arg);
    void (*fork_child)(void *arg);
    struct nv_memmon_client *next;   /* the monitor's */
};

/* Become a client; starts the monitor if it does not run. 0 when ranges
 * can be watched, else -errno (no userfaultfd for this process: the reason
 * is logged once) and the client is still added, for fork. */
int  nv_memmon_add(struct nv_memmon_client *cl);
/* Stop being one; the last client stops the thread and closes the
 * userfaultfd (which unregisters every range). After it returns,
 * invalidate is not running and will not be called for cl. */
void nv_memmon_remove(struct nv_memmon_client *cl);

/* Watch [addr, addr + len) (page-aligned). 0, or -errno: EINVAL a mapping
 * userfaultfd cannot watch (a regular file), EBUSY a range another
 * userfaultfd owns, ENOMEM a hole in the range, ENODEV no monitor. Never
 * call it with a client's lock held (it takes the mmap lock). */
int  nv_memmon_watch(void *addr, size_t len);

/* Events read so far: a client that read this before watching a range and
 * finds it unchanged under its lock knows no release of that range was
 * read in between (see nv_rcache_get). */
uint64_t nv_memmon_events(void);

/* Wait until no event is being processed. Costs one atomic load when none
 * is (the hit path). */
extern atomic_int nv_memmon_busy_;
void nv_memmon_wait_idle_(void);
static inline void nv_memmon_sync(void)
{
    if (__builtin_expect(atomic_load_explicit(&nv_memmon_busy_, memory_order_seq_cst) != 0, 0))
        nv_memmon_wait_idle_();
}

#endif
