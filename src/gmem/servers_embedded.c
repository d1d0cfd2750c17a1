/* Embedded memory servers: with none named, the client starts its own
 * `netvm memd` processes on loopback, each with a fresh credential handed
 * over a pipe (never the environment or the command line, which other
 * users can read), and learns each one's address from a second pipe. */
#define _GNU_SOURCE
#include "gmem/servers.h"
#include "util/config.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* How long a starting server may take to say its address: far above the
 * few milliseconds it takes, it only catches one that hangs. */
#define NV_GM_EMBEDDED_READY_MS 20000

static const char *netvm_binary(void)
{
    const char *env = nv_config_str("NETVM_MEMD");
    if (env && *env)
        return access(env, X_OK) == 0 ? env : NULL;
#ifdef NV_GM_NETVM_INSTALLED
    if (access(NV_GM_NETVM_INSTALLED, X_OK) == 0)
        return NV_GM_NETVM_INSTALLED;
#endif
#ifdef NV_GM_NETVM_BUILD
    if (access(NV_GM_NETVM_BUILD, X_OK) == 0)
        return NV_GM_NETVM_BUILD;
#endif
    return NULL;
}

/* Read one line (the address) from fd within the bounded wait. */
static int read_ready(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = NV_GM_EMBEDDED_READY_MS - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            return -1;
        struct pollfd p = { .fd = fd, .events = POLLIN };
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        n += (size_t)k;
        buf[n] = 0;
        char *nl = strchr(buf, '\n');
        if (nl) {
            *nl = 0;
            return 0;
        }
        if (n == cap - 1)
            return -1;
    }
}

netvm_status_t nv_gm_memd_spawn(const char *bin, const char *size, const void *cred, size_t cred_len, char *addr,
                                pid_t *pid)
{
    int cp[2], ready[2];
    if (pipe2(cp, O_CLOEXEC) != 0)
        return NETVM_ERR_SYS;
    if (pipe2(ready, O_CLOEXEC) != 0) {
        close(cp[0]);
        close(cp[1]);
        return NETVM_ERR_SYS;
    }
    /* the child's ends at numbers none of the four pipes uses, so one dup2
     * cannot overwrite another's source */
    int hi = cp[0];
    if (cp[1] > hi) hi = cp[1];
    if (ready[0] > hi) hi = ready[0];
    if (ready[1] > hi) hi = ready[1];
    int cfd = hi + 1, rfd = hi + 2;
    char cfd_s[16], rfd_s[16];
    snprintf(cfd_s, sizeof cfd_s, "%d", cfd);
    snprintf(rfd_s, sizeof rfd_s, "%d", rfd);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, cp[0], cfd);
    posix_spawn_file_actions_adddup2(&fa, ready[1], rfd);
    char *argv[] = { (char *)bin, "memd", "--listen", "tcp:127.0.0.1:0", "--size", (char *)size,
                     "--credential-fd", cfd_s, "--ready-fd", rfd_s, "--embedded", NULL };
    int err = posix_spawn(pid, bin, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(cp[0]);
    close(ready[1]);
    netvm_status_t st = NETVM_OK;
    if (err) {
        nv_error("gmem: cannot start the embedded memory server %s memd: %s", bin, strerror(err));
        st = NETVM_ERR_SYS;
    } else if (write(cp[1], cred, cred_len) != (ssize_t)cred_len) {
        nv_error("gmem: cannot hand the embedded memory server its credential: %s", strerror(errno));
        st = NETVM_ERR_SYS;
    }
    close(cp[1]);
    if (st == NETVM_OK && read_ready(ready[0], addr, NV_GM_ADDR_MAX) != 0) {
        nv_error("gmem: the embedded memory server (%s memd, pid %d) did not report its address within %d ms",
                 bin, (int)*pid, NV_GM_EMBEDDED_READY_MS);
        st = NETVM_ERR_PEER;
    }
    close(ready[0]);
    if (st != NETVM_OK && !err) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
    }
    return st;
}

netvm_status_t nv_gm_embedded_start(struct nv_gm_servers *g, int n)
{
    const char *bin = netvm_binary();
    if (!bin) {
        nv_error("gmem: no memory servers are named (NETVM_GMEM_SERVERS) and no netvm binary was found to start "
                 "embedded ones: set NETVM_MEMD to the netvm tool, install netvm, or name servers");
        return NETVM_ERR_PEER;
    }
    const char *size = nv_config_str("NETVM_GMEM_EMBEDDED_SIZE");
    long long bytes;
    if (!size || nv_parse_size(size, &bytes) != 0 || bytes < NV_GM_PAGE) {
        nv_error("gmem: NETVM_GMEM_EMBEDDED_SIZE=%s is not a size of at least a page", size ? size : "");
        return NETVM_ERR_INVAL;
    }
    for (int i = 0; i < n; i++) {
        char addr[NV_GM_ADDR_MAX];
        pid_t pid;
        netvm_status_t st = nv_gm_memd_spawn(bin, size, g->cred, g->cred_len, addr, &pid);
        if (st != NETVM_OK)
            return st;
        g->embedded[g->nembedded++] = pid;
        int idx;
        if ((st = nv_gm_srv_connect(g, addr, &idx)) != NETVM_OK)
            return st;
        nv_info("gmem: started embedded memory server %d (pid %d) at %s", i, (int)pid, addr);
    }
    return NETVM_OK;
}

void nv_gm_embedded_stop(struct nv_gm_servers *g)
{
    for (int i = 0; i < g->nembedded; i++)
        kill(g->embedded[i], SIGTERM);
    for (int i = 0; i < g->nembedded; i++)
        while (waitpid(g->embedded[i], NULL, 0) < 0 && errno == EINTR) {
        }
    g->nembedded = 0;
}
