#include "wire/am.h"
#include "wire/endian.h"

#include <netvm/netvm.h>
#include <string.h>

size_t nv_am_hdr_len(const struct nv_am_hdr *h)
{
    size_t n = NV_AMW_FIXED + 8u * h->nargs;
    if (h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY))
        n += NV_AMW_TOKEN_LEN;
    return n;
}

size_t nv_am_hdr_encode(const struct nv_am_hdr *h, uint8_t *out)
{
    out[0] = NV_AM_VERSION;
    out[1] = h->flags;
    nv_put16(out + 2, h->handler);
    out[4] = h->nargs;
    out[5] = h->status;
    nv_put16(out + 6, h->credits);
    nv_put32(out + 8, (uint32_t)h->len);
    uint8_t *p = out + NV_AMW_FIXED;
    for (unsigned i = 0; i < h->nargs; i++, p += 8)
        nv_put64(p, h->args[i]);
    if (h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) {
        nv_put64(p, h->token.origin);
        nv_put32(p + 8, h->token.call);
        nv_put32(p + 12, h->token.pindex);
        nv_put64(p + 16, h->token.key);
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
    /* a message is a request or a reply, not both */
    if ((h->flags & NV_AMW_F_TOKEN) && (h->flags & NV_AMW_F_REPLY))
        return 0;
    size_t need = nv_am_hdr_len(h);
    if (len < need)
        return 0;
    const uint8_t *p = buf + NV_AMW_FIXED;
    for (unsigned i = 0; i < NV_AM_MAX_ARGS; i++)
        h->args[i] = i < h->nargs ? nv_get64(p + 8 * i) : 0;
    p += 8u * h->nargs;
    memset(&h->token, 0, sizeof h->token);
    if (h->flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) {
        h->token.origin = nv_get64(p);
        h->token.call = nv_get32(p + 8);
        h->token.pindex = nv_get32(p + 12);
        h->token.key = nv_get64(p + 16);
        if (h->token.pindex > 1)
            return 0;
        h->token.pkey = h->token.pindex ? nv_am_pkey(h->token.key) : 0;
    }
    return need;
}
