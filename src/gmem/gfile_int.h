/* What the file cache's files share (gfile.c: the handle, pread, the
 * mapping; gfile_win.c: the mapped-block windows). */
#ifndef NV_GMEM_GFILE_INT_H
#define NV_GMEM_GFILE_INT_H

#include "gmem/store_remote.h"

#include <netvm/gfile.h>
#include <pthread.h>

struct netvm_gfile {
    netvm_ctx_t      *ctx, *own;
    int               fd;
    uint64_t          size, npages;
    char              name[NV_GM_NAME_MAX + 1];
    netvm_gmem_opts_t opts;
    int               has_opts;
    struct nv_gstore *store;         /* pread's (NULL for an empty file) */
    _Atomic uint64_t  file_reads, file_bytes, cache_blocks;
    pthread_mutex_t   lock;          /* map, windows */
    netvm_gmem_t     *map;
    void             *map_addr;
    netvm_gfile_win_t *wins;
};

const netvm_gmem_opts_t *nv_gfile_opts(const netvm_gfile_t *f);
/* A cache store of f's file on own (one per pread handle, mapping, window set). */
netvm_status_t nv_gfile_open_store(netvm_gfile_t *f, netvm_ctx_t *own, struct nv_gstore **s);
/* Unmap f's window sets (at close). */
void nv_gfile_wins_close(netvm_gfile_t *f);

#endif
