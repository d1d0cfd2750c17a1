/* Every path of an operation against exported memory that goes away behind
 * netvm's back. Rank 0 exports a region of ordinary memory (fault.h) whose
 * middle part (the hole) it takes away and brings back between phases;
 * rank 1 runs the same table of operations in each phase:
 *
 *   put, put_nb (+ flush), get, get_nb, put_imm, every atomic (blocking and
 *   nonblocking), put / get / atomic with notifications, put with signal
 *   (blocking and nonblocking; data or signal word in the hole), active
 *   messages whose payload the target's handler lands with netvm_am_recv
 *   (requests with an eager payload, answered with the landing's status;
 *   one-way messages of every size, eager, shm rendezvous and tcp direct
 *   landing, whose landing status rank 0 checks; the sender's own status
 *   may say NETVM_ERR_FAULT too, as on shm, where it learns how the copy
 *   went): 8 B .. 1 MiB, outside the hole, inside it, and straddling either
 *   of its edges.
 *
 * With the hole open, an operation that touches it returns NETVM_ERR_FAULT
 * (a nonblocking one completes with it, or the next flush reports it,
 * once); every other one succeeds with the right data. With the hole
 * closed again everything succeeds. Rank 1 keeps a shadow of what the
 * region must hold (exported, so rank 0 compares its own memory with it
 * after every phase: no stray write, e.g. a signal applied after its data
 * failed, or data of a failed put beyond its range). Rank 0 also checks
 * its events: a completer or responder notification only for operations
 * that succeeded, and a write tripwire over the hole that no failed access
 * fires. The target never crashes and keeps serving.
 *
 *   paths MODE ROUNDS
 *
 * MODE: unmap | prot | ro | trunc (fault.h). In ro the hole can be read:
 * gets succeed, and so does an FCAA that does not add (it only reads).
 * A put with signal whose data goes into the hole fails and its signal is
 * not applied, on every link (over tcp the data fails at the target, which
 * then refuses the signal behind it: the put's gate).
 *
 * Runs on any link: NETVM_SHM_MAPPED=0 or the default shm link (exported
 * ordinary memory is reached with process_vm_readv/writev, atomics run at
 * the target as active messages), NETVM_LINKS=tcp (eager and direct
 * landing, inline and referenced get answers). */
#include "fault.h"

#define EXP 0
#define INI 1
#define KiB 1024ul
#define MiB (1024ul * 1024)
#define REG      (4 * MiB)
#define HOLE_OFF (2 * MiB)
#define HOLE_LEN (MiB + 64 * KiB)
#define HOLE_END (HOLE_OFF + HOLE_LEN)
#define MAXLEN   MiB
#define AM_LAND  5     /* request: land the payload, answer with the landing's status */
#define AM_SEND  6     /* one-way: land the payload, record the status */
#define AM_SYNC  7     /* request: answered at once (everything before it is handled) */
#define MAXSEQ   4096

enum kind {
    K_PUT, K_PUT_NB, K_GET, K_GET_NB, K_PUT_IMM, K_ATOMIC, K_ATOMIC_NB, K_PUT_NOTIFY, K_GET_NOTIFY,
    K_ATOMIC_NOTIFY, K_PUT_SIGNAL, K_PUT_SIGNAL_NB, K_AM_LAND, K_AM_SEND, NKINDS
};
static const char *kname[NKINDS] = { "put", "put_nb", "get", "get_nb", "put_imm", "atomic", "atomic_nb",
                                     "put_notify", "get_notify", "atomic_notify", "put_signal",
                                     "put_signal_nb", "am_request+recv", "am_send+recv" };

typedef struct {
    int    kind;
    size_t off, len;
    int    aop;      /* atomics */
    size_t sig;      /* signals: the word */
    int    sigop;
} op_t;

static op_t ops[1024];
static int nops;
static region_t reg;
static int mode;
static netvm_ctx_t *ctx;

/* --- the table ------------------------------------------------------------------- */

enum { P_OUT, P_IN, P_LO, P_HI };

static size_t pos_off(int pos, size_t len, int i)
{
    switch (pos) {
    case P_OUT:
        /* below the hole for the large, alternately above it for the rest */
        if (len > 64 * KiB || i % 2)
            return (size_t)(i % 16) * 64 * KiB + (size_t)(i * 8) % 64;
        return HOLE_END + (size_t)(i % 8) * 64 * KiB + (size_t)(i * 8) % 64;
    case P_IN: return HOLE_OFF + 4096 + (size_t)(i % 4) * 8;
    case P_LO: return HOLE_OFF - len / 2;
    default:   return HOLE_END - len / 2;
    }
}

static void add(int kind, int pos, size_t len, int aop, int sigpos, int sigop)
{
    CHECK(nops < (int)(sizeof ops / sizeof ops[0]));
    op_t *o = &ops[nops];
    o->kind = kind;
    o->len = len;
    o->off = pos_off(pos, len, nops);
    o->aop = aop;
    o->sig = sigpos == P_IN ? HOLE_OFF + 256 * KiB + (size_t)(nops % 32) * 8
                            : HOLE_OFF - 128 * KiB + (size_t)(nops % 32) * 8;
    o->sigop = sigop;
    CHECK(o->off + o->len <= REG);
    nops++;
}

static void build_table(void)
{
    static const size_t sizes[] = { 8, 100, 4096, 5000, 20000, 64 * KiB, MiB };
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (int k = K_PUT; k <= K_GET_NB; k++)
        for (int s = 0; s < nsizes; s++)
            for (int pos = P_OUT; pos <= P_HI; pos++)
                add(k, pos, sizes[s], 0, 0, 0);
    for (int pos = P_OUT; pos <= P_IN; pos++) {
        add(K_PUT_IMM, pos, 8, 0, 0, 0);
        for (int a = 0; a < NETVM_AOP_COUNT; a++)
            add(K_ATOMIC, pos, 8, a, 0, 0);
        add(K_ATOMIC_NB, pos, 8, NETVM_AOP_FADD, 0, 0);
        add(K_ATOMIC_NB, pos, 8, NETVM_AOP_CSWAP, 0, 0);
        add(K_ATOMIC_NOTIFY, pos, 8, NETVM_AOP_FADD, 0, 0);
    }
    static const size_t nsz[] = { 8, 4096, 64 * KiB };
    for (int s = 0; s < 3; s++)
        for (int pos = P_OUT; pos <= P_LO; pos++) {
            add(K_PUT_NOTIFY, pos, nsz[s], 0, 0, 0);
            add(K_GET_NOTIFY, pos, nsz[s], 0, 0, 0);
        }
    /* put with signal: data and word outside, word in, data in */
    static const size_t ssz[] = { 100, 64 * KiB };
    for (int op = NETVM_SIGNAL_SET; op <= NETVM_SIGNAL_ADD; op++)
        for (int s = 0; s < 2; s++)
            for (int k = K_PUT_SIGNAL; k <= K_PUT_SIGNAL_NB; k++) {
                add(k, P_OUT, ssz[s], 0, P_OUT, op);
                add(k, P_OUT, ssz[s], 0, P_IN, op);
                add(k, P_IN, ssz[s], 0, P_OUT, op);
            }
    /* payloads: eager everywhere (1000; 4096 eager on shm, whose eager
     * size is 16 KiB); beyond both links' eager sizes (100 KiB, 1 MiB). A request carries only an eager payload: see
     * am_large_request.c for why. */
    static const size_t asz[] = { 1000, 4096, 100 * KiB, MiB };
    for (int s = 0; s < 4; s++)
        for (int pos = P_OUT; pos <= P_HI; pos++) {
            if (asz[s] <= 1000)
                add(K_AM_LAND, pos, asz[s], 0, 0, 0);
            add(K_AM_SEND, pos, asz[s], 0, 0, 0);
        }
}

static bool writes(int kind) { return kind != K_GET && kind != K_GET_NB && kind != K_GET_NOTIFY; }

static uint8_t *shadow;          /* the initiator's: what the region must hold */
static uint64_t sh_word(size_t off) { uint64_t v; memcpy(&v, shadow + off, 8); return v; }
static void sh_set_word(size_t off, uint64_t v) { memcpy(shadow + off, &v, 8); }

/* An FCAA's compare: it adds for odd i. */
static uint64_t fcaa_compare(int i, uint64_t was) { return i % 2 ? was + 5 : (was ? was - 1 : 0); }

/* Does the FCAA o add? (Only the initiator knows, from its shadow; only
 * asked where the word stays readable.) */
static bool fcaa_adds(const op_t *o)
{
    int i = (int)(o - ops);
    if (!shadow)
        return true;
    uint64_t was = sh_word(o->off);
    return was <= fcaa_compare(i, was);
}

/* The status op i must end with while the hole is open (or closed). */
static netvm_status_t expected(const op_t *o, bool open)
{
    if (!open)
        return NETVM_OK;
    bool readable = mode == HOLE_RO;
    bool write = writes(o->kind);
    if (readable && o->aop == NETVM_AOP_FCAA && o->kind == K_ATOMIC)
        write = fcaa_adds(o);   /* one that does not add only reads */
    bool data = in_hole(&reg, o->off, o->len) && (write || !readable);
    bool sig = (o->kind == K_PUT_SIGNAL || o->kind == K_PUT_SIGNAL_NB) && in_hole(&reg, o->sig, 8);
    return data || sig ? NETVM_ERR_FAULT : NETVM_OK;
}

static uint64_t tag_of(int round, int phase, int i) { return (uint64_t)round << 40 | (uint64_t)phase << 32 | (uint64_t)i; }
static uint64_t seed_of(int round, int phase, int i) { return mix64(tag_of(round, phase, i) ^ 0x5eedull); }
static uint64_t hole_seed(int round) { return mix64((uint64_t)round ^ 0x401eull); }

/* --- the exporter ------------------------------------------------------------------- */

static _Atomic int am_status[MAXSEQ];   /* per sequence number: landing status + 1, 0 if none yet */
static _Atomic int am_handled;

struct pend {
    netvm_am_token_t token;
    int has_token;
    uint64_t seq;
    _Atomic int done;
};
static struct pend pends[MAXSEQ];

static void am_done(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    struct pend *pd = arg;
    (void)msg;
    atomic_store(&am_status[pd->seq], (int)st + 1);
    atomic_store(&pd->done, 1);
    if (pd->has_token)
        CHECK_OK(netvm_am_reply(c, &pd->token, st, NULL, 0, NULL, 0));
    atomic_fetch_add(&am_handled, 1);
}

static int am_land(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 3);
    uint64_t off = msg->args[0], len = msg->args[1], seq = msg->args[2];
    CHECK(seq < MAXSEQ && len == msg->len && off + len <= REG);
    CHECK(msg->has_token == (msg->id == AM_LAND));
    struct pend *pd = &pends[seq];
    pd->seq = seq;
    pd->has_token = msg->has_token;
    pd->token = msg->token;
    atomic_store(&pd->done, 0);
    netvm_status_t st = netvm_am_recv(c, msg, reg.base + off, am_done, pd);
    if (st != NETVM_OK && !atomic_load(&pd->done))
        FAILF("netvm_am_recv of message %" PRIu64 " refused: %s", seq, netvm_strerror(st));
    return NETVM_AM_DONE;
}

static int am_sync(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK_OK(netvm_am_reply(c, &msg->token, NETVM_OK, NULL, 0, NULL, 0));
    return NETVM_AM_DONE;
}

/* After a phase: the landings, the events and the memory. */
static void exporter_check(int round, int phase, netvm_rseg_t *shadow, netvm_tripwire_t *tw, uint8_t *copy)
{
    bool open = reg.open;
    /* every message was answered before the barrier (the one-way ones
     * through the sync request behind them) */
    int nland = 0;
    for (int i = 0; i < nops; i++) {
        if (ops[i].kind != K_AM_LAND && ops[i].kind != K_AM_SEND)
            continue;
        nland++;
        int got = atomic_load(&am_status[i]) - 1;
        if (got < 0)
            FAILF("round %d phase %d: message of op %d was not handled", round, phase, i);
        netvm_status_t want = expected(&ops[i], open);
        if ((netvm_status_t)got != want)
            FAILF("round %d phase %d: op %d (%s off %zu len %zu) landed with %s, wanted %s", round, phase, i,
                  kname[ops[i].kind], ops[i].off, ops[i].len, netvm_strerror((netvm_status_t)got),
                  netvm_strerror(want));
        atomic_store(&am_status[i], 0);
    }
    CHECK(atomic_load(&am_handled) == nland);
    atomic_store(&am_handled, 0);

    /* notifications: one per operation that succeeded and asked for it,
     * none for a failed one; the write tripwire over the hole fires only
     * when writes into it succeed */
    static uint8_t seen[1024];
    memset(seen, 0, sizeof seen);
    int trips = 0;
    netvm_event_t e;
    static evbuf_t eb;
    while (evbuf_poll(ctx, &eb, &e)) {
        if (e.type == NETVM_EV_TRIPWIRE && e.id == netvm_tripwire_id(tw)) {
            trips++;
            continue;
        }
        if (e.type != NETVM_EV_COMPLETER && e.type != NETVM_EV_RESPONDER)
            FAILF("round %d phase %d: unexpected event type %u", round, phase, e.type);
        int i = (int)(e.value & 0xffffffffu);
        if (e.value != tag_of(round, phase, i) || i >= nops || e.rank != INI)
            FAILF("round %d phase %d: event with a foreign tag %#" PRIx64, round, phase, e.value);
        const op_t *o = &ops[i];
        int want_type = o->kind == K_GET_NOTIFY ? NETVM_EV_RESPONDER : NETVM_EV_COMPLETER;
        if ((o->kind != K_PUT_NOTIFY && o->kind != K_GET_NOTIFY && o->kind != K_ATOMIC_NOTIFY) ||
            e.type != want_type || seen[i]++)
            FAILF("round %d phase %d: event type %u for op %d (%s) not wanted", round, phase, e.type, i,
                  kname[o->kind]);
        if (expected(o, open) != NETVM_OK)
            FAILF("round %d phase %d: event type %u for op %d (%s off %zu len %zu), which failed", round, phase,
                  e.type, i, kname[o->kind], o->off, o->len);
        if (e.addr != (uint64_t)(uintptr_t)(reg.base + o->off) || e.len != o->len)
            FAILF("round %d phase %d: event of op %d names %#" PRIx64 "+%" PRIu64, round, phase, i, e.addr, e.len);
    }
    for (int i = 0; i < nops; i++) {
        const op_t *o = &ops[i];
        if ((o->kind == K_PUT_NOTIFY || o->kind == K_GET_NOTIFY || o->kind == K_ATOMIC_NOTIFY) &&
            expected(o, open) == NETVM_OK && !seen[i])
            FAILF("round %d phase %d: no notification for op %d (%s)", round, phase, i, kname[o->kind]);
    }
    /* (an FCAA that does not add succeeds on read-only memory, and counts as
     * a write for tripwires, as every atomic does) */
    int may = 0;
    for (int i = 0; i < nops; i++)
        may += mode == HOLE_RO && ops[i].kind == K_ATOMIC && ops[i].aop == NETVM_AOP_FCAA && in_hole(&reg, ops[i].off, 8);
    if (open && trips > may)
        FAILF("round %d: the hole's write tripwire fired %d times while no write into it could succeed",
              round, trips);
    if (!open && !trips)
        FAILF("round %d: the hole's write tripwire never fired while writes into it succeeded", round);

    /* the memory: what the initiator's shadow says, where there is memory */
    CHECK_OK(netvm_get(ctx, copy, shadow, 0, REG, 0));
    long d = first_diff(reg.base, copy, HOLE_OFF);
    if (d < 0 && (d = first_diff(reg.base + HOLE_END, copy + HOLE_END, REG - HOLE_END)) >= 0)
        d += (long)HOLE_END;
    if (d >= 0)
        FAILF("round %d phase %d: byte %ld of the region is %#x, the shadow says %#x", round, phase, d,
              reg.base[d], copy[d]);
    if ((!open || mode == HOLE_RO) && (d = first_diff(reg.base + HOLE_OFF, copy + HOLE_OFF, HOLE_LEN)) >= 0)
        FAILF("round %d phase %d: byte %ld of the hole is %#x, the shadow says %#x", round, phase,
              (long)HOLE_OFF + d, reg.base[HOLE_OFF + d], copy[HOLE_OFF + d]);
}

/* --- the initiator -------------------------------------------------------------------- */

static uint8_t *src, *dst;
static netvm_rseg_t *rr;
static evbuf_t ieb;
static int faults_seen, am_send_faults, am_send_oks;

/* The requester event of tag (and, for a get that succeeded, its completer). */
static netvm_status_t requester_status(uint64_t tag, bool want_completer)
{
    bool req = false, comp = false;
    netvm_status_t st = NETVM_OK;
    while (!req || (want_completer && st == NETVM_OK && !comp)) {
        netvm_event_t e;
        netvm_status_t w = evbuf_next(ctx, &ieb, &e, 30000);
        if (w != NETVM_OK)
            FAILF("no event for tag %#" PRIx64 " within 30 s: %s", tag, netvm_strerror(w));
        if (e.value != tag || e.rank != EXP)
            FAILF("an event of type %u for tag %#" PRIx64 " while waiting for %#" PRIx64, e.type, e.value, tag);
        if (e.type == NETVM_EV_REQUESTER && !req) {
            req = true;
            st = (netvm_status_t)e.status;
        } else if (e.type == NETVM_EV_COMPLETER && want_completer && !comp) {
            comp = true;
        } else {
            FAILF("an event of type %u for tag %#" PRIx64 " not wanted", e.type, tag);
        }
    }
    if (comp && st != NETVM_OK)
        FAILF("a completer event for tag %#" PRIx64 ", whose get failed", tag);
    return st;
}

static uint64_t apply(int op, uint64_t old, uint64_t operand, uint64_t compare)
{
    switch (op) {
    case NETVM_AOP_ADD:
    case NETVM_AOP_FADD:  return old + operand;
    case NETVM_AOP_SWAP:  return operand;
    case NETVM_AOP_CSWAP: return old == compare ? operand : old;
    default:              return old <= compare ? old + operand : old;
    }
}

/* A failed write may have written some of its mapped bytes: put the
 * shadow's back there (that must work). */
static void repair(size_t off, size_t len)
{
    size_t end = off + len;
    if (off < HOLE_OFF)
        CHECK_OK(netvm_put(ctx, rr, off, shadow + off, (end < HOLE_OFF ? end : HOLE_OFF) - off, 0));
    if (end > HOLE_END) {
        size_t a = off > HOLE_END ? off : HOLE_END;
        CHECK_OK(netvm_put(ctx, rr, a, shadow + a, end - a, 0));
    }
}

static netvm_status_t flushed(netvm_status_t st, netvm_req_t **q)
{
    if (st == NETVM_OK && *q)
        st = netvm_wait(q);
    if (st == NETVM_OK)
        st = netvm_flush(ctx, EXP);
    if (st != NETVM_OK)
        CHECK_OK(netvm_flush(ctx, EXP));   /* reported once */
    return st;
}

static void run_op(int round, int phase, int i, bool open)
{
    const op_t *o = &ops[i];
    netvm_status_t want = expected(o, open), st = NETVM_ERR_SYS;
    uint64_t tag = tag_of(round, phase, i), seed = seed_of(round, phase, i);
    netvm_req_t *q = NULL;
    fill_pattern(src, o->len, seed);
    uint64_t operand = seed | 1, compare = 0, old = 0x0badull, was = 0;
    if (o->len == 8)
        was = sh_word(o->off);
    if (o->aop == NETVM_AOP_CSWAP)
        compare = i % 2 ? was : was + 1;
    else if (o->aop == NETVM_AOP_FCAA)
        compare = fcaa_compare(i, was);

    switch (o->kind) {
    case K_PUT:    st = netvm_put(ctx, rr, o->off, src, o->len, 0); break;
    case K_PUT_NB: st = flushed(netvm_put_nb(ctx, rr, o->off, src, o->len, 0, &q), &q); break;
    case K_GET:    st = netvm_get(ctx, dst, rr, o->off, o->len, 0); break;
    case K_GET_NB:
        st = netvm_get_nb(ctx, dst, rr, o->off, o->len, 0, &q);
        if (st == NETVM_OK && q)
            st = netvm_wait(&q);
        break;
    case K_PUT_IMM: st = netvm_put_imm(ctx, rr, o->off, operand, 0); memcpy(src, &operand, 8); break;
    case K_ATOMIC:
        st = netvm_atomic(ctx, rr, o->off, o->aop, operand, compare, o->aop == NETVM_AOP_ADD ? NULL : &old);
        break;
    case K_ATOMIC_NB:
        st = netvm_atomic_nb(ctx, rr, o->off, o->aop, operand, compare, &old, &q);
        if (st == NETVM_OK && q)
            st = netvm_wait(&q);
        break;
    case K_PUT_NOTIFY:
        st = netvm_put_notify(ctx, rr, o->off, src, o->len, NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER, tag);
        if (st == NETVM_OK)
            st = requester_status(tag, false);
        break;
    case K_GET_NOTIFY:
        st = netvm_get_notify(ctx, dst, rr, o->off, o->len,
                              NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER | NETVM_F_NOTIFY_RESPONDER, tag);
        if (st == NETVM_OK)
            st = requester_status(tag, true);
        break;
    case K_ATOMIC_NOTIFY:
        st = netvm_atomic_notify(ctx, rr, o->off, o->aop, operand, 0, &old,
                                 NETVM_F_NOTIFY_REQUESTER | NETVM_F_NOTIFY_COMPLETER, tag);
        if (st == NETVM_OK)
            st = requester_status(tag, false);
        break;
    case K_PUT_SIGNAL:
        st = netvm_put_signal(ctx, rr, o->off, src, o->len, rr, o->sig, operand, o->sigop, 0);
        break;
    case K_PUT_SIGNAL_NB:
        st = flushed(netvm_put_signal_nb(ctx, rr, o->off, src, o->len, rr, o->sig, operand, o->sigop, 0), &q);
        break;
    case K_AM_LAND: {
        uint64_t a[3] = { o->off, o->len, (uint64_t)i };
        netvm_am_result_t res;
        memset(&res, 0, sizeof res);
        st = netvm_am_request(ctx, EXP, AM_LAND, a, 3, src, o->len, NULL, 0, &res, NULL);
        if (st == NETVM_OK) {
            st = res.status;
            CHECK(res.peer == EXP && res.len == 0);
        }
        break;
    }
    case K_AM_SEND: {
        uint64_t a[3] = { o->off, o->len, (uint64_t)i };
        netvm_status_t s1 = netvm_am_send(ctx, EXP, AM_SEND, a, 3, src, o->len, NULL);
        /* the sender's own status: the link's (the receiver has the bytes,
         * or failed to take them); the landing's status is the target's */
        if (want != NETVM_OK)
            s1 == NETVM_ERR_FAULT ? am_send_faults++ : am_send_oks++;
        if (s1 != NETVM_OK && (want == NETVM_OK || s1 != NETVM_ERR_FAULT))
            FAILF("round %d phase %d op %d: netvm_am_send returned %s, the landing was to end with %s", round,
                  phase, i, netvm_strerror(s1), netvm_strerror(want));
        netvm_am_result_t res;
        netvm_status_t s2 = netvm_am_request(ctx, EXP, AM_SYNC, NULL, 0, NULL, 0, NULL, 0, &res, NULL);
        if (s2 != NETVM_OK)
            FAILF("round %d phase %d op %d: the request behind %s off %zu len %zu (sent: %s) returned %s", round,
                  phase, i, kname[o->kind], o->off, o->len, netvm_strerror(s1), netvm_strerror(s2));
        st = want;   /* the target checks the landing's status */
        break;
    }
    }
    if (st != want)
        FAILF("round %d phase %d op %d: %s off %zu len %zu%s returned %s, wanted %s", round, phase, i,
              kname[o->kind], o->off, o->len,
              (o->kind == K_PUT_SIGNAL || o->kind == K_PUT_SIGNAL_NB) ? (in_hole(&reg, o->sig, 8) ? " (word in the hole)" : "") : "",
              netvm_strerror(st), netvm_strerror(want));
    if (st != NETVM_OK)
        faults_seen++;

    /* the shadow, and the data of what succeeded */
    long d;
    switch (o->kind) {
    case K_PUT: case K_PUT_NB: case K_PUT_IMM: case K_PUT_NOTIFY: case K_AM_LAND: case K_AM_SEND:
        if (st == NETVM_OK)
            memcpy(shadow + o->off, src, o->len);
        else
            repair(o->off, o->len);
        break;
    case K_GET: case K_GET_NB: case K_GET_NOTIFY:
        if (st == NETVM_OK && (d = first_diff(dst, shadow + o->off, o->len)) >= 0)
            FAILF("round %d phase %d op %d: %s off %zu len %zu: byte %ld is %#x, wanted %#x", round, phase, i,
                  kname[o->kind], o->off, o->len, d, dst[d], shadow[o->off + d]);
        break;
    case K_ATOMIC: case K_ATOMIC_NB: case K_ATOMIC_NOTIFY:
        if (st != NETVM_OK)
            break;
        if (o->aop != NETVM_AOP_ADD && old != was)
            FAILF("round %d phase %d op %d: %s (op %d) at %zu gave %#" PRIx64 ", the word held %#" PRIx64, round,
                  phase, i, kname[o->kind], o->aop, o->off, old, was);
        sh_set_word(o->off, apply(o->aop, was, operand, compare));
        break;
    case K_PUT_SIGNAL: case K_PUT_SIGNAL_NB:
        if (st == NETVM_OK) {
            memcpy(shadow + o->off, src, o->len);
            uint64_t w = sh_word(o->sig);
            sh_set_word(o->sig, o->sigop == NETVM_SIGNAL_SET ? operand : w + operand);
        } else if (!in_hole(&reg, o->off, o->len)) {
            repair(o->off, o->len);   /* the data may have landed; the word must not have changed */
        }
        break;
    }
}

int main(int argc, char **argv)
{
    CHECK(argc == 3);
    mode = hole_mode_parse(argv[1]);
    int rounds = atoi(argv[2]);
    CHECK(rounds > 0);
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    build_table();
    CHECK(nops <= MAXSEQ);

    region_init(&reg, REG, HOLE_OFF, HOLE_LEN, mode);
    fill_pattern(reg.base, REG, 0x1234);   /* both sides: the initial contents */
    netvm_seg_t *sreg = NULL, *ssh = NULL;
    netvm_tripwire_t *tw = NULL;
    uint8_t *copy = NULL;
    if (rank == EXP) {
        CHECK_OK(netvm_export(ctx, reg.base, REG, NETVM_RWA, "region", &sreg));
        CHECK_OK(netvm_am_register(ctx, AM_LAND, am_land, NULL));
        CHECK_OK(netvm_am_register(ctx, AM_SEND, am_land, NULL));
        CHECK_OK(netvm_am_register(ctx, AM_SYNC, am_sync, NULL));
        CHECK_OK(netvm_tripwire_arm(ctx, reg.base + HOLE_OFF, HOLE_LEN, NETVM_TRIP_WRITE, 0, NULL, &tw));
        copy = malloc(REG);
        CHECK(copy);
    } else {
        shadow = reg.base;   /* the initiator's region is its shadow */
        CHECK_OK(netvm_export(ctx, shadow, REG, NETVM_READ, "shadow", &ssh));
        src = malloc(MAXLEN);
        dst = malloc(MAXLEN);
        CHECK(src && dst);
    }
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *rsh = NULL;
    if (rank == EXP)
        CHECK_OK(netvm_import(ctx, INI, "shadow", &rsh));
    else
        CHECK_OK(netvm_import(ctx, EXP, "region", &rr));
    int nfault_ops = 0;
    for (int i = 0; i < nops; i++)
        nfault_ops += expected(&ops[i], true) != NETVM_OK;
    CHECK(nfault_ops > 0);

    for (int round = 0; round < rounds; round++) {
        for (int phase = 0; phase < 2; phase++) {
            bool open = phase == 0;
            CHECK_OK(netvm_barrier(ctx));
            if (rank == EXP) {
                if (open) {
                    hole_open(&reg);
                } else {
                    hole_close(&reg);
                    fill_pattern(reg.base + HOLE_OFF, HOLE_LEN, hole_seed(round));
                }
            } else {
                reg.open = open;   /* the initiator's view of the exporter's hole */
                if (!open)
                    fill_pattern(shadow + HOLE_OFF, HOLE_LEN, hole_seed(round));
            }
            CHECK_OK(netvm_barrier(ctx));
            if (rank == INI) {
                for (int i = 0; i < nops; i++)
                    run_op(round, phase, i, open);
                netvm_event_t e;
                if (evbuf_poll(ctx, &ieb, &e))
                    FAILF("round %d phase %d: a stray event of type %u tag %#" PRIx64, round, phase, e.type, e.value);
            }
            CHECK_OK(netvm_barrier(ctx));
            if (rank == EXP)
                exporter_check(round, phase, rsh, tw, copy);
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == INI)
        printf("paths %s: %d rounds of %d operations, %d failed with NETVM_ERR_FAULT as they should; "
               "am_send's own status on a failed landing: %d NETVM_ERR_FAULT, %d NETVM_OK\n",
               argv[1], rounds, nops, faults_seen, am_send_faults, am_send_oks);
    if (rank == EXP) {
        CHECK_OK(netvm_tripwire_disarm(tw));
        CHECK_OK(netvm_release(rsh));
        CHECK_OK(netvm_unexport(sreg));
    } else {
        CHECK_OK(netvm_release(rr));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (ssh)
        CHECK_OK(netvm_unexport(ssh));
    CHECK_OK(netvm_finalize(ctx));
    free(copy);
    free(src);
    free(dst);
    return 0;
}
