/* What the registration tests read of a process: its pin counters and the
 * kernel's own count of its locked memory. */
#ifndef REG_UTIL_H
#define REG_UTIL_H

#include "check.h"
#include <netvm/reg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sanitizers' runtimes (ThreadSanitizer's and AddressSanitizer's)
 * turn mlock into a no-op (it would lock their shadow memory too): VmLck
 * says nothing there. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define VMLCK_REAL 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define VMLCK_REAL 0
#endif
#endif
#ifndef VMLCK_REAL
#define VMLCK_REAL 1
#endif

/* VmLck of this process in bytes (the kernel's count of mlocked memory). */
static inline unsigned long long vm_locked(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f);
    char line[256];
    unsigned long long kb = ~0ull;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck:", 6))
            kb = strtoull(line + 6, NULL, 10);
    fclose(f);
    CHECK(kb != ~0ull);
    return kb * 1024;
}

static inline unsigned long long env_size(const char *name)
{
    const char *v = getenv(name);
    CHECK(v);
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end == 'K') n <<= 10;
    if (*end == 'M') n <<= 20;
    return n;
}

#endif
