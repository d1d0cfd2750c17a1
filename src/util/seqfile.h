/* Statistics files that one process rewrites in place and others read
 * without a lock (`netvm gmem run`'s, preload/stats_file.h, and each
 * context's, wire/ctx_stats.h): a fixed-size struct, a magic word first,
 * and a sequence word the writer makes odd while it writes. */
#ifndef NV_UTIL_SEQFILE_H
#define NV_UTIL_SEQFILE_H

#include <stddef.h>
#include <stdint.h>

/* A consistent copy of the size-byte file at path into out: 0, or -1 if it
 * is missing, shorter than size (still being made), does not begin with
 * magic, or was always being written. seq_off: where its sequence word is. */
int nv_seqfile_read(const char *path, void *out, size_t size, size_t seq_off, uint64_t magic);

#endif
