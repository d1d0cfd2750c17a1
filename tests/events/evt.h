/* Helpers shared by the event tests: time, a deterministic generator, an
 * event buffer that fails the test on queue overflow, and printing. */
#ifndef NV_TESTS_EVT_H
#define NV_TESTS_EVT_H

#include "check.h"

#include <inttypes.h>
#include <sched.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A failure that need not stop the test: reported at once, and the test
 * fails at its end (check_deferred), so what follows still gets checked. */
static int deferred_failures;
#define DEFER_FAILF(...) do { \
    fprintf(stderr, "FAIL rank %d %s:%d: ", check_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr); \
    deferred_failures++; \
} while (0)

static inline void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

/* splitmix64: a mixing function and a generator built on it. */
static inline uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

typedef struct { uint64_t s; } rng_t;
static inline uint64_t rng_next(rng_t *r) { r->s += 0x9e3779b97f4a7c15ull; return mix64(r->s); }
/* uniform in [0, n) (n > 0; the bias is irrelevant here) */
static inline uint64_t rng_below(rng_t *r, uint64_t n) { return rng_next(r) % n; }
static inline rng_t rng_seed(uint64_t a, uint64_t b, uint64_t c)
{
    rng_t r = { mix64(a ^ mix64(b ^ mix64(c))) };
    return r;
}

/* Fill len bytes with the stream of seed h (same seed, same bytes). */
static inline void fill_pattern(void *dst, size_t len, uint64_t h)
{
    uint8_t *p = dst;
    rng_t r = { h };
    while (len >= 8) {
        uint64_t v = rng_next(&r);
        memcpy(p, &v, 8);
        p += 8;
        len -= 8;
    }
    if (len) {
        uint64_t v = rng_next(&r);
        memcpy(p, &v, len);
    }
}

/* Index of the first byte where mem differs from the pattern, or -1;
 * scratch holds 2 * len bytes. mem may be being written while we look, so
 * it is copied once and the copy compared: memcmp on mem itself may call
 * a half-written payload complete (glibc's vector memcmp reloads the bytes
 * where it saw a difference, and says "equal" if the writer got there in
 * between, without looking at the bytes after). Every byte of the copy is
 * a value that byte had, and a payload byte changes once, so a copy that
 * matches means the payload was complete. */
static inline long pattern_mismatch(const void *mem, size_t len, uint64_t h, void *scratch)
{
    uint8_t *want = scratch, *seen = want + len;
    memcpy(seen, mem, len);
    fill_pattern(want, len, h);
    if (memcmp(seen, want, len) == 0)
        return -1;
    for (size_t i = 0; i < len; i++)
        if (seen[i] != want[i])
            return (long)i;
    return -1;
}

static inline const char *ev_type_name(unsigned t)
{
    switch (t) {
    case NETVM_EV_TRIPWIRE:        return "TRIPWIRE";
    case NETVM_EV_REMOTE_TRIPWIRE: return "REMOTE_TRIPWIRE";
    case NETVM_EV_NOTIFY:          return "NOTIFY";
    case NETVM_EV_REQUESTER:       return "REQUESTER";
    case NETVM_EV_COMPLETER:       return "COMPLETER";
    case NETVM_EV_RESPONDER:       return "RESPONDER";
    case NETVM_EV_COUNTER:         return "COUNTER";
    case NETVM_EV_OVERFLOW:        return "OVERFLOW";
    default:                       return "?";
    }
}

static inline void ev_print(const char *what, const netvm_event_t *e)
{
    fprintf(stderr, "rank %d %s: type %s(%u) access %u rank %d id %u status %u value 0x%" PRIx64
            " addr 0x%" PRIx64 " len %" PRIu64 "\n", check_rank, what, ev_type_name(e->type), e->type,
            e->access, e->rank, e->id, e->status, e->value, e->addr, e->len);
}

/* At the end of a test: fail if anything was deferred. */
static inline void check_deferred(void)
{
    if (deferred_failures)
        FAILF("%d failure(s) reported above", deferred_failures);
}

/* Events taken from the queue in batches and handed out one at a time. An
 * overflow event fails the test: every test bounds what it leaves queued. */
#define EVBUF_CAP 256
typedef struct {
    netvm_event_t ev[EVBUF_CAP];
    int head, n;
} evbuf_t;

static inline void evbuf_check_overflow(const netvm_event_t *e)
{
    if (e->type == NETVM_EV_OVERFLOW) {
        ev_print("queue overflow", e);
        FAILF("the event queue overflowed (%" PRIu64 " events lost)", e->value);
    }
}

/* Next event; NETVM_ERR_TIMEOUT if none within timeout_ms. */
static inline netvm_status_t evbuf_next(netvm_ctx_t *ctx, evbuf_t *b, netvm_event_t *out, int timeout_ms)
{
    if (b->n == 0) {
        int n = -1;
        netvm_status_t st = netvm_evq_wait(ctx, b->ev, EVBUF_CAP, &n, timeout_ms);
        if (st != NETVM_OK)
            return st;
        if (n < 1 || n > EVBUF_CAP)
            FAILF("netvm_evq_wait returned NETVM_OK with n = %d", n);
        b->head = 0;
        b->n = n;
    }
    *out = b->ev[b->head++];
    b->n--;
    evbuf_check_overflow(out);
    return NETVM_OK;
}

/* Non-blocking: 1 and an event, or 0. */
static inline int evbuf_poll(netvm_ctx_t *ctx, evbuf_t *b, netvm_event_t *out)
{
    if (b->n == 0) {
        int n = netvm_evq_poll(ctx, b->ev, EVBUF_CAP);
        if (n < 0 || n > EVBUF_CAP)
            FAILF("netvm_evq_poll returned %d", n);
        if (n == 0)
            return 0;
        b->head = 0;
        b->n = n;
    }
    *out = b->ev[b->head++];
    b->n--;
    evbuf_check_overflow(out);
    return 1;
}

static inline int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* A seed every rank of the job agrees on: EVT_SEED if set, else the job id. */
static inline uint64_t job_seed(void)
{
    const char *s = getenv("EVT_SEED");
    if (s && *s)
        return strtoull(s, NULL, 0);
    const char *j = getenv("NETVM_JOB_ID");
    uint64_t h = 1469598103934665603ull;
    for (; j && *j; j++)
        h = (h ^ (uint8_t)*j) * 1099511628211ull;
    return h;
}

/* Spin on a local word written by peers, serving progress meanwhile (a job
 * may run without a progress thread). Fails after timeout_s. */
static inline uint64_t spin_until_ge(netvm_ctx_t *ctx, const uint64_t *w, uint64_t want, double timeout_s,
                                     const char *what)
{
    double t0 = now_s();
    unsigned spins = 0;
    for (;;) {
        uint64_t v = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        if (v >= want)
            return v;
        netvm_progress(ctx);
        if (++spins % 64 == 0) {
            sched_yield();
            if (now_s() - t0 > timeout_s)
                FAILF("timed out after %.1f s waiting for %s >= %" PRIu64 " (is %" PRIu64 ")",
                      timeout_s, what, want, v);
        }
    }
}

#endif
