/* The bootstrap protocol: framed messages between a job's processes and its
 * launcher (src/boot/client.c <-> src/boot/server.c).
 *
 * Frame: a 12-byte header {u32 magic, u16 version, u16 type, u32 payload
 * length}, little-endian, then the payload. Payloads are bounded by
 * NV_BOOT_MAX_PAYLOAD so a peer can never make the other side allocate
 * without limit, and every field is range-checked on decode: a malformed
 * frame is rejected (the caller closes the connection), never acted on.
 *
 * Conversation (client = one rank's process):
 *   client -> HELLO                 server -> RESULT (OK, or why not)
 *   client -> ALLGATHER(seq, bytes) server -> ALLGATHER_RESULT(seq, status, all)
 *   client -> BARRIER(seq)          server -> BARRIER_DONE(seq, status)
 *   client -> BYE                   (then closes: a clean exit, not a death)
 * seq counts the collectives a rank has entered, from 1, so a client and the
 * server that disagree about which collective is running notice it.
 *
 * Between launchers (a multi-host job: node launchers meet the hub, node 0's
 * launcher, at the tcp rendezvous; src/boot/node_auth.h says what the proofs
 * are):
 *   hub  -> CHALLENGE(nonce)       as soon as the connection is accepted
 *   node -> NODE_HELLO(node, nnodes, nlocal, flags, nonce, proof)
 *   hub  -> WELCOME(status, job id, proof, text)  or closes without a word
 *   hub  -> START                  once every node has joined
 *   node -> ENTER(rank, seq, collective, bytes)   a local rank's collective
 *   hub  -> ALLGATHER_RESULT / BARRIER_DONE       once per round the node is in
 *   node -> RANK_GONE(rank, left|dead)
 *   node -> FAILED(rank, code, text)  a local rank failed (or the node gave up)
 *   hub  -> ABORT(rank, node, code, text)  the job is over: tear down
 *   node -> NODE_DONE(code)        its ranks have all ended; then it closes
 * Authentication is a scheme number plus proof bytes: scheme SECRET on the
 * private unix socket, scheme HMAC (challenge-response, the secret never
 * travels) over tcp. */
#ifndef NV_WIRE_BOOT_MSG_H
#define NV_WIRE_BOOT_MSG_H

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

#define NV_BOOT_MAGIC        0x4f42564eu    /* "NVBO" as little-endian bytes */
#define NV_BOOT_VERSION      1
#define NV_BOOT_HDR_LEN      12
#define NV_BOOT_MAX_PAYLOAD  (16u << 20)
#define NV_BOOT_JOB_ID_MAX   64             /* bytes of [A-Za-z0-9._-] */
#define NV_BOOT_PROOF_MAX    64
#define NV_BOOT_MAX_RANKS    (1 << 20)
#define NV_BOOT_MAX_NODES    4096
#define NV_BOOT_NONCE_LEN    32
#define NV_BOOT_TEXT_MAX     256            /* printable ASCII: it ends up on a terminal */
/* A HELLO (or NODE_HELLO) is small; a server reads no more than this from a
 * peer that has not authenticated yet. */
#define NV_BOOT_HELLO_MAX    (16 + NV_BOOT_JOB_ID_MAX + NV_BOOT_PROOF_MAX)
/* The largest frame a node reads from the hub before the hub has proved
 * itself (CHALLENGE, WELCOME). */
#define NV_BOOT_WELCOME_MAX  (12 + NV_BOOT_JOB_ID_MAX + NV_BOOT_PROOF_MAX + NV_BOOT_TEXT_MAX)

enum nv_boot_msg_type {
    NV_BOOT_MSG_HELLO = 1,
    NV_BOOT_MSG_RESULT,
    NV_BOOT_MSG_ALLGATHER,
    NV_BOOT_MSG_ALLGATHER_RESULT,
    NV_BOOT_MSG_BARRIER,
    NV_BOOT_MSG_BARRIER_DONE,
    NV_BOOT_MSG_BYE,
    /* between launchers */
    NV_BOOT_MSG_CHALLENGE,
    NV_BOOT_MSG_NODE_HELLO,
    NV_BOOT_MSG_WELCOME,
    NV_BOOT_MSG_START,
    NV_BOOT_MSG_ENTER,
    NV_BOOT_MSG_RANK_GONE,
    NV_BOOT_MSG_FAILED,
    NV_BOOT_MSG_ABORT,
    NV_BOOT_MSG_NODE_DONE,
    NV_BOOT_MSG_TYPE_END
};

/* How HELLO proves knowledge of the job secret. */
enum nv_boot_auth {
    /* proof = the 32 secret bytes, compared in constant time. Acceptable only
     * where the channel is private: a unix socket in a 0700 directory whose
     * peer's uid both sides check (SO_PEERCRED). */
    NV_BOOT_AUTH_SECRET = 1,
    /* proof = HMAC-SHA-256(secret, a transcript including both sides'
     * nonces): what launchers prove over tcp, where the secret must never
     * travel (src/boot/node_auth.h) */
    NV_BOOT_AUTH_HMAC = 2,
    NV_BOOT_AUTH_END
};

/* RANK_GONE: how a rank left the job */
enum nv_boot_gone {
    NV_BOOT_GONE_LEFT = 1,   /* said BYE, or exited 0 */
    NV_BOOT_GONE_DEAD = 2,   /* lost without BYE, or failed */
};

/* NODE_HELLO flags: settings every launcher of a job must agree on */
#define NV_BOOT_NODE_KEEP_GOING 1u

struct nv_boot_hdr {
    uint32_t magic;
    uint16_t version;
    uint16_t type;
    uint32_t len;          /* payload bytes following the header */
};

/* A decoded message. Pointer fields point into the buffer that was decoded
 * (no copy), so they live as long as that buffer. */
struct nv_boot_msg {
    uint16_t type;
    union {
        struct {
            int32_t  rank;
            int32_t  size;
            uint16_t auth;               /* enum nv_boot_auth */
            uint16_t proof_len;
            uint16_t job_id_len;
            const char    *job_id;       /* not NUL-terminated */
            const uint8_t *proof;
        } hello;
        struct {                          /* RESULT, BARRIER_DONE, ALLGATHER_RESULT */
            uint32_t seq;                 /* 0 in RESULT */
            netvm_status_t status;
            int32_t  dead_rank;           /* a rank that died or left, else -1 */
            uint32_t count;               /* ALLGATHER_RESULT: ranks */
            uint32_t each;                /* ALLGATHER_RESULT: bytes per rank */
            const uint8_t *data;          /* ALLGATHER_RESULT: count*each bytes */
        } result;
        struct {                          /* ALLGATHER, BARRIER; ENTER */
            uint32_t seq;
            uint32_t len;                 /* ALLGATHER contribution bytes */
            const uint8_t *data;
            int32_t  rank;                /* ENTER: the rank that entered */
            uint16_t coll;                /* ENTER: ALLGATHER or BARRIER */
        } coll;
        struct {                          /* CHALLENGE */
            const uint8_t *nonce;         /* NV_BOOT_NONCE_LEN bytes */
        } challenge;
        struct {                          /* NODE_HELLO */
            int32_t  node;                /* 1..nnodes-1: node 0 is the hub */
            int32_t  nnodes;              /* 2..NV_BOOT_MAX_NODES */
            int32_t  nlocal;              /* ranks per node; nnodes*nlocal <= NV_BOOT_MAX_RANKS */
            uint32_t flags;               /* NV_BOOT_NODE_* */
            uint16_t auth;                /* NV_BOOT_AUTH_HMAC */
            uint16_t proof_len;
            const uint8_t *nonce;         /* NV_BOOT_NONCE_LEN bytes */
            const uint8_t *proof;
        } node_hello;
        struct {                          /* WELCOME */
            netvm_status_t status;        /* OK: joined; else refused, text says why */
            uint16_t job_id_len;          /* 0 only when refused */
            uint16_t proof_len;
            uint16_t text_len;
            const char    *job_id;
            const uint8_t *proof;
            const char    *text;
        } welcome;
        struct {                          /* RANK_GONE, FAILED, ABORT, NODE_DONE */
            int32_t  rank;                /* -1 in ABORT: no one rank (a node lost) */
            int32_t  node;                /* ABORT: the node the news comes from */
            int32_t  code;                /* exit status 0..255 (FAILED, ABORT, NODE_DONE) */
            uint32_t state;               /* RANK_GONE: enum nv_boot_gone */
            uint16_t text_len;
            const char *text;             /* FAILED, ABORT: what happened */
        } report;
    } u;
};

enum nv_boot_rc {
    NV_BOOT_RC_OK   = 0,
    NV_BOOT_RC_MORE = 1,    /* well-formed so far; more bytes needed */
    NV_BOOT_RC_BAD  = -1,   /* malformed; *why says how */
};

/* The header at buf (len bytes available). MORE if len < NV_BOOT_HDR_LEN.
 * BAD for a wrong magic or version, an unknown type or a payload longer than
 * max_payload (<= NV_BOOT_MAX_PAYLOAD; a server passes NV_BOOT_HELLO_MAX
 * before a peer has authenticated). */
enum nv_boot_rc nv_boot_hdr_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                                   struct nv_boot_hdr *hdr, const char **why);

/* The payload of a frame whose header was decoded already. */
enum nv_boot_rc nv_boot_payload_decode(uint16_t type, const uint8_t *payload, size_t len,
                                       struct nv_boot_msg *msg, const char **why);

/* A whole frame: header and payload. On OK, *frame_len is the frame's size
 * (the caller may have more bytes after it); on MORE it is the size needed
 * when known (else NV_BOOT_HDR_LEN). */
enum nv_boot_rc nv_boot_frame_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                                     struct nv_boot_msg *msg, size_t *frame_len,
                                     const char **why);

/* The encoded size of msg (header included), or 0 if msg cannot be encoded
 * (a field out of range, the payload above NV_BOOT_MAX_PAYLOAD). */
size_t nv_boot_msg_size(const struct nv_boot_msg *msg);
/* Encode msg into buf (cap bytes). Returns the bytes written, or 0 if msg
 * is invalid or does not fit. */
size_t nv_boot_msg_encode(const struct nv_boot_msg *msg, uint8_t *buf, size_t cap);

/* Helpers shared by client and server. */
int nv_boot_job_id_valid(const char *id, size_t len);
const char *nv_boot_msg_type_name(uint16_t type);

#endif
