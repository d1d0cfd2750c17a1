/* SipHash-2-4 (Aumasson and Bernstein): a keyed 64-bit hash, for tags a
 * peer must not be able to predict from the ones it has seen (reply and
 * payload token keys). Not a MAC for messages: those use HMAC (hmac.h). */
#ifndef NV_UTIL_SIPHASH_H
#define NV_UTIL_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t nv_siphash(const uint8_t key[16], const void *data, size_t len);
/* The common case: two 64-bit words under the key. */
uint64_t nv_siphash2(const uint8_t key[16], uint64_t a, uint64_t b);

#endif
