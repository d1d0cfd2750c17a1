/* netvm stat pid:PID's source: with NETVM_STATS_DIR set, each context's
 * file follows its registration counters while it runs (rewritten by the
 * progress engine, not only at exit). Each rank puts into its neighbour,
 * then watches its own file until it shows the counters netvm_reg_stats
 * gives; the wrapper (stats_file.sh) then reads the finished files through
 * `netvm stat`. Run with NETVM_REG=firehose on tcp. */
#include "reg_util.h"
#include "wire/ctx_stats.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define OPS 200

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    static uint8_t mem[1 << 20];
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, sizeof mem, NETVM_RW, "ws", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, (rank + 1) % size, "ws", &r));
    uint64_t v = 0;
    for (int i = 0; i < OPS; i++, v++)
        CHECK_OK(netvm_put(ctx, r, (size_t)(i * 4099) % (sizeof mem - 8) & ~(size_t)7, &v, 8, 0));
    CHECK_OK(netvm_flush(ctx, -1));
    netvm_reg_stats_t s;
    CHECK_OK(netvm_reg_stats(ctx, &s));
    CHECK(s.hits + s.misses >= OPS && s.moves > 0);

    /* this context's file: DIR/PID.0.netvm */
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.0%s", getenv("NETVM_STATS_DIR"), (int)getpid(), NV_CTX_STATS_SUFFIX);
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    const struct nv_ctx_stats_file *f = mmap(NULL, sizeof *f, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(f != MAP_FAILED);
    close(fd);
    CHECK(f->magic == NV_CTX_STATS_MAGIC && f->rank == rank && f->size == size && !f->finalized);
    CHECK(!strcmp(f->strategy, "firehose"));
    /* the rewrite comes every 100 ms: wait for it by looking, 10 ms apart,
     * up to 30000 times (a stalled writer fails, a slow machine does not) */
    int seen = 0;
    for (int i = 0; i < 30000 && !seen; i++) {
        uint64_t q = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
        seen = !(q & 1) && f->reg_hits == s.hits && f->reg_misses == s.misses && f->reg_moves == s.moves;
        if (!seen)
            nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
    }
    CHECK(seen);
    munmap((void *)f, sizeof *f);
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    printf("rank %d ok: hits %llu misses %llu moves %llu\n", rank, (unsigned long long)s.hits,
           (unsigned long long)s.misses, (unsigned long long)s.moves);
    return 0;
}
