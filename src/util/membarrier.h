/* Asymmetric fences (sys_membarrier): the frequent side of a Dekker-style
 * handshake (an initiator's access) needs only a compiler barrier, the rare
 * side (revoking a segment, arming a tripwire) pays for a barrier on every
 * CPU running a registered process instead. */
#ifndef NV_UTIL_MEMBARRIER_H
#define NV_UTIL_MEMBARRIER_H

#include <stdatomic.h>

/* Register this process; 0 if it may rely on nv_membarrier_global (then
 * nv_membarrier_ok() returns 1). Idempotent. */
int  nv_membarrier_register(void);
/* inline: the frequent side asks on every access */
extern _Atomic int nv_membarrier_registered;
static inline int nv_membarrier_ok(void)
{
    return atomic_load_explicit(&nv_membarrier_registered, memory_order_relaxed) == 1;
}
/* A full barrier on every CPU running a registered process; 0 on success. */
int  nv_membarrier_global(void);

/* The frequent side: orders this thread's earlier stores before its later
 * loads as seen by a thread that runs the rare side. */
static inline void nv_fence_light(void)
{
    if (nv_membarrier_ok())
        atomic_signal_fence(memory_order_seq_cst);
    else
        atomic_thread_fence(memory_order_seq_cst);
}

/* The rare side. */
static inline void nv_fence_heavy(void)
{
    if (!nv_membarrier_ok() || nv_membarrier_global() != 0)
        atomic_thread_fence(memory_order_seq_cst);
}

#endif
