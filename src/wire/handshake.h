/* The payloads of the tcp handshake's frames (wire/tcp_frame.h has the
 * conversation). Fixed layouts, little-endian, every field range-checked on
 * decode. A HELLO says who the sender is and brings a fresh nonce; AUTH is
 * HMAC-SHA-256 over both HELLOs exactly as sent (so each side proves the
 * secret for this conversation, with a role label that keeps a proof from
 * being reflected), followed, from the connector, by its peer id for the
 * acceptor and an opaque card for moving to a faster link (same host);
 * WELCOME gives the acceptor's peer id for the connector, the link chosen
 * and the acceptor's card. */
#ifndef NV_WIRE_HANDSHAKE_H
#define NV_WIRE_HANDSHAKE_H

#include <stddef.h>
#include <stdint.h>

#define NV_HS_PROTO      2
#define NV_HS_NONCE_LEN  32
#define NV_HS_MAC_LEN    32
#define NV_HS_HELLO_LEN  72
#define NV_HS_CARD_MAX   64

enum nv_hs_purpose {
    NV_HS_JOB     = 1,   /* a rank of the same job: the job secret, ranks and job id are checked */
    NV_HS_SERVICE = 2,   /* a process reaching a listener: the listener's credential */
};

struct nv_hs_hello {
    uint32_t proto;
    uint32_t purpose;      /* enum nv_hs_purpose */
    uint64_t uuid;         /* the sender's endpoint id */
    uint64_t job_hash;     /* NV_HS_JOB: hash of the job id; else 0 */
    int32_t  rank;         /* NV_HS_JOB: the sender's rank; else -1 */
    uint32_t flags;        /* reserved, 0 */
    uint64_t host_id;      /* same value: same host (a faster link may be used) */
    uint8_t  nonce[NV_HS_NONCE_LEN];
};

/* AUTH: the proof, then (connector only) a peer id and a card. */
struct nv_hs_auth {
    uint8_t  mac[NV_HS_MAC_LEN];
    uint32_t peer_id;      /* connector: its peer id for the acceptor; acceptor: 0 */
    uint32_t card_len;
    uint8_t  card[NV_HS_CARD_MAX];
};

enum nv_hs_link { NV_HS_LINK_TCP = 0, NV_HS_LINK_UPGRADE = 1 };

struct nv_hs_welcome {
    uint32_t peer_id;      /* the acceptor's peer id for the connector */
    uint32_t link;         /* enum nv_hs_link */
    uint32_t card_len;
    uint8_t  card[NV_HS_CARD_MAX];
};

void   nv_hs_hello_encode(const struct nv_hs_hello *h, uint8_t out[NV_HS_HELLO_LEN]);
int    nv_hs_hello_decode(const uint8_t *in, size_t len, struct nv_hs_hello *h);
/* returns the encoded length (at most 40 + NV_HS_CARD_MAX) */
size_t nv_hs_auth_encode(const struct nv_hs_auth *a, uint8_t *out);
int    nv_hs_auth_decode(const uint8_t *in, size_t len, struct nv_hs_auth *a);
size_t nv_hs_welcome_encode(const struct nv_hs_welcome *w, uint8_t *out);
int    nv_hs_welcome_decode(const uint8_t *in, size_t len, struct nv_hs_welcome *w);

#endif
