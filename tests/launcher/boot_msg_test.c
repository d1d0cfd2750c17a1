/* Bootstrap frames: every type survives a round trip, and every way a frame
 * can be wrong (short, long, oversized, out-of-range fields, garbage) is
 * refused without reading past the buffer. */
#include "check.h"
#include "wire/boot_msg.h"
#include "wire/endian.h"

#include <stdlib.h>
#include <string.h>

static uint8_t secret[32];
static const char job[] = "1234-abcdef01";
static uint8_t gathered[4 * 100];

static struct nv_boot_msg sample(uint16_t type)
{
    struct nv_boot_msg m = { .type = type };
    switch (type) {
    case NV_BOOT_MSG_HELLO:
        m.u.hello.rank = 3;
        m.u.hello.size = 8;
        m.u.hello.auth = NV_BOOT_AUTH_SECRET;
        m.u.hello.job_id = job;
        m.u.hello.job_id_len = (uint16_t)strlen(job);
        m.u.hello.proof = secret;
        m.u.hello.proof_len = sizeof secret;
        break;
    case NV_BOOT_MSG_RESULT:
        m.u.result.status = NETVM_ERR_BOOT;
        m.u.result.dead_rank = -1;
        break;
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        m.u.result.count = 4;
        m.u.result.each = 100;
        m.u.result.data = gathered;
        /* fall through */
    case NV_BOOT_MSG_BARRIER_DONE:
        m.u.result.seq = 7;
        m.u.result.status = NETVM_ERR_PEER;
        m.u.result.dead_rank = 2;
        break;
    case NV_BOOT_MSG_ALLGATHER:
        m.u.coll.len = 100;
        m.u.coll.data = gathered;
        /* fall through */
    case NV_BOOT_MSG_BARRIER:
        m.u.coll.seq = 9;
        break;
    case NV_BOOT_MSG_CHALLENGE:
        m.u.challenge.nonce = secret;
        break;
    case NV_BOOT_MSG_NODE_HELLO:
        m.u.node_hello.node = 2;
        m.u.node_hello.nnodes = 3;
        m.u.node_hello.nlocal = 4;
        m.u.node_hello.flags = NV_BOOT_NODE_KEEP_GOING;
        m.u.node_hello.auth = NV_BOOT_AUTH_HMAC;
        m.u.node_hello.nonce = gathered;
        m.u.node_hello.proof = secret;
        m.u.node_hello.proof_len = sizeof secret;
        break;
    case NV_BOOT_MSG_WELCOME:
        m.u.welcome.status = NETVM_OK;
        m.u.welcome.job_id = job;
        m.u.welcome.job_id_len = (uint16_t)strlen(job);
        m.u.welcome.proof = secret;
        m.u.welcome.proof_len = sizeof secret;
        m.u.welcome.text = "welcome";
        m.u.welcome.text_len = 7;
        break;
    case NV_BOOT_MSG_ENTER:
        /* a barrier: its payload has exactly one length (an allgather's
         * contribution may have any, tested in enter_allgather) */
        m.u.coll.rank = 5;
        m.u.coll.seq = 11;
        m.u.coll.coll = NV_BOOT_MSG_BARRIER;
        break;
    case NV_BOOT_MSG_RANK_GONE:
        m.u.report.rank = 6;
        m.u.report.state = NV_BOOT_GONE_DEAD;
        break;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:
        m.u.report.rank = type == NV_BOOT_MSG_ABORT ? -1 : 7;
        m.u.report.node = 1;
        m.u.report.code = 137;
        m.u.report.text = "rank 7 (pid 1) on node 1 killed by signal 9 (Killed)";
        m.u.report.text_len = (uint16_t)strlen(m.u.report.text);
        break;
    case NV_BOOT_MSG_NODE_DONE:
        m.u.report.code = 3;
        break;
    }
    return m;
}

static void same(const struct nv_boot_msg *a, const struct nv_boot_msg *b)
{
    CHECK(a->type == b->type);
    switch (a->type) {
    case NV_BOOT_MSG_HELLO:
        CHECK(a->u.hello.rank == b->u.hello.rank && a->u.hello.size == b->u.hello.size);
        CHECK(a->u.hello.auth == b->u.hello.auth);
        CHECK(a->u.hello.job_id_len == b->u.hello.job_id_len);
        CHECK(!memcmp(a->u.hello.job_id, b->u.hello.job_id, a->u.hello.job_id_len));
        CHECK(a->u.hello.proof_len == b->u.hello.proof_len);
        CHECK(!memcmp(a->u.hello.proof, b->u.hello.proof, a->u.hello.proof_len));
        break;
    case NV_BOOT_MSG_RESULT:
    case NV_BOOT_MSG_BARRIER_DONE:
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        CHECK(a->u.result.seq == b->u.result.seq);
        CHECK(a->u.result.status == b->u.result.status);
        CHECK(a->u.result.dead_rank == b->u.result.dead_rank);
        CHECK(a->u.result.count == b->u.result.count && a->u.result.each == b->u.result.each);
        if (a->u.result.count && a->u.result.each)
            CHECK(!memcmp(a->u.result.data, b->u.result.data, a->u.result.count * a->u.result.each));
        break;
    case NV_BOOT_MSG_ALLGATHER:
    case NV_BOOT_MSG_BARRIER:
    case NV_BOOT_MSG_ENTER:
        CHECK(a->u.coll.seq == b->u.coll.seq && a->u.coll.len == b->u.coll.len);
        if (a->u.coll.len)
            CHECK(!memcmp(a->u.coll.data, b->u.coll.data, a->u.coll.len));
        CHECK(a->u.coll.rank == b->u.coll.rank && a->u.coll.coll == b->u.coll.coll);
        break;
    case NV_BOOT_MSG_CHALLENGE:
        CHECK(!memcmp(a->u.challenge.nonce, b->u.challenge.nonce, NV_BOOT_NONCE_LEN));
        break;
    case NV_BOOT_MSG_NODE_HELLO: {
        const typeof(a->u.node_hello) *x = &a->u.node_hello, *y = &b->u.node_hello;
        CHECK(x->node == y->node && x->nnodes == y->nnodes && x->nlocal == y->nlocal);
        CHECK(x->flags == y->flags && x->auth == y->auth && x->proof_len == y->proof_len);
        CHECK(!memcmp(x->nonce, y->nonce, NV_BOOT_NONCE_LEN));
        CHECK(!memcmp(x->proof, y->proof, x->proof_len));
        break;
    }
    case NV_BOOT_MSG_WELCOME: {
        const typeof(a->u.welcome) *x = &a->u.welcome, *y = &b->u.welcome;
        CHECK(x->status == y->status && x->job_id_len == y->job_id_len);
        CHECK(x->proof_len == y->proof_len && x->text_len == y->text_len);
        CHECK(!memcmp(x->job_id, y->job_id, x->job_id_len));
        CHECK(!memcmp(x->proof, y->proof, x->proof_len));
        CHECK(!memcmp(x->text, y->text, x->text_len));
        break;
    }
    case NV_BOOT_MSG_RANK_GONE:
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:
    case NV_BOOT_MSG_NODE_DONE: {
        const typeof(a->u.report) *x = &a->u.report, *y = &b->u.report;
        CHECK(x->rank == y->rank && x->node == y->node && x->code == y->code);
        CHECK(x->state == y->state && x->text_len == y->text_len);
        CHECK(!x->text_len || !memcmp(x->text, y->text, x->text_len));
        break;
    }
    }
}

/* Encode into an exactly-sized heap buffer, so ASan catches any read past
 * its end during decoding. */
static uint8_t *encode(const struct nv_boot_msg *m, size_t *len)
{
    *len = nv_boot_msg_size(m);
    CHECK(*len >= NV_BOOT_HDR_LEN);
    uint8_t *buf = malloc(*len);
    CHECK(buf);
    CHECK(nv_boot_msg_encode(m, buf, *len) == *len);
    CHECK(nv_boot_msg_encode(m, buf, *len - 1) == 0);   /* too small: refused, not truncated */
    return buf;
}

static void round_trips(void)
{
    for (uint16_t t = NV_BOOT_MSG_HELLO; t < NV_BOOT_MSG_TYPE_END; t++) {
        struct nv_boot_msg m = sample(t), d;
        size_t len, flen;
        const char *why = NULL;
        uint8_t *buf = encode(&m, &len);
        CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_OK);
        CHECK(flen == len);
        same(&m, &d);
        /* every proper prefix is "more", never a message */
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf, cut);
            CHECK(nv_boot_frame_decode(p, cut, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_MORE);
            free(p);
        }
        /* the payload alone, cut short or with a byte too many, is malformed */
        size_t plen = len - NV_BOOT_HDR_LEN;
        for (size_t cut = 0; cut < plen; cut++) {
            if (t == NV_BOOT_MSG_ALLGATHER && cut >= 4)
                continue;      /* a shorter contribution is still a contribution */
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, buf + NV_BOOT_HDR_LEN, cut);
            CHECK(nv_boot_payload_decode(t, p, cut, &d, &why) == NV_BOOT_RC_BAD);
            free(p);
        }
        if (t != NV_BOOT_MSG_ALLGATHER) {
            uint8_t *p = malloc(plen + 1);
            memcpy(p, buf + NV_BOOT_HDR_LEN, plen);
            p[plen] = 0;
            CHECK(nv_boot_payload_decode(t, p, plen + 1, &d, &why) == NV_BOOT_RC_BAD);
            free(p);
        }
        free(buf);
    }
}

static void bad_headers(void)
{
    struct nv_boot_msg m = sample(NV_BOOT_MSG_BARRIER), d;
    size_t len, flen;
    const char *why;
    uint8_t *buf = encode(&m, &len);

    /* wrong magic is refused from its first byte */
    buf[0] ^= 0xff;
    CHECK(nv_boot_frame_decode(buf, 1, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    buf[0] ^= 0xff;
    nv_put16(buf + 4, NV_BOOT_VERSION + 1);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    nv_put16(buf + 4, NV_BOOT_VERSION);
    nv_put16(buf + 6, 0);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    nv_put16(buf + 6, NV_BOOT_MSG_TYPE_END);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    nv_put16(buf + 6, NV_BOOT_MSG_BARRIER);

    /* oversized: above the absolute bound, and above a caller's bound */
    nv_put32(buf + 8, NV_BOOT_MAX_PAYLOAD + 1);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    nv_put32(buf + 8, 0xffffffffu);
    CHECK(nv_boot_frame_decode(buf, len, 0xffffffffu, &d, &flen, &why) == NV_BOOT_RC_BAD);
    nv_put32(buf + 8, NV_BOOT_HELLO_MAX + 1);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_HELLO_MAX, &d, &flen, &why) == NV_BOOT_RC_BAD);
    /* a declared length longer than what arrived is "more", with the size needed */
    nv_put32(buf + 8, 100);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_MORE);
    CHECK(flen == NV_BOOT_HDR_LEN + 100);
    free(buf);

    CHECK(nv_boot_frame_decode(NULL, 0, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_BAD);
    const char *text = "GET / HTTP/1.1\r\n\r\n";
    CHECK(nv_boot_frame_decode((const uint8_t *)text, strlen(text), NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) ==
          NV_BOOT_RC_BAD);
}

/* Fields that decode structurally but are out of range. */
static void bad_fields(void)
{
    struct nv_boot_msg d;
    const char *why;
    uint8_t *buf;
    size_t len;

    struct nv_boot_msg h = sample(NV_BOOT_MSG_HELLO);
    buf = encode(&h, &len);
    uint8_t *p = buf + NV_BOOT_HDR_LEN;
    size_t plen = len - NV_BOOT_HDR_LEN;
    struct { size_t off; int bytes; uint32_t value; } cases[] = {
        { 0, 4, 8 },            /* rank == size */
        { 0, 4, 0xffffffffu },  /* rank -1 */
        { 4, 4, 0 },            /* size 0 */
        { 4, 4, (uint32_t)NV_BOOT_MAX_RANKS + 1 },
        { 8, 2, 0 },            /* no auth scheme */
        { 8, 2, NV_BOOT_AUTH_END },
        { 10, 2, 0 },           /* empty job id */
        { 10, 2, NV_BOOT_JOB_ID_MAX + 1 },
        { 12, 2, NV_BOOT_PROOF_MAX + 1 },
        { 14, 2, 1 },           /* reserved */
        { 16, 1, '/' },         /* a job id character outside the alphabet */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *q = malloc(plen);
        memcpy(q, p, plen);
        if (cases[i].bytes == 4)
            nv_put32(q + cases[i].off, cases[i].value);
        else if (cases[i].bytes == 2)
            nv_put16(q + cases[i].off, (uint16_t)cases[i].value);
        else
            q[cases[i].off] = (uint8_t)cases[i].value;
        CHECK(nv_boot_payload_decode(NV_BOOT_MSG_HELLO, q, plen, &d, &why) == NV_BOOT_RC_BAD);
        free(q);
    }
    free(buf);

    struct nv_boot_msg r = sample(NV_BOOT_MSG_BARRIER_DONE);
    buf = encode(&r, &len);
    p = buf + NV_BOOT_HDR_LEN;
    nv_put32(p + 4, NETVM_STATUS_COUNT);
    CHECK(nv_boot_payload_decode(NV_BOOT_MSG_BARRIER_DONE, p, len - NV_BOOT_HDR_LEN, &d, &why) == NV_BOOT_RC_BAD);
    nv_put32(p + 4, NETVM_OK);
    nv_put32(p + 8, (uint32_t)-2);
    CHECK(nv_boot_payload_decode(NV_BOOT_MSG_BARRIER_DONE, p, len - NV_BOOT_HDR_LEN, &d, &why) == NV_BOOT_RC_BAD);
    nv_put32(p + 8, (uint32_t)-1);
    nv_put32(p, 0);
    CHECK(nv_boot_payload_decode(NV_BOOT_MSG_BARRIER_DONE, p, len - NV_BOOT_HDR_LEN, &d, &why) == NV_BOOT_RC_BAD);
    free(buf);

    /* count*each chosen to wrap 32 bits into the real length must not pass */
    struct nv_boot_msg g = sample(NV_BOOT_MSG_ALLGATHER_RESULT);
    buf = encode(&g, &len);
    p = buf + NV_BOOT_HDR_LEN;
    nv_put32(p + 12, 0x10000u);
    nv_put32(p + 16, 0x10000u + 0);     /* 2^32: wraps to 0 in 32 bits */
    CHECK(nv_boot_payload_decode(NV_BOOT_MSG_ALLGATHER_RESULT, p, 20, &d, &why) == NV_BOOT_RC_BAD);
    nv_put32(p + 12, 5);                /* claims more data than present */
    nv_put32(p + 16, 100);
    CHECK(nv_boot_payload_decode(NV_BOOT_MSG_ALLGATHER_RESULT, p, len - NV_BOOT_HDR_LEN, &d, &why) == NV_BOOT_RC_BAD);
    free(buf);

    /* the encoder refuses what the decoder would refuse */
    struct nv_boot_msg e = sample(NV_BOOT_MSG_HELLO);
    e.u.hello.rank = 8;
    CHECK(nv_boot_msg_size(&e) == 0);
    e = sample(NV_BOOT_MSG_ALLGATHER_RESULT);
    e.u.result.count = 1 << 12;
    e.u.result.each = 1 << 12;          /* 16 MiB of data + header: above the bound */
    CHECK(nv_boot_msg_size(&e) == 0);
    e = sample(NV_BOOT_MSG_RESULT);
    e.u.result.status = NETVM_STATUS_COUNT;
    CHECK(nv_boot_msg_size(&e) == 0);
    e.type = 0;
    CHECK(nv_boot_msg_size(&e) == 0);
    CHECK(nv_boot_msg_size(NULL) == 0);
}

/* Change one field of a valid payload of type t (at off, 1, 2 or 4 bytes)
 * and expect the decoder to refuse it. */
static void refuse_field(uint16_t t, size_t off, int bytes, uint32_t value)
{
    struct nv_boot_msg m = sample(t), d;
    const char *why;
    size_t len;
    uint8_t *buf = encode(&m, &len);
    size_t plen = len - NV_BOOT_HDR_LEN;
    uint8_t *q = malloc(plen);
    CHECK(q);
    memcpy(q, buf + NV_BOOT_HDR_LEN, plen);
    if (bytes == 4)
        nv_put32(q + off, value);
    else if (bytes == 2)
        nv_put16(q + off, (uint16_t)value);
    else
        q[off] = (uint8_t)value;
    if (nv_boot_payload_decode(t, q, plen, &d, &why) != NV_BOOT_RC_BAD) {
        fprintf(stderr, "%s with %u at offset %zu was accepted\n", nv_boot_msg_type_name(t), value, off);
        exit(1);
    }
    free(q);
    free(buf);
}

/* The launchers' messages: out-of-range fields are refused like the rest. */
static void bad_node_fields(void)
{
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 0, 4, 0);              /* node 0 is the hub */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 0, 4, 3);              /* node == nnodes */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 4, 4, 1);              /* one node is no rendezvous */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 4, 4, NV_BOOT_MAX_NODES + 1);
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 8, 4, 0);              /* no ranks */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 8, 4, NV_BOOT_MAX_RANKS / 3 + 1);
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 8, 4, 0x80000000u);    /* negative */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 12, 4, 2);             /* unknown flag */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 16, 2, NV_BOOT_AUTH_SECRET);  /* the secret must not travel */
    refuse_field(NV_BOOT_MSG_NODE_HELLO, 18, 2, NV_BOOT_PROOF_MAX + 1);
    refuse_field(NV_BOOT_MSG_WELCOME, 0, 4, NETVM_STATUS_COUNT);
    refuse_field(NV_BOOT_MSG_WELCOME, 10, 2, 1);                /* reserved */
    refuse_field(NV_BOOT_MSG_WELCOME, 12, 1, '/');              /* job id alphabet */
    refuse_field(NV_BOOT_MSG_WELCOME, 12 + 13 + 32, 1, 0x1b);   /* an escape in the text */
    refuse_field(NV_BOOT_MSG_WELCOME, 12 + 13 + 32, 1, 0x80);
    refuse_field(NV_BOOT_MSG_ENTER, 0, 4, 0xffffffffu);         /* rank -1 */
    refuse_field(NV_BOOT_MSG_ENTER, 4, 4, 0);                   /* seq 0 */
    refuse_field(NV_BOOT_MSG_ENTER, 8, 2, NV_BOOT_MSG_HELLO);   /* not a collective */
    refuse_field(NV_BOOT_MSG_ENTER, 10, 2, 1);
    refuse_field(NV_BOOT_MSG_RANK_GONE, 4, 4, 0);
    refuse_field(NV_BOOT_MSG_RANK_GONE, 4, 4, 3);
    refuse_field(NV_BOOT_MSG_RANK_GONE, 0, 4, (uint32_t)NV_BOOT_MAX_RANKS);
    refuse_field(NV_BOOT_MSG_FAILED, 0, 4, (uint32_t)-2);
    refuse_field(NV_BOOT_MSG_FAILED, 4, 4, NV_BOOT_MAX_NODES);
    refuse_field(NV_BOOT_MSG_ABORT, 8, 4, 256);
    refuse_field(NV_BOOT_MSG_ABORT, 8, 4, (uint32_t)-1);
    refuse_field(NV_BOOT_MSG_ABORT, 12, 2, NV_BOOT_TEXT_MAX + 1);
    refuse_field(NV_BOOT_MSG_ABORT, 14, 2, 1);
    refuse_field(NV_BOOT_MSG_ABORT, 16, 1, '\n');
    refuse_field(NV_BOOT_MSG_NODE_DONE, 0, 4, 300);

    /* a refusal may come without a job id; a welcome may not */
    struct nv_boot_msg w = sample(NV_BOOT_MSG_WELCOME);
    w.u.welcome.job_id_len = 0;
    CHECK(nv_boot_msg_size(&w) == 0);
    w.u.welcome.status = NETVM_ERR_BOOT;
    CHECK(nv_boot_msg_size(&w) > 0);
}

/* An allgather's ENTER carries bytes, a barrier's none. */
static void enter_allgather(void)
{
    struct nv_boot_msg m = sample(NV_BOOT_MSG_ENTER), d;
    m.u.coll.coll = NV_BOOT_MSG_ALLGATHER;
    m.u.coll.data = gathered;
    m.u.coll.len = 100;
    size_t len, flen;
    const char *why;
    uint8_t *buf = encode(&m, &len);
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_OK);
    same(&m, &d);
    free(buf);
    m.u.coll.coll = NV_BOOT_MSG_BARRIER;
    CHECK(nv_boot_msg_size(&m) == 0);
}

/* The largest allowed frame decodes; one byte more does not. */
static void size_limit(void)
{
    size_t each = (NV_BOOT_MAX_PAYLOAD - 20) / 2;
    uint8_t *data = calloc(2, each);
    CHECK(data);
    struct nv_boot_msg m = { .type = NV_BOOT_MSG_ALLGATHER_RESULT }, d;
    m.u.result.seq = 1;
    m.u.result.count = 2;
    m.u.result.each = (uint32_t)each;
    m.u.result.data = data;
    m.u.result.dead_rank = -1;
    size_t len;
    uint8_t *buf = encode(&m, &len);
    CHECK(len == NV_BOOT_HDR_LEN + NV_BOOT_MAX_PAYLOAD);
    size_t flen;
    const char *why;
    CHECK(nv_boot_frame_decode(buf, len, NV_BOOT_MAX_PAYLOAD, &d, &flen, &why) == NV_BOOT_RC_OK);
    m.u.result.each++;
    CHECK(nv_boot_msg_size(&m) == 0);
    free(buf);
    free(data);
}

int main(void)
{
    for (size_t i = 0; i < sizeof secret; i++)
        secret[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof gathered; i++)
        gathered[i] = (uint8_t)i;
    round_trips();
    bad_headers();
    bad_fields();
    bad_node_fields();
    enter_allgather();
    size_limit();
    CHECK(nv_boot_job_id_valid("a-b_c.9", 7));
    CHECK(!nv_boot_job_id_valid("a b", 3));
    CHECK(!nv_boot_job_id_valid("", 0));
    printf("boot_msg: ok\n");
    return 0;
}
