/* Helpers of the channel tests: message contents that depend on who sent
 * them, their sequence and their length, so that a lost, repeated,
 * reordered or mixed message does not pass for the expected one. */
#ifndef NV_TESTS_CHAN_TEST_H
#define NV_TESTS_CHAN_TEST_H

#define _GNU_SOURCE
#include "check.h"

#include <netvm/chan.h>
#include <stdint.h>
#include <string.h>

/* A hang is a failure: waits give up after this long. */
#define CT_WAIT_MS 60000

static inline uint64_t ct_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* A message: its first 8 bytes (if it has them) are the sequence number,
 * the rest a pattern of (src, seq, len). */
static inline void ct_fill(uint8_t *buf, size_t len, uint64_t src, uint64_t seq)
{
    uint64_t s = ct_mix(src << 48 ^ seq << 20 ^ len);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(ct_mix(s + i / 8) >> (8 * (i % 8)));
    if (len >= 8)
        memcpy(buf, &seq, 8);
}

static inline int ct_check(const uint8_t *buf, size_t len, uint64_t src, uint64_t seq)
{
    static _Thread_local uint8_t want[1u << 20];
    if (len > sizeof want)
        return 0;
    ct_fill(want, len, src, seq);
    return memcmp(buf, want, len) == 0;
}

/* The length of message seq of a stream with messages up to max. */
static inline size_t ct_len(uint64_t seq, size_t max)
{
    return (size_t)(ct_mix(seq ^ 0x5eed) % (max + 1));
}

#endif
