/* Every data operation at sizes 1 B to 16 MiB and odd offsets, on memory of
 * every kind a user exports (heap, stack, static, fresh mmap pages the
 * target never touched, netvm_alloc_shared), checked at the target and by
 * reading back. Rank r writes into rank (r+1) % size. */
#include "check.h"

#include <string.h>
#include <sys/mman.h>

#define BIG (16u << 20)
static uint8_t static_buf[8192 + 7];

static uint8_t pattern(int rank, size_t i, unsigned salt) { return (uint8_t)(rank * 131 + i * 7 + salt); }

/* mine == NULL: the region comes from netvm_alloc_shared (the mapped path) */
static void one_region(netvm_ctx_t *ctx, const char *name, uint8_t *mine, size_t len, uint8_t *src, uint8_t *dst)
{
    int rank = netvm_rank(ctx), size = netvm_size(ctx);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    netvm_seg_t *seg;
    netvm_rseg_t *r;
    if (mine) {
        CHECK_OK(netvm_export(ctx, mine, len, NETVM_RWA, name, &seg));
    } else {
        void *p;
        CHECK_OK(netvm_alloc_shared(ctx, len, NETVM_RWA, name, &p, &seg));
        mine = p;
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_import(ctx, next, name, &r));
    CHECK(netvm_rseg_len(r) == len);
    /* only netvm_alloc_shared memory is ever mapped, and it is whenever the
     * shm link reaches the peer (one host, mapping not turned off) */
    const char *links = getenv("NETVM_LINKS"), *mapped = getenv("NETVM_SHM_MAPPED"), *nodes = getenv("NETVM_NNODES");
    if (strcmp(name, "shared") != 0)
        CHECK(!netvm_rseg_is_mapped(r));
    else if ((!links || (strcmp(links, "tcp") != 0 && strcmp(links, "ofi") != 0) || size == 1) && (!mapped || atoi(mapped) != 0) &&
             (!nodes || atoi(nodes) <= 1))
        CHECK(netvm_rseg_is_mapped(r));
    static const size_t sizes[] = { 1, 2, 3, 7, 8, 9, 63, 64, 65, 4095, 4096, 4097, 65537, 1u << 20, (1u << 20) + 3, 16u << 20 };
    static const size_t offs[] = { 0, 1, 3, 4093 };
    unsigned salt = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        for (size_t oi = 0; oi < sizeof offs / sizeof *offs; oi++) {
            size_t n = sizes[si], off = offs[oi];
            if (off + n > len)
                continue;
            salt++;
            for (size_t i = 0; i < n; i++)
                src[i] = pattern(rank, i, salt);
            if (salt % 2)
                CHECK_OK(netvm_put(ctx, r, off, src, n, 0));
            else {
                netvm_req_t *q;
                CHECK_OK(netvm_put_nb(ctx, r, off, src, n, 0, &q));
                CHECK_OK(netvm_wait(&q));
            }
            CHECK_OK(netvm_flush(ctx, next));
            memset(dst, 0, n);
            if (salt % 4 < 2) {
                CHECK_OK(netvm_get(ctx, dst, r, off, n, 0));
            } else {
                netvm_req_t *q;
                int done = 0;
                CHECK_OK(netvm_get_nb(ctx, dst, r, off, n, 0, &q));
                while (!done)
                    CHECK_OK(netvm_test(&q, &done));
                CHECK(q == NULL);
            }
            CHECK(memcmp(src, dst, n) == 0);
            CHECK_OK(netvm_barrier(ctx));
            /* the target sees the bytes prev wrote, and nothing outside them moved */
            for (size_t i = 0; i < n; i++)
                CHECK(mine[off + i] == pattern(prev, i, salt));
            if (off > 0)
                CHECK(mine[off - 1] == 0);
            if (off + n < len)
                CHECK(mine[off + n] == 0);
            memset(mine + off, 0, n);
            CHECK_OK(netvm_barrier(ctx));
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_barrier(ctx));
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    check_rank = netvm_rank(ctx);
    uint8_t *src = malloc(BIG), *dst = malloc(BIG);
    CHECK(src && dst);

    uint8_t *heap = calloc(1, BIG + 4096);
    CHECK(heap);
    one_region(ctx, "heap", heap + 1, BIG + 4000, src, dst);   /* odd base address */

    uint8_t stack[6000];
    memset(stack, 0, sizeof stack);
    one_region(ctx, "stack", stack, sizeof stack, src, dst);

    one_region(ctx, "static", static_buf + 7, 8192, src, dst);

    /* pages the target never touches before peers write them */
    uint8_t *fresh = mmap(NULL, BIG + 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(fresh != MAP_FAILED);
    one_region(ctx, "fresh", fresh, BIG + 8192, src, dst);

    one_region(ctx, "shared", NULL, BIG + 4000, src, dst);

    free(heap);
    free(src);
    free(dst);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
