/* Private state of the tcp link, shared by its files.
 *
 * One thread at a time owns a connection (its `lock`): it alone reads the
 * socket, parses frames, and writes. A thread that finds a connection owned
 * leaves what it wants sent in the connection's mailbox, which the owner
 * sends before it lets go. Frames to send wait in `tx`: small ones copied
 * into an arena, large payloads referenced where they are (a get's answer
 * straight from the exported memory, a put's payload from the caller's
 * buffer). Acknowledgements of puts do not leave on their own if an
 * application thread received them: they ride on the next frame it sends,
 * or leave when it next calls netvm, sleeps or lets the connection go. */
#ifndef NV_LINK_TCP_PRIV_H
#define NV_LINK_TCP_PRIV_H

#include "link/tcp/tcp.h"
#include "wire/am.h"
#include "wire/handshake.h"
#include "wire/tcp_frame.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define TCP_STAGE_CAP   (64 * 1024)   /* bytes read ahead; payloads larger go straight into place */
#define TCP_ARENA_CAP   (64 * 1024)   /* small frames waiting to be sent */
#define TCP_SEGS        256           /* pieces of the send queue */
#define TCP_GET_INLINE  4096          /* a get answer up to this is copied, beyond referenced */
#define TCP_DIRECT_MIN  (16 * 1024)   /* a payload still to come beyond this is received in place */

/* One piece of the send queue. */
struct tcp_seg {
    const uint8_t *base;
    size_t         len;
    uint8_t        kind;       /* SEG_ARENA, SEG_EXT, SEG_OWNED */
    uint8_t        urgent;     /* must leave at the end of the pass that made it */
    uint8_t        faulted;    /* SEG_EXT: the memory vanished: zeros go out, the trailer says so */
    uint8_t        read_ev;    /* SEG_EXT: our memory read for a peer: fire tripwires once sent */
    int            slot_ref;   /* SEG_EXT: the segment whose revocation waits for it, or -1 */
    void          *token;      /* completed once sent (a put's or message's local completion) */
    uint32_t       id;
    uint64_t       addr;       /* SEG_EXT with read_ev: where it was read */
    uint64_t       tag;        /*   ... and the responder notification's tag */
    unsigned       note;
    uint8_t        trailer[NV_TCP_TRAILER_LEN];
    uint8_t        has_trailer;
};
enum { SEG_ARENA = 1, SEG_EXT, SEG_OWNED };

struct tcp_tx {
    uint8_t       *arena;
    size_t         arena_used;
    struct tcp_seg seg[TCP_SEGS];
    unsigned       head, n;         /* the ring of segments */
    size_t         done_in_head;    /* bytes of the head segment (and its trailer) already sent */
    int            urgent;          /* something must leave at the end of the pass */
    int            want_out;        /* waiting for room (EPOLLOUT) */
    int            lazy;            /* frames wait that only the next send or flush takes out */
};

/* A frame handed over by a thread that did not own the connection. */
struct tcp_mail {
    struct tcp_mail *next;
    struct tcp_seg   seg;           /* SEG_OWNED with the header and small payload, or SEG_EXT */
    uint8_t          hdr[NV_TCP_HDR_LEN + NV_AM_HDR_MAX];
    size_t           hlen;
    uint8_t          data[];
};

enum conn_state {
    CONN_CONNECTING = 1,  /* connector: connect(2) under way */
    CONN_HS_HELLO,        /* acceptor: waiting for HELLO; connector: for HELLO + AUTH */
    CONN_HS_AUTH,         /* acceptor: waiting for the connector's AUTH */
    CONN_HS_WELCOME,      /* connector: waiting for WELCOME */
    CONN_HS_ATTACHED,     /* acceptor: waiting for ATTACHED (moving to another link) */
    CONN_READY,
    CONN_DEAD,
};

struct tcp_listener_s;

/* The handshake's memory, freed once the connection is ready. */
struct tcp_hs {
    int      outgoing;
    int      purpose;            /* enum nv_hs_purpose */
    int      rank;               /* NV_HS_JOB: the rank connected to (connector) */
    uint8_t  key[64];            /* the secret this conversation proves */
    size_t   key_len;
    uint8_t  hello_c[NV_HS_HELLO_LEN], hello_a[NV_HS_HELLO_LEN];  /* both HELLOs as sent */
    struct nv_hs_hello peer;
    void    *cookie;             /* core's: the connect call */
    struct tcp_listener_s *via;  /* acceptor: the listener */
    uint8_t  card[NV_HS_CARD_MAX];   /* ours, for a faster link */
    uint32_t card_len;
    int      upgrade;
};

#define TCP_GATES 16

struct tcp_conn {
    struct nv_link_ev ev;           /* epoll token */
    int               is_listener;   /* 0: see tcp_listener_s */
    struct tcp_link  *t;
    int               fd;
    struct nv_lpeer  *lp;           /* once authenticated */
    _Atomic int       state;        /* enum conn_state */
    int               bye;          /* the peer said BYE: its close is no failure */
    uint64_t          deadline;     /* the handshake must be over by then */
    _Atomic int       lock;         /* the owner */
    _Atomic int       rx_again;     /* data arrived while another thread owned it */
    _Atomic int       mail_n;
    pthread_mutex_t   mail_lock;
    struct tcp_mail  *mail_head, *mail_tail;
    unsigned          interest;     /* events asked of P */
    struct tcp_tx     tx;
    /* receiving */
    uint8_t          *stage;
    size_t            st_off, st_len;
    int               in_payload;   /* a frame's payload is being received straight into place */
    struct nv_tcp_hdr h;            /* that frame */
    uint8_t          *dst;          /* where it lands (NULL: discarded) */
    uint64_t          remaining;
    uint8_t           trailer[NV_TCP_TRAILER_LEN];
    unsigned          trailer_got;
    netvm_status_t    frame_status;
    uint64_t          frame_addr;
    void             *answer_token;
    int               in_serve;     /* the frame holds the serve section */
    struct nv_am_rx   amrx;         /* a large active message landing */
    netvm_status_t    first_err;    /* errors of unacknowledged puts since the last FLUSH */
    /* gates (nv_note.gate) of puts that failed here, until what names
     * them asks (under mail_lock; gate_n read without it) */
    _Atomic unsigned  gate_n;
    uint32_t          gate_id[TCP_GATES];
    netvm_status_t    gate_st[TCP_GATES];
    _Atomic uint64_t  serve_seq;    /* odd while a frame writes into this process's memory */
    struct tcp_hs    *hs;
    int               listed;       /* in the link's list */
    int               watched;      /* in the epoll set (under the link's watch_lock) */
    struct tcp_conn  *next, *prev;  /* the link's list */
};

/* What the initiator remembers about an operation awaiting its answer. */
struct tcp_pending {
    _Atomic uint32_t id;            /* core's request id | 0x80000000; 0 when free */
    uint8_t          kind;          /* the answer's frame kind */
    struct tcp_conn *c;
    void            *token;
    uint8_t         *dst;           /* GET_RESP payload destination */
    uint64_t         len;
};

struct tcp_listener_s {
    struct nv_link_ev ev;
    int               is_listener;  /* 1 (a connection's is 0): what an epoll event names */
    int               fd;
    int               purpose;
    uint8_t           key[64];
    size_t            key_len;
    void             *cookie;
    int               pending;      /* connections authenticating */
    int               closed;       /* closed: events taken before still name it */
    struct tcp_listener_s *next;    /* the link's listeners (under conns_lock) */
    struct tcp_listener_s *closed_next;
};

struct tcp_link {
    struct nv_link       base;
    struct nv_tcp_params p;
    const struct nv_tcp_hs_upcalls *hs;
    uint8_t              secret[64];
    struct tcp_listener_s *listeners;   /* the job's first, if any (under conns_lock) */
    struct tcp_listener_s *closed;      /* closed, freed by the next pass's timer (under conns_lock) */
    struct tcp_listener_s *job;
    pthread_mutex_t      conns_lock;    /* the list, and handshakes */
    pthread_mutex_t      watch_lock;    /* connections' place in the epoll set (after conns_lock) */
    struct tcp_conn     *conns;
    struct tcp_pending  *pending;       /* by request index */
    _Atomic uint32_t    *slot_refs;     /* queued get answers per segment slot */
    _Atomic int          nhs;           /* connections in their handshake */
    _Atomic int          nconns;        /* connections, whatever their state */
    _Atomic int          nlazy;         /* connections with frames held back (tx.lazy) */
};

static inline struct tcp_link *tcp_of(struct nv_link *l) { return (struct tcp_link *)l; }
static inline struct tcp_conn *conn_of(struct nv_lpeer *lp) { return lp ? lp->conn : NULL; }

/* tcp_conn.c: a connection's life and ownership */
/* A connection over fd, not yet visible; tcp_conn_publish adds it to the
 * link's list and core's epoll set (asking for events). */
struct tcp_conn *tcp_conn_new(struct tcp_link *t, int fd);
int              tcp_conn_publish(struct tcp_conn *c, unsigned events);
void             tcp_conn_free(struct tcp_conn *c);
void             tcp_conn_fail(struct tcp_conn *c, const char *why);
int              tcp_conn_buffers(struct tcp_conn *c);
int              tcp_tune_socket(int fd, int timeout_ms);
void             tcp_conn_interest(struct tcp_conn *c, unsigned events);
/* The link's watch op (link.h): ready connections out of the epoll set, or back. */
void             tcp_watch(struct nv_link *l, int on);
/* Own c (0), or -1 if another thread does. A thread that owns it already
 * (a handler run from its receive path) owns it again. */
int              tcp_own(struct tcp_conn *c);
void             tcp_release(struct tcp_conn *c);
/* Own c, waiting for it (a thread that can block). */
void             tcp_own_wait(struct tcp_conn *c);
int              tcp_owned_here(struct tcp_conn *c);

/* tcp_tx.c: the send queue */
/* Queue a frame (header h, payload copied from pay, plen bytes): 0, or -1
 * (no room and the caller cannot wait: the caller mails it). urgent: it
 * leaves at the end of the pass. */
int            tcp_tx_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                            const void *pay, size_t plen, int urgent);
/* Queue a frame whose payload stays where it is (sent from there). */
int            tcp_tx_frame_ext(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                                const void *pay, size_t plen, const struct tcp_seg *how);
/* Send what is queued without blocking; -1 if the connection died. */
int            tcp_tx_push(struct tcp_conn *c);
/* Send everything queued, waiting for room and receiving meanwhile. */
netvm_status_t tcp_tx_drain(struct tcp_conn *c);
/* Hand a frame to c's owner (the caller does not own c). */
netvm_status_t tcp_mail(struct tcp_conn *c, const struct nv_tcp_hdr *h, const void *extra, size_t elen,
                        const void *pay, size_t plen, const struct tcp_seg *ext);
void           tcp_take_mail(struct tcp_conn *c);
void           tcp_tx_free(struct tcp_conn *c);

/* tcp_rx.c: receiving */
/* Take in what arrived on c (the caller owns it); frames handled. */
int            tcp_rx(struct tcp_conn *c);
/* The connection went with a frame half received: end it, failed. */
void           tcp_rx_abort(struct tcp_conn *c);

/* tcp_serve.c: each frame's meaning */
/* ops->gate_failed for c's peer */
int            tcp_gate_failed(struct tcp_conn *c, uint32_t gate, netvm_status_t *st);
/* A frame whose payload (plen bytes) is all at pay. */
void           tcp_frame(struct tcp_conn *c, const struct nv_tcp_hdr *h, const uint8_t *pay, size_t plen);
/* A frame whose payload is still coming: where it lands (c->dst, NULL
 * discards); then tcp_frame_end once it has. */
void           tcp_frame_begin(struct tcp_conn *c, const uint8_t *have, size_t nhave);
void           tcp_frame_end(struct tcp_conn *c, netvm_status_t landed);
struct tcp_pending *tcp_pending_take(struct tcp_link *t, uint32_t id, uint8_t kind, struct tcp_conn *c);

/* tcp_hs.c: listeners and the handshake */
netvm_status_t tcp_listener_open(struct tcp_link *t, uint32_t ipv4, uint16_t port, int purpose,
                                 const void *key, size_t key_len, void *cookie,
                                 struct tcp_listener_s **out);
/* Stop listening (any thread); the struct is freed by tcp_listeners_reap. */
void           tcp_listener_close(struct tcp_link *t, struct tcp_listener_s *l);
/* Free closed listeners: only where no event of theirs can be in hand (the
 * pass holder's timer, or the link's end). */
void           tcp_listeners_reap(struct tcp_link *t);
void           tcp_accept(struct tcp_link *t, struct tcp_listener_s *l);
netvm_status_t tcp_dial(struct tcp_link *t, uint32_t ipv4, uint16_t port, int purpose, int rank,
                        const void *key, size_t key_len, void *cookie);
/* Bytes arrived on a connection in its handshake (the caller owns it). */
void           tcp_hs_input(struct tcp_conn *c);
void           tcp_hs_writable(struct tcp_conn *c);
/* The owner is done with a handshake step: free c if it failed, else release. */
void           tcp_hs_done(struct tcp_conn *c);
/* Close handshakes past their deadline; the next deadline (ns) or UINT64_MAX. */
uint64_t       tcp_hs_expire(struct tcp_link *t, uint64_t now);

#endif
