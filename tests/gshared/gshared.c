/* Shared regions, multi-process through the launcher.
 *
 *   gshared drive NETVM CASE ROUNDS PAGES
 * starts four memory servers (R = 2: placement decides which two hold a
 * page, two sets that may not meet, and every sharer must compute the same), points NETVM_GMEM_SERVERS
 * at them and runs
 * jobs of `gshared work CASE ...` with `netvm run`:
 *
 *   rounds    3 ranks: rank 0 writes every page, version k, and syncs;
 *             ranks 1 and 2 read every page after each round's barrier and
 *             must see version k. Their pages stay resident between rounds
 *             (no budget pressure), so only the sync's invalidation makes
 *             them fetch the new version. ROUNDS rounds.
 *   budget    rounds with a budget of half the region: readers evict
 *             (read-only regions drop pages by MADV_DONTNEED) and the
 *             writer's evictions write back between syncs.
 *   refuse    2 ranks: a second writer gets NETVM_ERR_BUSY; another length
 *             NETVM_ERR_STATE; a reader's write is a SIGSEGV (in a forked
 *             child); the writer's unmap frees the name for another.
 *   dead      a writer killed (SIGKILL) after its sync releases the name: a
 *             new writer gets it and reads what the dead one wrote; the
 *             pages stay on the servers (their state) until a remove frees
 *             them.
 *   mismatch  a sharer naming another set of servers is refused
 *             (NETVM_ERR_STATE).
 */
#define _GNU_SOURCE
#include "gmem_test.h"
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"   /* gs_servers.h helpers this test does not use */
#include "gs_servers.h"
#pragma GCC diagnostic pop

#include <netvm/gmem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <pthread.h>
#include <unistd.h>

#define NAME "gshared-test-region"
#define NSRV 4

static int rounds, npages;

/* --- the jobs' side -------------------------------------------------------- */

static netvm_status_t map(netvm_ctx_t *ctx, int mode, size_t pages, netvm_gmem_t **g, unsigned char **a)
{
    void *addr = NULL;
    netvm_status_t st = netvm_gmem_map_shared(ctx, NAME, pages * GPAGE, mode, NULL, g, &addr);
    *a = addr;
    return st;
}

static void fill_all(unsigned char *a, uint32_t v)
{
    for (int p = 0; p < npages; p++)
        gt_fill(a + (size_t)p * GPAGE, (uint64_t)p, v);
}

static int bad_pages(const unsigned char *a, uint32_t v)
{
    int bad = 0;
    for (int p = 0; p < npages; p++)
        bad += !gt_check(a + (size_t)p * GPAGE, (uint64_t)p, v);
    return bad;
}

static void work_rounds(netvm_ctx_t *ctx, int rank)
{
    netvm_gmem_t *g;
    unsigned char *a;
    if (rank == 0)
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
    CHECK_OK(netvm_barrier(ctx));
    if (rank != 0) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages, &g, &a));
        CHECK(bad_pages(a, 0) == 0);   /* never written: zeros, and now resident */
    }
    CHECK_OK(netvm_barrier(ctx));
    long stale = 0;
    for (int k = 1; k <= rounds; k++) {
        if (rank == 0) {
            fill_all(a, (uint32_t)k);
            CHECK_OK(netvm_gmem_sync(g));
        }
        CHECK_OK(netvm_barrier(ctx));   /* how the readers learn of the sync */
        if (rank != 0) {
            int bad = bad_pages(a, (uint32_t)k);
            if (bad)
                fprintf(stderr, "rank %d round %d: %d of %d pages not at version %d\n", rank, k, bad, npages, k);
            stale += bad;
        }
        CHECK_OK(netvm_barrier(ctx));
    }
    CHECK(stale == 0);
    netvm_gmem_stats_t s;
    CHECK_OK(netvm_gmem_stats(g, &s));
    if (rank != 0) {
        /* every round's pages came from the servers again */
        fprintf(stderr, "rank %d: %d rounds of %d pages, %llu fetched, %llu evicted\n", rank, rounds, npages,
                (unsigned long long)s.remote_fetches, (unsigned long long)s.evictions);
        CHECK(s.remote_fetches >= (uint64_t)rounds * (uint64_t)npages);
        if (getenv("NETVM_GMEM_BUDGET"))
            CHECK(s.evictions > 0);
    }
    CHECK_OK(netvm_gmem_unmap(g));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        CHECK_OK(netvm_gmem_shared_remove(ctx, NAME, NULL));
}

/* The version a page holds (gt_fill's pattern), read from its first word. */
static uint32_t page_version(const unsigned char *page, uint64_t p)
{
    uint64_t w = __atomic_load_n((const uint64_t *)page, __ATOMIC_RELAXED);
    return w ? (uint32_t)((w ^ (p * 0x9E3779B97F4A7C15ull)) >> 32) : 0;
}

struct scan_arg {
    const unsigned char *a;
    uint32_t             learned;   /* __atomic: the last sync the reader heard of */
    int                  stop;      /* __atomic */
    long                 stale, reads;
};

/* The reader's scanning thread: sequential passes (read-ahead in flight
 * most of the time, under a budget that evicts), each page at least at
 * the version of the last sync heard of before it was read. */
static void *scan_thread(void *arg)
{
    struct scan_arg *s = arg;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
        for (int p = 0; p < npages; p++) {
            uint32_t known = __atomic_load_n(&s->learned, __ATOMIC_ACQUIRE);
            uint32_t v = page_version(s->a + (size_t)p * GPAGE, (uint64_t)p);
            if (v < known && s->stale++ < 5)
                fprintf(stderr, "page %d at version %u after sync %u was heard of\n", p, v, known);
            s->reads++;
        }
    return NULL;
}

/* Syncs while the reader reads: a fetch in flight when the invalidation
 * comes carries the old page, and the reader's answer (so the sync) waits
 * until that page is out. */
static void work_scan(netvm_ctx_t *ctx, int rank)
{
    netvm_gmem_t *g;
    unsigned char *a;
    if (rank == 0)
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
    CHECK_OK(netvm_barrier(ctx));
    struct scan_arg sa = { 0 };
    pthread_t th;
    if (rank != 0) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages, &g, &a));
        sa.a = a;
        CHECK(pthread_create(&th, NULL, scan_thread, &sa) == 0);
    }
    for (int k = 1; k <= rounds; k++) {
        if (rank == 0) {
            fill_all(a, (uint32_t)k);
            CHECK_OK(netvm_gmem_sync(g));
        }
        CHECK_OK(netvm_barrier(ctx));   /* how the reader learns of the sync */
        if (rank != 0)
            __atomic_store_n(&sa.learned, (uint32_t)k, __ATOMIC_RELEASE);
    }
    if (rank != 0) {
        __atomic_store_n(&sa.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th, NULL);
        fprintf(stderr, "rank %d: %ld page reads, %ld stale\n", rank, sa.reads, sa.stale);
        CHECK(sa.stale == 0);
    }
    CHECK_OK(netvm_gmem_unmap(g));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        CHECK_OK(netvm_gmem_shared_remove(ctx, NAME, NULL));
}

/* A reader's write: the child dies of SIGSEGV. */
static void reader_write_faults(unsigned char *a)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);   /* a sanitizer's handler would exit instead */
        ((volatile unsigned char *)a)[GPAGE + 5] = 1;
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
}

static void work_refuse(netvm_ctx_t *ctx, int rank)
{
    netvm_gmem_t *g = NULL;
    unsigned char *a;
    if (rank == 0) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
        fill_all(a, 1);
        CHECK_OK(netvm_gmem_sync(g));
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        netvm_gmem_t *g2;
        unsigned char *a2;
        CHECK_ST(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g2, &a2), NETVM_ERR_BUSY);
        CHECK_ST(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages * 2, &g2, &a2), NETVM_ERR_STATE);
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages, &g, &a));
        CHECK(bad_pages(a, 1) == 0);
        reader_write_faults(a);
        CHECK(bad_pages(a, 1) == 0);   /* the child's write changed nothing */
        CHECK_OK(netvm_gmem_sync(g));  /* nothing to do for a reader */
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0)
        CHECK_OK(netvm_gmem_unmap(g));   /* the name is free for another writer */
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 1) {
        CHECK_ST(netvm_gmem_shared_remove(ctx, NAME, NULL), NETVM_ERR_BUSY);   /* still mapped (here) */
        CHECK_OK(netvm_gmem_unmap(g));
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
        CHECK(bad_pages(a, 1) == 0);
        fill_all(a, 2);
        CHECK_OK(netvm_gmem_sync(g));
        CHECK_OK(netvm_gmem_unmap(g));
        CHECK_OK(netvm_gmem_shared_remove(ctx, NAME, NULL));
        CHECK_ST(netvm_gmem_shared_remove(ctx, NAME, NULL), NETVM_ERR_NOTFOUND);
    }
    CHECK_OK(netvm_barrier(ctx));
}

static int work(const char *c)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = netvm_rank(ctx);
    netvm_gmem_t *g;
    unsigned char *a;
    if (!strcmp(c, "rounds")) {
        work_rounds(ctx, rank);
    } else if (!strcmp(c, "scan")) {
        work_scan(ctx, rank);
    } else if (!strcmp(c, "refuse")) {
        work_refuse(ctx, rank);
    } else if (!strcmp(c, "deadwriter")) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
        fill_all(a, 7);
        CHECK_OK(netvm_gmem_sync(g));
        raise(SIGKILL);
    } else if (!strcmp(c, "rewrite")) {
        /* the servers learn of the death when its connections close */
        netvm_status_t st = NETVM_ERR_BUSY;
        for (int i = 0; i < 3000 && st == NETVM_ERR_BUSY; i++)
            if ((st = map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a)) == NETVM_ERR_BUSY)
                usleep(10000);
        CHECK_OK(st);
        CHECK(bad_pages(a, 7) == 0);
        CHECK_OK(netvm_gmem_unmap(g));
    } else if (!strcmp(c, "make")) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_WRITE, (size_t)npages, &g, &a));
        fill_all(a, 3);
        CHECK_OK(netvm_gmem_sync(g));
        CHECK_OK(netvm_gmem_unmap(g));
    } else if (!strcmp(c, "mismatch")) {
        CHECK_ST(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages, &g, &a), NETVM_ERR_STATE);
    } else if (!strcmp(c, "read3")) {
        CHECK_OK(map(ctx, NETVM_GMEM_SHARED_READ, (size_t)npages, &g, &a));
        CHECK(bad_pages(a, 3) == 0);
        CHECK_OK(netvm_gmem_unmap(g));
    } else if (!strcmp(c, "remove")) {
        CHECK_OK(netvm_gmem_shared_remove(ctx, NAME, NULL));
    } else {
        fprintf(stderr, "gshared: unknown job %s\n", c);
        return 2;
    }
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}

/* --- the driver ---------------------------------------------------------- */

static const char *self;

static int job(int n, const char *c)
{
    char ns[16], rs[16], ps[16];
    snprintf(ns, sizeof ns, "%d", n);
    snprintf(rs, sizeof rs, "%d", rounds);
    snprintf(ps, sizeof ps, "%d", npages);
    char *argv[] = { (char *)gs_netvm, "run", "-n", ns, "--", (char *)self, "work", (char *)c, rs, ps, NULL };
    pid_t pid;
    CHECK(posix_spawn(&pid, gs_netvm, NULL, NULL, argv, environ) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fprintf(stderr, "gshared: job %s (%d ranks): %d\n", c, n, rc);
    return rc;
}

static void set_servers(struct gs_server *srv, int n)
{
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        if (i)
            strcat(list, ",");
        strcat(list, srv[i].addr);
    }
    CHECK(setenv("NETVM_GMEM_SERVERS", list, 1) == 0);
}

/* What `netvm stat --json ADDR` prints, in out. */
static void tool_stat(const struct gs_server *srv, char *out, size_t cap)
{
    int fd[2];
    CHECK(pipe(fd) == 0);
    char *argv[] = { (char *)gs_netvm, "stat", "--json", (char *)srv->addr, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    CHECK(posix_spawn(&pid, gs_netvm, &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < cap && (k = read(fd[0], out + n, cap - 1 - n)) > 0)
        n += (size_t)k;
    out[n] = 0;
    close(fd[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The servers' named-region records (one per server per name) and pages. */
static void shared_state(netvm_ctx_t *ctx, struct gs_server *srv, uint64_t *regions, uint64_t *pages,
                         uint64_t *used)
{
    *regions = *pages = *used = 0;
    for (int i = 0; i < NSRV; i++) {
        struct nv_gm_stat st;
        gs_stat(ctx, &srv[i], &st);
        CHECK(st.version == NV_GM_VERSION);
        *regions += st.shared_regions;
        *pages += st.shared_pages;
        *used += st.used_pages;
    }
}

static int drive(const char *c)
{
    gs_write_cred();
    struct gs_server srv[NSRV];
    for (int i = 0; i < NSRV; i++)
        gs_start(&srv[i], "32M", "2000");
    set_servers(srv, NSRV);
    CHECK(setenv("NETVM_GMEM_CREDENTIAL_FILE", gs_cred_path, 1) == 0);
    /* a server slow to answer on a busy machine is not what this tests */
    CHECK(setenv("NETVM_GMEM_TIMEOUT", "30000", 1) == 0);
    unsetenv("NETVM_GMEM_STORE");
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    uint64_t regions, pages, used;
    if (!strcmp(c, "rounds") || !strcmp(c, "budget")) {
        /* budget: half the region resident at most, so readers evict
         * (MADV_DONTNEED, pager.h) and the writer writes back between syncs */
        if (!strcmp(c, "budget")) {
            /* a budget under the pager's least (fault threads, read-ahead,
             * an eviction batch: some 132 pages) is refused */
            if (npages < 400)
                npages = 400;
            char b[32];
            snprintf(b, sizeof b, "%d", npages / 2 * (int)GPAGE);
            CHECK(setenv("NETVM_GMEM_BUDGET", b, 1) == 0);
        }
        CHECK(job(3, "rounds") == 0);
        shared_state(ctx, srv, &regions, &pages, &used);
        CHECK(regions == 0 && used == 0);
    } else if (!strcmp(c, "scan")) {
        if (npages < 400)
            npages = 400;
        char b[32];
        snprintf(b, sizeof b, "%d", npages / 2 * (int)GPAGE);
        CHECK(setenv("NETVM_GMEM_BUDGET", b, 1) == 0);
        CHECK(job(2, "scan") == 0);
        shared_state(ctx, srv, &regions, &pages, &used);
        CHECK(regions == 0 && used == 0);
    } else if (!strcmp(c, "refuse")) {
        CHECK(job(2, "refuse") == 0);
        shared_state(ctx, srv, &regions, &pages, &used);
        CHECK(regions == 0 && used == 0);
    } else if (!strcmp(c, "dead")) {
        CHECK(job(1, "deadwriter") != 0);
        CHECK(job(1, "rewrite") == 0);
        /* nobody maps it: its pages stay, R = 2 copies of each, a record on every server */
        shared_state(ctx, srv, &regions, &pages, &used);
        fprintf(stderr, "gshared: after the writers: %llu records, %llu shared pages, %llu used\n",
                (unsigned long long)regions, (unsigned long long)pages, (unsigned long long)used);
        CHECK(regions == NSRV && pages == 2 * (uint64_t)npages && used == pages);
        char out[4096];
        tool_stat(&srv[0], out, sizeof out);
        CHECK(strstr(out, "\"shared_regions\": 1,") != NULL);
        CHECK(job(1, "remove") == 0);
        shared_state(ctx, srv, &regions, &pages, &used);
        CHECK(regions == 0 && pages == 0 && used == 0);
        tool_stat(&srv[0], out, sizeof out);
        CHECK(strstr(out, "\"shared_regions\": 0,") && strstr(out, "\"used_pages\": 0,"));
    } else if (!strcmp(c, "mismatch")) {
        CHECK(job(1, "make") == 0);
        set_servers(srv, 1);
        CHECK(job(1, "mismatch") == 0);
        set_servers(srv, NSRV);
        CHECK(job(1, "read3") == 0);
        CHECK(job(1, "remove") == 0);
        shared_state(ctx, srv, &regions, &pages, &used);
        CHECK(regions == 0 && used == 0);
    } else {
        fprintf(stderr, "gshared: unknown case %s\n", c);
        return 2;
    }
    CHECK_OK(netvm_finalize(ctx));
    for (int i = 0; i < NSRV; i++)
        gs_stop(&srv[i]);
    unlink(gs_cred_path);
    printf("gshared %s: ok\n", c);
    return 0;
}

int main(int argc, char **argv)
{
    self = argv[0];
    if (argc == 5 && !strcmp(argv[1], "work")) {
        rounds = atoi(argv[3]);
        npages = atoi(argv[4]);
        return work(argv[2]);
    }
    if (argc == 6 && !strcmp(argv[1], "drive")) {
        gs_netvm = argv[2];
        rounds = atoi(argv[4]);
        npages = atoi(argv[5]);
        char *abs = realpath(argv[0], NULL);
        CHECK(abs != NULL);
        self = abs;
        return drive(argv[3]);
    }
    fprintf(stderr, "usage: gshared drive NETVM CASE ROUNDS PAGES | gshared work CASE ROUNDS PAGES\n");
    return 2;
}
