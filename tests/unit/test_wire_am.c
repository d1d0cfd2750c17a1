/* The active-message header (wire/am.h, version 5): round trips for every
 * argument count with and without a reply token (with its origin sent or
 * not), the little-endian layout at its fixed offsets, every malformed
 * header rejected (each field's range, both token flags, token flags
 * without a token, every truncation), and random
 * input never crashing the decoder and, when it decodes, re-encoding to
 * the same bytes. */
#include "check.h"
#include "wire/am.h"
#include "wire/endian.h"

#include <string.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    /* xorshift64*: the same sequence on every run and host */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dull;
}

/* A header with every field distinct, for nargs arguments and flags. */
static struct nv_am_hdr sample(unsigned nargs, uint8_t flags)
{
    struct nv_am_hdr h;
    memset(&h, 0, sizeof h);
    h.flags = flags;
    h.handler = 0xa1b2;
    h.nargs = (uint8_t)nargs;
    h.status = NETVM_STATUS_COUNT - 1;
    h.credits = 0xc3d4;
    h.len = NV_AM_MAX_LEN - 5;
    for (unsigned i = 0; i < nargs; i++)
        h.args[i] = 0x0102030405060708ull * (i + 1) ^ 0xf0e0d0c0b0a09080ull;
    if (flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) {
        /* an origin not sent decodes as 0: the receiving core fills it in */
        h.token.origin = flags & NV_AMW_F_ORIGIN ? 0x8877665544332211ull : 0;
        h.token.call = 0xdeadbeefu;
        h.token.pindex = 1;
        h.token.key = 0x0badc0ffee0ddf00ull;
        h.token.pkey = nv_am_pkey(h.token.key);
    }
    return h;
}

static int same(const struct nv_am_hdr *a, const struct nv_am_hdr *b)
{
    if (a->flags != b->flags || a->handler != b->handler || a->nargs != b->nargs || a->status != b->status ||
        a->credits != b->credits || a->len != b->len)
        return 0;
    for (unsigned i = 0; i < NV_AM_MAX_ARGS; i++)
        if (a->args[i] != (i < a->nargs ? b->args[i] : 0) || b->args[i] != (i < b->nargs ? a->args[i] : 0))
            return 0;
    return a->token.origin == b->token.origin && a->token.call == b->token.call &&
           a->token.pindex == b->token.pindex && a->token.key == b->token.key && a->token.pkey == b->token.pkey;
}

/* Decoding buf (len bytes) must fail. */
static int rejected(const uint8_t *buf, size_t len)
{
    struct nv_am_hdr d;
    return nv_am_hdr_decode(buf, len, &d) == 0;
}

/* every shape a header takes */
static const uint8_t flag_sets[] = { 0, NV_AMW_F_TOKEN, NV_AMW_F_REPLY, NV_AMW_F_TOKEN | NV_AMW_F_ORIGIN,
                                     NV_AMW_F_REPLY | NV_AMW_F_ORIGIN };

static void round_trips(void)
{
    for (unsigned nargs = 0; nargs <= NV_AM_MAX_ARGS; nargs++) {
        for (size_t f = 0; f < sizeof flag_sets; f++) {
            struct nv_am_hdr h = sample(nargs, flag_sets[f]), d;
            size_t want = NV_AMW_FIXED + 8 * nargs + (flag_sets[f] ? NV_AMW_TOKEN_LEN : 0) +
                          (flag_sets[f] & NV_AMW_F_ORIGIN ? 8 : 0);
            CHECK(nv_am_hdr_len(&h) == want);
            CHECK(want <= NV_AM_HDR_MAX);
            uint8_t buf[NV_AM_HDR_MAX + 16];
            memset(buf, 0xee, sizeof buf);
            CHECK(nv_am_hdr_encode(&h, buf) == want);
            CHECK(buf[want] == 0xee);   /* nothing written past the header */
            /* the decoder overwrites every field, leftovers included */
            memset(&d, 0x5a, sizeof d);
            CHECK(nv_am_hdr_decode(buf, want, &d) == want);
            CHECK(same(&h, &d));
            for (unsigned i = nargs; i < NV_AM_MAX_ARGS; i++)
                CHECK(d.args[i] == 0);
            if (!flag_sets[f])
                CHECK(d.token.origin == 0 && d.token.call == 0 && d.token.pindex == 0 && d.token.key == 0 &&
                      d.token.pkey == 0);
            /* with the payload (or anything) after it: the header's length */
            CHECK(nv_am_hdr_decode(buf, sizeof buf, &d) == want);
            CHECK(same(&h, &d));
            /* a header longer than the buffer: truncated at every length */
            for (size_t n = 0; n < want; n++)
                CHECK(rejected(buf, n));

            /* the extremes of each field */
            h.handler = UINT16_MAX;
            h.status = 0;
            h.credits = UINT16_MAX;
            h.len = NV_AM_MAX_LEN;
            for (unsigned i = 0; i < nargs; i++)
                h.args[i] = i & 1 ? 0 : UINT64_MAX;
            if (flag_sets[f]) {
                h.token.pindex = 0;
                h.token.call = UINT32_MAX;
                h.token.key = UINT64_MAX;
                if (flag_sets[f] & NV_AMW_F_ORIGIN)
                    h.token.origin = UINT64_MAX;
                h.token.pkey = 0;   /* no payload token: none derived */
            }
            CHECK(nv_am_hdr_encode(&h, buf) == want);
            CHECK(nv_am_hdr_decode(buf, want, &d) == want && same(&h, &d));
            h.len = 0;
            CHECK(nv_am_hdr_encode(&h, buf) == want);
            CHECK(nv_am_hdr_decode(buf, want, &d) == want && same(&h, &d));
        }
    }
}

static void layout(void)
{
    /* six arguments and a token with its origin: every byte at its
     * documented offset */
    struct nv_am_hdr h = sample(NV_AM_MAX_ARGS, NV_AMW_F_TOKEN | NV_AMW_F_ORIGIN);
    uint8_t b[NV_AM_HDR_MAX];
    CHECK(nv_am_hdr_encode(&h, b) == NV_AM_HDR_MAX);
    CHECK(NV_AM_HDR_MAX == 12 + 48 + 8 + 12);
    CHECK(b[0] == NV_AM_VERSION && NV_AM_VERSION == 5);
    CHECK(b[1] == (NV_AMW_F_TOKEN | NV_AMW_F_ORIGIN | NV_AMW_F_PTOKEN));   /* pindex 1 is a flag */
    CHECK(b[2] == 0xb2 && b[3] == 0xa1);                                  /* handler */
    CHECK(b[4] == NV_AM_MAX_ARGS);                                        /* nargs */
    CHECK(b[5] == NETVM_STATUS_COUNT - 1);                                /* status */
    CHECK(b[6] == 0xd4 && b[7] == 0xc3);                                  /* credits */
    CHECK(nv_get32(b + 8) == NV_AM_MAX_LEN - 5);                         /* payload length */
    CHECK(b[8] == (uint8_t)(NV_AM_MAX_LEN - 5) && b[11] == 0x3f);
    for (unsigned i = 0; i < NV_AM_MAX_ARGS; i++) {
        CHECK(nv_get64(b + 12 + 8 * i) == h.args[i]);
        CHECK(b[12 + 8 * i] == (uint8_t)h.args[i] && b[19 + 8 * i] == (uint8_t)(h.args[i] >> 56));
    }
    const uint8_t *t = b + 12 + 8 * NV_AM_MAX_ARGS;
    CHECK(t[0] == 0x11 && t[7] == 0x88);                                  /* origin */
    CHECK(t[8] == 0xef && t[9] == 0xbe && t[10] == 0xad && t[11] == 0xde); /* call */
    CHECK(nv_get64(t + 12) == 0x0badc0ffee0ddf00ull && t[12] == 0x00 && t[19] == 0x0b); /* key */
    /* the payload key is not sent: derived from the call key, never 0 */
    CHECK(nv_am_pkey(0x0badc0ffee0ddf00ull) != 0);

    /* no arguments, a reply (its origin never sent): the call follows the
     * fixed part directly */
    h = sample(0, NV_AMW_F_REPLY);
    CHECK(nv_am_hdr_encode(&h, b) == NV_AMW_FIXED + NV_AMW_TOKEN_LEN);
    CHECK(b[1] == (NV_AMW_F_REPLY | NV_AMW_F_PTOKEN) && b[4] == 0);
    CHECK(nv_get32(b + 12) == h.token.call && nv_get64(b + 16) == h.token.key);
    /* without a payload token, no flag for it */
    h.token.pindex = 0;
    CHECK(nv_am_hdr_encode(&h, b) == NV_AMW_FIXED + NV_AMW_TOKEN_LEN && b[1] == NV_AMW_F_REPLY);
    /* an RPC call (its operation and one argument) and a reply with one
     * argument fit one shm ring slot with its 20 bytes of framing */
    h = sample(2, NV_AMW_F_TOKEN);
    CHECK(nv_am_hdr_encode(&h, b) == 40 && 20 + 40 <= 64);
    h = sample(1, NV_AMW_F_REPLY);
    CHECK(nv_am_hdr_encode(&h, b) == 32);
    /* two arguments, no token */
    h = sample(2, 0);
    CHECK(nv_am_hdr_encode(&h, b) == NV_AMW_FIXED + 16);
    CHECK(b[1] == 0 && nv_get64(b + 12) == h.args[0] && nv_get64(b + 20) == h.args[1]);
}

static void malformed(void)
{
    uint8_t good[NV_AM_HDR_MAX], b[NV_AM_HDR_MAX];
    struct nv_am_hdr h = sample(3, NV_AMW_F_TOKEN), d;
    size_t n = nv_am_hdr_encode(&h, good);
    CHECK(nv_am_hdr_decode(good, n, &d) == n);
    const size_t tok = NV_AMW_FIXED + 8 * 3;   /* the token's offset */

    /* version */
    static const uint8_t versions[] = { 0, 1, 2, 3, 4, 6, 0x85, 0xff };
    for (size_t i = 0; i < sizeof versions; i++) {
        memcpy(b, good, n);
        b[0] = versions[i];
        CHECK(rejected(b, n));
        CHECK(rejected(b, sizeof b));
    }
    /* unknown flags, each bit, alone and with a known one */
    for (unsigned bit = 4; bit < 8; bit++) {
        memcpy(b, good, n);
        b[1] = (uint8_t)(1u << bit);
        CHECK(rejected(b, sizeof b));
        b[1] = (uint8_t)(1u << bit | NV_AMW_F_TOKEN);
        CHECK(rejected(b, sizeof b));
        b[1] = (uint8_t)(1u << bit | NV_AMW_F_REPLY);
        CHECK(rejected(b, sizeof b));
    }
    /* a request and a reply at once */
    memcpy(b, good, n);
    b[1] = NV_AMW_F_TOKEN | NV_AMW_F_REPLY;
    CHECK(rejected(b, sizeof b));
    /* a token's flags without a token */
    static const uint8_t tokless[] = { NV_AMW_F_ORIGIN, NV_AMW_F_PTOKEN, NV_AMW_F_ORIGIN | NV_AMW_F_PTOKEN };
    for (size_t i = 0; i < sizeof tokless; i++) {
        memcpy(b, good, n);
        b[1] = tokless[i];
        CHECK(rejected(b, sizeof b));
    }
    /* too many arguments (with room for them all in the buffer) */
    static const uint8_t nargs[] = { NV_AM_MAX_ARGS + 1, 8, 0x80, 0xff };
    for (size_t i = 0; i < sizeof nargs; i++) {
        uint8_t big[1024] = { 0 };
        memcpy(big, good, n);
        big[4] = nargs[i];
        big[1] = 0;
        CHECK(rejected(big, sizeof big));
    }
    /* status out of range */
    for (unsigned st = NETVM_STATUS_COUNT; st < 256; st++) {
        memcpy(b, good, n);
        b[5] = (uint8_t)st;
        CHECK(rejected(b, n));
    }
    memcpy(b, good, n);
    b[5] = NETVM_STATUS_COUNT - 1;
    CHECK(nv_am_hdr_decode(b, n, &d) == n);
    /* payload longer than an active message may be */
    static const uint32_t lens[] = { NV_AM_MAX_LEN + 1, NV_AM_MAX_LEN << 1, 1u << 31, UINT32_MAX };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        memcpy(b, good, n);
        nv_put32(b + 8, lens[i]);
        CHECK(rejected(b, n));
    }
    memcpy(b, good, n);
    nv_put32(b + 8, NV_AM_MAX_LEN);
    CHECK(nv_am_hdr_decode(b, n, &d) == n && d.len == NV_AM_MAX_LEN);
    /* the payload token: a flag, decoded into pindex and off the flags */
    for (uint32_t p = 0; p <= 1; p++) {
        memcpy(b, good, n);
        b[1] = (uint8_t)(NV_AMW_F_TOKEN | (p ? NV_AMW_F_PTOKEN : 0));
        CHECK(nv_am_hdr_decode(b, n, &d) == n && d.token.pindex == p && d.flags == NV_AMW_F_TOKEN);
        CHECK(d.token.pkey == (p ? nv_am_pkey(d.token.key) : 0));
    }
    /* without a token flag the same bytes are arguments' and payload's,
     * not a token */
    memcpy(b, good, n);
    b[1] = 0;
    CHECK(nv_am_hdr_decode(b, n, &d) == tok && d.token.pindex == 0 && d.token.key == 0);
    /* truncated at every length below the whole header, for every shape */
    for (unsigned k = 0; k <= NV_AM_MAX_ARGS; k++) {
        for (size_t f = 0; f < sizeof flag_sets; f++) {
            struct nv_am_hdr s = sample(k, flag_sets[f]);
            size_t m = nv_am_hdr_encode(&s, b);
            for (size_t cut = 0; cut < m; cut++)
                CHECK(rejected(b, cut));
            CHECK(nv_am_hdr_decode(b, m, &d) == m);
        }
    }
}

static void random_inputs(void)
{
    long decoded = 0, with_token = 0;
    for (int it = 0; it < 100000; it++) {
        uint8_t in[NV_AM_HDR_MAX + 16], out[NV_AM_HDR_MAX];   /* a multiple of 8: filled by words */
        for (size_t i = 0; i < sizeof in; i += 8)
            nv_put64(in + i, next());
        /* three inputs in four get plausible fields, so many decode and
         * the later checks see more than the first bytes */
        uint64_t r = next();
        if (r % 4) {
            in[0] = (r >> 8) % 16 ? NV_AM_VERSION : (uint8_t)(r >> 16);
            if ((r >> 24) % 8)
                in[1] &= (r >> 27) % 8 ? NV_AMW_F_ALL : 0xff;
            if ((r >> 30) % 8)
                in[4] = (uint8_t)(in[4] % (NV_AM_MAX_ARGS + 2));
            if ((r >> 33) % 8)
                in[5] = (uint8_t)(in[5] % (NETVM_STATUS_COUNT + 1));
            if ((r >> 39) % 8)
                nv_put32(in + 8, nv_get32(in + 8) % (NV_AM_MAX_LEN + 2));
        }
        size_t len = (size_t)(next() % (sizeof in + 1));
        struct nv_am_hdr h, h2;
        memset(&h, 0, sizeof h);
        size_t n = nv_am_hdr_decode(in, len, &h);
        if (!n)
            continue;
        decoded++;
        with_token += (h.flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) != 0;
        CHECK(n <= len && n <= NV_AM_HDR_MAX && n == nv_am_hdr_len(&h));
        CHECK(!(h.flags & ~(NV_AMW_F_ALL & ~NV_AMW_F_PTOKEN)));
        CHECK((h.flags & (NV_AMW_F_TOKEN | NV_AMW_F_REPLY)) != (NV_AMW_F_TOKEN | NV_AMW_F_REPLY));
        CHECK(h.nargs <= NV_AM_MAX_ARGS && h.status < NETVM_STATUS_COUNT && h.len <= NV_AM_MAX_LEN);
        CHECK(h.token.pindex <= 1);
        memset(out, 0, sizeof out);
        CHECK(nv_am_hdr_encode(&h, out) == n);
        CHECK(memcmp(in, out, n) == 0);
        CHECK(nv_am_hdr_decode(out, n, &h2) == n && same(&h, &h2));
    }
    /* the generator does reach the decoder's end, with and without tokens */
    CHECK(decoded > 5000 && with_token > 1000 && decoded - with_token > 1000);
}

int main(void)
{
    round_trips();
    layout();
    malformed();
    random_inputs();
    return 0;
}
