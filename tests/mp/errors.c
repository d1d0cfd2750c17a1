/* Every error an initiator can meet returns its own status, and the
 * target's memory is untouched afterwards. */
#include "check.h"
#include "core/svc.h"

#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN 4096

static void untouched(const uint8_t *p, size_t n, uint8_t v)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == v);
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    int next = (rank + 1) % size;

    static uint8_t ro[LEN], wo[LEN], rw[LEN];
    memset(ro, 0xAA, LEN);
    memset(wo, 0xAA, LEN);
    memset(rw, 0xAA, LEN);
    netvm_seg_t *sro, *swo, *srw, *sdup, *sgone, *sunmapped, *sshared, *sshro;
    CHECK_OK(netvm_export(ctx, ro, LEN, NETVM_READ, "ro", &sro));
    CHECK_OK(netvm_export(ctx, wo, LEN, NETVM_WRITE, "wo", &swo));
    CHECK_OK(netvm_export(ctx, rw, LEN, NETVM_RW, "rw", &srw));
    void *shp;
    CHECK_OK(netvm_alloc_shared(ctx, LEN, NETVM_RW, "shared-rw", &shp, &sshared));
    memset(shp, 0xAA, LEN);
    void *shro;
    CHECK_OK(netvm_alloc_shared(ctx, LEN, NETVM_READ, "shared-ro", &shro, &sshro));
    memset(shro, 0xAA, LEN);

    /* local argument errors */
    CHECK_ST(netvm_export(ctx, rw, LEN, NETVM_RW, "rw", &sdup), NETVM_ERR_EXISTS);
    CHECK_ST(netvm_export(ctx, NULL, LEN, NETVM_RW, "x", &sdup), NETVM_ERR_INVAL);
    CHECK_ST(netvm_export(ctx, rw, 0, NETVM_RW, "x", &sdup), NETVM_ERR_INVAL);
    CHECK_ST(netvm_export(ctx, rw, LEN, 0, "x", &sdup), NETVM_ERR_INVAL);
    CHECK_ST(netvm_export(ctx, rw, LEN, 0x80, "x", &sdup), NETVM_ERR_INVAL);
    CHECK_ST(netvm_export(ctx, rw, LEN, NETVM_RW,
                          "a-name-that-is-far-too-long-for-the-table-0123456789012345678901234567890", &sdup),
             NETVM_ERR_INVAL);

    /* a segment that will be unexported, and one whose memory goes away */
    uint8_t *gone = malloc(LEN);
    CHECK_OK(netvm_export(ctx, gone, LEN, NETVM_RWA, "gone", &sgone));
    uint8_t *vanish = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(vanish != MAP_FAILED);
    CHECK_OK(netvm_export(ctx, vanish, LEN, NETVM_RWA, "vanish", &sunmapped));
    netvm_seg_handle_t hrw;
    CHECK_OK(netvm_seg_handle(srw, &hrw));
    CHECK_OK(netvm_barrier(ctx));

    netvm_rseg_t *r_ro, *r_wo, *r_rw, *r_gone, *r_vanish, *r_shared, *r_shro, *tmp;
    CHECK_ST(netvm_import(ctx, next, "no-such-segment", &tmp), NETVM_ERR_NOTFOUND);
    CHECK_ST(netvm_import(ctx, size, "rw", &tmp), NETVM_ERR_RANK);
    CHECK_ST(netvm_import(ctx, -1, "rw", &tmp), NETVM_ERR_RANK);
    CHECK_OK(netvm_import(ctx, next, "ro", &r_ro));
    CHECK_OK(netvm_import(ctx, next, "wo", &r_wo));
    CHECK_OK(netvm_import(ctx, next, "rw", &r_rw));
    CHECK_OK(netvm_import(ctx, next, "gone", &r_gone));
    CHECK_OK(netvm_import(ctx, next, "vanish", &r_vanish));
    CHECK_OK(netvm_import(ctx, next, "shared-rw", &r_shared));
    CHECK_OK(netvm_import(ctx, next, "shared-ro", &r_shro));

    uint8_t buf[2 * LEN];
    memset(buf, 0x55, sizeof buf);
    /* rights */
    CHECK_ST(netvm_put(ctx, r_ro, 0, buf, 8, 0), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_get(ctx, buf, r_wo, 0, 8, 0), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_atomic(ctx, r_rw, 0, NETVM_AOP_ADD, 1, 0, NULL), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_atomic(ctx, r_shared, 0, NETVM_AOP_ADD, 1, 0, NULL), NETVM_ERR_RIGHTS);
    CHECK_ST(netvm_put(ctx, r_shro, 0, buf, 8, 0), NETVM_ERR_RIGHTS);
    /* mapped read-only: reads work, a store through the pointer faults in
     * the storing process (a child here) and changes nothing there */
    volatile uint8_t *pro = netvm_ptr(r_shro, 0);
    if (pro) {
        CHECK(pro[0] == 0xAA && pro[LEN - 1] == 0xAA);
        pid_t child = fork();
        CHECK(child >= 0);
        if (child == 0) {
            pro[0] = 0x55;
            _exit(0);
        }
        int status;
        CHECK(waitpid(child, &status, 0) == child);
        /* killed by SIGSEGV (a sanitizer's handler exits non-zero instead) */
        CHECK(!WIFEXITED(status) || WEXITSTATUS(status) != 0);
    }
    /* bounds, including ranges whose end overflows */
    CHECK_ST(netvm_put(ctx, r_rw, LEN - 4, buf, 8, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put(ctx, r_rw, LEN + 1, buf, 0, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_get(ctx, buf, r_rw, 1, LEN, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put(ctx, r_rw, 8, buf, SIZE_MAX, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put(ctx, r_shared, (size_t)-8, buf, 16, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_put(ctx, r_rw, 0, buf, 8, 0x100), NETVM_ERR_INVAL);
    /* a forged key: right slot, wrong key */
    netvm_seg_handle_t forged;
    memset(&forged, 0, sizeof forged);
    forged.rank = next;
    forged.slot = 2;    /* "rw" is this process's third export, so likely the same slot at next */
    forged.key = 12345;
    CHECK_ST(netvm_import_handle(ctx, &forged, &tmp), NETVM_ERR_KEY);
    forged.slot = 1u << 30;
    CHECK_ST(netvm_import_handle(ctx, &forged, &tmp), NETVM_ERR_KEY);
    CHECK_OK(netvm_barrier(ctx));

    /* the target untouched by all of the above */
    untouched(ro, LEN, 0xAA);
    untouched(wo, LEN, 0xAA);
    untouched(rw, LEN, 0xAA);
    untouched(shp, LEN, 0xAA);
    untouched(shro, LEN, 0xAA);
    CHECK_OK(netvm_barrier(ctx));

    /* revoked: the owner unexports, later operations fail */
    CHECK_OK(netvm_unexport(sgone));
    memset(gone, 0x77, LEN);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_ST(netvm_put(ctx, r_gone, 0, buf, 8, 0), NETVM_ERR_REVOKED);
    CHECK_ST(netvm_get(ctx, buf, r_gone, 0, 8, 0), NETVM_ERR_REVOKED);
    CHECK_ST(netvm_atomic(ctx, r_gone, 0, NETVM_AOP_ADD, 1, 0, NULL), NETVM_ERR_REVOKED);
    CHECK_ST(netvm_import(ctx, next, "gone", &tmp), NETVM_ERR_NOTFOUND);
    /* a put nobody waits for fails at once (shm) or at the next flush */
    netvm_req_t *nb;
    netvm_status_t st = netvm_put_nb(ctx, r_gone, 0, buf, 8, 0, &nb);
    CHECK(st == NETVM_OK || st == NETVM_ERR_REVOKED);
    CHECK_ST(netvm_flush(ctx, next), st == NETVM_OK ? NETVM_ERR_REVOKED : NETVM_OK);
    /* a service's quiet put (a channel's credit to a closed sender): its
     * failure reaches no later flush */
    st = nv_svc_put_quiet(ctx, r_gone, 0, buf, 8);
    CHECK(st == NETVM_OK || st == NETVM_ERR_REVOKED);
    CHECK_OK(netvm_flush(ctx, next));
    CHECK_OK(netvm_put(ctx, r_rw, 0, buf, 8, 0));   /* and the connection still works */
    /* its slot may be reused by a new segment: the old import still fails */
    netvm_seg_t *again;
    uint8_t again_buf[64] = { 0 };
    CHECK_OK(netvm_export(ctx, again_buf, sizeof again_buf, NETVM_RWA, "again", &again));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_ST(netvm_put(ctx, r_gone, 0, buf, 8, 0), NETVM_ERR_REVOKED);
    CHECK_OK(netvm_barrier(ctx));
    untouched(gone, LEN, 0x77);
    untouched(again_buf, sizeof again_buf, 0);

    /* the exported range unmapped behind netvm's back. Not on the ofi
     * link: the provider, not netvm, copies into the target's memory
     * there, so nothing can turn the fault into an error until the
     * registration cache's unmap events reach the link (docs/links.md) */
    const char *lk = getenv("NETVM_LINKS");
    if (!lk || strcmp(lk, "ofi") != 0) {
        CHECK(munmap(vanish, LEN) == 0);
        CHECK_OK(netvm_barrier(ctx));
        CHECK_ST(netvm_put(ctx, r_vanish, 0, buf, 8, 0), NETVM_ERR_FAULT);
        CHECK_ST(netvm_get(ctx, buf, r_vanish, 0, 8, 0), NETVM_ERR_FAULT);
        CHECK_ST(netvm_atomic(ctx, r_vanish, 0, NETVM_AOP_FADD, 1, 0, NULL), NETVM_ERR_FAULT);
    }
    CHECK_OK(netvm_barrier(ctx));

    /* a valid handle imports and works; handles travel out of band, here
     * through the next rank's own exported memory */
    CHECK_OK(netvm_put(ctx, r_rw, 1024, &hrw, sizeof hrw, 0));
    CHECK_OK(netvm_barrier(ctx));
    netvm_seg_handle_t hprev;
    memcpy(&hprev, rw + 1024, sizeof hprev);
    CHECK(hprev.rank == (rank + size - 1) % size);
    netvm_rseg_t *r_prev;
    CHECK_OK(netvm_import_handle(ctx, &hprev, &r_prev));
    uint64_t v = 0x0102030405060708ull, got = 0;
    CHECK_OK(netvm_put(ctx, r_prev, 16, &v, 8, 0));
    CHECK_OK(netvm_get(ctx, &got, r_prev, 16, 8, 0));
    CHECK(got == v);
    CHECK_OK(netvm_barrier(ctx));
    memcpy(&got, rw + 16, 8);
    CHECK(got == v);

    CHECK(strcmp(netvm_strerror(NETVM_ERR_KEY), netvm_strerror(NETVM_ERR_BOUNDS)) != 0);
    CHECK(netvm_strerror((netvm_status_t)999) != NULL);

    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    free(gone);
    return 0;
}
