/* A process that polls in a loop (netvm_progress) serves what arrives
 * itself, without its progress thread being woken for it, and once it
 * stops calling netvm the progress thread serves again.
 *
 * Phase 1: rank 0 makes N blocking requests to rank 1, which loops on
 * netvm_progress until its handler has answered N. Rank 1's progress
 * thread ("netvm-progress") must have gone to sleep and woken far fewer
 * times than N: a wake-up per message would mean the senders ring it for
 * what the polling thread takes in anyway (two threads on one ring or
 * socket). On shm the loop counts as a poller of the ring; on tcp it holds
 * the sockets; in both the progress thread only looks once a lease.
 * Phase 2: rank 1 stops calling netvm (it watches a word of its own memory
 * with plain loads and sleeps); rank 0's M further requests and the put
 * that sets the word must still complete: the progress thread takes over
 * after the lease. */
#include "am_test.h"

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#define N 2000
#define M 50
enum { H_ECHO = 1 };

static _Atomic int served;

static int echo(netvm_ctx_t *ctx, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    served++;
    if (msg->has_token)
        CHECK_OK(netvm_am_reply(ctx, &msg->token, NETVM_OK, msg->args, msg->nargs, NULL, 0));
    return NETVM_AM_DONE;
}

/* Context switches of this process's progress thread (voluntary: it went
 * to sleep, which it does after each wake-up). */
static long progress_thread_switches(void)
{
    DIR *d = opendir("/proc/self/task");
    CHECK(d);
    long found = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[64];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        int is_it = fgets(buf, sizeof buf, f) && !strncmp(buf, "netvm-progress", 14);
        fclose(f);
        if (!is_it)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        CHECK(f);
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &found) == 1)
                break;
        fclose(f);
    }
    closedir(d);
    CHECK(found >= 0);
    return found;
}

int main(void)
{
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    CHECK_OK(netvm_am_register(ctx, H_ECHO, echo, NULL));
    static _Atomic uint64_t word __attribute__((aligned(64)));
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, (void *)&word, 8, NETVM_RW, "w", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *peer;
    CHECK_OK(netvm_import(ctx, 1 - rank, "w", &peer));
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        for (uint64_t i = 0; i < N + M; i++) {
            netvm_am_result_t res;
            uint64_t a = i;
            CHECK_OK(netvm_am_request(ctx, 1, H_ECHO, &a, 1, NULL, 0, NULL, 0, &res, NULL));
            CHECK(res.status == NETVM_OK && res.nargs == 1 && res.args[0] == i);
        }
        CHECK_OK(netvm_put_imm(ctx, peer, 0, 1, 0));
    } else {
        long before = progress_thread_switches();
        while (served < N)
            netvm_progress(ctx);
        long woken = progress_thread_switches() - before;
        printf("progress thread slept %ld times while this thread polled for %d requests\n", woken, N);
        if (woken > N / 8)
            FAILF("the progress thread slept and woke %ld times for %d requests a polling thread served", woken, N);
        /* phase 2: no netvm call until the word is set */
        double t0 = now_s();
        while (!atomic_load(&word)) {
            if (now_s() - t0 > 60)
                FAILF("rank 0's requests were not served once this process stopped polling (%d served)",
                      (int)served);
            usleep(1000);
        }
        CHECK(served == N + M);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
