/* libFuzzer target: the active-message decoder (the shm ring and the tcp
 * link carry these). A message that decodes must re-encode identically. */
#include "wire/am.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nv_am m, m2;
    /* padding compares equal only if zeroed first */
    memset(&m, 0, sizeof m);
    memset(&m2, 0, sizeof m2);
    if (nv_am_decode(data, size, &m) != 0)
        return 0;
    uint8_t again[NV_AM_SIZE];
    nv_am_encode(&m, again);
    if (nv_am_decode(again, sizeof again, &m2) != 0 || memcmp(&m, &m2, sizeof m) != 0)
        abort();
    if (m.kind == 0 || m.kind >= NV_AM_KIND_MAX || m.src_rank < 0)
        abort();
    return 0;
}
