/* The link contract. A link moves bytes between this process and its peers;
 * core chooses one per peer at connect time and calls it through this table,
 * never through a switch on the link kind.
 *
 * What a link does natively is described per imported segment: put and get
 * are always native (one-sided, the target's CPU is not involved), atomics are
 * native only where the rdesc says so (NV_RDESC_ATOMIC). Everything else core
 * emulates in one place with active messages (am_send) that the target's
 * progress engine executes.
 *
 * Revocation: a target publishes each exported segment with seg_publish and
 * withdraws it with seg_revoke then seg_fence; once seg_fence returns no
 * access by any peer that began before is still running, and every access
 * after seg_revoke fails with NETVM_ERR_REVOKED. */
#ifndef NV_LINK_LINK_H
#define NV_LINK_LINK_H

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

struct nv_link;

/* Notifications an operation asks of the target (EXTOLL's completer and
 * responder; the requester's is core's own business). */
enum {
    NV_NOTE_COMPLETER = NETVM_F_NOTIFY_COMPLETER,  /* put, atomic: at the target once the data is visible */
    NV_NOTE_RESPONDER = NETVM_F_NOTIFY_RESPONDER,  /* get: at the target once its bytes were read */
};
struct nv_note {
    unsigned flags;   /* NV_NOTE_* */
    uint64_t tag;
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
};

enum {
    NV_RDESC_MAPPED = 1u << 0,  /* `mapped` points at the segment: loads and stores */
    NV_RDESC_ATOMIC = 1u << 1,  /* the link runs atomics natively on this segment */
};

/* What an initiator caches about an imported segment. */
struct nv_rdesc {
    int       rank;
    uint32_t  slot;
    uint64_t  key;
    uint64_t  addr;
    uint64_t  len;
    unsigned  rights;
    unsigned  flags;      /* NV_RDESC_* */
    uint8_t  *mapped;     /* with NV_RDESC_MAPPED */
    void     *link_priv;  /* the link's own per-import state */
};

/* A link operation that completes later returns NV_LINK_PENDING and then
 * calls up.complete(token) exactly once. Core's request ids (below
 * NV_LINK_MAX_PENDING in their low 16 bits) name such operations on the wire. */
#define NV_LINK_PENDING     ((netvm_status_t)0x1000)
#define NV_LINK_MAX_PENDING 4096

/* Calls from a link up into core, so core never needs to know link internals. */
struct nv_link_upcalls {
    void *arg;
    /* an active message arrived from src_rank (NV_AM_SIZE bytes); src_rank
     * is -1 where the link cannot vouch for the sender (core then trusts the
     * message's own field) */
    void (*am)(void *arg, int src_rank, const uint8_t *msg, size_t len);
    /* the peer died or became unreachable */
    void (*peer_down)(void *arg, int rank);
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
    /* target side: describe an exported segment, by name or by (slot, key) */
    netvm_status_t (*lookup)(void *arg, const char *name, uint32_t slot, uint64_t key,
                             struct nv_seg_desc *out);
};

/* The first member of every object a link registers with the progress
 * thread's epoll set, so the thread knows whose event it is. */
struct nv_link_ev {
    struct nv_link *link;
};

struct nv_link_ops {
    const char *name;

    /* exporter side. Revocation is two steps, so that no initiator can see
     * a segment revoked on one path and live on another: core calls every
     * link's seg_revoke (refuse new accesses checked by the link itself),
     * then marks its ATU, then calls every link's seg_fence (wait for the
     * accesses already under way). */
    netvm_status_t (*seg_publish)(struct nv_link *l, const struct nv_seg_desc *d);
    void           (*seg_revoke)(struct nv_link *l, uint32_t slot);
    void           (*seg_fence)(struct nv_link *l, uint32_t slot);

    /* what the link needs from core for put, get and import (NV_LINK_CAP_*) */
    unsigned caps;

    /* initiator side; name == NULL imports by (slot, key). With
     * NV_LINK_CAP_ASYNC the result may come later (token, id) */
    netvm_status_t (*import)(struct nv_link *l, int rank, const char *name,
                             uint32_t slot, uint64_t key, struct nv_rdesc *out,
                             void *token, uint32_t id);
    void           (*release)(struct nv_link *l, struct nv_rdesc *d);

    /* one-sided data movement; bounds and rights are already checked by core
     * against the cached descriptor; the link checks the target still
     * publishes it (revocation) */
    /* remote != 0: complete at remote completion (may be pending: token,
     * id); remote == 0: return at local completion (src reusable), the data
     * becoming visible by the next flush */
    /* Every access fires the target's tripwires it touches, after its data
     * is visible there; note (may be NULL) asks for notifications too. */
    netvm_status_t (*put)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                          const void *src, size_t len, int remote, void *token, uint32_t id,
                          const struct nv_note *note);
    netvm_status_t (*get)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                          void *dst, size_t len, void *token, uint32_t id, const struct nv_note *note);
    /* only for descriptors with NV_RDESC_ATOMIC */
    netvm_status_t (*atomic)(struct nv_link *l, struct nv_rdesc *d, uint64_t off,
                             netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                             uint64_t *result, const struct nv_note *note);
    /* Deliver straight into rank's endpoint block, after everything issued
     * to rank before: a notification put (NETVM_EV_NOTIFY, value) or a
     * counter increment (NV_EP_COUNTER, id = counter, value = n). NULL for
     * links that cannot; core then sends an active message. */
    netvm_status_t (*notify)(struct nv_link *l, int rank, unsigned kind, uint32_t id, uint64_t value);

    /* deliver an NV_AM_SIZE-byte active message to rank's progress engine;
     * with NV_AM_SEND_REPLY the receiver is woken only if a thread of it
     * sleeps waiting for replies (a reply is otherwise picked up by the
     * thread that polls for it) */
    netvm_status_t (*am_send)(struct nv_link *l, int rank, const uint8_t *msg, unsigned flags);

    /* run upcalls for everything that arrived (from rank first, if >= 0);
     * returns how many */
    int  (*poll)(struct nv_link *l, int rank);
    /* a thread is about to spin on poll() (so peers need not wake anyone),
     * and has stopped */
    void (*poll_enter)(struct nv_link *l);
    void (*poll_leave)(struct nv_link *l);
    /* the progress thread: add the link's fds to epfd (data.ptr = token),
     * handle a ready token, and arm/disarm wake-ups around epoll_wait */
    netvm_status_t (*epoll_add)(struct nv_link *l, int epfd);
    void (*epoll_event)(struct nv_link *l, void *token);
    /* returns 0 if the caller may sleep; nonzero if work arrived meanwhile */
    int  (*sleep_prepare)(struct nv_link *l);
    void (*sleep_done)(struct nv_link *l);
    /* how long the progress thread may sleep (ms, -1: until an event), and
     * what it does each time it wakes (for links that stop waking it while
     * the application polls, and must resume when it stops) */
    int  (*sleep_limit_ms)(struct nv_link *l);
    void (*tick)(struct nv_link *l);
    /* an application thread is about to sleep until a reply completes its
     * request (replies must wake the progress thread now), and has woken;
     * reply_wait_enter returns nonzero if messages already wait (poll first) */
    int  (*reply_wait_enter)(struct nv_link *l);
    void (*reply_wait_leave)(struct nv_link *l);

    /* remote completion of every put issued to rank before it (may be
     * pending: token, id) */
    netvm_status_t (*flush)(struct nv_link *l, int rank, void *token, uint32_t id);
    /* 1 if rank is known dead */
    int  (*peer_dead)(struct nv_link *l, int rank);

    void (*destroy)(struct nv_link *l);
};

enum { NV_AM_SEND_REPLY = 1u << 0 };

enum {
    /* put with remote completion, get, import and flush may return
     * NV_LINK_PENDING: core must pass a request as their token */
    NV_LINK_CAP_ASYNC = 1u << 0,
};

struct nv_link {
    const struct nv_link_ops *ops;
    struct nv_link_upcalls    up;
    int                       rank;
    int                       size;
};

#endif
