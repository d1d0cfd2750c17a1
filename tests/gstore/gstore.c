/* The remote store (src/gmem/store_remote*.c, servers*.c) against real
 * memory servers, without the pager: usage gstore NETVM CASE [PAGES].
 * Each case starts its own `netvm memd` processes. */
#include "gs_servers.h"
#include "gmem/store_remote.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

static netvm_ctx_t *ctx;
/* servers are observed from a context of their own: a server answers a
 * delegated GET over any connection it has to this process */
static netvm_ctx_t *octx;
static uint64_t npages = 256;

static void sleep_ms(int ms)
{
    struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
    nanosleep(&t, NULL);
}

static void servers_opt(struct gs_server *s, int n, char *list, size_t cap)
{
    list[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            strncat(list, ",", cap - strlen(list) - 1);
        strncat(list, s[i].addr, cap - strlen(list) - 1);
    }
}

static struct nv_gstore *open_store(struct gs_server *s, int n, int replicas, int timeout_ms, netvm_status_t want)
{
    static char list[1024];
    servers_opt(s, n, list, sizeof list);
    netvm_gmem_opts_t o = { .servers = list, .replicas = replicas, .timeout_ms = timeout_ms,
                            .credential = gs_cred, .credential_len = strlen(gs_cred) };
    struct nv_gstore *st = NULL;
    CHECK_ST(nv_gstore_remote_open(ctx, npages, &o, &st), want);
    return st;
}

/* --- blocking store of a range, waiting for done -------------------------- */

struct waiter {
    pthread_mutex_t m;
    pthread_cond_t  c;
    int             left;
    netvm_status_t  st;
};

static void waiter_done(void *arg, netvm_status_t st)
{
    struct waiter *w = arg;
    pthread_mutex_lock(&w->m);
    if (st != NETVM_OK)
        w->st = st;
    w->left--;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

static void waiter_wait(struct waiter *w)
{
    pthread_mutex_lock(&w->m);
    while (w->left)
        pthread_cond_wait(&w->c, &w->m);
    pthread_mutex_unlock(&w->m);
}

static netvm_status_t store_range(struct nv_gstore *s, uint64_t first, uint64_t n, uint64_t round)
{
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, n * NV_GM_PAGE);
    CHECK(buf);
    for (uint64_t i = 0; i < n; i++)
        gs_fill(buf + i * NV_GM_PAGE, first + i, round);
    struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, NETVM_OK };
    CHECK_OK(s->ops->store_nb(s, first, n, buf, waiter_done, &w));
    waiter_wait(&w);
    free(buf);
    return w.st;
}

/* Store every page in runs of 5 (extents split and joined), round r. */
static void store_all(struct nv_gstore *s, uint64_t round)
{
    for (uint64_t p = 0; p < npages; p += 5)
        CHECK_OK(store_range(s, p, p + 5 <= npages ? 5 : npages - p, round));
}

static netvm_gmem_health_t health(struct nv_gstore *s);

/* live: how many servers are running (not stopped) now, for a read that
 * failed with NETVM_ERR_PEER because a loaded machine kept every server
 * from answering within the timeout, so that all were suspected at once
 * (seen once in a full suite on 2 busy CPUs): the read is tried again once
 * that many are taken for alive again. 0: no second try. */
static void check_all_live(struct nv_gstore *s, uint64_t round, int live);

static void check_all(struct nv_gstore *s, uint64_t round)
{
    check_all_live(s, round, 0);
}

static void check_all_live(struct nv_gstore *s, uint64_t round, int live)
{
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
    for (uint64_t p = 0; p < npages; p++) {
        memset(buf, 0xAA, NV_GM_PAGE);
        netvm_status_t st = s->ops->fetch(s, p, buf);
        if (st == NETVM_ERR_PEER && live) {
            fprintf(stderr, "fetch of page %llu: %s with %d servers taken for alive; once more when %d are\n",
                    (unsigned long long)p, netvm_strerror(st), health(s).servers_alive, live);
            for (int i = 0; i < 3000 && health(s).servers_alive < live; i++)
                sleep_ms(10);
            memset(buf, 0xAA, NV_GM_PAGE);
            st = s->ops->fetch(s, p, buf);
        }
        if (st != NETVM_OK)
            FAILF("fetch of page %llu: %s", (unsigned long long)p, netvm_strerror(st));
        if (!gs_check(buf, p, round))
            FAILF("page %llu: wrong contents", (unsigned long long)p);
    }
    free(buf);
}

static uint64_t used_pages(struct gs_server *s)
{
    struct nv_gm_stat st;
    gs_stat(octx, s, &st);
    return st.used_pages;
}

/* Poll a condition a bounded number of times (the work it waits for is
 * counted, not timed; the bound only catches a hang). */
#define EVENTUALLY(cond) do { \
    int ok_ = 0; \
    for (int i_ = 0; i_ < 3000 && !(ok_ = (cond)); i_++) \
        sleep_ms(10); \
    if (!ok_) FAILF("never true: %s", #cond); \
} while (0)

static netvm_gmem_health_t health(struct nv_gstore *s)
{
    netvm_gmem_health_t h;
    s->ops->health(s, &h);
    return h;
}

/* --- cases ------------------------------------------------------------------- */

static void case_roundtrip(int nsrv, int replicas)
{
    struct gs_server srv[3];
    for (int i = 0; i < nsrv; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, nsrv, replicas, 0, NETVM_OK);
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
    CHECK(!s->ops->has(s, 0));
    CHECK_ST(s->ops->fetch(s, 0, buf), NETVM_ERR_NOTFOUND);
    store_all(s, 1);
    for (uint64_t p = 0; p < npages; p++)
        CHECK(s->ops->has(s, p));
    check_all(s, 1);
    /* copies held: R per page over the servers */
    uint64_t total = 0;
    for (int i = 0; i < nsrv; i++)
        total += used_pages(&srv[i]);
    CHECK(total == npages * (uint64_t)replicas);
    if (nsrv == 3)
        for (int i = 0; i < nsrv; i++)   /* placement spreads */
            CHECK(used_pages(&srv[i]) > 0);
    netvm_gmem_health_t h = health(s);
    CHECK(h.pages_stored == npages && h.pages_degraded == 0 && h.pages_lost == 0 && h.replicas == replicas);
    /* overwrite: the new version is read, never the old */
    store_all(s, 2);
    check_all(s, 2);
    total = 0;
    for (int i = 0; i < nsrv; i++)
        total += used_pages(&srv[i]);
    CHECK(total == npages * (uint64_t)replicas);
    /* discard: zeros from now, freed at the servers */
    s->ops->discard(s, 10, 20);
    for (uint64_t p = 10; p < 30; p++) {
        CHECK(!s->ops->has(s, p));
        CHECK_ST(s->ops->fetch(s, p, buf), NETVM_ERR_NOTFOUND);
    }
    CHECK(s->ops->has(s, 30) && s->ops->has(s, 9));
    EVENTUALLY(({ uint64_t t_ = 0; for (int i = 0; i < nsrv; i++) t_ += used_pages(&srv[i]);
                  t_ == (npages - 20) * (uint64_t)replicas; }));
    CHECK(s->bytes_out >= 2 * npages * NV_GM_PAGE * (uint64_t)replicas);
    CHECK(s->remote_fetches == 2 * npages);
    s->ops->close(s);
    for (int i = 0; i < nsrv; i++)
        CHECK(used_pages(&srv[i]) == 0);
    free(buf);
    for (int i = 0; i < nsrv; i++)
        gs_stop(&srv[i]);
}

struct nb_arg {
    struct nv_gstore *s;
    int               t;
    int               nthreads;
};

static void *nb_thread(void *arg)
{
    struct nb_arg *a = arg;
    enum { BATCH = 16 };
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, BATCH * NV_GM_PAGE);
    for (int rep = 0; rep < 4; rep++)
        for (uint64_t p0 = 0; p0 < npages; p0 += BATCH) {
            struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, NETVM_OK };
            uint64_t n = p0 + BATCH <= npages ? BATCH : npages - p0;
            w.left = (int)n;
            for (uint64_t i = 0; i < n; i++) {
                /* threads take the same pages in different orders */
                uint64_t p = p0 + (i + (uint64_t)a->t * 5) % n;
                if (rep % 2 && a->t % 2) {
                    CHECK_OK(a->s->ops->fetch(a->s, p, buf + (p - p0) * NV_GM_PAGE));
                    waiter_done(&w, NETVM_OK);
                } else {
                    CHECK_OK(a->s->ops->fetch_nb(a->s, p, buf + (p - p0) * NV_GM_PAGE, waiter_done, &w));
                }
            }
            waiter_wait(&w);
            CHECK_OK(w.st);
            for (uint64_t i = 0; i < n; i++)
                if (!gs_check(buf + i * NV_GM_PAGE, p0 + i, 1))
                    FAILF("thread %d: page %llu wrong", a->t, (unsigned long long)(p0 + i));
        }
    free(buf);
    return NULL;
}

static void case_threads(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 3, 2, 0, NETVM_OK);
    store_all(s, 1);
    enum { T = 4 };
    pthread_t th[T];
    struct nb_arg a[T];
    for (int t = 0; t < T; t++) {
        a[t] = (struct nb_arg){ s, t, T };
        CHECK(pthread_create(&th[t], NULL, nb_thread, &a[t]) == 0);
    }
    for (int t = 0; t < T; t++)
        pthread_join(th[t], NULL);
    s->ops->close(s);
    for (int i = 0; i < 3; i++)
        gs_stop(&srv[i]);
}

/* SIGKILL one of three servers with R=2: nothing is lost, R comes back. */
static void case_kill(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 3, 2, 500, NETVM_OK);
    store_all(s, 1);
    uint64_t on_victim = used_pages(&srv[1]);
    CHECK(on_victim > 0);
    gs_signal(&srv[1], SIGKILL);
    gs_reap(&srv[1]);
    check_all(s, 1);
    /* the loss noticed first: until then nothing counts as degraded (the
     * reads above need not have asked the dead server anything) */
    EVENTUALLY(health(s).servers_alive == 2);
    EVENTUALLY(health(s).pages_degraded == 0);
    netvm_gmem_health_t h = health(s);
    CHECK(h.pages_lost == 0 && h.pages_stored == npages && h.servers_alive == 2);
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    CHECK(atomic_load(&r->restored) == on_victim);
    CHECK(used_pages(&srv[0]) + used_pages(&srv[2]) == 2 * npages);
    /* and with R restored, a second loss costs nothing either */
    gs_signal(&srv[2], SIGKILL);
    gs_reap(&srv[2]);
    check_all(s, 1);
    EVENTUALLY(health(s).servers_alive == 1);
    CHECK(health(s).pages_lost == 0);
    s->ops->close(s);
    gs_stop(&srv[0]);
}

/* store_vec_nb: pages that are not adjacent, stored in a PUTV a server
 * for each group placed alike, read back; R copies each; a page discarded
 * while its PUTV is under way; a bad vector refused whole; a server killed
 * afterwards costs nothing. */
static netvm_status_t store_vec(struct nv_gstore *s, const uint64_t *pages, uint64_t n, uint64_t round)
{
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, n * NV_GM_PAGE);
    const void **src = malloc(n * sizeof *src);
    CHECK(buf && src);
    for (uint64_t i = 0; i < n; i++) {
        gs_fill(buf + i * NV_GM_PAGE, pages[i], round);
        src[i] = buf + i * NV_GM_PAGE;
    }
    struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, NETVM_OK };
    netvm_status_t st = s->ops->store_vec_nb(s, pages, src, n, waiter_done, &w);
    if (st == NETVM_OK) {
        waiter_wait(&w);
        st = w.st;
    }
    free(src);
    free(buf);
    return st;
}

static uint64_t puts_of(struct gs_server *srv)
{
    struct nv_gm_stat st;
    gs_stat(octx, srv, &st);
    return st.puts;
}

static void case_vec(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 3, 2, 500, NETVM_OK);
    CHECK(s->ops->store_vec_nb);
    uint64_t *pages = malloc(npages * sizeof *pages);
    CHECK(pages);
    /* every page once, in 7 interleaved vectors: no two pages of one are
     * adjacent, so stored by runs each page would be a PUT a copy */
    for (int round = 1; round <= 2; round++) {
        uint64_t before = puts_of(&srv[0]) + puts_of(&srv[1]) + puts_of(&srv[2]);
        for (uint64_t k = 0; k < 7; k++) {
            uint64_t n = 0;
            for (uint64_t p = k; p < npages && n < NV_GM_PUT_MAX; p += 7)
                pages[n++] = p;
            CHECK_OK(store_vec(s, pages, n, (uint64_t)round));
        }
        check_all(s, (uint64_t)round);
        uint64_t calls = puts_of(&srv[0]) + puts_of(&srv[1]) + puts_of(&srv[2]) - before;
        /* at most a call a server for each of the 6 orders of 3 servers */
        if (calls > 7 * 6 * 2)
            FAILF("%llu calls stored %llu pages twice", (unsigned long long)calls, (unsigned long long)npages);
        CHECK(used_pages(&srv[0]) + used_pages(&srv[1]) + used_pages(&srv[2]) == 2 * npages);
    }
    /* a page discarded while its PUTV is under way: its copies are freed
     * and only its (the servers are stopped so that the discard comes
     * between the PUTV and its answers; the chunk's other pages, placed
     * alike, stay readable: freeing the chunk for one page lost them) */
    {
        uint64_t v[3] = { 0, 2, 4 };   /* one extent: one placement, one PUTV a server */
        uint8_t *buf = aligned_alloc(NV_GM_PAGE, 3 * NV_GM_PAGE);
        const void *src[3];
        CHECK(buf);
        for (int i = 0; i < 3; i++) {
            gs_fill(buf + i * NV_GM_PAGE, v[i], 4);
            src[i] = buf + i * NV_GM_PAGE;
        }
        for (int i = 0; i < 3; i++)
            gs_signal(&srv[i], SIGSTOP);
        struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, NETVM_OK };
        CHECK_OK(s->ops->store_vec_nb(s, v, src, 3, waiter_done, &w));
        s->ops->discard(s, 2, 1);
        for (int i = 0; i < 3; i++)
            gs_signal(&srv[i], SIGCONT);
        waiter_wait(&w);
        CHECK_OK(w.st);
        uint8_t *got = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
        CHECK(got);
        CHECK_ST(s->ops->fetch(s, 2, got), NETVM_ERR_NOTFOUND);
        for (int i = 0; i < 3; i += 2) {
            CHECK_OK(s->ops->fetch(s, v[i], got));
            CHECK(gs_check(got, v[i], 4));
        }
        EVENTUALLY(used_pages(&srv[0]) + used_pages(&srv[1]) + used_pages(&srv[2]) == 2 * (npages - 1));
        /* the rest as before, for the checks below */
        CHECK_OK(store_vec(s, v, 3, 2));
        free(got);
        free(buf);
    }
    /* refused whole, nothing changed: unsorted, a page twice, past the end */
    uint64_t bad[3][2] = { { 9, 5 }, { 5, 5 }, { 5, npages } };
    for (int i = 0; i < 3; i++)
        CHECK_ST(store_vec(s, bad[i], 2, 3), NETVM_ERR_INVAL);
    check_all(s, 2);
    netvm_gmem_health_t h = health(s);
    CHECK(h.pages_stored == npages && h.pages_degraded == 0 && h.pages_lost == 0);
    gs_signal(&srv[1], SIGKILL);
    gs_reap(&srv[1]);
    check_all(s, 2);
    s->ops->close(s);
    free(pages);
    gs_stop(&srv[0]);
    gs_stop(&srv[2]);
}

/* SIGSTOP: suspected within the timeout, reads served by the replica. */
static void case_stop(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    /* 2 s: long enough that the stopped server is not yet taken as dead
     * (NV_GM_TIMEOUTS_TO_DEAD) before it is continued, even under sanitizers,
     * and that a live server on a busy machine is seldom suspected */
    struct nv_gstore *s = open_store(srv, 3, 2, 2000, NETVM_OK);
    store_all(s, 1);
    gs_signal(&srv[0], SIGSTOP);
    check_all_live(s, 1, 2);   /* every page, including those srv 0 holds first */
    /* (a live server the busy machine kept from answering a ping in time
     * is suspected for a moment too: it comes back) */
    EVENTUALLY(health(s).servers_alive == 2);
    /* a stopped server is suspected by the monitor's pings too, not only
     * by a read that waited for it */
    gs_signal(&srv[0], SIGCONT);
    EVENTUALLY(health(s).servers_alive == 3);
    gs_signal(&srv[1], SIGSTOP);
    EVENTUALLY(health(s).servers_alive == 2);
    check_all_live(s, 1, 2);
    store_all(s, 2);   /* new copies avoid the suspect */
    check_all_live(s, 2, 2);
    gs_signal(&srv[1], SIGCONT);
    EVENTUALLY(health(s).servers_alive == 3);
    check_all(s, 2);
    s->ops->close(s);
    for (int i = 0; i < 3; i++)
        gs_stop(&srv[i]);
}

/* A server that stays stopped is taken as dead after NV_GM_TIMEOUTS_TO_DEAD
 * timeouts of silence and its pages re-replicated: a second server lost after
 * that costs nothing either. */
static void case_hang(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 3, 2, 200, NETVM_OK);
    store_all(s, 1);
    gs_signal(&srv[0], SIGSTOP);
    EVENTUALLY(health(s).servers_alive == 2);
    struct nv_gm_servers *g = ((struct nv_gstore_remote *)s)->g;
    EVENTUALLY(atomic_load(&g->srv[0].state) == NV_GM_SRV_DEAD);
    EVENTUALLY(health(s).pages_degraded == 0);
    CHECK(health(s).pages_lost == 0);
    gs_signal(&srv[1], SIGKILL);
    gs_reap(&srv[1]);
    check_all(s, 1);
    CHECK(health(s).pages_lost == 0);
    /* it answers again, but stays out: its copies are not the directory's */
    gs_signal(&srv[0], SIGCONT);
    check_all(s, 1);
    CHECK(atomic_load(&g->srv[0].state) == NV_GM_SRV_DEAD);
    s->ops->close(s);
    gs_stop(&srv[0]);
    gs_stop(&srv[2]);
}

/* R=1 and the only copy's server killed: those pages fail, are counted
 * lost, the others read. */
static void case_lost(void)
{
    struct gs_server srv[2];
    for (int i = 0; i < 2; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 2, 1, 500, NETVM_OK);
    store_all(s, 1);
    uint64_t on_victim = used_pages(&srv[0]);
    CHECK(on_victim > 0 && on_victim < npages);
    gs_signal(&srv[0], SIGKILL);
    gs_reap(&srv[0]);
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
    uint64_t failed = 0;
    for (uint64_t p = 0; p < npages; p++) {
        netvm_status_t st = s->ops->fetch(s, p, buf);
        if (st == NETVM_OK)
            CHECK(gs_check(buf, p, 1));
        else {
            CHECK_ST(st, NETVM_ERR_PEER);
            failed++;
        }
    }
    CHECK(failed == on_victim);
    EVENTUALLY(health(s).pages_lost == on_victim);
    CHECK(health(s).pages_stored == npages - on_victim);
    /* a lost page written again is stored again */
    for (uint64_t p = 0; p < npages; p++)
        if (s->ops->fetch(s, p, buf) != NETVM_OK) {
            CHECK_OK(store_range(s, p, 1, 3));
            CHECK_OK(s->ops->fetch(s, p, buf));
            CHECK(gs_check(buf, p, 3));
            CHECK(health(s).pages_lost == on_victim - 1);
            break;
        }
    free(buf);
    s->ops->close(s);
    gs_stop(&srv[1]);
}

struct reader {
    struct nv_gstore *s;
    _Atomic int       stop;
    uint64_t          reads;
};

static void *reader_main(void *arg)
{
    struct reader *rd = arg;
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
    while (!atomic_load(&rd->stop))
        for (uint64_t p = 0; p < npages; p++) {
            CHECK_OK(rd->s->ops->fetch(rd->s, p, buf));
            if (!gs_check(buf, p, 1))
                FAILF("reader: page %llu wrong during the move", (unsigned long long)p);
            rd->reads++;
        }
    free(buf);
    return NULL;
}

/* A server added while a reader runs: pages move onto it (MOVE by their
 * holders), every read meanwhile is right; then one removed. */
static void case_add_remove(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 2, 1, 0, NETVM_OK);
    store_all(s, 1);
    struct reader rd = { .s = s };
    pthread_t th;
    CHECK(pthread_create(&th, NULL, reader_main, &rd) == 0);
    CHECK_OK(netvm_gmem_server_add(ctx, srv[2].addr));
    CHECK_ST(netvm_gmem_server_add(ctx, srv[2].addr), NETVM_ERR_EXISTS);
    atomic_store(&rd.stop, 1);
    pthread_join(th, NULL);
    uint64_t moved = used_pages(&srv[2]);
    CHECK(moved > 0);
    CHECK(used_pages(&srv[0]) + used_pages(&srv[1]) + moved == npages);
    check_all(s, 1);

    /* a page moved behind the directory's back is still read: the old
     * holder delegates, the directory learns the new one */
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    uint64_t page = npages;
    for (uint64_t p = 0; p < npages && page == npages; p++)
        if (nv_gm_e_holder(atomic_load(&r->dir[p]), 0) == 0)
            page = p;
    CHECK(page < npages);
    int to = 2;
    uint64_t a[4] = { r->g->client_id, r->region, page, 1 };
    netvm_rpc_result_t res;
    /* as a server would, through our client connection: memd takes MOVE
     * from a client for its own pages */
    netvm_status_t mst = nv_rpc_svc_call(ctx, r->g->srv[0].peer, nv_gm_k(NV_GM_MOVE), a, 4, srv[to].addr,
                                         strlen(srv[to].addr), NULL, 0, 5000, &res);
    if (mst == NETVM_OK) {
        struct nv_gm_stat before, after;
        gs_stat(octx, &srv[0], &before);
        uint8_t *buf = aligned_alloc(NV_GM_PAGE, NV_GM_PAGE);
        CHECK_OK(s->ops->fetch(s, page, buf));
        CHECK(gs_check(buf, page, 1));
        gs_stat(octx, &srv[0], &after);
        CHECK(after.delegated == before.delegated + 1);
        CHECK(nv_gm_e_holder(atomic_load(&r->dir[page]), 0) == (unsigned)to);
        CHECK_OK(s->ops->fetch(s, page, buf));   /* straight to the new holder now */
        gs_stat(octx, &srv[0], &before);
        CHECK(before.delegated == after.delegated);
        free(buf);
    } else {
        fprintf(stderr, "note: memd refused a client's MOVE (%s): delegation checked through server_add only\n",
                netvm_strerror(mst));
    }

    CHECK_ST(netvm_gmem_server_remove(ctx, "tcp:127.0.0.1:1"), NETVM_ERR_NOTFOUND);
    struct nv_gm_stat before_rm, after_rm;
    gs_stat(octx, &srv[0], &before_rm);
    CHECK_OK(netvm_gmem_server_remove(ctx, srv[0].addr));
    CHECK(used_pages(&srv[0]) == 0);
    gs_stat(octx, &srv[0], &after_rm);
    CHECK(after_rm.moves_out > before_rm.moves_out);
    CHECK(used_pages(&srv[1]) + used_pages(&srv[2]) == npages);
    check_all(s, 1);
    store_all(s, 2);
    CHECK(used_pages(&srv[0]) == 0);
    check_all(s, 2);
    s->ops->close(s);
    for (int i = 0; i < 3; i++)
        gs_stop(&srv[i]);
}

/* A server whose pool is full refuses; the copies go to the next server
 * of the placement. A region the servers cannot hold is refused at open.
 * The small pool is 8 pages: the placement hands each server about half
 * of the region's 32 extents of 8 pages, and only if it gave this one
 * at most one would nothing be refused (a pool of 64 pages failed so
 * when it gave 8 or fewer: about 1 run in 100). */
static void case_nomem(void)
{
    struct gs_server srv[2];
    gs_start(&srv[0], "32K", "2000");   /* 8 pages */
    gs_start(&srv[1], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 2, 1, 0, NETVM_OK);
    store_all(s, 1);
    CHECK(used_pages(&srv[0]) <= 8);
    CHECK(used_pages(&srv[0]) + used_pages(&srv[1]) == npages);
    struct nv_gm_stat st;
    gs_stat(octx, &srv[0], &st);
    CHECK(st.refused > 0);
    check_all(s, 1);
    s->ops->close(s);
    uint64_t keep = npages;
    npages = 8192;   /* 32 MiB: more than both pools */
    open_store(srv, 2, 1, 0, NETVM_ERR_NOMEM);
    npages = keep;
    for (int i = 0; i < 2; i++)
        gs_stop(&srv[i]);
}

/* SIGTERM: the server asks its clients to drain; R=1, so a page not moved
 * off it before it exits would be lost. */
static void case_drain(void)
{
    struct gs_server srv[2];
    for (int i = 0; i < 2; i++)
        gs_start(&srv[i], "16M", "20000");
    struct nv_gstore *s = open_store(srv, 2, 1, 0, NETVM_OK);
    store_all(s, 1);
    CHECK(used_pages(&srv[0]) > 0);
    gs_signal(&srv[0], SIGTERM);
    gs_reap(&srv[0]);
    CHECK(used_pages(&srv[1]) == npages);
    struct nv_gm_stat st;
    gs_stat(octx, &srv[1], &st);
    CHECK(st.moves_in > 0);   /* the draining server moved them itself, in runs */
    check_all(s, 1);
    CHECK(health(s).pages_lost == 0);
    s->ops->close(s);
    gs_stop(&srv[1]);
}

static void case_auth(void)
{
    struct gs_server srv[1];
    gs_start(&srv[0], "16M", "2000");
    netvm_gmem_opts_t o = { .servers = srv[0].addr, .credential = "a-wrong-credential-of-some-length",
                            .credential_len = 33 };
    struct nv_gstore *st = NULL;
    CHECK_ST(nv_gstore_remote_open(ctx, npages, &o, &st), NETVM_ERR_AUTH);
    /* a too short one is refused before anything is sent */
    o.credential_len = 8;
    CHECK_ST(nv_gstore_remote_open(ctx, npages, &o, &st), NETVM_ERR_INVAL);
    /* a credential file open to others is refused */
    char path[256];
    snprintf(path, sizeof path, "/tmp/gstore-open-cred-%d", (int)getpid());
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, gs_cred, strlen(gs_cred)) > 0);
    fchmod(fd, 0644);
    close(fd);
    setenv("NETVM_GMEM_CREDENTIAL_FILE", path, 1);
    netvm_gmem_opts_t o2 = { .servers = srv[0].addr };
    CHECK_ST(nv_gstore_remote_open(ctx, npages, &o2, &st), NETVM_ERR_AUTH);
    chmod(path, 0600);
    CHECK_OK(nv_gstore_remote_open(ctx, npages, &o2, &st));
    CHECK_OK(store_range(st, 0, 1, 1));
    st->ops->close(st);
    unlink(path);
    gs_stop(&srv[0]);
}

/* Nothing configured: embedded servers start, serve, and are gone after
 * netvm_finalize. */
static void case_embedded(void)
{
    unsetenv("NETVM_GMEM_SERVERS");
    setenv("NETVM_MEMD", gs_netvm, 1);
    setenv("NETVM_GMEM_EMBEDDED_SIZE", "8M", 1);
    struct nv_gstore *s = NULL;
    CHECK_OK(nv_gstore_remote_open(ctx, npages, NULL, &s));
    struct nv_gm_servers *g = nv_gm_servers_if(ctx);
    CHECK(g && g->nembedded == 2);
    pid_t pids[2] = { g->embedded[0], g->embedded[1] };
    CHECK(health(s).servers == 2 && health(s).replicas == 2);
    store_all(s, 1);
    check_all(s, 1);
    s->ops->close(s);
    CHECK_OK(netvm_finalize(ctx));
    ctx = NULL;
    for (int i = 0; i < 2; i++)
        CHECK(kill(pids[i], 0) != 0 && errno == ESRCH);
}

/* A client killed with SIGKILL leaves nothing on the servers. */
static void case_client_killed(void)
{
    struct gs_server srv[2];
    for (int i = 0; i < 2; i++)
        gs_start(&srv[i], "16M", "2000");
    pid_t child = fork();   /* before this process has a context of its own */
    CHECK(child >= 0);
    if (child == 0) {
        netvm_ctx_t *c2;
        netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
        CHECK_OK(netvm_init(&c2, &cfg));
        ctx = c2;
        struct nv_gstore *s = open_store(srv, 2, 2, 0, NETVM_OK);
        store_all(s, 1);
        raise(SIGKILL);
    }
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    CHECK_OK(netvm_init(&octx, &cfg));
    int status;
    CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status));
    EVENTUALLY(used_pages(&srv[0]) == 0 && used_pages(&srv[1]) == 0);
    for (int i = 0; i < 2; i++)
        gs_stop(&srv[i]);
}

/* --- runs of pages: fetchn_nb and NV_GM_GETN -------------------------------- */

struct nwaiter {
    pthread_mutex_t m;
    pthread_cond_t  c;
    int             done;
    uint64_t        got;
};

static void nwaiter_done(void *arg, uint64_t got)
{
    struct nwaiter *w = arg;
    pthread_mutex_lock(&w->m);
    w->got = got;
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

static uint64_t fetchn(struct nv_gstore *s, uint64_t first, uint64_t n, uint8_t *buf)
{
    struct nwaiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
    memset(buf, 0xAA, n * NV_GM_PAGE);
    CHECK_OK(s->ops->fetchn_nb(s, first, n, buf, nwaiter_done, &w));
    pthread_mutex_lock(&w.m);
    while (!w.done)
        pthread_cond_wait(&w.c, &w.m);
    pthread_mutex_unlock(&w.m);
    return w.got;
}

/* The pages of got hold round's contents. */
static void check_got(const uint8_t *buf, uint64_t first, uint64_t n, uint64_t got, uint64_t round)
{
    for (uint64_t i = 0; i < n; i++)
        if ((got >> i & 1) && !gs_check(buf + i * NV_GM_PAGE, first + i, round))
            FAILF("fetchn: page %llu: wrong contents", (unsigned long long)(first + i));
}

static uint64_t sum_stat(struct gs_server *srv, int n, int delegated)
{
    uint64_t t = 0;
    for (int i = 0; i < n; i++) {
        struct nv_gm_stat st;
        gs_stat(octx, &srv[i], &st);
        t += delegated ? st.delegated : st.gets;
    }
    return t;
}

/* The GETNs fetchn of [first, first + n) makes: one per row of pages
 * whose holders are the same servers. */
static uint64_t runs_of(struct nv_gstore_remote *r, uint64_t first, uint64_t n)
{
    uint64_t runs = 0, prev = 0;
    for (uint64_t p = first; p < first + n; p++) {
        uint64_t e = atomic_load(&r->dir[p]), set = 0;
        for (int i = 0; i < NV_GM_RMAX; i++)
            if (nv_gm_e_holder(e, i) != NV_GM_NO_SERVER)
                set |= (uint64_t)1 << nv_gm_e_holder(e, i);
        runs += p == first || set != prev;
        prev = set;
    }
    return runs;
}

/* FREE page at server idx of the store, behind the directory's back. */
static void free_at(struct nv_gstore_remote *r, int idx, uint64_t page)
{
    uint64_t a[4] = { r->g->client_id, r->region, page, 1 };
    netvm_rpc_result_t res;
    CHECK_OK(nv_rpc_svc_call(ctx, r->g->srv[idx].peer, nv_gm_k(NV_GM_FREE), a, 4, NULL, 0, NULL, 0, 5000, &res));
}

/* Held pages come in one GETN per run of shared holders; pages a holder
 * lacks (freed, moved) are fetched one by one (replica, delegation);
 * pages no server has are not in got; a dead holder's runs are read from
 * the replicas. */
static void case_getn(void)
{
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++)
        gs_start(&srv[i], "16M", "2000");
    struct nv_gstore *s = open_store(srv, 3, 2, 500, NETVM_OK);
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    store_all(s, 1);
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, 64 * NV_GM_PAGE);
    CHECK(buf);

    /* held: every page, fewer calls than pages */
    for (uint64_t first = 0; first < npages; first += 64) {
        uint64_t n = npages - first < 64 ? npages - first : 64, all = n == 64 ? UINT64_MAX : ((uint64_t)1 << n) - 1;
        uint64_t gets0 = sum_stat(srv, 3, 0);
        uint64_t got = fetchn(s, first, n, buf);
        CHECK(got == all);
        check_got(buf, first, n, got, 1);
        uint64_t calls = sum_stat(srv, 3, 0) - gets0;
        if (calls != runs_of(r, first, n))
            FAILF("fetchn of %llu pages: %llu calls, %llu runs", (unsigned long long)n, (unsigned long long)calls,
                  (unsigned long long)runs_of(r, first, n));
        CHECK(calls < n);
    }
    CHECK(npages >= 64);

    /* partly held: page 10 on no server any more, page 20 on one of two */
    uint64_t e10 = atomic_load(&r->dir[10]), e20 = atomic_load(&r->dir[20]);
    free_at(r, (int)nv_gm_e_holder(e10, 0), 10);
    free_at(r, (int)nv_gm_e_holder(e10, 1), 10);
    free_at(r, (int)nv_gm_e_holder(e20, 0), 20);
    uint64_t got = fetchn(s, 0, 64, buf);
    CHECK(got == (UINT64_MAX & ~((uint64_t)1 << 10)));
    check_got(buf, 0, 64, got, 1);

    /* moved: page 30 moved from both its holders to the third server; a
     * GETN's holder lacks it and a GET of it is delegated */
    uint64_t e30 = atomic_load(&r->dir[30]);
    int to = 0;
    while (nv_gm_e_holds(e30, (unsigned)to))
        to++;
    int moved = 1;
    for (int i = 0; i < 2 && moved; i++) {
        uint64_t a[4] = { r->g->client_id, r->region, 30, 1 };
        netvm_rpc_result_t res;
        netvm_status_t mst = nv_rpc_svc_call(ctx, r->g->srv[nv_gm_e_holder(e30, i)].peer, nv_gm_k(NV_GM_MOVE), a, 4,
                                             r->g->srv[to].addr, strlen(r->g->srv[to].addr), NULL, 0, 5000, &res);
        if (mst != NETVM_OK) {
            fprintf(stderr, "note: memd refused a client's MOVE (%s): moved pages not checked\n",
                    netvm_strerror(mst));
            moved = 0;
        }
    }
    if (moved) {
        uint64_t del0 = sum_stat(srv, 3, 1);
        got = fetchn(s, 24, 16, buf);
        CHECK(got == 0xFFFF);
        check_got(buf, 24, 16, got, 1);
        CHECK(sum_stat(srv, 3, 1) > del0);
    }

    /* a dead server: its runs fail and are read page by page elsewhere.
     * The one page 30 moved to dies: its old holders' delegated GETs fail,
     * which must not make the client take them for gone too (they once
     * answered PEER: the client lost every page they held) */
    int dead = moved ? to : 1;
    gs_signal(&srv[dead], SIGKILL);
    gs_reap(&srv[dead]);
    if (moved) {
        CHECK_ST(s->ops->fetch(s, 30, buf), NETVM_ERR_PEER);   /* its one copy died */
        for (int i = 0; i < 3; i++)
            if (i != dead && !nv_gm_srv_readable(r->g, i))
                FAILF("server %d taken for gone: the server a page moved to died", i);
    }
    for (uint64_t first = 64; first + 64 <= npages; first += 64) {
        got = fetchn(s, first, 64, buf);
        CHECK(got == UINT64_MAX);
        check_got(buf, first, 64, got, 1);
    }
    free(buf);
    s->ops->close(s);
    for (int i = 0; i < 3; i++)
        if (i != dead)
            gs_stop(&srv[i]);
}

/* --- direct reads (src/gmem/direct.h) ---------------------------------------
 * Servers on this machine show their pools: pages are read from them with
 * no request (the servers count no GET), a page being overwritten is never
 * read torn, a page moved away is still found (through the server), a
 * server started with --no-direct and a client with NETVM_GMEM_DIRECT=0
 * are read through GET, and a dead server's pool is not read. */

struct rewriter {
    struct nv_gstore *s;
    uint64_t          page, rounds;
    _Atomic int       done;
};

static void *rewriter_main(void *arg)
{
    struct rewriter *w = arg;
    for (uint64_t k = 0; k < w->rounds; k++)
        CHECK_OK(store_range(w->s, w->page, 64, 100 + (k & 1)));
    atomic_store(&w->done, 1);
    return NULL;
}

static uint64_t direct_of(struct nv_gstore *s) { return __atomic_load_n(&s->direct_fetches, __ATOMIC_RELAXED); }

static void case_direct(void)
{
    const char *env = getenv("NETVM_GMEM_DIRECT");
    int client_off = env && !strcmp(env, "0");
    struct gs_server srv[3];
    for (int i = 0; i < 3; i++) {
        gs_no_direct = i == 2;
        gs_start(&srv[i], "16M", "2000");
    }
    gs_no_direct = 0;

    /* R=2 on three servers, one of which does not offer its pool: every
     * page has a holder that shows it */
    struct nv_gstore *s = open_store(srv, 3, 2, 5000, NETVM_OK);
    struct nv_gstore_remote *r = (struct nv_gstore_remote *)s;
    int idx[3];
    for (int i = 0; i < 3; i++) {
        idx[i] = nv_gm_srv_by_addr(r->g, srv[i].addr);
        CHECK(idx[i] >= 0);
        CHECK((atomic_load(&r->g->srv[idx[i]].view) != NULL) == (!client_off && i < 2));
    }
    store_all(s, 1);
    uint64_t gets0 = sum_stat(srv, 3, 0), d0 = direct_of(s);
    check_all(s, 1);
    uint8_t *buf = aligned_alloc(NV_GM_PAGE, 64 * NV_GM_PAGE);
    CHECK(buf);
    CHECK(fetchn(s, 0, 64, buf) == UINT64_MAX);
    check_got(buf, 0, 64, UINT64_MAX, 1);
    uint64_t gets = sum_stat(srv, 3, 0) - gets0, direct = direct_of(s) - d0;
    fprintf(stderr, "direct %s: %llu pages read directly, %llu GET/GETN calls\n", client_off ? "off" : "on",
            (unsigned long long)direct, (unsigned long long)gets);
    if (client_off)
        CHECK(direct == 0 && gets >= npages);
    else
        CHECK(direct == npages + 64 && gets == 0);

    /* overwritten while read: every page read is one whole version (a
     * run of 64 rewritten in one PUT, read in runs) */
    if (!client_off) {
        struct rewriter w = { s, 64, 2000, 0 };
        pthread_t t;
        CHECK(pthread_create(&t, NULL, rewriter_main, &w) == 0);
        uint64_t reads = 0, torn = 0;
        for (; !atomic_load(&w.done); reads++) {
            uint64_t got = fetchn(s, 64, 64, buf);
            for (uint64_t i = 0; i < 64; i++) {
                const uint8_t *b = buf + i * NV_GM_PAGE;
                torn += (got >> i & 1) && !gs_check(b, 64 + i, 1) && !gs_check(b, 64 + i, 100) &&
                        !gs_check(b, 64 + i, 101);
            }
        }
        CHECK(pthread_join(t, NULL) == 0);
        fprintf(stderr, "64 pages read %llu times while stored %llu times: %llu pages torn\n",
                (unsigned long long)reads, (unsigned long long)w.rounds, (unsigned long long)torn);
        CHECK(torn == 0);
        CHECK_OK(s->ops->fetch(s, 64, buf));
        CHECK(gs_check(buf, 64, 101));
    }

    /* moved off both holders: their views lack it, the GET is delegated */
    uint64_t e30 = atomic_load(&r->dir[30]);
    int to = 0;
    while (nv_gm_e_holds(e30, (unsigned)idx[to]))
        to++;
    int moved = 1;
    for (int i = 0; i < 2 && moved; i++) {
        uint64_t a[4] = { r->g->client_id, r->region, 30, 1 };
        netvm_rpc_result_t res;
        moved = nv_rpc_svc_call(ctx, r->g->srv[nv_gm_e_holder(e30, i)].peer, nv_gm_k(NV_GM_MOVE), a, 4, srv[to].addr,
                                strlen(srv[to].addr), NULL, 0, 5000, &res) == NETVM_OK;
    }
    if (moved) {
        uint64_t del0 = sum_stat(srv, 3, 1);
        CHECK_OK(s->ops->fetch(s, 30, buf));
        CHECK(gs_check(buf, 30, 1));
        CHECK(sum_stat(srv, 3, 1) > del0);
    }
    s->ops->close(s);

    /* R=1: the pages on the server without a view are asked of it; the
     * pages of a dead server, whose pool stays mapped here, fail rather
     * than come back from memory nobody serves */
    struct nv_gstore *s1 = open_store(srv, 3, 1, 2000, NETVM_OK);
    struct nv_gstore_remote *r1 = (struct nv_gstore_remote *)s1;
    store_all(s1, 3);
    uint64_t on[3] = { 0, 0, 0 }, first0 = UINT64_MAX;
    for (uint64_t p = 0; p < npages; p++) {
        unsigned h = nv_gm_e_holder(atomic_load(&r1->dir[p]), 0);
        for (int i = 0; i < 3; i++)
            if (h == (unsigned)idx[i]) {
                on[i]++;
                if (i == 0 && first0 == UINT64_MAX)
                    first0 = p;
            }
    }
    CHECK(on[0] && on[2] && on[0] + on[1] + on[2] == npages);
    d0 = direct_of(s1);
    gets0 = sum_stat(&srv[2], 1, 0);
    check_all(s1, 3);
    CHECK(direct_of(s1) - d0 == (client_off ? 0 : on[0] + on[1]));
    CHECK(sum_stat(&srv[2], 1, 0) - gets0 == on[2]);
    gs_signal(&srv[0], SIGKILL);
    gs_reap(&srv[0]);
    CHECK_ST(s1->ops->fetch(s1, first0, buf), NETVM_ERR_PEER);
    s1->ops->close(s1);
    free(buf);
    for (int i = 1; i < 3; i++)
        gs_stop(&srv[i]);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gstore NETVM CASE [PAGES]\n");
        return 2;
    }
    gs_netvm = argv[1];
    const char *c = argv[2];
    if (argc > 3)
        npages = strtoull(argv[3], NULL, 0);
    signal(SIGPIPE, SIG_IGN);
    gs_write_cred();
    if (strcmp(c, "client_killed")) {
        netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
        CHECK_OK(netvm_init(&ctx, &cfg));
        CHECK_OK(netvm_init(&octx, &cfg));
    }
    if (!strcmp(c, "rt1"))
        case_roundtrip(1, 1);
    else if (!strcmp(c, "rt3r1"))
        case_roundtrip(3, 1);
    else if (!strcmp(c, "rt3r2"))
        case_roundtrip(3, 2);
    else if (!strcmp(c, "threads"))
        case_threads();
    else if (!strcmp(c, "kill"))
        case_kill();
    else if (!strcmp(c, "stop"))
        case_stop();
    else if (!strcmp(c, "hang"))
        case_hang();
    else if (!strcmp(c, "lost"))
        case_lost();
    else if (!strcmp(c, "add_remove"))
        case_add_remove();
    else if (!strcmp(c, "nomem"))
        case_nomem();
    else if (!strcmp(c, "drain"))
        case_drain();
    else if (!strcmp(c, "auth"))
        case_auth();
    else if (!strcmp(c, "embedded"))
        case_embedded();
    else if (!strcmp(c, "client_killed"))
        case_client_killed();
    else if (!strcmp(c, "getn"))
        case_getn();
    else if (!strcmp(c, "direct"))
        case_direct();
    else if (!strcmp(c, "vec"))
        case_vec();
    else {
        fprintf(stderr, "unknown case %s\n", c);
        return 2;
    }
    if (ctx)
        CHECK_OK(netvm_finalize(ctx));
    if (octx)
        CHECK_OK(netvm_finalize(octx));
    unlink(gs_cred_path);
    printf("gstore %s ok\n", c);
    return 0;
}
