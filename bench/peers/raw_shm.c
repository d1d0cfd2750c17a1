/* netvm_peer_raw: the bare baselines that netvm's shm link is compared against.
 *
 *   --mode shm  two forked processes share one MAP_SHARED mapping: a put is a
 *               memcpy into the peer's half followed by a release store of the
 *               last byte, a get is a memcpy out of it, atomics are CPU atomics.
 *               (The peer called "memcpy" in bench/compare.)
 *   --mode cma  each process has private memory: a put is process_vm_writev, a
 *               get is process_vm_readv.  There is no bare remote atomic here,
 *               so fadd_lat and add_rate are not measured.  ("process_vm")
 *
 * Methodology (the same as `netvm bench`, see docs/performance.md):
 *   put_lat   ping-pong; A puts s bytes into B's buffer, B polls the last byte
 *             of its buffer until it holds the iteration's value, then puts s
 *             bytes back; A polls likewise; one-way latency = round trip / 2.
 *   get_lat   blocking get of s bytes from the peer's buffer, time per op.
 *   fadd_lat  blocking 64-bit fetch-and-add on a word of the peer, per op.
 *   put_bw    windows of 32 puts of s bytes to the peer, then a flush;
 *   get_bw    the same with gets; MB/s with 1 MB = 1e6 bytes.
 *   add_rate  windows of 64 non-fetching 64-bit adds, then a flush; Mops.
 *   put_rate  windows of 64 puts of 8 bytes (to 64 consecutive words), then
 *             a flush; Mops.
 *   stream_bw (shm; not in the default list) a stream between the two
 *             processes, the shared-memory form of a TCP stream: A copies
 *             chunks of s bytes from its private buffer into a ring of
 *             STREAM_SLOTS slots in shared memory, B copies each out into
 *             its own private buffer and frees the slot; each slot's two
 *             words (full, freed) sit on lines of their own. MB/s of the
 *             bytes B has received. put_bw, by contrast, copies into a
 *             buffer nobody reads, which stays in A's cache.
 *   wake_lat  (either mode; not in the default list) the bare cost of waking a
 *             sleeping process: ping-pong through two eventfds, each process
 *             blocked in read(2) until the other's write(2); one-way = round
 *             trip / 2.  The reference of a sleeping waiter (netvm's
 *             trip_lat_sleep).
 * Every measurement first doubles its iteration count until one batch lasts
 * at least an eighth of --min-ms (that is the warm-up), then runs one timed
 * batch sized to last --min-ms.  The peer process sleeps in read(2) during
 * the one-sided tests; it takes part only in the ping-pong.  --busy-target
 * makes it spin instead, to show what a polling target costs the initiator
 * (on a machine whose CPUs share a core, a lot: see docs/performance.md).
 *
 * Output, one JSON object per line on stdout:
 *   {"metric":"put_lat","size":8,"unit":"us","value":0.1,"iters":N,"seconds":T}
 * and last {"done":ROWS}.  Errors go to stderr with exit status 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MODE_SHM, MODE_CMA };
enum { OP_PUT_LAT, OP_GET_LAT, OP_FADD_LAT, OP_PUT_BW, OP_GET_BW, OP_ADD_RATE, OP_PUT_RATE,
       OP_WAKE_LAT, OP_STREAM_BW, OP_COUNT, OP_QUIT = 100 };

static const struct {
    const char *name, *unit;
    unsigned window;   /* ops per flush; 1 for the latency tests */
    int bw_sizes;      /* measured at the bandwidth sizes, else the latency sizes */
    int shm_only;      /* no bare equivalent over process_vm_* */
} ops[OP_COUNT] = {
    [OP_PUT_LAT]  = { "put_lat",  "us",   1,  0, 0 },
    [OP_GET_LAT]  = { "get_lat",  "us",   1,  0, 0 },
    [OP_FADD_LAT] = { "fadd_lat", "us",   1,  0, 1 },
    [OP_PUT_BW]   = { "put_bw",   "MB/s", 32, 1, 0 },
    [OP_GET_BW]   = { "get_bw",   "MB/s", 32, 1, 0 },
    [OP_ADD_RATE] = { "add_rate", "Mops", 64, 0, 1 },
    [OP_PUT_RATE] = { "put_rate", "Mops", 64, 0, 0 },
    [OP_WAKE_LAT] = { "wake_lat", "us",   1,  0, 0 },
    [OP_STREAM_BW] = { "stream_bw", "MB/s", 1, 1, 1 },
};

struct cmd {
    int      op;
    size_t   size;
    uint64_t iters;
    uint64_t seq;      /* ping-pong value of the first iteration */
};

static int      mode = MODE_SHM;
static size_t   max_size;
static unsigned char *mine;    /* my buffer: the peer puts into it */
static unsigned char *theirs;  /* the peer's buffer (shm: mapped; cma: its address) */
static unsigned char *scratch; /* private source/destination */
static uint64_t *word;         /* shm: the peer's atomic word */
static pid_t    peer_pid;
static int      cmd_fd, ack_fd;  /* pipes to and from the peer */
static volatile uint64_t sink;
static int      busy_target;   /* --busy-target: the peer spins between commands */
static int      wake_in, wake_out; /* wake_lat: the eventfds this process reads and writes */

/* stream_bw's ring: STREAM_SLOTS chunks of up to max_size bytes, and per
 * slot a line for the producer's word and one for the consumer's */
#define STREAM_SLOTS 8
#define LINE 64
static unsigned char *stream_data;
static unsigned char *stream_words;

static _Atomic uint64_t *stream_full(unsigned k)  { return (_Atomic uint64_t *)(void *)(stream_words + (2 * k) * LINE); }
static _Atomic uint64_t *stream_freed(unsigned k) { return (_Atomic uint64_t *)(void *)(stream_words + (2 * k + 1) * LINE); }

#define barrier() __asm__ __volatile__("" ::: "memory")

static void die(const char *what)
{
    fprintf(stderr, "netvm_peer_raw: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void xwrite(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t r = write(fd, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("pipe write");
        c += r; n -= (size_t)r;
    }
}

static int xread(int fd, void *p, size_t n)   /* 0 on EOF before any byte */
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) die("pipe read");
        if (r == 0) {
            if (got == 0) return 0;
            errno = EPIPE;
            die("pipe read");
        }
        got += (size_t)r;
    }
    return 1;
}

/* put s bytes from scratch into the peer's buffer; the last byte goes last */
static inline void put(size_t s)
{
    if (mode == MODE_SHM) {
        memcpy(theirs, scratch, s - 1);
        __atomic_store_n(&theirs[s - 1], scratch[s - 1], __ATOMIC_RELEASE);
    } else {
        struct iovec l = { scratch, s }, r = { theirs, s };
        ssize_t n = process_vm_writev(peer_pid, &l, 1, &r, 1, 0);
        if (n != (ssize_t)s) {
            if (n >= 0) errno = EIO;
            die("process_vm_writev");
        }
    }
}

/* put 8 bytes from scratch to word k of the peer's buffer (put_rate) */
static inline void put8(size_t k)
{
    if (mode == MODE_SHM) {
        memcpy(theirs + 8 * k, scratch, 8);
        barrier();
    } else {
        struct iovec l = { scratch, 8 }, r = { theirs + 8 * k, 8 };
        ssize_t n = process_vm_writev(peer_pid, &l, 1, &r, 1, 0);
        if (n != 8) {
            if (n >= 0) errno = EIO;
            die("process_vm_writev");
        }
    }
}

static inline void get(size_t s)
{
    if (mode == MODE_SHM) {
        memcpy(scratch, theirs, s);
        barrier();
    } else {
        struct iovec l = { scratch, s }, r = { theirs, s };
        ssize_t n = process_vm_readv(peer_pid, &l, 1, &r, 1, 0);
        if (n != (ssize_t)s) {
            if (n >= 0) errno = EIO;
            die("process_vm_readv");
        }
    }
}

static inline unsigned char seq_value(uint64_t seq)
{
    return (unsigned char)(seq % 255 + 1);   /* never 0, the cleared value */
}

static inline void wait_value(size_t s, unsigned char v)
{
    while (__atomic_load_n(&mine[s - 1], __ATOMIC_ACQUIRE) != v)
        ;
}

/* Both sides clear what the ping-pong polls before it starts. */
static void pingpong_prepare(size_t s)
{
    memset(mine, 0, s);
    memset(scratch, 0, s);
}

static void wake_pingpong(const struct cmd *c, int initiator)
{
    uint64_t one = 1, got;
    for (uint64_t i = 0; i < c->iters; i++) {
        if (initiator)
            xwrite(wake_out, &one, sizeof one);
        if (read(wake_in, &got, sizeof got) != (ssize_t)sizeof got)
            die("eventfd read");
        if (!initiator)
            xwrite(wake_out, &one, sizeof one);
    }
}

static void pingpong(const struct cmd *c, int initiator)
{
    size_t s = c->size;
    if (c->op == OP_WAKE_LAT) {
        wake_pingpong(c, initiator);
        return;
    }
    for (uint64_t i = 0; i < c->iters; i++) {
        unsigned char v = seq_value(c->seq + i);
        if (initiator) {
            scratch[s - 1] = v;
            put(s);
            wait_value(s, v);
        } else {
            wait_value(s, v);
            scratch[s - 1] = v;
            put(s);
        }
    }
}

/* n chunks of s bytes through the ring: chunk i (numbered from 1 in the
 * words, 0 meaning empty) goes to slot i % STREAM_SLOTS once the chunk
 * that last used that slot has been taken. */
static void stream(const struct cmd *c, int producer)
{
    size_t s = c->size;
    for (uint64_t i = 0; i < c->iters; i++) {
        unsigned k = (unsigned)(i % STREAM_SLOTS);
        unsigned char *slot = stream_data + (size_t)k * max_size;
        if (producer) {
            uint64_t last = i >= STREAM_SLOTS ? i - STREAM_SLOTS + 1 : 0;
            while (atomic_load_explicit(stream_freed(k), memory_order_acquire) != last)
                ;
            memcpy(slot, scratch, s);
            atomic_store_explicit(stream_full(k), i + 1, memory_order_release);
        } else {
            while (atomic_load_explicit(stream_full(k), memory_order_acquire) != i + 1)
                ;
            memcpy(scratch, slot, s);
            atomic_store_explicit(stream_freed(k), i + 1, memory_order_release);
        }
    }
}

static void stream_reset(void)
{
    for (unsigned k = 0; k < STREAM_SLOTS; k++) {
        atomic_store_explicit(stream_full(k), 0, memory_order_relaxed);
        atomic_store_explicit(stream_freed(k), 0, memory_order_relaxed);
    }
}

static uint64_t seq_next = 0;

/* One timed batch of n operations (n is a multiple of the window). */
static double run_batch(int op, size_t s, uint64_t n)
{
    double t0, t1;
    unsigned w = ops[op].window;
    if (op == OP_PUT_LAT || op == OP_WAKE_LAT) {
        struct cmd c = { op, s, n, seq_next };
        char ack;
        seq_next += n;
        pingpong_prepare(s);
        xwrite(cmd_fd, &c, sizeof c);
        if (!xread(ack_fd, &ack, 1)) { errno = EPIPE; die("peer exited"); }
        t0 = now();
        pingpong(&c, 1);
        t1 = now();
        if (!xread(ack_fd, &ack, 1)) { errno = EPIPE; die("peer exited"); }
        return (t1 - t0) / 2;      /* n round trips: report per one-way trip */
    }
    if (op == OP_STREAM_BW) {
        /* timed until the consumer has taken the last chunk (its ack) */
        struct cmd c = { op, s, n, 0 };
        char ack;
        stream_reset();
        xwrite(cmd_fd, &c, sizeof c);
        if (!xread(ack_fd, &ack, 1)) { errno = EPIPE; die("peer exited"); }
        t0 = now();
        stream(&c, 1);
        unsigned k = (unsigned)((n - 1) % STREAM_SLOTS);
        while (atomic_load_explicit(stream_freed(k), memory_order_acquire) != n)
            ;
        t1 = now();
        if (!xread(ack_fd, &ack, 1)) { errno = EPIPE; die("peer exited"); }
        return t1 - t0;
    }
    t0 = now();
    switch (op) {
    case OP_GET_LAT:
        for (uint64_t i = 0; i < n; i++) get(s);
        break;
    case OP_FADD_LAT: {
        uint64_t acc = 0;
        for (uint64_t i = 0; i < n; i++)
            acc += __atomic_fetch_add(word, 1, __ATOMIC_SEQ_CST);
        sink = acc;
        break;
    }
    case OP_PUT_BW:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) put(s);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);   /* flush */
        }
        break;
    case OP_GET_BW:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) get(s);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
        break;
    case OP_PUT_RATE:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++) put8(k);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
        break;
    case OP_ADD_RATE:
        for (uint64_t i = 0; i < n; i += w) {
            for (unsigned k = 0; k < w; k++)
                __atomic_fetch_add(word, 1, __ATOMIC_RELAXED);   /* lock add */
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
        }
        break;
    }
    t1 = now();
    return t1 - t0;
}

static int rows;

static uint64_t round_window(double n, unsigned w)
{
    uint64_t r = n < 1 ? 1 : (uint64_t)n;
    return (r + w - 1) / w * w;
}

static void measure(int op, size_t s, double min_s)
{
    unsigned w = ops[op].window;
    uint64_t n = w;
    double t;
    /* warm-up and calibration: grow n until a batch lasts min_s / 8 */
    for (;;) {
        t = run_batch(op, s, n);
        if (t >= min_s / 8 || n >= (UINT64_C(1) << 40)) break;
        double f = t > 0 ? (min_s / 8) / t * 1.2 : 16;
        n = round_window((double)n * (f > 16 ? 16 : (f < 2 ? 2 : f)), w);
    }
    /* the timed batch; one slow calibration batch (the machine is shared)
     * makes it too short, so size it again from what it measured */
    for (int attempt = 0; attempt < 4; attempt++) {
        n = round_window((double)n * (min_s / t) * 1.05, w);
        t = run_batch(op, s, n);
        if (t >= min_s * 0.9) break;
    }
    double v;
    if (op == OP_PUT_LAT || op == OP_WAKE_LAT)   /* t is the one-way part already */
        v = t / (double)n * 1e6;
    else if (ops[op].unit[0] == 'u')
        v = t / (double)n * 1e6;
    else if (ops[op].unit[0] == 'M' && ops[op].unit[1] == 'B')
        v = (double)s * (double)n / t / 1e6;
    else
        v = (double)n / t / 1e6;
    printf("{\"metric\":\"%s\",\"size\":%zu,\"unit\":\"%s\",\"value\":%.9g,"
           "\"iters\":%llu,\"seconds\":%.6f}\n", ops[op].name, s, ops[op].unit, v,
           (unsigned long long)n, op == OP_PUT_LAT || op == OP_WAKE_LAT ? 2 * t : t);
    fflush(stdout);
    rows++;
}

/* The passive side: sleeps in read(2) between commands (or, with
 * --busy-target, polls the pipe without sleeping, as a target that
 * busy-polls its progress engine would). */
static void serve(void)
{
    struct cmd c;
    if (busy_target) {
        int fl = fcntl(cmd_fd, F_GETFL);
        if (fl < 0 || fcntl(cmd_fd, F_SETFL, fl | O_NONBLOCK) < 0) die("fcntl");
    }
    for (;;) {
        if (busy_target) {
            ssize_t r = read(cmd_fd, &c, sizeof c);
            if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (r == 0) break;
            if (r != (ssize_t)sizeof c) die("pipe read");   /* commands are written whole */
        } else if (!xread(cmd_fd, &c, sizeof c)) {
            break;
        }
        if (c.op == OP_QUIT) break;
        char ack = 1;
        if (c.op == OP_STREAM_BW) {
            xwrite(ack_fd, &ack, 1);
            stream(&c, 0);
            xwrite(ack_fd, &ack, 1);
            continue;
        }
        pingpong_prepare(c.size);
        xwrite(ack_fd, &ack, 1);
        pingpong(&c, 0);
        xwrite(ack_fd, &ack, 1);
    }
    exit(0);
}

static void *map_buffer(size_t len, int shared)
{
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                   (shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) die("mmap");
    memset(p, 0, len);   /* fault every page in now, not in a timed loop */
    return p;
}

static size_t parse_sizes(const char *arg, size_t *out, size_t cap)
{
    size_t n = 0;
    char *copy = strdup(arg), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long v = strtoull(t, &end, 10);
        if (*end || v < 8 || n == cap) {
            fprintf(stderr, "netvm_peer_raw: bad size list '%s'\n", arg);
            exit(2);
        }
        out[n++] = (size_t)v;
    }
    free(copy);
    return n;
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: netvm_peer_raw [--mode shm|cma] [--min-ms MS] [--lat-sizes LIST]\n"
        "                      [--bw-sizes LIST] [--metrics LIST]\n"
        "  --mode shm   memcpy and CPU atomics on a MAP_SHARED mapping (default)\n"
        "  --mode cma   process_vm_writev / process_vm_readv on private memory\n"
        "  --min-ms     length of each timed batch (default 50)\n"
        "  --lat-sizes  default 8,64,512,4096,32768,262144,1048576,4194304\n"
        "  --bw-sizes   default 65536,1048576,4194304\n"
        "  --metrics    put_lat,get_lat,fadd_lat,put_bw,get_bw,add_rate,put_rate (default),\n"
        "               wake_lat (eventfd ping-pong between sleeping processes),\n"
        "               stream_bw (shm: a stream through a ring, copied in and out; at the bw sizes)\n"
        "  --busy-target  the peer process spins between commands instead of sleeping\n");
}

int main(int argc, char **argv)
{
    size_t lat[32], bw[32], nlat, nbw;
    double min_ms = 50;
    int want[OP_COUNT];
    nlat = parse_sizes("8,64,512,4096,32768,262144,1048576,4194304", lat, 32);
    nbw  = parse_sizes("65536,1048576,4194304", bw, 32);
    for (int i = 0; i < OP_COUNT; i++) want[i] = i != OP_WAKE_LAT && i != OP_STREAM_BW;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        if (!strcmp(a, "--busy-target")) { busy_target = 1; continue; }
        if (!v) { usage(stderr); return 2; }
        i++;
        if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "shm")) mode = MODE_SHM;
            else if (!strcmp(v, "cma")) mode = MODE_CMA;
            else { usage(stderr); return 2; }
        } else if (!strcmp(a, "--min-ms")) {
            min_ms = atof(v);
            if (!(min_ms > 0)) { usage(stderr); return 2; }
        } else if (!strcmp(a, "--lat-sizes")) {
            nlat = parse_sizes(v, lat, 32);
        } else if (!strcmp(a, "--bw-sizes")) {
            nbw = parse_sizes(v, bw, 32);
        } else if (!strcmp(a, "--metrics")) {
            for (int k = 0; k < OP_COUNT; k++) want[k] = 0;
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int k;
                for (k = 0; k < OP_COUNT && strcmp(t, ops[k].name); k++)
                    ;
                if (k == OP_COUNT) {
                    fprintf(stderr, "netvm_peer_raw: unknown metric '%s'\n", t);
                    return 2;
                }
                want[k] = 1;
            }
            free(copy);
        } else {
            usage(stderr);
            return 2;
        }
    }

    max_size = 512;   /* at least the 64 words of put_rate */
    for (size_t i = 0; i < nlat; i++) if (lat[i] > max_size) max_size = lat[i];
    for (size_t i = 0; i < nbw; i++)  if (bw[i] > max_size)  max_size = bw[i];
    max_size = (max_size + 4095) & ~(size_t)4095;

    /* shm: [parent's buffer][child's buffer][atomic word] in one shared mapping */
    unsigned char *shared = NULL;
    if (mode == MODE_SHM)
        shared = map_buffer(2 * max_size + 4096, 1);
    if (mode == MODE_SHM && want[OP_STREAM_BW]) {
        stream_data = map_buffer(STREAM_SLOTS * max_size, 1);
        stream_words = map_buffer(2 * STREAM_SLOTS * LINE, 1);
    }

    int down[2], up[2], addr_pipe[2];
    if (pipe(down) || pipe(up) || pipe(addr_pipe)) die("pipe");
    int to_child = eventfd(0, EFD_CLOEXEC), to_parent = eventfd(0, EFD_CLOEXEC);
    if (to_child < 0 || to_parent < 0) die("eventfd");
    /* Yama may forbid the child from writing into its parent; allow it. */
    (void)prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) die("fork");
    int child = pid == 0;
    if (child) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) exit(1);
        cmd_fd = down[0]; ack_fd = up[1];
        close(down[1]); close(up[0]);
        peer_pid = parent;
        wake_in = to_child; wake_out = to_parent;
    } else {
        wake_in = to_parent; wake_out = to_child;
        cmd_fd = down[1]; ack_fd = up[0];
        close(down[0]); close(up[1]);
        peer_pid = pid;
    }
    scratch = map_buffer(max_size, 0);
    if (mode == MODE_SHM) {
        mine   = shared + (child ? max_size : 0);
        theirs = shared + (child ? 0 : max_size);
        word   = (uint64_t *)(shared + 2 * max_size);
    } else {
        /* private buffers; each side learns the other's address */
        mine = map_buffer(max_size, 0);
        if (child) {
            xwrite(addr_pipe[1], &mine, sizeof mine);
        } else {
            if (!xread(addr_pipe[0], &theirs, sizeof theirs)) {
                errno = EPIPE;
                die("peer address");
            }
        }
    }
    if (child) {
        if (mode == MODE_CMA) {
            struct cmd c;   /* first command carries the parent's address */
            if (!xread(cmd_fd, &c, sizeof c)) exit(0);
            theirs = (unsigned char *)(uintptr_t)c.iters;
        }
        serve();
    }
    if (mode == MODE_CMA) {
        struct cmd c = { -1, 0, (uint64_t)(uintptr_t)mine, 0 };
        xwrite(cmd_fd, &c, sizeof c);
    }

    double min_s = min_ms / 1e3;
    for (int op = 0; op < OP_COUNT; op++) {
        if (!want[op] || (ops[op].shm_only && mode == MODE_CMA)) continue;
        if (op == OP_FADD_LAT || op == OP_ADD_RATE || op == OP_PUT_RATE || op == OP_WAKE_LAT) {
            measure(op, 8, min_s);
            continue;
        }
        const size_t *sz = ops[op].bw_sizes ? bw : lat;
        size_t nsz = ops[op].bw_sizes ? nbw : nlat;
        for (size_t i = 0; i < nsz; i++) measure(op, sz[i], min_s);
    }

    struct cmd quit = { OP_QUIT, 0, 0, 0 };
    xwrite(cmd_fd, &quit, sizeof quit);
    int status;
    if (waitpid(pid, &status, 0) < 0) die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "netvm_peer_raw: peer process failed (status %d)\n", status);
        return 1;
    }
    printf("{\"done\":%d}\n", rows);
    return 0;
}
