/* The tcp link's frames. Every frame is a fixed 56-byte header, then, for
 * the kinds that carry one, exactly `len` payload bytes. Little-endian,
 * versioned; decoding checks the version, the kind, the status and that the
 * payload length is allowed for the kind, so a malformed frame is rejected
 * (the connection is closed with a logged reason) and never acted on.
 *
 * Conversation on a connection (both directions are symmetric):
 *   HELLO(rank, nonce) both ways, then AUTH(HMAC over the peer's nonce) both
 *   ways; nothing else is accepted before the peer's AUTH verified.
 *   PUT(slot, key, off, len, F_ACK?, F_NOTIFY?) + len bytes  ->  PUT_ACK(status) if F_ACK
 *   GET(slot, key, off, len, F_NOTIFY?)           ->  GET_RESP(status) + len bytes if OK
 *   (F_NOTIFY: a notification at the target with operand as its tag)
 *   FLUSH                                         ->  FLUSH_ACK(first error since the last FLUSH)
 *   IMPORT(slot, key | name as payload)           ->  IMPORT_RESP(status, slot, key, len=size, operand=rights)
 *   AM + NV_AM_SIZE bytes (core's active messages: atomics and their replies)
 *   BYE: the sender is finalizing; a close after BYE is not a failure. */
#ifndef NV_WIRE_TCP_FRAME_H
#define NV_WIRE_TCP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#define NV_TCP_VERSION   1
#define NV_TCP_HDR_LEN   56
#define NV_TCP_NONCE_LEN 32
#define NV_TCP_MAC_LEN   32
#define NV_TCP_NAME_MAX  63
/* a single PUT or GET moves at most this much; larger transfers are split */
#define NV_TCP_MAX_XFER  (1ull << 30)

enum nv_tcp_kind {
    NV_TCP_HELLO = 1,
    NV_TCP_AUTH,
    NV_TCP_PUT,
    NV_TCP_PUT_ACK,
    NV_TCP_GET,
    NV_TCP_GET_RESP,
    NV_TCP_FLUSH,
    NV_TCP_FLUSH_ACK,
    NV_TCP_IMPORT,
    NV_TCP_IMPORT_RESP,
    NV_TCP_AM,
    NV_TCP_BYE,
    NV_TCP_KIND_END
};

enum {
    NV_TCP_F_ACK    = 1u << 0,   /* PUT: answer with PUT_ACK (remote completion) */
    NV_TCP_F_NOTIFY = 1u << 1,   /* PUT: completer, GET: responder notification at the target,
                                    carrying operand as its tag */
};

struct nv_tcp_hdr {
    uint8_t  kind;
    uint16_t status;   /* replies: netvm_status_t */
    uint16_t flags;
    uint32_t req_id;   /* requests echo it in their reply */
    uint32_t slot;
    uint64_t key;
    uint64_t off;
    uint64_t len;      /* payload bytes that follow (PUT, GET_RESP, AM, HELLO, AUTH, IMPORT);
                          GET: bytes asked for; IMPORT_RESP: the segment's size */
    uint64_t operand;  /* HELLO: sender's rank; IMPORT_RESP: rights; PUT/GET with F_NOTIFY: tag */
};

void nv_tcp_hdr_encode(const struct nv_tcp_hdr *h, uint8_t out[NV_TCP_HDR_LEN]);
/* 0 on success; -1 if the bytes are not a well-formed header (the reason,
 * a static string, in *why when why is not NULL). */
int  nv_tcp_hdr_decode(const uint8_t *buf, size_t len, struct nv_tcp_hdr *h, const char **why);
/* Bytes of payload that follow a decoded header. */
uint64_t nv_tcp_payload_len(const struct nv_tcp_hdr *h);

#endif
