/* Registration strategies: who pins a target's memory for remote access,
 * when, and for how long (docs/registration.md). One object per context
 * holds both sides:
 *
 *  - the initiator's side decides what must be pinned at a peer before an
 *    access and asks for it (nv_reg_acquire / nv_reg_release);
 *  - the target's side is the pin table: buckets with reference counts
 *    (pin and unpin through a pinner: mlock and munlock unless the owner
 *    sets another, such as a link's registration), a victim FIFO of unused pinned
 *    buckets, whole ranges pinned at export (pin-all), and what each peer
 *    holds, so that a peer that dies gives its pins back.
 *
 * The policy knows nothing of the network: a move (release some buckets,
 * acquire some ranges, one round trip) and a wait (drive progress until a
 * condition holds) are callbacks the owner (core) supplies, as GASNet's
 * firehose separates policy from its active messages. Peers are named by
 * id; segments by an opaque pointer the callbacks understand. */
#ifndef NV_REG_REG_H
#define NV_REG_REG_H

#include <netvm/netvm.h>
#include <netvm/reg.h>

#include <stddef.h>
#include <stdint.h>

enum nv_reg_kind {
    NV_REG_NONE = 0,          /* nothing pinned (NetVM's way) */
    NV_REG_PIN_ALL,           /* the target pins each segment whole at export */
    NV_REG_RENDEZVOUS,        /* one round trip per operation pins its range; unpinned after */
    NV_REG_RENDEZVOUS_KEEP,   /* the same, never unpinned */
    NV_REG_FIREHOSE,          /* the Firehose algorithm */
};

/* "none", "pin-all", ...: 0, or -1 if the name is unknown */
int         nv_reg_kind_parse(const char *name, enum nv_reg_kind *out);
const char *nv_reg_kind_name(enum nv_reg_kind k);

struct nv_reg_params {
    enum nv_reg_kind kind;
    uint64_t bucket;      /* bytes, a multiple of the page size */
    uint64_t m;           /* bytes a target keeps pinned for peers' firehoses at most */
    uint64_t maxvictim;   /* bytes of unused pinned buckets a target keeps */
    unsigned peers;       /* the peers M is shared among: each gets M / (bucket * peers) firehoses */
    int      timeout_ms;  /* a wait for a free firehose gives up after this (< 0: never) */
};

/* A range at a peer (its virtual addresses). */
struct nv_reg_range {
    uint64_t addr, len;
};

/* How the target pins a bucket. Without one the pin table mlocks. A
 * pinner with keys (an RDMA link's registration, fi_mr_reg) makes each
 * pinned bucket a registration of its own that initiators must name by
 * its key: operations are then split at buckets (nv_reg_max_span), and
 * each acquire learns the key of its bucket. */
struct nv_reg_pinner {
    void *arg;
    /* pin [addr, addr + len) for peers' accesses with rights (NETVM_READ,
     * NETVM_WRITE, NETVM_ATOMIC: the segment's; a keyed pinner's
     * registration allows no more): a handle for unpin, and the key
     * initiators name it by */
    netvm_status_t (*pin)(void *arg, uint64_t addr, uint64_t len, unsigned rights, void **handle, uint64_t *key);
    void           (*unpin)(void *arg, void *handle);
};

/* What an initiator names a pinned bucket by (keyed pinners): the key
 * and where that registration begins (the target's address). */
struct nv_reg_key {
    uint64_t key, base;
};

/* Flags of a move. */
enum {
    NV_REG_MOVE_KEEP = 1u << 0,   /* acquire a bucket only if the peer holds none of it yet */
};

struct nv_reg_net {
    void *arg;
    /* One round trip to peer: the target releases one hold on each bucket
     * of rel (bucket addresses), then takes one on each bucket of acq
     * (ranges inside seg, bucket-aligned except at the segment's ends).
     * keys (NULL unless the strategy is keyed): the target's key of each
     * acquired range (then each is one bucket). */
    netvm_status_t (*move)(void *arg, int peer, const void *seg, unsigned flags, const uint64_t *rel,
                           unsigned nrel, const struct nv_reg_range *acq, unsigned nacq, struct nv_reg_key *keys);
    /* Drive progress until done(darg) (NETVM_OK) or the timeout; refused
     * (NETVM_ERR_AGAIN) where the caller may not wait. */
    netvm_status_t (*wait)(void *arg, int (*done)(void *darg), void *darg, int timeout_ms);
};

struct nv_reg;

netvm_status_t nv_reg_create(struct nv_reg **r, const struct nv_reg_params *p, const struct nv_reg_net *net);
/* unpins everything still pinned */
void           nv_reg_destroy(struct nv_reg *r);
enum nv_reg_kind nv_reg_kind_of(const struct nv_reg *r);
const struct nv_reg_params *nv_reg_params_of(const struct nv_reg *r);
/* the largest range one acquire may cover (operations are split to fit) */
uint64_t       nv_reg_max_span(const struct nv_reg *r);
/* Target: pin through p from now on (before anything is pinned; copied),
 * keys != 0: its pins carry keys the initiators must name (see above).
 * Initiator: keyed says acquires must learn keys. Both sides of a job
 * agree, as they agree on the bucket size. */
void           nv_reg_set_pinner(struct nv_reg *r, const struct nv_reg_pinner *p, int keyed);
int            nv_reg_keyed(const struct nv_reg *r);
/* The pinner is going away (its link closes): every bucket is unpinned
 * through it now and the holds on them forgotten; mlock from then on. */
void           nv_reg_drop_pinner(struct nv_reg *r);

/* --- initiator ------------------------------------------------------------------ */

/* Before an access to [addr, addr + len) at peer (in seg, which sid names
 * among peer's segments): make sure it is pinned there and stays so until
 * nv_reg_release of the same range. key (keyed strategies; may be NULL
 * otherwise): the bucket's key. Keyed, a firehose serves one segment: a
 * bucket two segments share is two registrations at the target (each
 * with its segment's rights), and each has its own key. */
netvm_status_t nv_reg_acquire(struct nv_reg *r, int peer, uint32_t sid, const void *seg, uint64_t addr,
                              uint64_t len, struct nv_reg_key *key);
/* The access is complete. Never blocks and sends nothing (any thread). */
void           nv_reg_release(struct nv_reg *r, int peer, uint32_t sid, uint64_t addr, uint64_t len);

/* --- target ---------------------------------------------------------------------- */

/* A move from peer (net->move's far end): rel, then acq, already checked
 * against the segment (addresses of this process), whose rights are
 * rights. On failure no acquire of this move is left held. keys (may be
 * NULL): the key of the registration, with those rights, covering each
 * acquired range (keyed pinners: each range lies in one bucket). */
netvm_status_t nv_reg_serve_move(struct nv_reg *r, int peer, unsigned flags, unsigned rights,
                                 const uint64_t *rel, unsigned nrel, const struct nv_reg_range *acq,
                                 unsigned nacq, struct nv_reg_key *keys);
/* pin-all: a segment is pinned whole at export, unpinned at unexport */
netvm_status_t nv_reg_pin_whole(struct nv_reg *r, uint64_t addr, uint64_t len);
void           nv_reg_unpin_whole(struct nv_reg *r, uint64_t addr, uint64_t len);
/* 1 if every byte of [addr, addr + len) is pinned now */
int            nv_reg_pinned(struct nv_reg *r, uint64_t addr, uint64_t len);

/* A peer left or died: the target gives back what it held, the initiator
 * forgets its firehoses to it. */
void           nv_reg_peer_gone(struct nv_reg *r, int peer);

void           nv_reg_get_stats(struct nv_reg *r, netvm_reg_stats_t *s);

#endif
