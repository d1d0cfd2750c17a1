/* The smallest netvm program: every rank exports a buffer on its stack,
 * writes a greeting into its right neighbour's, and reads its own.
 *   netvm run -n 4 ./hello_rma */
#include <netvm/netvm.h>
#include <stdio.h>
#include <string.h>

#define TRY(x) do { netvm_status_t s_ = (x); if (s_) { \
    fprintf(stderr, "%s: %s\n", #x, netvm_strerror(s_)); return 1; } } while (0)

int main(void)
{
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);

    char inbox[64] = "";
    netvm_seg_t *seg;
    TRY(netvm_export(ctx, inbox, sizeof inbox, NETVM_RW, "inbox", &seg));
    TRY(netvm_barrier(ctx));                       /* everyone has exported */

    netvm_rseg_t *right;
    TRY(netvm_import(ctx, (rank + 1) % size, "inbox", &right));
    char msg[64];
    snprintf(msg, sizeof msg, "hello from rank %d", rank);
    TRY(netvm_put(ctx, right, 0, msg, strlen(msg) + 1, 0));
    TRY(netvm_barrier(ctx));                       /* everyone has written */

    printf("rank %d of %d got: %s\n", rank, size, inbox);
    TRY(netvm_finalize(ctx));
    return 0;
}
