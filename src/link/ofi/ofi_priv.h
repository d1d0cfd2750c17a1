/* Private state of the ofi link, shared by its files.
 *
 * One mutex (`lock`) serialises every libfabric call of the link (the
 * domain is opened FI_THREAD_DOMAIN), and is never held across an upcall
 * into core: completions are taken from the CQ under it, then handed to
 * core without it, so a handler may send at once. */
#ifndef NV_LINK_OFI_PRIV_H
#define NV_LINK_OFI_PRIV_H

#include "link/ofi/ofi.h"
#include "wire/am.h"

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_errno.h>

/* libfabric's five functions, loaded at the first link's opening
 * (ofi_dl.c: why it is not linked) */
struct nv_ofi_fi {
    __typeof__(fi_getinfo)  *getinfo;
    __typeof__(fi_freeinfo) *freeinfo;
    __typeof__(fi_dupinfo)  *dupinfo;
    __typeof__(fi_fabric)   *fabric;
    __typeof__(fi_strerror) *strerror;
};
extern struct nv_ofi_fi nv_ofi_fi;
netvm_status_t nv_ofi_dl_open(void);

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define OFI_VERSION   1
#define OFI_RX_N      64                 /* receive buffers posted */
#define OFI_EAGER     16384              /* largest payload sent with its header */
#define OFI_RX_BUF    (OFI_EAGER + 256)  /* link header + AM header + payload */
#define OFI_GATES     16
/* A plain put names its place in its 64-bit remote CQ data: source peer,
 * slot, offset and length (the length too: ofi_rxm reports none for a
 * remote write). A put beyond these bounds is followed by OK_ACCESS. */
#define OFI_CQD_FROM_BITS 12
#define OFI_CQD_SLOT_BITS 12
#define OFI_CQD_OFF_BITS  24
#define OFI_CQD_LEN_BITS  16
static inline int ofi_cqd_fits(uint32_t from, uint32_t slot, uint64_t off, uint64_t len)
{
    return from < (1u << OFI_CQD_FROM_BITS) && slot < (1u << OFI_CQD_SLOT_BITS) &&
           off < (1ull << OFI_CQD_OFF_BITS) && len < (1ull << OFI_CQD_LEN_BITS);
}
static inline uint64_t ofi_cqd(uint32_t from, uint32_t slot, uint64_t off, uint64_t len)
{
    return (uint64_t)from << 52 | (uint64_t)slot << 40 | off << 16 | len;
}
/* a completion of an operation the link itself cancelled (closing) */
#define OFI_CANCELED  ((netvm_status_t)0x1001)

/* The link's own messages. Each starts with struct ofi_mh. */
enum ofi_kind {
    OK_AM = 1,      /* AM header + payload */
    OK_AM_RDV,      /* AM header; the receiver reads the payload from the sender (struct ofi_rdv) */
    OK_RDV_DONE,    /* the receiver has it: the sender may reuse its buffer (cookie, status) */
    OK_ACCESS,      /* what the target must do after a write or read (struct ofi_access) */
    OK_ACK,         /* the answer to an OK_ACCESS that asked (id, status) */
    OK_FLUSH,       /* everything written before is visible: answer OK_ACK (id) */
    OK_BYE,         /* the sender leaves: its silence after is no failure */
    OK_REVOKE,      /* the sender revoked a segment (slot, key): refuse it from now on, then answer */
    OK_REVOKE_ACK,  /* nothing more of ours will name that key (slot, key) */
};

struct ofi_mh {
    uint16_t kind;
    uint16_t hlen;      /* OK_AM, OK_AM_RDV: the AM header's length after this */
    uint32_t from;      /* the sender's peer id at the receiver (lp->remote_id) */
};

struct ofi_rdv {
    uint64_t addr;      /* where the sender's payload is (FI_MR_VIRT_ADDR) or 0 */
    uint64_t key;
    uint64_t len;
    uint64_t cookie;    /* the sender's op, named in OK_RDV_DONE */
};

enum { OA_WRITE = 1u << 0, OA_READ = 1u << 1, OA_ACK = 1u << 2 };
struct ofi_access {
    uint32_t slot;
    uint32_t flags;     /* OA_* */
    uint64_t key;
    uint64_t off;
    uint64_t len;
    uint64_t tag;       /* the notification's; OK_RDV_DONE: the sender's op */
    uint32_t note;      /* NV_NOTE_* */
    uint32_t gate;
    uint32_t id;        /* OA_ACK: the request the answer completes */
    int32_t  status;    /* OK_ACK, OK_RDV_DONE */
};

/* An operation in flight: its completion names it (fi_context2 first). */
enum ofi_op_kind { OP_RX = 1, OP_SEND, OP_WRITE, OP_READ, OP_RDV_SEND, OP_RDV_READ, OP_FLUSH, OP_ATOMIC };
struct ofi_peer;
struct ofi_op {
    struct fi_context2 fctx;
    struct ofi_link   *o;
    uint8_t            kind;
    struct nv_lreg    *rce;       /* a cached registration the op holds (a local descriptor,
                                     or a rendezvous payload the peer reads) */
    struct ofi_peer   *peer;
    void              *token;     /* core's, completed by this op */
    uint32_t           id;
    int                waits;     /* completions still due (a put with ACK: the write and the answer) */
    netvm_status_t     st;
    void              *buf;       /* OP_SEND: owned copy; OP_RX: the buffer */
    void              *owned;     /* OP_RDV_SEND with NV_AMS_COPY: the copy to free */
    struct nv_note     note;      /* OP_READ: notify the target after the bytes were read */
    uint32_t           slot;
    uint64_t           key, off, len;
    struct nv_am_rx    rx;        /* OP_RDV_READ: the message whose payload lands */
    uint64_t           cookie;    /* OP_RDV_READ: the sender's op */
    int               *sync_done; /* a put that waits for its local completion in place */
    int                quiet;     /* a put whose failure no flush reports (NV_NOTE_QUIET) */
    uint64_t           amo[3];    /* OP_ATOMIC: operand, compare, result (one local registration) */
    struct ofi_op     *next;      /* the link's list of pending answers */
};

/* An import of one of a peer's segments (nv_rdesc.link_priv). */
struct ofi_imp {
    struct ofi_imp *next, *prev;
    uint32_t        slot;
    uint64_t        key;
    _Atomic int     revoked;
};

struct ofi_peer {
    struct nv_link_ev ev;         /* the pidfd's epoll token */
    struct ofi_link  *o;
    struct nv_lpeer  *lp;
    fi_addr_t         fa;
    int               pidfd;      /* same host: readable once the peer is gone */
    _Atomic int       dead;
    int               av_gone;    /* its address left the address vector (under the lock) */
    uint32_t          outstanding;/* writes not yet completed locally */
    netvm_status_t    first_err;  /* of writes nobody waited for, since the last flush */
    uint32_t          gate_n;     /* gated puts of this peer that failed here */
    uint32_t          gate_id[OFI_GATES];
    netvm_status_t    gate_st[OFI_GATES];
    struct ofi_imp   *imports;    /* of its segments (under the link's lock) */
    uint32_t          owed;       /* OK_REVOKE sent to it and not yet answered */
    struct ofi_peer  *next;       /* the link's peers (under its lock) */
};

struct ofi_seg {
    uint64_t base, len, key;
    struct ofi_mr *mr;            /* NULL when a registration strategy registers its buckets instead */
    int      live;                /* published and not revoked */
    uint32_t acks_due;            /* revoking: peers that have not answered OK_REVOKE */
};

struct ofi_mr {
    struct fid_mr *mr;            /* NULL once revoked */
    uint64_t       key;
    uint64_t       addr;
};

struct ofi_link {
    struct nv_link        base;
    struct nv_link_ev     ev;      /* the CQ's wait fd */
    struct nv_ofi_params  p;
    struct fi_info       *info;
    int                   enabled;  /* fi_enable succeeded: the CQ may be read */
    struct fid_fabric    *fabric;
    struct fid_domain    *domain;
    struct fid_av        *av;
    struct fid_cq        *cq;
    struct fid_ep        *ep;
    int                   wait_fd; /* -1: the provider has none: the timer polls */
    int                   virt_addr, prov_key, mr_endpoint;
    int                   rx_cq_data;   /* remote CQ data consumes a posted receive */
    int                   mr_local;     /* local buffers need descriptors (FI_MR_LOCAL, or
                                           NETVM_OFI_MR_LOCAL=1 to exercise the path) */
    int                   native_amo;   /* netvm's atomics (but FCAA) run as the provider's */
    void                 *rc;           /* registrations of local buffers and rendezvous payloads */
    struct fid_mr        *rx_mr;        /* mr_local: the receive buffers' */
    size_t                inject;
    _Atomic uint64_t      next_key;
    pthread_mutex_t       lock;
    struct ofi_op         rx[OFI_RX_N];
    uint8_t              *rxbuf;
    struct ofi_seg       *segs;    /* by slot */
    struct ofi_op        *waiting; /* ops that wait for an OK_ACK, by id */
    _Atomic int           progressing; /* a thread reads the CQ and runs upcalls */
    _Atomic int           spinners;    /* threads spinning on poll() (poll_enter) */
    struct ofi_peer      *peers;
};

static inline struct ofi_link *ofi_of(struct nv_link *l) { return (struct ofi_link *)l; }
static inline struct ofi_peer *opeer_of(struct nv_lpeer *lp) { return lp ? lp->conn : NULL; }

/* ofi_link.c */
/* Read completions and handle them (upcalls without the lock); how many. */
int            ofi_progress(struct ofi_link *o);
/* Post a libfabric call again while it answers -FI_EAGAIN, driving the
 * CQ meanwhile (under the lock). */
netvm_status_t ofi_status(ssize_t rc);
struct ofi_op *ofi_op_new(struct ofi_link *o, int kind, struct ofi_peer *pe);
void           ofi_op_free(struct ofi_op *op);
void           ofi_peer_failed(struct ofi_link *o, struct ofi_peer *pe);
/* A post to pe answered -FI_EAGAIN again (*since: 0 before the first
 * refusal): 1 once the refusals have lasted NETVM_TIMEOUT, and pe is then
 * marked dead, so the loop ends and core fails pe's operations. */
int            ofi_refused_too_long(struct ofi_link *o, struct ofi_peer *pe, uint64_t *since);
/* pe said BYE: gone, gracefully */
void           ofi_peer_left(struct ofi_link *o, struct ofi_peer *pe);

/* ofi_msg.c: the link's messages and active messages */
/* Send a link message (header + body + payload, copied): the caller holds the lock. */
netvm_status_t ofi_send_locked(struct ofi_link *o, struct ofi_peer *pe, uint16_t kind, uint16_t hlen,
                               const void *body, size_t blen, const void *pay, size_t plen);
netvm_status_t ofi_am_send(struct nv_link *l, struct nv_lpeer *lp, const uint8_t *hdr, size_t hlen,
                           const void *payload, size_t plen, unsigned flags, void *token, uint32_t id);
/* A receive completed: its message (len bytes); the buffer is reposted by the caller. */
void           ofi_rx(struct ofi_link *o, struct ofi_op *op, size_t len);
/* A write with remote CQ data landed here. */
void           ofi_rx_data(struct ofi_link *o, uint64_t data, size_t len);
/* A rendezvous read completed (st) / a rendezvous send was taken. */
void           ofi_rdv_read_done(struct ofi_link *o, struct ofi_op *op, netvm_status_t st);

void           ofi_revoke_rx(struct ofi_link *o, struct ofi_peer *pe, int ack, const struct ofi_access *a);

/* ofi_rma.c: registration, put, get, flush, the target's side of accesses */
netvm_status_t ofi_mem_reg(struct nv_link *l, void *addr, size_t len, unsigned rights, void **mr);
void           ofi_mem_dereg(struct nv_link *l, void *mr);
uint64_t       ofi_mr_key(struct nv_link *l, void *mr);
netvm_status_t ofi_reg_raw(struct ofi_link *o, void *addr, size_t len, uint64_t access, struct fid_mr **mr,
                           uint64_t *key);
/* A descriptor for a local buffer (NULL where the provider needs none);
 * the registration is held in op->rce until the op is freed. */
netvm_status_t ofi_local_desc(struct ofi_link *o, struct ofi_op *op, const void *buf, size_t len, void **desc);
/* The registrar of the link's registration cache (core's, through the
 * lreg upcalls), and its access bits: every registration serves as a local
 * descriptor; a payload a peer reads by rendezvous is also readable
 * remotely. Nothing local is ever remotely writable. */
enum { OFI_LREG_LOCAL = 1u << 0, OFI_LREG_PEER_READ = 1u << 1 };
extern const struct nv_lreg_registrar ofi_lreg_registrar;
netvm_status_t ofi_seg_publish(struct nv_link *l, const struct nv_seg_desc *d);
void           ofi_seg_revoke(struct nv_link *l, uint32_t slot);
void           ofi_seg_fence(struct nv_link *l, uint32_t slot);
netvm_status_t ofi_import_done(struct nv_link *l, struct nv_rdesc *d);
void           ofi_release(struct nv_link *l, struct nv_rdesc *d);
netvm_status_t ofi_put(struct nv_link *l, struct nv_rdesc *d, uint64_t off, const void *src, size_t len,
                       int remote, void *token, uint32_t id, const struct nv_note *note);
netvm_status_t ofi_get(struct nv_link *l, struct nv_rdesc *d, uint64_t off, void *dst, size_t len,
                       void *token, uint32_t id, const struct nv_note *note);
netvm_status_t ofi_flush(struct nv_link *l, struct nv_lpeer *lp, void *token, uint32_t id);
netvm_status_t ofi_atomic(struct nv_link *l, struct nv_rdesc *d, uint64_t off, netvm_atomic_op_t op,
                          uint64_t operand, uint64_t compare, uint64_t *result, const struct nv_note *note);
int            ofi_gate_failed(struct nv_link *l, struct nv_lpeer *lp, uint32_t gate, netvm_status_t *st);
/* The target's side: an OK_ACCESS from pe. */
void           ofi_serve_access(struct ofi_link *o, struct ofi_peer *pe, const struct ofi_access *a);
/* An OK_ACK arrived: the op waiting for it. */
void           ofi_take_ack(struct ofi_link *o, const struct ofi_access *a);
/* A write or read completed locally (st). */
void           ofi_rma_done(struct ofi_link *o, struct ofi_op *op, netvm_status_t st);

#endif
