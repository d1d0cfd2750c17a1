/* A client of the connect tests' service (cserver.c): a process started
 * without the launcher (a job of one) or a rank of a `netvm run` job, that
 * connects to the service and uses it through the peer id it got, as a
 * rank uses a rank.
 *
 *   cclient ADDR SCENARIO [--cred S] [--link shm|tcp] [--idx N] [--expect STATUS]
 *                         [--hold-init FILE] [--hold-end FILE]
 *
 * --hold-init: a job's last rank calls netvm_init only once FILE exists
 * (the others wait for it there, their tcp listeners open); --hold-end:
 * "HOLDING", then netvm_finalize once FILE exists.
 *
 * Scenarios (each prints what the driver checks and exits 0 when
 * everything it checked itself held):
 *   suite    connect, the whole suite (below), disconnect, finalize
 *   leave    connect, ordered puts and atomics left in flight, disconnect:
 *            they complete first, everything toward the peer fails after,
 *            job ranks cannot be disconnected; reconnect (a new id), the
 *            suite again, finalize without disconnecting
 *   traffic  connect, the suite, "TRAFFIC <id>", then operations in a loop:
 *            "stop" on stdin ends it (disconnect, "TRAFFIC OK <n>"); a failure
 *            must be --expect's (the service died: "TRAFFIC ENDED <st> <n>",
 *            after NETVM_EV_PEER_DOWN with an error and NETVM_ERR_PEER after)
 *   hold     connect ("CONNECTED <st> <peer> <link>"), then commands on stdin:
 *            op | leave | down (wait for NETVM_EV_PEER_DOWN) | quit
 *   expect   connect: the status must be --expect's ("CONNECT <st> <ms>")
 *   addrs    malformed addresses and credentials are NETVM_ERR_INVAL; ADDR
 *            (where nobody listens) NETVM_ERR_PEER, long before the timeout
 *
 * The suite: peer_info; H_HELLO; H_WELCOME arrives (the service saw
 * NETVM_EV_PEER_UP); imports by name and by handle (netvm_import_handle_peer);
 * put/get/put_imm/atomics/nonblocking forms/large transfers/signal on a
 * mapped, a CMA and a handle-imported segment, bounds errors; a tripwire
 * and a notification the service sees; CMD_POKE (the service imports our
 * segment, writes it and calls our handler); requests with small and large
 * payloads, to no handler, deferred; one-way messages answered from the
 * service's handler. */
#define _GNU_SOURCE
#include "check.h"
#include "cpeer.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

static netvm_ctx_t *ctx;
static const char *addr, *cred = "connect-test-credential-0123456789", *want_link;
static int idx, rank, size, nconnects;
static uint64_t *cseg;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* --- what the service sends us (handlers, progress engine) ----------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static struct {
    int      welcomed;
    uint64_t my_id;            /* the id the service gave us */
    int      pongs;
    uint64_t pong_bad;
    int      seen_trip, seen_note;
    int      poked;
    uint64_t poke_st, poke_val;
    int      cechoes;
    int      sunk, sunk_ok;
    uint64_t sunk_len;
} got;

static void bump(void) { pthread_cond_broadcast(&cv); }

static int h_welcome(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)a;
    pthread_mutex_lock(&mu);
    got.welcomed++;
    got.my_id = m->args[0];
    bump();
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

static int h_pong(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)a;
    pthread_mutex_lock(&mu);
    got.pongs++;
    if (m->nargs != 2 || m->args[0] != (uint64_t)idx)
        got.pong_bad++;
    bump();
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

static int h_seen(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)a;
    pthread_mutex_lock(&mu);
    if (m->args[0] == NETVM_EV_TRIPWIRE)
        got.seen_trip++;
    else if (m->args[0] == NETVM_EV_NOTIFY)
        got.seen_note++;
    bump();
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

static int h_poked(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)a;
    pthread_mutex_lock(&mu);
    got.poked++;
    got.poke_st = m->args[0];
    got.poke_val = m->args[1];
    bump();
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

static int h_cecho(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)a;
    uint64_t r[NETVM_AM_MAX_ARGS];
    for (unsigned i = 0; i < m->nargs; i++)
        r[i] = m->args[i] + 1;
    CHECK_OK(netvm_am_reply(c, &m->token, NETVM_OK, r, m->nargs, NULL, 0));
    pthread_mutex_lock(&mu);
    got.cechoes++;
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

static int h_sunk(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)a;
    pthread_mutex_lock(&mu);
    got.sunk++;
    got.sunk_ok += m->args[0] == 1;
    got.sunk_len = m->args[1];
    bump();
    pthread_mutex_unlock(&mu);
    return NETVM_AM_DONE;
}

/* Wait until *field reaches want (a hang is a failure: 120 s). */
#define WAIT_GOT(field, want) wait_got(&got.field, (want), #field, __LINE__)
static void wait_got(int *field, int want, const char *what, int line)
{
    double t0 = now_s();
    pthread_mutex_lock(&mu);
    while (*field < want) {
        pthread_mutex_unlock(&mu);
        netvm_progress(ctx);   /* without a progress thread, handlers run here */
        pthread_mutex_lock(&mu);
        if (*field >= want)
            break;
        if (now_s() - t0 > 120)
            FAILF("line %d: %s stayed %d, wanted %d", line, what, *field, want);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 5000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&cv, &mu, &ts);
    }
    pthread_mutex_unlock(&mu);
}

/* --- the suite ------------------------------------------------------------------------ */

static void rma_on(int peer, netvm_rseg_t *r, size_t area, size_t big, unsigned seed)
{
    CHECK(netvm_rseg_peer(r) == peer);
    uint8_t src[512], dst[512];
    pattern(src, sizeof src, seed);
    CHECK_OK(netvm_put(ctx, r, area, src, 256, 0));
    memset(dst, 0, sizeof dst);
    CHECK_OK(netvm_get(ctx, dst, r, area, 256, 0));
    CHECK(!memcmp(src, dst, 256));
    CHECK_OK(netvm_put_imm(ctx, r, area + 256, 0xabcdef0000ull + seed, 0));
    uint64_t w = 0, old = 0;
    CHECK_OK(netvm_get(ctx, &w, r, area + 256, 8, 0));
    CHECK(w == 0xabcdef0000ull + seed);
    /* atomics on a word of our own */
    size_t a = area + 264;
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_SWAP, 0, 0, NULL));
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_ADD, 5, 0, NULL));
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_FADD, 3, 0, &old));
    CHECK(old == 5);
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_CSWAP, 100, 8, &old));
    CHECK(old == 8);
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_CSWAP, 7, 8, &old));
    CHECK(old == 100);
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_FCAA, 1, 100, &old));
    CHECK(old == 100);
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_FCAA, 1, 100, &old));
    CHECK(old == 101);
    CHECK_OK(netvm_atomic(ctx, r, a, NETVM_AOP_SWAP, 9, 0, &old));
    CHECK(old == 101);
    /* nonblocking: puts, a fence, gets, an atomic */
    netvm_req_t *q[40];
    size_t nq = 0;
    uint64_t vals[16], back[16], res = 0;
    for (int i = 0; i < 16; i++) {
        vals[i] = ((uint64_t)seed << 32) | (uint64_t)i;
        CHECK_OK(netvm_put_nb(ctx, r, area + 512 + 8 * (size_t)i, &vals[i], 8, 0, &q[nq]));
        nq++;
    }
    CHECK_OK(netvm_fence(ctx, peer));
    for (int i = 0; i < 16; i++) {
        CHECK_OK(netvm_get_nb(ctx, &back[i], r, area + 512 + 8 * (size_t)i, 8, 0, &q[nq]));
        nq++;
    }
    CHECK_OK(netvm_atomic_nb(ctx, r, a, NETVM_AOP_FADD, 1, 0, &res, &q[nq]));
    nq++;
    CHECK_OK(netvm_wait_all(q, nq));
    CHECK(!memcmp(vals, back, sizeof vals));
    CHECK(res == 9);
    CHECK_OK(netvm_flush(ctx, peer));
    /* a signal: data, then the word */
    CHECK_OK(netvm_put_signal(ctx, r, area + 1024, src, 64, r, area + 1088, 1, NETVM_SIGNAL_ADD, 0));
    CHECK_OK(netvm_get(ctx, dst, r, area + 1024, 72, 0));
    CHECK(!memcmp(src, dst, 64));
    memcpy(&w, dst + 64, 8);
    CHECK(w >= 1);
    /* bounds: refused, and the peer still answers */
    size_t len = netvm_rseg_len(r);
    CHECK_ST(netvm_put(ctx, r, len - 4, src, 8, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_get(ctx, dst, r, len, 8, 0), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_atomic(ctx, r, len, NETVM_AOP_ADD, 1, 0, NULL), NETVM_ERR_BOUNDS);
    /* large */
    if (big != (size_t)-1) {
        uint8_t *bs = malloc(BIG_AREA), *bd = malloc(BIG_AREA);
        CHECK(bs && bd);
        pattern(bs, BIG_AREA, seed + 1);
        CHECK_OK(netvm_put(ctx, r, big, bs, BIG_AREA, 0));
        memset(bd, 0, BIG_AREA);
        CHECK_OK(netvm_get(ctx, bd, r, big, BIG_AREA, 0));
        CHECK(!memcmp(bs, bd, BIG_AREA));
        free(bs);
        free(bd);
    }
}

static void ams(int peer)
{
    /* a request with a small payload */
    uint64_t a[3] = { 1, 2, 3 };
    uint8_t pay[100], rep[100];
    pattern(pay, sizeof pay, 3);
    netvm_am_result_t res;
    memset(rep, 0, sizeof rep);
    CHECK_OK(netvm_am_request(ctx, peer, H_ECHO, a, 3, pay, sizeof pay, rep, sizeof rep, &res, NULL));
    CHECK_OK(res.status);
    CHECK(res.peer == peer && res.nargs == 3 && res.args[0] == 2 && res.args[2] == 4 && res.len == sizeof pay);
    CHECK(!memcmp(pay, rep, sizeof pay));
    /* a large one-way payload, landed by the handler where it says */
    size_t n = 300 << 10;
    uint8_t *big = malloc(n);
    CHECK(big);
    pattern(big, n, 4);
    pthread_mutex_lock(&mu);
    int sunk = got.sunk;
    pthread_mutex_unlock(&mu);
    uint64_t four = 4;
    CHECK_OK(netvm_am_send(ctx, peer, H_SINK, &four, 1, big, n, NULL));
    WAIT_GOT(sunk, sunk + 1);
    CHECK(got.sunk_ok == sunk + 1 && got.sunk_len == n);
    /* a large reply, into our buffer */
    memset(big, 0, n);
    uint64_t bargs[2] = { n, 5 };
    CHECK_OK(netvm_am_request(ctx, peer, H_BIG, bargs, 2, NULL, 0, big, n, &res, NULL));
    CHECK_OK(res.status);
    CHECK(res.len == n && pattern_ok(big, n, 5));
    /* a reply longer than the buffer */
    CHECK_ST(netvm_am_request(ctx, peer, H_BIG, bargs, 2, NULL, 0, big, n - 1, &res, NULL), NETVM_ERR_BOUNDS);
    CHECK_ST(netvm_am_request(ctx, peer, H_ECHO, a, 1, pay, sizeof pay, rep, 10, &res, NULL), NETVM_ERR_BOUNDS);
    free(big);
    /* no handler there */
    CHECK_OK(netvm_am_request(ctx, peer, 999, a, 1, NULL, 0, NULL, 0, &res, NULL));
    CHECK_ST(res.status, NETVM_ERR_NOTFOUND);
    /* deferred three times, then answered */
    uint64_t three = 3;
    CHECK_OK(netvm_am_request(ctx, peer, H_SLOW, &three, 1, NULL, 0, NULL, 0, &res, NULL));
    CHECK(res.status == NETVM_OK && res.args[0] == 3);
    /* nonblocking requests */
    netvm_req_t *q[8];
    netvm_am_result_t rs[8];
    uint64_t k[8];
    for (int i = 0; i < 8; i++) {
        k[i] = 100 + (uint64_t)i;
        CHECK_OK(netvm_am_request(ctx, peer, H_ECHO, &k[i], 1, NULL, 0, NULL, 0, &rs[i], &q[i]));
    }
    CHECK_OK(netvm_wait_all(q, 8));
    for (int i = 0; i < 8; i++)
        CHECK(rs[i].status == NETVM_OK && rs[i].args[0] == 101 + (uint64_t)i);
    /* one-way messages, each answered from the service's handler */
    pthread_mutex_lock(&mu);
    int pongs = got.pongs;
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < 50; i++) {
        uint64_t p2[2] = { (uint64_t)idx, (uint64_t)i };
        CHECK_OK(netvm_am_send(ctx, peer, H_PING, p2, 2, NULL, 0, NULL));
    }
    WAIT_GOT(pongs, pongs + 50);
    CHECK(!got.pong_bad);
}

/* Everything a rank can do, through a connected peer. */
static void suite(int peer)
{
    netvm_peer_info_t info;
    CHECK_OK(netvm_peer_info(ctx, peer, &info));
    CHECK(!info.is_rank && info.alive);
    if (want_link && strcmp(info.link, want_link))
        FAILF("peer %d is on link %s, wanted %s", peer, info.link, want_link);
    CHECK(peer >= size);   /* never a rank's id */
    pthread_mutex_lock(&mu);
    int trips = got.seen_trip, notes = got.seen_note, poked = got.poked;
    int cechoes = got.cechoes;
    pthread_mutex_unlock(&mu);
    uint64_t me = (uint64_t)idx;
    CHECK_OK(netvm_am_send(ctx, peer, H_HELLO, &me, 1, NULL, 0, NULL));
    WAIT_GOT(welcomed, nconnects);   /* the service saw NETVM_EV_PEER_UP */

    netvm_rseg_t *data, *priv, *anon, *none;
    CHECK_OK(netvm_import(ctx, peer, SEG_DATA, &data));
    CHECK_OK(netvm_import(ctx, peer, SEG_PRIV, &priv));
    CHECK_ST(netvm_import(ctx, peer, "no-such-segment", &none), NETVM_ERR_NOTFOUND);
    netvm_am_result_t res;
    CHECK_OK(netvm_am_request(ctx, peer, H_HANDLE, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
    CHECK(res.status == NETVM_OK && res.nargs == 3);
    netvm_seg_handle_t h = { .rank = (int32_t)res.args[0], .slot = (uint32_t)res.args[1], .key = res.args[2] };
    CHECK_OK(netvm_import_handle_peer(ctx, peer, &h, &anon));
    netvm_seg_handle_t forged = h;
    forged.key ^= 1;
    netvm_rseg_t *bad = NULL;
    netvm_status_t st = netvm_import_handle_peer(ctx, peer, &forged, &bad);
    if (st == NETVM_OK) {
        /* refused at the first access at the latest */
        uint64_t x;
        CHECK_ST(netvm_get(ctx, &x, bad, 0, 8, 0), NETVM_ERR_KEY);
        CHECK_OK(netvm_release(bad));
    } else {
        CHECK_ST(st, NETVM_ERR_KEY);
    }
    CHECK(netvm_rseg_len(data) == SEG_LEN && netvm_rseg_len(priv) == SEG_LEN && netvm_rseg_len(anon) == ANON_LEN);
    CHECK(netvm_rseg_rights(priv) == NETVM_RWA && netvm_rseg_rights(anon) == NETVM_RWA);
    int shm = !strcmp(info.link, "shm");
    CHECK(netvm_rseg_is_mapped(data) == shm);
    CHECK(!netvm_rseg_is_mapped(priv));
    CHECK((netvm_ptr(data, 0) != NULL) == shm);

    size_t area = (size_t)idx * CLIENT_AREA, big = BIG_OFF + (size_t)(idx % 16) * BIG_AREA;
    rma_on(peer, data, area, big, (unsigned)idx * 3 + 1);
    rma_on(peer, priv, area, big, (unsigned)idx * 3 + 2);
    rma_on(peer, anon, (size_t)idx * ANON_AREA, (size_t)-1, (unsigned)idx * 3 + 3);

    /* a tripwire the service armed */
    uint64_t v = 0x7717;
    CHECK_OK(netvm_put(ctx, priv, TRIP_OFF + (size_t)(idx % (TRIP_LEN / 8)) * 8, &v, 8, 0));
    WAIT_GOT(seen_trip, trips + 1);
    /* a notification, and one the service acts on */
    CHECK_OK(netvm_notify(ctx, peer, CMD_NOTE));
    WAIT_GOT(seen_note, notes + 1);
    uint64_t before = __atomic_load_n(&cseg[1], __ATOMIC_ACQUIRE);
    CHECK_OK(netvm_notify(ctx, peer, CMD_POKE));
    WAIT_GOT(poked, poked + 1);
    WAIT_GOT(seen_note, notes + 2);
    pthread_mutex_lock(&mu);
    CHECK_ST((netvm_status_t)got.poke_st, NETVM_OK);
    CHECK(got.poke_val == (POKE_MAGIC | (uint32_t)got.my_id));
    CHECK(got.cechoes == cechoes + 1);
    pthread_mutex_unlock(&mu);
    CHECK(__atomic_load_n(&cseg[0], __ATOMIC_ACQUIRE) == (POKE_MAGIC | (uint32_t)got.my_id));
    CHECK(__atomic_load_n(&cseg[1], __ATOMIC_ACQUIRE) == before + 1);

    ams(peer);
    CHECK_OK(netvm_release(data));
    CHECK_OK(netvm_release(priv));
    CHECK_OK(netvm_release(anon));
}

/* --- connecting ---------------------------------------------------------------------- */

static netvm_status_t connect_to(const char *where, const char *c, int *peer, double *ms)
{
    double t0 = now_s();
    netvm_status_t st = netvm_connect(ctx, where, c, c ? strlen(c) : 0, 60000, peer);
    if (st == NETVM_OK)
        nconnects++;
    if (ms)
        *ms = (now_s() - t0) * 1e3;
    return st;
}

static int connect_ok(void)
{
    int peer;
    CHECK_OK(connect_to(addr, cred, &peer, NULL));
    CHECK(peer >= 0);
    return peer;
}

/* Everything toward a peer that is gone fails with NETVM_ERR_PEER. */
static void all_fail(int peer, netvm_rseg_t *r)
{
    uint64_t v = 1, x;
    netvm_rseg_t *r2;
    netvm_am_result_t res;
    if (r) {
        CHECK_ST(netvm_put(ctx, r, 0, &v, 8, 0), NETVM_ERR_PEER);
        CHECK_ST(netvm_get(ctx, &x, r, 0, 8, 0), NETVM_ERR_PEER);
        CHECK_ST(netvm_atomic(ctx, r, 0, NETVM_AOP_FADD, 1, 0, &x), NETVM_ERR_PEER);
    }
    CHECK_ST(netvm_import(ctx, peer, SEG_PRIV, &r2), NETVM_ERR_PEER);
    CHECK_ST(netvm_am_send(ctx, peer, H_PING, &v, 1, NULL, 0, NULL), NETVM_ERR_PEER);
    CHECK_ST(netvm_am_request(ctx, peer, H_ECHO, &v, 1, NULL, 0, NULL, 0, &res, NULL), NETVM_ERR_PEER);
    CHECK_ST(netvm_notify(ctx, peer, CMD_NOTE), NETVM_ERR_PEER);
    CHECK_ST(netvm_flush(ctx, peer), NETVM_ERR_PEER);
    CHECK_ST(netvm_disconnect(ctx, peer), NETVM_ERR_PEER);
}

/* Wait for NETVM_EV_PEER_DOWN of peer; returns its status. */
static netvm_status_t wait_down(int peer)
{
    double t0 = now_s();
    for (;;) {
        netvm_event_t ev;
        int n = 0;
        netvm_status_t st = netvm_evq_wait(ctx, &ev, 1, &n, 1000);
        if (st == NETVM_OK && n == 1 && ev.type == NETVM_EV_PEER_DOWN && ev.rank == peer)
            return (netvm_status_t)ev.status;
        if (st == NETVM_OK && n == 1)
            say("EVENT %u %d\n", ev.type, ev.rank);
        else
            CHECK_ST(st, NETVM_ERR_TIMEOUT);
        if (now_s() - t0 > 120)
            FAILF("no NETVM_EV_PEER_DOWN for peer %d", peer);
    }
}

/* The driver's go-ahead: a file it makes (a hang is a failure: 120 s). */
static void wait_file(const char *f)
{
    double t0 = now_s();
    while (access(f, F_OK) != 0) {
        if (now_s() - t0 > 120)
            FAILF("%s did not appear", f);
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
}

/* --- scenarios -------------------------------------------------------------------------- */

static int sc_suite(void)
{
    int peer = connect_ok();
    suite(peer);
    if (size > 1) {
        /* the job still works beside the connection, and its ranks stay */
        CHECK_OK(netvm_barrier(ctx));
        for (int r = 0; r < size; r++)
            CHECK_ST(netvm_disconnect(ctx, r), NETVM_ERR_INVAL);
    }
    CHECK_OK(netvm_disconnect(ctx, peer));
    say("SUITE OK %d %d %llu\n", idx, peer, (unsigned long long)got.my_id);
    return 0;
}

static int sc_leave(void)
{
    int peer = connect_ok();
    suite(peer);
    netvm_rseg_t *priv, *data;
    CHECK_OK(netvm_import(ctx, peer, SEG_PRIV, &priv));
    CHECK_OK(netvm_import(ctx, peer, SEG_DATA, &data));
    size_t area = (size_t)idx * CLIENT_AREA;
    uint64_t zero = 0;
    CHECK_OK(netvm_put(ctx, priv, area + W_LAST, &zero, 8, 0));
    CHECK_OK(netvm_put(ctx, priv, area + W_COUNT, &zero, 8, 0));
    /* left in flight: ordered puts of 1..200 to one word, 200 atomic adds,
     * requests nobody waits for before the disconnect */
    enum { N = 200 };
    static uint64_t vals[N];
    netvm_req_t *q[2 * N];
    for (int i = 0; i < N; i++) {
        vals[i] = (uint64_t)i + 1;
        CHECK_OK(netvm_put_nb(ctx, priv, area + W_LAST, &vals[i], 8, 0, &q[2 * i]));
        CHECK_OK(netvm_atomic_nb(ctx, priv, area + W_COUNT, NETVM_AOP_ADD, 1, 0, NULL, &q[2 * i + 1]));
    }
    CHECK_OK(netvm_disconnect(ctx, peer));
    CHECK_OK(netvm_wait_all(q, 2 * N));   /* completed, not failed */
    say("LEFT %d\n", peer);
    all_fail(peer, priv);
    uint64_t v = 1;
    CHECK_ST(netvm_put(ctx, data, 0, &v, 8, 0), NETVM_ERR_PEER);
    netvm_peer_info_t info;
    netvm_status_t ist = netvm_peer_info(ctx, peer, &info);
    CHECK(ist == NETVM_ERR_PEER || (ist == NETVM_OK && !info.alive));
    CHECK_OK(netvm_release(priv));
    CHECK_OK(netvm_release(data));
    /* job ranks (ourselves too) are not disconnected; nonsense ids are not peers */
    for (int r = 0; r < size; r++)
        CHECK_ST(netvm_disconnect(ctx, r), NETVM_ERR_INVAL);
    CHECK_ST(netvm_disconnect(ctx, -1), NETVM_ERR_RANK);
    CHECK_ST(netvm_disconnect(ctx, peer + 1000), NETVM_ERR_RANK);
    if (size > 1)
        CHECK_OK(netvm_barrier(ctx));

    /* again: a new peer id, and everything works */
    int peer2 = connect_ok();
    CHECK(peer2 != peer);
    suite(peer2);
    /* the old id still names nobody */
    CHECK_ST(netvm_notify(ctx, peer, CMD_NOTE), NETVM_ERR_PEER);
    say("RECONNECTED %d %d\n", peer, peer2);
    /* leave by finalizing (the service sees a goodbye too) */
    return 0;
}

static int stdin_line(char *buf, size_t cap, int timeout_ms)
{
    struct pollfd pf = { .fd = 0, .events = POLLIN };
    if (poll(&pf, 1, timeout_ms) <= 0)
        return 0;
    size_t n = 0;
    while (n + 1 < cap) {
        char ch;
        ssize_t r = read(0, &ch, 1);
        if (r <= 0) {
            strcpy(buf, "eof");   /* nobody writes (the driver is gone; a rank's stdin) */
            return 1;
        }
        if (ch == '\n')
            break;
        buf[n++] = ch;
    }
    buf[n] = 0;
    return 1;
}

static netvm_status_t traffic_op(int peer, netvm_rseg_t *priv, netvm_rseg_t *data, netvm_rseg_t *anon, long i)
{
    size_t area = (size_t)idx * CLIENT_AREA;
    uint64_t v = (uint64_t)i, x;
    netvm_status_t st;
    if ((st = netvm_put(ctx, priv, area + W_LAST, &v, 8, 0)) != NETVM_OK)
        return st;
    if ((st = netvm_atomic(ctx, priv, area + W_COUNT, NETVM_AOP_ADD, 1, 0, NULL)) != NETVM_OK)
        return st;
    if ((st = netvm_put(ctx, data, area, &v, 8, 0)) != NETVM_OK)
        return st;
    if ((st = netvm_get(ctx, &x, anon, (size_t)idx * ANON_AREA, 8, 0)) != NETVM_OK)
        return st;
    netvm_am_result_t res;
    if ((st = netvm_am_request(ctx, peer, H_ECHO, &v, 1, NULL, 0, NULL, 0, &res, NULL)) != NETVM_OK)
        return st;
    if (res.status != NETVM_OK || res.args[0] != v + 1)
        FAILF("echo of %llu came back as %llu (%s)", (unsigned long long)v, (unsigned long long)res.args[0],
              st_name(res.status));
    return netvm_flush(ctx, peer);
}

static int sc_traffic(netvm_status_t expect)
{
    int peer = connect_ok();
    suite(peer);
    netvm_rseg_t *priv, *data, *anon;
    CHECK_OK(netvm_import(ctx, peer, SEG_PRIV, &priv));
    CHECK_OK(netvm_import(ctx, peer, SEG_DATA, &data));
    netvm_am_result_t res;
    CHECK_OK(netvm_am_request(ctx, peer, H_HANDLE, NULL, 0, NULL, 0, NULL, 0, &res, NULL));
    netvm_seg_handle_t h = { .rank = (int32_t)res.args[0], .slot = (uint32_t)res.args[1], .key = res.args[2] };
    CHECK_OK(netvm_import_handle_peer(ctx, peer, &h, &anon));
    say("TRAFFIC %d %llu\n", peer, (unsigned long long)got.my_id);
    long i = 0;
    netvm_status_t st = NETVM_OK;
    int listen = 1;
    for (;; i++) {
        if ((st = traffic_op(peer, priv, data, anon, i)) != NETVM_OK)
            break;
        char line[64];
        if (listen && i % 16 == 0 && stdin_line(line, sizeof line, 0)) {
            if (!strcmp(line, "stop"))
                break;
            if (!strcmp(line, "eof"))
                listen = 0;
            else
                FAILF("unknown command '%s'", line);
        }
    }
    if (st == NETVM_OK) {
        CHECK(expect == NETVM_OK);
        suite(peer);   /* everything still works */
        CHECK_OK(netvm_release(priv));
        CHECK_OK(netvm_release(data));
        CHECK_OK(netvm_release(anon));
        CHECK_OK(netvm_disconnect(ctx, peer));
        say("TRAFFIC OK %ld\n", i);
        return 0;
    }
    if (st != expect)
        FAILF("traffic ended with %s after %ld rounds, wanted %s", st_name(st), i, st_name(expect));
    netvm_status_t down = wait_down(peer);
    CHECK_ST(down, NETVM_ERR_PEER);
    all_fail(peer, priv);
    uint64_t v = 1;
    CHECK_ST(netvm_put(ctx, data, 0, &v, 8, 0), NETVM_ERR_PEER);
    CHECK_ST(netvm_get(ctx, &v, anon, 0, 8, 0), NETVM_ERR_PEER);
    CHECK_OK(netvm_release(priv));
    CHECK_OK(netvm_release(data));
    CHECK_OK(netvm_release(anon));
    say("TRAFFIC ENDED %s %ld\n", st_name(st), i);
    return 0;
}

static netvm_status_t mini(int peer)
{
    netvm_rseg_t *priv;
    netvm_status_t st = netvm_import(ctx, peer, SEG_PRIV, &priv);
    if (st != NETVM_OK)
        return st;
    size_t area = (size_t)idx * CLIENT_AREA;
    uint64_t v = 0x1234 + (uint64_t)idx, x = 0;
    st = netvm_put(ctx, priv, area, &v, 8, 0);
    if (st == NETVM_OK)
        st = netvm_get(ctx, &x, priv, area, 8, 0);
    if (st == NETVM_OK && x != v)
        st = NETVM_ERR_SYS;
    if (st == NETVM_OK)
        st = netvm_atomic(ctx, priv, area + 8, NETVM_AOP_FADD, 1, 0, &x);
    netvm_am_result_t res;
    if (st == NETVM_OK)
        st = netvm_am_request(ctx, peer, H_ECHO, &v, 1, NULL, 0, NULL, 0, &res, NULL);
    if (st == NETVM_OK && (res.status != NETVM_OK || res.args[0] != v + 1))
        st = NETVM_ERR_SYS;
    CHECK_OK(netvm_release(priv));
    return st;
}

static int sc_hold(void)
{
    int peer = -1;
    netvm_status_t st = connect_to(addr, cred, &peer, NULL);
    netvm_peer_info_t info = { .link = "none" };
    uint64_t me = (uint64_t)idx;
    if (st == NETVM_OK) {
        CHECK_OK(netvm_peer_info(ctx, peer, &info));
        CHECK_OK(netvm_am_send(ctx, peer, H_HELLO, &me, 1, NULL, 0, NULL));
    } else {
        CHECK(peer == -1);
    }
    say("CONNECTED %s %d %s\n", st_name(st), peer, info.link);
    if (st != NETVM_OK)
        return 0;
    char line[64];
    for (;;) {
        if (!stdin_line(line, sizeof line, -1))
            continue;
        if (!strcmp(line, "op")) {
            say("OP %s\n", st_name(mini(peer)));
        } else if (!strcmp(line, "leave")) {
            say("LEFT %s\n", st_name(netvm_disconnect(ctx, peer)));
        } else if (!strcmp(line, "down")) {
            netvm_status_t d = wait_down(peer);
            say("PEERDOWN %d %s\n", peer, st_name(d));
        } else if (!strcmp(line, "quit") || !strcmp(line, "eof")) {
            break;
        } else {
            FAILF("unknown command '%s'", line);
        }
    }
    return 0;
}

static int sc_expect(netvm_status_t expect)
{
    int peer = 12345;
    double ms;
    netvm_status_t st = connect_to(addr, cred, &peer, &ms);
    say("CONNECT %s %.1f\n", st_name(st), ms);
    if (st != expect)
        FAILF("netvm_connect returned %s, wanted %s", st_name(st), st_name(expect));
    CHECK(st == NETVM_OK ? peer >= size : peer == -1);
    if (st == NETVM_OK)
        CHECK_OK(netvm_disconnect(ctx, peer));
    return 0;
}

static int sc_addrs(void)
{
    static const char *bad[] = {
        "", "tcp:", "tcp:127.0.0.1", "tcp:127.0.0.1:", "tcp:127.0.0.1:x", "tcp:127.0.0.1:70000",
        "tcp:127.0.0.1:-1", "tcp::80", "tcp:1.2.3:80", "tcp:1.2.3.4.5:80", "tcp:256.0.0.1:80",
        "tcp:localhost:80", "udp:127.0.0.1:80", "127.0.0.1:80", "tcp:127.0.0.1:80:1", "tcp:127.0.0.1:80 ",
    };
    int peer;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        netvm_status_t st = connect_to(bad[i], cred, &peer, NULL);
        if (st != NETVM_ERR_INVAL)
            FAILF("netvm_connect('%s') returned %s, wanted INVAL", bad[i], st_name(st));
    }
    CHECK_ST(netvm_connect(ctx, NULL, cred, strlen(cred), 0, &peer), NETVM_ERR_INVAL);
    CHECK_ST(netvm_connect(ctx, addr, cred, strlen(cred), 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(netvm_connect(ctx, addr, NULL, 32, 0, &peer), NETVM_ERR_INVAL);
    CHECK_ST(netvm_connect(ctx, addr, cred, 15, 0, &peer), NETVM_ERR_INVAL);
    static const char longc[65] = "0123456789012345678901234567890123456789012345678901234567890123";
    CHECK_ST(netvm_connect(ctx, addr, longc, 65, 0, &peer), NETVM_ERR_INVAL);
    netvm_listener_t *l;
    netvm_listen_opts_t o = { .credential = cred, .credential_len = strlen(cred) };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        netvm_status_t st = netvm_listen(ctx, bad[i], &o, &l);
        if (st != NETVM_ERR_INVAL)
            FAILF("netvm_listen('%s') returned %s, wanted INVAL", bad[i], st_name(st));
        CHECK(l == NULL);
    }
    o.credential_len = 15;
    CHECK_ST(netvm_listen(ctx, "tcp:127.0.0.1:0", &o, &l), NETVM_ERR_INVAL);
    o.credential_len = strlen(cred);
    o.max_peers = -1;
    CHECK_ST(netvm_listen(ctx, "tcp:127.0.0.1:0", &o, &l), NETVM_ERR_INVAL);
    /* nobody listens at addr: refused at once, not after the timeout */
    double ms;
    CHECK_ST(connect_to(addr, cred, &peer, &ms), NETVM_ERR_PEER);
    CHECK(peer == -1);
    say("ADDRS OK %.1f\n", ms);
    CHECK(ms < 10000);   /* the timeout is 60 s */
    return 0;
}

/* A request whose payload is large (above the link's eager size) returns
 * with its reply. It used to be completed by the link once the payload was
 * delivered (tcp: sent; shm: copied by the receiver): on tcp
 * netvm_am_request returned before the reply, its result empty; on shm the
 * late completion landed on whatever request reused the slot. */
static int sc_bigreq(void)
{
    int peer = connect_ok();
    size_t n = 300 << 10;
    uint8_t *big = malloc(n), *rep = malloc(n);
    CHECK(big && rep);
    pattern(big, n, 9);
    for (int i = 0; i < 20; i++) {
        uint64_t a = 41;
        netvm_am_result_t res;
        memset(rep, 0, n);
        CHECK_OK(netvm_am_request(ctx, peer, H_ECHO, &a, 1, big, n, rep, n, &res, NULL));
        CHECK_OK(res.status);
        if (res.nargs != 1 || res.args[0] != 42 || res.len != n || !pattern_ok(rep, n, 9))
            FAILF("round %d: the request returned before its reply (nargs %u, len %zu)", i, res.nargs, res.len);
        /* the next request, in the slot the last one freed */
        uint64_t d = 50;
        CHECK_OK(netvm_am_request(ctx, peer, H_SLOW, &d, 1, NULL, 0, NULL, 0, &res, NULL));
        if (res.nargs != 1 || res.args[0] != 50)
            FAILF("round %d: a request completed by the one before it (nargs %u)", i, res.nargs);
    }
    free(big);
    free(rep);
    CHECK_OK(netvm_disconnect(ctx, peer));
    say("BIGREQ OK\n");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        FAILF("usage: cclient ADDR SCENARIO [--cred S] [--link L] [--idx N] [--expect ST]");
    addr = argv[1];
    const char *sc = argv[2];
    netvm_status_t expect = NETVM_OK;
    const char *hold_init = NULL, *hold_end = NULL;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--cred") && i + 1 < argc)
            cred = argv[++i];
        else if (!strcmp(argv[i], "--link") && i + 1 < argc)
            want_link = argv[++i];
        else if (!strcmp(argv[i], "--idx") && i + 1 < argc)
            idx = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--expect") && i + 1 < argc) {
            int e = st_by_name(argv[++i]);
            if (e < 0)
                FAILF("unknown status %s", argv[i]);
            expect = (netvm_status_t)e;
        } else if (!strcmp(argv[i], "--hold-init") && i + 1 < argc)
            hold_init = argv[++i];
        else if (!strcmp(argv[i], "--hold-end") && i + 1 < argc)
            hold_end = argv[++i];
        else
            FAILF("unknown argument %s", argv[i]);
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the job's last rank starts only when told: the others have opened
     * their tcp listeners and wait for it in netvm_init meanwhile */
    const char *er = getenv("NETVM_RANK"), *es = getenv("NETVM_SIZE");
    if (hold_init && er && es && atoi(er) == atoi(es) - 1)
        wait_file(hold_init);
    CHECK_OK(netvm_init(&ctx, NULL));
    rank = check_rank = netvm_rank(ctx);
    size = netvm_size(ctx);
    idx += rank;
    CHECK(idx >= 0 && idx < (int)MAX_CLIENTS);
    netvm_seg_t *cs;
    void *cp;
    CHECK_OK(netvm_alloc_shared(ctx, CSEG_LEN, NETVM_RWA, SEG_CLIENT, &cp, &cs));
    cseg = cp;
    CHECK_OK(netvm_am_register(ctx, H_WELCOME, h_welcome, NULL));
    CHECK_OK(netvm_am_register(ctx, H_PONG, h_pong, NULL));
    CHECK_OK(netvm_am_register(ctx, H_SEEN, h_seen, NULL));
    CHECK_OK(netvm_am_register(ctx, H_POKED, h_poked, NULL));
    CHECK_OK(netvm_am_register(ctx, H_CECHO, h_cecho, NULL));
    CHECK_OK(netvm_am_register(ctx, H_SUNK, h_sunk, NULL));
    int rc;
    if (!strcmp(sc, "suite"))
        rc = sc_suite();
    else if (!strcmp(sc, "leave"))
        rc = sc_leave();
    else if (!strcmp(sc, "traffic"))
        rc = sc_traffic(expect);
    else if (!strcmp(sc, "hold"))
        rc = sc_hold();
    else if (!strcmp(sc, "expect"))
        rc = sc_expect(expect);
    else if (!strcmp(sc, "addrs"))
        rc = sc_addrs();
    else if (!strcmp(sc, "bigreq"))
        rc = sc_bigreq();
    else
        FAILF("unknown scenario %s", sc);
    if (hold_end) {
        say("HOLDING\n");
        wait_file(hold_end);
    }
    netvm_status_t st = netvm_finalize(ctx);
    say("BYE %s\n", st_name(st));
    return st == NETVM_OK ? rc : 1;
}
