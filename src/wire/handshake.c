#include "wire/handshake.h"
#include "wire/endian.h"

#include <string.h>

/* HELLO: proto u32 | purpose u32 | uuid u64 | job_hash u64 | rank i32 |
 *        flags u32 | host_id u64 | nonce[32] */
void nv_hs_hello_encode(const struct nv_hs_hello *h, uint8_t out[NV_HS_HELLO_LEN])
{
    nv_put32(out, h->proto);
    nv_put32(out + 4, h->purpose);
    nv_put64(out + 8, h->uuid);
    nv_put64(out + 16, h->job_hash);
    nv_put32(out + 24, (uint32_t)h->rank);
    nv_put32(out + 28, h->flags);
    nv_put64(out + 32, h->host_id);
    memcpy(out + 40, h->nonce, NV_HS_NONCE_LEN);
}

int nv_hs_hello_decode(const uint8_t *in, size_t len, struct nv_hs_hello *h)
{
    if (len != NV_HS_HELLO_LEN)
        return -1;
    h->proto = nv_get32(in);
    h->purpose = nv_get32(in + 4);
    h->uuid = nv_get64(in + 8);
    h->job_hash = nv_get64(in + 16);
    h->rank = (int32_t)nv_get32(in + 24);
    h->flags = nv_get32(in + 28);
    h->host_id = nv_get64(in + 32);
    memcpy(h->nonce, in + 40, NV_HS_NONCE_LEN);
    if (h->proto != NV_HS_PROTO || (h->purpose != NV_HS_JOB && h->purpose != NV_HS_SERVICE) || h->flags)
        return -1;
    if (h->purpose == NV_HS_JOB ? h->rank < 0 : h->rank != -1)
        return -1;
    return 0;
}

/* AUTH: mac[32] | peer_id u32 | card_len u32 | card[card_len] */
size_t nv_hs_auth_encode(const struct nv_hs_auth *a, uint8_t *out)
{
    memcpy(out, a->mac, NV_HS_MAC_LEN);
    nv_put32(out + 32, a->peer_id);
    nv_put32(out + 36, a->card_len);
    memcpy(out + 40, a->card, a->card_len);
    return 40 + a->card_len;
}

int nv_hs_auth_decode(const uint8_t *in, size_t len, struct nv_hs_auth *a)
{
    if (len < 40)
        return -1;
    memcpy(a->mac, in, NV_HS_MAC_LEN);
    a->peer_id = nv_get32(in + 32);
    a->card_len = nv_get32(in + 36);
    if (a->card_len > NV_HS_CARD_MAX || len != 40 + (size_t)a->card_len)
        return -1;
    memcpy(a->card, in + 40, a->card_len);
    return 0;
}

/* WELCOME: peer_id u32 | link u32 | card_len u32 | pad u32 | card[card_len] */
size_t nv_hs_welcome_encode(const struct nv_hs_welcome *w, uint8_t *out)
{
    nv_put32(out, w->peer_id);
    nv_put32(out + 4, w->link);
    nv_put32(out + 8, w->card_len);
    nv_put32(out + 12, 0);
    memcpy(out + 16, w->card, w->card_len);
    return 16 + w->card_len;
}

int nv_hs_welcome_decode(const uint8_t *in, size_t len, struct nv_hs_welcome *w)
{
    if (len < 16)
        return -1;
    w->peer_id = nv_get32(in);
    w->link = nv_get32(in + 4);
    w->card_len = nv_get32(in + 8);
    if (nv_get32(in + 12) != 0 || w->link > NV_HS_LINK_UPGRADE || w->card_len > NV_HS_CARD_MAX ||
        len != 16 + (size_t)w->card_len)
        return -1;
    if (w->link == NV_HS_LINK_UPGRADE && w->card_len == 0)
        return -1;
    memcpy(w->card, in + 16, w->card_len);
    return 0;
}
