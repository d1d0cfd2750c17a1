/* A reply token answered by another peer than the one asked (3-way calls):
 *  - rank 0 asks rank 1, whose handler forwards the request (arguments
 *    and payload, large ones landed first) to rank 2, which answers: the
 *    result names peer 2, arguments and payload are rank 2's;
 *  - a chain 0 -> 1 -> 2 -> 0: the origin's own handler answers its call;
 *  - the token copied out of a handler and answered later by rank 1's
 *    application thread, outside any handler;
 *  - the token sent to rank 2 as plain data and answered by rank 2's
 *    application thread.
 * Every answer is checked against what its call asked for, and no reply is
 * dropped anywhere. */
#include "am_test.h"

enum { H_FWD = 1, H_ANSWER = 2, H_STASH = 3, H_TOKEN = 4 };
enum { K_REQ = 1, K_REPLY };

#define NSTASH 24

static int rank;
static _Atomic int n_answered, n_forwarded;
static netvm_am_token_t stash[NSTASH];
static uint64_t stash_seq[NSTASH], stash_rsize[NSTASH];
static _Atomic int n_stashed, n_claimed;

/* args: seq, request size, reply size, hops: the ranks to forward to
 * (each hop consumes one, 0xff ends), answer rank */
static uint64_t hop_next(uint64_t hops) { return hops & 0xff; }

static void answer(netvm_ctx_t *ctx, const netvm_am_token_t *t, uint64_t seq, size_t rsize)
{
    uint64_t a[4] = { seq, (uint64_t)rank, rsize, amt_arg(seq, 9) };
    void *buf = rsize ? malloc(rsize) : NULL;
    amt_fill(buf, rsize, amt_seed(K_REPLY, rsize, seq));
    atomic_fetch_add(&n_answered, 1);   /* before the caller can see it */
    CHECK_OK(netvm_am_reply(ctx, t, NETVM_OK, a, 4, buf, rsize));
    free(buf);
}

/* The message's payload is here (in buf): pass it on or answer. */
static void serve(netvm_ctx_t *ctx, const netvm_am_msg_t *m, const void *payload)
{
    CHECK(m->has_token && m->nargs == 4);
    uint64_t seq = m->args[0], hops = m->args[3];
    CHECK(m->len == m->args[1]);
    CHECK_PATTERN(payload, m->len, amt_seed(K_REQ, m->len, seq));
    if (hop_next(hops) != 0xff) {
        uint64_t a[4] = { seq, m->args[1], m->args[2], hops >> 8 };
        atomic_fetch_add(&n_forwarded, 1);
        CHECK_OK(netvm_am_forward(ctx, (int)hop_next(hops), H_FWD, &m->token, a, 4, payload, m->len));
        return;
    }
    answer(ctx, &m->token, seq, (size_t)m->args[2]);
}

static void landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    CHECK_ST(st, NETVM_OK);
    serve(ctx, m, buf);
    free(buf);
}

static int on_fwd(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    if (m->len && !m->payload) {
        void *buf = malloc(m->len);
        CHECK(buf);
        CHECK_OK(netvm_am_recv(ctx, m, buf, landed, buf));
        return NETVM_AM_DONE;
    }
    serve(ctx, m, m->payload);
    return NETVM_AM_DONE;
}

/* Keep the token; the application thread answers later. */
static int on_stash(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)arg;
    CHECK(m->has_token && m->nargs == 3 && m->len == 0);
    int i = atomic_fetch_add(&n_claimed, 1);
    CHECK(i < NSTASH);
    stash[i] = m->token;
    stash_seq[i] = m->args[0];
    stash_rsize[i] = m->args[2];
    atomic_fetch_add(&n_stashed, 1);
    return NETVM_AM_DONE;
}

/* A token as plain data: a one-way message's payload. */
static void token_here(const netvm_am_msg_t *m, const void *payload)
{
    int i = atomic_fetch_add(&n_claimed, 1);
    CHECK(i < NSTASH);
    memcpy(&stash[i], payload, sizeof stash[i]);
    stash_seq[i] = m->args[0];
    stash_rsize[i] = m->args[1];
    atomic_fetch_add(&n_stashed, 1);
}

static void token_landed(netvm_ctx_t *ctx, netvm_am_msg_t *m, netvm_status_t st, void *buf)
{
    (void)ctx;
    CHECK_ST(st, NETVM_OK);
    token_here(m, buf);
    free(buf);
}

static int on_token(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(!m->has_token && m->nargs == 2 && m->len == sizeof(netvm_am_token_t));
    if (!m->payload) {   /* NETVM_SHM_EAGER below 32 */
        void *buf = malloc(m->len);
        CHECK_OK(netvm_am_recv(ctx, m, buf, token_landed, buf));
        return NETVM_AM_DONE;
    }
    token_here(m, m->payload);
    return NETVM_AM_DONE;
}

struct call {
    uint64_t seq;
    size_t rsize;
    void *q, *r;
    netvm_am_result_t res;
    netvm_req_t *req;
};

static uint64_t seq_next = 1;

static void call(netvm_ctx_t *ctx, struct call *c, int to, unsigned id, size_t qsize, size_t rsize,
                 uint64_t hops, int nb)
{
    memset(c, 0, sizeof *c);
    c->seq = seq_next++;
    c->rsize = rsize;
    c->q = qsize ? malloc(qsize) : NULL;
    c->r = malloc(rsize + 1);
    amt_fill(c->q, qsize, amt_seed(K_REQ, qsize, c->seq));
    memset(c->r, 0xEE, rsize + 1);
    uint64_t a[4] = { c->seq, qsize, rsize, hops };
    unsigned na = id == H_STASH ? 3 : 4;
    CHECK_OK(netvm_am_request(ctx, to, id, a, na, c->q, qsize, c->r, rsize + 1, &c->res, nb ? &c->req : NULL));
}

static void check_answer(struct call *c, int by)
{
    if (c->res.peer != by)
        FAILF("call %llu answered by peer %d, wanted %d", (unsigned long long)c->seq, c->res.peer, by);
    CHECK(c->res.status == NETVM_OK && c->res.nargs == 4);
    CHECK(c->res.args[0] == c->seq && c->res.args[1] == (uint64_t)by && c->res.args[2] == c->rsize &&
          c->res.args[3] == amt_arg(c->seq, 9));
    CHECK(c->res.len == c->rsize);
    CHECK_PATTERN(c->r, c->rsize, amt_seed(K_REPLY, c->rsize, c->seq));
    CHECK(((uint8_t *)c->r)[c->rsize] == 0xEE);
    free(c->q);
    free(c->r);
}

#define HOPS(a, b, c) ((uint64_t)(a) | (uint64_t)(b) << 8 | (uint64_t)(c) << 16)

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 3);
    CHECK_OK(netvm_am_register(ctx, H_FWD, on_fwd, NULL));
    CHECK_OK(netvm_am_register(ctx, H_STASH, on_stash, NULL));
    CHECK_OK(netvm_am_register(ctx, H_TOKEN, on_token, NULL));
    CHECK_OK(netvm_barrier(ctx));
    size_t e = (size_t)amt_env("NETVM_SHM_EAGER", 16384);
    size_t qs[] = { 0, 100, e + 1, 1u << 20 };
    size_t rs[] = { 0, 8, e + 1, AMT_TCP_EAGER + 1, 1u << 20 };
    int nq = sizeof qs / sizeof qs[0], nr = sizeof rs / sizeof rs[0];

    /* 0 -> 1 -> 2, which answers; blocking, then all at once */
    if (rank == 0) {
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < nr; j++) {
                struct call c;
                call(ctx, &c, 1, H_FWD, qs[i], rs[j], HOPS(2, 0xff, 0), 0);
                check_answer(&c, 2);
            }
        static struct call cs[32];
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < nr; j++)
                call(ctx, &cs[i * nr + j], 1, H_FWD, qs[i], rs[nr - 1 - j], HOPS(2, 0xff, 0), 1);
        for (int k = 0; k < nq * nr; k++) {
            CHECK_OK(netvm_wait(&cs[k].req));
            check_answer(&cs[k], 2);
        }
        /* 0 -> 1 -> 2 -> 0: the origin answers itself */
        for (int i = 0; i < nq; i++) {
            struct call c;
            call(ctx, &c, 1, H_FWD, qs[i], rs[i], HOPS(2, 0, 0xff), 0);
            check_answer(&c, 0);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        CHECK(atomic_load(&n_forwarded) == 2 * nq * nr + nq && atomic_load(&n_answered) == 0);
    } else if (rank == 2) {
        CHECK(atomic_load(&n_forwarded) == nq && atomic_load(&n_answered) == 2 * nq * nr);
    } else {
        CHECK(atomic_load(&n_forwarded) == 0 && atomic_load(&n_answered) == nq);
    }

    /* tokens kept past the handler: rank 1's application thread answers
     * the first half, rank 2's (sent the token as data) the second */
    struct call cs[NSTASH];
    if (rank == 0) {
        for (int i = 0; i < NSTASH; i++)
            call(ctx, &cs[i], 1, H_STASH, 0, rs[i % nr], 0, 1);
    } else if (rank == 1) {
        WAIT_UNTIL(ctx, atomic_load(&n_stashed) == NSTASH);
        for (int i = NSTASH / 2; i < NSTASH; i++) {
            uint64_t a[2] = { stash_seq[i], stash_rsize[i] };
            CHECK_OK(netvm_am_send(ctx, 2, H_TOKEN, a, 2, &stash[i], sizeof stash[i], NULL));
        }
        /* reversed: nothing depends on the order */
        for (int i = NSTASH / 2 - 1; i >= 0; i--)
            answer(ctx, &stash[i], stash_seq[i], (size_t)stash_rsize[i]);
    } else {
        WAIT_UNTIL(ctx, atomic_load(&n_stashed) == NSTASH / 2);
        for (int i = 0; i < NSTASH / 2; i++)
            answer(ctx, &stash[i], stash_seq[i], (size_t)stash_rsize[i]);
    }
    if (rank == 0) {
        uint64_t first = cs[0].seq;
        for (int i = 0; i < NSTASH; i++) {
            CHECK(cs[i].seq == first + (uint64_t)i);
            CHECK_OK(netvm_wait(&cs[i].req));
            check_answer(&cs[i], i < NSTASH / 2 ? 1 : 2);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_am_stats_t s = amt_stats(ctx);
    CHECK(s.dropped_replies == 0 && s.dropped_no_handler == 0);
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
