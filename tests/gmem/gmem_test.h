/* Helpers of the gmem tests: page patterns, resident memory measured by
 * the kernel (mincore), a small PRNG. */
#ifndef NV_TESTS_GMEM_TEST_H
#define NV_TESTS_GMEM_TEST_H

#include "check.h"
#include <netvm/gmem.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define GPAGE NETVM_GMEM_PAGE

/* The test's context (a job of one): the remote store's servers are
 * reached through it; the local store does not need it. */
static inline netvm_ctx_t *gt_ctx(void)
{
    static netvm_ctx_t *ctx;
    if (!ctx)
        CHECK_OK(netvm_init(&ctx, NULL));
    return ctx;
}

static inline uint64_t gt_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Fill page p with the pattern of version v (v 0 is all zeros). */
static inline void gt_fill(unsigned char *page, uint64_t p, uint32_t v)
{
    uint64_t *w = (uint64_t *)page;
    for (unsigned i = 0; i < GPAGE / 8; i++)
        w[i] = v ? (p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)v << 32) ^ i : 0;
}

static inline int gt_check(const unsigned char *page, uint64_t p, uint32_t v)
{
    const uint64_t *w = (const uint64_t *)page;
    for (unsigned i = 0; i < GPAGE / 8; i++)
        if (w[i] != (v ? (p * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)v << 32) ^ i : 0))
            return 0;
    return 1;
}

/* Pages of [addr, addr + len) the kernel has mapped now. */
static inline size_t gt_resident(void *addr, size_t len)
{
    static unsigned char vec[1 << 20];
    size_t n = len / GPAGE, res = 0;
    for (size_t off = 0; off < n; off += sizeof vec) {
        size_t k = n - off < sizeof vec ? n - off : sizeof vec;
        CHECK(mincore((char *)addr + off * GPAGE, k * GPAGE, vec) == 0);
        for (size_t i = 0; i < k; i++)
            res += vec[i] & 1;
    }
    return res;
}

#endif
