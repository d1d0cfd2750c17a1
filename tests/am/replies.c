/* Replies the origin must drop: each one counted in
 * netvm_am_stats().dropped_replies, none ever delivered. Rank 0 calls,
 * rank 1 answers:
 *  - a second reply with the same token (no payload, 8 bytes, 1 MiB): the
 *    caller has the first one's arguments and bytes, the second's never
 *    land in reply_buf;
 *  - replies with a token one bit off in each word while the call is
 *    pending (flipped origin: not a peer, and payload key: not the call
 *    key's, both refused at the replier; call id, key; payload index with
 *    a payload): the call completes with
 *    the genuine reply that follows;
 *  - a reply after its call completed, with the call's request slot
 *    already serving a newer pending call: that one gets its own reply;
 *  - a reply after its call timed out (blocking wait), and after a call
 *    that nobody waited for timed out (its continuation runs once, with
 *    NETVM_ERR_TIMEOUT).
 * The counts are exact: rank 0 dropped exactly what rank 1 forged or
 * repeated, rank 1 dropped nothing. */
#include "am_test.h"
#include "wire/am.h"

enum { H_TWICE = 1, H_FORGE = 2, H_KEEP = 3, H_HOLD = 4, H_GO = 5 };
enum { K_REPLY = 1 };
enum { GENUINE = 0x600d, SECOND = 0x2222, FORGED = 0xbad, STALE = 0x57a1e };

#define TIMEOUT_MS 1500
#define MAXHOLD 16

static netvm_am_token_t held[MAXHOLD];
static _Atomic int nheld;
static _Atomic int forged_sent, forged_refused;

static void reply(netvm_ctx_t *ctx, const netvm_am_token_t *t, uint64_t marker, uint64_t seq, size_t len,
                  netvm_status_t want)
{
    uint64_t a[2] = { marker, seq };
    void *p = len ? malloc(len) : NULL;
    amt_fill(p, len, amt_seed(K_REPLY, len, seq ^ marker));
    netvm_status_t st = netvm_am_reply(ctx, t, NETVM_OK, a, 2, p, len);
    if (st != want)
        FAILF("reply (marker %#llx, %zu bytes): %s, wanted %s", (unsigned long long)marker, len,
              netvm_strerror(st), netvm_strerror(want));
    free(p);
}

/* args: seq, reply size */
static int on_twice(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 2);
    reply(ctx, &m->token, GENUINE, m->args[0], (size_t)m->args[1], NETVM_OK);
    reply(ctx, &m->token, SECOND, m->args[0], (size_t)m->args[1], NETVM_OK);
    return NETVM_AM_DONE;
}

/* What the replier's netvm_am_reply says to a token with a bit flipped:
 * an origin that is not a peer, a payload index the wire cannot carry, no
 * payload index for a payload, a payload key that is not the call key's
 * (the wire carries only the call key). The others reach the origin. */
static netvm_status_t refused(unsigned w, unsigned bit, size_t len)
{
    if (w == 0)
        return NETVM_ERR_PEER;
    if (w == 3)
        return NETVM_ERR_KEY;
    if (w == 1 && bit > 32)
        return NETVM_ERR_INVAL;
    if (w == 1 && bit == 32 && len)
        return NETVM_ERR_BOUNDS;
    return NETVM_OK;
}

/* One bit flipped in word w of the token. */
static void forge(netvm_ctx_t *ctx, const netvm_am_msg_t *m, unsigned w, unsigned bit, size_t len)
{
    netvm_am_token_t t = m->token;
    t.w[w] ^= 1ull << bit;
    /* a forger who alters the call key derives the payload key from it as
     * netvm does, so the forgery reaches the origin, whose check it meets */
    if (w == 2 && (t.w[1] >> 32) == 1)
        t.w[3] = nv_am_pkey(t.w[2]);
    netvm_status_t want = refused(w, bit, len);
    reply(ctx, &t, FORGED, m->args[0], len, want);
    atomic_fetch_add(want != NETVM_OK ? &forged_refused : &forged_sent, 1);
}

/* The forgeries of one call, then its genuine reply. */
static const struct { unsigned w, bit; int with_payload, without; } forgeries[] = {
    { 0, 0, 1, 1 }, { 0, 40, 1, 1 }, { 0, 63, 1, 1 },        /* origin */
    { 1, 0, 1, 1 }, { 1, 15, 1, 1 }, { 1, 16, 1, 1 }, { 1, 31, 1, 1 },   /* call: slot, generation */
    { 1, 32, 1, 0 }, { 1, 33, 1, 1 }, { 1, 63, 1, 1 },        /* payload index: guards a payload */
    { 2, 0, 1, 1 }, { 2, 31, 1, 1 }, { 2, 63, 1, 1 },        /* key */
    { 3, 0, 1, 0 }, { 3, 50, 1, 0 },                         /* payload key: guards a payload */
};
#define NFORGE (sizeof forgeries / sizeof forgeries[0])

/* How many forgeries reach the origin (sent) or are refused at once. */
static unsigned forged_count(int sent)
{
    unsigned n = 0;
    for (unsigned i = 0; i < NFORGE; i++) {
        if (forgeries[i].with_payload && (refused(forgeries[i].w, forgeries[i].bit, 8) == NETVM_OK) == sent)
            n++;
        if (forgeries[i].without && (refused(forgeries[i].w, forgeries[i].bit, 0) == NETVM_OK) == sent)
            n++;
    }
    return n;
}

/* args: seq, reply size */
static int on_forge(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 2);
    size_t len = (size_t)m->args[1];
    for (unsigned i = 0; i < NFORGE; i++) {
        if (forgeries[i].with_payload)
            forge(ctx, m, forgeries[i].w, forgeries[i].bit, len ? len : 8);
        if (forgeries[i].without)
            forge(ctx, m, forgeries[i].w, forgeries[i].bit, 0);
    }
    reply(ctx, &m->token, GENUINE, m->args[0], len, NETVM_OK);
    return NETVM_AM_DONE;
}

/* Keep the token (answered now, H_KEEP, or later by H_GO). */
static int on_hold(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 2);
    int i = atomic_load(&nheld);
    CHECK(i < MAXHOLD);
    held[i] = m->token;
    atomic_store(&nheld, i + 1);
    if (m->id == H_KEEP)
        reply(ctx, &m->token, GENUINE, m->args[0], (size_t)m->args[1], NETVM_OK);
    return NETVM_AM_DONE;
}

/* args: which held token, marker, seq, size; deferred until that token is here */
static int on_go(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(!m->has_token && m->nargs == 4);
    if ((int)m->args[0] >= atomic_load(&nheld))
        return NETVM_AM_DEFER;
    reply(ctx, &held[m->args[0]], m->args[1], m->args[2], (size_t)m->args[3], NETVM_OK);
    return NETVM_AM_DONE;
}

/* --- the caller ------------------------------------------------------------------ */

static uint64_t seq_next = 1;
static uint64_t want_dropped;

static void go(netvm_ctx_t *ctx, int idx, uint64_t marker, uint64_t seq, size_t len)
{
    uint64_t a[4] = { (uint64_t)idx, marker, seq, len };
    CHECK_OK(netvm_am_send(ctx, 1, H_GO, a, 4, NULL, 0, NULL));
}

static void expect_reply(const netvm_am_result_t *res, const uint8_t *buf, size_t cap, uint64_t marker,
                         uint64_t seq, size_t len)
{
    if (res->nargs != 2 || res->args[0] != marker || res->args[1] != seq)
        FAILF("call %llu: reply with marker %#llx, wanted %#llx", (unsigned long long)seq,
              (unsigned long long)res->args[0], (unsigned long long)marker);
    CHECK(res->status == NETVM_OK && res->peer == 1 && res->len == len);
    CHECK_PATTERN(buf, len, amt_seed(K_REPLY, len, seq ^ marker));
    for (size_t i = len; i < cap; i++)
        CHECK(buf[i] == 0xEE);
}

static void dropped_now(netvm_ctx_t *ctx, uint64_t more)
{
    want_dropped += more;
    WAIT_UNTIL(ctx, amt_stats(ctx).dropped_replies >= want_dropped);
    uint64_t d = amt_stats(ctx).dropped_replies;
    if (d != want_dropped)
        FAILF("%llu replies dropped, wanted %llu", (unsigned long long)d, (unsigned long long)want_dropped);
}

static _Atomic int then_runs;
static _Atomic int then_status = -1;

static void then_fn(netvm_ctx_t *ctx, netvm_status_t st, void *arg)
{
    (void)ctx;
    (void)arg;
    atomic_store(&then_status, (int)st);
    atomic_fetch_add(&then_runs, 1);
}

static void caller(netvm_ctx_t *ctx)
{
    size_t cap = (1u << 20) + 64;
    uint8_t *buf = malloc(cap);
    CHECK(buf);
    size_t lens[] = { 0, 8, 1u << 20 };
    netvm_am_result_t res;

    /* repeated */
    for (unsigned i = 0; i < 3; i++) {
        uint64_t seq = seq_next++, a[2] = { seq, lens[i] };
        memset(buf, 0xEE, cap);
        CHECK_OK(netvm_am_request(ctx, 1, H_TWICE, a, 2, NULL, 0, buf, cap, &res, NULL));
        expect_reply(&res, buf, cap, GENUINE, seq, lens[i]);
        dropped_now(ctx, 1);
        expect_reply(&res, buf, cap, GENUINE, seq, lens[i]);   /* the second never landed */
    }

    /* forged while pending */
    for (unsigned i = 0; i < 3; i++) {
        uint64_t seq = seq_next++, a[2] = { seq, lens[i] };
        memset(buf, 0xEE, cap);
        netvm_req_t *rq;
        CHECK_OK(netvm_am_request(ctx, 1, H_FORGE, a, 2, NULL, 0, buf, cap, &res, &rq));
        CHECK_OK(netvm_wait(&rq));
        expect_reply(&res, buf, cap, GENUINE, seq, lens[i]);
        dropped_now(ctx, forged_count(1));
        expect_reply(&res, buf, cap, GENUINE, seq, lens[i]);
    }

    /* stale: its call is over, its request slot serves a newer call */
    int nh = 0;
    for (unsigned i = 0; i < 3; i++) {
        uint64_t s1 = seq_next++, s2 = seq_next++;
        uint64_t a1[2] = { s1, lens[i] }, a2[2] = { s2, lens[i] };
        memset(buf, 0xEE, cap);
        CHECK_OK(netvm_am_request(ctx, 1, H_KEEP, a1, 2, NULL, 0, buf, cap, &res, NULL));
        expect_reply(&res, buf, cap, GENUINE, s1, lens[i]);
        int old = nh++;
        memset(buf, 0xEE, cap);
        netvm_req_t *rq;
        CHECK_OK(netvm_am_request(ctx, 1, H_HOLD, a2, 2, NULL, 0, buf, cap, &res, &rq));
        int cur = nh++;
        go(ctx, old, STALE, s1, lens[i]);      /* the old token first */
        go(ctx, cur, GENUINE, s2, lens[i]);
        CHECK_OK(netvm_wait(&rq));
        expect_reply(&res, buf, cap, GENUINE, s2, lens[i]);
        dropped_now(ctx, 1);
        expect_reply(&res, buf, cap, GENUINE, s2, lens[i]);
    }

    /* stale: its call timed out */
    for (unsigned i = 0; i < 3; i++) {
        uint64_t seq = seq_next++, a[2] = { seq, lens[i] };
        memset(buf, 0xEE, cap);
        CHECK_ST(netvm_am_request(ctx, 1, H_HOLD, a, 2, NULL, 0, buf, cap, &res, NULL), NETVM_ERR_TIMEOUT);
        go(ctx, nh++, STALE, seq, lens[i]);
        dropped_now(ctx, 1);
        for (size_t k = 0; k < cap; k++)
            CHECK(buf[k] == 0xEE);
    }
    free(buf);
}

/* A call nobody waits for times out too: its continuation runs once. */
static void detached_timeout(netvm_ctx_t *ctx, int *nh)
{
    uint64_t seq = seq_next++, a[2] = { seq, 8 };
    uint8_t buf[16];
    memset(buf, 0xEE, sizeof buf);
    netvm_am_result_t res;
    netvm_req_t *rq;
    CHECK_OK(netvm_am_request(ctx, 1, H_HOLD, a, 2, NULL, 0, buf, sizeof buf, &res, &rq));
    CHECK_OK(netvm_req_then(ctx, &rq, then_fn, NULL));
    CHECK(rq == NULL);
    WAIT_UNTIL(ctx, atomic_load(&then_runs) > 0);
    CHECK(atomic_load(&then_status) == NETVM_ERR_TIMEOUT);
    go(ctx, (*nh)++, STALE, seq, 8);
    dropped_now(ctx, 1);
    CHECK(atomic_load(&then_runs) == 1);
    for (size_t k = 0; k < sizeof buf; k++)
        CHECK(buf[k] == 0xEE);
}

int main(int argc, char **argv)
{
    netvm_ctx_t *ctx;
    netvm_config_t cfg = { .timeout_ms = TIMEOUT_MS };
    CHECK_OK(netvm_init(&ctx, &cfg));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    int detached = argc > 1 && strcmp(argv[1], "detached") == 0;
    CHECK_OK(netvm_am_register(ctx, H_TWICE, on_twice, NULL));
    CHECK_OK(netvm_am_register(ctx, H_FORGE, on_forge, NULL));
    CHECK_OK(netvm_am_register(ctx, H_KEEP, on_hold, NULL));
    CHECK_OK(netvm_am_register(ctx, H_HOLD, on_hold, NULL));
    CHECK_OK(netvm_am_register(ctx, H_GO, on_go, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        if (detached) {
            int nh = 0;
            detached_timeout(ctx, &nh);
        } else {
            caller(ctx);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_am_stats_t s = amt_stats(ctx);
    if (rank == 0) {
        CHECK(s.dropped_replies == want_dropped);
        CHECK(s.replies == 0);
    } else {
        CHECK(s.dropped_replies == 0);
        if (!detached) {
            CHECK(atomic_load(&forged_sent) == 3 * (int)forged_count(1));
            CHECK(atomic_load(&forged_refused) == 3 * (int)forged_count(0));
        }
    }
    CHECK(s.dropped_no_handler == 0);
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
