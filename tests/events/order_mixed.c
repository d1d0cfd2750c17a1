/* Issue order across the two ways an shm initiator reaches a target: a
 * put (or a mapped atomic) it executes itself, after a signal or an
 * emulated atomic the target's progress engine executes, must not land
 * first. Rank 0 writes a word of rank 1's private memory three ways in a
 * row (a put-with-signal that sets it, an atomic that adds to it, then a
 * plain 8-byte put) and checks after a flush that the plain put's value
 * is what stayed. On the process_vm path (NETVM_SHM_MAPPED=0) the signal
 * and the atomic are active messages and the put is process_vm_writev:
 * without the ordering rule the put often lands first and is overwritten.
 *
 *   order_mixed ROUNDS */
#include "check.h"

#include <stdint.h>
#include <string.h>

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 2000;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    static uint64_t words[16] __attribute__((aligned(64)));
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, words, sizeof words, NETVM_READ | NETVM_WRITE | NETVM_ATOMIC, "words", &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (check_rank == 0) {
        netvm_rseg_t *w;
        CHECK_OK(netvm_import(ctx, 1, "words", &w));
        uint64_t data = 0, got[2];
        int bad_sig = 0, bad_add = 0;
        for (int i = 0; i < rounds; i++) {
            data = (uint64_t)i;
            /* word 0: signal sets 2i+1, then a put of 2i+2 */
            CHECK_OK(netvm_put_signal_nb(ctx, w, 64, &data, 8, w, 0, 2 * (uint64_t)i + 1, NETVM_SIGNAL_SET, 0));
            CHECK_OK(netvm_put_imm(ctx, w, 0, 2 * (uint64_t)i + 2, 0));
            /* word 1: an atomic adds 1, then a put of 1000i */
            netvm_req_t *q;
            uint64_t old;
            CHECK_OK(netvm_atomic_nb(ctx, w, 8, NETVM_AOP_ADD, 1, 0, &old, &q));
            CHECK_OK(netvm_put_imm(ctx, w, 8, 1000 * (uint64_t)i, 0));
            if (q)
                CHECK_OK(netvm_wait(&q));
            CHECK_OK(netvm_flush(ctx, 1));
            CHECK_OK(netvm_get(ctx, got, w, 0, 16, 0));
            bad_sig += got[0] != 2 * (uint64_t)i + 2;
            bad_add += got[1] != 1000 * (uint64_t)i;
        }
        if (bad_sig || bad_add)
            FAILF("%d of %d rounds: a signal landed after the put that followed it; %d: an atomic did",
                  bad_sig, rounds, bad_add);
        CHECK_OK(netvm_release(w));
        printf("order_mixed: %d rounds, every put landed after the signal and the atomic before it\n", rounds);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
