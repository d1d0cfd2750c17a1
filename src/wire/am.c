#include "wire/am.h"
#include "wire/endian.h"

#include <netvm/netvm.h>
#include <string.h>

size_t nv_am_hdr_len(const struct nv_am_hdr *h)
{
    size_t n = NV_AMW_FIXED + 8u * h->nargs;
    if (h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY))
        n += NV_AMW_TOKEN_LEN + (h->flags & NV_AMW_F_ORIGIN ? 8u : 0u);
    return n;
}

size_t nv_am_hdr_encode(const struct nv_am_hdr *h, uint8_t *out)
{
    int tok = (h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) != 0;
    out[0] = NV_AM_VERSION;
    out[1] = (uint8_t)((h->flags & ~NV_AMW_F_PTOKEN) | (tok && h->token.pindex ? NV_AMW_F_PTOKEN : 0));
    nv_put16(out + 2, h->handler);
    out[4] = h->nargs;
    out[5] = h->status;
    nv_put16(out + 6, h->credits);
    nv_put32(out + 8, (uint32_t)h->len);
    uint8_t *p = out + NV_AMW_FIXED;
    for (unsigned i = 0; i < h->nargs; i++, p += 8)
        nv_put64(p, h->args[i]);
    if (tok) {
        if (h->flags & NV_AMW_F_ORIGIN) {
            nv_put64(p, h->token.origin);
            p += 8;
        }
        nv_put32(p, h->token.call);
        nv_put64(p + 4, h->token.key);
        p += NV_AMW_TOKEN_LEN;
    }
    return (size_t)(p - out);
}

size_t nv_am_hdr_decode(const uint8_t *buf, size_t len, struct nv_am_hdr *h)
{
    if (len < NV_AMW_FIXED || buf[0] != NV_AM_VERSION)
        return 0;
    h->flags = buf[1];
    h->handler = nv_get16(buf + 2);
    h->nargs = buf[4];
    h->status = buf[5];
    h->credits = nv_get16(buf + 6);
    h->len = nv_get32(buf + 8);
    if ((h->flags & ~(unsigned)NV_AMW_F_ALL) || h->nargs > NV_AM_MAX_ARGS || h->status >= NETVM_STATUS_COUNT ||
        h->len > NV_AM_MAX_LEN)
        return 0;
    /* a message is a request or a reply, not both; only they have a token */
    unsigned tok = h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY);
    if (tok == (NV_AMW_F_TOKEN | NV_AMW_F_REPLY) || (!tok && (h->flags & (NV_AMW_F_ORIGIN | NV_AMW_F_PTOKEN))))
        return 0;
    size_t need = nv_am_hdr_len(h);
    if (len < need)
        return 0;
    const uint8_t *p = buf + NV_AMW_FIXED;
    for (unsigned i = 0; i < NV_AM_MAX_ARGS; i++)
        h->args[i] = i < h->nargs ? nv_get64(p + 8 * i) : 0;
    p += 8u * h->nargs;
    memset(&h->token, 0, sizeof h->token);
    if (tok) {
        if (h->flags & NV_AMW_F_ORIGIN) {
            h->token.origin = nv_get64(p);
            p += 8;
        }
        h->token.call = nv_get32(p);
        h->token.key = nv_get64(p + 4);
        h->token.pindex = (h->flags & NV_AMW_F_PTOKEN) != 0;
        h->token.pkey = h->token.pindex ? nv_am_pkey(h->token.key) : 0;
        h->flags &= (uint8_t)~NV_AMW_F_PTOKEN;
    }
    return need;
}
