/* A distributed queue: rank 0 consumes, every other rank produces `count`
 * items of random lengths up to max_msg. Every item arrives exactly once,
 * in order per producer, with its contents; the queue reports its end once
 * every producer left. A producer slot beyond the queue's is refused.
 * With "kill", the last producer dies (SIGKILL) after its items are
 * flushed: the consumer still gets all of them, then NETVM_ERR_PEER for it
 * once, then the others' items and the end (run with --keep-going).
 *   dq COUNT RING_BYTES MAX_MSG [kill] */
#include "chan_test.h"

#include <signal.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    CHECK(argc >= 4);
    uint64_t count = strtoull(argv[1], NULL, 0);
    size_t ring = strtoull(argv[2], NULL, 0), max_msg = strtoull(argv[3], NULL, 0);
    int kill_last = argc > 4 && strcmp(argv[4], "kill") == 0;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    int producers = size - 1;
    CHECK(producers >= 3);
    static uint8_t buf[1u << 20];
    CHECK(max_msg <= sizeof buf);

    if (rank == 0) {
        netvm_chan_opts_t o = { .ring_bytes = ring, .max_msg = max_msg };
        netvm_dq_t *dq;
        CHECK_OK(netvm_dq_create(ctx, "work", producers, &o, &dq));
        CHECK_OK(netvm_barrier(ctx));   /* created */
        CHECK_OK(netvm_barrier(ctx));   /* every producer joined */
        netvm_dq_prod_t *extra;
        CHECK_ST(netvm_dq_join(ctx, 0, "work", 0, &extra), NETVM_ERR_AGAIN);
        uint64_t *next = calloc((size_t)size, sizeof *next);
        int *dead = calloc((size_t)size, sizeof *dead);
        uint64_t total = 0, peers_dead = 0;
        for (;;) {
            size_t len;
            int prod, from;
            netvm_status_t st = netvm_dq_recv(dq, buf, sizeof buf, &len, &prod, &from, CT_WAIT_MS);
            if (st == NETVM_ERR_STATE)
                break;
            if (st == NETVM_ERR_PEER) {
                CHECK(kill_last && from == size - 1 && !dead[from]);
                CHECK(next[from] == count);   /* everything it wrote came first */
                dead[from] = 1;
                peers_dead++;
                continue;
            }
            CHECK_OK(st);
            CHECK(from >= 1 && from < size && prod >= 0 && prod < producers && !dead[from]);
            uint64_t i = next[from]++;
            if (i >= count || len != ct_len(i ^ (uint64_t)from << 32, max_msg)
                || !ct_check(buf, len, (uint64_t)from, i))
                FAILF("item %llu of rank %d: length %zu or contents wrong, or one too many",
                      (unsigned long long)i, from, len);
            total++;
        }
        for (int r = 1; r < size; r++)
            CHECK(next[r] == count);
        CHECK(peers_dead == (uint64_t)kill_last);
        printf("consumer: %llu items from %d producers, each once and in order\n",
               (unsigned long long)total, producers);
        CHECK_OK(netvm_dq_destroy(dq));
        free(next);
        free(dead);
    } else {
        CHECK_OK(netvm_barrier(ctx));
        netvm_dq_prod_t *p;
        CHECK_OK(netvm_dq_join(ctx, 0, "work", CT_WAIT_MS, &p));
        CHECK(netvm_dq_max_msg(p) == max_msg);
        CHECK_OK(netvm_barrier(ctx));
        for (uint64_t i = 0; i < count; i++) {
            size_t len = ct_len(i ^ (uint64_t)rank << 32, max_msg);
            ct_fill(buf, len, (uint64_t)rank, i);
            CHECK_OK(netvm_dq_send(p, buf, len, CT_WAIT_MS));
        }
        CHECK_OK(netvm_dq_flush(p));
        if (kill_last && rank == size - 1)
            raise(SIGKILL);
        CHECK_OK(netvm_dq_leave(p));
        printf("producer %d ok\n", rank);
    }
    if (!kill_last)
        CHECK_OK(netvm_barrier(ctx));
    netvm_finalize(ctx);
    return 0;
}
