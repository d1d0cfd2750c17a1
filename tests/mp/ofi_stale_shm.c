/* A process killed with SIGKILL leaves libfabric's shm region behind in
 * /dev/shm, named after its process id; a later process with the same id
 * must still come up on the ofi link. Each rank plants such a leftover
 * under its own id before netvm_init, then the job does a put. */
#include "check.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/shm/%d:0:0", (int)getpid());
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 1 << 20) == 0);
    const uint64_t magic = 0x6e65747666697368ull;   /* marks the leftover's bytes */
    CHECK(pwrite(fd, &magic, sizeof magic, (1 << 20) - 8) == sizeof magic);
    close(fd);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    /* the leftover is gone: whatever lives under that name now (the
     * provider's own region) does not hold its bytes */
    uint64_t at = 0;
    if ((fd = open(path, O_RDONLY)) >= 0) {
        CHECK(pread(fd, &at, sizeof at, (1 << 20) - 8) >= 0);
        close(fd);
    }
    CHECK(at != magic);
    int me = netvm_rank(ctx), n = netvm_size(ctx);
    static uint64_t word;
    netvm_seg_t *s;
    CHECK_OK(netvm_export(ctx, &word, sizeof word, NETVM_RW, "w", &s));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, (me + 1) % n, "w", &r));
    uint64_t v = 100 + (uint64_t)me;
    CHECK_OK(netvm_put(ctx, r, 0, &v, sizeof v, 0));
    CHECK_OK(netvm_flush(ctx, -1));
    CHECK_OK(netvm_barrier(ctx));
    CHECK(word == 100 + (uint64_t)((me + n - 1) % n));
    CHECK_OK(netvm_unexport(s));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
