/* Checking a ring's geometry and a channel's name. */
#include "chan_int.h"

#include <string.h>

netvm_status_t nv_chan_geometry(const netvm_chan_opts_t *opts, size_t *ring_bytes, size_t *max_msg)
{
    size_t rb = opts && opts->ring_bytes ? opts->ring_bytes : NV_CHAN_DEF_RING;
    if (rb < NV_CHAN_MIN_RING || rb > NV_CHAN_MAX_RING || (rb & (rb - 1)) != 0)
        return NETVM_ERR_INVAL;
    size_t mm = opts && opts->max_msg ? opts->max_msg : rb / 4;
    if (mm > rb - NV_CHAN_REC_HDR)
        return NETVM_ERR_INVAL;
    *ring_bytes = rb;
    *max_msg = mm;
    return NETVM_OK;
}

netvm_status_t nv_chan_seg_name(const char *name, char out[64])
{
    if (!name)
        return NETVM_ERR_INVAL;
    size_t n = strnlen(name, NETVM_CHAN_NAME_MAX + 1);
    if (n == 0 || n > NETVM_CHAN_NAME_MAX)
        return NETVM_ERR_INVAL;
    memcpy(out, NV_CHAN_SEG_PREFIX, sizeof NV_CHAN_SEG_PREFIX - 1);
    memcpy(out + sizeof NV_CHAN_SEG_PREFIX - 1, name, n + 1);
    return NETVM_OK;
}
