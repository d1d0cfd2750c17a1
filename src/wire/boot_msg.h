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
 * Authentication is a scheme number plus opaque proof bytes, so a transport
 * that needs challenge-response (tcp: a server nonce, proof = HMAC(secret,
 * nonce || rank || job)) adds a scheme and a CHALLENGE type without changing
 * HELLO's layout. */
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
/* A HELLO is small; a server reads no more than this from a peer that has not
 * authenticated yet. */
#define NV_BOOT_HELLO_MAX    (16 + NV_BOOT_JOB_ID_MAX + NV_BOOT_PROOF_MAX)

enum nv_boot_msg_type {
    NV_BOOT_MSG_HELLO = 1,
    NV_BOOT_MSG_RESULT,
    NV_BOOT_MSG_ALLGATHER,
    NV_BOOT_MSG_ALLGATHER_RESULT,
    NV_BOOT_MSG_BARRIER,
    NV_BOOT_MSG_BARRIER_DONE,
    NV_BOOT_MSG_BYE,
    NV_BOOT_MSG_TYPE_END
};

/* How HELLO proves knowledge of the job secret. */
enum nv_boot_auth {
    /* proof = the 32 secret bytes, compared in constant time. Acceptable only
     * where the channel is private: a unix socket in a 0700 directory whose
     * peer's uid both sides check (SO_PEERCRED). */
    NV_BOOT_AUTH_SECRET = 1,
    NV_BOOT_AUTH_END
};

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
        struct {                          /* ALLGATHER, BARRIER */
            uint32_t seq;
            uint32_t len;                 /* ALLGATHER contribution bytes */
            const uint8_t *data;
        } coll;
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
