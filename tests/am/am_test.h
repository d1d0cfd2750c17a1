/* Helpers shared by the active-message tests: payload patterns that depend
 * on size and sequence, argument values, the link's eager limit, and a
 * bounded wait for a condition some handler makes true. */
#ifndef NV_TESTS_AM_TEST_H
#define NV_TESTS_AM_TEST_H

#define _GNU_SOURCE
#include "check.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The tcp link's eager limit: its stage buffer (64 KiB) less 1 KiB. */
#define AMT_TCP_EAGER (64 * 1024 - 1024)

static inline uint64_t amt_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The seed of a payload: what it is (kind), its size and its sequence. */
static inline uint64_t amt_seed(unsigned kind, uint64_t size, uint64_t seq)
{
    return amt_mix((uint64_t)kind << 56 ^ size << 20 ^ seq);
}

/* Fill / check len bytes with the pattern of seed: word i is mix(seed+i). */
static inline void amt_fill(void *buf, size_t len, uint64_t seed)
{
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = amt_mix(seed + i / 8);
        memcpy(p + i, &w, 8);
    }
    if (i < len) {
        uint64_t w = amt_mix(seed + i / 8);
        memcpy(p + i, &w, len - i);
    }
}

/* The offset of the first wrong byte, or SIZE_MAX if all are right. */
static inline size_t amt_bad(const void *buf, size_t len, uint64_t seed)
{
    const uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = amt_mix(seed + i / 8);
        if (memcmp(p + i, &w, 8) != 0)
            break;
    }
    for (; i < len; i++) {
        uint64_t w = amt_mix(seed + i / 8);
        if (p[i] != (uint8_t)(w >> (8 * (i % 8))))
            return i;
    }
    return SIZE_MAX;
}

#define CHECK_PATTERN(buf, len, seed) do { \
    size_t bad_ = amt_bad((buf), (len), (seed)); \
    if (bad_ != SIZE_MAX) \
        FAILF("payload of %zu bytes wrong at byte %zu", (size_t)(len), bad_); \
} while (0)

/* Argument i of a message with sequence seq. */
static inline uint64_t amt_arg(uint64_t seq, unsigned i)
{
    return amt_mix(seq * 8 + i + 0x5151);
}

static inline long amt_env(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 0) : dflt;
}

/* The eager limit of the link to peer: payloads longer than this arrive
 * without msg->payload (shm exactly so; tcp also lands shorter payloads in
 * place when they arrive in pieces). */
static inline size_t amt_eager(netvm_ctx_t *ctx, int peer, int *is_tcp)
{
    netvm_peer_info_t pi;
    CHECK_OK(netvm_peer_info(ctx, peer, &pi));
    int tcp = strcmp(pi.link, "tcp") == 0;
    if (is_tcp)
        *is_tcp = tcp;
    return tcp ? AMT_TCP_EAGER : (size_t)amt_env("NETVM_SHM_EAGER", 16384);
}

/* Serve until cond holds; a hang (far beyond any normal run, sanitizers
 * included) fails with what was waited for. */
#define AMT_HANG_S 120.0
#define WAIT_UNTIL(ctx, cond) do { \
    double t0_ = now_s(); \
    unsigned it_ = 0; \
    while (!(cond)) { \
        netvm_progress(ctx); \
        if ((++it_ & 255) == 0) { \
            if (now_s() - t0_ > AMT_HANG_S) \
                FAILF("hung waiting for %s", #cond); \
            sched_yield(); \
        } \
    } } while (0)

static inline netvm_am_stats_t amt_stats(netvm_ctx_t *ctx)
{
    netvm_am_stats_t s;
    CHECK_OK(netvm_am_stats(ctx, &s));
    return s;
}

#endif
