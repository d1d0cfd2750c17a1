/* The tcp link's frames. Every frame is a fixed 56-byte header, then, for
 * the kinds that carry one, exactly `len` payload bytes, then, with
 * F_TRAILER, an 8-byte status. Little-endian, versioned; decoding checks the
 * version, the kind, the status, the flags and that the payload length is
 * allowed for the kind, so a malformed frame is rejected (the connection is
 * closed with a logged reason) and never acted on.
 *
 * Handshake (wire/handshake.h has the payloads), connector C, acceptor A:
 *   C -> A  HELLO(C)                  who C is, a fresh nonce
 *   A -> C  HELLO(A), AUTH(A)         A's proof over both HELLOs
 *   C -> A  AUTH(C)                   C's proof, C's peer id for A, C's card
 *   A -> C  WELCOME                   A's peer id for C, the link they will use
 *   C -> A  ATTACHED(status)          only when they move to another link
 *   REFUSE(status) instead of a step: the listener is full, or unknown purpose.
 * Then (both directions are symmetric):
 *   PUT(slot, key, off, len, F_ACK?, F_NOTIFY? or F_GATE?) + len bytes  ->  PUT_ACK(status) if F_ACK
 *   GET(slot, key, off, len, F_NOTIFY?)           ->  GET_RESP(status) + len bytes if OK
 *   (F_NOTIFY: a notification at the target with operand as its tag)
 *   FLUSH                                         ->  FLUSH_ACK(first error since the last FLUSH)
 *   AM + len bytes: an active message (wire/am.h header, then its payload)
 *   BYE: the sender is leaving; a close after BYE is not a failure. */
#ifndef NV_WIRE_TCP_FRAME_H
#define NV_WIRE_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define NV_TCP_VERSION   3
#define NV_TCP_HDR_LEN   56
#define NV_TCP_TRAILER_LEN 8
/* a single PUT or GET moves at most this much; larger transfers are split */
#define NV_TCP_MAX_XFER  (1ull << 30)
/* an AM frame: the active-message header and its payload */
#define NV_TCP_AM_MAX    (NV_TCP_MAX_XFER + 512)
/* handshake payloads are small */
#define NV_TCP_HS_MAX    256

enum nv_tcp_kind {
    NV_TCP_HELLO = 1,
    NV_TCP_AUTH,
    NV_TCP_WELCOME,
    NV_TCP_REFUSE,
    NV_TCP_ATTACHED,
    NV_TCP_PUT,
    NV_TCP_PUT_ACK,
    NV_TCP_GET,
    NV_TCP_GET_RESP,
    NV_TCP_FLUSH,
    NV_TCP_FLUSH_ACK,
    NV_TCP_AM,
    NV_TCP_BYE,
    NV_TCP_KIND_END
};

enum {
    NV_TCP_F_ACK     = 1u << 0,   /* PUT: answer with PUT_ACK (remote completion) */
    NV_TCP_F_NOTIFY  = 1u << 1,   /* PUT: completer, GET: responder notification at the target,
                                     carrying operand as its tag */
    NV_TCP_F_TRAILER = 1u << 2,   /* PUT, GET_RESP, AM: an 8-byte status follows the payload (the
                                     sender read the payload straight from memory that may vanish) */
    NV_TCP_F_GATE    = 1u << 3,   /* PUT without F_NOTIFY: operand is a gate; if the put fails, the
                                     target refuses what names the gate after it (a signal) */
    NV_TCP_F_QUIET   = 1u << 4,   /* PUT without F_ACK or F_GATE: a failure is dropped, not kept for
                                     the next FLUSH (the writer expects the segment may be gone) */
};

struct nv_tcp_hdr {
    uint8_t  kind;
    uint16_t status;   /* replies: netvm_status_t */
    uint16_t flags;
    uint32_t req_id;   /* requests echo it in their reply */
    uint32_t slot;
    uint64_t key;
    uint64_t off;
    uint64_t len;      /* payload bytes that follow; GET: bytes asked for */
    uint64_t operand;  /* PUT/GET with F_NOTIFY: tag; PUT with F_GATE: the gate */
};

void nv_tcp_hdr_encode(const struct nv_tcp_hdr *h, uint8_t out[NV_TCP_HDR_LEN]);
/* 0 on success; -1 if the bytes are not a well-formed header (the reason,
 * a static string, in *why when why is not NULL). */
int  nv_tcp_hdr_decode(const uint8_t *buf, size_t len, struct nv_tcp_hdr *h, const char **why);
/* Bytes of payload that follow a decoded header (the trailer not included). */
uint64_t nv_tcp_payload_len(const struct nv_tcp_hdr *h);
/* The trailer's 8 bytes <-> a status; decode returns -1 for an unknown one. */
void nv_tcp_trailer_encode(uint16_t status, uint8_t out[NV_TCP_TRAILER_LEN]);
int  nv_tcp_trailer_decode(const uint8_t in[NV_TCP_TRAILER_LEN], uint16_t *status);

#endif
