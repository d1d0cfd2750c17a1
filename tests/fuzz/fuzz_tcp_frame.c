/* libFuzzer target: the tcp link's frame header decoder (wire/tcp_frame.h,
 * version 3) and the trailer. A header that decodes re-encodes to the same
 * bytes (the two pads aside, which the decoder ignores), its flags obey
 * the rules of its kind, and its payload length is one the kind allows. */
#include "wire/tcp_frame.h"

#include <netvm/netvm.h>
#include <stdlib.h>
#include <string.h>

static void check_trailer(const uint8_t *data, size_t size)
{
    if (size < NV_TCP_TRAILER_LEN)
        return;
    uint16_t st = 0xffff;
    if (nv_tcp_trailer_decode(data, &st) != 0) {
        if (st != 0xffff)
            abort();   /* a refusal leaves the status alone */
        return;
    }
    uint8_t again[NV_TCP_TRAILER_LEN];
    nv_tcp_trailer_encode(st, again);
    if (st >= NETVM_STATUS_COUNT || memcmp(again, data, NV_TCP_TRAILER_LEN) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* whatever follows a header may be a trailer */
    check_trailer(size > NV_TCP_HDR_LEN ? data + NV_TCP_HDR_LEN : data,
                  size > NV_TCP_HDR_LEN ? size - NV_TCP_HDR_LEN : size);

    struct nv_tcp_hdr h, h2;
    /* padding compares equal only if zeroed first */
    memset(&h, 0, sizeof h);
    memset(&h2, 0, sizeof h2);
    const char *why = NULL;
    if (nv_tcp_hdr_decode(data, size, &h, &why) != 0) {
        if (!why || !*why)
            abort();   /* every refusal says why */
        return 0;
    }
    if (size < NV_TCP_HDR_LEN || data[0] != NV_TCP_VERSION)
        abort();
    uint8_t again[NV_TCP_HDR_LEN];
    nv_tcp_hdr_encode(&h, again);
    /* bytes 6-7 and 48-55 are pads: zero when encoded, not checked when
     * decoded; every other byte must come back */
    if (memcmp(again, data, 6) != 0 || memcmp(again + 8, data + 8, 40) != 0)
        abort();
    if (nv_tcp_hdr_decode(again, sizeof again, &h2, NULL) != 0 || memcmp(&h, &h2, sizeof h) != 0)
        abort();

    /* kind, status, flags */
    unsigned k = h.kind;
    if (k < NV_TCP_HELLO || k >= NV_TCP_KIND_END || h.status >= NETVM_STATUS_COUNT)
        abort();
    if (h.flags & ~(unsigned)(NV_TCP_F_ACK | NV_TCP_F_NOTIFY | NV_TCP_F_TRAILER | NV_TCP_F_GATE | NV_TCP_F_QUIET))
        abort();
    if ((h.flags & NV_TCP_F_GATE) && (k != NV_TCP_PUT || (h.flags & NV_TCP_F_NOTIFY)))
        abort();
    if ((h.flags & NV_TCP_F_QUIET) && (k != NV_TCP_PUT || (h.flags & (NV_TCP_F_ACK | NV_TCP_F_GATE))))
        abort();
    if ((h.flags & NV_TCP_F_TRAILER) && k != NV_TCP_PUT && k != NV_TCP_GET_RESP && k != NV_TCP_AM)
        abort();
    if ((h.flags & (NV_TCP_F_ACK | NV_TCP_F_NOTIFY)) && k != NV_TCP_PUT && k != NV_TCP_GET)
        abort();

    /* lengths */
    uint64_t plen = nv_tcp_payload_len(&h);
    switch (k) {
    case NV_TCP_HELLO:
    case NV_TCP_AUTH:
    case NV_TCP_WELCOME:
        if (h.len == 0 || h.len > NV_TCP_HS_MAX || plen != h.len)
            abort();
        break;
    case NV_TCP_AM:
        if (h.len == 0 || h.len > NV_TCP_AM_MAX || plen != h.len)
            abort();
        break;
    case NV_TCP_PUT:
        if (h.len > NV_TCP_MAX_XFER || plen != h.len)
            abort();
        break;
    case NV_TCP_GET:
        if (h.len > NV_TCP_MAX_XFER || plen != 0)
            abort();   /* the length asked for; nothing follows */
        break;
    case NV_TCP_GET_RESP:
        if (h.len > NV_TCP_MAX_XFER || plen != (h.status == NETVM_OK ? h.len : 0))
            abort();
        break;
    default:
        if (h.len != 0 || plen != 0)
            abort();
        break;
    }
    return 0;
}
