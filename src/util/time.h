/* Monotonic time for timeouts and benchmarks. */
#ifndef NV_UTIL_TIME_H
#define NV_UTIL_TIME_H

#include <stdint.h>
#include <time.h>

static inline uint64_t nv_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void nv_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
