/* The address translation unit (EXTOLL's ATU, NetVM's shadow table): the
 * per-context table from a segment slot to the local range it exports, with
 * the key and rights every remote access is checked against. Lookups are
 * O(1) by slot (a handle carries it), so they stay constant over tens of
 * thousands of segments. The progress thread reads entries while the
 * application exports and unexports: each entry is a seqlock, and
 * nv_atu_revoke waits for any access that the target executes itself
 * (nv_atu_serve_begin/end) to finish. */
#ifndef NV_CORE_ATU_H
#define NV_CORE_ATU_H

#include <netvm/netvm.h>
#include <stdatomic.h>
#include <stdint.h>

struct nv_atu_entry {
    _Atomic uint64_t word;   /* generation << 1 | live */
    uint64_t key;
    uint64_t addr;
    uint64_t len;
    unsigned rights;
    void    *owner;          /* the netvm_seg_t */
};

struct nv_atu {
    struct nv_atu_entry *e;
    uint32_t  cap;
    uint32_t *free;          /* stack of free slots */
    uint32_t  nfree;
    _Atomic uint64_t serve_seq;  /* odd while the target executes a remote request */
};

netvm_status_t nv_atu_init(struct nv_atu *atu, uint32_t cap);
void           nv_atu_fini(struct nv_atu *atu);
/* Reserve a slot (application thread only). */
netvm_status_t nv_atu_alloc(struct nv_atu *atu, uint32_t *slot);
void           nv_atu_set(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t addr,
                          uint64_t len, unsigned rights, void *owner);
/* Mark revoked and wait until no request served by this process still uses
 * it. */
void           nv_atu_revoke(struct nv_atu *atu, uint32_t slot);
/* The slot may be reused (after every link has fenced it too). */
void           nv_atu_release(struct nv_atu *atu, uint32_t slot);
/* Check an access and translate it; *addr is the local address. */
netvm_status_t nv_atu_translate(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t off,
                                uint64_t len, unsigned need, uint64_t *addr);
/* The same, also giving the segment's rights (NETVM_READ, ...). */
netvm_status_t nv_atu_translate_rights(struct nv_atu *atu, uint32_t slot, uint64_t key, uint64_t off,
                                       uint64_t len, unsigned need, uint64_t *addr, unsigned *rights);

static inline void nv_atu_serve_begin(struct nv_atu *atu)
{
    atomic_fetch_add_explicit(&atu->serve_seq, 1, memory_order_seq_cst);
}

static inline void nv_atu_serve_end(struct nv_atu *atu)
{
    atomic_fetch_add_explicit(&atu->serve_seq, 1, memory_order_release);
}

/* Bounds check that cannot overflow. */
static inline int nv_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

#endif
