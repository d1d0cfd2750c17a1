/* RLIMIT_MEMLOCK is honoured with a clear error: run without CAP_IPC_LOCK
 * and with a 1 MiB limit (the test's command line sees to both), pin-all
 * pins a segment within the limit, refuses one beyond it with
 * NETVM_ERR_NOMEM (and a warning naming the limit), leaves nothing locked
 * for the refused one, and pins again once room is back. A job of one. */
#include "reg_util.h"

#include <sys/mman.h>
#include <sys/resource.h>

int main(void)
{
    struct rlimit rl;
    CHECK(getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur == 1u << 20);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    size_t big = 2u << 20, small = 512u << 10;
    uint8_t *a = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *b = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED && b != MAP_FAILED);
    unsigned long long base = vm_locked();
    netvm_seg_t *s1, *s2, *s3;
    CHECK_OK(netvm_export(ctx, a, small, NETVM_RW, "small", &s1));
    CHECK(vm_locked() == base + small);
    CHECK_ST(netvm_export(ctx, b, big, NETVM_RW, "big", &s2), NETVM_ERR_NOMEM);
    CHECK(vm_locked() == base + small);
    netvm_reg_stats_t s;
    CHECK_OK(netvm_reg_stats(ctx, &s));
    CHECK(s.pinned_bytes == small && s.pins == 1);
    CHECK_OK(netvm_unexport(s1));
    CHECK(vm_locked() == base);
    CHECK_OK(netvm_export(ctx, b, 768u << 10, NETVM_RW, "again", &s3));
    CHECK(vm_locked() == base + (768u << 10));
    CHECK_OK(netvm_unexport(s3));
    printf("rlimit ok\n");
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
