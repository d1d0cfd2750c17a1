/* The live statistics of one process under `netvm gmem run`: the
 * interposer keeps them in a small file of the run's directory
 * (NETVM_GMEM_STATS_DIR/PID.N.stat, mode 600), rewritten every 100 ms and
 * at exit; `netvm stat gmem:PID` and the run's summary read it. A sequence
 * word, odd while a writer is in the middle, gives readers a consistent
 * copy without a lock. */
#ifndef NV_PRELOAD_STATS_FILE_H
#define NV_PRELOAD_STATS_FILE_H

#include <netvm/gmem.h>

#include <stdint.h>

#define NVP_STATS_MAGIC 0x336e75726d67766eull   /* "nvgmrun3": netvm_gmem_stats_t grew (direct_fetches) */
#define NVP_STATS_SUFFIX ".stat"

struct nvp_counts {
    uint64_t mmaps, munmaps, mallocs, frees, reallocs, realloc_moves, mremaps, discards;
    uint64_t live_bytes, peak_live_bytes;   /* bytes of the region handed to the program */
};

struct nvp_stats_file {
    uint64_t            magic;
    uint64_t            seq;            /* __atomic; odd: being written */
    int64_t             pid;
    uint64_t            reserve, threshold, budget;
    uint64_t            updated_ns;     /* CLOCK_REALTIME of the last write */
    int32_t             exited;         /* the process ran its exit path */
    int32_t             glibc_malloc;   /* the malloc family was intercepted (the program's malloc is glibc's) */
    char                prog[64];
    netvm_gmem_stats_t  gm;
    netvm_gmem_health_t health;
    struct nvp_counts   n;
};

/* Read a consistent copy of the file at path: 0, or -1 (missing, not one
 * of these, or always being written). */
int nvp_stats_read(const char *path, struct nvp_stats_file *out);

#endif
