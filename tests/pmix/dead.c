/* A PMIx-started job loses a member: the others must not hang in the next
 * collective.
 *
 *   pmix_dead                rank 1 kills itself after the first barrier;
 *                            the others' next barrier must fail with
 *                            NETVM_ERR_PEER (or mpirun ends them first)
 *   pmix_dead launcher DIR   the launcher is killed while ranks 0 and 2
 *                            wait in a barrier (rank 1 stays out of it until
 *                            DIR/release exists or mpirun is gone): their
 *                            barrier must fail
 *                            with NETVM_ERR_BOOT. Each rank writes DIR/waitR
 *                            when it enters the barrier and DIR/resultR with
 *                            its outcome (its stdout died with mpirun). */
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* DIR/<what><rank> holding text, appearing whole: written under another
 * name and renamed, since the harness reads it as soon as it exists */
static void note(const char *dir, const char *what, int rank, const char *text)
{
    char path[512], tmp[520];
    snprintf(path, sizeof path, "%s/%s%d", dir, what, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    CHECK(f);
    fprintf(f, "%s\n", text);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0);
}

int main(int argc, char **argv)
{
    int launcher = argc == 3 && !strcmp(argv[1], "launcher");
    CHECK(argc == 1 || launcher);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) >= 3);
    CHECK_OK(netvm_barrier(ctx));
    if (launcher) {
        /* no SIGPIPE from a log line to mpirun's dead pipe */
        signal(SIGPIPE, SIG_IGN);
        const char *dir = argv[2];
        if (rank == 1) {
            /* until released, or mpirun (the parent) is gone: at most about 60 s */
            char path[512];
            snprintf(path, sizeof path, "%s/release", dir);
            pid_t parent = getppid();
            for (int i = 0; i < 6000 && access(path, F_OK) != 0 && getppid() == parent; i++)
                usleep(10000);
            return 0;
        }
        note(dir, "wait", rank, "in barrier");
        netvm_status_t st = netvm_barrier(ctx);
        note(dir, "result", rank, netvm_strerror(st));
        return st == NETVM_ERR_BOOT ? 0 : 1;
    }
    if (rank == 1)
        raise(SIGKILL);
    netvm_status_t st = netvm_barrier(ctx);
    printf("survivor %d: barrier: %s\n", rank, netvm_strerror(st));
    fflush(stdout);
    CHECK_ST(st, NETVM_ERR_PEER);
    netvm_finalize(ctx);
    return 0;
}
