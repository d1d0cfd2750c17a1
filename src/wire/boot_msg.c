/* Bootstrap frames: see boot_msg.h for the conversation. Payload layouts
 * (all little-endian):
 *   HELLO             i32 rank, i32 size, u16 auth, u16 job_id_len,
 *                     u16 proof_len, u16 zero, job_id bytes, proof bytes
 *   RESULT            u32 status, i32 dead_rank
 *   ALLGATHER         u32 seq, contribution bytes (the rest of the payload)
 *   ALLGATHER_RESULT  u32 seq, u32 status, i32 dead_rank, u32 count,
 *                     u32 each, count*each bytes
 *   BARRIER           u32 seq
 *   BARRIER_DONE      u32 seq, u32 status, i32 dead_rank
 *   BYE               (empty)
 * and between launchers:
 *   CHALLENGE         nonce (32 bytes)
 *   NODE_HELLO        i32 node, i32 nnodes, i32 nlocal, u32 flags, u16 auth,
 *                     u16 proof_len, nonce (32 bytes), proof bytes
 *   WELCOME           u32 status, u16 job_id_len, u16 proof_len, u16 text_len,
 *                     u16 zero, job_id bytes, proof bytes, text bytes
 *   START             (empty)
 *   ENTER             i32 rank, u32 seq, u16 collective type, u16 zero,
 *                     contribution bytes (none for a BARRIER)
 *   RANK_GONE         i32 rank, u32 state
 *   FAILED, ABORT     i32 rank, i32 node, i32 code, u16 text_len, u16 zero, text
 *   NODE_DONE         i32 code
 * Every payload must have exactly the length its fields imply: trailing
 * bytes are as malformed as missing ones. */
#include "wire/boot_msg.h"
#include "wire/endian.h"

#include <string.h>

#define HELLO_FIXED   16
#define RESULT_LEN    8
#define DONE_LEN      12
#define AGR_FIXED     20
#define NHELLO_FIXED  (20 + NV_BOOT_NONCE_LEN)
#define WELCOME_FIXED 12
#define ENTER_FIXED   12
#define GONE_LEN      8
#define REPORT_FIXED  16
#define DONE_CODE_LEN 4

static const char *const type_names[NV_BOOT_MSG_TYPE_END] = {
    [NV_BOOT_MSG_HELLO]            = "HELLO",
    [NV_BOOT_MSG_RESULT]           = "RESULT",
    [NV_BOOT_MSG_ALLGATHER]        = "ALLGATHER",
    [NV_BOOT_MSG_ALLGATHER_RESULT] = "ALLGATHER_RESULT",
    [NV_BOOT_MSG_BARRIER]          = "BARRIER",
    [NV_BOOT_MSG_BARRIER_DONE]     = "BARRIER_DONE",
    [NV_BOOT_MSG_BYE]              = "BYE",
    [NV_BOOT_MSG_CHALLENGE]        = "CHALLENGE",
    [NV_BOOT_MSG_NODE_HELLO]       = "NODE_HELLO",
    [NV_BOOT_MSG_WELCOME]          = "WELCOME",
    [NV_BOOT_MSG_START]            = "START",
    [NV_BOOT_MSG_ENTER]            = "ENTER",
    [NV_BOOT_MSG_RANK_GONE]        = "RANK_GONE",
    [NV_BOOT_MSG_FAILED]           = "FAILED",
    [NV_BOOT_MSG_ABORT]            = "ABORT",
    [NV_BOOT_MSG_NODE_DONE]        = "NODE_DONE",
};

const char *nv_boot_msg_type_name(uint16_t type)
{
    if (type == 0 || type >= NV_BOOT_MSG_TYPE_END)
        return "unknown";
    return type_names[type];
}

int nv_boot_job_id_valid(const char *id, size_t len)
{
    if (!id || len == 0 || len > NV_BOOT_JOB_ID_MAX)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = id[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static enum nv_boot_rc bad(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return NV_BOOT_RC_BAD;
}

/* The field checks shared by encoder and decoder, so neither side can
 * produce what the other would refuse. */
static enum nv_boot_rc check_status(netvm_status_t st, int32_t dead, const char **why)
{
    if ((uint32_t)st >= NETVM_STATUS_COUNT)
        return bad(why, "status out of range");
    if (dead < -1 || dead >= NV_BOOT_MAX_RANKS)
        return bad(why, "dead rank out of range");
    return NV_BOOT_RC_OK;
}

static int text_valid(const char *t, size_t len)
{
    if (len > NV_BOOT_TEXT_MAX || (len && !t))
        return 0;
    for (size_t i = 0; i < len; i++)
        if (t[i] < 0x20 || t[i] > 0x7e)
            return 0;
    return 1;
}

static enum nv_boot_rc check_node_msg(const struct nv_boot_msg *m, const char **why)
{
    switch (m->type) {
    case NV_BOOT_MSG_CHALLENGE:
        return m->u.challenge.nonce ? NV_BOOT_RC_OK : bad(why, "CHALLENGE without a nonce");
    case NV_BOOT_MSG_NODE_HELLO: {
        const typeof(m->u.node_hello) *h = &m->u.node_hello;
        if (h->nnodes < 2 || h->nnodes > NV_BOOT_MAX_NODES)
            return bad(why, "NODE_HELLO node count out of range");
        if (h->node < 1 || h->node >= h->nnodes)
            return bad(why, "NODE_HELLO node rank out of range");
        if (h->nlocal < 1 || (int64_t)h->nlocal * h->nnodes > NV_BOOT_MAX_RANKS)
            return bad(why, "NODE_HELLO ranks per node out of range");
        if (h->flags & ~NV_BOOT_NODE_KEEP_GOING)
            return bad(why, "NODE_HELLO has unknown flags");
        if (h->auth != NV_BOOT_AUTH_HMAC)
            return bad(why, "NODE_HELLO names an unknown auth scheme");
        if (h->proof_len > NV_BOOT_PROOF_MAX || (h->proof_len && !h->proof) || !h->nonce)
            return bad(why, "NODE_HELLO proof malformed");
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_WELCOME: {
        const typeof(m->u.welcome) *w = &m->u.welcome;
        if ((uint32_t)w->status >= NETVM_STATUS_COUNT)
            return bad(why, "status out of range");
        if ((w->job_id_len || w->status == NETVM_OK) && !nv_boot_job_id_valid(w->job_id, w->job_id_len))
            return bad(why, "WELCOME job id malformed");
        if (w->proof_len > NV_BOOT_PROOF_MAX || (w->proof_len && !w->proof))
            return bad(why, "WELCOME proof malformed");
        if (!text_valid(w->text, w->text_len))
            return bad(why, "WELCOME text malformed");
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_START:
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_ENTER: {
        const typeof(m->u.coll) *e = &m->u.coll;
        if (e->rank < 0 || e->rank >= NV_BOOT_MAX_RANKS)
            return bad(why, "ENTER rank out of range");
        if (e->seq == 0)
            return bad(why, "sequence number 0");
        if (e->coll != NV_BOOT_MSG_ALLGATHER && e->coll != NV_BOOT_MSG_BARRIER)
            return bad(why, "ENTER names no collective");
        if (e->coll == NV_BOOT_MSG_BARRIER && e->len)
            return bad(why, "ENTER of a barrier carries bytes");
        if (e->len > NV_BOOT_MAX_PAYLOAD - ENTER_FIXED || (e->len && !e->data))
            return bad(why, "ENTER contribution malformed");
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_RANK_GONE:
        if (m->u.report.rank < 0 || m->u.report.rank >= NV_BOOT_MAX_RANKS)
            return bad(why, "RANK_GONE rank out of range");
        if (m->u.report.state != NV_BOOT_GONE_LEFT && m->u.report.state != NV_BOOT_GONE_DEAD)
            return bad(why, "RANK_GONE state unknown");
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT: {
        const typeof(m->u.report) *r = &m->u.report;
        if (r->rank < -1 || r->rank >= NV_BOOT_MAX_RANKS)
            return bad(why, "report rank out of range");
        if (r->node < 0 || r->node >= NV_BOOT_MAX_NODES)
            return bad(why, "report node out of range");
        if (r->code < 0 || r->code > 255)
            return bad(why, "report exit status out of range");
        if (!text_valid(r->text, r->text_len))
            return bad(why, "report text malformed");
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_NODE_DONE:
        if (m->u.report.code < 0 || m->u.report.code > 255)
            return bad(why, "NODE_DONE exit status out of range");
        return NV_BOOT_RC_OK;
    default:
        return bad(why, "unknown message type");
    }
}

static enum nv_boot_rc check_msg(const struct nv_boot_msg *m, const char **why)
{
    switch (m->type) {
    case NV_BOOT_MSG_HELLO: {
        const typeof(m->u.hello) *h = &m->u.hello;
        if (h->size < 1 || h->size > NV_BOOT_MAX_RANKS)
            return bad(why, "HELLO size out of range");
        if (h->rank < 0 || h->rank >= h->size)
            return bad(why, "HELLO rank out of range");
        if (h->auth == 0 || h->auth >= NV_BOOT_AUTH_END)
            return bad(why, "HELLO names an unknown auth scheme");
        if (h->proof_len > NV_BOOT_PROOF_MAX || (h->proof_len && !h->proof))
            return bad(why, "HELLO proof too long");
        if (!nv_boot_job_id_valid(h->job_id, h->job_id_len))
            return bad(why, "HELLO job id malformed");
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_RESULT:
        return check_status(m->u.result.status, m->u.result.dead_rank, why);
    case NV_BOOT_MSG_BARRIER_DONE:
        if (m->u.result.seq == 0)
            return bad(why, "sequence number 0");
        return check_status(m->u.result.status, m->u.result.dead_rank, why);
    case NV_BOOT_MSG_ALLGATHER_RESULT: {
        const typeof(m->u.result) *r = &m->u.result;
        if (r->seq == 0)
            return bad(why, "sequence number 0");
        if (r->count > NV_BOOT_MAX_RANKS)
            return bad(why, "ALLGATHER_RESULT count out of range");
        if ((uint64_t)r->count * r->each > NV_BOOT_MAX_PAYLOAD - AGR_FIXED)
            return bad(why, "ALLGATHER_RESULT too large");
        if (r->count && r->each && !r->data)
            return bad(why, "ALLGATHER_RESULT without data");
        return check_status(r->status, r->dead_rank, why);
    }
    case NV_BOOT_MSG_ALLGATHER:
        if (m->u.coll.seq == 0)
            return bad(why, "sequence number 0");
        if (m->u.coll.len > NV_BOOT_MAX_PAYLOAD - 4)
            return bad(why, "ALLGATHER contribution too large");
        if (m->u.coll.len && !m->u.coll.data)
            return bad(why, "ALLGATHER without data");
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_BARRIER:
        if (m->u.coll.seq == 0)
            return bad(why, "sequence number 0");
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_BYE:
        return NV_BOOT_RC_OK;
    default:
        return check_node_msg(m, why);
    }
}

static uint32_t payload_len(const struct nv_boot_msg *m)
{
    switch (m->type) {
    case NV_BOOT_MSG_HELLO:     return HELLO_FIXED + m->u.hello.job_id_len + m->u.hello.proof_len;
    case NV_BOOT_MSG_RESULT:    return RESULT_LEN;
    case NV_BOOT_MSG_BARRIER_DONE: return DONE_LEN;
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        return AGR_FIXED + m->u.result.count * m->u.result.each;   /* bounded by check_msg */
    case NV_BOOT_MSG_ALLGATHER: return 4 + m->u.coll.len;
    case NV_BOOT_MSG_BARRIER:   return 4;
    case NV_BOOT_MSG_CHALLENGE: return NV_BOOT_NONCE_LEN;
    case NV_BOOT_MSG_NODE_HELLO: return NHELLO_FIXED + m->u.node_hello.proof_len;
    case NV_BOOT_MSG_WELCOME:
        return WELCOME_FIXED + m->u.welcome.job_id_len + m->u.welcome.proof_len + m->u.welcome.text_len;
    case NV_BOOT_MSG_ENTER:     return ENTER_FIXED + m->u.coll.len;
    case NV_BOOT_MSG_RANK_GONE: return GONE_LEN;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:     return REPORT_FIXED + m->u.report.text_len;
    case NV_BOOT_MSG_NODE_DONE: return DONE_CODE_LEN;
    default:                    return 0;   /* BYE, START */
    }
}

size_t nv_boot_msg_size(const struct nv_boot_msg *msg)
{
    if (!msg || check_msg(msg, NULL) != NV_BOOT_RC_OK)
        return 0;
    return NV_BOOT_HDR_LEN + (size_t)payload_len(msg);
}

static void put_bytes(uint8_t **p, const void *src, size_t len)
{
    if (len)
        memcpy(*p, src, len);
    *p += len;
}

/* The launcher-to-launcher payloads, into p (sized by payload_len). */
static void encode_node_msg(const struct nv_boot_msg *m, uint8_t *p)
{
    switch (m->type) {
    case NV_BOOT_MSG_CHALLENGE:
        memcpy(p, m->u.challenge.nonce, NV_BOOT_NONCE_LEN);
        break;
    case NV_BOOT_MSG_NODE_HELLO: {
        const typeof(m->u.node_hello) *h = &m->u.node_hello;
        nv_put32(p, (uint32_t)h->node);
        nv_put32(p + 4, (uint32_t)h->nnodes);
        nv_put32(p + 8, (uint32_t)h->nlocal);
        nv_put32(p + 12, h->flags);
        nv_put16(p + 16, h->auth);
        nv_put16(p + 18, h->proof_len);
        memcpy(p + 20, h->nonce, NV_BOOT_NONCE_LEN);
        p += NHELLO_FIXED;
        put_bytes(&p, h->proof, h->proof_len);
        break;
    }
    case NV_BOOT_MSG_WELCOME: {
        const typeof(m->u.welcome) *w = &m->u.welcome;
        nv_put32(p, (uint32_t)w->status);
        nv_put16(p + 4, w->job_id_len);
        nv_put16(p + 6, w->proof_len);
        nv_put16(p + 8, w->text_len);
        nv_put16(p + 10, 0);
        p += WELCOME_FIXED;
        put_bytes(&p, w->job_id, w->job_id_len);
        put_bytes(&p, w->proof, w->proof_len);
        put_bytes(&p, w->text, w->text_len);
        break;
    }
    case NV_BOOT_MSG_ENTER:
        nv_put32(p, (uint32_t)m->u.coll.rank);
        nv_put32(p + 4, m->u.coll.seq);
        nv_put16(p + 8, m->u.coll.coll);
        nv_put16(p + 10, 0);
        p += ENTER_FIXED;
        put_bytes(&p, m->u.coll.data, m->u.coll.len);
        break;
    case NV_BOOT_MSG_RANK_GONE:
        nv_put32(p, (uint32_t)m->u.report.rank);
        nv_put32(p + 4, m->u.report.state);
        break;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:
        nv_put32(p, (uint32_t)m->u.report.rank);
        nv_put32(p + 4, (uint32_t)m->u.report.node);
        nv_put32(p + 8, (uint32_t)m->u.report.code);
        nv_put16(p + 12, m->u.report.text_len);
        nv_put16(p + 14, 0);
        p += REPORT_FIXED;
        put_bytes(&p, m->u.report.text, m->u.report.text_len);
        break;
    case NV_BOOT_MSG_NODE_DONE:
        nv_put32(p, (uint32_t)m->u.report.code);
        break;
    default:        /* BYE, START: no payload */
        break;
    }
}

size_t nv_boot_msg_encode(const struct nv_boot_msg *m, uint8_t *buf, size_t cap)
{
    size_t total = nv_boot_msg_size(m);
    if (total == 0 || !buf || cap < total)
        return 0;
    nv_put32(buf, NV_BOOT_MAGIC);
    nv_put16(buf + 4, NV_BOOT_VERSION);
    nv_put16(buf + 6, m->type);
    nv_put32(buf + 8, (uint32_t)(total - NV_BOOT_HDR_LEN));
    uint8_t *p = buf + NV_BOOT_HDR_LEN;
    switch (m->type) {
    case NV_BOOT_MSG_HELLO:
        nv_put32(p, (uint32_t)m->u.hello.rank);
        nv_put32(p + 4, (uint32_t)m->u.hello.size);
        nv_put16(p + 8, m->u.hello.auth);
        nv_put16(p + 10, m->u.hello.job_id_len);
        nv_put16(p + 12, m->u.hello.proof_len);
        nv_put16(p + 14, 0);
        memcpy(p + HELLO_FIXED, m->u.hello.job_id, m->u.hello.job_id_len);
        if (m->u.hello.proof_len)
            memcpy(p + HELLO_FIXED + m->u.hello.job_id_len, m->u.hello.proof, m->u.hello.proof_len);
        break;
    case NV_BOOT_MSG_RESULT:
        nv_put32(p, (uint32_t)m->u.result.status);
        nv_put32(p + 4, (uint32_t)m->u.result.dead_rank);
        break;
    case NV_BOOT_MSG_BARRIER_DONE:
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        nv_put32(p, m->u.result.seq);
        nv_put32(p + 4, (uint32_t)m->u.result.status);
        nv_put32(p + 8, (uint32_t)m->u.result.dead_rank);
        if (m->type == NV_BOOT_MSG_ALLGATHER_RESULT) {
            size_t n = (size_t)m->u.result.count * m->u.result.each;
            nv_put32(p + 12, m->u.result.count);
            nv_put32(p + 16, m->u.result.each);
            if (n)
                memcpy(p + AGR_FIXED, m->u.result.data, n);
        }
        break;
    case NV_BOOT_MSG_ALLGATHER:
        nv_put32(p, m->u.coll.seq);
        if (m->u.coll.len)
            memcpy(p + 4, m->u.coll.data, m->u.coll.len);
        break;
    case NV_BOOT_MSG_BARRIER:
        nv_put32(p, m->u.coll.seq);
        break;
    default:
        encode_node_msg(m, p);
        break;
    }
    return total;
}

enum nv_boot_rc nv_boot_hdr_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                                   struct nv_boot_hdr *hdr, const char **why)
{
    if (!buf || !hdr)
        return bad(why, "no buffer");
    /* Judge what has arrived before waiting for the rest, so garbage is
     * refused at its first bytes instead of after a stall. */
    static const uint8_t magic[4] = { NV_BOOT_MAGIC & 0xff, (NV_BOOT_MAGIC >> 8) & 0xff,
                                      (NV_BOOT_MAGIC >> 16) & 0xff, NV_BOOT_MAGIC >> 24 };
    if (memcmp(buf, magic, len < 4 ? len : 4) != 0)
        return bad(why, "bad magic");
    if (len < NV_BOOT_HDR_LEN)
        return NV_BOOT_RC_MORE;
    hdr->magic = nv_get32(buf);
    hdr->version = nv_get16(buf + 4);
    hdr->type = nv_get16(buf + 6);
    hdr->len = nv_get32(buf + 8);
    if (hdr->version != NV_BOOT_VERSION)
        return bad(why, "unsupported protocol version");
    if (hdr->type == 0 || hdr->type >= NV_BOOT_MSG_TYPE_END)
        return bad(why, "unknown message type");
    if (max_payload > NV_BOOT_MAX_PAYLOAD)
        max_payload = NV_BOOT_MAX_PAYLOAD;
    if (hdr->len > max_payload)
        return bad(why, "payload too long");
    return NV_BOOT_RC_OK;
}

static enum nv_boot_rc want_len(size_t len, size_t want, const char **why)
{
    return len == want ? NV_BOOT_RC_OK : bad(why, "payload length does not match its fields");
}

/* The launcher-to-launcher payloads; m->type is set, m zeroed. Field
 * ranges are checked afterwards by check_msg, as for every type. */
static enum nv_boot_rc decode_node_msg(const uint8_t *p, size_t len, struct nv_boot_msg *m,
                                       const char **why)
{
    enum nv_boot_rc rc;
    switch (m->type) {
    case NV_BOOT_MSG_CHALLENGE:
        if ((rc = want_len(len, NV_BOOT_NONCE_LEN, why)))
            return rc;
        m->u.challenge.nonce = p;
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_NODE_HELLO: {
        typeof(m->u.node_hello) *h = &m->u.node_hello;
        if (len < NHELLO_FIXED)
            return bad(why, "NODE_HELLO truncated");
        h->node = (int32_t)nv_get32(p);
        h->nnodes = (int32_t)nv_get32(p + 4);
        h->nlocal = (int32_t)nv_get32(p + 8);
        h->flags = nv_get32(p + 12);
        h->auth = nv_get16(p + 16);
        h->proof_len = nv_get16(p + 18);
        if (h->proof_len > NV_BOOT_PROOF_MAX)
            return bad(why, "NODE_HELLO proof too long");
        if ((rc = want_len(len, (size_t)NHELLO_FIXED + h->proof_len, why)))
            return rc;
        h->nonce = p + 20;
        h->proof = p + NHELLO_FIXED;
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_WELCOME: {
        typeof(m->u.welcome) *w = &m->u.welcome;
        if (len < WELCOME_FIXED)
            return bad(why, "WELCOME truncated");
        w->status = (netvm_status_t)nv_get32(p);
        w->job_id_len = nv_get16(p + 4);
        w->proof_len = nv_get16(p + 6);
        w->text_len = nv_get16(p + 8);
        if (nv_get16(p + 10) != 0)
            return bad(why, "WELCOME reserved field not zero");
        if (w->job_id_len > NV_BOOT_JOB_ID_MAX || w->proof_len > NV_BOOT_PROOF_MAX ||
            w->text_len > NV_BOOT_TEXT_MAX)
            return bad(why, "WELCOME field too long");
        if ((rc = want_len(len, (size_t)WELCOME_FIXED + w->job_id_len + w->proof_len + w->text_len, why)))
            return rc;
        w->job_id = (const char *)p + WELCOME_FIXED;
        w->proof = p + WELCOME_FIXED + w->job_id_len;
        w->text = (const char *)w->proof + w->proof_len;
        return NV_BOOT_RC_OK;
    }
    case NV_BOOT_MSG_START:
        return want_len(len, 0, why);
    case NV_BOOT_MSG_ENTER:
        if (len < ENTER_FIXED)
            return bad(why, "ENTER truncated");
        m->u.coll.rank = (int32_t)nv_get32(p);
        m->u.coll.seq = nv_get32(p + 4);
        m->u.coll.coll = nv_get16(p + 8);
        if (nv_get16(p + 10) != 0)
            return bad(why, "ENTER reserved field not zero");
        m->u.coll.len = (uint32_t)(len - ENTER_FIXED);
        m->u.coll.data = p + ENTER_FIXED;
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_RANK_GONE:
        if ((rc = want_len(len, GONE_LEN, why)))
            return rc;
        m->u.report.rank = (int32_t)nv_get32(p);
        m->u.report.state = nv_get32(p + 4);
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:
        if (len < REPORT_FIXED)
            return bad(why, "report truncated");
        m->u.report.rank = (int32_t)nv_get32(p);
        m->u.report.node = (int32_t)nv_get32(p + 4);
        m->u.report.code = (int32_t)nv_get32(p + 8);
        m->u.report.text_len = nv_get16(p + 12);
        if (nv_get16(p + 14) != 0)
            return bad(why, "report reserved field not zero");
        if ((rc = want_len(len, (size_t)REPORT_FIXED + m->u.report.text_len, why)))
            return rc;
        m->u.report.text = (const char *)p + REPORT_FIXED;
        return NV_BOOT_RC_OK;
    case NV_BOOT_MSG_NODE_DONE:
        if ((rc = want_len(len, DONE_CODE_LEN, why)))
            return rc;
        m->u.report.code = (int32_t)nv_get32(p);
        return NV_BOOT_RC_OK;
    default:
        return bad(why, "unknown message type");
    }
}

enum nv_boot_rc nv_boot_payload_decode(uint16_t type, const uint8_t *p, size_t len,
                                       struct nv_boot_msg *m, const char **why)
{
    if (!m || (len && !p))
        return bad(why, "no buffer");
    if (len > NV_BOOT_MAX_PAYLOAD)
        return bad(why, "payload too long");
    memset(m, 0, sizeof *m);
    m->type = type;
    enum nv_boot_rc rc;
    switch (type) {
    case NV_BOOT_MSG_HELLO:
        if (len < HELLO_FIXED)
            return bad(why, "HELLO truncated");
        m->u.hello.rank = (int32_t)nv_get32(p);
        m->u.hello.size = (int32_t)nv_get32(p + 4);
        m->u.hello.auth = nv_get16(p + 8);
        m->u.hello.job_id_len = nv_get16(p + 10);
        m->u.hello.proof_len = nv_get16(p + 12);
        if (nv_get16(p + 14) != 0)
            return bad(why, "HELLO reserved field not zero");
        if (m->u.hello.job_id_len > NV_BOOT_JOB_ID_MAX || m->u.hello.proof_len > NV_BOOT_PROOF_MAX)
            return bad(why, "HELLO field too long");
        if ((rc = want_len(len, (size_t)HELLO_FIXED + m->u.hello.job_id_len + m->u.hello.proof_len, why)))
            return rc;
        m->u.hello.job_id = (const char *)p + HELLO_FIXED;
        m->u.hello.proof = p + HELLO_FIXED + m->u.hello.job_id_len;
        break;
    case NV_BOOT_MSG_RESULT:
        if ((rc = want_len(len, RESULT_LEN, why)))
            return rc;
        m->u.result.status = (netvm_status_t)nv_get32(p);
        m->u.result.dead_rank = (int32_t)nv_get32(p + 4);
        break;
    case NV_BOOT_MSG_BARRIER_DONE:
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        if (len < (type == NV_BOOT_MSG_BARRIER_DONE ? DONE_LEN : AGR_FIXED))
            return bad(why, "result truncated");
        m->u.result.seq = nv_get32(p);
        m->u.result.status = (netvm_status_t)nv_get32(p + 4);
        m->u.result.dead_rank = (int32_t)nv_get32(p + 8);
        if (type == NV_BOOT_MSG_BARRIER_DONE) {
            if ((rc = want_len(len, DONE_LEN, why)))
                return rc;
            break;
        }
        m->u.result.count = nv_get32(p + 12);
        m->u.result.each = nv_get32(p + 16);
        /* 64-bit product: two u32 fields must not wrap into a small length */
        if ((rc = want_len(len, AGR_FIXED + (uint64_t)m->u.result.count * m->u.result.each, why)))
            return rc;
        m->u.result.data = p + AGR_FIXED;
        break;
    case NV_BOOT_MSG_ALLGATHER:
        if (len < 4)
            return bad(why, "ALLGATHER truncated");
        m->u.coll.seq = nv_get32(p);
        m->u.coll.len = (uint32_t)(len - 4);
        m->u.coll.data = p + 4;
        break;
    case NV_BOOT_MSG_BARRIER:
        if ((rc = want_len(len, 4, why)))
            return rc;
        m->u.coll.seq = nv_get32(p);
        break;
    case NV_BOOT_MSG_BYE:
        if ((rc = want_len(len, 0, why)))
            return rc;
        break;
    default:
        if ((rc = decode_node_msg(p, len, m, why)))
            return rc;
        break;
    }
    return check_msg(m, why);
}

enum nv_boot_rc nv_boot_frame_decode(const uint8_t *buf, size_t len, uint32_t max_payload,
                                     struct nv_boot_msg *msg, size_t *frame_len,
                                     const char **why)
{
    struct nv_boot_hdr hdr;
    if (frame_len)
        *frame_len = NV_BOOT_HDR_LEN;
    enum nv_boot_rc rc = nv_boot_hdr_decode(buf, len, max_payload, &hdr, why);
    if (rc != NV_BOOT_RC_OK)
        return rc;
    size_t total = NV_BOOT_HDR_LEN + (size_t)hdr.len;
    if (frame_len)
        *frame_len = total;
    if (len < total)
        return NV_BOOT_RC_MORE;
    return nv_boot_payload_decode(hdr.type, buf + NV_BOOT_HDR_LEN, hdr.len, msg, why);
}
