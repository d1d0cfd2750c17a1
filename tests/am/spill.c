/* Replies into a receiver's full ring. A reply never waits, so on shm
 * what does not fit waits at the sender, in a list drained into the ring
 * as the receiver takes messages in (docs/links.md). Run without progress
 * threads (NETVM_PROGRESS_THREAD=0), so a rank takes nothing in unless it
 * calls into netvm:
 *  - rank 1 sends BURST nonblocking requests to rank 0 and then spins on a
 *    word of its own memory, calling nothing;
 *  - rank 0's handler replies to each with a payload the size of the
 *    link's eager limit (each takes about 1/16 of the shm ring, so most
 *    wait in the list), then rank 0 sets rank 1's word with a put and
 *    keeps serving;
 *  - rank 1 takes its replies in: each request completes once, with its
 *    own reply's arguments and payload intact.
 * The same program runs over tcp, where nothing spills. */
#include "am_test.h"

enum { H_ASK = 1, H_DONE = 2 };

#define BURST 100

static size_t plen;
static _Atomic int answered, done;
static uint8_t *payload;

static int on_ask(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->nargs == 1 && m->has_token);
    uint64_t seq = m->args[0];
    uint64_t a[2] = { seq, amt_arg(seq, 0) };
    amt_fill(payload, plen, amt_seed(1, plen, seq));
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, a, 2, payload, plen));
    atomic_fetch_add(&answered, 1);
    return NETVM_AM_DONE;
}

static int on_done(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)ctx;
    (void)m;
    (void)arg;
    atomic_store(&done, 1);
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    int is_tcp;
    plen = amt_eager(ctx, 1 - rank, &is_tcp);
    if (plen > 16384)
        plen = 16384;   /* tcp's limit is larger; one size for both */
    payload = malloc(plen);
    CHECK(payload);
    CHECK_OK(netvm_am_register(ctx, H_ASK, on_ask, NULL));
    CHECK_OK(netvm_am_register(ctx, H_DONE, on_done, NULL));
    void *p;
    netvm_seg_t *seg;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RW, "spill-go", &p, &seg));
    _Atomic uint64_t *go = p;
    netvm_rseg_t *r = NULL;
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        CHECK_OK(netvm_import(ctx, 1, "spill-go", &r));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        uint8_t *bufs = malloc(BURST * plen);
        netvm_am_result_t *res = calloc(BURST, sizeof *res);
        netvm_req_t *reqs[BURST];
        CHECK(bufs && res);
        for (uint64_t seq = 0; seq < BURST; seq++)
            CHECK_OK(netvm_am_request(ctx, 0, H_ASK, &seq, 1, NULL, 0, bufs + seq * plen, plen, &res[seq],
                                      &reqs[seq]));
        /* nothing taken in until rank 0 has sent all it can (on tcp the
         * put that says so needs this rank's engine: no wait there) */
        double t0 = now_s();
        while (!is_tcp && !atomic_load(go)) {
            sched_yield();
            if (now_s() - t0 > AMT_HANG_S)
                FAILF("rank 0 never said its burst was sent (%d s)", (int)AMT_HANG_S);
        }
        CHECK_OK(netvm_wait_all(reqs, BURST));
        for (uint64_t seq = 0; seq < BURST; seq++) {
            CHECK(res[seq].status == NETVM_OK && res[seq].nargs == 2 && res[seq].len == plen);
            CHECK(res[seq].args[0] == seq && res[seq].args[1] == amt_arg(seq, 0));
            CHECK_PATTERN(bufs + seq * plen, plen, amt_seed(1, plen, seq));
        }
        CHECK(amt_stats(ctx).dropped_replies == 0);
        free(bufs);
        free(res);
        CHECK_OK(netvm_am_send(ctx, 0, H_DONE, NULL, 0, NULL, 0, NULL));
        printf("spill: %d replies of %zu bytes, each once and intact\n", BURST, plen);
    } else {
        WAIT_UNTIL(ctx, atomic_load(&answered) == BURST);
        uint64_t one = 1;
        CHECK_OK(netvm_put(ctx, r, 0, &one, sizeof one, 0));
        WAIT_UNTIL(ctx, atomic_load(&done));
    }
    CHECK_OK(netvm_barrier(ctx));
    free(payload);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
