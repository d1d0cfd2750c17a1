/* Explicit little-endian field access for every wire format. */
#ifndef NV_WIRE_ENDIAN_H
#define NV_WIRE_ENDIAN_H

#include <stdint.h>
#include <string.h>

/* One load or store each: GCC 12 does not merge the byte-at-a-time form
 * into one access, and a message header is read and written field by field
 * on every active message. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NV_LE16(v) __builtin_bswap16(v)
#define NV_LE32(v) __builtin_bswap32(v)
#define NV_LE64(v) __builtin_bswap64(v)
#else
#define NV_LE16(v) (v)
#define NV_LE32(v) (v)
#define NV_LE64(v) (v)
#endif

static inline void nv_put16(uint8_t *p, uint16_t v) { v = NV_LE16(v); memcpy(p, &v, 2); }
static inline void nv_put32(uint8_t *p, uint32_t v) { v = NV_LE32(v); memcpy(p, &v, 4); }
static inline void nv_put64(uint8_t *p, uint64_t v) { v = NV_LE64(v); memcpy(p, &v, 8); }
static inline uint16_t nv_get16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return NV_LE16(v);
}
static inline uint32_t nv_get32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return NV_LE32(v);
}
static inline uint64_t nv_get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return NV_LE64(v);
}

#endif
