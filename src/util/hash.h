/* FNV-1a: cheap, stable hashing of names (not for anything secret). */
#ifndef NV_UTIL_HASH_H
#define NV_UTIL_HASH_H

#include <stdint.h>

static inline uint64_t nv_hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

#endif
