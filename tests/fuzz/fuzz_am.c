/* libFuzzer target: the active-message header decoder (wire/am.h, version
 * 3; the shm ring and the tcp link carry these). A header that decodes
 * obeys every rule of the format, re-encodes to exactly the bytes it was
 * decoded from, and is refused when cut anywhere short. */
#include "wire/am.h"

#include <netvm/netvm.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nv_am_hdr h, h2;
    /* padding compares equal only if zeroed first */
    memset(&h, 0, sizeof h);
    memset(&h2, 0, sizeof h2);
    size_t n = nv_am_hdr_decode(data, size, &h);
    if (!n)
        return 0;
    /* the rules */
    if (n > size || n > NV_AM_HDR_MAX || n != nv_am_hdr_len(&h))
        abort();
    if (data[0] != NV_AM_VERSION || (h.flags & ~(unsigned)NV_AMW_F_ALL) ||
        ((h.flags & NV_AMW_F_TOKEN) && (h.flags & NV_AMW_F_REPLY)))
        abort();
    if (h.nargs > NV_AM_MAX_ARGS || h.status >= NETVM_STATUS_COUNT || h.len > NV_AM_MAX_LEN)
        abort();
    for (unsigned i = h.nargs; i < NV_AM_MAX_ARGS; i++)
        if (h.args[i])
            abort();   /* no stale argument beyond nargs */
    if (h.flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) {
        if (h.token.pindex > 1)
            abort();
    } else if (h.token.origin || h.token.call || h.token.pindex || h.token.key || h.token.pkey) {
        abort();   /* no token without a token flag */
    }
    /* the same bytes again */
    uint8_t again[NV_AM_HDR_MAX];
    if (nv_am_hdr_encode(&h, again) != n || memcmp(again, data, n) != 0)
        abort();
    if (nv_am_hdr_decode(again, n, &h2) != n || memcmp(&h, &h2, sizeof h) != 0)
        abort();
    /* one byte short is never a header */
    if (nv_am_hdr_decode(data, n - 1, &h2) != 0)
        abort();
    return 0;
}
