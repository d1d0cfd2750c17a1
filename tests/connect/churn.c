/* Churn: a service (this process, started without the launcher) and a
 * stream of clients (this program again, each a job of one) that connect,
 * do one operation and leave: most by netvm_disconnect, every fifth
 * killed (SIGKILL) once connected. After it the service's open file
 * descriptors are what they were after a warm-up, and its heap within a
 * small tolerance; every client's operation landed; the service saw each
 * come up, and leave with NETVM_OK or, killed, NETVM_ERR_PEER.
 *
 *   connect_churn N [WARMUP]          the service; prints the figures
 *   connect_churn --client ADDR I K   a client (I: its number, K: 1 = wait
 *                                     to be killed)
 *
 * Each client connects twice (its first connection leaves by
 * netvm_disconnect). The program prints the connect latency the clients
 * measured (netvm_connect call to return: the tcp handshake, and on one
 * machine the move to shm; NETVM_LINKS=tcp keeps it on tcp), median and
 * p99 over the N clients after the warm-up, for a process's first
 * connection (which opens the tcp link; libcrypto started in netvm_init)
 * and its second. Clients run one at
 * a time: latency without contention. */
#define _GNU_SOURCE
#include "check.h"
#include "cpeer.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CRED "churn-credential-0123456789abcdef"
#define HEAP_SLACK (16u << 10)   /* bytes the heap may differ by after the churn */

/* One connection: its latency (ns), and one operation through it. */
static long long connect_once(netvm_ctx_t *c, const char *addr, int i, int *peer, netvm_rseg_t **r)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    netvm_status_t st = netvm_connect(c, addr, CRED, strlen(CRED), 60000, peer);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK_OK(st);
    CHECK_OK(netvm_import(c, *peer, "churn", r));
    CHECK_OK(netvm_atomic(c, *r, 0, NETVM_AOP_ADD, 1, 0, NULL));
    uint64_t me = (uint64_t)i;
    CHECK_OK(netvm_put(c, *r, 8 + 8 * ((size_t)i % 1024), &me, 8, 0));
    return (long long)(t1.tv_sec - t0.tv_sec) * 1000000000ll + (t1.tv_nsec - t0.tv_nsec);
}

/* Connects twice: the first connection of a process opens its tcp link,
 * the second does not; both are reported. */
static int client(const char *addr, int i, int wait_kill)
{
    netvm_ctx_t *c;
    CHECK_OK(netvm_init(&c, NULL));
    check_rank = i;
    int peer;
    netvm_rseg_t *r;
    long long cold = connect_once(c, addr, i, &peer, &r);
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_disconnect(c, peer));
    long long warm = connect_once(c, addr, i, &peer, &r);
    printf("LAT %lld %lld\n", cold, warm);
    fflush(stdout);
    if (wait_kill) {
        char ch;
        while (read(0, &ch, 1) != 0)
            ;   /* until killed (or the service is gone) */
        return 1;
    }
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_disconnect(c, peer));
    CHECK_OK(netvm_finalize(c));
    return 0;
}

static netvm_ctx_t *ctx;
static int ups, downs_ok, downs_err;

static void count(const netvm_event_t *ev, int n)
{
    for (int i = 0; i < n; i++) {
        if (ev[i].type == NETVM_EV_PEER_UP)
            ups++;
        else if (ev[i].type == NETVM_EV_PEER_DOWN && ev[i].status == NETVM_OK)
            downs_ok++;
        else if (ev[i].type == NETVM_EV_PEER_DOWN)
            downs_err++;
        else
            FAILF("an event of type %u", ev[i].type);
    }
}

/* Take the events that wait; then wait (a hang is a failure: 120 s) until
 * `peers` peers came up and left. */
static void take_events(int peers)
{
    double t0 = now_s();
    for (;;) {
        netvm_event_t ev[32];
        int n;
        while ((n = netvm_evq_poll(ctx, ev, 32)) > 0)
            count(ev, n);
        if (downs_ok + downs_err >= peers && ups >= peers)
            return;
        if (now_s() - t0 > 120)
            FAILF("%d peers came up, %d left: waited for %d", ups, downs_ok + downs_err, peers);
        netvm_status_t st = netvm_evq_wait(ctx, ev, 32, &n, 1000);
        if (st == NETVM_OK)
            count(ev, n);
        else
            CHECK_ST(st, NETVM_ERR_TIMEOUT);
    }
}

/* Peers that left are freed at the start of the next progress pass, which
 * the progress thread may be holding: pass until the fds are back to
 * `want` (or 10,000 passes: then they are not coming back). */
static int settle(int want)
{
    int fds = count_fds();
    for (int i = 0; i < 10000 && fds != want; i++) {
        netvm_progress(ctx);
        sched_yield();
        fds = count_fds();
    }
    return fds;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, res = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &res) != 2)
            res = 0;
        fclose(f);
    }
    return res * (sysconf(_SC_PAGESIZE) / 1024);
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}

/* Start client i; its connect latencies (ns), cold and warm; killed if it waits to be. */
static void one(const char *self, const char *addr, int i, int kill_it, long long *cold, long long *warm)
{
    int out[2], in[2];
    CHECK(pipe2(out, O_CLOEXEC) == 0 && pipe2(in, O_CLOEXEC) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    char si[16], sk[4];
    snprintf(si, sizeof si, "%d", i);
    snprintf(sk, sizeof sk, "%d", kill_it);
    char *argv[] = { (char *)self, "--client", (char *)addr, si, sk, NULL };
    pid_t pid;
    CHECK(posix_spawn(&pid, self, &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    char buf[128];
    size_t have = 0;
    while (have < sizeof buf - 1 && !memchr(buf, '\n', have)) {
        ssize_t r = read(out[0], buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    buf[have] = 0;
    if (sscanf(buf, "LAT %lld %lld", cold, warm) != 2)
        FAILF("client %d said '%s'", i, buf);
    if (kill_it)
        CHECK(kill(pid, SIGKILL) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    close(in[1]);
    close(out[0]);
    if (kill_it)
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAILF("client %d failed (status %#x)", i, status);
}

static void pct(const char *what, long long *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_ll);
    printf("connect latency, %s: median %.1f us, p99 %.1f us, max %.1f us\n", what, v[n / 2] / 1e3,
           v[(size_t)((n - 1) * 0.99)] / 1e3, v[n - 1] / 1e3);
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--client"))
        return client(argv[2], atoi(argv[3]), atoi(argv[4]));
    if (argc < 2)
        FAILF("usage: connect_churn N [WARMUP]");
    int n = atoi(argv[1]), warm = argc > 2 ? atoi(argv[2]) : 20;
    CHECK(n > 0 && warm >= 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* the clients run this program: its own path, whatever the cwd */
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(sl > 0);
    self[sl] = 0;

    CHECK_OK(netvm_init(&ctx, NULL));
    void *mem;
    netvm_seg_t *seg;
    CHECK_OK(netvm_alloc_shared(ctx, 8 + 8 * 1024, NETVM_RWA, "churn", &mem, &seg));
    uint64_t *w = mem;
    netvm_listener_t *l;
    netvm_listen_opts_t o = { .credential = CRED, .credential_len = strlen(CRED) };
    CHECK_OK(netvm_listen(ctx, "tcp:127.0.0.1:0", &o, &l));
    const char *addr = netvm_listener_addr(l);
    int fd_idle = count_fds();   /* no peer yet */

    long long *cold = calloc((size_t)n + (size_t)warm, sizeof *cold);
    long long *hot = calloc((size_t)n + (size_t)warm, sizeof *hot);
    CHECK(cold && hot);
    int killed = 0;
    for (int i = 0; i < warm; i++) {
        killed += i % 5 == 4;
        one(self, addr, i, i % 5 == 4, &cold[n + i], &hot[n + i]);
        take_events(0);
    }
    take_events(2 * warm);
    int fd0 = settle(fd_idle);
    size_t heap0 = heap_in_use();
    long rss0 = rss_kib();

    for (int i = 0; i < n; i++) {
        int k = (warm + i) % 5 == 4;
        killed += k;
        one(self, addr, warm + i, k, &cold[i], &hot[i]);
        take_events(0);
    }
    take_events(2 * (warm + n));
    int fd1 = settle(fd_idle);
    size_t heap1 = heap_in_use();
    long rss1 = rss_kib();

    const char *links = getenv("NETVM_LINKS");
    printf("churn: %d clients after %d of warm-up (%d killed), two connections each, link %s\n", n, warm,
           killed, links && !strcmp(links, "tcp") ? "tcp" : "shm (moved after the tcp handshake)");
    pct("a process's first (opens the tcp link)", cold, n);
    pct("its second", hot, n);
    free(cold);
    free(hot);
    printf("open fds: %d before any client, %d after warm-up, %d after\n", fd_idle, fd0, fd1);
    printf("heap in use: %zu bytes after warm-up, %zu after (%+lld)\n", heap0, heap1,
           (long long)heap1 - (long long)heap0);
    printf("rss: %ld KiB after warm-up, %ld KiB after\n", rss0, rss1);

    CHECK(w[0] == 2 * (uint64_t)(warm + n));   /* every connection's operation landed */
    CHECK(ups == 2 * (warm + n));
    CHECK(downs_err == killed && downs_ok == 2 * (warm + n) - killed);
    CHECK(netvm_listener_peers(l) == 0);
    CHECK(fd0 == fd_idle && fd1 == fd_idle);
    CHECK(heap1 <= heap0 + HEAP_SLACK);
    CHECK_OK(netvm_finalize(ctx));
    printf("ok\n");
    return 0;
}
