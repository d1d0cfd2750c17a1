/* A thread that polls in a loop over tcp reads its connections directly
 * and asks the epoll set only every few passes (core/progress.c, P_LOOK):
 * one read a look instead of an epoll_wait and then the read. This program
 * defines epoll_wait, so netvm's calls land here and are counted per
 * thread. Rank 1 polls (netvm_progress) while rank 0 makes gets, each
 * served by rank 1's loop; then rank 1 counts its epoll_wait calls per
 * pass: at most about one in 16, where every pass made one before.
 * A loop that polls on (past UNWATCH_AFTER passes) also takes its
 * connections out of the epoll set, so arriving data runs no epoll
 * callback: rank 1 counts the connected sockets in its process's epoll
 * sets (/proc/self/fdinfo) while it still polls, and again once its loop
 * stopped and the progress thread took the connections back: fewer in the
 * loop, or the test fails; and they must come back within 20 000 looks a
 * millisecond apart, or it fails. NETVM_LINKS=tcp. Args: GETS. */
#include "check.h"

#include <netvm/am.h>
#include <netvm/netvm.h>
#include <dirent.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static __thread unsigned long waits;

int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout)
{
    waits++;
    return (int)syscall(SYS_epoll_wait, fd, ev, max, timeout);
}

static atomic_int stop;

static int is_fd_of(int fd, const char *prefix)
{
    char path[64], link[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, link, sizeof link - 1);
    if (n < 0)
        return 0;
    link[n] = 0;
    return strncmp(link, prefix, strlen(prefix)) == 0;
}

/* Connected sockets (not listeners) in any epoll set of this process. */
static int watched_connections(void)
{
    int count = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        FAILF("cannot list /proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d))) {
        int ep = atoi(e->d_name);
        if (e->d_name[0] == '.' || !is_fd_of(ep, "anon_inode:[eventpoll]"))
            continue;
        char path[64], line[256];
        snprintf(path, sizeof path, "/proc/self/fdinfo/%d", ep);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        while (fgets(line, sizeof line, f)) {
            int tfd, listening = 0;
            socklen_t len = sizeof listening;
            if (sscanf(line, "tfd: %d", &tfd) == 1 && is_fd_of(tfd, "socket:") &&
                getsockopt(tfd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && !listening)
                count++;
        }
        fclose(f);
    }
    closedir(d);
    return count;
}

static int on_stop(netvm_ctx_t *c, netvm_am_msg_t *m, void *a)
{
    (void)c, (void)m, (void)a;
    atomic_store(&stop, 1);
    return NETVM_AM_DONE;
}

int main(int argc, char **argv)
{
    int gets = argc > 1 ? atoi(argv[1]) : 2000;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx);
    CHECK_OK(netvm_am_register(ctx, 1, on_stop, NULL));
    void *a;
    netvm_seg_t *s;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RWA, "w", &a, &s));
    *(uint64_t *)a = 42;
    CHECK_OK(netvm_barrier(ctx));
    if (me == 1) {
        unsigned long passes = 0;
        /* the loop's first calls lend it P; count from there */
        for (int i = 0; i < 100; i++)
            netvm_progress(ctx);
        waits = 0;
        while (!atomic_load(&stop)) {
            netvm_progress(ctx);
            passes++;
        }
        printf("rank 1: %lu passes, %lu epoll_wait calls\n", passes, waits);
        if (waits > passes / 8 + 16)
            FAILF("%lu epoll_wait calls in %lu passes of a polling loop: the connections were not read directly",
                  waits, passes);
        /* poll on (a count of passes, not a time) and look while polling;
         * on a busy machine a loop descheduled for longer than its lease
         * gives P back (and its connections), so look again after more
         * passes, a bounded number of times */
        int in_loop = 1;
        for (int round = 0; round < 50 && in_loop > 0; round++) {
            for (int i = 0; i < 20000; i++)
                netvm_progress(ctx);
            in_loop = watched_connections();
        }
        /* stopped: the lease ends and the connections come back */
        int after = in_loop;
        for (int i = 0; i < 20000 && after <= in_loop; i++) {
            struct timespec ts = { 0, 1000000 };
            nanosleep(&ts, NULL);
            after = watched_connections();
        }
        printf("rank 1: %d connections in epoll sets while polling, %d after\n", in_loop, after);
        if (after <= in_loop)
            FAILF("a polling loop's connections stayed in the epoll set (%d while polling, %d after)", in_loop,
                  after);
    } else {
        netvm_rseg_t *r;
        CHECK_OK(netvm_import(ctx, 1, "w", &r));
        for (int i = 0; i < gets; i++) {
            uint64_t v = 0;
            CHECK_OK(netvm_get(ctx, &v, r, 0, 8, 0));
            if (v != 42)
                FAILF("get %d read %llu", i, (unsigned long long)v);
        }
        CHECK_OK(netvm_am_send(ctx, 1, 1, NULL, 0, NULL, 0, NULL));
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
