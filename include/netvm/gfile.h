/*
 * netvm file cache: a file's blocks held in network memory and shared by
 * every client that reads the file (GMS's cooperative file cache,
 * docs/gmem.md "File cache"). One client's miss reads the block from the
 * file and stores it on the memory servers; every later read of it, by
 * any client naming the same servers, comes from network memory. Reads
 * are sticky: the servers keep a block after serving it.
 *
 * A file's cache is named by the file's identity and content (device,
 * inode, size, modification and change times), so a file changed since is
 * another cache and is never served stale. The cache is a shared region of
 * include/netvm/gmem.h and follows its rules: every client must name the
 * same servers (NETVM_GMEM_SERVERS) and R; embedded servers are one
 * process's own and share with nobody (the cache then serves that process
 * alone). Cached blocks stay on the servers until netvm_gfile_remove.
 *
 * Three ways to read: netvm_gfile_pread (copies; runs of blocks come in
 * one request each), netvm_gfile_map (the whole file mapped read-only
 * through the pager: faults fetch blocks, sequential ones read ahead), and
 * mapped blocks (the paper's MMB, netvm_gfile_window: N windows of B bytes
 * that the program moves over the file).
 */
#ifndef NETVM_GFILE_H
#define NETVM_GFILE_H

#include <netvm/gmem.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct netvm_gfile     netvm_gfile_t;
typedef struct netvm_gfile_win netvm_gfile_win_t;

/* Open path (a regular file) through the cache. opts as for
 * netvm_gmem_map (servers, credential, R, budget and read-ahead of the
 * mappings), may be NULL; the strings it points to must outlive f.
 * NETVM_ERR_SYS: the file cannot be opened (errno says why); NETVM_ERR_INVAL:
 * not a regular file; the servers' errors as netvm_gmem_map_shared's. */
netvm_status_t netvm_gfile_open(netvm_ctx_t *ctx, const char *path, const netvm_gmem_opts_t *opts,
                                netvm_gfile_t **f);
/* Unmap its mappings and windows, close the file. The cached blocks stay. */
netvm_status_t netvm_gfile_close(netvm_gfile_t *f);
/* The file's size when opened (what the cache holds). */
netvm_status_t netvm_gfile_size(const netvm_gfile_t *f, uint64_t *size);

/* Read up to len bytes at off into buf; *got: bytes read (less than len
 * only at the end of the file; 0 at or past it). Any thread. */
netvm_status_t netvm_gfile_pread(netvm_gfile_t *f, void *buf, size_t len, uint64_t off, size_t *got);

/* The whole file mapped read-only (a write is a SIGSEGV); the bytes past
 * its end up to the page read as zeros. *len: the file's size. One mapping
 * per handle (a second call returns it again); unmapped by close.
 * NETVM_ERR_INVAL for an empty file. */
netvm_status_t netvm_gfile_map(netvm_gfile_t *f, void **addr, size_t *len);

/* Mapped blocks: nwin windows of wsize bytes each (a multiple of
 * NETVM_GMEM_PAGE), contiguous at *addr (window i at *addr + i * wsize),
 * read-only, each over file offset 0 until moved. Bytes past the file's
 * end read as zeros. */
netvm_status_t netvm_gfile_window(netvm_gfile_t *f, unsigned nwin, size_t wsize, netvm_gfile_win_t **w,
                                  void **addr);
/* Move window i over the file at off (a multiple of NETVM_GMEM_PAGE): its
 * old pages leave local memory (they stay cached on the servers), and the
 * new ones are fetched as they are touched, with read-ahead. The program
 * must not touch window i while it moves. */
netvm_status_t netvm_gfile_window_move(netvm_gfile_win_t *w, unsigned i, uint64_t off);
netvm_status_t netvm_gfile_window_close(netvm_gfile_win_t *w);

typedef struct {
    uint64_t file_reads;     /* blocks read from the file (misses of the cache) */
    uint64_t file_bytes;     /* bytes read from the file */
    uint64_t cache_blocks;   /* blocks pread got from network memory */
} netvm_gfile_stats_t;
/* Counters since open, over every interface of f. */
netvm_status_t netvm_gfile_stats(const netvm_gfile_t *f, netvm_gfile_stats_t *s);

/* Free the cache of path's current content on the servers (nobody may
 * have it open: NETVM_ERR_BUSY). NETVM_ERR_NOTFOUND: not cached. */
netvm_status_t netvm_gfile_remove(netvm_ctx_t *ctx, const char *path, const netvm_gmem_opts_t *opts);

#ifdef __cplusplus
}
#endif

#endif
