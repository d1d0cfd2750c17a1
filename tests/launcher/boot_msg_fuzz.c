/* Fuzz-style test of the bootstrap decoder: random bytes, valid frames with
 * random bytes flipped, and random truncations, each in an exactly-sized
 * heap buffer (so ASan sees any read past it). The decoder must answer OK,
 * MORE or BAD and nothing else; whatever it accepts must re-encode to the
 * very same bytes, so no two encodings mean one message.
 * usage: launcher_boot_msg_fuzz [ITERATIONS [SEED]] */
#include "check.h"
#include "wire/boot_msg.h"

#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static uint64_t rnd(void)
{
    /* xorshift64*: reproducible from the seed printed on failure */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t valid_frame(uint8_t *out, size_t cap)
{
    static uint8_t data[256], secret[32];
    static const char *const jobs[] = { "j", "1234-abcdef01", "x.y_z-0" };
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)rnd();
    struct nv_boot_msg m = { .type = (uint16_t)(1 + rnd() % (NV_BOOT_MSG_TYPE_END - 1)) };
    switch (m.type) {
    case NV_BOOT_MSG_HELLO: {
        const char *job = jobs[rnd() % 3];
        m.u.hello.size = (int32_t)(1 + rnd() % 1024);
        m.u.hello.rank = (int32_t)(rnd() % (uint64_t)m.u.hello.size);
        m.u.hello.auth = NV_BOOT_AUTH_SECRET;
        m.u.hello.job_id = job;
        m.u.hello.job_id_len = (uint16_t)strlen(job);
        m.u.hello.proof = secret;
        m.u.hello.proof_len = (uint16_t)(rnd() % 33);
        break;
    }
    case NV_BOOT_MSG_ALLGATHER_RESULT:
        m.u.result.count = (uint32_t)(rnd() % 9);
        m.u.result.each = (uint32_t)(rnd() % 29);
        m.u.result.data = data;
        /* fall through */
    case NV_BOOT_MSG_RESULT:
    case NV_BOOT_MSG_BARRIER_DONE:
        m.u.result.seq = m.type == NV_BOOT_MSG_RESULT ? 0 : (uint32_t)(1 + rnd() % 1000);
        m.u.result.status = (netvm_status_t)(rnd() % NETVM_STATUS_COUNT);
        m.u.result.dead_rank = (int32_t)(rnd() % 10) - 1;
        break;
    case NV_BOOT_MSG_ALLGATHER:
        m.u.coll.len = (uint32_t)(rnd() % sizeof data);
        m.u.coll.data = data;
        /* fall through */
    case NV_BOOT_MSG_BARRIER:
        m.u.coll.seq = (uint32_t)(1 + rnd() % 1000);
        break;
    case NV_BOOT_MSG_CHALLENGE:
        m.u.challenge.nonce = data;
        break;
    case NV_BOOT_MSG_NODE_HELLO:
        m.u.node_hello.nnodes = (int32_t)(2 + rnd() % 100);
        m.u.node_hello.node = (int32_t)(1 + rnd() % (uint64_t)(m.u.node_hello.nnodes - 1));
        m.u.node_hello.nlocal = (int32_t)(1 + rnd() % 64);
        m.u.node_hello.flags = (uint32_t)(rnd() % 2);
        m.u.node_hello.auth = NV_BOOT_AUTH_HMAC;
        m.u.node_hello.nonce = data;
        m.u.node_hello.proof = secret;
        m.u.node_hello.proof_len = (uint16_t)(rnd() % 33);
        break;
    case NV_BOOT_MSG_WELCOME: {
        const char *job = jobs[rnd() % 3];
        m.u.welcome.status = (netvm_status_t)(rnd() % 2 ? NETVM_OK : NETVM_ERR_BOOT);
        m.u.welcome.job_id = job;
        m.u.welcome.job_id_len = (uint16_t)strlen(job);
        m.u.welcome.proof = secret;
        m.u.welcome.proof_len = (uint16_t)(rnd() % 33);
        m.u.welcome.text = "refused: -n differs";
        m.u.welcome.text_len = (uint16_t)(rnd() % 20);
        break;
    }
    case NV_BOOT_MSG_ENTER:
        m.u.coll.rank = (int32_t)(rnd() % 100);
        m.u.coll.seq = (uint32_t)(1 + rnd() % 1000);
        m.u.coll.coll = rnd() % 2 ? NV_BOOT_MSG_ALLGATHER : NV_BOOT_MSG_BARRIER;
        if (m.u.coll.coll == NV_BOOT_MSG_ALLGATHER) {
            m.u.coll.len = (uint32_t)(rnd() % sizeof data);
            m.u.coll.data = data;
        }
        break;
    case NV_BOOT_MSG_RANK_GONE:
        m.u.report.rank = (int32_t)(rnd() % 100);
        m.u.report.state = rnd() % 2 ? NV_BOOT_GONE_LEFT : NV_BOOT_GONE_DEAD;
        break;
    case NV_BOOT_MSG_FAILED:
    case NV_BOOT_MSG_ABORT:
        m.u.report.rank = (int32_t)(rnd() % 100) - 1;
        m.u.report.node = (int32_t)(rnd() % 10);
        m.u.report.code = (int32_t)(rnd() % 256);
        m.u.report.text = "rank 3 (pid 77) on node 1 killed by signal 9 (Killed)";
        m.u.report.text_len = (uint16_t)(rnd() % 40);
        break;
    case NV_BOOT_MSG_NODE_DONE:
        m.u.report.code = (int32_t)(rnd() % 256);
        break;
    }
    size_t n = nv_boot_msg_encode(&m, out, cap);
    CHECK(n > 0);
    return n;
}

static void try_decode(const uint8_t *src, size_t len, unsigned long iter, uint64_t seed)
{
    uint8_t *buf = malloc(len ? len : 1);
    CHECK(buf);
    memcpy(buf, src, len);
    struct nv_boot_msg m;
    size_t flen = 0;
    const char *why = NULL;
    uint32_t max = rnd() % 4 ? NV_BOOT_MAX_PAYLOAD : NV_BOOT_HELLO_MAX;
    enum nv_boot_rc rc = nv_boot_frame_decode(buf, len, max, &m, &flen, &why);
    if (rc == NV_BOOT_RC_BAD) {
        CHECK(why != NULL);
    } else if (rc == NV_BOOT_RC_MORE) {
        CHECK(flen > len || len < NV_BOOT_HDR_LEN);
    } else if (rc == NV_BOOT_RC_OK) {
        CHECK(flen >= NV_BOOT_HDR_LEN && flen <= len);
        uint8_t *again = malloc(flen);
        CHECK(again);
        size_t n = nv_boot_msg_encode(&m, again, flen);
        if (n != flen || memcmp(again, buf, flen) != 0) {
            fprintf(stderr, "iteration %lu (seed %llu): %s decoded but re-encodes differently\n",
                    iter, (unsigned long long)seed, nv_boot_msg_type_name(m.type));
            exit(1);
        }
        free(again);
    } else {
        fprintf(stderr, "iteration %lu (seed %llu): decoder returned %d\n", iter, (unsigned long long)seed, rc);
        exit(1);
    }
    free(buf);
}

int main(int argc, char **argv)
{
    unsigned long iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
    uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 0x9e3779b97f4a7c15ull;
    rng_state = seed ? seed : 1;
    static uint8_t frame[4096];
    unsigned long accepted = 0;
    for (unsigned long i = 0; i < iters; i++) {
        size_t len;
        switch (rnd() % 4) {
        case 0: {   /* noise, half the time behind a valid frame's header */
            size_t from = 0;
            if (rnd() % 2) {
                valid_frame(frame, sizeof frame);
                from = NV_BOOT_HDR_LEN;
            }
            len = rnd() % 200;
            for (size_t k = from; k < len; k++)
                frame[k] = (uint8_t)rnd();
            break;
        }
        case 1: {   /* a valid frame with a few bytes changed */
            len = valid_frame(frame, sizeof frame);
            int flips = 1 + (int)(rnd() % 4);
            for (int k = 0; k < flips; k++)
                frame[rnd() % len] ^= (uint8_t)(1 + rnd() % 255);
            break;
        }
        case 2:     /* a valid frame cut short or with bytes after it */
            len = valid_frame(frame, sizeof frame);
            len = rnd() % 2 ? rnd() % len : len + rnd() % 16;
            break;
        default:    /* a valid frame: must be accepted */
            len = valid_frame(frame, sizeof frame);
            {
                struct nv_boot_msg m;
                size_t flen;
                const char *why;
                CHECK(nv_boot_frame_decode(frame, len, NV_BOOT_MAX_PAYLOAD, &m, &flen, &why) == NV_BOOT_RC_OK);
                accepted++;
            }
            break;
        }
        try_decode(frame, len, i, seed);
    }
    CHECK(iters < 100 || accepted > 0);
    printf("boot_msg_fuzz: %lu inputs, seed %llu: ok\n", iters, (unsigned long long)seed);
    return 0;
}
