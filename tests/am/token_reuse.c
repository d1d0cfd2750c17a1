/* A stale reply must not complete a later call that happens to reuse its
 * call id. A call id is a request slot and that slot's 16-bit use count;
 * requests come from a LIFO pool, so one blocking call after another uses
 * the same slot, and after 65536 calls the id of the first one is back.
 * Rank 1 keeps the token of rank 0's first call (answered at once) and
 * answers it again, with a marker of its own, just before the genuine reply
 * to every later call whose id is that first call's: the caller must get
 * the genuine reply every time and count every replay in dropped_replies.
 * Rank 0 calls until rank 1 has replayed once (at most 4 * 65536 calls). */
#include "am_test.h"

enum { H_FIRST = 1, H_CALL = 2 };
enum { GENUINE = 0x600d, STALE = 0x57a1e };

static netvm_am_token_t first;
static _Atomic int have_first;
static _Atomic uint64_t replays;

static uint32_t call_id(const netvm_am_token_t *t) { return (uint32_t)t->w[1]; }

static int on_first(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token);
    first = m->token;
    atomic_store(&have_first, 1);
    uint64_t a[2] = { GENUINE, 0 };
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, a, 2, NULL, 0));
    return NETVM_AM_DONE;
}

static int on_call(netvm_ctx_t *ctx, netvm_am_msg_t *m, void *arg)
{
    (void)arg;
    CHECK(m->has_token && atomic_load(&have_first));
    if (call_id(&m->token) == call_id(&first)) {
        uint64_t a[2] = { STALE, 0 };
        CHECK_OK(netvm_am_reply(ctx, &first, NETVM_OK, a, 2, NULL, 0));
        atomic_fetch_add(&replays, 1);
    }
    uint64_t a[2] = { GENUINE, atomic_load(&replays) };
    CHECK_OK(netvm_am_reply(ctx, &m->token, NETVM_OK, a, 2, NULL, 0));
    return NETVM_AM_DONE;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    CHECK_OK(netvm_am_register(ctx, H_FIRST, on_first, NULL));
    CHECK_OK(netvm_am_register(ctx, H_CALL, on_call, NULL));
    CHECK_OK(netvm_barrier(ctx));
    uint64_t seen = 0;
    if (rank == 0) {
        netvm_am_result_t res;
        CHECK_OK(netvm_am_request(ctx, 1, H_FIRST, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
        CHECK(res.nargs == 2 && res.args[0] == GENUINE);
        uint64_t calls = 0;
        while (seen < 1) {
            if (++calls > 4 * 65536)
                FAILF("no call reused the first call's id in %llu calls", (unsigned long long)calls - 1);
            memset(&res, 0, sizeof res);
            CHECK_OK(netvm_am_request(ctx, 1, H_CALL, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
            if (res.nargs != 2 || res.args[0] != GENUINE)
                FAILF("call %llu completed by a stale reply (marker %#llx)", (unsigned long long)calls,
                      (unsigned long long)res.args[0]);
            seen = res.args[1];
        }
        WAIT_UNTIL(ctx, amt_stats(ctx).dropped_replies >= seen);
        netvm_am_stats_t s = amt_stats(ctx);
        if (s.dropped_replies != seen)
            FAILF("%llu replays, %llu replies dropped", (unsigned long long)seen,
                  (unsigned long long)s.dropped_replies);
        printf("%llu calls, %llu stale replies dropped\n", (unsigned long long)calls, (unsigned long long)seen);
    }
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", rank);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
