/* Unexport while peers are writing: operations in flight finish or fail,
 * later ones fail with NETVM_ERR_REVOKED, and once netvm_unexport returns no
 * peer's write lands in the memory (the owner reuses it at once). Rank 0
 * owns the segments, on both paths; the others write without pause. */
#include "check.h"

#include <string.h>
#include <time.h>

#define LEN (64 * 1024)
#define ROUNDS 20

static void run_round(netvm_ctx_t *ctx, int rank, int shared, int round)
{
    char name[32];
    snprintf(name, sizeof name, "victim-%d-%d", shared, round);
    uint8_t *mem = NULL;
    netvm_seg_t *seg = NULL;
    if (rank == 0) {
        if (shared) {
            void *p;
            CHECK_OK(netvm_alloc_shared(ctx, LEN, NETVM_RWA, name, &p, &seg));
            mem = p;
        } else {
            mem = calloc(1, LEN);
            CHECK(mem);
            CHECK_OK(netvm_export(ctx, mem, LEN, NETVM_RWA, name, &seg));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r = NULL;
    if (rank != 0)
        CHECK_OK(netvm_import(ctx, 0, name, &r));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        /* let the writers get going, then pull the segment from under them */
        struct timespec ts = { 0, 2 * 1000 * 1000 };
        nanosleep(&ts, NULL);
        if (shared) {
            /* the mapping goes away with the segment; check revocation by
             * a fresh import instead */
            CHECK_OK(netvm_unexport(seg));
        } else {
            CHECK_OK(netvm_unexport(seg));
            memset(mem, 0x5A, LEN);   /* reused at once */
            struct timespec wait = { 0, 5 * 1000 * 1000 };
            nanosleep(&wait, NULL);
            for (size_t i = 0; i < LEN; i++)
                CHECK(mem[i] == 0x5A);
            free(mem);
        }
        CHECK_OK(netvm_barrier(ctx));
    } else {
        uint8_t buf[4096];
        memset(buf, rank, sizeof buf);
        int revoked = 0;
        for (long n = 0; !revoked; n++) {
            size_t off = (size_t)(n * 4096) % LEN;
            netvm_status_t st = (n % 3 == 2)
                ? netvm_atomic(ctx, r, off, NETVM_AOP_ADD, 1, 0, NULL)
                : netvm_put(ctx, r, off, buf, sizeof buf, 0);
            if (st == NETVM_ERR_REVOKED)
                revoked = 1;
            else
                CHECK_OK(st);
        }
        /* once revoked, always revoked */
        for (int i = 0; i < 100; i++)
            CHECK_ST(netvm_put(ctx, r, 0, buf, 8, 0), NETVM_ERR_REVOKED);
        CHECK_OK(netvm_release(r));
        CHECK_OK(netvm_barrier(ctx));
    }
    CHECK_OK(netvm_barrier(ctx));
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) >= 2);
    for (int round = 0; round < ROUNDS; round++)
        for (int shared = 0; shared < 2; shared++)
            run_round(ctx, rank, shared, round);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
