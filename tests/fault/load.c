/* The target under load: two peers hammer rank 0's exported region with
 * puts, gets, atomics, puts with signal and active messages whose payloads
 * rank 0's handler lands with netvm_am_recv, while rank 0 takes the middle
 * of the region away and brings it back, TOGGLES times (fault.h's modes).
 *
 * No clock decides anything. Each peer counts the operations it finished
 * (a word rank 0 reads with netvm_get) and logs each one's status and
 * whether it touched the hole. Rank 0 changes the hole only after every
 * peer finished PER more operations, and notes, per peer, the operations
 * that ran entirely on one side of a change: those issued after the
 * counter read that followed the change (index >= read + 2) up to the
 * count read before the next one. At the end it reads the logs: in every
 * such window an operation that touched the hole failed with
 * NETVM_ERR_FAULT if the hole was open and succeeded if not; the peers
 * themselves check that every operation away from the hole succeeded and
 * that every one that succeeded moved the right bytes (a shadow of their
 * part of the region: what they wrote, learnt again from a get after a
 * failure; bytes of the hole may read as zeros once it came back, in the
 * modes that lose its contents). A landing of an active message is
 * checked by rank 0 itself against the state the hole had throughout it
 * (a sequence number of the changes, read before the handler and after
 * the landing, under the lock the changes take). Rank 0 must survive it
 * all and serve the last window without a failure.
 *
 *   load MODE TOGGLES PER MAXLEN
 */
#include "fault.h"

#include <pthread.h>

#define EXP 0
#define KiB 1024ul
#define MiB (1024ul * 1024)
#define REG      (4 * MiB)
#define HOLE_OFF (1 * MiB)
#define HOLE_LEN (2 * MiB)
#define LOGCAP   (1u << 20)
#define AM_ID    9
#define MAXOPS   (LOGCAP - 1)

/* Peer j (0 or 1) works on [data_lo(j), +1 MiB): half outside the hole,
 * half inside; its messages land in [am_lo(j), +256 KiB) outside and
 * [am_hole(j), +256 KiB) inside. */
static size_t data_lo(int j) { return j == 0 ? 512 * KiB : 2560 * KiB; }
static size_t am_lo(int j)   { return j == 0 ? 0 : 3840 * KiB; }
static size_t am_hole(int j) { return j == 0 ? 1536 * KiB : 2048 * KiB; }
#define DATA_LEN MiB
#define AM_LEN   (256 * KiB)

enum { O_PUT, O_GET, O_FADD, O_SWAP_NB, O_SIGNAL, O_AM, NOPS };
static const char *oname[NOPS] = { "put", "get", "fadd", "swap_nb", "put_signal", "am_send" };

/* Log entries: status << 1 | touched the hole */
static uint8_t *oplog;

static netvm_ctx_t *ctx;
static region_t reg;
static int mode;

/* --- rank 0 ---------------------------------------------------------------------- */

static pthread_mutex_t hole_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t hole_seq;   /* odd while the hole changes; (seq / 2) odd: open */
static _Atomic uint64_t am_known_ok, am_known_fault, am_unknown;

struct landing {
    uint64_t seq0, off, len, seed;
};

static void am_landed(netvm_ctx_t *c, netvm_am_msg_t *msg, netvm_status_t st, void *arg)
{
    struct landing *l = arg;
    (void)c;
    (void)msg;
    if (st != NETVM_OK && st != NETVM_ERR_FAULT)
        FAILF("a landing ended with %s", netvm_strerror(st));
    pthread_mutex_lock(&hole_lock);
    uint64_t seq1 = atomic_load(&hole_seq);
    if (seq1 == l->seq0 && !(seq1 & 1)) {
        bool open = (seq1 / 2) % 2 == 1;
        netvm_status_t want = open && in_hole(&reg, l->off, l->len) ? NETVM_ERR_FAULT : NETVM_OK;
        if (st != want)
            FAILF("a landing at %" PRIu64 "+%" PRIu64 " with the hole %s all along ended with %s", l->off,
                  l->len, open ? "open" : "closed", netvm_strerror(st));
        if (st == NETVM_OK) {
            /* the memory is there: the hole cannot change while we hold the lock */
            static uint8_t want_bytes[AM_LEN];
            fill_pattern(want_bytes, l->len, l->seed);
            long d = first_diff(reg.base + l->off, want_bytes, l->len);
            if (d >= 0)
                FAILF("a landing at %" PRIu64 "+%" PRIu64 " succeeded, but byte %ld is wrong", l->off, l->len, d);
            am_known_ok++;
        } else {
            am_known_fault++;
        }
    } else {
        am_unknown++;
    }
    pthread_mutex_unlock(&hole_lock);
    free(l);
}

static int am_handler(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    CHECK(msg->nargs == 3 && msg->len == msg->args[1] && msg->args[0] + msg->args[1] <= REG);
    struct landing *l = malloc(sizeof *l);
    CHECK(l);
    l->seq0 = atomic_load(&hole_seq);
    l->off = msg->args[0];
    l->len = msg->args[1];
    l->seed = msg->args[2];
    netvm_status_t st = netvm_am_recv(c, msg, reg.base + l->off, am_landed, l);
    if (st != NETVM_OK && st != NETVM_ERR_FAULT)
        FAILF("netvm_am_recv refused: %s", netvm_strerror(st));
    return NETVM_AM_DONE;
}

static void toggle(void)
{
    pthread_mutex_lock(&hole_lock);
    atomic_fetch_add(&hole_seq, 1);
    if (reg.open)
        hole_close(&reg);
    else
        hole_open(&reg);
    atomic_fetch_add(&hole_seq, 1);
    pthread_mutex_unlock(&hole_lock);
}

typedef struct {
    uint64_t from, to;   /* operation indices, both included */
    bool open;
} window_t;

static void exporter(int npeers, int toggles, uint64_t per)
{
    netvm_rseg_t *ctl[8], *lg[8];
    for (int j = 0; j < npeers; j++) {
        CHECK_OK(netvm_import(ctx, j + 1, "ctl", &ctl[j]));
        CHECK_OK(netvm_import(ctx, j + 1, "log", &lg[j]));
    }
    window_t *win = calloc((size_t)(toggles + 1) * (size_t)npeers, sizeof *win);
    CHECK(win);
    uint64_t from[8], base[8];
    for (int j = 0; j < npeers; j++) {
        from[j] = 1;
        base[j] = 0;
    }
    int nwin = 0;
    for (int t = 0; t <= toggles; t++) {
        /* every peer finishes `per` operations in this state */
        uint64_t c[8];
        for (int j = 0; j < npeers; j++) {
            unsigned spins = 0;
            do {
                CHECK_OK(netvm_get(ctx, &c[j], ctl[j], 0, 8, 0));
                if (++spins % 16 == 0)
                    sched_yield();
            } while (c[j] < base[j] + per);
        }
        for (int j = 0; j < npeers; j++)
            win[nwin++] = (window_t){ from[j], t == toggles ? UINT64_MAX : c[j], reg.open };
        if (t == toggles)
            break;
        toggle();
        for (int j = 0; j < npeers; j++) {
            CHECK_OK(netvm_get(ctx, &base[j], ctl[j], 0, 8, 0));
            from[j] = base[j] + 2;
        }
    }
    CHECK(!reg.open);
    uint64_t one = 1;
    for (int j = 0; j < npeers; j++)
        CHECK_OK(netvm_put(ctx, ctl[j], 8, &one, 8, 0));
    CHECK_OK(netvm_barrier(ctx));   /* the peers stopped */

    uint8_t *lbuf = malloc(LOGCAP);
    CHECK(lbuf);
    uint64_t checked_fault = 0, checked_ok = 0, total = 0;
    for (int j = 0; j < npeers; j++) {
        uint64_t n;
        CHECK_OK(netvm_get(ctx, &n, ctl[j], 0, 8, 0));
        CHECK_OK(netvm_get(ctx, lbuf, lg[j], 0, LOGCAP, 0));
        total += n;
        for (int w = j; w < nwin; w += npeers) {
            uint64_t to = win[w].to < n ? win[w].to : n;
            for (uint64_t k = win[w].from; k <= to; k++) {
                if (!(lbuf[k] & 1))
                    continue;   /* away from the hole: the peer checked it */
                netvm_status_t st = (netvm_status_t)(lbuf[k] >> 1);
                netvm_status_t want = win[w].open ? NETVM_ERR_FAULT : NETVM_OK;
                if (st != want)
                    FAILF("peer %d's operation %" PRIu64 " touched the hole while it was %s all along, "
                          "and ended with %s", j + 1, k, win[w].open ? "open" : "closed", netvm_strerror(st));
                win[w].open ? checked_fault++ : checked_ok++;
            }
        }
    }
    printf("load %s: %d changes of the hole under %" PRIu64 " operations of %d peers; %" PRIu64
           " touched it while it was open all along (NETVM_ERR_FAULT), %" PRIu64 " while closed (success); "
           "landings: %" PRIu64 " failed and %" PRIu64 " succeeded as the hole said, %" PRIu64 " during a change\n",
           mode == HOLE_UNMAP ? "unmap" : mode == HOLE_PROT ? "prot" : mode == HOLE_RO ? "ro" : "trunc", toggles,
           total, npeers, checked_fault, checked_ok, am_known_fault, am_known_ok, am_unknown);
    /* each window with the hole open has per - 1 operations that ran
     * entirely in it; about half of all operations touch the hole */
    CHECK(checked_fault >= (uint64_t)toggles / 2);
    CHECK(checked_ok >= (uint64_t)toggles / 2);
    free(lbuf);
    free(win);
    for (int j = 0; j < npeers; j++) {
        CHECK_OK(netvm_release(ctl[j]));
        CHECK_OK(netvm_release(lg[j]));
    }
}

/* --- the peers ------------------------------------------------------------------- */

static uint8_t *shadow;     /* this peer's idea of [data_lo, +DATA_LEN) */
static uint8_t *known;      /* per byte: shadow is right */
static uint8_t *src, *dst;

static uint64_t rnd(uint64_t *s) { *s += 0x9e3779b97f4a7c15ull; return mix64(*s); }

/* A length from 8 bytes to maxlen, most of them small. */
static size_t rnd_len(uint64_t *s, size_t maxlen)
{
    size_t cap = 8ul << (rnd(s) % 16);
    if (cap > maxlen)
        cap = maxlen;
    return 1 + rnd(s) % cap;
}

/* Bytes read by a get that succeeded: what the shadow knows must be there
 * (or zeros where the hole came back empty); then they are known. */
static void learn(int j, size_t off, size_t len, const uint8_t *got, uint64_t k)
{
    size_t lo = data_lo(j);
    for (size_t i = 0; i < len; i++) {
        size_t s = off - lo + i;
        if (known[s] && got[i] != shadow[s] &&
            !(got[i] == 0 && in_hole(&reg, off + i, 1) && !hole_keeps(mode)))
            FAILF("operation %" PRIu64 ": byte %zu of the region reads %#x, it must be %#x", k, off + i, got[i],
                  shadow[s]);
        shadow[s] = got[i];
        known[s] = 1;
    }
}

static void forget(int j, size_t off, size_t len)
{
    memset(known + (off - data_lo(j)), 0, len);
}

static void peer(int rank, size_t maxlen)
{
    int j = rank - 1;
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, EXP, "region", &r));
    volatile uint64_t *ctl = (volatile uint64_t *)reg.base;   /* [0] count, [1] stop */
    size_t lo = data_lo(j);
    /* the region starts as fill_pattern(0x1234) at rank 0 */
    uint8_t *init = malloc(REG);
    CHECK(init);
    fill_pattern(init, REG, 0x1234);
    memcpy(shadow, init + lo, DATA_LEN);
    memset(known, 1, DATA_LEN);
    free(init);

    uint64_t s = mix64(0xfa17 + (uint64_t)rank);
    uint64_t k = 0, faults = 0;
    while (!__atomic_load_n(&ctl[1], __ATOMIC_ACQUIRE)) {
        k++;
        if (k > MAXOPS)
            FAILF("%d operations and rank 0 did not stop us", MAXOPS);
        int op = (int)(rnd(&s) % 100);
        op = op < 30 ? O_PUT : op < 55 ? O_GET : op < 65 ? O_FADD : op < 72 ? O_SWAP_NB : op < 82 ? O_SIGNAL : O_AM;
        size_t len = op == O_FADD || op == O_SWAP_NB ? 8 : rnd_len(&s, maxlen);
        size_t off = lo + (size_t)(rnd(&s) % (DATA_LEN - len + 1));
        if (op == O_FADD || op == O_SWAP_NB)
            off &= ~(size_t)7;
        size_t sig = (lo + (size_t)(rnd(&s) % DATA_LEN)) & ~(size_t)7;
        if (op == O_SIGNAL) {
            /* the data outside the hole: on tcp a put with signal whose
             * data fails is reported late (see CMakeLists.txt) */
            size_t half = DATA_LEN / 2, out = j == 0 ? lo : lo + half;
            if (len > half)
                len = half;
            off = out + (size_t)(rnd(&s) % (half - len + 1));
        }
        uint64_t seed = rnd(&s), operand = seed | 1, old = 0;
        bool writes = op != O_GET;
        bool touched = (in_hole(&reg, off, len) && (writes || mode != HOLE_RO)) ||
                       (op == O_SIGNAL && in_hole(&reg, sig, 8));
        netvm_status_t st = NETVM_ERR_SYS;
        netvm_req_t *q = NULL;
        fill_pattern(src, len, seed);
        switch (op) {
        case O_PUT: st = netvm_put(ctx, r, off, src, len, 0); break;
        case O_GET: st = netvm_get(ctx, dst, r, off, len, 0); break;
        case O_FADD: st = netvm_atomic(ctx, r, off, NETVM_AOP_FADD, operand, 0, &old); break;
        case O_SWAP_NB:
            st = netvm_atomic_nb(ctx, r, off, NETVM_AOP_SWAP, operand, 0, &old, &q);
            if (st == NETVM_OK && q)
                st = netvm_wait(&q);
            break;
        case O_SIGNAL:
            st = netvm_put_signal(ctx, r, off, src, len, r, sig, operand, NETVM_SIGNAL_SET, 0);
            break;
        case O_AM: {
            /* into this peer's landing areas; rank 0 checks it */
            bool hole = rnd(&s) % 2;
            if (len > AM_LEN)
                len = AM_LEN;
            off = (hole ? am_hole(j) : am_lo(j)) + (size_t)(rnd(&s) % (AM_LEN - len + 1));
            fill_pattern(src, len, seed);
            uint64_t a[3] = { off, len, seed };
            st = netvm_am_send(ctx, EXP, AM_ID, a, 3, src, len, NULL);
            touched = false;   /* the landing is rank 0's to check */
            if (st == NETVM_ERR_FAULT && hole)
                st = NETVM_OK; /* the sender may learn the landing's failure (shm) */
            break;
        }
        }
        if (st != NETVM_OK && (!touched || st != NETVM_ERR_FAULT))
            FAILF("operation %" PRIu64 ": %s at %zu+%zu%s returned %s", k, oname[op], off, len,
                  touched ? " (touching the hole)" : " (away from the hole)", netvm_strerror(st));
        faults += st != NETVM_OK;
        /* the shadow */
        switch (op) {
        case O_PUT:
            if (st == NETVM_OK) {
                memcpy(shadow + (off - lo), src, len);
                memset(known + (off - lo), 1, len);
            } else {
                forget(j, off, len);
            }
            break;
        case O_GET:
            if (st == NETVM_OK)
                learn(j, off, len, dst, k);
            break;
        case O_FADD:
        case O_SWAP_NB:
            if (st == NETVM_OK) {
                uint8_t ob[8];
                memcpy(ob, &old, 8);
                learn(j, off, 8, ob, k);
                uint64_t nv = op == O_FADD ? old + operand : operand;
                memcpy(shadow + (off - lo), &nv, 8);
            }
            break;
        case O_SIGNAL:
            if (st == NETVM_OK) {
                memcpy(shadow + (off - lo), src, len);
                memset(known + (off - lo), 1, len);
                memcpy(shadow + (sig - lo), &operand, 8);
                memset(known + (sig - lo), 1, 8);
            } else {
                forget(j, off, len);   /* the data landed, or some of it */
            }
            break;
        }
        oplog[k] = (uint8_t)(st << 1 | touched);
        __atomic_store_n(&ctl[0], k, __ATOMIC_RELEASE);
    }
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_barrier(ctx));
    (void)faults;
}

int main(int argc, char **argv)
{
    CHECK(argc == 5);
    mode = hole_mode_parse(argv[1]);
    int toggles = atoi(argv[2]);
    uint64_t per = strtoull(argv[3], NULL, 0);
    size_t maxlen = strtoull(argv[4], NULL, 0);
    CHECK(toggles > 0 && toggles % 2 == 0 && per >= 2 && maxlen >= 8 && maxlen <= DATA_LEN / 2);
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    CHECK(size == 3);
    netvm_seg_t *s1 = NULL, *s2 = NULL;
    if (rank == EXP) {
        region_init(&reg, REG, HOLE_OFF, HOLE_LEN, mode);
        fill_pattern(reg.base, REG, 0x1234);
        CHECK_OK(netvm_export(ctx, reg.base, REG, NETVM_RWA, "region", &s1));
        CHECK_OK(netvm_am_register(ctx, AM_ID, am_handler, NULL));
    } else {
        /* the geometry of rank 0's region, for in_hole; our own memory is ctl */
        region_init(&reg, 4096, 0, 0, HOLE_UNMAP);
        memset(reg.base, 0, 4096);
        reg.hole_off = HOLE_OFF;
        reg.hole_len = HOLE_LEN;
        oplog = calloc(LOGCAP, 1);
        shadow = malloc(DATA_LEN);
        known = malloc(DATA_LEN);
        src = malloc(DATA_LEN);
        dst = malloc(DATA_LEN);
        CHECK(oplog && shadow && known && src && dst);
        CHECK_OK(netvm_export(ctx, reg.base, 4096, NETVM_RW, "ctl", &s1));
        CHECK_OK(netvm_export(ctx, oplog, LOGCAP, NETVM_READ, "log", &s2));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == EXP) {
        exporter(size - 1, toggles, per);
    } else {
        peer(rank, maxlen);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(s1));
    if (s2)
        CHECK_OK(netvm_unexport(s2));
    CHECK_OK(netvm_finalize(ctx));
    free(oplog);
    free(shadow);
    free(known);
    free(src);
    free(dst);
    return 0;
}
