/* A spinning netvm_wait_until over tcp drives progress on every pass that
 * yields the CPU (core/signal.c): a yield is a system call already, and a
 * word written by a tcp put needs the progress engine to land, so a wait
 * that looked at the link only every 16th pass let a written word wait
 * behind a dozen yields (putsig_lat over tcp 27 us, 6 us with it). This
 * program defines sched_yield, recv and epoll_wait, so netvm's calls land
 * here and are counted per thread. Rank 0 lets rank 1's wait reach its
 * yielding passes (200 yields of its own), then sets rank 1's word with a
 * put with signal; rank 1 answers the same way. Rank 1 counts its looks at
 * the link (recv or epoll_wait) against its yields inside its waits: one
 * each (at least one for two, for a pass another thread served).
 * NETVM_LINKS=tcp. Args: ROUNDS. */
#define _GNU_SOURCE
#include "check.h"

#include <netvm/events.h>
#include <netvm/netvm.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread unsigned long yields, looks;

int sched_yield(void)
{
    yields++;
    return (int)syscall(SYS_sched_yield);
}

ssize_t recv(int fd, void *buf, size_t len, int flags)
{
    looks++;
    return syscall(SYS_recvfrom, fd, buf, len, flags, NULL, NULL);
}

int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout)
{
    looks++;
    return (int)syscall(SYS_epoll_wait, fd, ev, max, timeout);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx);
    uint64_t *w;
    netvm_seg_t *s;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RW, "w", (void **)&w, &s));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *r;
    CHECK_OK(netvm_import(ctx, 1 - me, "w", &r));
    uint64_t data = 0;
    unsigned long y = 0, l = 0;   /* rank 1's, inside its waits */
    for (uint64_t i = 1; i <= (uint64_t)rounds; i++) {
        if (me == 0) {
            for (int k = 0; k < 200; k++)
                syscall(SYS_sched_yield);   /* not counted: rank 0's own */
            CHECK_OK(netvm_put_signal(ctx, r, 8, &data, 8, r, 0, i, NETVM_SIGNAL_SET, 0));
            CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GE, i, NETVM_WAIT_SPIN, 60000, NULL));
        } else {
            unsigned long y0 = yields, l0 = looks;
            CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GE, i, NETVM_WAIT_SPIN, 60000, NULL));
            y += yields - y0;
            l += looks - l0;
            CHECK_OK(netvm_put_signal(ctx, r, 8, &data, 8, r, 0, i, NETVM_SIGNAL_SET, 0));
        }
    }
    if (me == 1) {
        printf("rank 1: %d waits, %lu yields, %lu looks at the link\n", rounds, y, l);
        if (y > (unsigned long)rounds && l < y / 2)
            FAILF("%lu looks at the link in %lu yields of spinning waits: a written word waited behind yields",
                  l, y);
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
