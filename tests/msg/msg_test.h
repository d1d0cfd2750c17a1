/* Helpers of the mailbox tests. */
#ifndef NV_TESTS_MSG_TEST_H
#define NV_TESTS_MSG_TEST_H

#define _GNU_SOURCE
#include "check.h"

#include <netvm/msg.h>

#include <stdint.h>
#include <string.h>

/* A payload that names its source, its sequence and its size. */
static inline uint8_t mt_byte(int src, uint64_t seq, size_t len, size_t j)
{
    uint64_t x = (uint64_t)src * 0x9e3779b97f4a7c15ull ^ seq * 0xbf58476d1ce4e5b9ull ^ len ^ (j * 0x100000001b3ull);
    return (uint8_t)(x ^ x >> 29 ^ x >> 47);
}

static inline void mt_fill(void *buf, int src, uint64_t seq, size_t len)
{
    for (size_t j = 0; j < len; j++)
        ((uint8_t *)buf)[j] = mt_byte(src, seq, len, j);
}

static inline int mt_ok(const void *buf, int src, uint64_t seq, size_t len)
{
    for (size_t j = 0; j < len; j++)
        if (((const uint8_t *)buf)[j] != mt_byte(src, seq, len, j))
            return 0;
    return 1;
}

#endif
