/* A lock for short critical sections that threads seldom contend, on a
 * path where a pthread mutex's cost shows: taking it is one exchange and
 * dropping it a plain release store, where a mutex pays a second locked
 * instruction to drop and a call each way (a mutex pair measured 14-16 ns
 * here, this pair 4-6).
 *
 * A waiter spins on a plain load, yields the CPU after a few passes (the
 * holder may be waiting for it, when threads outnumber cores), and after
 * many yields sleeps a little between looks, so a holder that waits a long
 * time (a send waiting for credits) costs its waiters no CPU to speak of.
 * Nothing wakes a sleeping waiter: it looks again when its sleep ends, so
 * a lock that is often held long belongs in a mutex instead. */
#ifndef NV_UTIL_SPINLOCK_H
#define NV_UTIL_SPINLOCK_H

#include "util/time.h"

#include <stdatomic.h>

typedef struct {
    _Atomic int held;   /* 0: free, so zeroed memory holds unlocked locks */
} nv_spinlock_t;

enum {
    NV_SPINLOCK_PAUSES = 64,     /* passes with a pause before yielding */
    NV_SPINLOCK_YIELDS = 1000,   /* passes with a yield before sleeping */
    NV_SPINLOCK_SLEEP_NS = 50000,
};

static inline int nv_spin_trylock(nv_spinlock_t *l)
{
    return !atomic_load_explicit(&l->held, memory_order_relaxed) &&
           !atomic_exchange_explicit(&l->held, 1, memory_order_acquire);
}

static inline void nv_spin_lock_wait(nv_spinlock_t *l)
{
    for (unsigned pass = 0;; pass++) {
        if (nv_spin_trylock(l))
            return;
        if (pass < NV_SPINLOCK_PAUSES) {
            nv_cpu_relax();
        } else if (pass < NV_SPINLOCK_PAUSES + NV_SPINLOCK_YIELDS) {
            sched_yield();
        } else {
            struct timespec ts = { 0, NV_SPINLOCK_SLEEP_NS };
            nanosleep(&ts, NULL);
        }
    }
}

static inline void nv_spin_lock(nv_spinlock_t *l)
{
    if (atomic_exchange_explicit(&l->held, 1, memory_order_acquire))
        nv_spin_lock_wait(l);
}

static inline void nv_spin_unlock(nv_spinlock_t *l)
{
    atomic_store_explicit(&l->held, 0, memory_order_release);
}

#endif
