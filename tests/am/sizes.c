/* Active messages of every size class, each payload checked byte for byte
 * against a pattern of its size and sequence: empty, tiny, around the shm
 * eager limit (NETVM_SHM_EAGER) and the tcp one (63 KiB), around the size
 * from which tcp lands a payload in place, 64 KiB, 1 MiB, 16 MiB. As
 * one-way messages (blocking, and with a request, many at once), as
 * requests whose replies of the same classes land in reply_buf, with 0..6
 * arguments each way. Large payloads land where the handler names
 * (netvm_am_recv, its done callback's status checked); one the handler
 * does not take is discarded and the stream goes on. A reply longer than
 * reply_cap fails the request with NETVM_ERR_BOUNDS and leaves reply_buf
 * untouched. Rank 0 is the client of rank 1, then the other way round. */
#include "am_test.h"

enum { H_SEND = 1, H_REQ = 2, H_DISCARD = 3, H_ARGS = 4 };
enum { K_SEND = 1, K_REQ, K_REPLY, K_DISCARD };

static size_t sizes[32];
static unsigned nsizes;
static size_t shm_eager;

/* what this process served */
static _Atomic uint64_t n_send_ok, n_req_ok, n_discard, n_args_ok, n_large, n_loose;
static _Atomic int loose_reply_st = -1;

static void expect_class(netvm_ctx_t *ctx, const netvm_am_msg_t *m)
{
    int tcp;
    size_t eager = amt_eager(ctx, m->peer, &tcp);
    if (!m->len)
        return;
    /* tcp lands in place what does not fit its 64 KiB stage, and may land
     * shorter ones in place too when they come in pieces */
    if (tcp ? m->len >= 64 * 1024 && m->payload : (m->len > eager) != (m->payload == NULL))
        FAILF("a %zu-byte payload arrived %s (eager limit %zu on %s)", m->len,
              m->payload ? "eager" : "without its bytes", eager, tcp ? "tcp" : "shm");
    if (!m->payload)
        atomic_fetch_add(&n_large, 1);
}

/* --- one-way messages ---------------------------------------------------------- */

static void check_send_args(const netvm_am_msg_t *m)
{
    CHECK(m->nargs >= 2 && m->nargs <= NETVM_AM_MAX_ARGS);
    CHECK(m->args[0] == m->len);
    CHECK(m->nargs == 2 + m->args[1] % 5);
    for (unsigned i = 2; i < m->nargs; i++)
        CHECK(m->args[i] == amt_arg(m->args[1], i));
    CHECK(!m->has_token);
}

static void send_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    (void)ctx;
    CHECK_ST(st, NETVM_OK);
    CHECK(m->payload == buf);
    check_send_args(m);
    CHECK_PATTERN(buf, m->len, amt_seed(K_SEND, m->len, m->args[1]));
    free(buf);
    atomic_fetch_add(&n_send_ok, 1);
}

static int on_send(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->id == H_SEND);
    check_send_args(m);
    expect_class(ctx, m);
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK(buf);
        CHECK_OK(netvm_am_recv(ctx, m, buf, send_landed, buf));
        return NETVM_AM_DONE;
    }
    CHECK_PATTERN(m->payload, m->len, amt_seed(K_SEND, m->len, m->args[1]));
    atomic_fetch_add(&n_send_ok, 1);
    return NETVM_AM_DONE;
}

/* --- requests ------------------------------------------------------------------- */

/* args: request size, seq, reply size, reply nargs, reply status, loose */
static void reply_to(netvm_ctx_t *ctx, const netvm_am_msg_t *m)
{
    uint64_t seq = m->args[1], rsize = m->args[2];
    unsigned rn = (unsigned)m->args[3];
    uint64_t a[NETVM_AM_MAX_ARGS];
    for (unsigned i = 0; i < NETVM_AM_MAX_ARGS; i++)
        a[i] = amt_arg(seq ^ 0xabc, i);
    void *buf = rsize ? malloc(rsize) : NULL;
    CHECK(!rsize || buf);
    amt_fill(buf, rsize, amt_seed(K_REPLY, rsize, seq));
    netvm_status_t st = netvm_am_reply(ctx, &m->token, (netvm_status_t)m->args[4], a, rn, buf, rsize);
    free(buf);   /* a reply never keeps the caller's payload */
    if (m->nargs > 5 && m->args[5]) {
        atomic_store(&loose_reply_st, (int)st);
        atomic_fetch_add(&n_loose, 1);
    } else {
        CHECK_OK(st);
    }
    atomic_fetch_add(&n_req_ok, 1);
}

static void req_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    CHECK_ST(st, NETVM_OK);
    CHECK(m->payload == buf && m->has_token);
    CHECK_PATTERN(buf, m->len, amt_seed(K_REQ, m->len, m->args[1]));
    free(buf);
    reply_to(ctx, m);
}

static int on_req(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && m->nargs >= 5 && m->args[0] == m->len);
    expect_class(ctx, m);
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK(buf);
        CHECK_OK(netvm_am_recv(ctx, m, buf, req_landed, buf));
        return NETVM_AM_DONE;
    }
    CHECK_PATTERN(m->payload, m->len, amt_seed(K_REQ, m->len, m->args[1]));
    reply_to(ctx, m);
    return NETVM_AM_DONE;
}

/* A payload the handler does not take: discarded. A request is answered
 * without a payload. */
static int on_discard(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->nargs == 1 && m->args[0] == m->len);
    expect_class(ctx, m);
    if (m->payload)
        CHECK_PATTERN(m->payload, m->len, amt_seed(K_DISCARD, m->len, 0));
    if (m->has_token)
        CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, &m->args[0], 1, NULL, 0));
    atomic_fetch_add(&n_discard, 1);
    return NETVM_AM_DONE;
}

/* n arguments, n in the payload; a request is answered with n arguments */
static void args_check(netvm_ctx_t *ctx, const netvm_am_msg_t *m, const void *payload)
{
    uint64_t n;
    memcpy(&n, payload, 8);
    CHECK(n <= NETVM_AM_MAX_ARGS);
    if (m->nargs != n)
        FAILF("a message with %u arguments arrived with %u", (unsigned)n, m->nargs);
    for (unsigned i = 0; i < n; i++)
        CHECK(m->args[i] == amt_arg(n, i));
    if (m->has_token) {
        uint64_t a[NETVM_AM_MAX_ARGS];
        for (unsigned i = 0; i < NETVM_AM_MAX_ARGS; i++)
            a[i] = amt_arg(n + 100, i);
        CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, a, (unsigned)n, NULL, 0));
    }
    atomic_fetch_add(&n_args_ok, 1);
}

static void args_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    CHECK_ST(st, NETVM_OK);
    args_check(ctx, m, buf);
    free(buf);
}

static int on_args(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->len == 8);
    if (!m->payload) {   /* NETVM_SHM_EAGER below 8 */
        void *buf = malloc(8);
        CHECK_OK(netvm_am_recv(ctx, m, buf, args_landed, buf));
        return NETVM_AM_DONE;
    }
    args_check(ctx, m, m->payload);
    return NETVM_AM_DONE;
}

/* --- the client ----------------------------------------------------------------- */

static uint64_t seq_next = 1;

static void send_args(uint64_t *a, unsigned *n, size_t size, uint64_t seq)
{
    *n = 2 + (unsigned)(seq % 5);
    a[0] = size;
    a[1] = seq;
    for (unsigned i = 2; i < *n; i++)
        a[i] = amt_arg(seq, i);
}

/* One request and its checks. */
struct call {
    uint64_t seq;
    size_t qsize, rsize, cap;
    netvm_status_t rst;
    void *q, *r;
    netvm_am_result_t res;
    netvm_req_t *req;
};

static void call_start(netvm_ctx_t *ctx, int server, struct call *c, size_t qsize, size_t rsize, int nb)
{
    memset(c, 0, sizeof *c);
    c->seq = seq_next++;
    c->qsize = qsize;
    c->rsize = rsize;
    c->cap = rsize + (c->seq % 2 ? 64 : 0);   /* exact, or with room to spare */
    c->rst = c->seq % 3 == 0 ? NETVM_ERR_KEY : NETVM_OK;   /* the replier's status, passed on */
    c->q = qsize ? malloc(qsize) : NULL;
    c->r = malloc(c->cap + 1);
    CHECK((!qsize || c->q) && c->r);
    amt_fill(c->q, qsize, amt_seed(K_REQ, qsize, c->seq));
    memset(c->r, 0xEE, c->cap + 1);
    uint64_t a[5] = { qsize, c->seq, rsize, c->seq % 7, (uint64_t)c->rst };
    netvm_status_t st = netvm_am_request(ctx, server, H_REQ, a, 5, c->q, qsize, c->r, c->cap, &c->res,
                                         nb ? &c->req : NULL);
    CHECK_OK(st);
    if (!nb)
        CHECK(c->req == NULL);
}

static void call_check(struct call *c, int server)
{
    if (c->res.status != c->rst)
        FAILF("reply status %d, the replier gave %d", c->res.status, c->rst);
    CHECK(c->res.peer == server);
    CHECK(c->res.len == c->rsize);
    CHECK(c->res.nargs == c->seq % 7);
    for (unsigned i = 0; i < c->res.nargs; i++)
        CHECK(c->res.args[i] == amt_arg(c->seq ^ 0xabc, i));
    CHECK_PATTERN(c->r, c->rsize, amt_seed(K_REPLY, c->rsize, c->seq));
    const uint8_t *r = c->r;
    for (size_t i = c->rsize; i <= c->cap; i++)
        CHECK(r[i] == 0xEE);   /* nothing beyond the reply's length */
    free(c->q);
    free(c->r);
}

/* A reply that does not fit: NETVM_ERR_BOUNDS, reply_buf untouched. */
static void too_small(netvm_ctx_t *ctx, int server, size_t rsize, size_t cap)
{
    uint64_t seq = seq_next++;
    uint8_t *r = malloc(cap + 1);
    CHECK(r);
    memset(r, 0xEE, cap + 1);
    uint64_t a[6] = { 0, seq, rsize, 1, NETVM_OK, 1 };
    netvm_am_result_t res;
    netvm_status_t st = netvm_am_request(ctx, server, H_REQ, a, 6, NULL, 0, cap ? r : NULL, cap, &res, NULL);
    if (st != NETVM_ERR_BOUNDS)
        FAILF("a %zu-byte reply into %zu bytes of reply_buf: %s, wanted NETVM_ERR_BOUNDS", rsize, cap,
              netvm_strerror(st));
    for (size_t i = 0; i <= cap; i++)
        CHECK(r[i] == 0xEE);
    free(r);
}

static void client(netvm_ctx_t *ctx, int server)
{
    /* one-way, blocking: the payload may be reused when the call returns */
    for (unsigned i = 0; i < nsizes; i++) {
        size_t n = sizes[i];
        uint64_t seq = seq_next++, a[6];
        unsigned na;
        send_args(a, &na, n, seq);
        uint8_t *p = n ? malloc(n) : NULL;
        amt_fill(p, n, amt_seed(K_SEND, n, seq));
        CHECK_OK(netvm_am_send(ctx, server, H_SEND, a, na, p, n, NULL));
        if (n)
            memset(p, 0x11, n);   /* reused at once */
        free(p);
    }
    /* one-way with a request each, all at once */
    {
        uint8_t *p[32];
        netvm_req_t *rq[32];
        for (unsigned i = 0; i < nsizes; i++) {
            size_t n = sizes[i];
            uint64_t seq = seq_next++, a[6];
            unsigned na;
            send_args(a, &na, n, seq);
            p[i] = n ? malloc(n) : NULL;
            amt_fill(p[i], n, amt_seed(K_SEND, n, seq));
            CHECK_OK(netvm_am_send(ctx, server, H_SEND, a, na, p[i], n, &rq[i]));
        }
        CHECK_OK(netvm_wait_all(rq, nsizes));
        for (unsigned i = 0; i < nsizes; i++)
            free(p[i]);
    }
    /* payloads the handler does not take */
    {
        size_t big[3] = { shm_eager + 1, AMT_TCP_EAGER + 1, 1u << 20 };
        for (unsigned i = 0; i < 3; i++) {
            uint8_t *p = malloc(big[i]);
            CHECK(p);
            amt_fill(p, big[i], amt_seed(K_DISCARD, big[i], 0));
            uint64_t a = big[i];
            netvm_req_t *rq;
            CHECK_OK(netvm_am_send(ctx, server, H_DISCARD, &a, 1, p, big[i], NULL));
            CHECK_OK(netvm_am_send(ctx, server, H_DISCARD, &a, 1, p, big[i], &rq));
            CHECK_OK(netvm_wait(&rq));
            netvm_am_result_t res;
            CHECK_OK(netvm_am_request(ctx, server, H_DISCARD, &a, 1, p, big[i], NULL, 0, &res, NULL));
            if (res.status != NETVM_OK || res.len != 0 || res.nargs != 1 || res.args[0] != big[i] ||
                res.peer != server)
                FAILF("discarding request of %zu bytes: status %d len %zu nargs %u arg %llu peer %d", big[i],
                      res.status, res.len, res.nargs, (unsigned long long)res.args[0], res.peer);
            free(p);
        }
    }
    /* requests, blocking: reply of the request's size class */
    for (unsigned i = 0; i < nsizes; i++) {
        struct call c;
        call_start(ctx, server, &c, sizes[i], sizes[i], 0);
        call_check(&c, server);
    }
    /* requests, all at once, replies of the mirrored class */
    {
        static struct call c[32];
        for (unsigned i = 0; i < nsizes; i++)
            call_start(ctx, server, &c[i], sizes[i], sizes[nsizes - 1 - i], 1);
        for (unsigned i = 0; i < nsizes; i++) {
            CHECK_OK(netvm_wait(&c[i].req));
            call_check(&c[i], server);
        }
    }
    /* 0..6 arguments each way */
    for (uint64_t n = 0; n <= NETVM_AM_MAX_ARGS; n++) {
        uint64_t a[NETVM_AM_MAX_ARGS];
        for (unsigned i = 0; i < NETVM_AM_MAX_ARGS; i++)
            a[i] = amt_arg(n, i);
        CHECK_OK(netvm_am_send(ctx, server, H_ARGS, n ? a : NULL, (unsigned)n, &n, 8, NULL));
        netvm_am_result_t res;
        memset(&res, 0x5a, sizeof res);
        CHECK_OK(netvm_am_request(ctx, server, H_ARGS, n ? a : NULL, (unsigned)n, &n, 8, NULL, 0, &res, NULL));
        CHECK(res.status == NETVM_OK && res.nargs == n && res.len == 0 && res.peer == server);
        for (unsigned i = 0; i < n; i++)
            CHECK(res.args[i] == amt_arg(n + 100, i));
    }
    /* argument errors, refused before anything is sent */
    uint64_t a7[7] = { 0 };
    uint8_t b = 0;
    CHECK_ST(netvm_am_send(ctx, server, H_ARGS, a7, 7, &b, 1, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_send(ctx, server, H_ARGS, NULL, 1, &b, 1, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_send(ctx, server, H_ARGS, NULL, 0, NULL, 1, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_send(ctx, server, NETVM_AM_MAX_ID, NULL, 0, NULL, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_am_request(ctx, server, H_ARGS, NULL, 0, NULL, 0, NULL, 8, NULL, NULL), NETVM_ERR_INVAL);
    /* replies that do not fit */
    too_small(ctx, server, 1, 0);
    too_small(ctx, server, 8, 7);
    too_small(ctx, server, shm_eager + 1, shm_eager);
    too_small(ctx, server, AMT_TCP_EAGER + 1, AMT_TCP_EAGER);
    too_small(ctx, server, 1u << 20, (1u << 20) - 1);
    /* and the stream is fine afterwards */
    struct call c;
    call_start(ctx, server, &c, 1u << 20, 1u << 20, 0);
    call_check(&c, server);
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    shm_eager = (size_t)amt_env("NETVM_SHM_EAGER", 16384);
    size_t base[] = { 0, 1, 8, shm_eager ? shm_eager - 1 : 2, shm_eager, shm_eager + 1, 16 * 1024 + 1, 40000,
                      AMT_TCP_EAGER - 1, AMT_TCP_EAGER, AMT_TCP_EAGER + 1, 64 * 1024, 1u << 20, 16u << 20 };
    for (unsigned i = 0; i < sizeof base / sizeof base[0]; i++)
        sizes[nsizes++] = base[i];
    CHECK_OK(netvm_am_register(ctx, H_SEND, on_send, NULL));
    CHECK_OK(netvm_am_register(ctx, H_REQ, on_req, NULL));
    CHECK_OK(netvm_am_register(ctx, H_DISCARD, on_discard, NULL));
    CHECK_OK(netvm_am_register(ctx, H_ARGS, on_args, NULL));
    CHECK_ST(netvm_am_register(ctx, NETVM_AM_MAX_ID, on_args, NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_barrier(ctx));

    for (int dir = 0; dir < 2; dir++) {
        int cl = dir, sv = 1 - dir;
        if (rank == cl) {
            client(ctx, sv);
        } else {
            /* everything the client sent, served */
            WAIT_UNTIL(ctx, atomic_load(&n_send_ok) == 2 * nsizes);
            WAIT_UNTIL(ctx, atomic_load(&n_req_ok) == 2 * nsizes + 5 + 1);
            WAIT_UNTIL(ctx, atomic_load(&n_discard) == 9);
            WAIT_UNTIL(ctx, atomic_load(&n_args_ok) == 14);
            CHECK(atomic_load(&n_loose) == 5);
            /* every size above the eager limit took the large path */
            int tcp;
            size_t eager = amt_eager(ctx, cl, &tcp);
            uint64_t large = 0;
            for (unsigned i = 0; i < nsizes; i++)
                large += tcp ? sizes[i] >= 64 * 1024 : sizes[i] > eager;
            CHECK(atomic_load(&n_large) >= 4 * large);
            netvm_am_stats_t s = amt_stats(ctx);
            CHECK(s.dropped_replies == 0 && s.dropped_no_handler == 0 && s.deferred == 0);
        }
        CHECK_OK(netvm_barrier(ctx));
        netvm_am_stats_t s = amt_stats(ctx);
        CHECK(s.dropped_replies == 0 && s.dropped_no_handler == 0);
    }
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
