/* Two ranks without progress threads over tcp (NETVM_PROGRESS_THREAD=0,
 * NETVM_LINKS=tcp, NETVM_TIMEOUT=1000): a target serves its peers inside
 * any netvm call, a barrier included; and an answer that arrives after its
 * request timed out is dropped without harming the connection or the
 * buffer the caller got back. */
#include "check.h"

#include <string.h>
#include <unistd.h>

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    static uint64_t word[512];
    for (int i = 0; i < 512; i++)
        word[i] = 1000 + (uint64_t)i;
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, word, sizeof word, NETVM_RW, "w", &seg));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        /* rank 1 is in the barrier below: it must serve these */
        netvm_rseg_t *r;
        CHECK_OK(netvm_import(ctx, 1, "w", &r));
        CHECK_OK(netvm_put_imm(ctx, r, 0, 42, 0));
        uint64_t v = 0;
        CHECK_OK(netvm_get(ctx, &v, r, 8, 8, 0));
        CHECK(v == 1001);
        CHECK_OK(netvm_barrier(ctx));
        /* rank 1 now sleeps outside netvm for longer than NETVM_TIMEOUT */
        static uint64_t buf[512];
        memset(buf, 0xab, sizeof buf);
        CHECK_ST(netvm_get(ctx, buf, r, 0, sizeof buf, 0), NETVM_ERR_TIMEOUT);
        memset(buf, 0xcd, sizeof buf);   /* the caller owns it again */
        CHECK_OK(netvm_barrier(ctx));     /* rank 1 answers the old get meanwhile */
        for (int i = 0; i < 512; i++)
            CHECK(buf[i] == 0xcdcdcdcdcdcdcdcdull);   /* the late answer did not land */
        /* and the connection still works */
        CHECK_OK(netvm_get(ctx, &v, r, 16, 8, 0));
        CHECK(v == 1002);
        CHECK_OK(netvm_release(r));
        printf("rank 0: served inside a barrier; a late answer was dropped, the link lives\n");
    } else {
        CHECK_OK(netvm_barrier(ctx));
        CHECK(word[0] == 42);
        sleep(2);
        CHECK_OK(netvm_barrier(ctx));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
