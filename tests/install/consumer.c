/* A program that knows netvm only as an installed package: it includes
 * <netvm/netvm.h> from the install prefix and links the installed library
 * (shared or static, through pkg-config or CMake's find_package).
 * Started alone it is a job of one: init and finalize. Under `netvm run -n 2`
 * each rank puts a value into the other's exported word and gets it back. */
#include <netvm/netvm.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>

#define TRY(expr) do { \
    netvm_status_t st_ = (expr); \
    if (st_ != NETVM_OK) { \
        fprintf(stderr, "consumer: %s failed: %s\n", #expr, netvm_strerror(st_)); \
        return 1; \
    } } while (0)

int main(void)
{
    netvm_ctx_t *ctx;
    TRY(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    if (size == 1) {
        TRY(netvm_finalize(ctx));
        printf("consumer: singleton init and finalize ok\n");
        return 0;
    }

    uint64_t word = 0;
    netvm_seg_t *seg;
    TRY(netvm_export(ctx, &word, sizeof word, NETVM_RW, "word", &seg));
    TRY(netvm_barrier(ctx));

    int peer = (rank + 1) % size;
    netvm_rseg_t *remote;
    TRY(netvm_import(ctx, peer, "word", &remote));
    uint64_t sent = 0x6e657476ull * 100 + (uint64_t)rank, back = 0;
    TRY(netvm_put(ctx, remote, 0, &sent, sizeof sent, 0));
    TRY(netvm_get(ctx, &back, remote, 0, sizeof back, 0));
    TRY(netvm_barrier(ctx));   /* every put has landed */

    uint64_t want = 0x6e657476ull * 100 + (uint64_t)((rank + size - 1) % size);
    if (back != sent || word != want) {
        fprintf(stderr, "consumer: rank %d: got back %" PRIu64 " (sent %" PRIu64 "), "
                "received %" PRIu64 " (wanted %" PRIu64 ")\n", rank, back, sent, word, want);
        return 1;
    }
    TRY(netvm_release(remote));
    TRY(netvm_barrier(ctx));   /* no peer still uses our word */
    TRY(netvm_unexport(seg));
    printf("consumer: rank %d of %d: put/get ok\n", rank, size);
    return netvm_finalize(ctx) == NETVM_OK ? 0 : 1;
}
