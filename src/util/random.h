/* Random keys and secrets from the kernel's CSPRNG. */
#ifndef NV_UTIL_RANDOM_H
#define NV_UTIL_RANDOM_H

#include <stddef.h>
#include <stdint.h>

/* 0 on success, -1 (errno set) if the kernel could not supply entropy. */
int nv_random_bytes(void *buf, size_t len);
/* A nonzero 64-bit key; 0 on failure (0 is never a valid key). */
uint64_t nv_random_key(void);

#endif
