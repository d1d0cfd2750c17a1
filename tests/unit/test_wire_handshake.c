/* The tcp handshake's payloads (wire/handshake.h): HELLO, AUTH and WELCOME
 * round trips and every rejection; the tcp frame header v2 (wire/
 * tcp_frame.h): layout, the kinds' payload lengths, the flag rules and the
 * trailer; SipHash-2-4 (util/siphash.h) against the reference vectors of
 * the SipHash paper. */
#include "check.h"
#include "util/siphash.h"
#include "wire/endian.h"
#include "wire/handshake.h"
#include "wire/tcp_frame.h"

#include <string.h>

/* --- HELLO ----------------------------------------------------------------------------- */

static struct nv_hs_hello hello_sample(uint32_t purpose, int32_t rank)
{
    struct nv_hs_hello h;
    memset(&h, 0, sizeof h);
    h.proto = NV_HS_PROTO;
    h.purpose = purpose;
    h.uuid = 0x0123456789abcdefull;
    h.job_hash = purpose == NV_HS_JOB ? 0xfedcba9876543210ull : 0;
    h.rank = rank;
    h.flags = 0;
    h.host_id = 0x1122334455667788ull;
    for (int i = 0; i < NV_HS_NONCE_LEN; i++)
        h.nonce[i] = (uint8_t)(0xa0 + i);
    return h;
}

static int hello_same(const struct nv_hs_hello *a, const struct nv_hs_hello *b)
{
    return a->proto == b->proto && a->purpose == b->purpose && a->uuid == b->uuid &&
           a->job_hash == b->job_hash && a->rank == b->rank && a->flags == b->flags &&
           a->host_id == b->host_id && memcmp(a->nonce, b->nonce, NV_HS_NONCE_LEN) == 0;
}

static int hello_rejected(const struct nv_hs_hello *h)
{
    uint8_t b[NV_HS_HELLO_LEN];
    struct nv_hs_hello d;
    nv_hs_hello_encode(h, b);
    return nv_hs_hello_decode(b, sizeof b, &d) == -1;
}

static void hello(void)
{
    static const int32_t job_ranks[] = { 0, 1, 4095, INT32_MAX };
    uint8_t b[NV_HS_HELLO_LEN + 1];
    struct nv_hs_hello h, d;
    for (size_t i = 0; i < sizeof job_ranks / sizeof job_ranks[0]; i++) {
        h = hello_sample(NV_HS_JOB, job_ranks[i]);
        nv_hs_hello_encode(&h, b);
        memset(&d, 0x5a, sizeof d);
        CHECK(nv_hs_hello_decode(b, NV_HS_HELLO_LEN, &d) == 0 && hello_same(&h, &d));
    }
    h = hello_sample(NV_HS_SERVICE, -1);
    nv_hs_hello_encode(&h, b);
    CHECK(nv_hs_hello_decode(b, NV_HS_HELLO_LEN, &d) == 0 && hello_same(&h, &d));

    /* layout */
    CHECK(NV_HS_HELLO_LEN == 72);
    h = hello_sample(NV_HS_JOB, 0x01020304);
    nv_hs_hello_encode(&h, b);
    CHECK(nv_get32(b) == NV_HS_PROTO && b[0] == NV_HS_PROTO && b[3] == 0);
    CHECK(nv_get32(b + 4) == NV_HS_JOB);
    CHECK(b[8] == 0xef && b[15] == 0x01);          /* uuid */
    CHECK(b[16] == 0x10 && b[23] == 0xfe);         /* job hash */
    CHECK(b[24] == 0x04 && b[27] == 0x01);         /* rank */
    CHECK(nv_get32(b + 28) == 0);                  /* flags */
    CHECK(b[32] == 0x88 && b[39] == 0x11);         /* host id */
    CHECK(b[40] == 0xa0 && b[71] == 0xa0 + 31);    /* nonce */
    h = hello_sample(NV_HS_SERVICE, -1);
    nv_hs_hello_encode(&h, b);
    CHECK(nv_get32(b + 24) == UINT32_MAX);         /* rank -1, two's complement */

    /* proto */
    static const uint32_t protos[] = { 0, 1, 3, 0x102, UINT32_MAX };
    for (size_t i = 0; i < sizeof protos / sizeof protos[0]; i++) {
        h = hello_sample(NV_HS_JOB, 0);
        h.proto = protos[i];
        CHECK(hello_rejected(&h));
    }
    /* purpose */
    static const uint32_t purposes[] = { 0, 3, 0x101, UINT32_MAX };
    for (size_t i = 0; i < sizeof purposes / sizeof purposes[0]; i++) {
        h = hello_sample(NV_HS_JOB, 0);
        h.purpose = purposes[i];
        CHECK(hello_rejected(&h));
        h.rank = -1;
        CHECK(hello_rejected(&h));
    }
    /* a JOB hello names a rank >= 0; a SERVICE one rank -1 */
    static const int32_t bad_job[] = { -1, -2, INT32_MIN };
    for (size_t i = 0; i < sizeof bad_job / sizeof bad_job[0]; i++) {
        h = hello_sample(NV_HS_JOB, bad_job[i]);
        CHECK(hello_rejected(&h));
    }
    static const int32_t bad_service[] = { 0, 1, -2, INT32_MIN, INT32_MAX };
    for (size_t i = 0; i < sizeof bad_service / sizeof bad_service[0]; i++) {
        h = hello_sample(NV_HS_SERVICE, bad_service[i]);
        CHECK(hello_rejected(&h));
    }
    /* flags are reserved */
    for (unsigned bit = 0; bit < 32; bit++) {
        h = hello_sample(NV_HS_JOB, 0);
        h.flags = 1u << bit;
        CHECK(hello_rejected(&h));
        h = hello_sample(NV_HS_SERVICE, -1);
        h.flags = 1u << bit;
        CHECK(hello_rejected(&h));
    }
    /* exactly 72 bytes, not fewer, not more */
    h = hello_sample(NV_HS_JOB, 3);
    nv_hs_hello_encode(&h, b);
    b[NV_HS_HELLO_LEN] = 0;
    for (size_t n = 0; n < NV_HS_HELLO_LEN; n++)
        CHECK(nv_hs_hello_decode(b, n, &d) == -1);
    CHECK(nv_hs_hello_decode(b, NV_HS_HELLO_LEN + 1, &d) == -1);
    CHECK(nv_hs_hello_decode(b, NV_HS_HELLO_LEN, &d) == 0);
}

/* --- AUTH ------------------------------------------------------------------------------ */

static struct nv_hs_auth auth_sample(uint32_t card_len)
{
    struct nv_hs_auth a;
    memset(&a, 0, sizeof a);
    for (int i = 0; i < NV_HS_MAC_LEN; i++)
        a.mac[i] = (uint8_t)(0x40 + i);
    a.peer_id = 0x0a0b0c0du;
    a.card_len = card_len;
    for (uint32_t i = 0; i < card_len; i++)
        a.card[i] = (uint8_t)(0xc0 ^ i);
    return a;
}

static void auth(void)
{
    uint8_t b[40 + NV_HS_CARD_MAX + 8];
    struct nv_hs_auth a, d;
    for (uint32_t card = 0; card <= NV_HS_CARD_MAX; card++) {
        a = auth_sample(card);
        memset(b, 0xee, sizeof b);
        size_t n = nv_hs_auth_encode(&a, b);
        CHECK(n == 40 + card && b[n] == 0xee);
        memset(&d, 0x5a, sizeof d);
        CHECK(nv_hs_auth_decode(b, n, &d) == 0);
        CHECK(memcmp(d.mac, a.mac, NV_HS_MAC_LEN) == 0 && d.peer_id == a.peer_id && d.card_len == card);
        CHECK(memcmp(d.card, a.card, card) == 0);
        /* the length must be exactly 40 + card_len */
        for (size_t m = 0; m < sizeof b; m++)
            if (m != n)
                CHECK(nv_hs_auth_decode(b, m, &d) == -1);
    }
    /* layout */
    a = auth_sample(3);
    CHECK(nv_hs_auth_encode(&a, b) == 43);
    CHECK(b[0] == 0x40 && b[31] == 0x40 + 31);
    CHECK(b[32] == 0x0d && b[35] == 0x0a);         /* peer id */
    CHECK(nv_get32(b + 36) == 3);                  /* card length */
    CHECK(b[40] == 0xc0 && b[42] == 0xc2);
    /* an acceptor's AUTH: a proof only */
    a = auth_sample(0);
    a.peer_id = 0;
    CHECK(nv_hs_auth_encode(&a, b) == 40);
    CHECK(nv_hs_auth_decode(b, 40, &d) == 0 && d.card_len == 0 && d.peer_id == 0);
    /* a card longer than NV_HS_CARD_MAX, whatever the length given */
    static uint8_t big[40 + 4096];
    a = auth_sample(NV_HS_CARD_MAX);
    nv_hs_auth_encode(&a, big);
    static const uint32_t too_long[] = { NV_HS_CARD_MAX + 1, NV_HS_CARD_MAX + 8, 4096, 0x80000000u, UINT32_MAX };
    for (size_t i = 0; i < sizeof too_long / sizeof too_long[0]; i++) {
        nv_put32(big + 36, too_long[i]);
        CHECK(nv_hs_auth_decode(big, sizeof big, &d) == -1);
        if (too_long[i] <= 4096)
            CHECK(nv_hs_auth_decode(big, 40 + (size_t)too_long[i], &d) == -1);
        CHECK(nv_hs_auth_decode(big, 40 + NV_HS_CARD_MAX, &d) == -1);
    }
}

/* --- WELCOME --------------------------------------------------------------------------- */

static struct nv_hs_welcome welcome_sample(uint32_t link, uint32_t card_len)
{
    struct nv_hs_welcome w;
    memset(&w, 0, sizeof w);
    w.peer_id = 0x31323334u;
    w.link = link;
    w.card_len = card_len;
    for (uint32_t i = 0; i < card_len; i++)
        w.card[i] = (uint8_t)(0x77 + 3 * i);
    return w;
}

static void welcome(void)
{
    uint8_t b[16 + NV_HS_CARD_MAX + 8];
    struct nv_hs_welcome w, d;
    for (uint32_t link = NV_HS_LINK_TCP; link <= NV_HS_LINK_UPGRADE; link++) {
        for (uint32_t card = link == NV_HS_LINK_UPGRADE; card <= NV_HS_CARD_MAX; card++) {
            w = welcome_sample(link, card);
            memset(b, 0xee, sizeof b);
            size_t n = nv_hs_welcome_encode(&w, b);
            CHECK(n == 16 + card && b[n] == 0xee);
            memset(&d, 0x5a, sizeof d);
            CHECK(nv_hs_welcome_decode(b, n, &d) == 0);
            CHECK(d.peer_id == w.peer_id && d.link == link && d.card_len == card);
            CHECK(memcmp(d.card, w.card, card) == 0);
            for (size_t m = 0; m < sizeof b; m++)
                if (m != n)
                    CHECK(nv_hs_welcome_decode(b, m, &d) == -1);
        }
    }
    /* layout */
    w = welcome_sample(NV_HS_LINK_UPGRADE, 2);
    CHECK(nv_hs_welcome_encode(&w, b) == 18);
    CHECK(b[0] == 0x34 && b[3] == 0x31);           /* peer id */
    CHECK(nv_get32(b + 4) == NV_HS_LINK_UPGRADE);
    CHECK(nv_get32(b + 8) == 2);
    CHECK(nv_get32(b + 12) == 0);                  /* pad */
    CHECK(b[16] == 0x77 && b[17] == 0x7a);
    /* the link is TCP or UPGRADE */
    static const uint32_t links[] = { 2, 3, 0x100, UINT32_MAX };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++) {
        w = welcome_sample(links[i], 4);
        size_t n = nv_hs_welcome_encode(&w, b);
        CHECK(nv_hs_welcome_decode(b, n, &d) == -1);
        w.card_len = 0;
        n = nv_hs_welcome_encode(&w, b);
        CHECK(nv_hs_welcome_decode(b, n, &d) == -1);
    }
    /* moving to another link needs the acceptor's card */
    w = welcome_sample(NV_HS_LINK_UPGRADE, 0);
    CHECK(nv_hs_welcome_encode(&w, b) == 16);
    CHECK(nv_hs_welcome_decode(b, 16, &d) == -1);
    /* the pad is zero */
    for (unsigned i = 12; i < 16; i++) {
        w = welcome_sample(NV_HS_LINK_TCP, 0);
        nv_hs_welcome_encode(&w, b);
        b[i] = 1;
        CHECK(nv_hs_welcome_decode(b, 16, &d) == -1);
    }
    /* a card longer than NV_HS_CARD_MAX */
    static uint8_t big[16 + 4096];
    w = welcome_sample(NV_HS_LINK_UPGRADE, NV_HS_CARD_MAX);
    nv_hs_welcome_encode(&w, big);
    static const uint32_t too_long[] = { NV_HS_CARD_MAX + 1, 4096, UINT32_MAX };
    for (size_t i = 0; i < sizeof too_long / sizeof too_long[0]; i++) {
        nv_put32(big + 8, too_long[i]);
        CHECK(nv_hs_welcome_decode(big, sizeof big, &d) == -1);
        if (too_long[i] <= 4096)
            CHECK(nv_hs_welcome_decode(big, 16 + (size_t)too_long[i], &d) == -1);
    }
}

/* --- tcp frame header v2 --------------------------------------------------------------- */

static int is_hs(unsigned k) { return k == NV_TCP_HELLO || k == NV_TCP_AUTH || k == NV_TCP_WELCOME; }
static int is_xfer(unsigned k) { return k == NV_TCP_PUT || k == NV_TCP_GET || k == NV_TCP_GET_RESP; }

/* A length every kind accepts. */
static uint64_t ok_len(unsigned k) { return is_hs(k) || k == NV_TCP_AM ? 1 : 0; }

static int frame_rejected(const struct nv_tcp_hdr *h)
{
    uint8_t b[NV_TCP_HDR_LEN];
    struct nv_tcp_hdr d;
    const char *why = NULL;
    nv_tcp_hdr_encode(h, b);
    int rc = nv_tcp_hdr_decode(b, sizeof b, &d, &why);
    if (rc == -1)
        CHECK(why && *why);   /* every refusal says why */
    CHECK(rc == -1 || rc == 0);
    return rc == -1;
}

static void frame(void)
{
    uint8_t b[NV_TCP_HDR_LEN + 8];
    struct nv_tcp_hdr h, d;
    CHECK(NV_TCP_HDR_LEN == 56 && NV_TCP_VERSION == 3 && NV_TCP_KIND_END == 14);

    /* every kind round-trips with the length it allows */
    for (unsigned k = NV_TCP_HELLO; k < NV_TCP_KIND_END; k++) {
        memset(&h, 0, sizeof h);
        h = (struct nv_tcp_hdr){ .kind = (uint8_t)k, .status = NETVM_STATUS_COUNT - 1, .req_id = 0xa0a1a2a3u,
                                 .slot = 0xb0b1b2b3u, .key = 0x1011121314151617ull, .off = 0x2021222324252627ull,
                                 .len = ok_len(k), .operand = 0x3031323334353637ull };
        memset(b, 0xee, sizeof b);
        nv_tcp_hdr_encode(&h, b);
        CHECK(b[NV_TCP_HDR_LEN] == 0xee);
        memset(&d, 0x5a, sizeof d);
        const char *why = NULL;
        CHECK(nv_tcp_hdr_decode(b, NV_TCP_HDR_LEN, &d, &why) == 0);
        CHECK(d.kind == k && d.status == h.status && d.flags == 0 && d.req_id == h.req_id && d.slot == h.slot);
        CHECK(d.key == h.key && d.off == h.off && d.len == h.len && d.operand == h.operand);
        CHECK(nv_tcp_hdr_decode(b, sizeof b, &d, NULL) == 0);   /* the payload may follow */
        for (size_t n = 0; n < NV_TCP_HDR_LEN; n++)
            CHECK(nv_tcp_hdr_decode(b, n, &d, &why) == -1 && why);
    }
    /* layout */
    h = (struct nv_tcp_hdr){ .kind = NV_TCP_PUT, .status = NETVM_ERR_AUTH,
                             .flags = NV_TCP_F_ACK | NV_TCP_F_NOTIFY | NV_TCP_F_TRAILER, .req_id = 0xa0a1a2a3u,
                             .slot = 0xb0b1b2b3u, .key = 0x1011121314151617ull, .off = 0x2021222324252627ull,
                             .len = 0x3fffffff, .operand = 0x3031323334353637ull };
    nv_tcp_hdr_encode(&h, b);
    CHECK(b[0] == NV_TCP_VERSION && b[1] == NV_TCP_PUT);
    CHECK(nv_get16(b + 2) == h.status && b[3] == 0);
    CHECK(b[4] == 7 && b[5] == 0 && b[6] == 0 && b[7] == 0);
    CHECK(b[8] == 0xa3 && b[11] == 0xa0);          /* req id */
    CHECK(b[12] == 0xb3 && b[15] == 0xb0);         /* slot */
    CHECK(b[16] == 0x17 && b[23] == 0x10);         /* key */
    CHECK(b[24] == 0x27 && b[31] == 0x20);         /* off */
    CHECK(nv_get64(b + 32) == 0x3fffffff && b[35] == 0x3f && b[36] == 0); /* len */
    CHECK(b[40] == 0x37 && b[47] == 0x30);         /* operand */
    for (int i = 48; i < 56; i++)
        CHECK(b[i] == 0);
    CHECK(nv_tcp_hdr_decode(b, NV_TCP_HDR_LEN, &d, NULL) == 0 && d.flags == h.flags);

    /* version, kind, status */
    const char *why;
    for (unsigned v = 0; v < 256; v++) {
        if (v == NV_TCP_VERSION)
            continue;
        b[0] = (uint8_t)v;
        why = NULL;
        CHECK(nv_tcp_hdr_decode(b, NV_TCP_HDR_LEN, &d, &why) == -1 && why);
    }
    static const unsigned kinds[] = { 0, NV_TCP_KIND_END, NV_TCP_KIND_END + 1, 0x80, 0xff };
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        h = (struct nv_tcp_hdr){ .kind = (uint8_t)kinds[i] };
        CHECK(frame_rejected(&h));
    }
    for (unsigned st = NETVM_STATUS_COUNT; st < 0x10000; st += st < 64 ? 1 : 997) {
        h = (struct nv_tcp_hdr){ .kind = NV_TCP_FLUSH_ACK, .status = (uint16_t)st };
        CHECK(frame_rejected(&h));
    }
    h = (struct nv_tcp_hdr){ .kind = NV_TCP_FLUSH_ACK, .status = UINT16_MAX };
    CHECK(frame_rejected(&h));

    /* flags: unknown bits everywhere; TRAILER only on PUT, GET_RESP, AM;
     * ACK and NOTIFY only on PUT and GET; GATE only on a PUT without NOTIFY;
     * QUIET only on a PUT without ACK or GATE */
    for (unsigned k = NV_TCP_HELLO; k < NV_TCP_KIND_END; k++) {
        for (unsigned bit = 5; bit < 16; bit++) {
            h = (struct nv_tcp_hdr){ .kind = (uint8_t)k, .flags = (uint16_t)(1u << bit), .len = ok_len(k) };
            CHECK(frame_rejected(&h));
        }
        int trailer_ok = k == NV_TCP_PUT || k == NV_TCP_GET_RESP || k == NV_TCP_AM;
        int ack_ok = k == NV_TCP_PUT || k == NV_TCP_GET;
        h = (struct nv_tcp_hdr){ .kind = (uint8_t)k, .flags = NV_TCP_F_TRAILER, .len = ok_len(k) };
        CHECK(frame_rejected(&h) == !trailer_ok);
        h.flags = NV_TCP_F_ACK;
        CHECK(frame_rejected(&h) == !ack_ok);
        h.flags = NV_TCP_F_NOTIFY;
        CHECK(frame_rejected(&h) == !ack_ok);
        h.flags = NV_TCP_F_ACK | NV_TCP_F_NOTIFY;
        CHECK(frame_rejected(&h) == !ack_ok);
        h.flags = NV_TCP_F_ACK | NV_TCP_F_NOTIFY | NV_TCP_F_TRAILER;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));   /* all three: PUT only */
        h.flags = NV_TCP_F_TRAILER | NV_TCP_F_NOTIFY;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));
        h.flags = NV_TCP_F_GATE;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));
        h.flags = NV_TCP_F_GATE | NV_TCP_F_TRAILER | NV_TCP_F_ACK;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));
        h.flags = NV_TCP_F_GATE | NV_TCP_F_NOTIFY;
        CHECK(frame_rejected(&h));
        h.flags = NV_TCP_F_QUIET;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));
        h.flags = NV_TCP_F_QUIET | NV_TCP_F_TRAILER | NV_TCP_F_NOTIFY;
        CHECK(frame_rejected(&h) == (k != NV_TCP_PUT));
        h.flags = NV_TCP_F_QUIET | NV_TCP_F_ACK;
        CHECK(frame_rejected(&h));
        h.flags = NV_TCP_F_QUIET | NV_TCP_F_GATE;
        CHECK(frame_rejected(&h));
    }

    /* payload lengths per kind */
    for (unsigned k = NV_TCP_HELLO; k < NV_TCP_KIND_END; k++) {
        h = (struct nv_tcp_hdr){ .kind = (uint8_t)k };
        if (is_hs(k)) {
            h.len = 0;
            CHECK(frame_rejected(&h));
            h.len = 1;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == 1);
            h.len = NV_TCP_HS_MAX;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == NV_TCP_HS_MAX);
            h.len = NV_TCP_HS_MAX + 1;
            CHECK(frame_rejected(&h));
            h.len = UINT64_MAX;
            CHECK(frame_rejected(&h));
        } else if (k == NV_TCP_AM) {
            h.len = 0;
            CHECK(frame_rejected(&h));
            h.len = 1;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == 1);
            h.len = NV_TCP_AM_MAX;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == NV_TCP_AM_MAX);
            h.flags = NV_TCP_F_TRAILER;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == NV_TCP_AM_MAX);   /* trailer not included */
            h.len = NV_TCP_AM_MAX + 1;
            CHECK(frame_rejected(&h));
            h.len = UINT64_MAX;
            CHECK(frame_rejected(&h));
        } else if (is_xfer(k)) {
            h.len = 0;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == 0);
            h.len = NV_TCP_MAX_XFER;
            CHECK(!frame_rejected(&h));
            /* a PUT carries its bytes, a GET asks for them, a GET_RESP
             * carries them only when it succeeded */
            CHECK(nv_tcp_payload_len(&h) == (k == NV_TCP_GET ? 0 : NV_TCP_MAX_XFER));
            if (k == NV_TCP_GET_RESP) {
                h.status = NETVM_ERR_BOUNDS;
                CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == 0);
                h.status = NETVM_OK;
            }
            h.len = NV_TCP_MAX_XFER + 1;
            CHECK(frame_rejected(&h));
            h.len = UINT64_MAX;
            CHECK(frame_rejected(&h));
        } else {
            /* REFUSE, ATTACHED, PUT_ACK, FLUSH, FLUSH_ACK, BYE carry nothing */
            h.len = 0;
            h.status = NETVM_ERR_AUTH;
            CHECK(!frame_rejected(&h) && nv_tcp_payload_len(&h) == 0);
            h.len = 1;
            CHECK(frame_rejected(&h));
            h.len = 8;
            CHECK(frame_rejected(&h));
        }
    }

    /* the trailer: an 8-byte little-endian status */
    uint8_t t[NV_TCP_TRAILER_LEN];
    uint16_t st;
    CHECK(NV_TCP_TRAILER_LEN == 8);
    for (unsigned s = 0; s < NETVM_STATUS_COUNT; s++) {
        memset(t, 0xee, sizeof t);
        nv_tcp_trailer_encode((uint16_t)s, t);
        CHECK(nv_get64(t) == s && t[0] == s && t[7] == 0);
        st = 0xffff;
        CHECK(nv_tcp_trailer_decode(t, &st) == 0 && st == s);
    }
    static const uint64_t bad_trailers[] = { NETVM_STATUS_COUNT, 0xff, 0x10000, 1ull << 32, 1ull << 63,
                                             UINT64_MAX };
    for (size_t i = 0; i < sizeof bad_trailers / sizeof bad_trailers[0]; i++) {
        nv_put64(t, bad_trailers[i]);
        st = 0x1234;
        CHECK(nv_tcp_trailer_decode(t, &st) == -1 && st == 0x1234);
    }
    /* a known status in the low bits with anything above is still unknown */
    nv_put64(t, 0x10000ull | NETVM_ERR_FAULT);
    CHECK(nv_tcp_trailer_decode(t, &st) == -1);
    nv_put64(t, (1ull << 56) | NETVM_OK);
    CHECK(nv_tcp_trailer_decode(t, &st) == -1);
}

/* --- SipHash-2-4 ----------------------------------------------------------------------- */

/* The reference vectors (the SipHash paper's Appendix A and the reference
 * implementation's vectors.h, vectors_sip64): key 00 01 .. 0f, message
 * 00 01 .. (n-1) for n = 0..63, the 64-bit output read little-endian. */
static const uint64_t sip_vectors[64] = {
    0x726fdb47dd0e0e31ull, 0x74f839c593dc67fdull, 0x0d6c8009d9a94f5aull, 0x85676696d7fb7e2dull,
    0xcf2794e0277187b7ull, 0x18765564cd99a68dull, 0xcbc9466e58fee3ceull, 0xab0200f58b01d137ull,
    0x93f5f5799a932462ull, 0x9e0082df0ba9e4b0ull, 0x7a5dbbc594ddb9f3ull, 0xf4b32f46226bada7ull,
    0x751e8fbc860ee5fbull, 0x14ea5627c0843d90ull, 0xf723ca908e7af2eeull, 0xa129ca6149be45e5ull,
    0x3f2acc7f57c29bdbull, 0x699ae9f52cbe4794ull, 0x4bc1b3f0968dd39cull, 0xbb6dc91da77961bdull,
    0xbed65cf21aa2ee98ull, 0xd0f2cbb02e3b67c7ull, 0x93536795e3a33e88ull, 0xa80c038ccd5ccec8ull,
    0xb8ad50c6f649af94ull, 0xbce192de8a85b8eaull, 0x17d835b85bbb15f3ull, 0x2f2e6163076bcfadull,
    0xde4daaaca71dc9a5ull, 0xa6a2506687956571ull, 0xad87a3535c49ef28ull, 0x32d892fad841c342ull,
    0x7127512f72f27cceull, 0xa7f32346f95978e3ull, 0x12e0b01abb051238ull, 0x15e034d40fa197aeull,
    0x314dffbe0815a3b4ull, 0x027990f029623981ull, 0xcadcd4e59ef40c4dull, 0x9abfd8766a33735cull,
    0x0e3ea96b5304a7d0ull, 0xad0c42d6fc585992ull, 0x187306c89bc215a9ull, 0xd4a60abcf3792b95ull,
    0xf935451de4f21df2ull, 0xa9538f0419755787ull, 0xdb9acddff56ca510ull, 0xd06c98cd5c0975ebull,
    0xe612a3cb9ecba951ull, 0xc766e62cfcadaf96ull, 0xee64435a9752fe72ull, 0xa192d576b245165aull,
    0x0a8787bf8ecb74b2ull, 0x81b3e73d20b49b6full, 0x7fa8220ba3b2eceaull, 0x245731c13ca42499ull,
    0xb78dbfaf3a8d83bdull, 0xea1ad565322a1a0bull, 0x60e61c23a3795013ull, 0x6606d7e446282b93ull,
    0x6ca4ecb15c5f91e1ull, 0x9f626da15c9625f3ull, 0xe51b38608ef25f57ull, 0x958a324ceb064572ull,
};

static void siphash(void)
{
    uint8_t key[16], msg[64 + 8];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    /* the values the paper prints, whatever the table above says */
    CHECK(sip_vectors[0] == 0x726fdb47dd0e0e31ull && sip_vectors[1] == 0x74f839c593dc67fdull &&
          sip_vectors[15] == 0xa129ca6149be45e5ull);
    for (size_t n = 0; n < 64; n++) {
        uint64_t got = nv_siphash(key, msg, n);
        if (got != sip_vectors[n])
            FAILF("siphash of %zu bytes: %016llx, wanted %016llx", n, (unsigned long long)got,
                  (unsigned long long)sip_vectors[n]);
    }
    /* the input need not be aligned */
    uint8_t *odd = msg + 1;
    for (size_t n = 0; n < 64; n++) {
        memmove(odd, msg, 64);
        CHECK(nv_siphash(key, odd, n) == sip_vectors[n]);
        memmove(msg, odd, 64);
    }
    /* two words: the 16 bytes of a and b, little-endian */
    CHECK(nv_siphash2(key, 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull) == sip_vectors[16]);
    /* every key byte counts */
    for (int i = 0; i < 16; i++) {
        key[i] ^= 0x80;
        CHECK(nv_siphash(key, msg, 16) != sip_vectors[16]);
        key[i] ^= 0x80;
    }
}

int main(void)
{
    hello();
    auth();
    welcome();
    frame();
    siphash();
    return 0;
}
