/* A test client of `netvm memd` speaking proto.h through nv_rpc_svc_call,
 * driven by memd_test.py:
 *
 *   mclient CREDFILE SCENARIO ADDR [ADDR2] [N]
 *
 * basic ADDR N      HELLO, PUT/GET round trip of N pages, overwrite, FREE,
 *                   the refusals (no HELLO, another's id, an observer)
 * bound ADDR        the per-client bound and the full pool (memd --size 128
 *                   pages --client-max 100 pages)
 * auth ADDR         a wrong credential: NETVM_ERR_AUTH
 * hold ADDR N       put N pages, say HELD, wait for stdin to close (the
 *                   driver kills it or closes stdin)
 * move ADDR ADDR2 N pages put at ADDR, MOVEd to ADDR2, read through ADDR
 *                   (answered by ADDR2), one put back
 * drain ADDR N      put N pages, say READY, answer the DRAIN notice, say
 *                   NOTICE <kind> <deadline>, leave
 * shared ADDR       the SHARED_* calls: refusals (no open, another length,
 *                   set or name, a second writer, a reader's PUT/FREE/SYNC,
 *                   removing a name open), the region's own bound, a sync's
 *                   NOTICE INVALIDATE, the writer's leaving frees the name
 *                   and keeps the pages, removal frees them
 * garbage ADDR N    N random calls (procedures, argument counts and values,
 *                   payloads, roles): each answered, the server still serves
 * getrate ADDR N    (a measurement, not a test) N GETs of 1024 pages:
 *                   GET round trip median and rate */
#define _GNU_SOURCE
#include "check.h"
#include "gmem/proto.h"
#include "gmem/server_cred.h"

#include <poll.h>
#include <string.h>
#include <unistd.h>

static netvm_ctx_t *ctx;
static uint8_t cred[NV_GM_CRED_MAX];
static size_t cred_len;
static uint64_t my_id;

static netvm_status_t call(int peer, unsigned op, const uint64_t *a, unsigned n, const void *pay, size_t len,
                           void *rbuf, size_t rcap, netvm_rpc_result_t *res)
{
    netvm_rpc_result_t r;
    return nv_rpc_svc_call(ctx, peer, nv_gm_k(op), a, n, pay, len, rbuf, rcap, 0, res ? res : &r);
}

static int connect_to(const char *addr)
{
    int peer;
    CHECK_OK(netvm_connect(ctx, addr, cred, cred_len, 0, &peer));
    return peer;
}

static void hello(int peer, int role, uint64_t id, netvm_rpc_result_t *res)
{
    uint64_t a[3] = { NV_GM_VERSION, (uint64_t)role, id };
    CHECK_OK(call(peer, NV_GM_HELLO, a, 3, NULL, 0, NULL, 0, res));
}

static void fill(uint8_t *p, uint64_t region, uint64_t page, unsigned gen)
{
    for (unsigned i = 0; i < NV_GM_PAGE; i += 8) {
        uint64_t v = (region << 48) ^ (page << 20) ^ ((uint64_t)gen << 12) ^ i ^ 0x5a5a000000000000ull;
        memcpy(p + i, &v, 8);
    }
}

static netvm_status_t put(int peer, uint64_t id, uint64_t region, uint64_t first, uint64_t n, unsigned gen)
{
    uint8_t *buf = malloc(n * NV_GM_PAGE);
    CHECK(buf);
    for (uint64_t i = 0; i < n; i++)
        fill(buf + i * NV_GM_PAGE, region, first + i, gen);
    uint64_t a[4] = { id, region, first, n };
    netvm_status_t st = call(peer, NV_GM_PUT, a, 4, buf, n * NV_GM_PAGE, NULL, 0, NULL);
    free(buf);
    return st;
}

/* PUTV of the n pages list[] (fill()'s contents for gen); payload as
 * proto.h says: the page numbers, then the pages. */
static netvm_status_t putv(int peer, uint64_t id, uint64_t region, const uint64_t *list, uint64_t n, unsigned gen)
{
    uint8_t *buf = malloc(n * (8 + NV_GM_PAGE));
    CHECK(buf);
    memcpy(buf, list, n * 8);
    for (uint64_t i = 0; i < n; i++)
        fill(buf + n * 8 + i * NV_GM_PAGE, region, list[i], gen);
    uint64_t a[3] = { id, region, n };
    netvm_status_t st = call(peer, NV_GM_PUTV, a, 3, buf, n * (8 + NV_GM_PAGE), NULL, 0, NULL);
    free(buf);
    return st;
}

/* GET a page and compare it with what fill() made for gen. */
static netvm_status_t get_check(int peer, uint64_t id, uint64_t region, uint64_t page, unsigned gen, int *from)
{
    uint8_t got[NV_GM_PAGE], want[NV_GM_PAGE];
    uint64_t a[3] = { id, region, page };
    netvm_rpc_result_t res;
    netvm_status_t st = call(peer, NV_GM_GET, a, 3, NULL, 0, got, sizeof got, &res);
    if (st != NETVM_OK)
        return st;
    CHECK(res.len == NV_GM_PAGE);
    fill(want, region, page, gen);
    if (memcmp(got, want, NV_GM_PAGE) != 0)
        FAILF("page %llu of region %llu: wrong contents", (unsigned long long)page, (unsigned long long)region);
    if (from)
        *from = res.peer;
    return NETVM_OK;
}

static struct nv_gm_stat stat_of(int peer)
{
    struct nv_gm_stat s;
    netvm_rpc_result_t res;
    CHECK_OK(call(peer, NV_GM_STAT, NULL, 0, NULL, 0, &s, sizeof s, &res));
    CHECK(res.len == sizeof s && s.version == NV_GM_VERSION);
    return s;
}

static uint64_t free_(int peer, uint64_t id, uint64_t region, uint64_t first, uint64_t n)
{
    uint64_t a[4] = { id, region, first, n };
    netvm_rpc_result_t res;
    CHECK_OK(call(peer, NV_GM_FREE, a, 4, NULL, 0, NULL, 0, &res));
    CHECK(res.nargs == 1);
    return res.args[0];
}

static void sc_basic(const char *addr, uint64_t n)
{
    int p = connect_to(addr);
    /* before HELLO: nothing but HELLO */
    uint64_t g[3] = { my_id, 1, 0 };
    uint8_t page[NV_GM_PAGE];
    CHECK_ST(call(p, NV_GM_GET, g, 3, NULL, 0, page, sizeof page, NULL), NETVM_ERR_STATE);
    CHECK_ST(put(p, my_id, 1, 0, 1, 0), NETVM_ERR_STATE);
    CHECK_ST(call(p, NV_GM_STAT, NULL, 0, NULL, 0, page, sizeof page, NULL), NETVM_ERR_STATE);
    uint64_t bad[3] = { NV_GM_VERSION + 1, NV_GM_ROLE_CLIENT, my_id };
    CHECK_ST(call(p, NV_GM_HELLO, bad, 3, NULL, 0, NULL, 0, NULL), NETVM_ERR_UNSUPPORTED);
    netvm_rpc_result_t res;
    hello(p, NV_GM_ROLE_CLIENT, my_id, &res);
    CHECK(res.nargs == 4 && res.args[0] != 0 && res.args[1] == res.args[3]);
    uint64_t pool = res.args[1];
    /* N pages in batches of 1, 2, 3, ... (up to NV_GM_PUT_MAX), two regions */
    for (uint64_t region = 1; region <= 2; region++) {
        uint64_t b = 1;
        for (uint64_t first = 0; first < n; first += b, b = b % 97 + 1) {
            uint64_t k = first + b > n ? n - first : b;
            CHECK_OK(put(p, my_id, region, first, k, 0));
        }
    }
    CHECK(stat_of(p).used_pages == 2 * n);
    for (uint64_t region = 1; region <= 2; region++)
        for (uint64_t i = 0; i < n; i++)
            CHECK_OK(get_check(p, my_id, region, i, 0, NULL));
    /* overwrite every third page of region 1: no new slot */
    for (uint64_t i = 0; i < n; i += 3)
        CHECK_OK(put(p, my_id, 1, i, 1, 1));
    for (uint64_t i = 0; i < n; i++)
        CHECK_OK(get_check(p, my_id, 1, i, i % 3 == 0 ? 1 : 0, NULL));
    /* PUTV: every fifth page of region 2 overwritten (no new slot), and
     * scattered new pages of region 3 (slots taken) */
    uint64_t list[NV_GM_PUT_MAX], nl = 0;
    for (uint64_t i = 0; i < n && nl < NV_GM_PUT_MAX; i += 5)
        list[nl++] = i;
    CHECK_OK(putv(p, my_id, 2, list, nl, 2));
    for (uint64_t i = 0; i < n; i++)
        CHECK_OK(get_check(p, my_id, 2, i, i % 5 == 0 && i / 5 < nl ? 2 : 0, NULL));
    uint64_t r3[4] = { 3, 17, 18, 1000 };
    CHECK_OK(putv(p, my_id, 3, r3, 4, 0));
    for (int i = 0; i < 4; i++)
        CHECK_OK(get_check(p, my_id, 3, r3[i], 0, NULL));
    CHECK_ST(get_check(p, my_id, 3, 4, 0, NULL), NETVM_ERR_NOTFOUND);
    CHECK(stat_of(p).used_pages == 2 * n + 4);
    /* malformed PUTVs change nothing: unsorted, a page twice, no pages,
     * a length that is not n * (8 + page), another client's id */
    uint64_t unsorted[2] = { 40, 30 }, twice[2] = { 50, 50 };
    CHECK_ST(putv(p, my_id, 3, unsorted, 2, 0), NETVM_ERR_INVAL);
    CHECK_ST(putv(p, my_id, 3, twice, 2, 0), NETVM_ERR_INVAL);
    uint64_t none[3] = { my_id, 3, 0 }, two[3] = { my_id, 3, 2 };
    CHECK_ST(call(p, NV_GM_PUTV, none, 3, page, 0, NULL, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(call(p, NV_GM_PUTV, two, 3, page, sizeof page, NULL, 0, NULL), NETVM_ERR_INVAL);
    CHECK_ST(putv(p, my_id ^ 1, 3, r3, 4, 0), NETVM_ERR_KEY);
    CHECK(stat_of(p).used_pages == 2 * n + 4);
    CHECK(free_(p, my_id, 3, 0, UINT64_MAX) == 4);
    struct nv_gm_stat s = stat_of(p);
    CHECK(s.used_pages == 2 * n && s.clients == 1 && s.pool_pages == pool);
    /* FREE a range, then the whole of region 2 */
    CHECK(free_(p, my_id, 1, 10, 20) == 20);
    CHECK_ST(get_check(p, my_id, 1, 10, 0, NULL), NETVM_ERR_NOTFOUND);
    CHECK_ST(get_check(p, my_id, 1, 29, 0, NULL), NETVM_ERR_NOTFOUND);
    CHECK_OK(get_check(p, my_id, 1, 30, 1, NULL));
    CHECK(free_(p, my_id, 2, 0, UINT64_MAX) == n);
    CHECK_ST(get_check(p, my_id, 2, 0, 0, NULL), NETVM_ERR_NOTFOUND);
    CHECK(stat_of(p).used_pages == n - 20);
    /* another client's id, a bad PUT */
    CHECK_ST(get_check(p, my_id ^ 1, 1, 0, 0, NULL), NETVM_ERR_KEY);
    CHECK_ST(put(p, my_id ^ 1, 1, 0, 1, 0), NETVM_ERR_KEY);
    uint64_t f[4] = { my_id ^ 1, 1, 0, UINT64_MAX };
    CHECK_ST(call(p, NV_GM_FREE, f, 4, NULL, 0, NULL, 0, NULL), NETVM_ERR_KEY);
    uint64_t short_put[4] = { my_id, 1, 0, 2 };
    CHECK_ST(call(p, NV_GM_PUT, short_put, 4, page, sizeof page, NULL, 0, NULL), NETVM_ERR_INVAL);
    /* a second HELLO naming something else, and an id another connection holds */
    uint64_t again[3] = { NV_GM_VERSION, NV_GM_ROLE_SERVER, 7 };
    CHECK_ST(call(p, NV_GM_HELLO, again, 3, NULL, 0, NULL, 0, NULL), NETVM_ERR_STATE);
    int q = connect_to(addr);
    uint64_t same[3] = { NV_GM_VERSION, NV_GM_ROLE_CLIENT, my_id };
    CHECK_ST(call(q, NV_GM_HELLO, same, 3, NULL, 0, NULL, 0, NULL), NETVM_ERR_EXISTS);
    CHECK_OK(netvm_disconnect(ctx, q));
    /* an observer may only STAT */
    int o = connect_to(addr);
    hello(o, NV_GM_ROLE_OBSERVER, 0, NULL);
    CHECK(stat_of(o).used_pages == n - 20);
    CHECK_ST(put(o, my_id, 1, 0, 1, 0), NETVM_ERR_RIGHTS);
    CHECK_ST(get_check(o, my_id, 1, 0, 1, NULL), NETVM_ERR_RIGHTS);
    CHECK(stat_of(o).refused >= 9);
    CHECK_OK(netvm_disconnect(ctx, o));
    printf("BASIC ok %llu\n", (unsigned long long)n);
}

static void sc_bound(const char *addr)
{
    int p = connect_to(addr), q = connect_to(addr);
    netvm_rpc_result_t res;
    hello(p, NV_GM_ROLE_CLIENT, my_id, &res);
    CHECK(res.args[1] == 128 && res.args[2] == 100);
    hello(q, NV_GM_ROLE_CLIENT, my_id + 1, NULL);
    CHECK_OK(put(p, my_id, 1, 0, 64, 0));
    /* 37 more would pass the bound by one: nothing of it is kept */
    CHECK_ST(put(p, my_id, 1, 64, 37, 0), NETVM_ERR_NOMEM);
    CHECK(stat_of(p).used_pages == 64);
    CHECK_ST(get_check(p, my_id, 1, 64, 0, NULL), NETVM_ERR_NOTFOUND);
    /* a PUT of held pages and new ones refused: the held ones keep their contents */
    CHECK_ST(put(p, my_id, 1, 60, 41, 5), NETVM_ERR_NOMEM);
    CHECK_OK(get_check(p, my_id, 1, 60, 0, NULL));
    CHECK_OK(put(p, my_id, 1, 64, 36, 0));
    CHECK_ST(put(p, my_id, 1, 100, 1, 0), NETVM_ERR_NOMEM);
    CHECK_OK(put(p, my_id, 1, 0, 100, 2));   /* overwriting takes no slot */
    /* the other client fills the pool: 28 slots are left */
    CHECK_OK(put(q, my_id + 1, 9, 0, 28, 0));
    CHECK_ST(put(q, my_id + 1, 9, 28, 1, 0), NETVM_ERR_NOMEM);
    struct nv_gm_stat s = stat_of(q);
    CHECK(s.used_pages == 128 && s.clients == 2 && s.refused == 4);
    /* freeing makes room again */
    CHECK(free_(p, my_id, 1, 0, 10) == 10);
    CHECK_OK(put(q, my_id + 1, 9, 28, 10, 0));
    CHECK_OK(get_check(q, my_id + 1, 9, 37, 0, NULL));
    CHECK_OK(get_check(p, my_id, 1, 99, 2, NULL));
    printf("BOUND ok\n");
}

static void sc_hold(const char *addr, uint64_t n)
{
    int p = connect_to(addr);
    hello(p, NV_GM_ROLE_CLIENT, my_id, NULL);
    for (uint64_t first = 0; first < n; first += 50)
        CHECK_OK(put(p, my_id, 3, first, first + 50 > n ? n - first : 50, 0));
    CHECK(stat_of(p).used_pages >= n);
    printf("HELD %llu\n", (unsigned long long)n);
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
}

static void sc_move(const char *a1, const char *a2, uint64_t n)
{
    int p1 = connect_to(a1), p2 = connect_to(a2);
    hello(p1, NV_GM_ROLE_CLIENT, my_id, NULL);
    hello(p2, NV_GM_ROLE_CLIENT, my_id, NULL);
    CHECK_OK(put(p1, my_id, 4, 0, n, 0));
    CHECK_OK(put(p1, my_id, 5, 0, 3, 0));   /* another region: stays */
    uint64_t a[4] = { my_id, 4, 0, n };
    netvm_rpc_result_t res;
    CHECK_OK(call(p1, NV_GM_MOVE, a, 4, a2, strlen(a2), NULL, 0, &res));
    CHECK(res.nargs == 1 && res.args[0] == n);
    struct nv_gm_stat s1 = stat_of(p1), s2 = stat_of(p2);
    CHECK(s1.used_pages == 3 && s1.forwards == n && s1.moves_out == n);
    CHECK(s2.used_pages == n && s2.moves_in == n && s2.servers == 1);
    /* read through the first: the second answers (3-way) */
    for (uint64_t i = 0; i < n; i++) {
        int from = -1;
        CHECK_OK(get_check(p1, my_id, 4, i, 0, &from));
        CHECK(from == p2);
    }
    int from = -1;
    CHECK_OK(get_check(p1, my_id, 5, 1, 0, &from));
    CHECK(from == p1);
    s1 = stat_of(p1);
    CHECK(s1.delegated == n);
    /* the client takes page 0 back to the first: its forward goes */
    CHECK_OK(put(p1, my_id, 4, 0, 1, 7));
    CHECK_OK(get_check(p1, my_id, 4, 0, 7, &from));
    CHECK(from == p1 && stat_of(p1).forwards == n - 1);
    /* a page freed at the second: the first's forward now finds nothing */
    CHECK(free_(p2, my_id, 4, 1, 1) == 1);
    CHECK_ST(get_check(p1, my_id, 4, 1, 0, NULL), NETVM_ERR_NOTFOUND);
    /* FREE of the region at the first drops its forwards */
    free_(p1, my_id, 4, 0, UINT64_MAX);
    CHECK(stat_of(p1).forwards == 0);
    printf("MOVE ok %llu\n", (unsigned long long)n);
}

static volatile int notice_kind = -1;
static volatile uint64_t notice_deadline;
static netvm_am_token_t notice_token;

/* keeps the token: the main thread answers once it has looked at the
 * draining server (which exits once every client answered) */
static int on_notice(netvm_ctx_t *c, netvm_rpc_call_t *cl, void *arg)
{
    (void)arg;
    if (cl->nargs < 3) {
        netvm_rpc_reply(c, &cl->token, NETVM_ERR_INVAL, NULL, 0, NULL, 0);
        return NETVM_RPC_DONE;
    }
    notice_deadline = cl->args[2];
    notice_token = cl->token;
    __atomic_store_n(&notice_kind, (int)cl->args[0], __ATOMIC_RELEASE);
    return NETVM_RPC_DONE;
}

static void sc_drain(const char *addr, uint64_t n)
{
    CHECK_OK(nv_rpc_svc_register(ctx, nv_gm_k(NV_GM_NOTICE), on_notice, NULL));
    int p = connect_to(addr);
    hello(p, NV_GM_ROLE_CLIENT, my_id, NULL);
    CHECK_OK(put(p, my_id, 1, 0, n, 0));
    printf("READY\n");
    fflush(stdout);
    /* the driver sends SIGTERM to memd now; bounded by tries, not time */
    for (int i = 0; i < 60000 && __atomic_load_n(&notice_kind, __ATOMIC_ACQUIRE) < 0; i++)
        poll(NULL, 0, 1);
    CHECK(notice_kind == NV_GM_NOTICE_DRAIN);
    /* pages can still be read while the server drains, new ones are refused */
    CHECK_OK(get_check(p, my_id, 1, 0, 0, NULL));
    CHECK_ST(put(p, my_id, 1, n, 1, 0), NETVM_ERR_NOMEM);
    CHECK(stat_of(p).draining == 1);
    printf("NOTICE %d %llu\n", notice_kind, (unsigned long long)notice_deadline);
    fflush(stdout);
    CHECK_OK(netvm_rpc_reply(ctx, &notice_token, NETVM_OK, NULL, 0, NULL, 0));
    fflush(stdout);
    char c;
    while (read(0, &c, 1) > 0)
        ;
}

/* --- shared regions ------------------------------------------------------- */

static volatile int invalidations;   /* NOTICE INVALIDATE received */
static volatile uint64_t inval_bits; /* their bitmaps' first words, or'ed */

static int on_invalidate(netvm_ctx_t *c, netvm_rpc_call_t *cl, void *arg)
{
    (void)arg;
    if (cl->nargs >= 4 && cl->args[0] == NV_GM_NOTICE_INVALIDATE && cl->len >= 8) {
        uint64_t w;
        memcpy(&w, cl->payload, 8);
        __atomic_fetch_or(&inval_bits, w, __ATOMIC_RELAXED);
        __atomic_fetch_add(&invalidations, 1, __ATOMIC_RELEASE);
    }
    netvm_rpc_reply(c, &cl->token, NETVM_OK, NULL, 0, NULL, 0);
    return NETVM_RPC_DONE;
}

static netvm_status_t sh_open(int peer, uint64_t sid, uint64_t npages, uint64_t mode, uint64_t hash,
                              const char *name)
{
    uint64_t a[5] = { sid, npages, mode, hash, 1 };
    return call(peer, NV_GM_SHARED_OPEN, a, 5, name, strlen(name), NULL, 0, NULL);
}

static netvm_status_t sh_op(int peer, unsigned op, uint64_t sid, netvm_rpc_result_t *res)
{
    uint64_t a[1] = { sid };
    return call(peer, op, a, 1, NULL, 0, NULL, 0, res);
}

/* The SHARED_* calls at the protocol's level: who may do what with a name. */
static void sc_shared(const char *addr)
{
    CHECK_OK(nv_rpc_svc_register(ctx, nv_gm_k(NV_GM_NOTICE), on_invalidate, NULL));
    const uint64_t sid = NV_GM_SHARED_BIT | 0x5151, hash = 77;
    /* a client id with the shared bit would pass for a named region */
    int x = connect_to(addr);
    uint64_t bad[3] = { NV_GM_VERSION, NV_GM_ROLE_CLIENT, sid };
    CHECK_ST(call(x, NV_GM_HELLO, bad, 3, NULL, 0, NULL, 0, NULL), NETVM_ERR_INVAL);
    CHECK_OK(netvm_disconnect(ctx, x));
    int a = connect_to(addr), b = connect_to(addr), c = connect_to(addr);
    hello(a, NV_GM_ROLE_CLIENT, my_id, NULL);
    hello(b, NV_GM_ROLE_CLIENT, my_id + 1, NULL);
    hello(c, NV_GM_ROLE_CLIENT, my_id + 2, NULL);
    CHECK_OK(sh_open(a, sid, 8, NV_GM_SHARED_WRITE, hash, "t"));
    /* no page call before an open */
    CHECK_ST(get_check(b, sid, 0, 0, 0, NULL), NETVM_ERR_KEY);
    CHECK_ST(put(b, sid, 0, 0, 1, 0), NETVM_ERR_KEY);
    /* what sharers must agree on */
    CHECK_ST(sh_open(b, sid, 8, NV_GM_SHARED_READ, hash + 1, "t"), NETVM_ERR_STATE);
    CHECK_ST(sh_open(b, sid, 9, NV_GM_SHARED_READ, hash, "t"), NETVM_ERR_STATE);
    CHECK_ST(sh_open(b, sid, 8, NV_GM_SHARED_CACHE, hash, "t"), NETVM_ERR_STATE);
    CHECK_ST(sh_open(b, sid, 8, NV_GM_SHARED_READ, hash, "u"), NETVM_ERR_EXISTS);
    CHECK_ST(sh_open(b, sid, 8, 7, hash, "t"), NETVM_ERR_INVAL);
    CHECK_OK(sh_open(b, sid, 8, NV_GM_SHARED_READ, hash, "t"));
    CHECK_ST(sh_open(b, sid, 8, NV_GM_SHARED_READ, hash, "t"), NETVM_ERR_EXISTS);
    CHECK_ST(sh_open(c, sid, 8, NV_GM_SHARED_WRITE, hash, "t"), NETVM_ERR_BUSY);
    /* the writer's pages, counted against the region's 8 */
    CHECK_OK(put(a, sid, 0, 0, 8, 3));
    CHECK_ST(put(a, sid, 0, 8, 1, 3), NETVM_ERR_NOMEM);
    CHECK_OK(get_check(b, sid, 0, 5, 3, NULL));
    CHECK_ST(put(b, sid, 0, 0, 1, 4), NETVM_ERR_RIGHTS);
    uint64_t f[4] = { sid, 0, 0, 1 };
    CHECK_ST(call(b, NV_GM_FREE, f, 4, NULL, 0, NULL, 0, NULL), NETVM_ERR_RIGHTS);
    /* the writer's sync tells the reader, and answers once it answered */
    uint64_t bits = 0x24, sa[3] = { sid, 8, 5000 };
    CHECK_ST(call(b, NV_GM_SHARED_SYNC, sa, 3, &bits, 8, NULL, 0, NULL), NETVM_ERR_RIGHTS);
    netvm_rpc_result_t res;
    CHECK_OK(call(a, NV_GM_SHARED_SYNC, sa, 3, &bits, 8, NULL, 0, &res));
    CHECK(res.nargs == 1 && res.args[0] == 1);
    CHECK(__atomic_load_n(&invalidations, __ATOMIC_ACQUIRE) == 1 && inval_bits == 0x24);
    struct nv_gm_stat st = stat_of(a);
    CHECK(st.shared_regions == 1 && st.shared_pages == 8 && st.used_pages == 8);
    /* nobody removes a name still open */
    CHECK_ST(sh_op(c, NV_GM_SHARED_REMOVE, sid, NULL), NETVM_ERR_BUSY);
    /* the writer leaves: the name is free, its pages stay */
    CHECK_OK(netvm_disconnect(ctx, a));
    netvm_status_t w = NETVM_ERR_BUSY;
    for (int i = 0; i < 5000 && w == NETVM_ERR_BUSY; i++)   /* until the server saw it go */
        if ((w = sh_open(c, sid, 8, NV_GM_SHARED_WRITE, hash, "t")) == NETVM_ERR_BUSY)
            poll(NULL, 0, 2);
    CHECK_OK(w);
    CHECK_OK(get_check(c, sid, 0, 7, 3, NULL));
    CHECK(stat_of(b).shared_pages == 8);
    CHECK_OK(sh_op(b, NV_GM_SHARED_CLOSE, sid, NULL));
    CHECK_ST(sh_op(b, NV_GM_SHARED_CLOSE, sid, NULL), NETVM_ERR_NOTFOUND);
    CHECK_ST(get_check(b, sid, 0, 7, 3, NULL), NETVM_ERR_KEY);   /* closed: no more reads */
    CHECK_OK(sh_op(c, NV_GM_SHARED_CLOSE, sid, NULL));
    CHECK_OK(sh_op(b, NV_GM_SHARED_REMOVE, sid, &res));
    CHECK(res.nargs == 1 && res.args[0] == 8);
    CHECK_ST(sh_op(b, NV_GM_SHARED_REMOVE, sid, NULL), NETVM_ERR_NOTFOUND);
    st = stat_of(b);
    CHECK(st.shared_regions == 0 && st.shared_pages == 0 && st.used_pages == 0);
    printf("SHARED ok\n");
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void sc_getrate(const char *addr, uint64_t n)
{
    int p = connect_to(addr);
    hello(p, NV_GM_ROLE_CLIENT, my_id, NULL);
    CHECK_OK(put(p, my_id, 1, 0, 1024, 0));
    double *t = malloc(n * sizeof *t);
    CHECK(t);
    uint8_t page[NV_GM_PAGE];
    double start = now_s();
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a[3] = { my_id, 1, (i * 7919) % 1024 };
        double t0 = now_s();
        CHECK_OK(call(p, NV_GM_GET, a, 3, NULL, 0, page, sizeof page, NULL));
        t[i] = now_s() - t0;
    }
    double all = now_s() - start;
    qsort(t, n, sizeof *t, cmp_d);
    printf("GETRATE n=%llu median_us=%.2f p99_us=%.2f rate_per_s=%.0f\n", (unsigned long long)n, t[n / 2] * 1e6,
           t[n * 99 / 100] * 1e6, (double)n / all);
    free(t);
}

/* --- garbage: random calls ------------------------------------------------ */

static uint64_t rnd_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 7;
    rnd_state ^= rnd_state << 17;
    return rnd_state;
}

/* An argument: the values a decoder's checks turn on, or anything. */
static uint64_t rnd_arg(void)
{
    switch (rnd() % 9) {
    case 0: return 0;
    case 1: return 1;
    case 2: return UINT64_MAX;
    case 3: return my_id;
    case 4: return rnd() % 64;
    case 5: return rnd() % (1u << 20);
    case 6: return NV_GM_VERSION;
    case 7: return (uint64_t)1 << 63 | rnd() % 4;   /* a shared region's id bit */
    default: return rnd();
    }
}

/* The server still works: a page put and read back on a well-behaved
 * connection. */
static void still_serves(int good, unsigned gen)
{
    CHECK_OK(put(good, my_id, 99, gen % 512, 1, gen));
    CHECK_OK(get_check(good, my_id, 99, gen % 512, gen, NULL));
}

/* n calls of every procedure (and some past the last) with random
 * argument counts, values and payloads, on connections that said nothing,
 * HELLO as a client, as a server (which may name any client) or as an
 * observer. Each must be answered, with any status, within the timeout;
 * a connection the server closes is opened again; after every 100 calls a
 * well-formed round trip still works. */
static void sc_garbage(const char *addr, uint64_t n)
{
    int good = connect_to(addr);
    hello(good, NV_GM_ROLE_CLIENT, my_id, NULL);
    int conn[4];
    for (int i = 0; i < 4; i++) {
        conn[i] = connect_to(addr);
        if (i > 0)
            hello(conn[i], i == 1 ? NV_GM_ROLE_CLIENT : i == 2 ? NV_GM_ROLE_SERVER : NV_GM_ROLE_OBSERVER,
                  i == 1 ? my_id + 1 : i == 2 ? rnd() : 0, NULL);
    }
    static uint8_t pay[4 * NV_GM_PAGE + 64], rbuf[NV_GM_GETN_MAX * NV_GM_PAGE];
    uint64_t answered[8] = { 0 }, closed = 0;
    for (uint64_t i = 0; i < n; i++) {
        int c = (int)(rnd() % 4);
        unsigned op = (unsigned)(rnd() % (NV_GM_NOPS + 2));
        uint64_t a[6];
        unsigned na = (unsigned)(rnd() % 7);
        for (unsigned k = 0; k < na; k++)
            a[k] = rnd_arg();
        size_t len = rnd() % 4 ? rnd() % 64 : rnd() % sizeof pay;
        for (size_t k = 0; k < len; k++)
            pay[k] = (uint8_t)rnd();
        if (op == NV_GM_MOVE && len >= 4)
            pay[0] = 'x';   /* never a server's address: MOVE would connect to it */
        netvm_rpc_result_t res;
        netvm_status_t st = nv_rpc_svc_call(ctx, conn[c], nv_gm_k(op), a, na, pay, len, rbuf, sizeof rbuf,
                                            30000, &res);
        CHECK(st != NETVM_ERR_TIMEOUT);
        if (st == NETVM_ERR_PEER) {
            closed++;
            conn[c] = connect_to(addr);
        }
        answered[st < 8 ? st : 7]++;
        if (i % 100 == 99)
            still_serves(good, (unsigned)(i / 100));
    }
    still_serves(good, (unsigned)n);
    printf("GARBAGE ok %llu calls: ok %llu inval %llu key %llu, %llu connections closed\n", (unsigned long long)n,
           (unsigned long long)answered[NETVM_OK], (unsigned long long)answered[NETVM_ERR_INVAL],
           (unsigned long long)answered[NETVM_ERR_KEY], (unsigned long long)closed);
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 4)
        FAILF("usage: mclient CREDFILE SCENARIO ADDR [ADDR2] [N]");
    char err[600];
    if (nv_gm_cred_read_file(argv[1], cred, &cred_len, err, sizeof err) != 0)
        FAILF("%s", err);
    const char *sc = argv[2], *addr = argv[3];
    CHECK_OK(netvm_init(&ctx, NULL));
    my_id = ((uint64_t)getpid() << 32) ^ 0x1234567;
    if (!strcmp(sc, "basic") && argc == 5) {
        sc_basic(addr, strtoull(argv[4], NULL, 10));
    } else if (!strcmp(sc, "bound")) {
        sc_bound(addr);
    } else if (!strcmp(sc, "auth")) {
        cred[0] ^= 1;
        int peer;
        CHECK_ST(netvm_connect(ctx, addr, cred, cred_len, 0, &peer), NETVM_ERR_AUTH);
        printf("AUTH refused\n");
    } else if (!strcmp(sc, "hold") && argc == 5) {
        sc_hold(addr, strtoull(argv[4], NULL, 10));
    } else if (!strcmp(sc, "move") && argc == 6) {
        sc_move(addr, argv[4], strtoull(argv[5], NULL, 10));
    } else if (!strcmp(sc, "getrate") && argc == 5) {
        sc_getrate(addr, strtoull(argv[4], NULL, 10));
    } else if (!strcmp(sc, "shared")) {
        sc_shared(addr);
    } else if (!strcmp(sc, "garbage") && argc == 5) {
        sc_garbage(addr, strtoull(argv[4], NULL, 10));
    } else if (!strcmp(sc, "drain") && argc == 5) {
        sc_drain(addr, strtoull(argv[4], NULL, 10));
    } else {
        FAILF("unknown scenario %s", sc);
    }
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
