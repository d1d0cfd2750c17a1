/* The shm link's revocation fence with several initiating threads in one
 * process. It used to keep one word per process, marked "inside an access"
 * with a load and two plain stores: two threads accessing at once lost
 * updates, the word could end odd while nobody was inside, and a peer's
 * netvm_unexport (shm_seg_fence) then hung while this process was idle (or,
 * with the parity inverted, returned while an access was under way). Now
 * each initiating thread has its own word (src/link/shm/shm_rma.c).
 *
 * Two threads initiate at once at either thread level:
 *  "mt": NETVM_THREAD_MULTIPLE, 4 application threads of rank 0 put into
 *        rank 1's segments;
 *  "handler": the default level, rank 0's one application thread puts
 *        into rank 1 while rank 0's progress thread does too, from a
 *        handler of the messages rank 1 sends it (documented as allowed:
 *        handlers may issue nonblocking operations).
 * Then rank 0 waits idle in a barrier and rank 1 unexports a segment,
 * timed by a helper thread: an unexport takes microseconds; one that has
 * not returned after 60 s while rank 0 is idle has hung. Rounds repeat
 * until 10 have passed.
 * argv: mt | handler */
#include "thr.h"

#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS  10
#define PUTS    4000
#define H_POKE  1

static netvm_ctx_t *ctx;
/* rank 1's "data" (rank 0). Atomic because the progress thread reads it in
 * on_poke: the import happens before rank 1 sends, but through the other
 * process, which ThreadSanitizer cannot see. */
static netvm_rseg_t *_Atomic target;
static _Atomic uint64_t pokes;

static void *putter(void *arg)
{
    uint64_t v = (uint64_t)(intptr_t)arg;
    for (int i = 0; i < PUTS; i++)
        CHECK_OK(netvm_put(ctx, target, (size_t)(v % 8) * 8, &v, 8, 0));
    return NULL;
}

/* rank 0: a message from rank 1; the progress thread puts from here */
static int on_poke(netvm_ctx_t *c, netvm_am_msg_t *msg, void *arg)
{
    (void)arg;
    netvm_req_t *q;
    uint64_t v = msg->args[0];
    CHECK_OK(netvm_put_nb(c, atomic_load(&target), 64, &v, 8, 0, &q));
    CHECK(q == NULL);   /* shm: complete at once */
    atomic_fetch_add(&pokes, 1);
    return NETVM_AM_DONE;
}

struct unexport_job {
    netvm_seg_t   *seg;
    _Atomic int    done;
};

static void *unexporter(void *arg)
{
    struct unexport_job *j = arg;
    CHECK_OK(netvm_unexport(j->seg));
    atomic_store(&j->done, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    int mt = argc > 1 && strcmp(argv[1], "mt") == 0;
    ctx = thr_init(mt ? NETVM_THREAD_MULTIPLE : -1);
    int rank = netvm_rank(ctx);
    CHECK(netvm_size(ctx) == 2);
    void *p;
    netvm_seg_t *data;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RW, "data", &p, &data));
    CHECK_OK(netvm_am_register(ctx, H_POKE, on_poke, NULL));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t *imported;
    CHECK_OK(netvm_import(ctx, 1 - rank, "data", &imported));
    atomic_store(&target, imported);
    for (int round = 0; round < ROUNDS; round++) {
        /* rank 1: a segment to unexport later */
        static uint64_t words[ROUNDS][64];
        netvm_seg_t *victim = NULL;
        if (rank == 1)
            CHECK_OK(netvm_export(ctx, words[round], sizeof words[round], NETVM_RW, NULL, &victim));
        CHECK_OK(netvm_barrier(ctx));
        if (rank == 0 && mt) {
            pthread_t th[4];
            for (int t = 0; t < 4; t++)
                CHECK(pthread_create(&th[t], NULL, putter, (void *)(intptr_t)(t + 1)) == 0);
            for (int t = 0; t < 4; t++)
                CHECK(pthread_join(th[t], NULL) == 0);
        } else if (rank == 0) {
            /* put while the progress thread handles rank 1's messages */
            /* (the count is cumulative: some of this round's messages may
             * have been handled before this thread gets here) */
            uint64_t want = (uint64_t)(round + 1) * PUTS, v = 1;
            double end = now_s() + THR_HANG_S;
            while (atomic_load(&pokes) < want) {
                CHECK_OK(netvm_put(ctx, target, 8, &v, 8, 0));
                if (now_s() > end)
                    FAILF("rank 1's messages were not handled");
            }
        } else if (!mt) {
            for (int i = 0; i < PUTS; i++) {
                uint64_t a = (uint64_t)i;
                CHECK_OK(netvm_am_send(ctx, 0, H_POKE, &a, 1, NULL, 0, NULL));
            }
        }
        CHECK_OK(netvm_barrier(ctx));
        /* rank 0 is idle in the barrier below: no access of it is under way */
        if (rank == 1) {
            struct unexport_job j = { .seg = victim };
            pthread_t th;
            CHECK(pthread_create(&th, NULL, unexporter, &j) == 0);
            double end = now_s() + 60;
            while (!atomic_load(&j.done)) {
                if (now_s() > end)
                    FAILF("round %d: netvm_unexport has not returned after 60 s while rank 0 is idle: "
                          "its shm fence waits for an access that is not under way", round);
                struct timespec ts = { 0, 1000000 };
                nanosleep(&ts, NULL);
            }
            CHECK(pthread_join(th, NULL) == 0);
        }
        CHECK_OK(netvm_barrier(ctx));
    }
    if (rank == 1)
        printf("fence_threads (%s): %d unexports after concurrent accesses returned\n", mt ? "mt" : "handler",
               ROUNDS);
    CHECK_OK(netvm_release(target));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
