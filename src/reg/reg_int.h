/* The state behind struct nv_reg: the target's pin table (pin_table.c) and
 * the initiator's strategies (firehose.c, rendezvous.c). */
#ifndef NV_REG_INT_H
#define NV_REG_INT_H

#include "reg/reg.h"
#include "reg/reg_map.h"

#include <pthread.h>
#include <stdatomic.h>

/* Buckets one acquire covers at most: bounds a move's message. */
#define NV_REG_SPAN_BUCKETS 256u

/* --- target: the pin table ---------------------------------------------------- */

/* One registration of part of a bucket through a keyed pinner: the range
 * a move asked for (inside one segment), with that segment's rights. A
 * range no registration of the same rights covers yet is registered on
 * its own; all stay until the bucket is unpinned, since peers holding it
 * may still name their keys. */
struct pin_reg {
    void *h;
    struct nv_reg_key k;           /* k.base: where it begins */
    uint64_t len;
    unsigned rights;
    struct pin_reg *next;          /* older */
};

struct pin_bucket {
    struct nv_rmap_node node;      /* a = 0, b = the bucket's address */
    uint64_t lo, hi;               /* what is pinned: the bucket's part inside the segments asked for */
    struct pin_reg *regs;          /* keyed pinners: newest first */
    uint32_t refs;                 /* holds by peers; 0: a victim */
    struct pin_bucket *vprev, *vnext;
};

struct pin_hold {                  /* what one peer holds of one bucket */
    struct nv_rmap_node node;      /* a = peer, b = bucket */
    uint32_t n;
};

struct pin_whole { uint64_t addr, len; };

/* --- initiator: firehoses -------------------------------------------------------- */

enum { FH_PENDING = 1, FH_LIVE, FH_FAILED };

struct fh_peer;
struct fh_entry {
    struct nv_rmap_node node;      /* a = peer (low 32 bits) | keyed: segment << 32, b = remote bucket */
    uint32_t refs;                 /* operations in flight through it */
    _Atomic int state;             /* FH_* */
    netvm_status_t st;             /* FH_FAILED: why */
    struct nv_reg_key k;           /* FH_LIVE, keyed: what the target names the bucket by */
    struct fh_peer *fp;
    struct fh_entry *uprev, *unext;   /* the peer's unused firehoses, oldest first */
};

struct fh_peer {
    struct nv_rmap_node node;      /* a = peer, b = 0 */
    unsigned count;                /* firehoses attached (pending or live) */
    unsigned nunused;
    struct fh_entry *uhead, *utail;
};

struct rdv_peer {
    struct nv_rmap_node node;      /* a = peer, b = 0 */
    uint64_t *rel;                 /* buckets to unpin, sent with the next pin */
    unsigned nrel, cap;
};

struct nv_reg {
    struct nv_reg_params p;
    struct nv_reg_net    net;
    uint64_t page;

    /* target; pinner.pin NULL: mlock. keyed: the pinner's pins carry keys
     * (target), acquires learn keys (initiator) */
    struct nv_reg_pinner pinner;
    int keyed;
    pthread_mutex_t tlock;
    struct nv_rmap  buckets, holds;
    struct pin_bucket *vhead, *vtail;   /* victim FIFO: in at the head, out at the tail */
    uint64_t nbuckets, ninuse, nvictim;
    uint64_t max_inuse, max_victim, max_total;   /* in buckets */
    struct pin_whole *whole;
    size_t nwhole, whole_cap;
    uint64_t pins, unpins, pinned_bytes, pinned_high, peer_releases;
    _Atomic uint64_t refused;

    /* initiator */
    pthread_mutex_t ilock;
    struct nv_rmap  fh, fh_peers, rdv_peers;
    unsigned        fh_per_peer;        /* F */
    _Atomic uint64_t fh_gen;            /* a firehose became unused */
    uint64_t hits, misses, moves;
};

/* pin_table.c */
void           nv_pin_init(struct nv_reg *r);
void           nv_pin_fini(struct nv_reg *r);
void           nv_pin_peer_gone(struct nv_reg *r, int peer);

/* firehose.c, rendezvous.c (the initiator's lock is not held) */
netvm_status_t nv_fh_acquire(struct nv_reg *r, int peer, uint32_t sid, const void *seg, uint64_t addr,
                             uint64_t len, struct nv_reg_key *key);
void           nv_fh_release(struct nv_reg *r, int peer, uint32_t sid, uint64_t addr, uint64_t len);
void           nv_fh_peer_gone(struct nv_reg *r, int peer);
void           nv_fh_fini(struct nv_reg *r);
netvm_status_t nv_rdv_acquire(struct nv_reg *r, int peer, const void *seg, uint64_t addr, uint64_t len,
                              struct nv_reg_key *key);
void           nv_rdv_release(struct nv_reg *r, int peer, uint64_t addr, uint64_t len);
void           nv_rdv_peer_gone(struct nv_reg *r, int peer);
void           nv_rdv_fini(struct nv_reg *r);

static inline uint64_t nv_reg_bucket_of(const struct nv_reg *r, uint64_t a) { return a & ~(r->p.bucket - 1); }

#endif
