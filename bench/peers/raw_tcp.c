/* netvm_peer_tcp: the bare TCP baselines netvm's tcp link is compared
 * against: two forked processes, one loopback TCP connection (TCP_NODELAY),
 * the same methods as `netvm bench` (docs/performance.md):
 *   put_lat   ping-pong: A sends s bytes, B receives them and sends s bytes
 *             back; one-way latency = round trip / 2
 *   get_lat   A sends an 8-byte request (--req-size), B answers with s bytes;
 *             time per op
 *   put_bw    windows of 32 messages of s bytes, then B sends a 1-byte ack
 *   get_bw    A asks for a window of 32 x s bytes, B sends them
 *   put_rate  windows of 64 messages of 8 bytes (one send(2) each), then an ack
 * --wait poll receives (and sends) with MSG_DONTWAIT in a busy loop, --wait
 * sleep blocks in recv(2) (send(2)): the two ways a process can wait,
 * measured separately.
 * Each measurement doubles its count until a batch lasts min-ms/8 (the
 * warm-up), then times one batch sized to last --min-ms.
 * Output, one JSON object per line: {"metric","size","unit","value","iters",
 * "seconds","wait"}, then {"done":ROWS}. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { OP_PUT_LAT, OP_GET_LAT, OP_PUT_BW, OP_GET_BW, OP_PUT_RATE, OP_COUNT, OP_QUIT = 100 };
static const struct { const char *name, *unit; unsigned window; int bw; } ops[OP_COUNT] = {
    [OP_PUT_LAT]  = { "put_lat",  "us",   1,  0 },
    [OP_GET_LAT]  = { "get_lat",  "us",   1,  0 },
    [OP_PUT_BW]   = { "put_bw",   "MB/s", 32, 1 },
    [OP_GET_BW]   = { "get_bw",   "MB/s", 32, 1 },
    [OP_PUT_RATE] = { "put_rate", "Mops", 64, 0 },
};

/* req: bytes of a get's request (the 8 of netvm's get, the 32 of a gmem page request) */
struct cmd { uint32_t op, req; uint64_t size, count; };

#define MAX_REQ 256
static int polling = 1;
static unsigned req_size = 8;
static uint8_t *buf;

static void die(const char *what)
{
    fprintf(stderr, "netvm_peer_tcp: %s: %s\n", what, strerror(errno));
    exit(1);
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void send_all(int fd, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL | (polling ? MSG_DONTWAIT : 0));
        if (w < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (w <= 0)
            die("send");
        b += w;
        n -= (size_t)w;
    }
}

static void recv_all(int fd, void *p, size_t n)
{
    uint8_t *b = p;
    while (n) {
        ssize_t r = recv(fd, b, n, polling ? MSG_DONTWAIT : 0);
        if (r > 0) {
            b += r;
            n -= (size_t)r;
        } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            continue;
        } else if (r == 0) {
            fprintf(stderr, "netvm_peer_tcp: recv: the other process closed the connection\n");
            exit(1);
        } else {
            die("recv");
        }
    }
}

static void serve(int fd)
{
    uint8_t ack = 1, req[MAX_REQ];
    for (;;) {
        struct cmd c;
        recv_all(fd, &c, sizeof c);
        if (c.op == OP_QUIT)
            return;
        for (uint64_t i = 0; i < c.count; i++) {
            switch (c.op) {
            case OP_PUT_LAT: recv_all(fd, buf, c.size); send_all(fd, buf, c.size); break;
            case OP_GET_LAT: recv_all(fd, req, c.req); send_all(fd, buf, c.size); break;
            case OP_PUT_BW:
                for (unsigned k = 0; k < 32; k++)
                    recv_all(fd, buf, c.size);
                send_all(fd, &ack, 1);
                break;
            case OP_GET_BW:
                recv_all(fd, req, c.req);
                for (unsigned k = 0; k < 32; k++)
                    send_all(fd, buf, c.size);
                break;
            case OP_PUT_RATE:
                for (unsigned k = 0; k < 64; k++)
                    recv_all(fd, buf, 8);
                send_all(fd, &ack, 1);
                break;
            }
        }
    }
}

/* One batch of count iterations; returns its seconds. */
static double batch(int fd, unsigned op, size_t size, uint64_t count)
{
    struct cmd c = { .op = op, .req = req_size, .size = size, .count = count };
    uint8_t ack, req[MAX_REQ] = { 0 };
    send_all(fd, &c, sizeof c);
    double t0 = now();
    for (uint64_t i = 0; i < count; i++) {
        switch (op) {
        case OP_PUT_LAT: send_all(fd, buf, size); recv_all(fd, buf, size); break;
        case OP_GET_LAT: send_all(fd, req, req_size); recv_all(fd, buf, size); break;
        case OP_PUT_BW:
            for (unsigned k = 0; k < 32; k++)
                send_all(fd, buf, size);
            recv_all(fd, &ack, 1);
            break;
        case OP_GET_BW:
            send_all(fd, req, req_size);
            for (unsigned k = 0; k < 32; k++)
                recv_all(fd, buf, size);
            break;
        case OP_PUT_RATE:
            for (unsigned k = 0; k < 64; k++)
                send_all(fd, buf, 8);
            recv_all(fd, &ack, 1);
            break;
        }
    }
    return now() - t0;
}

static int measure(int fd, unsigned op, size_t size, double min_s)
{
    uint64_t n = 1;
    double t;
    batch(fd, op, size, 4);   /* cold caches and sockets out of the way */
    while ((t = batch(fd, op, size, n)) < min_s / 8 && n < (1ull << 40))
        n *= 2;
    n = (uint64_t)((double)n * min_s / (t > 0 ? t : 1e-9)) + 1;
    t = batch(fd, op, size, n);
    double v;
    if (op == OP_PUT_LAT)
        v = t / (double)n / 2 * 1e6;
    else if (op == OP_GET_LAT)
        v = t / (double)n * 1e6;
    else if (ops[op].bw)
        v = (double)size * 32 * (double)n / t / 1e6;
    else
        v = 64.0 * (double)n / t / 1e6;
    printf("{\"metric\":\"%s\",\"size\":%zu,\"unit\":\"%s\",\"value\":%.9g,\"iters\":%llu,\"seconds\":%.6f,"
           "\"wait\":\"%s\",\"req\":%u}\n", ops[op].name, op == OP_PUT_RATE ? (size_t)8 : size, ops[op].unit, v,
           (unsigned long long)n, t, polling ? "poll" : "sleep", req_size);
    fflush(stdout);
    return 1;
}

#define MAX_SIZE (4u << 20)

static void usage(void)
{
    fprintf(stderr, "usage: netvm_peer_tcp [--wait poll|sleep] [--min-ms MS] [--lat-sizes L] "
                    "[--bw-sizes L] [--metrics put_lat,get_lat,put_bw,get_bw,put_rate] [--req-size N]\n"
                    "sizes: 8 to %u bytes; --req-size: a get's request, 1 to %u bytes (8)\n", MAX_SIZE, MAX_REQ);
    exit(2);
}

static size_t parse_sizes(const char *arg, size_t *out, size_t max)
{
    size_t n = 0;
    char *copy = strdup(arg), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *end;
        unsigned long long v = strtoull(t, &end, 10);
        if (*end || v < 8 || v > MAX_SIZE || n == max)
            usage();
        out[n++] = (size_t)v;
    }
    free(copy);
    return n;
}

/* Is name one of the comma-separated words of list? */
static int listed(const char *list, const char *name)
{
    size_t l = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += l)
        if ((p == list || p[-1] == ',') && (p[l] == 0 || p[l] == ','))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    size_t lat[16] = { 8, 64, 512, 4096, 32768, 262144, 1048576, 4194304 }, nlat = 8;
    size_t bw[8] = { 65536, 1048576, 4194304 }, nbw = 3;
    double min_ms = 50;
    const char *metrics = "put_lat,get_lat,put_bw,get_bw,put_rate";
    if (argc % 2 == 0)
        usage();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--wait")) {
            if (strcmp(argv[i + 1], "poll") && strcmp(argv[i + 1], "sleep"))
                usage();
            polling = strcmp(argv[i + 1], "sleep") != 0;
        } else if (!strcmp(argv[i], "--min-ms")) {
            min_ms = atof(argv[i + 1]);
            if (!(min_ms > 0))
                usage();
        }
        else if (!strcmp(argv[i], "--lat-sizes"))
            nlat = parse_sizes(argv[i + 1], lat, 16);
        else if (!strcmp(argv[i], "--bw-sizes"))
            nbw = parse_sizes(argv[i + 1], bw, 8);
        else if (!strcmp(argv[i], "--metrics"))
            metrics = argv[i + 1];
        else if (!strcmp(argv[i], "--req-size")) {
            req_size = (unsigned)atoi(argv[i + 1]);
            if (req_size < 1 || req_size > MAX_REQ)
                usage();
        }
        else
            usage();
    }
    buf = malloc(MAX_SIZE);
    if (!buf)
        die("malloc");
    memset(buf, 1, MAX_SIZE);
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &al))
        die("listen");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a))
            die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        serve(fd);
        _exit(0);
    }
    int fd = accept(ls, NULL, NULL);
    if (fd < 0)
        die("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int rows = 0;
    double min_s = min_ms / 1000;
    for (unsigned op = 0; op < OP_COUNT; op++) {
        if (!listed(metrics, ops[op].name))
            continue;
        if (op == OP_PUT_RATE) {
            rows += measure(fd, op, 8, min_s);
            continue;
        }
        size_t *sizes = ops[op].bw ? bw : lat, n = ops[op].bw ? nbw : nlat;
        for (size_t i = 0; i < n; i++)
            rows += measure(fd, op, sizes[i], min_s);
    }
    struct cmd q = { .op = OP_QUIT };
    send_all(fd, &q, sizeof q);
    int status = 0;
    waitpid(pid, &status, 0);
    printf("{\"done\":%d}\n", rows);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
