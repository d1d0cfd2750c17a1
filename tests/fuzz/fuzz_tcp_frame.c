/* libFuzzer target: the tcp link's frame header decoder. A header that
 * decodes must re-encode to the same bytes, and its payload length must be
 * one the kind allows. */
#include "wire/tcp_frame.h"
#include "wire/am.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nv_tcp_hdr h, h2;
    /* padding compares equal only if zeroed first */
    memset(&h, 0, sizeof h);
    memset(&h2, 0, sizeof h2);
    const char *why = NULL;
    if (nv_tcp_hdr_decode(data, size, &h, &why) != 0) {
        if (!why)
            abort();   /* every refusal says why */
        return 0;
    }
    uint8_t again[NV_TCP_HDR_LEN];
    nv_tcp_hdr_encode(&h, again);
    if (nv_tcp_hdr_decode(again, sizeof again, &h2, NULL) != 0 || memcmp(&h, &h2, sizeof h) != 0)
        abort();
    uint64_t plen = nv_tcp_payload_len(&h);
    if (plen > NV_TCP_MAX_XFER || (h.kind == NV_TCP_AM && plen != NV_AM_SIZE))
        abort();
    return 0;
}
