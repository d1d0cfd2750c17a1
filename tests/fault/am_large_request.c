/* A request whose payload is larger than the link's eager size completes
 * with its reply, not when its payload is out. (It did complete early: the
 * request was also the token of the payload's transfer, so a call returned
 * NETVM_OK with an empty result as soon as the payload was sent or taken,
 * and the reply later completed whatever request reused the slot.)
 *
 * Rank 1 makes CALLS requests of LEN bytes to rank 0, whose handler
 * answers each with one argument (42 + the request's argument): every
 * call must return NETVM_OK with that answer from rank 0.
 *
 *   am_large_request LEN CALLS
 *
 * Before the fix LEN 4096 failed on shm (about a quarter of the calls),
 * 100000 on both links (on tcp nearly every call). */
#include "check.h"

#include <string.h>

static int answer(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)a;
    uint64_t v = 42 + m->args[0];
    CHECK_OK(netvm_am_reply(c, &m->token, NETVM_OK, &v, 1, NULL, 0));
    return NETVM_AM_DONE;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3);
    size_t len = strtoull(argv[1], NULL, 0);
    int calls = atoi(argv[2]);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    CHECK_OK(netvm_am_register(ctx, 3, answer, NULL));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        char *p = calloc(1, len);
        CHECK(p);
        int bad = 0;
        for (int i = 0; i < calls; i++) {
            netvm_am_result_t r;
            memset(&r, 0, sizeof r);
            uint64_t a = (uint64_t)i;
            netvm_status_t st = netvm_am_request(ctx, 0, 3, &a, 1, p, len, NULL, 0, &r, NULL);
            if (st != NETVM_OK || r.status != NETVM_OK || r.peer != 0 || r.nargs != 1 || r.args[0] != 42 + a) {
                if (bad++ < 5)
                    fprintf(stderr, "call %d: %s, answer from peer %d with %u arguments (%llu)\n", i,
                            netvm_strerror(st), r.peer, r.nargs, (unsigned long long)r.args[0]);
            }
        }
        if (bad)
            FAILF("%d of %d requests of %zu bytes did not return their answer", bad, calls, len);
        free(p);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
