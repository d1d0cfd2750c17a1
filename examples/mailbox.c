/* Mailbox messages: every rank but 0 sends rank 0 a few tagged requests;
 * rank 0 serves them in whatever order they come (any source, any tag),
 * answers each with a message tagged by the request's own tag, and every
 * sender waits for the answers it expects, by tag.
 *
 *   netvm run -n 3 -- ./mailbox
 *
 * Rank 0 sleeps on the event queue (one NETVM_EV_MESSAGE per message
 * that lands) to show the event path; a plain netvm_msg_recv with
 * NETVM_MSG_ANY_SOURCE would do as well. */
#include <netvm/netvm.h>
#include <netvm/msg.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PER_RANK 4
#define DIE(...) do { fprintf(stderr, __VA_ARGS__); exit(1); } while (0)
#define TRY(x) do { netvm_status_t s_ = (x); if (s_ != NETVM_OK) DIE("%s: %s\n", #x, netvm_strerror(s_)); } while (0)

static void serve(netvm_ctx_t *ctx, int nreq)
{
    int served = 0;
    while (served < nreq) {
        netvm_event_t ev[8];
        int n;
        TRY(netvm_evq_wait(ctx, ev, 8, &n, -1));
        for (int i = 0; i < n; i++) {
            if (ev[i].type != NETVM_EV_MESSAGE)
                continue;
            char req[64], ans[96];
            netvm_msg_info_t in;
            /* the event names the message: take exactly that one */
            TRY(netvm_msg_recv(ctx, ev[i].rank, ev[i].value, req, sizeof req - 1, &in, -1));
            req[in.len] = 0;
            int len = snprintf(ans, sizeof ans, "rank 0 read \"%s\"", req);
            TRY(netvm_msg_send(ctx, in.source, in.tag, ans, (size_t)len));
            served++;
        }
    }
    printf("rank 0 served %d requests\n", served);
}

int main(void)
{
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    if (rank == 0) {
        netvm_msg_opts_t opts = { .events = 1 };   /* before peers may send */
        TRY(netvm_msg_setup(ctx, &opts));
    }
    TRY(netvm_barrier(ctx));
    if (rank == 0) {
        serve(ctx, (size - 1) * PER_RANK);
    } else {
        for (uint64_t tag = 0; tag < PER_RANK; tag++) {
            char req[64];
            int len = snprintf(req, sizeof req, "request %llu of rank %d", (unsigned long long)tag, rank);
            TRY(netvm_msg_send(ctx, 0, (uint64_t)rank << 32 | tag, req, (size_t)len));
        }
        /* the answers, last first: each receive picks its tag */
        for (int k = PER_RANK - 1; k >= 0; k--) {
            char ans[96];
            netvm_msg_info_t in;
            TRY(netvm_msg_recv(ctx, 0, (uint64_t)rank << 32 | (uint64_t)k, ans, sizeof ans - 1, &in, -1));
            ans[in.len] = 0;
            char want[64];
            snprintf(want, sizeof want, "request %d of rank %d", k, rank);
            if (!strstr(ans, want))
                DIE("rank %d: answer %d is \"%s\"\n", rank, k, ans);
        }
        printf("rank %d: %d answers verified\n", rank, PER_RANK);
    }
    TRY(netvm_barrier(ctx));
    TRY(netvm_finalize(ctx));
    return 0;
}
