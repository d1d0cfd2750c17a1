/* The queue lock: mutual exclusion under contention from every rank (a
 * counter incremented with a get and a put inside the lock: lost updates
 * without it), FIFO order (acquirers queue in a known order behind a
 * holder and must get the lock in that order), and the two-rank case
 * where the hand-off crosses the link every time, with the messages a
 * queued acquire sends counted. Then (SOLO > 0) rank 0
 * alone takes and releases the lock SOLO times, more than a process has
 * wait nodes: a release that does not wait for the home (tcp) must still
 * give its node back. On tcp those turns are counted too: a release's
 * compare-swap rides with the next acquire's request, so a turn is about
 * one sendmsg of rank 0's, not two (the kernel's sys_enter_sendmsg
 * tracepoint; skipped, said so, where it cannot be opened).
 * Where the ranks map each other's wait nodes (shm), a queued acquire
 * links itself and is woken by stores into the nodes: no message at all.
 * SYNC_TEST_HOME_UNMAPPED=1: the home exports nothing mappable
 * (NETVM_SHM_MAPPED=0 in its environment alone): the others enqueue
 * through the home, whose handler links them by stores into their
 * mapped nodes, and release without waiting for its compare-swap; a link
 * that finds the node releasing goes to its owner as a message.
 * Args: ITERS ROUNDS [SOLO]. */
#include "sync_test.h"
#include "syscount.h"

#include <string.h>

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200, rounds = argc > 2 ? atoi(argv[2]) : 20;
    int solo = argc > 3 ? atoi(argv[3]) : 0;
    const char *links = getenv("NETVM_LINKS");
    int counter = links && !strcmp(links, "tcp") ? syscount_open("sendmsg") : -1;
    const char *er = getenv("NETVM_RANK"), *es = getenv("NETVM_SIZE");
    if (getenv("SYNC_TEST_HOME_UNMAPPED") && er && es && atoi(er) == atoi(es) - 1)
        setenv("NETVM_SHM_MAPPED", "0", 1);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int me = check_rank = netvm_rank(ctx), n = netvm_size(ctx);
    netvm_rseg_t *data = st_shared(ctx, "lockdata", 4096);

    /* the home is the last rank: rank 0 holds the data */
    int home = n - 1;
    netvm_lock_t *lock;
    if (me == home)
        CHECK_OK(netvm_lock_create(ctx, "L", &lock));
    CHECK_OK(netvm_barrier(ctx));
    if (me != home)
        CHECK_OK(netvm_lock_open(ctx, home, "L", &lock));
    CHECK_ST(netvm_lock_release(lock), NETVM_ERR_STATE);

    /* mutual exclusion */
    for (int i = 0; i < iters; i++) {
        CHECK_OK(netvm_lock_acquire(lock));
        st_racy_inc(ctx, data, 0);
        CHECK_OK(netvm_lock_release(lock));
    }
    CHECK_OK(netvm_barrier(ctx));
    uint64_t total = st_get(ctx, data, 0);
    if (total != (uint64_t)iters * (uint64_t)n)
        FAILF("counter %llu, wanted %llu: lost updates", (unsigned long long)total,
              (unsigned long long)iters * (unsigned long long)n);

    /* FIFO: the round's holder takes the lock, the others queue one after
     * the other (each waits until the one before it is the tail), and each
     * records the position at which it got the lock */
    netvm_rseg_t *obj;
    CHECK_OK(netvm_import(ctx, home, "nvsync:L", &obj));
    for (int r = 0; r < rounds; r++) {
        int holder = r % n;
        int pos = (me - holder + n) % n;   /* queue position */
        if (me == holder) {
            CHECK_OK(netvm_lock_acquire(lock));
            st_put(ctx, data, 8, 0);
        }
        CHECK_OK(netvm_barrier(ctx));
        if (me != holder) {
            int before = (me - 1 + n) % n;
            while (st_tail_peer(ctx, obj) != before)
                sched_yield();
            CHECK_OK(netvm_lock_acquire(lock));
        } else {
            int last = (holder - 1 + n) % n;
            while (n > 1 && st_tail_peer(ctx, obj) != last)
                sched_yield();
        }
        uint64_t got = st_get(ctx, data, 8);
        if (got != (uint64_t)pos)
            FAILF("round %d: got the lock at position %llu, queued at %d", r, (unsigned long long)got, pos);
        st_put(ctx, data, 8, got + 1);
        CHECK_OK(netvm_lock_release(lock));
        CHECK_OK(netvm_barrier(ctx));
    }
    /* Queued behind the home's hold, an acquire sends one message: where
     * the words are not mapped (tcp) the home swaps and links for the
     * acquirer (home.c, NV_SYNC_OP_MCS_ENQ), a swap and a link of its own
     * were two; where they are, the swap is a CPU atomic and the link the
     * one message. Counted over QROUNDS acquires (a credit return may
     * ride alone now and then). */
    enum { QROUNDS = 20 };
    uint64_t sent = 0;
    for (int r = 0; n == 2 && r < QROUNDS; r++) {
        if (me == home)
            CHECK_OK(netvm_lock_acquire(lock));
        CHECK_OK(netvm_barrier(ctx));
        if (me == 0) {
            netvm_am_stats_t a, b;
            CHECK_OK(netvm_am_stats(ctx, &a));
            CHECK_OK(netvm_lock_acquire(lock));
            CHECK_OK(netvm_am_stats(ctx, &b));
            sent += b.sent - a.sent;
        } else {
            while (st_tail_peer(ctx, obj) != 0)
                sched_yield();
        }
        CHECK_OK(netvm_lock_release(lock));
        CHECK_OK(netvm_barrier(ctx));
    }
    if (n == 2 && me == 0 && sent > QROUNDS * 3 / 2)
        FAILF("%llu messages sent by %d queued acquires", (unsigned long long)sent, QROUNDS);
    if (n == 2 && me == 0 && netvm_rseg_is_mapped(obj) && sent > QROUNDS / 4)
        FAILF("%llu messages sent by %d queued acquires where the nodes are mapped", (unsigned long long)sent,
              QROUNDS);
    CHECK_OK(netvm_release(obj));
    CHECK_OK(netvm_barrier(ctx));
    if (me == 0 && solo) {
        uint64_t before = counter >= 0 ? syscount_read(counter) : 0;
        for (int i = 0; i < solo; i++) {
            CHECK_OK(netvm_lock_acquire(lock));
            CHECK_OK(netvm_lock_release(lock));
        }
        if (counter >= 0 && n == 2 && me != home) {
            uint64_t calls = syscount_read(counter) - before;
            printf("rank 0: %llu sendmsg calls in %d uncontended turns\n", (unsigned long long)calls, solo);
            if (calls > (uint64_t)solo * 3 / 2)
                FAILF("%llu sendmsg calls in %d turns: the releases' compare-swaps left alone",
                      (unsigned long long)calls, solo);
        } else if (links && !strcmp(links, "tcp") && n == 2) {
            printf("rank 0: no sys_enter_sendmsg tracepoint here: the count is skipped\n");
        }
    }
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_lock_close(lock));
    CHECK_OK(netvm_barrier(ctx));
    printf("rank %d ok\n", me);
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
