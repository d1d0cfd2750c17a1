/* libFuzzer target: the bootstrap frame decoder (processes to launcher,
 * launcher to launcher). Whatever it accepts must re-encode to the very
 * same bytes; it must answer OK, MORE or BAD, and say why when BAD. */
#include "wire/boot_msg.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct nv_boot_msg m;
    size_t frame_len = 0;
    const char *why = NULL;
    enum nv_boot_rc rc = nv_boot_frame_decode(data, size, NV_BOOT_MAX_PAYLOAD, &m, &frame_len, &why);
    if (rc == NV_BOOT_RC_BAD) {
        if (!why)
            abort();
        return 0;
    }
    if (rc != NV_BOOT_RC_OK)
        return 0;
    if (frame_len > size)
        abort();
    uint8_t *again = malloc(frame_len ? frame_len : 1);
    size_t n = nv_boot_msg_encode(&m, again, frame_len);
    if (n != frame_len || memcmp(again, data, frame_len) != 0)
        abort();
    free(again);
    return 0;
}
