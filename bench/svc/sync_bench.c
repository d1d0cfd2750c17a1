/* sync_bench: the latency of netvm's synchronisation (include/netvm/sync.h)
 * against one blocking fetch-and-add measured in the same run.
 *
 *   netvm run -n N -- sync_bench [--min-ms M] [--json FILE] [--quick] [--only M,...]
 *
 * Rows (printed by rank 0; size = ranks taking part, 8 for fadd_lat):
 *   fadd_lat      one blocking netvm_atomic FADD on a word of rank 1, us
 *   lock_lat      uncontended queue-lock acquire + release (home rank 1), us
 *   lock_handoff  ranks 0..size-1 (2, then all) acquire + release the same
 *                 lock in a loop, each holder releasing only once a
 *                 successor queued: us per turn (a turn is the holder's
 *                 release, the successor's wake, its look for a successor
 *                 and the next acquirer's swap and link: two messages and
 *                 an atomic)
 *   handoff_lat   the same batch: median us from a release call to the
 *                 return of the successor's acquire (the hand-off itself,
 *                 one message; timestamps of one machine's clock)
 *   rw_read_lat   uncontended rdlock + rdunlock, us
 *   rw_write_lat  uncontended wrlock + wrunlock, us
 *   sem_lat       uncontended sem wait + post, us
 *   barrier_lat   a barrier (netvm_gbarrier) over 2 ranks and over all, us
 * --only fadd_lat,lock_handoff measures only the rows named (handoff_lat
 * comes with lock_handoff). While rank 0 measures the rows of one rank
 * (fadd_lat to sem_lat) the others poll (netvm_progress).
 *
 * (A rank that has made its turns keeps taking turns, counted, until all
 * have: see handoffs().)
 *
 * Each measurement doubles its count until a batch lasts min-ms/8 (the
 * warm-up), then times one batch sized to last min-ms (default 200; --quick
 * a tenth). Collective batches: rank 0 posts the count into a control
 * word, everyone runs it between two job barriers. */
#include <netvm/sync.h>
#include "svc_bench.h"

#include "svc/sync/sync_int.h"   /* the holder's node: is a successor linked */

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { OP_END = 0, OP_HANDOFF2, OP_HANDOFFALL, OP_BAR2, OP_BARALL, OP_POLL };
#define AM_STOP 1   /* rank 0's local rows are done: stop polling */

static netvm_ctx_t *ctx;
static int me, nranks;
static netvm_lock_t *lock;
static netvm_rwlock_t *rw;
static netvm_sem_t *sem;
static netvm_gbarrier_t *bar2, *barall;
static netvm_rseg_t *word, *ctlr;
static FILE *json;
static int rows;
static const char *only;   /* --only: the metrics to measure (comma list), NULL: all */

static int wanted(const char *metric)
{
    return svc_bench_wanted(only, metric);
}

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "sync_bench: rank %d: %s: %s\n", me, what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

static void emit(const char *metric, size_t size, const char *unit, double v)
{
    svc_bench_row(json, &rows, metric, size, unit, v);
}

/* --- batches ----------------------------------------------------------------- */

/* The control segment (rank 0's "sb.ctl"): the batch's command, then what
 * a hand-off batch counts. */
enum { CTL_CMD = 0, CTL_DONE = 16, CTL_EXTRA = 24 };

static uint64_t ctl_word(size_t off)
{
    uint64_t v = 0;
    OK(netvm_get(ctx, &v, ctlr, off, 8, 0));
    return v;
}

/* The hand-off's own latency: each rank notes when it called release and
 * when its acquire returned (CLOCK_MONOTONIC, one clock for every process
 * of a machine), in its "sb.ts" segment; rank 0 merges them after the
 * batch (handoff_lat). */
#define TS_CAP (1u << 18)
struct ts_seg {
    uint64_t n;
    uint64_t t[TS_CAP];    /* ns, bit 0: 1 acquired, 0 released */
};
static struct ts_seg *ts;

static inline void note(int acquired)
{
    if (ts->n < TS_CAP) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        ts->t[ts->n++] = ((uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec) << 1 | (uint64_t)acquired;
    }
}

/* Every release a hand-off: the holder keeps the lock until a successor
 * has linked itself behind it (a look at its own node: no traffic). A rank
 * that has made its n acquisitions says so in CTL_DONE and goes on taking
 * turns, counted in CTL_EXTRA, until every one of the parts has: so the
 * ranks whose turns ran ahead keep the others company instead of leaving
 * them to wait for successors that will not come (3 ranks on 2 cores
 * drift apart). */
static void handoffs(uint64_t n, uint64_t parts)
{
    uint64_t extra = 0;
    int said = 0;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int crowded = cpus < 1 || (uint64_t)cpus < parts;
    ts->n = 0;
    for (uint64_t i = 0;; i++) {
        OK(netvm_lock_acquire(lock));
        note(1);
        struct nv_sync_shnode *node = &lock->h.st->sh[atomic_load(&lock->h.held) - 1];
        double t0 = now_s(), looked = t0;
        /* at its last counted turn or after, a rank whose company is all
         * done waits for nobody; it looks again once a millisecond */
        int last = i + 1 >= n && ctl_word(CTL_DONE) + !said == parts;
        while (!last && !atomic_load(&node->next)) {
            /* the successor may need this core: only where the ranks
             * outnumber the CPUs (a sched_yield costs 0.7 us here, as
             * much as a whole hand-off on shm) */
            if (!netvm_progress(ctx) && crowded)
                sched_yield();
            double t = now_s();
            if (t - looked > 0.001) {
                looked = t;
                last = ctl_word(CTL_DONE) + !said == parts && i + 1 >= n;
            }
        }
        note(0);
        OK(netvm_lock_release(lock));
        if (i + 1 < n)
            continue;
        if (i + 1 > n)
            extra++;
        if (!said) {
            OK(netvm_atomic(ctx, ctlr, CTL_DONE, NETVM_AOP_FADD, 1, 0, NULL));
            said = 1;
        }
        if (ctl_word(CTL_DONE) == parts)
            break;
    }
    if (extra)
        OK(netvm_atomic(ctx, ctlr, CTL_EXTRA, NETVM_AOP_FADD, extra, 0, NULL));
}

/* While rank 0 measures its local rows the others poll, as the target of
 * netvm bench, rpc_bench's servers and OpenSHMEM's PE 1 do: a sleeping
 * home would add a thread wake-up to every operation on tcp. */
static atomic_int stop;

static int on_stop(netvm_ctx_t *c, netvm_am_msg_t *m, void *arg)
{
    (void)c, (void)m, (void)arg;
    atomic_store(&stop, 1);
    return NETVM_AM_DONE;
}

static void poll_until_stopped(void)
{
    svc_bench_poll(ctx, nranks, &stop);
    atomic_store(&stop, 0);
}

static void run_op(int op, uint64_t n)
{
    switch (op) {
    case OP_HANDOFF2:
        if (me < 2)
            handoffs(n, 2);
        break;
    case OP_HANDOFFALL:
        handoffs(n, (uint64_t)nranks);
        break;
    case OP_BAR2:
        if (me < 2)
            for (uint64_t i = 0; i < n; i++)
                OK(netvm_gbarrier_wait(bar2));
        break;
    case OP_BARALL:
        for (uint64_t i = 0; i < n; i++)
            OK(netvm_gbarrier_wait(barall));
        break;
    case OP_POLL:
        poll_until_stopped();
        break;
    }
}

/* rank 0: one collective batch of op, n each; seconds. A hand-off batch's
 * time is scaled to n turns each: the turns taken past n (CTL_EXTRA) are
 * counted with them. */
static double collective(int op, uint64_t n)
{
    uint64_t cmd[4] = { (uint64_t)op, n, 0, 0 };
    OK(netvm_put(ctx, ctlr, 0, cmd, sizeof cmd, 0));
    OK(netvm_barrier(ctx));
    double t0 = now_s();
    run_op(op, n);
    OK(netvm_barrier(ctx));
    double t = now_s() - t0;
    if (op == OP_HANDOFF2 || op == OP_HANDOFFALL) {
        double turns = (double)n * (op == OP_HANDOFF2 ? 2 : nranks);
        t *= turns / (turns + (double)ctl_word(CTL_EXTRA));
    }
    return t;
}

/* the other ranks: serve collective batches until OP_END */
static void serve(void)
{
    for (;;) {
        OK(netvm_barrier(ctx));
        uint64_t cmd[2];
        OK(netvm_get(ctx, cmd, ctlr, 0, sizeof cmd, 0));
        if (cmd[0] == OP_END)
            return;
        run_op((int)cmd[0], cmd[1]);
        OK(netvm_barrier(ctx));
    }
}

/* rank 0: the others poll from here until polled_end */
static void polled_begin(void)
{
    uint64_t cmd[4] = { OP_POLL, 0, 0, 0 };
    OK(netvm_put(ctx, ctlr, 0, cmd, sizeof cmd, 0));
    OK(netvm_barrier(ctx));
}

static void polled_end(void)
{
    for (int r = 1; r < nranks; r++)
        OK(netvm_am_send(ctx, r, AM_STOP, NULL, 0, NULL, 0, NULL));
    OK(netvm_barrier(ctx));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* rank 0, after a hand-off batch of parts ranks: the median time from a
 * release call to the return of the acquire that follows it (the
 * successor's), in us; the events of every rank merged by time */
static double handoff_lat(int parts)
{
    size_t cap = (size_t)parts * TS_CAP, n = 0;
    uint64_t *all = malloc(cap * sizeof *all), *lat = malloc(cap * sizeof *lat);
    if (!all || !lat)
        die("handoff_lat", NETVM_ERR_NOMEM);
    for (int r = 0; r < parts; r++) {
        netvm_rseg_t *rs;
        uint64_t k;
        OK(netvm_import(ctx, r, "sb.ts", &rs));
        OK(netvm_get(ctx, &k, rs, 0, 8, 0));
        if (k > TS_CAP)
            k = TS_CAP;
        if (k)
            OK(netvm_get(ctx, all + n, rs, 8, k * 8, 0));
        n += k;
        OK(netvm_release(rs));
    }
    qsort(all, n, sizeof *all, cmp_u64);
    size_t m = 0;
    for (size_t i = 1; i < n; i++)
        if ((all[i] & 1) && !(all[i - 1] & 1))
            lat[m++] = (all[i] >> 1) - (all[i - 1] >> 1);
    qsort(lat, m, sizeof *lat, cmp_u64);
    double v = m ? (double)lat[m / 2] / 1000 : 0;
    free(all);
    free(lat);
    return v;
}

typedef double (*batch_fn)(int op, uint64_t n);

static double local_batch(int op, uint64_t n)
{
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        switch (op) {
        case 0: OK(netvm_atomic(ctx, word, 0, NETVM_AOP_FADD, 1, 0, NULL)); break;
        case 1: OK(netvm_lock_acquire(lock)); OK(netvm_lock_release(lock)); break;
        case 2: OK(netvm_rwlock_rdlock(rw)); OK(netvm_rwlock_rdunlock(rw)); break;
        case 3: OK(netvm_rwlock_wrlock(rw)); OK(netvm_rwlock_wrunlock(rw)); break;
        case 4: OK(netvm_sem_wait(sem)); OK(netvm_sem_post(sem)); break;
        }
    }
    return now_s() - t0;
}

/* seconds per unit: double n until a batch lasts goal/8, then one batch of goal */
static double timed(batch_fn fn, int op, double goal, uint64_t per)
{
    uint64_t n = 1;
    double t;
    fn(op, 2);
    while ((t = fn(op, n)) < goal / 8 && n < ((uint64_t)1 << 40))
        n *= 2;
    n = (uint64_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    t = fn(op, n);
    return t / (double)(n * per);
}

int main(int argc, char **argv)
{
    double min_ms = 200;
    int quick = 0;
    const char *json_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-ms") && i + 1 < argc)
            min_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc)
            json_path = argv[++i];
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr, "usage: sync_bench [--min-ms M] [--json FILE] [--quick] [--only METRIC,...]\n");
            return 2;
        }
    }
    OK(netvm_init(&ctx, NULL));
    me = netvm_rank(ctx);
    nranks = netvm_size(ctx);
    if (nranks < 2) {
        fprintf(stderr, "sync_bench: needs at least 2 ranks\n");
        return 2;
    }
    double goal = (quick ? min_ms / 10 : min_ms) / 1000;
    int two[2] = { 0, 1 }, *all = malloc((size_t)nranks * sizeof *all);
    for (int i = 0; i < nranks; i++)
        all[i] = i;
    if (me == 0) {
        void *a;
        netvm_seg_t *s;
        OK(netvm_alloc_shared(ctx, 64, NETVM_RWA, "sb.ctl", &a, &s));
        OK(netvm_gbarrier_create(ctx, "sb.bar2", two, 2, &bar2));
        OK(netvm_gbarrier_create(ctx, "sb.barall", all, (unsigned)nranks, &barall));
    }
    if (me == 1) {
        void *a;
        netvm_seg_t *s;
        OK(netvm_alloc_shared(ctx, 64, NETVM_RWA, "sb.word", &a, &s));
        OK(netvm_lock_create(ctx, "sb.lock", &lock));
        OK(netvm_rwlock_create(ctx, "sb.rw", &rw));
        OK(netvm_sem_create(ctx, "sb.sem", 1, &sem));
    }
    {
        netvm_seg_t *s;
        OK(netvm_alloc_shared(ctx, sizeof *ts, NETVM_READ | NETVM_WRITE, "sb.ts", (void **)&ts, &s));
    }
    OK(netvm_am_register(ctx, AM_STOP, on_stop, NULL));
    OK(netvm_barrier(ctx));
    OK(netvm_import(ctx, 0, "sb.ctl", &ctlr));
    OK(netvm_import(ctx, 1, "sb.word", &word));
    if (me != 0) {
        OK(netvm_gbarrier_open(ctx, 0, "sb.bar2", &bar2));
        OK(netvm_gbarrier_open(ctx, 0, "sb.barall", &barall));
    }
    if (me != 1) {
        OK(netvm_lock_open(ctx, 1, "sb.lock", &lock));
        OK(netvm_rwlock_open(ctx, 1, "sb.rw", &rw));
        OK(netvm_sem_open(ctx, 1, "sb.sem", &sem));
    }
    OK(netvm_barrier(ctx));
    if (me != 0) {
        serve();
    } else {
        if (json_path && !(json = fopen(json_path, "w"))) {
            perror(json_path);
            return 1;
        }
        if (json)
            fprintf(json, "[");
        polled_begin();
        if (wanted("fadd_lat"))
            emit("fadd_lat", 8, "us", timed(local_batch, 0, goal, 1) * 1e6);
        if (wanted("lock_lat"))
            emit("lock_lat", 1, "us", timed(local_batch, 1, goal, 1) * 1e6);
        if (wanted("rw_read_lat"))
            emit("rw_read_lat", 1, "us", timed(local_batch, 2, goal, 1) * 1e6);
        if (wanted("rw_write_lat"))
            emit("rw_write_lat", 1, "us", timed(local_batch, 3, goal, 1) * 1e6);
        if (wanted("sem_lat"))
            emit("sem_lat", 1, "us", timed(local_batch, 4, goal, 1) * 1e6);
        polled_end();
        if (wanted("lock_handoff")) {
            emit("lock_handoff", 2, "us", timed(collective, OP_HANDOFF2, goal, 2) * 1e6);
            emit("handoff_lat", 2, "us", handoff_lat(2));
            if (nranks > 2) {
                emit("lock_handoff", (size_t)nranks, "us",
                     timed(collective, OP_HANDOFFALL, goal, (uint64_t)nranks) * 1e6);
                emit("handoff_lat", (size_t)nranks, "us", handoff_lat(nranks));
            }
        }
        if (wanted("barrier_lat")) {
            emit("barrier_lat", 2, "us", timed(collective, OP_BAR2, goal, 1) * 1e6);
            if (nranks > 2)
                emit("barrier_lat", (size_t)nranks, "us", timed(collective, OP_BARALL, goal, 1) * 1e6);
        }
        uint64_t end[2] = { OP_END, 0 };
        OK(netvm_put(ctx, ctlr, 0, end, sizeof end, 0));
        OK(netvm_barrier(ctx));
        if (json) {
            fprintf(json, "\n]\n");
            fclose(json);
        }
    }
    OK(netvm_barrier(ctx));
    free(all);
    OK(netvm_finalize(ctx));
    return 0;
}
