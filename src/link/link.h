/* The link contract. A link moves bytes between this process and its peers;
 * core chooses one per peer when the peer connects and calls it through
 * this table, never through a switch on the link kind.
 *
 * A link declares what it does natively (struct nv_link_caps: ordering,
 * whether put and get need the target's CPU, remote completion, atomics,
 * notifications, message sizes, whether memory must be registered); core
 * emulates what a link lacks, in one place (core/rma.c, core/notify.c,
 * core/am_core.c), with active messages that the target's progress engine
 * executes.
 *
 * Peers: core keeps one struct nv_lpeer per peer (embedded in its own peer)
 * and passes it to every operation; `conn` is the link's state for that
 * peer. A peer is created when it connects and released (peer_free) only
 * once nothing refers to it any more.
 *
 * Revocation: a target publishes each exported segment with seg_publish and
 * withdraws it with seg_revoke then seg_fence; once seg_fence returns no
 * access by any peer that began before is still running, and every access
 * after seg_revoke fails with NETVM_ERR_REVOKED. */
#ifndef NV_LINK_LINK_H
#define NV_LINK_LINK_H

#include <netvm/netvm.h>
#include "wire/am.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct nv_link;

/* What a link does natively. */
enum {
    NV_LCAP_ORDERED      = 1u << 0,  /* operations to one peer take effect in issue order */
    NV_LCAP_ONESIDED     = 1u << 1,  /* put and get complete without the target's CPU; else the
                                        target's progress engine executes them */
    NV_LCAP_SYNC         = 1u << 2,  /* put, get and import complete before they return (local and
                                        remote completion are one moment); else they may answer
                                        later (NV_LINK_PENDING, core passes a request) */
    NV_LCAP_ATOMIC       = 1u << 3,  /* native atomics on segments whose rdesc has NV_RDESC_ATOMIC */
    NV_LCAP_NOTIFY       = 1u << 4,  /* delivers notifications and counter increments straight into
                                        the peer's endpoint block (ops->notify) */
    NV_LCAP_IMPORT       = 1u << 5,  /* reads the peer's segment table itself (ops->import); else
                                        core asks the target with an active message */
    NV_LCAP_REGISTER     = 1u << 6,  /* memory must be registered (ops->mem_reg) before the link
                                        touches it */
    NV_LCAP_MAPPED       = 1u << 7,  /* may map a peer's segments (netvm_ptr) */
};

struct nv_link_caps {
    unsigned flags;        /* NV_LCAP_* */
    uint64_t max_xfer;     /* largest single put or get; core splits larger ones */
    uint64_t am_eager;     /* largest active-message payload sent with its header; larger
                              payloads move by rendezvous (zero-copy) */
};

/* Notifications an operation asks of the target (EXTOLL's completer and
 * responder; the requester's is core's own business). */
enum {
    NV_NOTE_COMPLETER = NETVM_F_NOTIFY_COMPLETER,  /* put, atomic: at the target once the data is visible */
    NV_NOTE_RESPONDER = NETVM_F_NOTIFY_RESPONDER,  /* get: at the target once its bytes were read */
    NV_NOTE_QUIET     = 1u << 30,  /* put without remote: a failure at the target is dropped, never
                                      kept for the next flush (a write the writer knows may land
                                      in a segment that is gone, and does not care) */
};
struct nv_note {
    unsigned flags;   /* NV_NOTE_* */
    uint64_t tag;
    /* put, on a link without NV_LCAP_SYNC, never with a notification:
     * nonzero, an operation that must not happen if this put fails at the
     * target follows it, naming the same gate (a put with signal); the
     * target remembers the gate of a put that failed (ops->gate_failed) */
    uint32_t gate;
};

/* What a target publishes about one of its segments. */
struct nv_seg_desc {
    uint32_t    slot;
    uint64_t    key;
    uint64_t    addr;      /* in the target's address space */
    uint64_t    len;
    unsigned    rights;
    int         memfd;     /* >= 0: backed by this memfd (offset 0), mappable by peers */
    const char *name;      /* may be NULL */
    void       *mr;        /* what this link's mem_reg returned for it (NV_LCAP_REGISTER), else NULL */
};

enum {
    NV_RDESC_MAPPED = 1u << 0,  /* `mapped` points at the segment: loads and stores */
    NV_RDESC_ATOMIC = 1u << 1,  /* the link runs atomics natively on this segment */
    NV_RDESC_ATOMIC_BASIC = 1u << 2,  /* ... all but NETVM_AOP_FCAA (a fabric's atomics), which
                                         core emulates */
};

/* A link's view of one peer, embedded in core's. */
struct nv_lpeer {
    int             id;       /* the peer id in this context */
    uint32_t        remote_id;/* this process's peer id in the peer's table */
    struct nv_link *link;
    void           *conn;     /* the link's state for this peer */
    _Atomic int     down;     /* the link saw the peer leave or die */
};

/* What an initiator caches about an imported segment. */
struct nv_rdesc {
    struct nv_lpeer *peer;
    uint32_t  slot;
    uint64_t  key;
    uint64_t  addr;
    uint64_t  len;
    unsigned  rights;
    unsigned  flags;      /* NV_RDESC_* */
    uint8_t  *mapped;     /* with NV_RDESC_MAPPED */
    void     *link_priv;  /* the link's own per-import state */
    uint64_t  mr_key;     /* links with ops->mr_key: the target's registration key for this
                             segment on this link (and addr is the segment's address there) */
    uint64_t  mr_off;     /* where the registration mr_key names begins, as an offset into the
                             segment (modulo 2^64): 0 for the whole segment's; a registration
                             strategy's bucket otherwise (core/rma.c's held paths) */
};

/* A link operation that completes later returns NV_LINK_PENDING and then
 * calls up.complete(token) exactly once. Core's request ids name such
 * operations on the wire. */
#define NV_LINK_PENDING     ((netvm_status_t)0x1000)

/* An arriving active message, as the link hands it to core. */
struct nv_am_rx {
    struct nv_lpeer   *from;
    struct nv_am_hdr   h;
    const uint8_t     *payload;  /* the whole payload, valid during the upcall; NULL when it is
                                    not here yet (core then says where it goes: dst) */
    void              *dst;      /* set by core: where a payload that is not here must land
                                    (NULL: the link discards it); at least h.len bytes */
    void              *cookie;   /* core's, for am_end */
};

/* A received message's start, before its header is decoded into rx->h
 * (nv_am_hdr_decode sets every field of it): the rest set one by one,
 * because zeroing the whole struct compiles to a `rep stos` that cost a
 * visible share of a small message's receive. */
static inline void nv_am_rx_start(struct nv_am_rx *rx, struct nv_lpeer *from)
{
    rx->from = from;
    rx->payload = NULL;
    rx->dst = NULL;
    rx->cookie = NULL;
}

/* A registration of this process's own memory that a link holds from the
 * local registration cache (src/reg/rcache.h, which core runs for links
 * through the lreg upcalls below): the registered range, covering what
 * was asked, and what the link's registrar returned for it. */
struct nv_lreg {
    uintptr_t addr;
    size_t    len;
    void     *handle;
};

/* How a cache registers for its link. Access bits (NV_LREG_*) are the
 * link's to define and opaque to the cache: an entry serves a lookup whose
 * bits it includes. Called outside the cache's lock, from the thread
 * calling the cache (never from its monitor). */
struct nv_lreg_registrar {
    void *arg;
    /* register [addr, addr + len) (page-aligned by the cache) for access;
     * *handle is what dereg later receives */
    netvm_status_t (*reg)(void *arg, void *addr, size_t len, unsigned access, void **handle);
    void           (*dereg)(void *arg, void *handle);
};

/* Calls from a link up into core, so core never needs to know link internals. */
struct nv_link_upcalls {
    void *arg;
    /* An active message arrived. With payload != NULL it is complete; else
     * core sets rx->dst and the link calls am_end once the payload landed
     * (or could not: st). */
    void (*am)(void *arg, struct nv_am_rx *rx);
    void (*am_end)(void *arg, struct nv_am_rx *rx, netvm_status_t st);
    /* the peer died, left (graceful) or became unreachable */
    void (*peer_down)(void *arg, struct nv_lpeer *p, int graceful);
    /* a pending operation finished */
    void (*complete)(void *arg, void *token, netvm_status_t st);
    /* the answer to a pending operation begins to arrive: 1 if it still
     * waits (from now on it cannot time out: its buffer is being written),
     * 0 if it was given up (the link drops the answer) */
    int  (*claim)(void *arg, void *token);
    /* target side, for links whose target executes accesses: check an access
     * against this process's ATU and translate it */
    netvm_status_t (*translate)(void *arg, uint32_t slot, uint64_t key, uint64_t off,
                                uint64_t len, unsigned need, uint64_t *addr);
    /* a link that cannot tell a message's sender from where it arrived
     * (shm: one ring for all) names it by the sender's peer id here: a
     * reference to it, or NULL if no such peer */
    struct nv_lpeer *(*peer_ref)(void *arg, uint32_t id);
    void             (*peer_unref)(void *arg, struct nv_lpeer *lp);
    /* the tcp handshake (link/tcp/tcp.h describes them) */
    const void *hs;
    /* A registration cache for the link's local buffers (RDMA descriptors,
     * payloads a peer reads), never stale: lreg_open makes one that
     * registers through r (copied), lreg_get finds or makes a registration
     * covering [addr, addr + len) with access, held until lreg_put;
     * lreg_close deregisters everything (no registration held). Any
     * thread; NULL from lreg_open (and *st) if it cannot be made. */
    void          *(*lreg_open)(void *arg, const struct nv_lreg_registrar *r, netvm_status_t *st);
    netvm_status_t (*lreg_get)(void *cache, const void *addr, size_t len, unsigned access, struct nv_lreg **out);
    void           (*lreg_put)(void *cache, struct nv_lreg *r);
    void           (*lreg_close)(void *arg, void *cache);
};

/* The first member of every object a link registers in core's epoll set,
 * so whoever waits on it knows whose event it is. */
struct nv_link_ev {
    struct nv_link *link;
};

enum {
    NV_AMS_REPLY = 1u << 0,   /* a reply or other answer: never block, queue if need be */
    NV_AMS_NOW   = 1u << 1,   /* leave now, not gathered with later frames */
    NV_AMS_COPY  = 1u << 2,   /* the payload is not referenced after the call returns (the link
                                 copies what it cannot send at once); no token needed */
    NV_AMS_LAZY  = 1u << 3,   /* an eager message may wait, gathered with later frames, for the
                                 next flush_tx (core sends one at the caller's next call, and the
                                 progress thread within NETVM_ACK_DELAY_US) */
};

struct nv_link_ops {
    const char          *name;
    struct nv_link_caps  caps;

    /* registration: memory a link touches must be registered first where
     * caps say NV_LCAP_REGISTER (RDMA); NULL for links that need nothing */
    netvm_status_t (*mem_reg)(struct nv_link *l, void *addr, size_t len, unsigned rights, void **mr);
    void           (*mem_dereg)(struct nv_link *l, void *mr);
    /* links whose initiators need the target's registration key (RDMA:
     * the remote key of fi_write/fi_read): the key of what mem_reg
     * returned. Core's import answer then carries it and the segment's
     * address (the provider may address by virtual address), and the
     * initiator finds them in nv_rdesc.mr_key and .addr. NULL otherwise. */
    uint64_t       (*mr_key)(struct nv_link *l, void *mr);

    /* exporter side. Revocation is two steps, so that no initiator can see
     * a segment revoked on one path and live on another: core calls every
     * link's seg_revoke (refuse new accesses checked by the link itself),
     * then marks its ATU, then calls every link's seg_fence (wait for the
     * accesses already under way). */
    netvm_status_t (*seg_publish)(struct nv_link *l, const struct nv_seg_desc *d);
    void           (*seg_revoke)(struct nv_link *l, uint32_t slot);
    void           (*seg_fence)(struct nv_link *l, uint32_t slot);

    /* peers: say goodbye (graceful) or just stop; then, once core holds no
     * reference any more, release everything kept for the peer */
    void (*peer_close)(struct nv_link *l, struct nv_lpeer *p, int graceful);
    void (*peer_free)(struct nv_link *l, struct nv_lpeer *p);
    /* 1 if the peer is known dead (may look: a pidfd, a socket state) */
    int  (*peer_dead)(struct nv_link *l, struct nv_lpeer *p);

    /* initiator side (NV_LCAP_IMPORT); name == NULL imports by (slot, key) */
    netvm_status_t (*import)(struct nv_link *l, struct nv_lpeer *p, const char *name,
                             uint32_t slot, uint64_t key, struct nv_rdesc *out);
    /* d was filled by core from the target's answer: take it into use */
    netvm_status_t (*import_done)(struct nv_link *l, struct nv_rdesc *d);
    void           (*release)(struct nv_link *l, struct nv_rdesc *d);

    /* one-sided data movement; bounds and rights are already checked by core
     * against the cached descriptor; the link checks the target still
     * publishes it (revocation). remote != 0: complete at remote completion
     * (may be pending: token, id); remote == 0: return at local completion
     * (src reusable), the data becoming visible by the next flush. Every
     * access fires the target's tripwires it touches, after its data is
     * visible there; note (may be NULL) asks for notifications too. */
    netvm_status_t (*put)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                          const void *src, size_t len, int remote, void *token, uint32_t id,
                          const struct nv_note *note);
    netvm_status_t (*get)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                          void *dst, size_t len, void *token, uint32_t id, const struct nv_note *note);
    /* only for descriptors with NV_RDESC_ATOMIC, or NV_RDESC_ATOMIC_BASIC and
     * an operation other than NETVM_AOP_FCAA */
    netvm_status_t (*atomic)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                             netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                             uint64_t *result, const struct nv_note *note);
    /* NV_LCAP_NOTIFY: deliver straight into p's endpoint block, after
     * everything issued to p before: a notification put (NETVM_EV_NOTIFY,
     * value) or a counter increment (NV_EP_COUNTER, id = counter, value = n) */
    netvm_status_t (*notify)(struct nv_link *l, struct nv_lpeer *p, unsigned kind, uint32_t id, uint64_t value);

    /* An active message: hdr (encoded, hlen bytes) and its payload. A
     * payload longer than caps.am_eager moves by rendezvous: the call
     * returns NV_LINK_PENDING and completes token (id) once the receiver
     * has it, src reusable then (with NV_AMS_COPY: returns NETVM_OK, the
     * link keeps a copy); otherwise it returns at local completion.
     * NV_AMS_REPLY: called from inside the receive path (a handler, an
     * answer): never blocks. */
    netvm_status_t (*am_send)(struct nv_link *l, struct nv_lpeer *p, const uint8_t *hdr, size_t hlen,
                              const void *payload, size_t plen, unsigned flags, void *token, uint32_t id);

    /* target side: did a put from p that named this gate (nv_note.gate)
     * fail here? Nonzero once per failed gate, its status in *st (the
     * put's failure is forgotten then). NULL on links whose puts fail at
     * the initiator (NV_LCAP_SYNC). */
    int (*gate_failed)(struct nv_link *l, struct nv_lpeer *p, uint32_t gate, netvm_status_t *st);

    /* remote completion of every put issued to p before it (may be
     * pending: token, id) */
    netvm_status_t (*flush)(struct nv_link *l, struct nv_lpeer *p, void *token, uint32_t id);

    /* progress. poll: take in what arrived (from p only, if not NULL) and
     * run the upcalls; returns how many messages. The link's fds are in
     * core's epoll set (nv_link.pfd); ev: one of them is ready. */
    int  (*poll)(struct nv_link *l, struct nv_lpeer *p);
    void (*epoll_event)(struct nv_link *l, void *token, unsigned events);
    /* optional: inside a pass, read the link's connections directly, as
     * if each had an event (a spinning thread then pays one read a look,
     * not an epoll_wait and then the read); returns the messages taken
     * in, or -1 when the link has too many connections for it to pay
     * (core then asks P). The link's other fds (listeners, handshakes)
     * still wait for P, which core looks at every few passes. */
    int  (*poll_direct)(struct nv_link *l);
    /* optional, with poll_direct: on 0, until called with 1, the thread
     * in the pass reads every ready connection itself (poll_direct) and
     * nobody sleeps on P, so the link may take its ready connections out
     * of the epoll set (each arriving segment then costs no epoll
     * callback); on 1 they are back, and P reports what is pending */
    void (*watch)(struct nv_link *l, int on);
    /* a thread is about to spin on poll() (so peers need not wake anyone),
     * and has stopped */
    void (*poll_enter)(struct nv_link *l);
    void (*poll_leave)(struct nv_link *l);
    /* about to sleep on the epoll set: returns nonzero if work arrived
     * meanwhile (then do not sleep); sleep_done after */
    int  (*sleep_prepare)(struct nv_link *l);
    void (*sleep_done)(struct nv_link *l);
    /* send what waits to be sent (gathered frames, answers held back so
     * that they could ride on the next frame); all: also what an
     * application thread would otherwise send with its next call */
    void (*flush_tx)(struct nv_link *l, int all);
    /* run what is due at now (deadlines); the next time (ns, monotonic)
     * the link wants this call, or UINT64_MAX */
    uint64_t (*timer)(struct nv_link *l, uint64_t now);
    /* nonzero while the link has connections whose arrivals only the epoll
     * set reports (a thread that waits must look at it); NULL: never */
    int      (*active)(struct nv_link *l);

    void (*destroy)(struct nv_link *l);
};

struct nv_link {
    const struct nv_link_ops *ops;
    struct nv_link_upcalls    up;
    int                       pfd;    /* core's epoll set the link adds its fds to */
};

#endif
