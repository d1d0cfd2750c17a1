/* kvload: a key-value load generator with a skewed (zipfian) key choice, for
 * redis-server (RESP protocol) in bench/workloads/run.  Debian packages no
 * zipfian generator (memtier_benchmark and YCSB are not in Debian;
 * redis-benchmark draws keys uniformly), hence this one.
 *
 *   kvload --port P [--host H] --keys K [--value V] [--seed S] COMMAND...
 * COMMANDs, in the order given:
 *   wait       connect until the server answers PING (10 s at most)
 *   load       SET every key 0..K-1 to its value (pipelined, --conns connections)
 *   run        --ops N operations over --conns connections, each a closed loop
 *              (one request outstanding); --reads PCT of them GET (the value
 *              must be the key's, byte for byte), the rest SET the same value
 *              again; keys drawn from YCSB's scrambled zipfian (constant
 *              --theta, 0.99): the rank from a zipfian over K, the key a hash
 *              of the rank, so the hot keys are spread over the keyspace
 *   verify     GET every key (pipelined) and check each value
 *   shutdown   SHUTDOWN NOSAVE
 * Rows: "kv" (run: ops/s, p50/p99/mean latency in us), "kv_load" (SETs/s),
 * "kv_verify" (keys checked); "VERIFY FAILED" and exit 1 on any wrong reply.
 * Values: V bytes from a seeded hash of the key (incompressible, so zram
 * gets no free ride). */
#include "wl.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define REPLY_TIMEOUT_S 120   /* far above any reply, swapped out or not */

typedef struct {
    int fd;
    char buf[1 << 16];
    size_t lo, hi;       /* unread bytes buf[lo..hi) */
} conn_t;

static const char *host = "127.0.0.1";
static int port;
static uint64_t keys = 1000000, ops = 200000, seed = 1;
static unsigned vsize = 1000, conns = 2, reads_pct = 95;
static double theta = 0.99;

static int conn_open(conn_t *c, int quiet)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &ai)) {
        fprintf(stderr, "kvload: cannot resolve %s\n", host);
        return -1;
    }
    c->fd = socket(ai->ai_family, SOCK_STREAM, 0);
    if (c->fd < 0 || connect(c->fd, ai->ai_addr, ai->ai_addrlen)) {
        if (!quiet)
            perror("kvload: connect");
        if (c->fd >= 0)
            close(c->fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* a server that hangs ends the run instead of holding it forever */
    struct timeval tv = { .tv_sec = REPLY_TIMEOUT_S };
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    c->lo = c->hi = 0;
    return 0;
}

static void send_all(conn_t *c, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(c->fd, p, n);
        if (w <= 0) {
            perror("kvload: write");
            exit(2);
        }
        p += w;
        n -= (size_t)w;
    }
}

static void fill(conn_t *c)
{
    if (c->lo == c->hi)
        c->lo = c->hi = 0;
    if (c->hi == sizeof c->buf) {
        memmove(c->buf, c->buf + c->lo, c->hi - c->lo);
        c->hi -= c->lo;
        c->lo = 0;
    }
    ssize_t r = read(c->fd, c->buf + c->hi, sizeof c->buf - c->hi);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        fprintf(stderr, "kvload: no reply from the server within %d s\n", REPLY_TIMEOUT_S);
        exit(2);
    }
    if (r <= 0) {
        fprintf(stderr, "kvload: the server closed the connection\n");
        exit(2);
    }
    c->hi += (size_t)r;
}

/* One reply line without its \r\n, into line (NUL-terminated). */
static void read_line(conn_t *c, char *line, size_t max)
{
    for (;;) {
        char *nl = memchr(c->buf + c->lo, '\n', c->hi - c->lo);
        if (nl) {
            size_t n = (size_t)(nl - (c->buf + c->lo));
            if (n && nl[-1] == '\r')
                n--;
            if (n >= max)
                n = max - 1;
            memcpy(line, c->buf + c->lo, n);
            line[n] = 0;
            c->lo = (size_t)(nl - c->buf) + 1;
            return;
        }
        fill(c);
    }
}

static void read_bytes(conn_t *c, char *dst, size_t n)
{
    while (n) {
        if (c->lo == c->hi)
            fill(c);
        size_t k = c->hi - c->lo < n ? c->hi - c->lo : n;
        memcpy(dst, c->buf + c->lo, k);
        c->lo += k;
        dst += k;
        n -= k;
    }
}

static void value_of(uint64_t key, char *v)
{
    for (unsigned i = 0; i < vsize; i += 8) {
        uint64_t h = wl_hash(seed ^ 0x6b76, key * 4096 + i / 8);
        memcpy(v + i, &h, vsize - i < 8 ? vsize - i : 8);
    }
}

static size_t key_name(uint64_t key, char *k)
{
    return (size_t)sprintf(k, "k%011llu", (unsigned long long)key);
}

/* "*3\r\n$3\r\nSET\r\n$12\r\nk...\r\n$V\r\n<value>\r\n" into out; its length. */
static size_t fmt_set(uint64_t key, char *out)
{
    char k[32];
    size_t kl = key_name(key, k), n;
    n = (size_t)sprintf(out, "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%u\r\n", kl, k, vsize);
    value_of(key, out + n);
    n += vsize;
    memcpy(out + n, "\r\n", 2);
    return n + 2;
}

static size_t fmt_get(uint64_t key, char *out)
{
    char k[32];
    size_t kl = key_name(key, k);
    return (size_t)sprintf(out, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", kl, k);
}

static void expect_ok(conn_t *c, uint64_t key)
{
    char line[256];
    read_line(c, line, sizeof line);
    if (strcmp(line, "+OK"))
        wl_fail("kv: SET key %llu answered %s", (unsigned long long)key, line);
}

static void expect_value(conn_t *c, uint64_t key, char *got, char *want)
{
    char line[256];
    read_line(c, line, sizeof line);
    if (line[0] != '$' || (unsigned)atoi(line + 1) != vsize)
        wl_fail("kv: GET key %llu answered %s (expected a %u-byte value)", (unsigned long long)key, line, vsize);
    read_bytes(c, got, vsize + 2);
    value_of(key, want);
    if (memcmp(got, want, vsize) || memcmp(got + vsize, "\r\n", 2))
        wl_fail("kv: GET key %llu: the value differs from the one stored", (unsigned long long)key);
}

/* YCSB's zipfian generator (Gray et al., "Quickly generating billion-record
 * synthetic databases"), items 0..n-1, rank 0 the most popular. */
typedef struct { double zetan, theta, alpha, eta, half_pow; uint64_t n; } zipf_t;

static void zipf_init(zipf_t *z, uint64_t n, double th)
{
    double zeta2 = 1 + pow(0.5, th);
    z->zetan = 0;
    for (uint64_t i = 1; i <= n; i++)
        z->zetan += 1 / pow((double)i, th);
    z->n = n;
    z->theta = th;
    z->alpha = 1 / (1 - th);
    z->eta = (1 - pow(2.0 / (double)n, 1 - th)) / (1 - zeta2 / z->zetan);
    z->half_pow = pow(0.5, th);
}

static uint64_t zipf_next(const zipf_t *z, uint64_t *rng)
{
    double u = (double)(gm_rand(rng) >> 11) / 9007199254740992.0, uz = u * z->zetan;
    uint64_t r;
    if (uz < 1)
        r = 0;
    else if (uz < 1 + z->half_pow)
        r = 1;
    else
        r = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1, z->alpha));
    return r < z->n ? r : z->n - 1;
}

/* FNV-1a over the rank's bytes, as YCSB's scrambled zipfian hashes it. */
static uint64_t scramble(uint64_t rank)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < 8; i++) {
        h ^= (rank >> (8 * i)) & 0xff;
        h *= 0x100000001b3ull;
    }
    return h;
}

static zipf_t zipf;

typedef struct {
    unsigned id;
    uint64_t n, *lat;
} worker_t;

static void *run_worker(void *arg)
{
    worker_t *w = arg;
    conn_t *c = wl_alloc(sizeof *c, "a connection");
    char *req = wl_alloc(vsize + 128, "a request"), *got = wl_alloc(vsize + 2, "a reply"),
         *want = wl_alloc(vsize, "a value");
    if (conn_open(c, 0))
        exit(2);
    uint64_t rng = seed * 1000003 + w->id;
    for (uint64_t i = 0; i < w->n; i++) {
        uint64_t key = scramble(zipf_next(&zipf, &rng)) % keys;
        int read = (unsigned)(gm_rand(&rng) % 100) < reads_pct;
        size_t len = read ? fmt_get(key, req) : fmt_set(key, req);
        uint64_t t0 = gm_now_ns();
        send_all(c, req, len);
        if (read)
            expect_value(c, key, got, want);
        else
            expect_ok(c, key);
        w->lat[i] = gm_now_ns() - t0;
    }
    close(c->fd);
    free(c);
    free(req);
    free(got);
    free(want);
    return NULL;
}

#define BATCH 64

/* load (set=1) or verify (set=0) keys [lo, hi) over one connection, BATCH
 * requests in flight. */
static void pipeline(uint64_t lo, uint64_t hi, int set)
{
    conn_t *c = wl_alloc(sizeof *c, "a connection");
    char *out = wl_alloc(BATCH * (vsize + 128), "a batch"), *got = wl_alloc(vsize + 2, "a reply"),
         *want = wl_alloc(vsize, "a value");
    if (conn_open(c, 0))
        exit(2);
    for (uint64_t k = lo; k < hi; k += BATCH) {
        uint64_t end = k + BATCH < hi ? k + BATCH : hi;
        size_t n = 0;
        for (uint64_t j = k; j < end; j++)
            n += set ? fmt_set(j, out + n) : fmt_get(j, out + n);
        send_all(c, out, n);
        for (uint64_t j = k; j < end; j++) {
            if (set)
                expect_ok(c, j);
            else
                expect_value(c, j, got, want);
        }
    }
    close(c->fd);
    free(c);
    free(out);
    free(got);
    free(want);
}

typedef struct { uint64_t lo, hi; int set; } range_t;

static void *pipeline_worker(void *arg)
{
    range_t *r = arg;
    pipeline(r->lo, r->hi, r->set);
    return NULL;
}

static double pipelined(int set)
{
    pthread_t th[64];
    range_t r[64];
    uint64_t t0 = gm_now_ns();
    for (unsigned i = 0; i < conns; i++) {
        r[i] = (range_t){ keys * i / conns, keys * (i + 1) / conns, set };
        pthread_create(&th[i], NULL, pipeline_worker, &r[i]);
    }
    for (unsigned i = 0; i < conns; i++)
        pthread_join(th[i], NULL);
    return (double)(gm_now_ns() - t0) / 1e9;
}

static void simple(const char *cmd, const char *want, int quiet_fail)
{
    conn_t c;
    char line[256];
    if (conn_open(&c, quiet_fail)) {
        if (quiet_fail)
            return;
        exit(2);
    }
    send_all(&c, cmd, strlen(cmd));
    if (want) {
        read_line(&c, line, sizeof line);
        if (strcmp(line, want)) {
            fprintf(stderr, "kvload: %s answered %s\n", want, line);
            exit(2);
        }
    } else {
        char b;
        while (read(c.fd, &b, 1) > 0) /* SHUTDOWN: the server closes */
            ;
    }
    close(c.fd);
}

static int ping_ok(void)
{
    conn_t c;
    char line[64];
    if (conn_open(&c, 1))
        return 0;
    send_all(&c, "PING\r\n", 6);
    read_line(&c, line, sizeof line);
    close(c.fd);
    return !strcmp(line, "+PONG");
}

int main(int argc, char **argv)
{
    int i = 1, rows = 0;
    for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--host"))
            host = v;
        else if (!strcmp(o, "--port"))
            port = atoi(v);
        else if (!strcmp(o, "--keys"))
            keys = strtoull(v, NULL, 10);
        else if (!strcmp(o, "--value"))
            vsize = (unsigned)atoi(v);
        else if (!strcmp(o, "--ops"))
            ops = strtoull(v, NULL, 10);
        else if (!strcmp(o, "--conns"))
            conns = (unsigned)atoi(v);
        else if (!strcmp(o, "--reads"))
            reads_pct = (unsigned)atoi(v);
        else if (!strcmp(o, "--theta"))
            theta = atof(v);
        else if (!strcmp(o, "--seed"))
            seed = strtoull(v, NULL, 10);
        else
            port = 0;
    }
    if (!port || !keys || !vsize || vsize > (64 << 20) || !conns || conns > 64 || theta <= 0 || theta >= 1 ||
        i >= argc) {
        fprintf(stderr, "usage: kvload --port P [--host H] --keys K [--value V] [--ops N] [--conns C] "
                        "[--reads PCT] [--theta T] [--seed S] wait|load|run|verify|shutdown...\n");
        return 2;
    }
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "wait")) {
            uint64_t t0 = gm_now_ns();
            while (!ping_ok()) {
                if (gm_now_ns() - t0 > 10000000000ull) {
                    fprintf(stderr, "kvload: no PONG from %s:%d within 10 s\n", host, port);
                    return 2;
                }
                usleep(20000);
            }
        } else if (!strcmp(argv[i], "load")) {
            double s = pipelined(1);
            gm_row(&rows, "kv_load", keys, "SET/s", (double)keys / s, "seconds", s, "value_bytes", (double)vsize,
                   (const char *)NULL);
        } else if (!strcmp(argv[i], "verify")) {
            double s = pipelined(0);
            gm_row(&rows, "kv_verify", keys, "keys", (double)keys, "seconds", s, "verified", 1.0,
                   (const char *)NULL);
        } else if (!strcmp(argv[i], "run")) {
            zipf_init(&zipf, keys, theta);
            pthread_t th[64];
            worker_t w[64];
            uint64_t *lat = wl_alloc(ops * sizeof *lat, "latencies"), at = 0;
            uint64_t t0 = gm_now_ns();
            for (unsigned j = 0; j < conns; j++) {
                uint64_t n = ops * (j + 1) / conns - ops * j / conns;
                w[j] = (worker_t){ j, n, lat + at };
                at += n;
                pthread_create(&th[j], NULL, run_worker, &w[j]);
            }
            for (unsigned j = 0; j < conns; j++)
                pthread_join(th[j], NULL);
            double s = (double)(gm_now_ns() - t0) / 1e9;
            gm_pct_t p = gm_pct(lat, ops);
            gm_row(&rows, "kv", keys, "ops/s", (double)ops / s, "p50", p.p50, "p99", p.p99, "mean", p.mean,
                   "seconds", s, "ops", (double)ops, "conns", (double)conns, "reads", (double)reads_pct,
                   "theta", theta, "value_bytes", (double)vsize, "verified", 1.0, (const char *)NULL);
            free(lat);
        } else if (!strcmp(argv[i], "shutdown")) {
            simple("SHUTDOWN NOSAVE\r\n", NULL, 1);
        } else {
            fprintf(stderr, "kvload: unknown command %s\n", argv[i]);
            return 2;
        }
    }
    printf("{\"done\":%d}\n", rows);
    return 0;
}
