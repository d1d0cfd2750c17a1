/* The initiator's own buffer taken away: rank 1 puts from, gets into,
 * sends active messages from and receives replies into a buffer whose
 * middle (the hole, fault.h's modes) it takes away and brings back between
 * phases; rank 0 is an ordinary target (exported plain memory, or memory
 * from netvm_alloc_shared with `shared`).
 *
 * With the hole open, an operation whose local buffer touches it fails
 * with NETVM_ERR_FAULT (a nonblocking one at once, in its completion or at
 * the next flush): put, put_nb, get, get_nb, put with signal (and the
 * signal is not applied), an active message's payload (the sender's call
 * fails; if the target's handler saw it, its landing failed too), a
 * request whose reply's payload would land in the hole. Neither process
 * crashes, the target's memory outside the failed operations keeps what
 * it had, and with the hole closed everything works again, with the right
 * data.
 *
 *   local MODE ROUNDS [shared]
 *
 * A known limit, shown by `shared` (expected to fail, see CMakeLists.txt,
 * and documented in api.md): on a mapped shm segment (`shared`, the shm
 * link's default) put and get copy with plain loads and stores, so an
 * unmapped local buffer is a SIGSEGV in the initiator, as a memcpy from it
 * would be (a guard would cost the mapped path's 0.07 us a third). */
#include "fault.h"

#define TGT 0
#define INI 1
#define KiB 1024ul
#define MiB (1024ul * 1024)
#define TREG     (2 * MiB)              /* the target's region */
#define LREG     (4 * MiB)              /* the initiator's buffer */
#define HOLE_OFF (1 * MiB)
#define HOLE_LEN (MiB + 64 * KiB)
#define AM_LAND  11
#define AM_REPLY 12
#define AM_ASK   13
#define MAXSEQ   1024

enum kind { K_PUT, K_PUT_NB, K_GET, K_GET_NB, K_PUT_SIGNAL, K_AM_SEND, K_AM_REPLY, NKINDS };
static const char *kname[NKINDS] = { "put", "put_nb", "get", "get_nb", "put_signal", "am_send", "am_request(reply)" };
enum { P_OUT, P_IN, P_LO };

typedef struct {
    int    kind, pos;
    size_t loff, len;    /* the local buffer's part */
    size_t toff;         /* at the target */
} op_t;

static op_t ops[256];
static int nops;
static netvm_ctx_t *ctx;
static region_t lb;      /* the initiator's buffer */
static int mode;

static void add(int kind, int pos, size_t len)
{
    CHECK(nops < (int)(sizeof ops / sizeof ops[0]));
    op_t *o = &ops[nops];
    o->kind = kind;
    o->pos = pos;
    o->len = len;
    o->loff = pos == P_OUT ? 64 * KiB * (size_t)(nops % 4) : pos == P_IN ? HOLE_OFF + 4096 : HOLE_OFF - len / 2;
    if (pos == P_OUT && len > 256 * KiB)
        o->loff = 0;
    o->toff = len > 256 * KiB ? (size_t)(nops % 2) * 512 * KiB
                              : (size_t)(nops % 8) * 128 * KiB + (size_t)(nops * 8) % 64;
    CHECK(o->loff + len <= LREG && o->toff + len <= TREG);
    nops++;
}

static void build_table(void)
{
    static const size_t sizes[] = { 8, 100, 4096, 20000, 64 * KiB, MiB };
    for (int k = K_PUT; k <= K_GET_NB; k++)
        for (int s = 0; s < 6; s++)
            for (int pos = P_OUT; pos <= P_LO; pos++)
                add(k, pos, sizes[s]);
    static const size_t ssz[] = { 100, 64 * KiB };
    for (int s = 0; s < 2; s++)
        for (int pos = P_OUT; pos <= P_LO; pos++)
            add(K_PUT_SIGNAL, pos, ssz[s]);
    static const size_t asz[] = { 1000, 4096, 100 * KiB, MiB };
    for (int s = 0; s < 4; s++)
        for (int pos = P_OUT; pos <= P_LO; pos++) {
            add(K_AM_SEND, pos, asz[s]);
            add(K_AM_REPLY, pos, asz[s]);
        }
}

/* Does the operation's local buffer stop it while the hole is open? */
static netvm_status_t expected(const op_t *o, bool open)
{
    if (!open || !in_hole(&lb, o->loff, o->len))
        return NETVM_OK;
    bool local_read = o->kind == K_PUT || o->kind == K_PUT_NB || o->kind == K_PUT_SIGNAL || o->kind == K_AM_SEND;
    return local_read && mode == HOLE_RO ? NETVM_OK : NETVM_ERR_FAULT;
}

/* --- the target ------------------------------------------------------------------- */

static uint8_t *treg;
static _Atomic int land_status[MAXSEQ];   /* status + 1; 0: never handled */

struct pend { uint64_t seq; };
static struct pend pends[MAXSEQ];

static void landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    (void)c;
    (void)msg;
    struct pend *p = arg;
    atomic_store(&land_status[p->seq], (int)st + 1);
}

static int am_land(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 2 && msg->args[1] < MAXSEQ && msg->args[0] + msg->len <= TREG);
    struct pend *p = &pends[msg->args[1]];
    p->seq = msg->args[1];
    netvm_status_t st = netvm_am_recv(c, msg, treg + msg->args[0], landed, p);
    CHECK(st == NETVM_OK || st == NETVM_ERR_FAULT);
    return NETVM_AM_DONE;
}

/* A reply of args[0] bytes of pattern args[1]. */
static int am_reply(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 2 && msg->has_token && msg->args[0] <= MiB);
    static uint8_t buf[MiB];
    fill_pattern(buf, msg->args[0], msg->args[1]);
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, NULL, 0, buf, msg->args[0]));
    return NETVM_AM_DONE;
}

/* How the landing of message args[0] went (status + 1, 0 if it never came);
 * the messages before this request were handled before it. */
static int am_ask(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 1 && msg->args[0] < MAXSEQ);
    uint64_t v = (uint64_t)atomic_exchange(&land_status[msg->args[0]], 0);
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, &v, 1, NULL, 0));
    return NETVM_AM_DONE;
}

/* --- the initiator ------------------------------------------------------------------ */

static uint8_t tshadow[TREG], tknown[TREG];   /* the target's region as far as we know */
static uint8_t *check;                        /* a buffer of our own that never goes away */
static netvm_rseg_t *rr;
static int faults_seen;

static void forget(size_t off, size_t len) { memset(tknown + off, 0, len); }
static void learn(size_t off, const uint8_t *bytes, size_t len)
{
    memcpy(tshadow + off, bytes, len);
    memset(tknown + off, 1, len);
}

/* Bytes read from the target at off: what we know must be there. */
static void compare(int round, int phase, int i, size_t off, const uint8_t *got, size_t len)
{
    for (size_t b = 0; b < len; b++)
        if (tknown[off + b] && got[b] != tshadow[off + b])
            FAILF("round %d phase %d op %d (%s): byte %zu of the target reads %#x, it must be %#x", round, phase,
                  i, kname[ops[i].kind], off + b, got[b], tshadow[off + b]);
    learn(off, got, len);
}

static netvm_status_t flushed(netvm_status_t st, netvm_req_t **q)
{
    if (st == NETVM_OK && *q)
        st = netvm_wait(q);
    if (st == NETVM_OK)
        st = netvm_flush(ctx, TGT);
    if (st != NETVM_OK)
        CHECK_OK(netvm_flush(ctx, TGT));   /* reported once */
    return st;
}

static void run_op(int round, int phase, int i, bool open)
{
    const op_t *o = &ops[i];
    netvm_status_t want = expected(o, open), st = NETVM_ERR_SYS;
    uint64_t seed = mix64((uint64_t)round << 40 | (uint64_t)phase << 32 | (uint64_t)i);
    uint8_t *lp = lb.base + o->loff;
    netvm_req_t *q = NULL;
    /* what a put or a message sends: the pattern where the buffer is there */
    bool sends = o->kind == K_PUT || o->kind == K_PUT_NB || o->kind == K_PUT_SIGNAL || o->kind == K_AM_SEND;
    if (sends && (!open || !in_hole(&lb, o->loff, o->len))) {
        fill_pattern(lp, o->len, seed);
    } else if (sends) {
        /* only around the hole (read-only or gone, it keeps what it has) */
        size_t end = o->loff + o->len, hend = HOLE_OFF + HOLE_LEN;
        if (o->loff < HOLE_OFF)
            fill_pattern(lp, HOLE_OFF - o->loff, seed);
        if (end > hend)
            fill_pattern(lb.base + hend, end - hend, seed ^ 1);
    }
    size_t sig = o->toff + o->len < TREG - 8 ? ((o->toff + o->len + 7) & ~(size_t)7) : 0;
    uint64_t sigval = seed | 1, landing = 0;
    switch (o->kind) {
    case K_PUT:    st = netvm_put(ctx, rr, o->toff, lp, o->len, 0); break;
    case K_PUT_NB: st = flushed(netvm_put_nb(ctx, rr, o->toff, lp, o->len, 0, &q), &q); break;
    case K_GET:    st = netvm_get(ctx, lp, rr, o->toff, o->len, 0); break;
    case K_GET_NB:
        st = netvm_get_nb(ctx, lp, rr, o->toff, o->len, 0, &q);
        if (st == NETVM_OK && q)
            st = netvm_wait(&q);
        break;
    case K_PUT_SIGNAL:
        st = netvm_put_signal(ctx, rr, o->toff, lp, o->len, rr, sig, sigval, NETVM_SIGNAL_SET, 0);
        break;
    case K_AM_SEND: {
        uint64_t a[2] = { o->toff, (uint64_t)i };
        st = netvm_am_send(ctx, TGT, AM_LAND, a, 2, lp, o->len, NULL);
        /* how did the landing go? (requests are handled in order) */
        uint64_t ask = (uint64_t)i;
        netvm_am_result_t res;
        CHECK_OK(netvm_am_request(ctx, TGT, AM_ASK, &ask, 1, NULL, 0, NULL, 0, &res, NULL));
        CHECK(res.status == NETVM_OK && res.nargs == 1);
        landing = res.args[0];
        break;
    }
    case K_AM_REPLY: {
        uint64_t a[2] = { o->len, seed };
        netvm_am_result_t res;
        memset(&res, 0, sizeof res);
        st = netvm_am_request(ctx, TGT, AM_REPLY, a, 2, NULL, 0, lp, o->len, &res, NULL);
        if (st == NETVM_OK) {
            CHECK(res.status == NETVM_OK && res.len == o->len && res.peer == TGT);
            fill_pattern(check, o->len, seed);
            long d = first_diff(lp, check, o->len);
            if (d >= 0)
                FAILF("round %d phase %d op %d: reply byte %ld is wrong", round, phase, i, d);
        }
        break;
    }
    }
    if (st != want)
        FAILF("round %d phase %d op %d: %s of %zu bytes, local buffer at %zu%s, returned %s, wanted %s", round,
              phase, i, kname[o->kind], o->len, o->loff, in_hole(&lb, o->loff, o->len) ? " (the hole)" : "",
              netvm_strerror(st), netvm_strerror(want));
    faults_seen += st != NETVM_OK;

    switch (o->kind) {
    case K_PUT: case K_PUT_NB: case K_PUT_SIGNAL:
        if (st == NETVM_OK) {
            learn(o->toff, lp, o->len);
            if (o->kind == K_PUT_SIGNAL)
                learn(sig, (const uint8_t *)&sigval, 8);
        } else {
            forget(o->toff, o->len);   /* some of it may have landed; the signal must not have */
        }
        /* what the target has now: the data, and the signal word */
        CHECK_OK(netvm_get(ctx, check, rr, o->toff, o->len, 0));
        compare(round, phase, i, o->toff, check, o->len);
        if (o->kind == K_PUT_SIGNAL) {
            CHECK_OK(netvm_get(ctx, check, rr, sig, 8, 0));
            compare(round, phase, i, sig, check, 8);
        }
        break;
    case K_GET: case K_GET_NB:
        if (st == NETVM_OK)
            compare(round, phase, i, o->toff, lp, o->len);
        break;
    case K_AM_SEND:
        /* the landing: success with the data, or a failure (if the handler
         * saw it at all: an eager payload that could not be read is not sent) */
        if (st == NETVM_OK) {
            if (landing != NETVM_OK + 1)
                FAILF("round %d phase %d op %d: the message was sent but its landing ended with %" PRIu64, round,
                      phase, i, landing);
            learn(o->toff, lp, o->len);
        } else {
            if (landing != 0 && landing != NETVM_ERR_FAULT + 1)
                FAILF("round %d phase %d op %d: a message whose payload faulted landed with %" PRIu64, round,
                      phase, i, landing);
            forget(o->toff, o->len);
        }
        CHECK_OK(netvm_get(ctx, check, rr, o->toff, o->len, 0));
        compare(round, phase, i, o->toff, check, o->len);
        break;
    default:
        break;
    }
}

int main(int argc, char **argv)
{
    CHECK(argc >= 3);
    mode = hole_mode_parse(argv[1]);
    int rounds = atoi(argv[2]);
    bool shared = false;
    for (int a = 3; a < argc; a++) {
        if (!strcmp(argv[a], "shared"))
            shared = true;
        else
            FAILF("unknown argument %s", argv[a]);
    }
    CHECK(rounds > 0);
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    netvm_peer_info_t info;
    CHECK_OK(netvm_peer_info(ctx, 1 - rank, &info));
    build_table();
    CHECK(nops <= MAXSEQ);

    netvm_seg_t *seg = NULL;
    if (rank == TGT) {
        if (shared) {
            void *p;
            CHECK_OK(netvm_alloc_shared(ctx, TREG, NETVM_RWA, "target", &p, &seg));
            treg = p;
        } else {
            treg = malloc(TREG);
            CHECK(treg);
            CHECK_OK(netvm_export(ctx, treg, TREG, NETVM_RWA, "target", &seg));
        }
        fill_pattern(treg, TREG, 0x7777);
        CHECK_OK(netvm_am_register(ctx, AM_LAND, am_land, NULL));
        CHECK_OK(netvm_am_register(ctx, AM_REPLY, am_reply, NULL));
        CHECK_OK(netvm_am_register(ctx, AM_ASK, am_ask, NULL));
    } else {
        region_init(&lb, LREG, HOLE_OFF, HOLE_LEN, mode);
        fill_pattern(tshadow, TREG, 0x7777);
        memset(tknown, 1, TREG);
        check = malloc(MiB);
        CHECK(check);
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == INI) {
        CHECK_OK(netvm_import(ctx, TGT, "target", &rr));
        for (int round = 0; round < rounds; round++) {
            hole_open(&lb);
            for (int i = 0; i < nops; i++)
                run_op(round, 0, i, true);
            hole_close(&lb);
            for (int i = 0; i < nops; i++)
                run_op(round, 1, i, false);
        }
        printf("local %s over %s%s: %d rounds of %d operations, %d failed with NETVM_ERR_FAULT as they should\n",
               argv[1], info.link, netvm_rseg_is_mapped(rr) ? " (mapped)" : "", rounds, nops, faults_seen);
        CHECK_OK(netvm_release(rr));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (seg)
        CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    if (!shared)
        free(treg);
    free(check);
    return 0;
}
