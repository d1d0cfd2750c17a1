/* A rank of a PMIx-started job dies: the others must not hang in the next
 * collective. Rank 1 kills itself after the first barrier; the others enter
 * another barrier, which must end, with NETVM_ERR_PEER (PMIx reported the
 * death) or because the launcher ends the job. Either way the launcher
 * exits non-zero; a survivor that gets the error says so. */
#include "check.h"

#include <signal.h>
#include <stdio.h>

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) >= 3);
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1)
        raise(SIGKILL);
    netvm_status_t st = netvm_barrier(ctx);
    printf("survivor %d: barrier: %s\n", rank, netvm_strerror(st));
    fflush(stdout);
    CHECK_ST(st, NETVM_ERR_PEER);
    netvm_finalize(ctx);
    return 0;
}
