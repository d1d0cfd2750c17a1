/* netvm_peer_ucx_signal: UCX's put-with-signal, the peer of netvm's putsig_lat
 * in bench/compare.  UCP (UCX 1.13) has no put-with-signal operation; an
 * application composes it from three steps, as OpenSHMEM 1.4 programs do:
 *
 *   ucp_put_nbx(8 B data) ; ucp_worker_fence ; ucp_put_nbx(8 B flag word)
 *
 * and the target polls the flag word (calling ucp_worker_progress while it
 * polls, which the tcp transport needs: there every put is an active message
 * the target's worker applies).
 *
 *   putsig_lat  ping-pong: A does the three steps into B's buffer (data at
 *               offset 0, flag at offset 8, the flag = the iteration's value),
 *               waits for the local completion of both puts (the source words
 *               are reused, as netvm_put_signal_nb returns at local
 *               completion), then polls its own flag for B's answer; B does
 *               the same the other way; one-way = round trip / 2.
 *
 * Two processes on this machine: the parent forks, each creates its own UCP
 * context and worker (the transports come from UCX_TLS: sm,self for shared
 * memory, tcp for loopback TCP), maps an 8 KiB buffer with ucp_mem_map
 * (UCP_MEM_MAP_ALLOCATE, so that shared-memory transports can map it), and
 * the two exchange worker address, buffer address and packed rkey over a
 * socketpair.  Commands and acknowledgements go over the same socketpair;
 * a process waiting on it keeps progressing its worker (over tcp the other
 * process's last put may need it to complete).
 * Each measurement doubles its count until a batch lasts --min-ms / 8 (the
 * warm-up), then times one batch sized to last --min-ms.
 *
 * Output, one JSON object per line, as the other peers of bench/compare:
 *   {"metric":"putsig_lat","size":8,"unit":"us","value":V,"iters":N,"seconds":T}
 * then {"done":ROWS}.  Errors go to stderr with exit status 1.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <errno.h>
#include <poll.h>
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

#define BUF_LEN 8192
#define FLAG_OFF 8

struct cmd {
    uint64_t op;      /* 1: ping-pong, 0: quit */
    uint64_t iters;
    uint64_t seq;     /* value of the iteration before the first */
};

static int sock;
static ucp_context_h context;
static ucp_worker_h worker;
static ucp_ep_h ep;
static ucp_rkey_h rkey;
static ucp_mem_h memh;
static volatile uint64_t *buf;      /* mine: the peer puts into it */
static uint64_t remote_addr;        /* the peer's buffer */

static void die(const char *what)
{
    fprintf(stderr, "netvm_peer_ucx_signal: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void die_ucs(const char *what, ucs_status_t st)
{
    fprintf(stderr, "netvm_peer_ucx_signal: %s: %s\n", what, ucs_status_string(st));
    exit(1);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void xwrite(const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t r = write(sock, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("socket write");
        c += r;
        n -= (size_t)r;
    }
}

static void xread(void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = read(sock, c, n);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) errno = EPIPE;
        if (r <= 0) die("socket read");
        c += r;
        n -= (size_t)r;
    }
}

/* Read from the socket while progressing the worker: over tcp a put's local
 * completion can need the other side's worker, so neither process may block
 * in read(2) while the other still waits for one of its requests. */
static void xread_progress(void *p, size_t n)
{
    char *c = p;
    while (n) {
        struct pollfd pfd = { .fd = sock, .events = POLLIN };
        int r = poll(&pfd, 1, 0);
        if (r < 0 && errno != EINTR) die("poll");
        if (r <= 0) {
            ucp_worker_progress(worker);
            continue;
        }
        ssize_t k = read(sock, c, n);
        if (k < 0 && errno == EINTR) continue;
        if (k == 0) errno = EPIPE;
        if (k <= 0) die("socket read");
        c += k;
        n -= (size_t)k;
    }
}

static void send_blob(const void *p, size_t n)
{
    uint64_t len = n;
    xwrite(&len, sizeof len);
    xwrite(p, n);
}

static void *recv_blob(void)
{
    uint64_t len;
    xread(&len, sizeof len);
    void *p = malloc(len ? len : 1);
    if (!p) die("malloc");
    xread(p, len);
    return p;
}

/* Wait for a request (or an immediate status) to complete. */
static void wait_req(ucs_status_ptr_t r, const char *what)
{
    if (r == NULL)
        return;
    if (UCS_PTR_IS_ERR(r))
        die_ucs(what, UCS_PTR_STATUS(r));
    ucs_status_t st;
    while ((st = ucp_request_check_status(r)) == UCS_INPROGRESS)
        ucp_worker_progress(worker);
    ucp_request_free(r);
    if (st != UCS_OK)
        die_ucs(what, st);
}

static void setup(void)
{
    ucp_params_t params = {
        .field_mask = UCP_PARAM_FIELD_FEATURES,
        .features = UCP_FEATURE_RMA,
    };
    ucp_config_t *config;
    ucs_status_t st = ucp_config_read(NULL, NULL, &config);
    if (st != UCS_OK) die_ucs("ucp_config_read", st);
    st = ucp_init(&params, config, &context);
    ucp_config_release(config);
    if (st != UCS_OK) die_ucs("ucp_init", st);
    ucp_worker_params_t wp = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SINGLE,
    };
    if ((st = ucp_worker_create(context, &wp, &worker)) != UCS_OK)
        die_ucs("ucp_worker_create", st);

    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                      UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .address = NULL,
        .length = BUF_LEN,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    if ((st = ucp_mem_map(context, &mp, &memh)) != UCS_OK)
        die_ucs("ucp_mem_map", st);
    ucp_mem_attr_t ma = { .field_mask = UCP_MEM_ATTR_FIELD_ADDRESS };
    if ((st = ucp_mem_query(memh, &ma)) != UCS_OK)
        die_ucs("ucp_mem_query", st);
    buf = ma.address;
    memset((void *)buf, 0, BUF_LEN);

    ucp_address_t *addr;
    size_t addr_len, rkey_len;
    void *rkey_buf;
    if ((st = ucp_worker_get_address(worker, &addr, &addr_len)) != UCS_OK)
        die_ucs("ucp_worker_get_address", st);
    if ((st = ucp_rkey_pack(context, memh, &rkey_buf, &rkey_len)) != UCS_OK)
        die_ucs("ucp_rkey_pack", st);
    uint64_t mine = (uint64_t)(uintptr_t)buf;
    send_blob(addr, addr_len);
    send_blob(rkey_buf, rkey_len);
    xwrite(&mine, sizeof mine);
    ucp_address_t *peer_addr = recv_blob();
    void *peer_rkey = recv_blob();
    xread(&remote_addr, sizeof remote_addr);
    ucp_rkey_buffer_release(rkey_buf);
    ucp_worker_release_address(worker, addr);

    ucp_ep_params_t ep_params = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address = peer_addr,
    };
    if ((st = ucp_ep_create(worker, &ep_params, &ep)) != UCS_OK)
        die_ucs("ucp_ep_create", st);
    if ((st = ucp_ep_rkey_unpack(ep, peer_rkey, &rkey)) != UCS_OK)
        die_ucs("ucp_ep_rkey_unpack", st);
    free(peer_addr);
    free(peer_rkey);
    /* wire the endpoint up: both flush at the same time (each progresses
     * the other's connection requests), then meet on the socket */
    ucp_request_param_t rp = { .op_attr_mask = 0 };
    wait_req(ucp_ep_flush_nbx(ep, &rp), "ucp_ep_flush_nbx");
    char c = 1;
    xwrite(&c, 1);
    xread_progress(&c, 1);
}

/* data put, fence, flag put; then wait for both to complete locally */
static void put_signal(uint64_t *data, uint64_t *flag)
{
    ucp_request_param_t rp = { .op_attr_mask = 0 };
    ucs_status_ptr_t r1 = ucp_put_nbx(ep, data, 8, remote_addr, rkey, &rp);
    if (UCS_PTR_IS_ERR(r1)) die_ucs("ucp_put_nbx (data)", UCS_PTR_STATUS(r1));
    ucs_status_t st = ucp_worker_fence(worker);
    if (st != UCS_OK) die_ucs("ucp_worker_fence", st);
    ucs_status_ptr_t r2 = ucp_put_nbx(ep, flag, 8, remote_addr + FLAG_OFF, rkey, &rp);
    wait_req(r1, "ucp_put_nbx (data)");
    wait_req(r2, "ucp_put_nbx (flag)");
}

static void wait_flag(uint64_t v)
{
    volatile uint64_t *flag = buf + FLAG_OFF / 8;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) != v)
        ucp_worker_progress(worker);
    if (buf[0] != v) {
        fprintf(stderr, "netvm_peer_ucx_signal: flag %llu seen before its data (%llu)\n",
                (unsigned long long)v, (unsigned long long)buf[0]);
        exit(1);
    }
}

static void pingpong(const struct cmd *c, int initiator)
{
    uint64_t data, flag;
    for (uint64_t i = 1; i <= c->iters; i++) {
        uint64_t v = c->seq + i;
        if (!initiator)
            wait_flag(v);
        data = flag = v;
        put_signal(&data, &flag);
        if (initiator)
            wait_flag(v);
    }
}

static void serve(void)
{
    for (;;) {
        struct cmd c;
        xread_progress(&c, sizeof c);
        if (c.op == 0)
            return;
        char ack = 1;
        xwrite(&ack, 1);
        pingpong(&c, 0);
        xwrite(&ack, 1);
    }
}

static uint64_t seq_next;

static double batch(uint64_t n)
{
    struct cmd c = { 1, n, seq_next };
    char ack;
    seq_next += n;
    xwrite(&c, sizeof c);
    xread_progress(&ack, 1);
    double t0 = now();
    pingpong(&c, 1);
    double t = now() - t0;
    xread_progress(&ack, 1);
    return t;
}

static void teardown(void)
{
    ucp_request_param_t rp = { .op_attr_mask = 0 };
    wait_req(ucp_ep_flush_nbx(ep, &rp), "ucp_ep_flush_nbx");
    char c = 1;
    xwrite(&c, 1);          /* both flushed: neither needs the other's progress now */
    xread_progress(&c, 1);
    ucp_rkey_destroy(rkey);
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &rp);
    if (r && !UCS_PTR_IS_ERR(r)) {
        while (ucp_request_check_status(r) == UCS_INPROGRESS)
            ucp_worker_progress(worker);
        ucp_request_free(r);
    }
    ucp_mem_unmap(context, memh);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
}

int main(int argc, char **argv)
{
    double min_ms = 50;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--min-ms") && i + 1 < argc) {
            min_ms = atof(argv[++i]);
        } else if (!strcmp(argv[i], "--metrics") && i + 1 < argc) {
            if (strcmp(argv[++i], "putsig_lat")) {
                fprintf(stderr, "netvm_peer_ucx_signal: the only metric is putsig_lat\n");
                return 2;
            }
        } else {
            fprintf(stderr, "usage: netvm_peer_ucx_signal [--min-ms MS] [--metrics putsig_lat]\n"
                            "  (transports from UCX_TLS: sm,self or tcp)\n");
            return 2;
        }
    }
    if (!(min_ms > 0)) {
        fprintf(stderr, "netvm_peer_ucx_signal: --min-ms must be positive\n");
        return 2;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) die("socketpair");
    pid_t parent = getpid(), pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        sock = sv[1];
        close(sv[0]);
        setup();
        serve();
        teardown();
        _exit(0);
    }
    sock = sv[0];
    close(sv[1]);
    setup();

    double min_s = min_ms / 1e3, t;
    uint64_t n = 16;
    batch(16);                           /* first touches */
    while ((t = batch(n)) < min_s / 8 && n < (UINT64_C(1) << 40))
        n *= 2;
    for (int attempt = 0; attempt < 4; attempt++) {
        n = (uint64_t)((double)n * (min_s / (t > 0 ? t : 1e-9)) * 1.05) + 1;
        t = batch(n);
        if (t >= min_s * 0.9) break;
    }
    printf("{\"metric\":\"putsig_lat\",\"size\":8,\"unit\":\"us\",\"value\":%.9g,\"iters\":%llu,"
           "\"seconds\":%.6f}\n", t / (double)n / 2 * 1e6, (unsigned long long)n, t);
    fflush(stdout);
    struct cmd quit = { 0, 0, 0 };
    xwrite(&quit, sizeof quit);
    teardown();
    int status;
    if (waitpid(pid, &status, 0) < 0) die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "netvm_peer_ucx_signal: the other process failed (status %d)\n", status);
        return 1;
    }
    printf("{\"done\":1}\n");
    return 0;
}
