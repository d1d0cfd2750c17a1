/* Helpers shared by the thread tests: a context at a chosen level,
 * deterministic byte patterns, and waits bounded by a count with a
 * deadline that only catches hangs. */
#ifndef NV_TESTS_THR_H
#define NV_TESTS_THR_H

#include "check.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* Far above any normal duration, sanitizers included: only a hang hits it. */
#define THR_HANG_S 240.0

static inline uint64_t thr_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t thr_seed(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return thr_mix(a ^ thr_mix(b ^ thr_mix(c ^ thr_mix(d))));
}

/* len bytes of the stream of seed h (the same seed gives the same bytes) */
static inline void thr_fill(void *dst, size_t len, uint64_t h)
{
    uint8_t *p = dst;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = thr_mix(h + i);
        size_t n = len - i < 8 ? len - i : 8;
        memcpy(p + i, &v, n);
    }
}

/* the offset of the first byte that differs from the stream, or -1 */
static inline long thr_diff(const void *src, size_t len, uint64_t h)
{
    const uint8_t *p = src;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = thr_mix(h + i);
        size_t n = len - i < 8 ? len - i : 8;
        if (memcmp(p + i, &v, n) != 0)
            return (long)i;
    }
    return -1;
}

static inline uint64_t thr_sum(const void *src, size_t len)
{
    const uint8_t *p = src;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* A context at thread level `level` (-1: cfg NULL, the environment decides). */
static inline netvm_ctx_t *thr_init(int level)
{
    netvm_ctx_t *ctx;
    if (level < 0) {
        CHECK_OK(netvm_init(&ctx, NULL));
    } else {
        netvm_config_t cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.thread_level = level;
        CHECK_OK(netvm_init(&ctx, &cfg));
    }
    check_rank = netvm_rank(ctx);
    return ctx;
}

/* Serve progress until *v reaches want (a count of things peers send);
 * the deadline only catches a hang. */
static inline void thr_wait_count(netvm_ctx_t *ctx, _Atomic uint64_t *v, uint64_t want, const char *what)
{
    double end = now_s() + THR_HANG_S;
    while (atomic_load(v) < want) {
        netvm_progress(ctx);
        sched_yield();
        if (now_s() > end)
            FAILF("%s: %llu of %llu after %.0f s", what, (unsigned long long)atomic_load(v),
                  (unsigned long long)want, THR_HANG_S);
    }
    if (atomic_load(v) != want)
        FAILF("%s: %llu, wanted %llu", what, (unsigned long long)atomic_load(v), (unsigned long long)want);
}

#endif
