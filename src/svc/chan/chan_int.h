/* Channels and distributed queues inside: the layout of a queue segment
 * (shared by a channel, which has one ring, and a distributed queue, which
 * has one per producer), the sending end of one ring, the receiving side of
 * one ring, and waiting on a local word while watching a peer's liveness.
 *
 * A queue segment lives in the receiver's memory (netvm_alloc_shared under
 * "nvchan.<name>"):
 *   [0, 64)                  the header: magic, ring_bytes, max_msg, rings
 *   [64, 128)                claimed: senders fetch-add it to take a ring
 *   heads:   64 B per ring   the ring's head word, alone on its cache line:
 *                            (bytes produced << 1) | closed, written only by
 *                            the sender's put-with-signal
 *   attach:  64 B per ring   the sender's credit segment handle, then a word
 *                            set to 1 once the handle is there
 *   data:    ring_bytes per ring
 * The heads are contiguous so that a consumer of many rings sleeps on one
 * tripwire. A sender owns a 64-byte credit segment (netvm_alloc_shared, no
 * name) whose first word the receiver sets to the bytes it consumed.
 *
 * A message is a record: an 8-byte header (length in the low 32 bits, the
 * low 32 bits of the record's stream position in the high ones: a check
 * that the two sides agree) and the payload padded to 8 bytes. A record may
 * wrap around the end of the ring. */
#ifndef NV_SVC_CHAN_INT_H
#define NV_SVC_CHAN_INT_H

#include <netvm/chan.h>
#include <pthread.h>
#include <stdint.h>

#define NV_CHAN_MAGIC       0x6e766368616e3031ull   /* "nvchan01" */
#define NV_CHAN_SEG_PREFIX  "nvchan."
#define NV_CHAN_HDR_WORDS   4
#define NV_CHAN_CLAIM_OFF   64
#define NV_CHAN_HEADS_OFF   128
#define NV_CHAN_LINE        64
#define NV_CHAN_REC_HDR     8
#define NV_CHAN_DEF_RING    (64u << 10)
#define NV_CHAN_MIN_RING    256u
#define NV_CHAN_MAX_RING    (1ull << 30)

struct nv_chan_attach {
    netvm_seg_handle_t handle;    /* the sender's credit segment */
    uint64_t           attached;  /* 1 once handle is valid */
};

static inline size_t nv_chan_head_off(size_t i) { return NV_CHAN_HEADS_OFF + i * NV_CHAN_LINE; }
static inline size_t nv_chan_attach_off(size_t n, size_t i)
{
    return NV_CHAN_HEADS_OFF + n * NV_CHAN_LINE + i * NV_CHAN_LINE;
}
static inline size_t nv_chan_data_off(size_t n, size_t rb, size_t i)
{
    return NV_CHAN_HEADS_OFF + 2 * n * NV_CHAN_LINE + i * rb;
}
static inline size_t nv_chan_rec_len(size_t len) { return NV_CHAN_REC_HDR + ((len + 7) & ~(size_t)7); }

/* Check opts and fill in the defaults. */
netvm_status_t nv_chan_geometry(const netvm_chan_opts_t *opts, size_t *ring_bytes, size_t *max_msg);
/* The segment name of channel/queue name; NETVM_ERR_INVAL if name is bad. */
netvm_status_t nv_chan_seg_name(const char *name, char out[64]);

/* --- waiting ---------------------------------------------------------- */

/* Wait until *word compares to value (netvm_wait_until), in slices of
 * NETVM_CHAN_POLL_MS, looking at peer's liveness after each (peer < 0:
 * none). timeout_ms as the public calls: 0 gives NETVM_ERR_AGAIN. */
netvm_status_t nv_chan_wait_word(netvm_ctx_t *ctx, const uint64_t *word, netvm_cmp_t cmp, uint64_t value,
                                 int peer, int timeout_ms);
int            nv_chan_peer_alive(netvm_ctx_t *ctx, int peer);
int            nv_chan_poll_ms(void);
/* NETVM_SPIN_US, as netvm_wait_until reads it (default 20). */
int            nv_chan_spin_us(void);
/* Milliseconds left of a wait that began at start_ms (< 0: no limit). */
int            nv_chan_left_ms(int timeout_ms, double start_ms);
double         nv_chan_now_ms(void);

/* --- the sending end of one ring (a channel's sender, a producer) --------- */

struct nv_ring_tx {
    pthread_mutex_t lock;
    netvm_ctx_t    *ctx;
    int             peer;
    netvm_rseg_t   *rs;          /* the queue segment */
    size_t          head_off, data_off, ring_bytes, max_msg;
    size_t          index;       /* which ring of the segment */
    uint64_t        head;        /* bytes produced */
    uint64_t       *credit;      /* in credit_seg: bytes the receiver consumed */
    netvm_seg_t    *credit_seg;
    uint8_t        *stage;       /* one record */
};

/* Import the queue segment `name` of peer, take a ring (NETVM_ERR_AGAIN if
 * none is free) and attach a credit segment to it. */
netvm_status_t nv_ring_tx_open(netvm_ctx_t *ctx, int peer, const char *name, int timeout_ms,
                               struct nv_ring_tx **tx);
netvm_status_t nv_ring_tx_send(struct nv_ring_tx *tx, const void *buf, size_t len, int timeout_ms);
netvm_status_t nv_ring_tx_flush(struct nv_ring_tx *tx);
/* Mark the ring closed (after every message), then free the end. */
netvm_status_t nv_ring_tx_close(struct nv_ring_tx *tx);

/* --- the receiving side of one ring -------------------------------------- */

enum { NV_RING_LIVE, NV_RING_ENDED, NV_RING_DEAD };

struct nv_ring_rx {
    netvm_ctx_t           *ctx;
    int                    peer;      /* the sender (-1 until it attaches, for a queue) */
    int                    state;     /* NV_RING_* */
    const uint64_t        *head;      /* local */
    struct nv_chan_attach *attach;    /* local */
    uint8_t               *data;      /* local */
    size_t                 ring_bytes, max_msg;
    uint64_t               tail;      /* bytes consumed */
    uint64_t               acked;     /* credit last written back */
    uint64_t               thresh;    /* write credit back once this much is unacked */
    uint64_t               credit_val;  /* source of the last credit put */
    netvm_rseg_t          *credit;    /* the sender's credit segment, once attached */
};

void           nv_ring_rx_init(struct nv_ring_rx *r, netvm_ctx_t *ctx, int peer, uint8_t *base, size_t n,
                               size_t i, size_t ring_bytes, size_t max_msg);
/* Bytes waiting; *closed = the sender closed the ring. Never blocks. */
uint64_t       nv_ring_rx_avail(const struct nv_ring_rx *r, int *closed);
/* The current head word, for waiting on it. */
uint64_t       nv_ring_rx_headword(const struct nv_ring_rx *r);
/* Take the record at the tail (avail must be > 0). */
netvm_status_t nv_ring_rx_take(struct nv_ring_rx *r, void *buf, size_t cap, size_t *len);
/* Import the sender's credit segment if it attached; 1 if attached. */
int            nv_ring_rx_attached(struct nv_ring_rx *r);
void           nv_ring_rx_fini(struct nv_ring_rx *r);

#endif
