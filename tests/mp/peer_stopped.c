/* A peer that stops (SIGSTOP) while puts flow to it: its socket fills,
 * and the sender must not wait on that for good. Over the tcp link the
 * connection's TCP_USER_TIMEOUT (NETVM_TIMEOUT) ends it; over the ofi
 * link the provider refuses every post (-FI_EAGAIN), and within
 * NETVM_TIMEOUT of refusals the peer is given up. Either way the puts
 * fail with NETVM_ERR_PEER. Rank 1 is stopped by rank 0, then killed by
 * it (run with --keep-going; the job's status is rank 1's 137). */
#include "check.h"

#include <signal.h>
#include <string.h>
#include <unistd.h>

#define CHUNK (64 * 1024)   /* a put this size completes locally at once (copied) */
#define MAX_PUTS 200000     /* 12 GiB: far more than any socket and queue hold */

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    static uint8_t sink[CHUNK];
    static uint64_t pid_word;
    netvm_seg_t *s, *sp;
    CHECK_OK(netvm_export(ctx, sink, sizeof sink, NETVM_RW, "sink", &s));
    pid_word = (uint64_t)getpid();
    CHECK_OK(netvm_export(ctx, &pid_word, sizeof pid_word, NETVM_READ, "pid", &sp));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        for (;;)
            pause();   /* stopped, then killed, by rank 0 */
    }
    netvm_rseg_t *r, *rp;
    CHECK_OK(netvm_import(ctx, 1, "sink", &r));
    CHECK_OK(netvm_import(ctx, 1, "pid", &rp));
    uint64_t victim = 0;
    CHECK_OK(netvm_get(ctx, &victim, rp, 0, 8, 0));
    CHECK(victim > 1);
    static uint8_t buf[CHUNK];
    memset(buf, 0x5a, sizeof buf);
    CHECK(kill((pid_t)victim, SIGSTOP) == 0);
    netvm_status_t st = NETVM_OK;
    long n = 0;
    /* local completion only (a remote one would wait for the stopped
     * peer and time out instead): each put completes as its payload is
     * copied, until the provider refuses them */
    for (; n < MAX_PUTS; n++) {
        netvm_req_t *q;
        if ((st = netvm_put_nb(ctx, r, 0, buf, sizeof buf, 0, &q)) != NETVM_OK || (st = netvm_wait(&q)) != NETVM_OK)
            break;
    }
    kill((pid_t)victim, SIGKILL);
    if (st != NETVM_ERR_PEER)
        FAILF("after %ld puts to a stopped peer: %s, wanted NETVM_ERR_PEER", n, netvm_strerror(st));
    printf("stopped peer given up after %ld puts: ok\n", n);
    CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
