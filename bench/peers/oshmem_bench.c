/* oshmem_bench: the OpenSHMEM peer of bench/compare (Open MPI's OpenSHMEM).
 * Build with oshcc, run with `oshrun -np 2`.  PE 0 measures; PE 1 is the
 * target and takes part only in the ping-pong.
 *
 * The same metrics and methodology as `netvm bench` and netvm_peer_raw:
 *   put_lat   ping-pong: shmem_putmem + shmem_quiet of s bytes, the target
 *             polls the last byte of its buffer for the iteration's value and
 *             answers the same way; one-way latency = round trip / 2.
 *   get_lat   blocking shmem_getmem of s bytes, time per op.
 *   fadd_lat  shmem_atomic_fetch_add on an unsigned long (64-bit) of PE 1.
 *   put_bw    windows of 32 shmem_putmem_nbi of s bytes, shmem_quiet each.
 *   get_bw    the same with shmem_getmem_nbi.  MB/s, 1 MB = 1e6 bytes.
 *   add_rate  windows of 64 shmem_atomic_add, shmem_quiet each.  Mops.
 *   put_rate  windows of 64 shmem_putmem_nbi of 8 bytes to consecutive
 *             words, shmem_quiet each.  Mops.
 *   lock_lat  (only with --metrics) shmem_set_lock + shmem_clear_lock by PE 0
 *             alone, time per pair.
 *   lock_handoff  (only with --metrics) both PEs loop over shmem_set_lock +
 *             shmem_clear_lock on one lock; time per acquisition (2n
 *             acquisitions). OpenSHMEM cannot tell a holder that a successor
 *             waits, so unlike netvm's row (sync_bench) not every release
 *             need be a hand-off.
 *   putsig_lat  put with signal, the three-step pattern of OpenSHMEM 1.4
 *             (Open MPI 4.1 has no shmem_put_signal): ping-pong of
 *             shmem_putmem of 8 B data + shmem_fence + shmem_put64 of the
 *             flag word after it, the other PE waiting in
 *             shmem_long_wait_until(flag == iteration's value) and answering
 *             the same way; one-way = round trip / 2.
 * Each measurement doubles its batch until it lasts an eighth of --min-ms
 * (the warm-up), then times one batch of about --min-ms.
 * --target sleep (default) or poll: how PE 1 waits for its next command (and
 * so during PE 0's one-sided tests).  sleep: shmem_int_test every 20 us with
 * usleep in between, and the ping-pong polls the last byte with bare loads
 * (enough where UCX maps the peer's memory, UCX_TLS=sm).  poll: PE 1 waits in
 * shmem_int_wait_until, and both PEs wait for the ping-pong's last bytes with
 * shmem_int_wait_until on the buffer's last int; these call into the library
 * (UCX progress) while waiting, which over tcp is required: there every
 * remote access is an active message the target's UCX must receive
 * (shmem_int_test does not progress UCX, so sleep deadlocks on tcp).
 *
 * Output (PE 0, stdout), one JSON object per line:
 *   {"metric":"get_lat","size":8,"unit":"us","value":0.07,"iters":N,"seconds":T}
 * then {"done":ROWS} once every row is out, before shmem_finalize (which
 * crashes in Debian's Open MPI 4.1.4; bench/compare accepts that when the
 * "done" line is there).
 */
#define _GNU_SOURCE
#include <shmem.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OP_PUT_LAT, OP_GET_LAT, OP_FADD_LAT, OP_PUT_BW, OP_GET_BW, OP_ADD_RATE, OP_PUT_RATE,
       OP_PUTSIG_LAT, OP_LOCK_LAT, OP_LOCK_HANDOFF, OP_COUNT };
#define OP_DEFAULT_COUNT OP_LOCK_LAT   /* the lock rows only when asked for */

static const struct {
    const char *name, *unit;
    unsigned window;
    int bw_sizes;
} ops[OP_COUNT] = {
    [OP_PUT_LAT]  = { "put_lat",  "us",   1,  0 },
    [OP_GET_LAT]  = { "get_lat",  "us",   1,  0 },
    [OP_FADD_LAT] = { "fadd_lat", "us",   1,  0 },
    [OP_LOCK_LAT] = { "lock_lat", "us",   1,  0 },
    [OP_LOCK_HANDOFF] = { "lock_handoff", "us", 1, 0 },
    [OP_PUT_BW]   = { "put_bw",   "MB/s", 32, 1 },
    [OP_GET_BW]   = { "get_bw",   "MB/s", 32, 1 },
    [OP_ADD_RATE] = { "add_rate", "Mops", 64, 0 },
    [OP_PUT_RATE] = { "put_rate", "Mops", 64, 0 },
    [OP_PUTSIG_LAT] = { "putsig_lat", "us", 1, 0 },
};

/* Symmetric control words.  They live on the symmetric heap, not in global
 * data: Open MPI reaches its heap through UCX's shared-memory mappings, but
 * global data only through paths that need the target to call into SHMEM. */
struct ctl {
    long cmd[4];               /* PE 0 -> PE 1: op, size, iters, seq */
    int  go;                   /* PE 1 waits on it; PE 0 bumps it per command */
    int  ack;                  /* PE 0 waits on it for PE 1's acknowledgement */
    unsigned long atomic_word;
};
static struct ctl *ctl;
#define ctl_cmd ctl->cmd
#define ctl_go ctl->go
#define ctl_ack ctl->ack
#define atomic_word ctl->atomic_word

static unsigned char *buf;     /* symmetric: the target of the peer's puts */
static unsigned char *scratch; /* local source/destination */
static size_t max_size;
static int me;
static volatile unsigned long sink;
static int target_polls;       /* --target poll */

#define barrier() __asm__ __volatile__("" ::: "memory")

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline unsigned char seq_value(uint64_t seq)
{
    return (unsigned char)(seq % 255 + 1);
}

static inline void wait_value(size_t s, unsigned char v)
{
    if (target_polls) {
        /* sizes are multiples of 4 and only the last byte is ever nonzero */
        unsigned u = (unsigned)v << 24;
        int want;
        memcpy(&want, &u, sizeof want);
        shmem_int_wait_until((int *)(void *)&buf[s - 4], SHMEM_CMP_EQ, want);
        return;
    }
    while (__atomic_load_n(&buf[s - 1], __ATOMIC_ACQUIRE) != v)
        ;
}

/* data at buf[0..8), the flag at buf[8..16) (a long, 64 bits here) */
static void putsig_pingpong(uint64_t n, uint64_t seq, int initiator)
{
    int peer = 1 - me;
    long *flag = (long *)(void *)(buf + 8);
    for (uint64_t i = 0; i < n; i++) {
        long v = (long)(seq + i + 1);
        if (!initiator)
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, v);
        memcpy(scratch, &v, sizeof v);
        shmem_putmem(buf, scratch, 8, peer);
        shmem_fence();
        shmem_put64(flag, &v, 1, peer);
        if (initiator)
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, v);
    }
}

static long lockvar;   /* symmetric: the lock of the lock rows */

static void lock_loop(uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        shmem_set_lock(&lockvar);
        shmem_clear_lock(&lockvar);
    }
}

static void pingpong(size_t s, uint64_t n, uint64_t seq, int initiator)
{
    int peer = 1 - me;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char v = seq_value(seq + i);
        if (initiator) {
            scratch[s - 1] = v;
            shmem_putmem(buf, scratch, s, peer);
            shmem_quiet();
            wait_value(s, v);
        } else {
            wait_value(s, v);
            scratch[s - 1] = v;
            shmem_putmem(buf, scratch, s, peer);
            shmem_quiet();
        }
    }
}

static uint64_t seq_next;
static int go_count;

static double run_batch(int op, size_t s, uint64_t n)
{
    double t0, t1;
    unsigned w = ops[op].window;
    if (op == OP_PUT_LAT || op == OP_PUTSIG_LAT || op == OP_LOCK_HANDOFF) {
        long cmd[4] = { op, (long)s, (long)n, (long)seq_next };
        memset(buf, 0, s);
        memset(scratch, 0, s);
        shmem_long_put(ctl_cmd, cmd, 4, 1);
        shmem_fence();
        shmem_int_p(&ctl_go, ++go_count, 1);
        shmem_quiet();
        shmem_int_wait_until(&ctl_ack, SHMEM_CMP_EQ, 2 * go_count - 1);
        t0 = now();
        if (op == OP_PUTSIG_LAT)
            putsig_pingpong(n, seq_next, 1);
        else if (op == OP_LOCK_HANDOFF)
            lock_loop(n);
        else
            pingpong(s, n, seq_next, 1);
        t1 = now();
        shmem_int_wait_until(&ctl_ack, SHMEM_CMP_EQ, 2 * go_count);
        seq_next += n;
        return (t1 - t0) / 2;
    }
    t0 = now();
    switch (op) {
    case OP_GET_LAT:
        for (uint64_t i = 0; i < n; i++) {
            shmem_getmem(scratch, buf, s, 1);
            barrier();
        }
        break;
    case OP_LOCK_LAT:
        lock_loop(n);
        break;
    case OP_FADD_LAT: {
        unsigned long acc = 0;
        for (uint64_t i = 0; i < n; i++)
            acc += shmem_atomic_fetch_add(&atomic_word, 1UL, 1);
        sink = acc;
        break;
    }
    case OP_PUT_BW:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) shmem_putmem_nbi(buf, scratch, s, 1);
            shmem_quiet();
        }
        break;
    case OP_GET_BW:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) shmem_getmem_nbi(scratch, buf, s, 1);
            shmem_quiet();
        }
        break;
    case OP_PUT_RATE:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) shmem_putmem_nbi(buf + 8 * k, scratch, 8, 1);
            shmem_quiet();
        }
        break;
    case OP_ADD_RATE:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) shmem_atomic_add(&atomic_word, 1UL, 1);
            shmem_quiet();
        }
        break;
    }
    t1 = now();
    return t1 - t0;
}

static uint64_t round_window(double n, unsigned w)
{
    uint64_t r = n < 1 ? 1 : (uint64_t)n;
    return (r + w - 1) / w * w;
}

static int rows;

static void measure(int op, size_t s, double min_s)
{
    unsigned w = ops[op].window;
    uint64_t n = w;
    double t;
    for (;;) {
        t = run_batch(op, s, n);
        if (t >= min_s / 8 || n >= (UINT64_C(1) << 40)) break;
        double f = t > 0 ? (min_s / 8) / t * 1.2 : 16;
        n = round_window((double)n * (f > 16 ? 16 : (f < 2 ? 2 : f)), w);
    }
    for (int attempt = 0; attempt < 4; attempt++) {
        n = round_window((double)n * (min_s / t) * 1.05, w);
        t = run_batch(op, s, n);
        if (t >= min_s * 0.9) break;
    }
    double v;
    if (ops[op].unit[0] == 'u')
        v = t / (double)n * 1e6;
    else if (ops[op].unit[1] == 'B')
        v = (double)s * (double)n / t / 1e6;
    else
        v = (double)n / t / 1e6;
    printf("{\"metric\":\"%s\",\"size\":%zu,\"unit\":\"%s\",\"value\":%.9g,"
           "\"iters\":%llu,\"seconds\":%.6f}\n", ops[op].name, s, ops[op].unit, v,
           (unsigned long long)n, op == OP_PUT_LAT || op == OP_PUTSIG_LAT || op == OP_LOCK_HANDOFF ? 2 * t : t);
    fflush(stdout);
    rows++;
}

/* PE 1: wait for commands, mostly asleep so PE 0 has a core of its own */
static void serve(void)
{
    for (int k = 1;; k++) {
        if (target_polls)
            shmem_int_wait_until(&ctl_go, SHMEM_CMP_GE, k);
        while (!shmem_int_test(&ctl_go, SHMEM_CMP_GE, k))
            usleep(20);
        if (ctl_cmd[0] < 0) return;
        memset(buf, 0, (size_t)ctl_cmd[1]);
        memset(scratch, 0, (size_t)ctl_cmd[1]);
        shmem_int_p(&ctl_ack, 2 * k - 1, 0);
        shmem_quiet();
        if (ctl_cmd[0] == OP_PUTSIG_LAT)
            putsig_pingpong((uint64_t)ctl_cmd[2], (uint64_t)ctl_cmd[3], 0);
        else if (ctl_cmd[0] == OP_LOCK_HANDOFF)
            lock_loop((uint64_t)ctl_cmd[2]);
        else
            pingpong((size_t)ctl_cmd[1], (uint64_t)ctl_cmd[2], (uint64_t)ctl_cmd[3], 0);
        shmem_int_p(&ctl_ack, 2 * k, 0);
        shmem_quiet();
    }
}

static size_t parse_sizes(const char *arg, size_t *out, size_t cap)
{
    size_t n = 0;
    char *copy = strdup(arg), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long v = strtoull(t, &end, 10);
        if (*end || v < 8 || v % 4 || n == cap) {
            fprintf(stderr, "oshmem_bench: bad size list '%s'\n", arg);
            exit(2);
        }
        out[n++] = (size_t)v;
    }
    free(copy);
    return n;
}

int main(int argc, char **argv)
{
    size_t lat[32], bw[32], nlat, nbw;
    double min_ms = 50;
    int want[OP_COUNT];
    nlat = parse_sizes("8,64,512,4096,32768,262144,1048576,4194304", lat, 32);
    nbw  = parse_sizes("65536,1048576,4194304", bw, 32);
    for (int i = 0; i < OP_COUNT; i++) want[i] = i < OP_DEFAULT_COUNT;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--min-ms")) min_ms = atof(v);
        else if (!strcmp(a, "--target") && (!strcmp(v, "poll") || !strcmp(v, "sleep")))
            target_polls = !strcmp(v, "poll");
        else if (!strcmp(a, "--lat-sizes")) nlat = parse_sizes(v, lat, 32);
        else if (!strcmp(a, "--bw-sizes")) nbw = parse_sizes(v, bw, 32);
        else if (!strcmp(a, "--metrics")) {
            for (int k = 0; k < OP_COUNT; k++) want[k] = 0;
            for (int k = 0; k < OP_COUNT; k++) {
                const char *p = strstr(v, ops[k].name);
                size_t l = strlen(ops[k].name);
                if (p && (p == v || p[-1] == ',') && (p[l] == 0 || p[l] == ','))
                    want[k] = 1;
            }
        } else {
            fprintf(stderr, "oshmem_bench: unknown option '%s'\n", a);
            return 2;
        }
    }
    if (argc % 2 == 0 || !(min_ms > 0)) {
        fprintf(stderr, "usage: oshmem_bench [--min-ms MS] [--lat-sizes LIST] "
                        "[--bw-sizes LIST] [--metrics LIST] [--target sleep|poll]\n");
        return 2;
    }

    shmem_init();
    me = shmem_my_pe();
    if (shmem_n_pes() != 2) {
        if (me == 0) fprintf(stderr, "oshmem_bench: needs exactly 2 PEs\n");
        shmem_global_exit(2);
    }
    max_size = 512;   /* at least the 64 words of put_rate */
    for (size_t i = 0; i < nlat; i++) if (lat[i] > max_size) max_size = lat[i];
    for (size_t i = 0; i < nbw; i++)  if (bw[i] > max_size)  max_size = bw[i];
    buf = shmem_malloc(max_size);
    ctl = shmem_malloc(sizeof *ctl);
    scratch = malloc(max_size);
    if (!buf || !ctl || !scratch) {
        fprintf(stderr, "oshmem_bench: out of memory\n");
        shmem_global_exit(1);
    }
    memset(buf, 0, max_size);
    memset(scratch, 0, max_size);
    memset(ctl, 0, sizeof *ctl);
    shmem_barrier_all();

    if (me == 1) {
        serve();
    } else {
        double min_s = min_ms / 1e3;
        for (int op = 0; op < OP_COUNT; op++) {
            if (!want[op]) continue;
            if (op == OP_FADD_LAT || op == OP_ADD_RATE || op == OP_PUT_RATE || op == OP_PUTSIG_LAT ||
                op == OP_LOCK_LAT || op == OP_LOCK_HANDOFF) {
                measure(op, 8, min_s);
                continue;
            }
            const size_t *sz = ops[op].bw_sizes ? bw : lat;
            size_t nsz = ops[op].bw_sizes ? nbw : nlat;
            for (size_t i = 0; i < nsz; i++) measure(op, sz[i], min_s);
        }
        long quit[4] = { -1, 0, 0, 0 };
        shmem_long_put(ctl_cmd, quit, 4, 1);
        shmem_fence();
        shmem_int_p(&ctl_go, ++go_count, 1);
        shmem_quiet();
    }
    shmem_barrier_all();
    if (me == 0) {
        printf("{\"done\":%d}\n", rows);
        fflush(stdout);
    }
    shmem_free(ctl);
    shmem_free(buf);
    free(scratch);
    shmem_finalize();
    return 0;
}
