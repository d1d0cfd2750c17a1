/* The live statistics file of one netvm context, written when
 * NETVM_STATS_DIR is set (NETVM_STATS_DIR/PID.N.netvm, mode 600: N counts
 * the contexts this process made), rewritten every 100 ms by the context's
 * progress engine and once more at netvm_finalize; `netvm stat pid:PID`
 * reads it. A sequence word, odd while the writer is in the middle, gives
 * readers a consistent copy without a lock. Fixed-width fields only: the
 * reader may be another build of netvm (the version says which layout). */
#ifndef NV_WIRE_CTX_STATS_H
#define NV_WIRE_CTX_STATS_H

#include <stdint.h>

#define NV_CTX_STATS_MAGIC   0x3174617473766e6eull   /* "nnvstat1" */
#define NV_CTX_STATS_VERSION 1
#define NV_CTX_STATS_SUFFIX  ".netvm"

struct nv_ctx_stats_file {
    uint64_t magic;
    uint32_t version;
    int32_t  finalized;      /* netvm_finalize wrote it last */
    uint64_t seq;            /* __atomic; odd: being written */
    int64_t  pid;
    int32_t  rank, size;
    uint64_t updated_ns;     /* CLOCK_REALTIME of the last write */
    char     prog[64];
    char     strategy[24];   /* NETVM_REG in force */
    /* registration strategies (netvm_reg_stats_t) */
    uint64_t reg_hits, reg_misses, reg_moves;
    uint64_t reg_pins, reg_unpins, reg_pinned_bytes, reg_pinned_high;
    uint64_t reg_buckets, reg_victims, reg_peer_releases, reg_refused;
    /* the local registration cache (links that register their own buffers) */
    uint64_t lreg_hits, lreg_misses, lreg_uncached, lreg_invalidations, lreg_evictions;
    uint64_t lreg_regs, lreg_deregs;
};

#endif
