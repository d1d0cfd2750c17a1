/* Monotonic time for timeouts and benchmarks. */
#ifndef NV_UTIL_TIME_H
#define NV_UTIL_TIME_H

#include <sched.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t nv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A time not earlier than nv_now_ns() now, and at most one clock tick
 * (CLOCK_MONOTONIC_COARSE's resolution, a few ms) later, for a fifth of
 * its cost: stamps that only timeouts of that scale read (a request's
 * issue time), so a stamp may make a timeout late by a tick, never early.
 * Compare it with nv_now_ns() only as "now > stamp && now - stamp > t". */
static inline uint64_t nv_now_ns_upper(void)
{
    static uint64_t res_ns;   /* racy first use stores the same value */
    struct timespec ts;
    if (!__atomic_load_n(&res_ns, __ATOMIC_RELAXED)) {
        clock_getres(CLOCK_MONOTONIC_COARSE, &ts);
        __atomic_store_n(&res_ns, (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + 1, __ATOMIC_RELAXED);
    }
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + __atomic_load_n(&res_ns, __ATOMIC_RELAXED);
}

static inline void nv_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Between two passes of a spin that has made `passes` of them: past
 * yield_after passes (NETVM_SPIN_YIELD; 0: never), give the CPU to
 * whoever else can run on it (the peer being waited for, when processes
 * outnumber cores), else a pause. MPICH's shared-memory channel yields
 * after a spin count too. */
static inline void nv_spin_pause(unsigned yield_after, unsigned passes)
{
    if (yield_after && passes >= yield_after)
        sched_yield();
    else
        nv_cpu_relax();
}

#endif
