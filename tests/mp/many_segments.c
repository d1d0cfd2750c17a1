/* 10 000 segments per rank: every one imported by name and by handle, its
 * bytes written and read back at random, and the right segment changes. */
#include "check.h"

#include <string.h>

#define NSEG 10000
#define SEGLEN 64

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    uint8_t *mem = calloc(NSEG, SEGLEN);
    netvm_seg_t **segs = calloc(NSEG, sizeof *segs);
    netvm_seg_handle_t *handles = calloc(NSEG, sizeof *handles);
    netvm_rseg_t **by_name = calloc(NSEG, sizeof *by_name), **by_handle = calloc(NSEG, sizeof *by_handle);
    CHECK(mem && segs && handles && by_name && by_handle);
    char name[32];
    for (int i = 0; i < NSEG; i++) {
        snprintf(name, sizeof name, "seg-%d", i);
        CHECK_OK(netvm_export(ctx, mem + (size_t)i * SEGLEN, SEGLEN, NETVM_RWA, name, &segs[i]));
        CHECK_OK(netvm_seg_handle(segs[i], &handles[i]));
    }
    /* hand the handles to prev through a segment of its own choosing */
    void *hp;
    netvm_seg_t *hseg;
    CHECK_OK(netvm_alloc_shared(ctx, NSEG * sizeof *handles, NETVM_RW, "handles", &hp, &hseg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *rh;
    CHECK_OK(netvm_import(ctx, prev, "handles", &rh));
    CHECK_OK(netvm_put(ctx, rh, 0, handles, NSEG * sizeof *handles, 0));
    CHECK_OK(netvm_barrier(ctx));
    netvm_seg_handle_t *theirs = hp;   /* next's handles */
    for (int i = 0; i < NSEG; i++) {
        snprintf(name, sizeof name, "seg-%d", i);
        CHECK_OK(netvm_import(ctx, next, name, &by_name[i]));
        CHECK(theirs[i].rank == next);
        CHECK_OK(netvm_import_handle(ctx, &theirs[i], &by_handle[i]));
    }
    srand(7 + rank);
    for (int k = 0; k < 20000; k++) {
        int i = rand() % NSEG;
        uint64_t v = ((uint64_t)rank << 32) | (uint64_t)k, got = 0;
        netvm_rseg_t *w = (k & 1) ? by_name[i] : by_handle[i];
        netvm_rseg_t *rd = (k & 1) ? by_handle[i] : by_name[i];
        CHECK_OK(netvm_put(ctx, w, 8, &v, 8, 0));
        CHECK_OK(netvm_get(ctx, &got, rd, 8, 8, 0));
        CHECK(got == v);
        /* write segment i's index into its first word: checked below */
        uint64_t idx = (uint64_t)i;
        CHECK_OK(netvm_put(ctx, w, 0, &idx, 8, 0));
    }
    CHECK_OK(netvm_barrier(ctx));
    for (int i = 0; i < NSEG; i++) {
        uint64_t first;
        memcpy(&first, mem + (size_t)i * SEGLEN, 8);
        CHECK(first == 0 || first == (uint64_t)i);
    }
    /* unexport every other one: exactly those fail */
    for (int i = 0; i < NSEG; i += 2)
        CHECK_OK(netvm_unexport(segs[i]));
    CHECK_OK(netvm_barrier(ctx));
    for (int i = 0; i < NSEG; i++) {
        uint64_t got;
        CHECK_ST(netvm_get(ctx, &got, by_name[i], 0, 8, 0), (i % 2) ? NETVM_OK : NETVM_ERR_REVOKED);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));   /* releases the rest */
    free(mem);
    free(segs);
    free(handles);
    free(by_name);
    free(by_handle);
    return 0;
}
