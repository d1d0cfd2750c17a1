/* Helpers of the fault tests: exported memory with a hole that comes and
 * goes behind netvm's back, patterns, and an event buffer.
 *
 * A region is page-aligned anonymous memory; [hole_off, hole_off+hole_len)
 * inside it is the part that goes away. How it goes (the hole modes):
 *   unmap  munmap, and back with mmap(MAP_FIXED) (zeros come back);
 *   prot   mprotect(PROT_NONE), and back to read-write (contents kept);
 *   ro     mprotect(PROT_READ): writes into it fail, reads work;
 *   trunc  the hole is a shared mapping of a memfd of its own, truncated to
 *          0 (an access is SIGBUS, not SIGSEGV) and grown back (zeros).
 * None of them tells netvm: the segment stays exported over all of it. */
#ifndef NV_TESTS_FAULT_H
#define NV_TESTS_FAULT_H

#define _GNU_SOURCE
#include "check.h"

#include <errno.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum hole_mode { HOLE_UNMAP, HOLE_PROT, HOLE_RO, HOLE_TRUNC };

static inline int hole_mode_parse(const char *s)
{
    if (!strcmp(s, "unmap")) return HOLE_UNMAP;
    if (!strcmp(s, "prot"))  return HOLE_PROT;
    if (!strcmp(s, "ro"))    return HOLE_RO;
    if (!strcmp(s, "trunc")) return HOLE_TRUNC;
    FAILF("unknown hole mode '%s' (unmap, prot, ro, trunc)", s);
}

/* Does the mode keep the hole's bytes while it is away? */
static inline bool hole_keeps(int mode) { return mode == HOLE_PROT || mode == HOLE_RO; }

typedef struct {
    uint8_t *base;
    size_t   len, hole_off, hole_len;
    int      mode;
    int      memfd;
    bool     open;    /* the hole is there (the range is gone) */
} region_t;

static inline void region_init(region_t *r, size_t len, size_t hole_off, size_t hole_len, int mode)
{
    memset(r, 0, sizeof *r);
    r->len = len;
    r->hole_off = hole_off;
    r->hole_len = hole_len;
    r->mode = mode;
    r->memfd = -1;
    r->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(r->base != MAP_FAILED);
    if (mode == HOLE_TRUNC) {
        r->memfd = memfd_create("netvm-fault-hole", MFD_CLOEXEC);
        CHECK(r->memfd >= 0);
        CHECK(ftruncate(r->memfd, (off_t)hole_len) == 0);
        void *p = mmap(r->base + hole_off, hole_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, r->memfd, 0);
        CHECK(p == r->base + hole_off);
    }
}

/* The range goes away. */
static inline void hole_open(region_t *r)
{
    uint8_t *h = r->base + r->hole_off;
    switch (r->mode) {
    case HOLE_UNMAP: CHECK(munmap(h, r->hole_len) == 0); break;
    case HOLE_PROT:  CHECK(mprotect(h, r->hole_len, PROT_NONE) == 0); break;
    case HOLE_RO:    CHECK(mprotect(h, r->hole_len, PROT_READ) == 0); break;
    case HOLE_TRUNC: CHECK(ftruncate(r->memfd, 0) == 0); break;
    }
    r->open = true;
}

/* It comes back (zeros, or what it held: hole_keeps). */
static inline void hole_close(region_t *r)
{
    uint8_t *h = r->base + r->hole_off;
    switch (r->mode) {
    case HOLE_UNMAP: {
        void *p = mmap(h, r->hole_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        CHECK(p == h);
        break;
    }
    case HOLE_PROT:
    case HOLE_RO:    CHECK(mprotect(h, r->hole_len, PROT_READ | PROT_WRITE) == 0); break;
    case HOLE_TRUNC: CHECK(ftruncate(r->memfd, (off_t)r->hole_len) == 0); break;
    }
    r->open = false;
}

static inline bool overlaps(size_t a, size_t alen, size_t b, size_t blen)
{
    return alen && blen && a < b + blen && b < a + alen;
}

/* Does [off, off+len) touch the hole? */
static inline bool in_hole(const region_t *r, size_t off, size_t len)
{
    return overlaps(off, len, r->hole_off, r->hole_len);
}

/* splitmix64, and patterns built on it. */
static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Bytes of seed h (same seed, same bytes); never all zero in a word.
 * Written in blocks of 8 KiB: dst may be memory netvm's progress thread
 * read from (a put's source sent from where it lies, an exported buffer),
 * synchronised through the network where ThreadSanitizer cannot see it;
 * the report it makes and suppresses costs time per racing call, so the
 * fewer calls the better. */
static inline void fill_pattern(void *dst, size_t len, uint64_t h)
{
    uint8_t *p = dst;
    uint64_t s = h, block[1024];
    while (len) {
        size_t n = len < sizeof block ? len : sizeof block;
        for (size_t i = 0; i < (n + 7) / 8; i++) {
            s += 0x9e3779b97f4a7c15ull;
            block[i] = mix64(s) | 1;
        }
        memcpy(p, block, n);
        p += n;
        len -= n;
    }
}

/* The first index where a and b differ, or -1. */
static inline long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    if (memcmp(a, b, n) == 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return -1;
}

static inline int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* Events taken in batches and handed out one at a time; an overflow fails. */
#define EVBUF_CAP 256
typedef struct {
    netvm_event_t ev[EVBUF_CAP];
    int head, n;
} evbuf_t;

static inline int evbuf_poll(netvm_ctx_t *ctx, evbuf_t *b, netvm_event_t *out)
{
    if (b->n == 0) {
        int n = netvm_evq_poll(ctx, b->ev, EVBUF_CAP);
        CHECK(n >= 0 && n <= EVBUF_CAP);
        if (n == 0)
            return 0;
        b->head = 0;
        b->n = n;
    }
    *out = b->ev[b->head++];
    b->n--;
    if (out->type == NETVM_EV_OVERFLOW)
        FAILF("the event queue overflowed (%" PRIu64 " events lost)", out->value);
    return 1;
}

static inline netvm_status_t evbuf_next(netvm_ctx_t *ctx, evbuf_t *b, netvm_event_t *out, int timeout_ms)
{
    if (b->n == 0) {
        int n = -1;
        netvm_status_t st = netvm_evq_wait(ctx, b->ev, EVBUF_CAP, &n, timeout_ms);
        if (st != NETVM_OK)
            return st;
        CHECK(n >= 1 && n <= EVBUF_CAP);
        b->head = 0;
        b->n = n;
    }
    *out = b->ev[b->head++];
    b->n--;
    if (out->type == NETVM_EV_OVERFLOW)
        FAILF("the event queue overflowed (%" PRIu64 " events lost)", out->value);
    return NETVM_OK;
}

#endif
