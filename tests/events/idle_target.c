/* A blocking put to a process that polled (netvm_progress) and then stopped
 * calling netvm completes without waiting for that process's lease: the
 * acknowledgement it held back for its next frame leaves once it stops
 * calling (NETVM_ACK_DELAY_US). The job runs with a lease far longer than
 * its timeout, so without that the puts would not complete in time.
 * Rank 1 learns that a put completed through a pipe-free side channel: a
 * file rank 0 creates, so that it makes no netvm call meanwhile.
 *
 *   idle_target ROUNDS */
#include "evt.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

static void flag_path(char *buf, size_t n, int round)
{
    const char *job = getenv("NETVM_JOB_ID");
    snprintf(buf, n, "/tmp/netvm-idle-target-%s-%d", job ? job : "nojob", round);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    static uint64_t word __attribute__((aligned(64)));
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, &word, 8, NETVM_RW, "w", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *peer;
    CHECK_OK(netvm_import(ctx, 1 - rank, "w", &peer));
    CHECK_OK(netvm_barrier(ctx));
    char path[128];
    for (int i = 1; i <= rounds; i++) {
        flag_path(path, sizeof path, i);
        if (rank == 0) {
            /* returns once rank 1 acknowledged the put */
            CHECK_OK(netvm_put_imm(ctx, peer, 0, (uint64_t)i, 0));
            int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
            CHECK(fd >= 0);
            close(fd);
        } else {
            spin_until_ge(ctx, &word, (uint64_t)i, 60, "rank 0's put");
            /* no netvm call until rank 0's put has returned */
            struct stat sb;
            double t0 = now_s();
            while (stat(path, &sb) != 0) {
                if (now_s() - t0 > 5)
                    FAILF("round %d: rank 0's put did not complete while this process made no call", i);
                sleep_us(100);
            }
            unlink(path);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
