#include "wire/tcp_frame.h"
#include "wire/endian.h"

#include <netvm/netvm.h>
#include <string.h>

/* layout: version u8 | kind u8 | status u16 | flags u16 | pad u16 |
 *         req_id u32 | slot u32 | key u64 | off u64 | len u64 | operand u64 | pad u64 */
void nv_tcp_hdr_encode(const struct nv_tcp_hdr *h, uint8_t out[NV_TCP_HDR_LEN])
{
    out[0] = NV_TCP_VERSION;
    out[1] = h->kind;
    nv_put16(out + 2, h->status);
    nv_put16(out + 4, h->flags);
    nv_put16(out + 6, 0);
    nv_put32(out + 8, h->req_id);
    nv_put32(out + 12, h->slot);
    nv_put64(out + 16, h->key);
    nv_put64(out + 24, h->off);
    nv_put64(out + 32, h->len);
    nv_put64(out + 40, h->operand);
    nv_put64(out + 48, 0);
}

uint64_t nv_tcp_payload_len(const struct nv_tcp_hdr *h)
{
    switch (h->kind) {
    case NV_TCP_PUT:
    case NV_TCP_AM:
    case NV_TCP_HELLO:
    case NV_TCP_AUTH:
    case NV_TCP_WELCOME:
        return h->len;
    case NV_TCP_GET_RESP:
        return h->status == NETVM_OK ? h->len : 0;
    default:
        return 0;
    }
}

void nv_tcp_trailer_encode(uint16_t status, uint8_t out[NV_TCP_TRAILER_LEN])
{
    nv_put64(out, status);
}

int nv_tcp_trailer_decode(const uint8_t in[NV_TCP_TRAILER_LEN], uint16_t *status)
{
    uint64_t v = nv_get64(in);
    if (v >= NETVM_STATUS_COUNT)
        return -1;
    *status = (uint16_t)v;
    return 0;
}

static int fail(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return -1;
}

int nv_tcp_hdr_decode(const uint8_t *buf, size_t len, struct nv_tcp_hdr *h, const char **why)
{
    if (len < NV_TCP_HDR_LEN)
        return fail(why, "truncated header");
    if (buf[0] != NV_TCP_VERSION)
        return fail(why, "unknown protocol version");
    h->kind = buf[1];
    h->status = nv_get16(buf + 2);
    h->flags = nv_get16(buf + 4);
    h->req_id = nv_get32(buf + 8);
    h->slot = nv_get32(buf + 12);
    h->key = nv_get64(buf + 16);
    h->off = nv_get64(buf + 24);
    h->len = nv_get64(buf + 32);
    h->operand = nv_get64(buf + 40);
    if (h->kind == 0 || h->kind >= NV_TCP_KIND_END)
        return fail(why, "unknown frame kind");
    if (h->status >= NETVM_STATUS_COUNT)
        return fail(why, "unknown status");
    if (h->flags & ~(unsigned)(NV_TCP_F_ACK | NV_TCP_F_NOTIFY | NV_TCP_F_TRAILER | NV_TCP_F_GATE | NV_TCP_F_QUIET))
        return fail(why, "unknown flags");
    if ((h->flags & NV_TCP_F_QUIET) && (h->kind != NV_TCP_PUT || (h->flags & (NV_TCP_F_ACK | NV_TCP_F_GATE))))
        return fail(why, "quiet on a frame other than a PUT nobody waits for");
    if ((h->flags & NV_TCP_F_GATE) && (h->kind != NV_TCP_PUT || (h->flags & NV_TCP_F_NOTIFY)))
        return fail(why, "a gate on a frame other than a PUT without a notification");
    if ((h->flags & NV_TCP_F_TRAILER) && h->kind != NV_TCP_PUT && h->kind != NV_TCP_GET_RESP &&
        h->kind != NV_TCP_AM)
        return fail(why, "trailer on a frame that carries no payload");
    if ((h->flags & (NV_TCP_F_ACK | NV_TCP_F_NOTIFY)) && h->kind != NV_TCP_PUT && h->kind != NV_TCP_GET)
        return fail(why, "flags on a frame that takes none");
    switch (h->kind) {
    case NV_TCP_HELLO:
    case NV_TCP_AUTH:
    case NV_TCP_WELCOME:
        if (h->len == 0 || h->len > NV_TCP_HS_MAX)
            return fail(why, "bad handshake payload length");
        break;
    case NV_TCP_AM:
        if (h->len == 0 || h->len > NV_TCP_AM_MAX)
            return fail(why, "bad AM length");
        break;
    case NV_TCP_PUT:
    case NV_TCP_GET:
    case NV_TCP_GET_RESP:
        if (h->len > NV_TCP_MAX_XFER)
            return fail(why, "transfer too large");
        break;
    default:
        if (h->len)
            return fail(why, "unexpected payload");
        break;
    }
    return 0;
}
