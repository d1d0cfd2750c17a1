/* Channels and a distributed queue (include/netvm/chan.h).
 *
 * Part 1, a channel: rank 1 creates channel "lines" for messages from rank
 * 0; rank 0 connects by rank and name, sends `count` messages of varying
 * length and closes the channel. The messages land in rank 1's memory
 * without rank 1 doing anything; rank 1 takes them in order and, after the
 * last, gets NETVM_ERR_STATE: the sender closed it.
 *
 * Part 2, a distributed queue (3 ranks or more): rank 0 creates queue
 * "jobs" with a ring per producer; every other rank joins it and puts
 * `count` items; rank 0 takes them all, each exactly once and in order per
 * producer, and gets NETVM_ERR_STATE once every producer has left.
 *
 *   netvm run -n 4 ./channel [count]
 */
#include <netvm/chan.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "channel rank %d: %s: %s\n", rank, #x, netvm_strerror(s_)); exit(1); } } while (0)
#define WAIT_MS 30000   /* a peer that stops answering is an error, not a hang */

static int rank;

struct item {
    int32_t  producer;  /* the rank that made it */
    uint32_t pad;
    uint64_t seq;
};

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    uint64_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000;
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    rank = netvm_rank(ctx);
    int size = netvm_size(ctx);
    if (size < 2) {
        fprintf(stderr, "channel: run with at least 2 ranks (netvm run -n 4)\n");
        netvm_finalize(ctx);
        return 2;
    }

    /* --- part 1: a channel from rank 0 to rank 1 --- */
    char line[200];
    if (rank == 1) {
        netvm_chan_rx_t *rx;
        TRY(netvm_chan_create(ctx, 0, "lines", NULL, &rx));   /* the receiver creates */
        uint64_t got = 0, bad = 0;
        for (;;) {
            size_t len;
            netvm_status_t st = netvm_chan_recv(rx, line, sizeof line - 1, &len, WAIT_MS);
            if (st == NETVM_ERR_STATE)
                break;   /* closed, and everything taken */
            TRY(st);
            line[len] = 0;
            char want[200];
            snprintf(want, sizeof want, "line %llu: %.*s", (unsigned long long)got, (int)(got % 100),
                     "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv");
            bad += strcmp(line, want) != 0;
            got++;
        }
        printf("channel: rank 1 received %llu messages in order, %llu wrong, then the end\n",
               (unsigned long long)got, (unsigned long long)bad);
        TRY(netvm_chan_destroy(rx));
    } else if (rank == 0) {
        netvm_chan_tx_t *tx;
        TRY(netvm_chan_connect(ctx, 1, "lines", WAIT_MS, &tx));   /* waits for it to exist */
        for (uint64_t i = 0; i < count; i++) {
            int n = snprintf(line, sizeof line, "line %llu: %.*s", (unsigned long long)i, (int)(i % 100),
                             "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuv");
            TRY(netvm_chan_send(tx, line, (size_t)n, WAIT_MS));   /* waits only if the ring is full */
        }
        TRY(netvm_chan_close(tx));
    }
    TRY(netvm_barrier(ctx));

    /* --- part 2: a distributed queue into rank 0 --- */
    if (size >= 3) {
        if (rank == 0) {
            netvm_dq_t *dq;
            TRY(netvm_dq_create(ctx, "jobs", size - 1, NULL, &dq));
            uint64_t *next = calloc((size_t)size, sizeof *next), total = 0, bad = 0;
            for (;;) {
                struct item it;
                size_t len;
                int from;
                netvm_status_t st = netvm_dq_recv(dq, &it, sizeof it, &len, NULL, &from, WAIT_MS);
                if (st == NETVM_ERR_STATE)
                    break;   /* every producer left, every item taken */
                TRY(st);
                bad += len != sizeof it || it.producer != from || it.seq != next[from]++;
                total++;
            }
            printf("channel: rank 0 took %llu items from %d producers, %llu out of order or wrong\n",
                   (unsigned long long)total, size - 1, (unsigned long long)bad);
            free(next);
            TRY(netvm_dq_destroy(dq));
        } else {
            netvm_dq_prod_t *p;
            TRY(netvm_dq_join(ctx, 0, "jobs", WAIT_MS, &p));
            for (uint64_t i = 0; i < count; i++) {
                struct item it = { .producer = rank, .seq = i };
                TRY(netvm_dq_send(p, &it, sizeof it, WAIT_MS));
            }
            TRY(netvm_dq_leave(p));
        }
    }
    TRY(netvm_barrier(ctx));
    TRY(netvm_finalize(ctx));
    return 0;
}
