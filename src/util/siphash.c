#include "util/siphash.h"

#include <string.h>

static inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline uint64_t le64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);   /* one load, not eight */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define ROUND(v0, v1, v2, v3) do { \
    v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32); \
    v2 += v3; v3 = rotl(v3, 16); v3 ^= v2; \
    v0 += v3; v3 = rotl(v3, 21); v3 ^= v0; \
    v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32); \
} while (0)

/* SipHash's state: its start from the key, one compression of a word (two
 * rounds), and the finish (the length block given by the caller). */
struct sip { uint64_t v0, v1, v2, v3; };

static inline struct sip sip_start(const uint8_t key[16])
{
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    return (struct sip){ k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull, k0 ^ 0x6c7967656e657261ull,
                         k1 ^ 0x7465646279746573ull };
}

static inline void sip_word(struct sip *s, uint64_t m)
{
    s->v3 ^= m;
    ROUND(s->v0, s->v1, s->v2, s->v3);
    ROUND(s->v0, s->v1, s->v2, s->v3);
    s->v0 ^= m;
}

static inline uint64_t sip_finish(struct sip *s)
{
    s->v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        ROUND(s->v0, s->v1, s->v2, s->v3);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

uint64_t nv_siphash(const uint8_t key[16], const void *data, size_t len)
{
    const uint8_t *in = data;
    struct sip s = sip_start(key);
    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8)
        sip_word(&s, le64(in + i));
    uint8_t last[8] = { 0 };
    memcpy(last, in + full, len - full);
    sip_word(&s, (uint64_t)len << 56 | le64(last));
    return sip_finish(&s);
}

/* The same function as nv_siphash over the 16 little-endian bytes of a and
 * b, without packing them into bytes first: a reply token's key is one of
 * these per call. */
uint64_t nv_siphash2(const uint8_t key[16], uint64_t a, uint64_t b)
{
    struct sip s = sip_start(key);
    sip_word(&s, a);
    sip_word(&s, b);
    sip_word(&s, (uint64_t)16 << 56);
    return sip_finish(&s);
}
