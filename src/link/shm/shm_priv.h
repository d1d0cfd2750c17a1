/* Private state of the shm link, shared by its files. */
#ifndef NV_LINK_SHM_PRIV_H
#define NV_LINK_SHM_PRIV_H

#include "link/shm/shm.h"
#include "link/shm/shm_block.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

/* A record that did not fit the peer's ring when its sender could not
 * wait (an answer, a handler's message): sent, in order, by later polls. */
struct shm_spill {
    struct shm_spill *next;
    size_t            len;
    uint8_t           data[];
};

/* A dead producer's unsettled note (shm_link.claims). */
struct shm_claim {
    uint64_t pos;
    uint32_t k;
    int32_t  peer;                 /* its id, for the log */
};

struct shm_peer {
    struct nv_link_ev ev;          /* epoll token: the peer's pidfd */
    struct nv_lpeer  *lp;
    int               self;
    pid_t             pid;
    int               pidfd;       /* readable once the peer has exited */
    int               doorbell;    /* our dup of the peer's eventfd */
    struct nv_shm_hdr *hdr;        /* the peer's block, mapped */
    struct nv_ep      ep;          /* the peer's endpoint block, mapped (ours for ourselves) */
    _Atomic int       dead;
    pthread_mutex_t   spill_lock;
    struct shm_spill *spill_head, *spill_tail;
    _Atomic int       nspill;
    _Atomic uint64_t  head_seen;   /* the peer's ring head as our producers last read it */
    struct shm_peer  *next, *prev; /* the link's list of attached peers */
};

/* A large payload waiting for its receiver to copy it. */
struct shm_rndv {
    struct shm_peer *pe;           /* NULL: free */
    void            *token;        /* completed when the receiver is done (NULL: a copy) */
    uint32_t         id;
    void            *copy;         /* our copy, freed then */
    uint64_t         cookie;
};

struct shm_link {
    struct nv_link     base;
    struct nv_shm_params p;
    struct nv_shm_card card;       /* what peers need to attach to us */
    struct nv_shm_hdr *self;       /* our block */
    int                block_fd;
    int                doorbell;   /* our eventfd */
    atomic_flag        consuming;  /* one consumer of our ring at a time */
    uint8_t           *rxbuf;      /* the consumer's copy of a record */
    size_t             rxcap;
    uint64_t           gen;        /* publish generations */
    int                asym;       /* membarrier registered: accesses fence with a compiler barrier */
    uint64_t           uid;        /* unique in the process (a thread's cached op slot names it) */
    _Atomic long       test_die_in_push;  /* NETVM_TEST_SHM_DIE_IN_PUSH (shm_msg.c); 0: off */
    int                test_die_at_swap;  /* ... ":swap": as if killed right after the swap */
    pthread_mutex_t    push_shared;   /* threads beyond NV_SHM_OP_SLOTS: their one push note */
    /* Notes of dead producers that name a slot of our ring without saying
     * they won it (util/mpsc_ring.h, nv_mpsc_claim_check): kept until it is
     * clear whether the slot needs finishing */
    pthread_mutex_t    claims_lock;
    struct shm_claim  *claims;
    uint32_t           nclaims, capclaims;
    _Atomic uint32_t   claims_pending;
    struct nv_link_ev  doorbell_ev;   /* epoll token: our doorbell */
    pthread_mutex_t    peers_lock;
    struct shm_peer   *peers;      /* attached peers (revocation fences look at each) */
    _Atomic int        spilling;   /* peers with spilled records */
    pthread_mutex_t    rndv_lock;
    struct shm_rndv   *rndv;
    uint32_t           nrndv;
    uint64_t           rndv_seq;
};

/* Per-import state behind nv_rdesc.link_priv. */
struct shm_import {
    struct shm_peer  *peer;
    _Atomic uint64_t *word;        /* the target's entry word */
    uint64_t          live_word;   /* its value while our import is valid */
    void             *map_base;
    size_t            map_len;
};

static inline struct shm_link *shm_of(struct nv_link *l) { return (struct shm_link *)l; }
static inline struct shm_peer *shm_peer_of(struct nv_lpeer *lp) { return lp->conn; }

/* Ring records: a kind, the sender's peer id at the receiver, then the body. */
/* SHM_REC_VOID: a record whose payload could not be read from the sender's
 * memory after its slots were taken; the receiver skips it */
enum { SHM_REC_AM = 1, SHM_REC_AM_RNDV, SHM_REC_RNDV_DONE, SHM_REC_VOID };
#define SHM_REC_PREFIX 8
#define SHM_RNDV_DESC  24   /* addr u64 | slot u32 | pad u32 | cookie u64 */
#define SHM_RNDV_DONE  16   /* slot u32 | status u16 | pad u16 | cookie u64 */

/* shm_rma.c */
netvm_status_t shm_seg_publish(struct nv_link *l, const struct nv_seg_desc *d);
void           shm_seg_revoke(struct nv_link *l, uint32_t slot);
void           shm_seg_fence(struct nv_link *l, uint32_t slot);
netvm_status_t shm_import(struct nv_link *l, struct nv_lpeer *lp, const char *name, uint32_t slot,
                          uint64_t key, struct nv_rdesc *out);
void           shm_release(struct nv_link *l, struct nv_rdesc *d);
netvm_status_t shm_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src, size_t len,
                       int remote, void *token, uint32_t id, const struct nv_note *note);
netvm_status_t shm_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst, size_t len,
                       void *token, uint32_t id, const struct nv_note *note);
netvm_status_t shm_atomic(struct nv_link *l, struct nv_rdesc *d, uint64_t off, netvm_atomic_op_t op,
                          uint64_t operand, uint64_t compare, uint64_t *result, const struct nv_note *note);
netvm_status_t shm_cma_read(struct nv_link *l, struct shm_peer *pe, uint64_t raddr, void *lbuf, size_t len);

/* shm_msg.c: the message ring */
netvm_status_t shm_am_send(struct nv_link *l, struct nv_lpeer *lp, const uint8_t *hdr, size_t hlen,
                           const void *payload, size_t plen, unsigned flags, void *token, uint32_t id);
int            shm_poll(struct nv_link *l, struct nv_lpeer *lp);
/* Take in everything the ring holds now, waiting for another thread that
 * is taking it in (a peer's death must not overtake its goodbye). */
void           shm_poll_all(struct nv_link *l);
void           shm_ring_doorbell(struct shm_peer *pe);
void           shm_rndv_fail_peer(struct shm_link *s, struct shm_peer *pe);
/* A peer died: finish as void the records it had reserved in our ring and
 * not published (struct nv_shm_pushrec); a note that does not say whether
 * it won its slot waits in shm_link.claims until shm_settle_claims can
 * tell. */
void           shm_finish_dead_pushes(struct shm_link *s, struct shm_peer *pe);
/* Decide the waiting claims that can be decided now; tries for at most
 * spins yields while a live producer's note names a claimed slot. */
void           shm_settle_claims(struct shm_link *s, unsigned spins);
/* The calling thread's slot among the process's per-thread words of the
 * shm block (the revocation fence's, the push records'); NV_SHM_OP_SLOTS
 * for threads beyond them. */
int            shm_thread_slot(struct shm_link *s);
void           shm_spill_free(struct shm_peer *pe);

/* shm_os.c: the system calls, isolated */
void *shm_map_fd(int fd, size_t len, int writable);   /* writable 0: PROT_READ only */

#endif
