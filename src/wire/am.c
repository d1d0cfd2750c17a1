#include "wire/am.h"
#include "wire/endian.h"

#include <string.h>

/* layout: version u8 | kind u8 | op u8 | flags u8 | status u16 | pad u16 |
 *         src_rank i32 | req_id u32 | slot u32 | pad u32 |
 *         key u64 | off u64 | operand u64 | compare u64 | tag u64 */
void nv_am_encode(const struct nv_am *m, uint8_t out[NV_AM_SIZE])
{
    memset(out, 0, NV_AM_SIZE);
    out[0] = NV_AM_VERSION;
    out[1] = m->kind;
    out[2] = m->op;
    out[3] = m->flags;
    nv_put16(out + 4, m->status);
    nv_put32(out + 8, (uint32_t)m->src_rank);
    nv_put32(out + 12, m->req_id);
    nv_put32(out + 16, m->slot);
    nv_put64(out + 24, m->key);
    nv_put64(out + 32, m->off);
    nv_put64(out + 40, m->operand);
    nv_put64(out + 48, m->compare);
    nv_put64(out + 56, m->tag);
}

int nv_am_decode(const uint8_t *buf, size_t len, struct nv_am *m)
{
    if (len < NV_AM_SIZE || buf[0] != NV_AM_VERSION)
        return -1;
    m->kind = buf[1];
    if (m->kind == 0 || m->kind >= NV_AM_KIND_MAX)
        return -1;
    m->op = buf[2];
    m->flags = buf[3];
    if (m->flags & ~(unsigned)NV_AM_F_ALL)
        return -1;
    m->status = nv_get16(buf + 4);
    m->src_rank = (int32_t)nv_get32(buf + 8);
    m->req_id = nv_get32(buf + 12);
    m->slot = nv_get32(buf + 16);
    m->key = nv_get64(buf + 24);
    m->off = nv_get64(buf + 32);
    m->operand = nv_get64(buf + 40);
    m->compare = nv_get64(buf + 48);
    m->tag = nv_get64(buf + 56);
    if (m->src_rank < 0)
        return -1;
    return 0;
}
