/* netvm bench: put/get latency (8 B to 4 MiB), bandwidth, atomic latency and
 * rates, on the mapped path (memfd segments: loads and stores) and on the CMA
 * path (any exported memory: process_vm_writev/readv on shm, the tcp link with
 * NETVM_LINKS=tcp; target-executed atomics). Started outside a job it launches
 * itself as a job of two. The methods match the peers' in bench/compare:
 *   put_lat   ping-pong, one-way = round trip / 2; the receiver polls the
 *             last byte of its buffer (driving progress as it polls)
 *   get_lat   blocking get, time per operation
 *   fadd_lat  blocking fetch-and-add, time per operation
 *   am_lat    0-byte active-message round trip: netvm_am_request to a handler
 *             that replies at once with nothing, time per request (size 0)
 *   am_pp_lat 0-byte one-way active messages in a ping-pong (the handler of
 *             each sends the next), time per round trip: ucp_am_lat's method
 *   ptr_get_lat, ptr_fadd_lat  (mapped path only) an 8-byte load and a CPU
 *             fetch-and-add through netvm_ptr, time per operation: the bare
 *             load's speed beside the library calls
 *   put_bw, get_bw  windows of 32 operations then a flush; MB = 1e6 bytes
 *   add_rate  nonblocking atomic add, windows of 64 then a flush
 *   put_rate  nonblocking 8-byte put, windows of 64 then a flush
 * and the events (include/netvm/events.h), on each path:
 *   ref_put_lat     the 8 B put_lat ping-pong again, in rounds alternating
 *                   with trip_lat_spin's, so the two can be divided
 *   trip_lat_spin   ping-pong of 8 B netvm_put into the peer's buffer, on
 *                   whose first 8 bytes the peer armed a persistent write
 *                   tripwire; the peer takes the tripwire event with a
 *                   netvm_evq_poll loop (calling netvm_progress, as put_lat's
 *                   receiver does) and answers the same way; one-way = round
 *                   trip / 2. Medians of the alternated rounds.
 *   trip_lat_sleep  the same, the waiter sleeping in the kernel: netvm_evq_arm,
 *                   then poll(2) on netvm_evq_fd
 *   putsig_lat      ping-pong of netvm_put_signal_nb (8 B data at offset 0,
 *                   signal word at offset 8 set to the iteration's value),
 *                   the peer waits with netvm_wait_until(NETVM_WAIT_SPIN)
 *   notify_rate     back-to-back netvm_notify to the peer, which drains them
 *                   with netvm_evq_poll (and returns a credit notification
 *                   every NOTIFY_CREDIT, so at most NOTIFY_WINDOW are in its
 *                   queue); Mops. Not path-bound: measured once, unsuffixed.
 *   Every event is checked (type, tripwire id, the data it reports visible).
 * Each measurement doubles its count until a batch lasts min-ms/8 (the
 * warm-up), then times one batch sized to last --min-ms. */
#define _GNU_SOURCE
#include "commands.h"
#include "util/time.h"

#include <netvm/netvm.h>
#include <getopt.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define MAX_SIZE (4u << 20)
#define BW_WINDOW 32
#define RATE_WINDOW 64
/* control words after the data, in the mapped segment */
#define CTL_STOP  (MAX_SIZE)        /* the measuring rank is done with one-sided tests */
#define CTL_COUNT (MAX_SIZE + 8)    /* iterations of the next ping-pong */
#define SIG_OFF 8                   /* putsig_lat: the signal word, after 8 B of data */
#define TRIP_USER 0x7472697077697265ull   /* the tripwires' user value ("tripwire") */
#define NOTIFY_WINDOW 256           /* notify_rate: notifications in flight at most */
#define NOTIFY_CREDIT 32            /* ... the receiver returns a credit every so many */
#define NOTIFY_END  (1ull << 63)    /* notify_rate: end of a batch (value = count) */
#define NOTIFY_STOP (1ull << 62)    /* notify_rate: no more batches */
#define EV_BATCH 16
#define AM_ECHO 1                   /* am_lat: the handler that answers at once */
#define AM_PING 2                   /* am_pp_lat: answered with a one-way AM_PONG */
#define AM_PONG 3

enum pp_mode { PP_PUT, PP_TRIP_SPIN, PP_TRIP_SLEEP, PP_PUTSIG };

struct bench {
    netvm_ctx_t *ctx;
    int rank, peer, quick, target_polls;
    double min_s;
    uint8_t *src;                        /* local source/destination */
    uint8_t *mine[2];                    /* [0] mapped (memfd), [1] private */
    netvm_rseg_t *theirs[2];
    FILE *json;
    int rows;
    netvm_tripwire_t *tw;                /* armed during the tripwire ping-pongs */
    uint64_t sigseq;                     /* putsig_lat: last signal value, same on both ranks */
    uint64_t waits, sleeps;              /* trip_lat_sleep: waits, and those that slept */
};

static const char *const path_suffix[2] = { "", "_cma" };

static void emit(struct bench *b, const char *metric, int path, size_t size, const char *unit, double v)
{
    char name[64];
    snprintf(name, sizeof name, "%s%s", metric, path_suffix[path]);
    printf("%-20s %9zu %-5s %12.6g\n", name, size, unit, v);
    fflush(stdout);
    if (b->json)
        fprintf(b->json, "%s\n  {\"metric\": \"%s\", \"size\": %zu, \"unit\": \"%s\", \"netvm\": %.9g}",
                b->rows++ ? "," : "", name, size, unit, v);
}

static void die(const char *what, netvm_status_t st)
{
    fprintf(stderr, "netvm bench: %s: %s\n", what, netvm_strerror(st));
    exit(1);
}

#define OK(x) do { netvm_status_t st_ = (x); if (st_ != NETVM_OK) die(#x, st_); } while (0)

static volatile uint64_t *ctl(struct bench *b, size_t off) { return (volatile uint64_t *)(b->mine[0] + off); }

/* --- one-sided measurements: rank 0 alone ------------------------------ */

/* One batch of n operations (or windows); returns seconds. */
typedef double (*batch_fn)(struct bench *b, int path, size_t s, size_t n);

/* Calibrate and time; returns seconds per unit of n, and *units = n. */
static double timed(struct bench *b, batch_fn fn, int path, size_t s, size_t *units)
{
    size_t n = 1;
    double t;
    fn(b, path, s, 2);   /* cold caches, first faults */
    double goal = b->quick ? b->min_s / 10 : b->min_s;
    while ((t = fn(b, path, s, n)) < goal / 8 && n < ((size_t)1 << 40))
        n *= 2;
    n = (size_t)((double)n * goal / (t > 0 ? t : 1e-9)) + 1;
    t = fn(b, path, s, n);
    *units = n;
    return t / (double)n;
}

static double now_s(void) { return (double)nv_now_ns() / 1e9; }

static double get_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_get(b->ctx, b->src, b->theirs[path], 0, s, 0));
    return now_s() - t0;
}

static double fadd_batch(struct bench *b, int path, size_t s, size_t n)
{
    uint64_t old;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_atomic(b->ctx, b->theirs[path], 8, NETVM_AOP_FADD, 1, 0, &old));
    return now_s() - t0;
}

static double am_batch(struct bench *b, int path, size_t s, size_t n)
{
    (void)path;
    (void)s;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        OK(netvm_am_request(b->ctx, b->peer, AM_ECHO, NULL, 0, NULL, 0, NULL, 0, NULL, NULL));
    return now_s() - t0;
}

static int am_echo(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    if (msg->has_token)
        netvm_am_reply(ctx, &msg->token, NETVM_OK, NULL, 0, NULL, 0);
    return NETVM_AM_DONE;
}

/* am_pp_lat: a ping-pong of one-way 0-byte messages, each side sending
 * from its handler or loop, as ucx_perftest's ucp_am_lat does (no reply
 * token, no request to complete) */
static _Atomic uint64_t pongs;

static int am_ping(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    OK(netvm_am_send(ctx, msg->peer, AM_PONG, NULL, 0, NULL, 0, NULL));
    return NETVM_AM_DONE;
}

static int am_pong(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg)
{
    (void)ctx;
    (void)msg;
    (void)arg;
    atomic_fetch_add(&pongs, 1);
    return NETVM_AM_DONE;
}

static double am_pp_batch(struct bench *b, int path, size_t s, size_t n)
{
    (void)path;
    (void)s;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        uint64_t want = atomic_load(&pongs) + 1;
        OK(netvm_am_send(b->ctx, b->peer, AM_PING, NULL, 0, NULL, 0, NULL));
        while (atomic_load(&pongs) < want)
            netvm_progress(b->ctx);
    }
    return now_s() - t0;
}

/* netvm_ptr: loads and CPU atomics straight on the peer's memory (the
 * compiler barrier keeps each load in the loop) */
static double ptr_get_batch(struct bench *b, int path, size_t s, size_t n)
{
    const uint8_t *p = netvm_ptr(b->theirs[path], 0);
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        memcpy(b->src, p, s);
        __asm__ __volatile__("" ::: "memory");
    }
    return now_s() - t0;
}

static double ptr_fadd_batch(struct bench *b, int path, size_t s, size_t n)
{
    (void)s;
    uint64_t *w = netvm_ptr(b->theirs[path], 8);
    uint64_t sum = 0;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++)
        sum += __atomic_fetch_add(w, 1, __ATOMIC_SEQ_CST);
    double t = now_s() - t0;
    __asm__ __volatile__("" : : "r"(sum) : "memory");
    return t;
}

static double bw_batch(struct bench *b, int path, size_t s, size_t n, int is_put)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
        netvm_req_t *reqs[BW_WINDOW];
        for (int i = 0; i < BW_WINDOW; i++) {
            if (is_put)
                OK(netvm_put_nb(b->ctx, b->theirs[path], 0, b->src, s, 0, &reqs[i]));
            else
                OK(netvm_get_nb(b->ctx, b->src, b->theirs[path], 0, s, 0, &reqs[i]));
        }
        OK(netvm_wait_all(reqs, BW_WINDOW));
        OK(netvm_flush(b->ctx, b->peer));
    }
    return now_s() - t0;
}

static double put_bw_batch(struct bench *b, int path, size_t s, size_t n) { return bw_batch(b, path, s, n, 1); }
static double get_bw_batch(struct bench *b, int path, size_t s, size_t n) { return bw_batch(b, path, s, n, 0); }

static double add_rate_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
        netvm_req_t *reqs[RATE_WINDOW];
        for (int i = 0; i < RATE_WINDOW; i++)
            OK(netvm_atomic_nb(b->ctx, b->theirs[path], 16, NETVM_AOP_ADD, 1, 0, NULL, &reqs[i]));
        OK(netvm_wait_all(reqs, RATE_WINDOW));
        OK(netvm_flush(b->ctx, b->peer));
    }
    return now_s() - t0;
}

static double put_rate_batch(struct bench *b, int path, size_t s, size_t n)
{
    double t0 = now_s();
    for (size_t w = 0; w < n; w++) {
        for (int i = 0; i < RATE_WINDOW; i++) {
            netvm_req_t *q;
            OK(netvm_put_nb(b->ctx, b->theirs[path], 8 * (size_t)i, b->src, 8, 0, &q));
            OK(netvm_wait(&q));   /* local completion: immediate on every link */
        }
        OK(netvm_flush(b->ctx, b->peer));
    }
    return now_s() - t0;
}

static void one_sided(struct bench *b, int path)
{
    static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 };
    static const size_t bw_sizes[] = { 65536, 1048576, 4194304 };
    OK(netvm_barrier(b->ctx));
    if (b->rank == 1) {
        /* the target: polls (driving progress itself) or sleeps (the
         * progress thread serves what needs its CPU) */
        if (b->target_polls) {
            while (!__atomic_load_n(ctl(b, CTL_STOP), __ATOMIC_ACQUIRE))
                netvm_progress(b->ctx);
            *ctl(b, CTL_STOP) = 0;
        }
        OK(netvm_barrier(b->ctx));
        return;
    }
    size_t n;
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        emit(b, "get_lat", path, sizes[i], "us", timed(b, get_batch, path, sizes[i], &n) * 1e6);
    emit(b, "fadd_lat", path, 8, "us", timed(b, fadd_batch, path, 8, &n) * 1e6);
    emit(b, "am_lat", path, 0, "us", timed(b, am_batch, path, 0, &n) * 1e6);
    emit(b, "am_pp_lat", path, 0, "us", timed(b, am_pp_batch, path, 0, &n) * 1e6);
    if (path == 0 && netvm_ptr(b->theirs[0], 0)) {
        emit(b, "ptr_get_lat", path, 8, "us", timed(b, ptr_get_batch, path, 8, &n) * 1e6);
        emit(b, "ptr_fadd_lat", path, 8, "us", timed(b, ptr_fadd_batch, path, 8, &n) * 1e6);
    }
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "put_bw", path, bw_sizes[i], "MB/s",
             (double)bw_sizes[i] * BW_WINDOW / timed(b, put_bw_batch, path, bw_sizes[i], &n) / 1e6);
    for (size_t i = 0; i < sizeof bw_sizes / sizeof *bw_sizes; i++)
        emit(b, "get_bw", path, bw_sizes[i], "MB/s",
             (double)bw_sizes[i] * BW_WINDOW / timed(b, get_bw_batch, path, bw_sizes[i], &n) / 1e6);
    emit(b, "add_rate", path, 8, "Mops", RATE_WINDOW / timed(b, add_rate_batch, path, 8, &n) / 1e6);
    emit(b, "put_rate", path, 8, "Mops", RATE_WINDOW / timed(b, put_rate_batch, path, 8, &n) / 1e6);
    if (b->target_polls)
        OK(netvm_put_imm(b->ctx, b->theirs[0], CTL_STOP, 1, 0));
    OK(netvm_barrier(b->ctx));
}

/* --- the ping-pong: both ranks -------------------------------------------- */

static void bad_event(struct bench *b, const netvm_event_t *e, const char *why)
{
    fprintf(stderr, "netvm bench: rank %d: %s: event type %u access %u rank %d id %u status %u "
                    "value %#llx addr %#llx len %llu\n", b->rank, why, e->type, e->access, e->rank,
            e->id, e->status, (unsigned long long)e->value, (unsigned long long)e->addr,
            (unsigned long long)e->len);
    exit(1);
}

/* Take the tripwire event of the peer's put that carries tag, spinning
 * (netvm_evq_poll, driving progress as put_lat's receiver does) or sleeping
 * (netvm_evq_arm, then poll(2) on the queue's fd); checks the event and
 * that the data it reports is visible. */
static void trip_wait(struct bench *b, int path, uint8_t tag, int sleep)
{
    volatile uint8_t *last = b->mine[path] + 7;
    netvm_event_t ev[EV_BATCH];
    int n;
    b->waits++;
    for (;;) {
        if ((n = netvm_evq_poll(b->ctx, ev, EV_BATCH)) != 0)
            break;
        if (!sleep) {
            netvm_progress(b->ctx);
            continue;
        }
        netvm_status_t st = netvm_evq_arm(b->ctx);
        if (st == NETVM_ERR_AGAIN)
            continue;
        if (st != NETVM_OK)
            die("netvm_evq_arm", st);
        struct pollfd pfd = { .fd = netvm_evq_fd(b->ctx), .events = POLLIN };
        b->sleeps++;
        if (poll(&pfd, 1, 10000) == 0) {
            fprintf(stderr, "netvm bench: rank %d: no tripwire event within 10 s of sleeping "
                            "(netvm_evq_arm said nothing waits; data %s)\n", b->rank,
                    *last == tag ? "arrived" : "did not arrive");
            exit(1);
        }
    }
    if (n < 0)
        die("netvm_evq_poll", NETVM_ERR_INVAL);
    if (n != 1)
        bad_event(b, &ev[1], "more than one event for one put");
    const netvm_event_t *e = &ev[0];
    if (e->type != NETVM_EV_TRIPWIRE)
        bad_event(b, e, "not a tripwire event");
    if (e->id != netvm_tripwire_id(b->tw) || e->value != TRIP_USER || !(e->access & NETVM_TRIP_WRITE)
        || (e->rank != b->peer && e->rank != -1))
        bad_event(b, e, "a tripwire event with the wrong id, user value, access or rank");
    if (*last != tag)
        bad_event(b, e, "tripwire event before its data is visible");
}

static void sig_wait(struct bench *b, int path, uint64_t v)
{
    uint64_t *sig = (uint64_t *)(void *)(b->mine[path] + SIG_OFF), seen = 0;
    OK(netvm_wait_until(b->ctx, sig, NETVM_CMP_EQ, v, NETVM_WAIT_SPIN, 10000, &seen));
    uint64_t data;
    memcpy(&data, b->mine[path], 8);
    if (seen != v || data != v) {
        fprintf(stderr, "netvm bench: rank %d: putsig: signal %llu seen (wanted %llu) with data %llu "
                        "(the signal before its data)\n", b->rank, (unsigned long long)seen,
                (unsigned long long)v, (unsigned long long)data);
        exit(1);
    }
}

static void sig_send(struct bench *b, int path, uint64_t v)
{
    memcpy(b->src, &v, 8);
    OK(netvm_put_signal_nb(b->ctx, b->theirs[path], 0, b->src, 8, b->theirs[path], SIG_OFF, v,
                           NETVM_SIGNAL_SET, 0));
}

static void pong_rounds(struct bench *b, int path, size_t s, size_t n, uint64_t salt, enum pp_mode mode)
{
    volatile uint8_t *last = b->mine[path] + s - 1;
    if (mode == PP_PUTSIG) {
        for (size_t i = 0; i < n; i++) {
            uint64_t v = ++b->sigseq;
            if (b->rank == 0) {
                sig_send(b, path, v);
                sig_wait(b, path, v);
            } else {
                sig_wait(b, path, v);
                sig_send(b, path, v);
            }
        }
        OK(netvm_flush(b->ctx, b->peer));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t tag = (uint8_t)((i + salt) % 255 + 1);
        /* the waiting side polls its memory and drives progress, as the
         * peers' ping-pongs do (links that need the target's CPU, like tcp,
         * are served by this call rather than by a thread wake-up) */
        if (b->rank == 1) {
            if (mode == PP_PUT)
                while (*last != tag)
                    netvm_progress(b->ctx);
            else
                trip_wait(b, path, tag, mode == PP_TRIP_SLEEP);
        }
        b->src[s - 1] = tag;
        OK(netvm_put(b->ctx, b->theirs[path], 0, b->src, s, 0));
        if (b->rank == 0) {
            if (mode == PP_PUT)
                while (*last != tag)
                    netvm_progress(b->ctx);
            else
                trip_wait(b, path, tag, mode == PP_TRIP_SLEEP);
        }
    }
}

/* One ping-pong measurement lasting about goal seconds: rank 0 times a
 * trial, picks the count and hands it to rank 1; returns the one-way time
 * in us (on both ranks). */
static double pp_lat(struct bench *b, int path, size_t s, enum pp_mode mode, double goal)
{
    const size_t trial = 20;
    if (mode == PP_TRIP_SPIN || mode == PP_TRIP_SLEEP)
        OK(netvm_tripwire_arm(b->ctx, b->mine[path], 8, NETVM_TRIP_WRITE, TRIP_USER, NULL, &b->tw));
    OK(netvm_barrier(b->ctx));
    double t0 = now_s();
    pong_rounds(b, path, s, trial, 0, mode);
    double per = (now_s() - t0) / trial;
    size_t n = 0;
    if (b->rank == 0) {
        n = (size_t)(goal / (per > 0 ? per : 1e-9)) + 1;
        OK(netvm_put_imm(b->ctx, b->theirs[0], CTL_COUNT, n, 0));
    } else {
        while (!(n = (size_t)__atomic_load_n(ctl(b, CTL_COUNT), __ATOMIC_ACQUIRE)))
            netvm_progress(b->ctx);
        *ctl(b, CTL_COUNT) = 0;
    }
    t0 = now_s();
    pong_rounds(b, path, s, n, trial, mode);
    double us = (now_s() - t0) / (double)n / 2 * 1e6;
    OK(netvm_barrier(b->ctx));
    if (b->tw) {
        OK(netvm_tripwire_disarm(b->tw));
        b->tw = NULL;
    }
    memset(b->mine[path], 0, s);
    OK(netvm_barrier(b->ctx));
    return us;
}

static double goal_s(struct bench *b) { return b->quick ? b->min_s / 10 : b->min_s; }

static void ping_pong(struct bench *b, int path)
{
    static const size_t sizes[] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double us = pp_lat(b, path, sizes[i], PP_PUT, goal_s(b));
        if (b->rank == 0)
            emit(b, "put_lat", path, sizes[i], "us", us);
    }
}

/* --- events -------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* notify_rate, rank 0: n notifications, then the end marker; returns when
 * rank 1 has reported receiving all of them. */
static uint64_t notify_acked;   /* credits rank 1 returned: notifications it took */
static uint64_t notify_sent;

static void notify_take_credits(struct bench *b, int wait_end, uint64_t *end_count)
{
    netvm_event_t ev[EV_BATCH];
    for (;;) {
        int k = netvm_evq_poll(b->ctx, ev, EV_BATCH);
        for (int i = 0; i < k; i++) {
            if (ev[i].type != NETVM_EV_NOTIFY || ev[i].rank != b->peer)
                bad_event(b, &ev[i], "notify_rate: not a notification from the peer");
            if (ev[i].value & NOTIFY_END) {
                *end_count = ev[i].value & ~NOTIFY_END;
                return;
            }
            notify_acked = ev[i].value;
        }
        if (!wait_end && notify_sent - notify_acked < NOTIFY_WINDOW)
            return;
        if (k <= 0)
            netvm_progress(b->ctx);
    }
}

static void notify_send(struct bench *b, uint64_t v)
{
    netvm_status_t st;
    while ((st = netvm_notify(b->ctx, b->peer, v)) == NETVM_ERR_AGAIN)
        netvm_progress(b->ctx);   /* the peer's queue is full: wait for room */
    if (st != NETVM_OK)
        die("netvm_notify", st);
}

static double notify_batch(struct bench *b, int path, size_t s, size_t n)
{
    (void)path, (void)s;
    uint64_t got = 0;
    double t0 = now_s();
    for (size_t i = 0; i < n; i++) {
        if (notify_sent - notify_acked >= NOTIFY_WINDOW)
            notify_take_credits(b, 0, &got);
        notify_send(b, ++notify_sent);
    }
    notify_send(b, NOTIFY_END | n);
    notify_take_credits(b, 1, &got);
    double t = now_s() - t0;
    if (got != n) {
        fprintf(stderr, "netvm bench: notify_rate: %zu notifications sent, the peer took %llu\n", n,
                (unsigned long long)got);
        exit(1);
    }
    return t;
}

/* notify_rate, rank 1: drain, return credits, report each batch's count. */
static void notify_serve(struct bench *b)
{
    netvm_event_t ev[EV_BATCH];
    uint64_t taken = 0, batch = 0, expect = 0;
    for (;;) {
        int k = netvm_evq_poll(b->ctx, ev, EV_BATCH);
        if (k <= 0) {
            netvm_progress(b->ctx);
            continue;
        }
        for (int i = 0; i < k; i++) {
            const netvm_event_t *e = &ev[i];
            if (e->type != NETVM_EV_NOTIFY || e->rank != b->peer)
                bad_event(b, e, "notify_rate: not a notification from the peer");
            if (e->value & NOTIFY_STOP)
                return;
            if (e->value & NOTIFY_END) {
                if ((e->value & ~NOTIFY_END) != batch)
                    bad_event(b, e, "notify_rate: batch end with a count different from what arrived");
                notify_send(b, NOTIFY_END | batch);
                batch = 0;
                continue;
            }
            if (e->value != ++expect)
                bad_event(b, e, "notify_rate: a notification lost, repeated or out of order");
            batch++;
            if (++taken % NOTIFY_CREDIT == 0)
                notify_send(b, taken);
        }
    }
}

static void notify_rate(struct bench *b)
{
    OK(netvm_barrier(b->ctx));
    if (b->rank == 1) {
        notify_serve(b);
    } else {
        size_t n;
        double per = timed(b, notify_batch, 0, 8, &n);
        emit(b, "notify_rate", 0, 8, "Mops", 1 / per / 1e6);
        notify_send(b, NOTIFY_STOP);
    }
    OK(netvm_barrier(b->ctx));
}

static void events(struct bench *b, int path, int first)
{
    /* ref_put_lat and trip_lat_spin in alternating rounds, so that both see
     * the same states of a noisy machine; the median of each */
    enum { ROUNDS = 3 };
    int rounds = b->quick ? 1 : ROUNDS;
    double put[ROUNDS], spin[ROUNDS];
    for (int r = 0; r < rounds; r++) {
        put[r] = pp_lat(b, path, 8, PP_PUT, goal_s(b) / rounds);
        spin[r] = pp_lat(b, path, 8, PP_TRIP_SPIN, goal_s(b) / rounds);
    }
    if (b->rank == 0) {
        emit(b, "ref_put_lat", path, 8, "us", median(put, rounds));
        emit(b, "trip_lat_spin", path, 8, "us", median(spin, rounds));
    }
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    b->waits = b->sleeps = 0;
    double sleep = pp_lat(b, path, 8, PP_TRIP_SLEEP, goal_s(b));
    getrusage(RUSAGE_THREAD, &r1);
    if (b->rank == 0) {
        emit(b, "trip_lat_sleep", path, 8, "us", sleep);
        /* it is a sleeping measurement only if the waits did sleep */
        double slept = b->waits ? (double)(r1.ru_nvcsw - r0.ru_nvcsw) / (double)b->waits : 0;
        if (slept < 0.5)
            fprintf(stderr, "netvm bench: note: trip_lat_sleep%s: %.2f context switches per wait "
                            "(%llu of %llu waits armed and polled the fd): most waits did not sleep\n",
                    path_suffix[path], slept, (unsigned long long)b->sleeps,
                    (unsigned long long)b->waits);
    }
    double sig = pp_lat(b, path, 8, PP_PUTSIG, goal_s(b));
    if (b->rank == 0)
        emit(b, "putsig_lat", path, 8, "us", sig);
    if (first)
        notify_rate(b);
}

static int relaunch(char **argv)
{
    /* not inside a job: become a job of two */
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("netvm bench: /proc/self/exe");
        return 1;
    }
    self[n] = 0;
    int argc = 0;
    while (argv[argc])
        argc++;
    char **args = calloc((size_t)argc + 8, sizeof *args);
    int k = 0;
    args[k++] = self;
    args[k++] = "run";
    args[k++] = "-n";
    args[k++] = "2";
    args[k++] = "--";
    args[k++] = self;
    for (int i = 0; i < argc; i++)
        args[k++] = argv[i];
    execv(self, args);
    perror("netvm bench: exec");
    return 1;
}

static void usage(void)
{
    printf("usage: netvm bench [--json FILE] [--quick] [--path mapped|cma|both]\n"
           "                   [--target sleep|poll] [--min-ms MS] [--events on|off|only]\n\n"
           "Runs as a job of two processes (it launches itself when started outside a job)\n"
           "and prints one row per metric and size; --json also writes the rows as JSON.\n"
           "--target: how the idle rank waits during the one-sided tests: sleep (default:\n"
           "blocked, netvm's progress thread serves it) or poll (calls netvm_progress in a\n"
           "loop, as ucx_perftest's server does). --min-ms: length of each timed batch\n"
           "(default 50; --quick divides it by 10). --events: also (on, the default), not\n"
           "(off) or only (only) the event rows: tripwire latency spinning and sleeping\n"
           "(trip_lat_spin, trip_lat_sleep) beside the 8 B put ping-pong (ref_put_lat),\n"
           "put-with-signal latency (putsig_lat) and the notification rate (notify_rate).\n");
}

int nv_cmd_bench(int argc, char **argv)
{
    const char *json_path = NULL, *which = "both", *target = "sleep", *evopt = "on";
    int quick = 0;
    double min_ms = 50;
    static const struct option opts[] = {
        { "json", required_argument, 0, 'j' }, { "quick", no_argument, 0, 'q' },
        { "path", required_argument, 0, 'p' }, { "target", required_argument, 0, 't' },
        { "min-ms", required_argument, 0, 'm' }, { "events", required_argument, 0, 'e' },
        { "help", no_argument, 0, 'h' }, { 0, 0, 0, 0 } };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "j:qp:t:m:e:h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json_path = optarg; break;
        case 'q': quick = 1; break;
        case 'p': which = optarg; break;
        case 't': target = optarg; break;
        case 'm': min_ms = atof(optarg); break;
        case 'e': evopt = optarg; break;
        case 'h': usage(); return 0;
        default: usage(); return 2;
        }
    }
    if (strcmp(which, "both") && strcmp(which, "mapped") && strcmp(which, "cma")) {
        fprintf(stderr, "netvm bench: --path is mapped, cma or both\n");
        return 2;
    }
    if (strcmp(target, "sleep") && strcmp(target, "poll")) {
        fprintf(stderr, "netvm bench: --target is sleep or poll\n");
        return 2;
    }
    if (strcmp(evopt, "on") && strcmp(evopt, "off") && strcmp(evopt, "only")) {
        fprintf(stderr, "netvm bench: --events is on, off or only\n");
        return 2;
    }
    int events_on = strcmp(evopt, "off") != 0, base_on = strcmp(evopt, "only") != 0;
    if (min_ms <= 0) {
        fprintf(stderr, "netvm bench: --min-ms must be positive\n");
        return 2;
    }
    if (!getenv("NETVM_BOOT"))
        return relaunch(argv);

    struct bench b = { .quick = quick, .min_s = min_ms / 1000, .target_polls = !strcmp(target, "poll") };
    OK(netvm_init(&b.ctx, NULL));
    b.rank = netvm_rank(b.ctx);
    if (netvm_size(b.ctx) != 2) {
        fprintf(stderr, "netvm bench: needs a job of exactly 2 processes\n");
        return 2;
    }
    b.peer = 1 - b.rank;
    netvm_seg_t *seg[2];
    void *p;
    OK(netvm_alloc_shared(b.ctx, MAX_SIZE + 64, NETVM_RWA, "bench-mapped", &p, &seg[0]));
    b.mine[0] = p;
    b.mine[1] = mmap(NULL, MAX_SIZE + 64, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    b.src = mmap(NULL, MAX_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b.mine[1] == MAP_FAILED || b.src == MAP_FAILED) {
        perror("netvm bench: mmap");
        return 1;
    }
    memset(b.mine[1], 0, MAX_SIZE + 64);
    memset(b.src, 1, MAX_SIZE);
    OK(netvm_export(b.ctx, b.mine[1], MAX_SIZE + 64, NETVM_RWA, "bench-cma", &seg[1]));
    OK(netvm_am_register(b.ctx, AM_ECHO, am_echo, NULL));
    OK(netvm_am_register(b.ctx, AM_PING, am_ping, NULL));
    OK(netvm_am_register(b.ctx, AM_PONG, am_pong, NULL));
    OK(netvm_barrier(b.ctx));
    OK(netvm_import(b.ctx, b.peer, "bench-mapped", &b.theirs[0]));
    OK(netvm_import(b.ctx, b.peer, "bench-cma", &b.theirs[1]));
    if (!netvm_rseg_is_mapped(b.theirs[0]) && strcmp(which, "cma"))
        fprintf(stderr, "netvm bench: note: the mapped segment is not mapped (NETVM_SHM_MAPPED=0 or tcp)\n");

    if (b.rank == 0) {
        if (json_path && !(b.json = fopen(json_path, "w"))) {
            perror(json_path);
            return 1;
        }
        if (b.json)
            fprintf(b.json, "[");
        printf("%-20s %9s %-5s %12s   (target %s)\n", "metric", "size", "unit", "netvm", target);
    }
    int first = 1;
    for (int path = 0; path < 2; path++) {
        if ((path == 0 && !strcmp(which, "cma")) || (path == 1 && !strcmp(which, "mapped")))
            continue;
        if (base_on) {
            ping_pong(&b, path);
            one_sided(&b, path);
        }
        if (events_on) {
            events(&b, path, first);
            first = 0;
        }
    }
    if (b.json) {
        fprintf(b.json, "\n]\n");
        fclose(b.json);
    }
    OK(netvm_barrier(b.ctx));
    OK(netvm_finalize(b.ctx));
    return 0;
}
