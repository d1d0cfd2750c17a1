/* Private state of the tcp link, shared by its files. */
#ifndef NV_LINK_TCP_PRIV_H
#define NV_LINK_TCP_PRIV_H

#include "link/tcp/tcp.h"
#include "wire/am.h"
#include "wire/tcp_frame.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* A reply or answer waiting to be sent: a copied header, and maybe bytes
 * sent straight from target memory (a GET_RESP), which keep their segment
 * from being revoked until sent. */
struct tcp_out {
    struct tcp_out *next;
    uint8_t  hdr[NV_TCP_HDR_LEN];
    uint8_t  small[NV_AM_SIZE];     /* AM payloads are copied here */
    size_t   sent;                  /* bytes of hdr+payload already sent */
    const uint8_t *payload;
    uint64_t plen;
    int      slot_ref;              /* -1, or the slot whose ref this holds */
    int      read_ev;               /* the payload was read from our memory: fire tripwires once sent */
    struct nv_note note;            /* ... and the responder notification it asked for */
};

enum rx_state { RX_HDR, RX_PAYLOAD };
#define TCP_STAGE_CAP (16 * 1024)
enum conn_state { CONN_AUTH, CONN_READY, CONN_DEAD, CONN_STRANGER };

struct tcp_conn {
    struct nv_link_ev ev;           /* epoll token */
    struct tcp_link *link;
    int      fd;
    int      rank;                  /* the authenticated peer; -1 for a stranger */
    _Atomic int state;
    int      bye;                   /* the peer said BYE: its close is no failure */

    /* sending: one frame at a time; replies queue in out */
    pthread_mutex_t send_lock;
    pthread_mutex_t out_lock;
    struct tcp_out *out_head, *out_tail;
    _Atomic int     tx_pending;
    _Atomic int     want_pollout;
    pthread_mutex_t arm_lock;       /* serialises changes of the epoll interest */
    _Atomic int     quiet;          /* removed from the progress thread's wake-ups while the application polls */
    _Atomic uint64_t app_polls;     /* application polls of this connection (a counter: cheaper than a clock) */
    uint64_t        polls_seen;     /* its value at the progress thread's last look */
    /* small frames of the application, gathered and sent with one system
     * call at the next wait, poll or larger frame (message rate) */
    uint8_t        *wbuf;
    size_t          wlen;
    _Atomic int     wbuf_used;

    /* receiving: one thread at a time (try-lock; the loser leaves a note) */
    pthread_mutex_t rx_lock;
    _Atomic int     rx_pending;
    enum rx_state   rx;
    uint8_t         hdr_buf[NV_TCP_HDR_LEN];
    size_t          hdr_got;
    struct nv_tcp_hdr h;            /* the frame being received */
    uint8_t        *dst;            /* payload destination, or NULL: discard / small */
    uint64_t        remaining;
    uint8_t         small[NV_AM_SIZE + 8];
    size_t          small_got;
    void           *answer_token;   /* the pending operation an answer completes */
    /* bytes read ahead of the frame being parsed: small frames cost one
     * system call for many; a large payload is copied from here only for
     * what arrived with its header, the rest is received in place */
    uint8_t        *stage;
    size_t          stage_off, stage_len;
    netvm_status_t  frame_status;   /* PUT: the result of its checks */
    uint64_t        frame_addr;     /* PUT: where its payload lands (for tripwires) */
    netvm_status_t  first_err;      /* errors of unacknowledged puts since the last FLUSH */
    _Atomic uint64_t serve_seq;     /* odd while a frame writes into this process's memory */
    int             in_serve;       /* the frame being received holds the serve section */

    /* handshake */
    uint8_t my_nonce[NV_TCP_NONCE_LEN];
    uint8_t peer_nonce[NV_TCP_NONCE_LEN];
    int     outgoing;
};

/* What the initiator remembers about an operation awaiting its answer. */
struct tcp_pending {
    uint32_t        id;             /* core's request id; 0 when free */
    uint8_t         kind;           /* the reply kind expected */
    int             rank;
    void           *token;
    uint8_t        *dst;            /* GET_RESP payload destination */
    uint64_t        len;
    struct nv_rdesc *rd;            /* IMPORT_RESP fills it */
};

struct tcp_link {
    struct nv_link       base;
    struct nv_tcp_params p;
    uint8_t              secret[64];
    int                  listen_fd;
    struct nv_link_ev    listen_ev;
    struct tcp_conn    **conns;      /* by rank; NULL where another link serves */
    int                  epfd;       /* the progress thread's, once added */
    struct tcp_pending   pending[NV_LINK_MAX_PENDING];
    pthread_mutex_t      pending_lock;
    _Atomic uint32_t    *slot_refs;  /* queued GET_RESPs per segment slot */
    _Atomic int          nquiet;         /* connections currently quiet */
    uint64_t             last_look_ns;   /* the progress thread's last check for idle connections */
    _Atomic int          sleepers;       /* application threads asleep until the progress thread completes their request */
};

static inline struct tcp_link *tcp_of(struct nv_link *l) { return (struct tcp_link *)l; }

/* tcp_setup.c */
netvm_status_t tcp_handshake_all(struct tcp_link *t, const struct nv_tcp_card *cards, const uint8_t *use);
void           tcp_mac(const struct tcp_link *t, const char *role, const uint8_t nonce[NV_TCP_NONCE_LEN],
                       int from, int to, uint8_t out[NV_TCP_MAC_LEN]);
struct tcp_conn *tcp_conn_new(struct tcp_link *t, int fd, int rank);
void           tcp_conn_free(struct tcp_conn *c);
int            tcp_tune_socket(int fd, int timeout_ms);

/* tcp_io.c */
/* Send one frame (header + payload) in order; blocks until it is in the
 * socket, receiving meanwhile so two senders can never wedge each other.
 * batch: a small frame may wait in the connection's gather buffer until the
 * next tcp_flush_gathered (which every wait and poll calls). */
netvm_status_t tcp_send_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload, uint64_t plen,
                              int batch);
/* Send what tcp_send_frame gathered, if the send side is free. */
void           tcp_flush_gathered(struct tcp_conn *c);
/* Queue a reply (never blocks); payload stays referenced until sent.
 * read_note (may be NULL): the payload is this process's memory, read for
 * the peer; once sent, its READ tripwires fire (and the responder
 * notification, if read_note asks). */
void           tcp_queue_reply(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *payload,
                               uint64_t plen, int copy, int slot_ref, const struct nv_note *read_note);
/* Receive and act on whatever has arrived; returns frames handled. */
int            tcp_rx(struct tcp_conn *c);
void           tcp_try_flush(struct tcp_conn *c);
void           tcp_conn_fail(struct tcp_conn *c, const char *why);

/* tcp_serve.c: the target's and the initiator's handling of frames */
void           tcp_frame_begin(struct tcp_conn *c);
void           tcp_frame_end(struct tcp_conn *c);
/* The peer's put into [addr, addr+len) landed / its get of it was sent. */
void           tcp_write_done(struct tcp_conn *c, uint64_t addr, uint64_t len, const struct nv_note *note);
void           tcp_read_done(struct tcp_conn *c, uint64_t addr, uint64_t len, const struct nv_note *note);

/* The epoll interest a connection should have now. */
void           tcp_conn_rearm(struct tcp_conn *c);

/* tcp_link.c */
struct tcp_pending *tcp_pending_take(struct tcp_link *t, uint32_t id, uint8_t kind, int rank);

#endif
