/* Active messages on the wire: one header format for every link, carrying a
 * handler id, up to NV_AM_MAX_ARGS 64-bit arguments, an optional reply token
 * (the call this message answers, or the call a request asks an answer
 * for), an optional payload token (where the payload must land at the
 * receiver), and the payload's length. The payload itself follows the
 * header (eager) or is fetched by the receiver (rendezvous, a link's own
 * business, described by a link descriptor the link appends).
 *
 * Layout (little-endian):
 *   0  u8  version            1  u8  flags (NV_AMW_F_*)
 *   2  u16 handler id         4  u8  nargs  5 u8 status (replies)
 *   6  u16 credits returned to the receiver
 *   8  u32 payload length (at most NV_AM_MAX_LEN)
 *   12 args[nargs]
 *   then, with F_TOKEN or F_REPLY, the reply token: origin u64 (only with
 *   F_ORIGIN), call u32, key u64. Without F_ORIGIN a request's origin is
 *   its sender and a reply's its receiver, which the receiving core fills
 *   in (the link knows neither); F_PTOKEN says the call named a reply
 *   buffer (its payload token). The payload token's key is not sent: it
 *   is derived from the call's key (nv_am_pkey), which is what the origin
 *   checks it against.
 * Small, so that the shm link's commonest records fit one 64-byte ring
 * slot with the ring's and the link's framing (20 bytes): a call with two
 * arguments (an RPC's operation and one of its own) and a reply with one,
 * 40 and 32 bytes here. A record that spills into a second slot costs a
 * second cache line between the cores (about 55 ns a round trip here when
 * the token took 24 bytes: version 4).
 * Decoding checks every field's range, so a malformed header is rejected,
 * never acted on. */
#ifndef NV_WIRE_AM_H
#define NV_WIRE_AM_H

#include <stddef.h>
#include <stdint.h>

#define NV_AM_VERSION     5
#define NV_AM_MAX_ARGS    6
#define NV_AMW_FIXED      12
#define NV_AMW_TOKEN_LEN  12   /* call and key; the origin, when sent, 8 more */
#define NV_AM_HDR_MAX     (NV_AMW_FIXED + 8 * NV_AM_MAX_ARGS + 8 + NV_AMW_TOKEN_LEN)
/* one active message's payload is at most this long (larger data: RMA) */
#define NV_AM_MAX_LEN     (1ull << 30)

enum {
    NV_AMW_F_TOKEN  = 1u << 0,   /* a request: the token names the call a reply must answer */
    NV_AMW_F_REPLY  = 1u << 1,   /* a reply: the token names the call it answers */
    NV_AMW_F_ORIGIN = 1u << 2,   /* the token's origin is sent (a request its sender did not make) */
    NV_AMW_F_PTOKEN = 1u << 3,   /* the token's pindex is 1; on the wire only (decoded into pindex) */
    NV_AMW_F_ALL    = 0x0f,
};

/* A reply token: who made the call and which call it was, and the payload
 * token of the call's reply buffer. The keys make a token unguessable, so
 * a forged or stale reply is recognised at the origin and dropped, and a
 * payload lands only where the caller said, once. */
struct nv_am_token {
    uint64_t origin;    /* the calling context's endpoint id */
    uint32_t call;      /* the origin's request id (index | generation) */
    uint32_t pindex;    /* 1: the call named a reply buffer (its payload token); 0: none */
    uint64_t key;
    uint64_t pkey;      /* the payload token's key: nv_am_pkey(key) when pindex is 1, else 0 */
};

/* The payload token's key of a call whose key is key: both travel in the
 * one token, so whoever could learn one has the other, and nobody without
 * the token learns either (one SipHash per call, not two); never 0. */
static inline uint64_t nv_am_pkey(uint64_t key)
{
    uint64_t k = (key << 29 | key >> 35) ^ 0x7061796c6b657921ull;   /* "paylkey!" */
    return k ? k : 1;
}

struct nv_am_hdr {
    uint8_t  flags;     /* NV_AMW_F_* */
    uint16_t handler;
    uint8_t  nargs;
    uint8_t  status;    /* replies: netvm_status_t */
    uint16_t credits;
    uint64_t len;
    uint64_t args[NV_AM_MAX_ARGS];
    struct nv_am_token  token;
};

/* Bytes the encoded header of h takes. */
size_t nv_am_hdr_len(const struct nv_am_hdr *h);
/* Encode h into out (at least nv_am_hdr_len(h) bytes); returns that length. */
size_t nv_am_hdr_encode(const struct nv_am_hdr *h, uint8_t *out);
/* Decode a header from buf (len bytes available); returns its encoded
 * length, or 0 if buf does not start with a whole, well-formed header (a
 * header is never longer than NV_AM_HDR_MAX: with that many bytes, 0 means
 * malformed). */
size_t nv_am_hdr_decode(const uint8_t *buf, size_t len, struct nv_am_hdr *h);

#endif
