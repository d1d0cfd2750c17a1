/* The remote store's tests start real memory servers (`netvm memd`), one
 * process each, with a credential file of their own, learn each one's
 * address from its ready pipe, and ask each for its state (NV_GM_STAT)
 * as an observer. */
#ifndef NV_TESTS_GS_SERVERS_H
#define NV_TESTS_GS_SERVERS_H

#define _GNU_SOURCE
#include "check.h"
#include "gmem/proto.h"
#include "gmem/store.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

struct gs_server {
    pid_t pid;
    char  addr[64];
    int   peer;   /* the observer connection, -1 if none */
};

static const char *gs_netvm;      /* the netvm tool (argv) */
static int gs_no_direct;          /* gs_start: memd --no-direct */
/* every server started, so that a failing test leaves none behind */
static pid_t gs_pids[16];
static int   gs_npids;

static void gs_kill_all(void)
{
    for (int i = 0; i < gs_npids; i++)
        if (gs_pids[i] > 0) {
            kill(gs_pids[i], SIGCONT);
            kill(gs_pids[i], SIGKILL);
        }
}
static char gs_cred_path[256];
static const char gs_cred[] = "gstore-test-credential-0123456789";

static void gs_write_cred(void)
{
    snprintf(gs_cred_path, sizeof gs_cred_path, "/tmp/gstore-cred-%d", (int)getpid());
    int fd = open(gs_cred_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, gs_cred, strlen(gs_cred)) == (ssize_t)strlen(gs_cred));
    close(fd);
}

/* Start a memd with pool size and drain deadline; its address in s->addr. */
static void gs_start(struct gs_server *s, const char *size, const char *drain_ms)
{
    int ready[2];
    CHECK(pipe(ready) == 0);
    char rfd[16];
    snprintf(rfd, sizeof rfd, "%d", ready[1]);
    char *argv[] = { (char *)gs_netvm, "memd", "--listen", "tcp:127.0.0.1:0", "--size", (char *)size,
                     "--credential-file", gs_cred_path, "--ready-fd", rfd, "--drain-ms", (char *)drain_ms,
                     gs_no_direct ? "--no-direct" : NULL, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addclose(&fa, ready[0]);
    CHECK(posix_spawn(&s->pid, gs_netvm, &fa, NULL, argv, environ) == 0);
    if (!gs_npids)
        atexit(gs_kill_all);
    if (gs_npids < 16)
        gs_pids[gs_npids++] = s->pid;
    posix_spawn_file_actions_destroy(&fa);
    close(ready[1]);
    size_t n = 0;
    for (;;) {
        ssize_t k = read(ready[0], s->addr + n, sizeof s->addr - 1 - n);
        CHECK(k > 0);
        n += (size_t)k;
        s->addr[n] = 0;
        char *nl = strchr(s->addr, '\n');
        if (nl) {
            *nl = 0;
            break;
        }
    }
    close(ready[0]);
    s->peer = -1;
}

static void gs_signal(struct gs_server *s, int sig) { CHECK(kill(s->pid, sig) == 0); }

static void gs_reap(struct gs_server *s)
{
    int status;
    CHECK(waitpid(s->pid, &status, 0) == s->pid);
    for (int i = 0; i < gs_npids; i++)
        if (gs_pids[i] == s->pid)
            gs_pids[i] = -1;
    s->pid = -1;
}

static void gs_stop(struct gs_server *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGCONT);
        kill(s->pid, SIGKILL);
        gs_reap(s);
    }
}

/* The server's state, asked as an observer (a connection of our own). */
static void gs_stat(netvm_ctx_t *ctx, struct gs_server *s, struct nv_gm_stat *st)
{
    if (s->peer < 0) {
        CHECK_OK(netvm_connect(ctx, s->addr, gs_cred, strlen(gs_cred), 5000, &s->peer));
        uint64_t a[3] = { NV_GM_VERSION, NV_GM_ROLE_OBSERVER, 0 };
        CHECK_OK(nv_rpc_svc_call(ctx, s->peer, nv_gm_k(NV_GM_HELLO), a, 3, NULL, 0, NULL, 0, 5000, NULL));
    }
    CHECK_OK(nv_rpc_svc_call(ctx, s->peer, nv_gm_k(NV_GM_STAT), NULL, 0, NULL, 0, st, sizeof *st, 5000, NULL));
}

/* A page's content: its number and a round, so a stale version shows. */
static void gs_fill(void *buf, uint64_t page, uint64_t round)
{
    uint64_t *w = buf;
    for (unsigned i = 0; i < NV_GM_PAGE / 8; i++)
        w[i] = (page * 0x9e3779b97f4a7c15ull) ^ (round << 48) ^ i;
}

static int gs_check(const void *buf, uint64_t page, uint64_t round)
{
    const uint64_t *w = buf;
    for (unsigned i = 0; i < NV_GM_PAGE / 8; i++)
        if (w[i] != ((page * 0x9e3779b97f4a7c15ull) ^ (round << 48) ^ i))
            return 0;
    return 1;
}

#endif
