/* Every rank calls every other at once while serving them: blocking
 * requests, windows of nonblocking ones, one-way messages, small and large
 * payloads (1 MiB both ways at once, where two streams fill each other's
 * buffers). Every reply is checked against its call; the counts are exact:
 * each rank served exactly what the others sent it, and nothing was
 * dropped. Run with 2 and 3 ranks. */
#include "am_test.h"

enum { H_CALL = 1, H_ONEWAY = 2 };
enum { K_Q = 1, K_R, K_ONE };

#define NBLOCK 300
#define NWIN   16
#define NWINDOWS 20
#define NONEWAY 500
#define NLARGE 8

static int rank, size;
static _Atomic uint64_t served_calls[16], served_oneway[16];

static void call_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf);

/* args: seq, request size, reply size */
static void answer(netvm_ctx_t *ctx, const netvm_am_msg_t *m, const void *payload)
{
    uint64_t seq = m->args[0];
    size_t rs = (size_t)m->args[2];
    CHECK_PATTERN(payload, m->len, amt_seed(K_Q, m->len, seq ^ (uint64_t)m->peer << 40));
    void *r = rs ? malloc(rs) : NULL;
    amt_fill(r, rs, amt_seed(K_R, rs, seq ^ (uint64_t)rank << 40));
    uint64_t a[3] = { seq, (uint64_t)rank, rs };
    atomic_fetch_add(&served_calls[m->peer], 1);
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, a, 3, r, rs));
    free(r);
}

static void call_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    CHECK_ST(st, NETVM_OK);
    answer(ctx, m, buf);
    free(buf);
}

static int on_call(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs == 3 && m->len == m->args[1]);
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK_OK(netvm_am_recv(ctx, m, buf, call_landed, buf));
        return NETVM_AM_DONE;
    }
    answer(ctx, m, m->payload);
    return NETVM_AM_DONE;
}

static void one_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    (void)ctx;
    CHECK_ST(st, NETVM_OK);
    CHECK_PATTERN(buf, m->len, amt_seed(K_ONE, m->len, m->args[0] ^ (uint64_t)m->peer << 40));
    free(buf);
    atomic_fetch_add(&served_oneway[m->peer], 1);
}

static int on_oneway(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(!m->has_token && m->nargs == 1);
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK_OK(netvm_am_recv(ctx, m, buf, one_landed, buf));
        return NETVM_AM_DONE;
    }
    CHECK_PATTERN(m->payload, m->len, amt_seed(K_ONE, m->len, m->args[0] ^ (uint64_t)m->peer << 40));
    atomic_fetch_add(&served_oneway[m->peer], 1);
    return NETVM_AM_DONE;
}

/* --- the caller side ------------------------------------------------------------------- */

struct call {
    int to;
    uint64_t seq;
    size_t qs, rs;
    uint8_t *q, *r;
    netvm_am_result_t res;
    netvm_req_t *req;
};

static uint64_t seq_next;

static void start(netvm_ctx_t *ctx, struct call *c, int to, size_t qs, size_t rs, int nb)
{
    c->to = to;
    c->seq = seq_next++;
    c->qs = qs;
    c->rs = rs;
    c->q = qs ? malloc(qs) : NULL;
    c->r = malloc(rs + 1);
    amt_fill(c->q, qs, amt_seed(K_Q, qs, c->seq ^ (uint64_t)rank << 40));
    uint64_t a[3] = { c->seq, qs, rs };
    c->req = NULL;
    CHECK_OK(netvm_am_request(ctx, to, H_CALL, a, 3, c->q, qs, c->r, rs + 1, &c->res, nb ? &c->req : NULL));
}

static void finish(struct call *c)
{
    CHECK(c->res.status == NETVM_OK && c->res.peer == c->to && c->res.nargs == 3);
    CHECK(c->res.args[0] == c->seq && c->res.args[1] == (uint64_t)c->to && c->res.len == c->rs);
    CHECK_PATTERN(c->r, c->rs, amt_seed(K_R, c->rs, c->seq ^ (uint64_t)c->to << 40));
    free(c->q);
    free(c->r);
}

static size_t small_size(uint64_t i) { return (size_t)(i * 37 % 3000); }

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    CHECK(size >= 2 && size <= 16);
    CHECK_OK(netvm_am_register(ctx, H_CALL, on_call, NULL));
    CHECK_OK(netvm_am_register(ctx, H_ONEWAY, on_oneway, NULL));
    CHECK_OK(netvm_barrier(ctx));
    double t0 = now_s();

    uint64_t calls_to = 0, oneway_to = 0;   /* per peer */
    /* blocking calls, interleaved with one-way messages, round robin */
    for (int i = 0; i < NBLOCK; i++) {
        int to = (rank + 1 + i % (size - 1)) % size;
        struct call c;
        start(ctx, &c, to, small_size((uint64_t)i), small_size((uint64_t)i + 7), 0);
        finish(&c);
    }
    calls_to += NBLOCK / (size - 1);
    for (int i = 0; i < NONEWAY; i++) {
        int to = (rank + 1 + i % (size - 1)) % size;
        uint64_t seq = seq_next++;
        size_t n = small_size((uint64_t)i + 3);
        uint8_t *p = n ? malloc(n) : NULL;
        amt_fill(p, n, amt_seed(K_ONE, n, seq ^ (uint64_t)rank << 40));
        CHECK_OK(netvm_am_send(ctx, to, H_ONEWAY, &seq, 1, p, n, NULL));
        free(p);
    }
    oneway_to += NONEWAY / (size - 1);
    double t1 = now_s();
    /* windows of nonblocking calls to every peer */
    for (int w = 0; w < NWINDOWS; w++) {
        static struct call cs[16][NWIN];
        for (int k = 0; k < NWIN; k++)
            for (int to = 0; to < size; to++)
                if (to != rank)
                    start(ctx, &cs[to][k], to, small_size((uint64_t)(w * NWIN + k)), 8 + (size_t)k, 1);
        for (int k = 0; k < NWIN; k++)
            for (int to = 0; to < size; to++)
                if (to != rank) {
                    CHECK_OK(netvm_wait(&cs[to][k].req));
                    finish(&cs[to][k]);
                }
    }
    calls_to += NWINDOWS * NWIN;
    double t2 = now_s();
    /* large both ways at once: requests and one-way messages of 1 MiB */
    for (int i = 0; i < NLARGE; i++) {
        struct call cs[16];
        netvm_req_t *sr[16];
        uint8_t *sp[16];
        for (int to = 0; to < size; to++) {
            if (to == rank)
                continue;
            start(ctx, &cs[to], to, 1u << 20, 1u << 20, 1);
            uint64_t seq = seq_next++;
            sp[to] = malloc(1u << 20);
            amt_fill(sp[to], 1u << 20, amt_seed(K_ONE, 1u << 20, seq ^ (uint64_t)rank << 40));
            CHECK_OK(netvm_am_send(ctx, to, H_ONEWAY, &seq, 1, sp[to], 1u << 20, &sr[to]));
        }
        for (int to = 0; to < size; to++) {
            if (to == rank)
                continue;
            CHECK_OK(netvm_wait(&cs[to].req));
            finish(&cs[to]);
            CHECK_OK(netvm_wait(&sr[to]));
            free(sp[to]);
        }
    }
    calls_to += NLARGE;
    oneway_to += NLARGE;
    double t3 = now_s();

    /* everything the others sent here was served, exactly */
    for (int from = 0; from < size; from++) {
        if (from == rank)
            continue;
        WAIT_UNTIL(ctx, atomic_load(&served_calls[from]) >= calls_to && atomic_load(&served_oneway[from]) >= oneway_to);
    }
    CHECK_OK(netvm_barrier(ctx));
    for (int from = 0; from < size; from++) {
        uint64_t c = atomic_load(&served_calls[from]), o = atomic_load(&served_oneway[from]);
        if (from == rank ? c || o : c != calls_to || o != oneway_to)
            FAILF("served %llu calls and %llu messages of rank %d, wanted %llu and %llu", (unsigned long long)c,
                  (unsigned long long)o, from, (unsigned long long)calls_to, (unsigned long long)oneway_to);
    }
    netvm_am_stats_t s = amt_stats(ctx);
    CHECK(s.dropped_replies == 0 && s.dropped_no_handler == 0 && s.deferred == 0);
    uint64_t peers = (uint64_t)size - 1;
    CHECK(s.replies == calls_to * peers);
    printf("rank %d ok: blocking %.2f s, windows %.2f s, large %.2f s\n", rank, t1 - t0, t2 - t1, t3 - t2);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
