/* Direct reads: a client on the same machine as a memory server reads its
 * pages straight from the server's pool, as an RDMA client reads a far
 * memory server's (one-sided), and the server does nothing for it.
 *
 * The server keeps its pool and the index of it (the page table's buckets
 * and entries, and one sequence word per shard) in one segment from
 * netvm_alloc_shared (the "view"), exported read-only with no name. It
 * gives the segment's handle only to a client whose HELLO came over the
 * shm link (HELLO's reply payload): such a client could read the server's
 * memory with process_vm_readv anyway, so nothing is exposed that was not,
 * while a client across the network never learns the key. A client that
 * imports the view maps it (shm) and finds a page as the server's GET
 * does, without a lock:
 *
 *   seqlock: every change a shard's entries or their pages' bytes see (an
 *   insert, a removal, a PUT overwriting a page) happens between two
 *   increments of the shard's word, odd while it lasts. A reader reads the
 *   word (even), walks the bucket's chain, copies the page, and reads the
 *   word again: equal means the copy is the page as stored; otherwise it
 *   tries again, and after a few tries asks the server (NV_GM_GET). A slot
 *   freed and taken by another page is first removed from its chain, which
 *   bumps its old shard's word before the new bytes are written, so a copy
 *   that saw them fails the check.
 *
 * A page the view does not show (moved away, never stored there, a shard
 * busy for every try) is asked of the server as before: direct reads only
 * ever replace a GET that would have returned the same bytes. */
#ifndef NV_GMEM_DIRECT_H
#define NV_GMEM_DIRECT_H

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

/* Bumped when the layout below or the entries' layout changes: a client
 * reads only a view of its own layout. */
#define NV_GM_VIEW_LAYOUT 1u
/* Bytes between two shards' sequence words (one cache line each). */
#define NV_GM_VIEW_SEQ_STRIDE 64u
/* An entry of the page table as a reader sees it: the first bytes of the
 * server's struct nv_gm_meta (server_int.h asserts they match). */
struct nv_gm_view_entry {
    uint64_t client, region, page;
    uint32_t next;
};

/* The view's first bytes. Offsets are from the view's start. */
struct nv_gm_view_hdr {
    uint64_t layout;        /* NV_GM_VIEW_LAYOUT */
    uint64_t npages;        /* pool slots */
    uint64_t nbuckets;      /* a power of two; a key's bucket is hash & (nbuckets - 1) */
    uint64_t nshards;       /* a key's shard is hash & (nshards - 1) */
    uint64_t off_seq;
    uint64_t off_buckets;   /* nbuckets uint32_t: the first slot of the chain, UINT32_MAX none */
    uint64_t off_meta;      /* npages entries of meta_stride bytes */
    uint64_t meta_stride;
    uint64_t off_pool;      /* npages pages */
    uint64_t total;         /* the view's length */
    uint64_t pid;           /* the server's process: a reader reads only while it lives */
};

/* The page table's hash of (client, region, page), shared by the server
 * and readers of its view. */
static inline uint64_t nv_gm_hash3(uint64_t client, uint64_t region, uint64_t page)
{
    /* splitmix64 rounds: client ids are random, regions and pages small
     * and dense; the shard (low bits) must spread consecutive pages */
    uint64_t h = client ^ (region * 0x9e3779b97f4a7c15ull) ^ (page * 0xbf58476d1ce4e5b9ull);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

/* The server's half: the layout for npages slots and nbuckets buckets. */
void nv_gm_view_layout(uint64_t npages, uint64_t nbuckets, uint64_t nshards, uint64_t meta_stride,
                       struct nv_gm_view_hdr *h);

/* The client's half (direct.c). */
struct nv_gm_view;
/* Import the view named by handle from peer and check it; NULL when it
 * cannot be mapped here or is not of this layout (the server is then read
 * through GET only). */
struct nv_gm_view *nv_gm_view_attach(netvm_ctx_t *ctx, int peer, const netvm_seg_handle_t *handle);
/* Copy page (client, region, page) into buf (NV_GM_PAGE bytes): 1 when
 * buf holds the page as the server stores it, 0 when the view does not
 * show it now (ask the server). Never blocks, never faults. */
int  nv_gm_view_read(struct nv_gm_view *v, uint64_t client, uint64_t region, uint64_t page, void *buf);
/* Pages first + i of a run (i < n <= 64, bit i of want) into buf + i
 * pages, as nv_gm_view_read each, with the run's lookups overlapped: the
 * bits of those copied. */
uint64_t nv_gm_view_read_run(struct nv_gm_view *v, uint64_t client, uint64_t region, uint64_t first, uint64_t n,
                             void *buf, uint64_t want);
/* Whether the server still lives (one poll of its pidfd). A copy is used
 * only if this holds after it: a dead server's pool stays mapped here,
 * frozen, and a page stored since elsewhere (a shared region's writer
 * re-placing it) must not be read from it. */
int  nv_gm_view_alive(struct nv_gm_view *v);
/* Drop the import (no reader may be in nv_gm_view_read). */
void nv_gm_view_detach(struct nv_gm_view *v);

#endif
