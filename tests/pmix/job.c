/* A job that a PMIx server started (mpirun, srun --mpi=pmix), no `netvm
 * run`: its ranks are PMIx's, and RMA, atomics and notifications work across
 * all of them.
 *
 *   pmix_job SIZE LINK [launcher]      (LINK: shm, tcp, or any)
 *
 * Each rank ends with "rank R of N ok", the link to its right neighbour
 * and its NETVM_TCP_ADDR (what tells hosts apart in a job across network
 * namespaces).
 *
 * With "launcher" the job is expected to come from `netvm run` even though
 * PMIx variables are set (netvm run under mpirun: NETVM_BOOT wins).
 *
 * Each rank puts a pattern of its own into its right neighbour's buffer and
 * then notifies it; a notification comes after the put's data (so the
 * receiver checks it there at once); each gets a pattern its right
 * neighbour wrote locally; every rank adds to rank 0's counter and takes a
 * turn through compare-and-swap; the sums must be exact. */
#include "check.h"

#include <netvm/events.h>
#include <stdint.h>
#include <string.h>

#define BUF     4096
#define PUT_AT  0        /* where the left neighbour puts */
#define OWN_AT  1024     /* what each rank writes itself, for the right... left to get */
#define LEN     512
#define COUNTER 3072     /* rank 0's: one fetch-add per rank */
#define TURN    3080     /* rank 0's: compare-and-swap from r to r+1 by rank r */

static void fill(uint8_t *p, int who, int salt)
{
    for (int i = 0; i < LEN; i++)
        p[i] = (uint8_t)(who * 31 + salt * 7 + i);
}

static void want(const uint8_t *p, int who, int salt, const char *what)
{
    uint8_t exp[LEN];
    fill(exp, who, salt);
    if (memcmp(p, exp, LEN))
        FAILF("%s: not rank %d's pattern", what, who);
}

int main(int argc, char **argv)
{
    CHECK(argc == 3 || (argc == 4 && !strcmp(argv[3], "launcher")));
    int by_launcher = argc == 4;
    int want_size = atoi(argv[1]);
    const char *want_link = argv[2];
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    /* the ranks are PMIx's, not a job of one each */
    const char *pmix_rank = getenv("PMIX_RANK");
    if (!by_launcher)
        CHECK(pmix_rank && atoi(pmix_rank) == rank);
    if (size != want_size)
        FAILF("size %d, the launcher started %d", size, want_size);

    static uint64_t words[BUF / 8] __attribute__((aligned(64)));
    uint8_t *buf = (uint8_t *)words;
    fill(buf + OWN_AT, rank, 2);
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, buf, BUF, NETVM_RWA, "buf", &seg));
    CHECK_OK(netvm_barrier(ctx));

    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    netvm_rseg_t *r, *zero;
    CHECK_OK(netvm_import(ctx, right, "buf", &r));
    CHECK_OK(netvm_import(ctx, 0, "buf", &zero));
    netvm_peer_info_t info;
    CHECK_OK(netvm_peer_info(ctx, right, &info));
    CHECK(info.is_rank);
    char right_link[8];
    snprintf(right_link, sizeof right_link, "%s", info.link);
    if (size > 1 && strcmp(want_link, "any") != 0 && strcmp(info.link, want_link) != 0)
        FAILF("rank %d is reached over %s, wanted %s", right, info.link, want_link);

    /* put, then a notification that comes after it */
    uint8_t mine[LEN];
    fill(mine, rank, 1);
    CHECK_OK(netvm_put(ctx, r, PUT_AT, mine, LEN, 0));
    CHECK_OK(netvm_notify(ctx, right, 0x1000 + (uint64_t)rank));
    netvm_event_t ev;
    int n = 0;
    CHECK_OK(netvm_evq_wait(ctx, &ev, 1, &n, 60000));
    CHECK(n == 1 && ev.type == NETVM_EV_NOTIFY);
    if (ev.rank != left || ev.value != 0x1000 + (uint64_t)left)
        FAILF("notification from rank %d value %#llx, expected rank %d", ev.rank,
              (unsigned long long)ev.value, left);
    want(buf + PUT_AT, left, 1, "the left neighbour's put, at its notification");

    /* get */
    uint8_t got[LEN];
    CHECK_OK(netvm_get(ctx, got, r, OWN_AT, LEN, 0));
    want(got, right, 2, "a get from the right neighbour");

    /* atomics on rank 0's words */
    uint64_t old;
    CHECK_OK(netvm_atomic(ctx, zero, COUNTER, NETVM_AOP_FADD, 1, 0, &old));
    CHECK(old < (uint64_t)size);
    for (;;) {    /* rank r moves the turn from r to r+1 */
        CHECK_OK(netvm_atomic(ctx, zero, TURN, NETVM_AOP_CSWAP, (uint64_t)rank + 1, (uint64_t)rank, &old));
        if (old == (uint64_t)rank)
            break;
        CHECK(old < (uint64_t)rank);
    }
    CHECK_OK(netvm_barrier(ctx));
    if (rank == 0) {
        CHECK(words[COUNTER / 8] == (uint64_t)size);
        CHECK(words[TURN / 8] == (uint64_t)size);
    }
    CHECK_OK(netvm_release(r));
    CHECK_OK(netvm_release(zero));
    CHECK_OK(netvm_barrier(ctx));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    const char *addr = getenv("NETVM_TCP_ADDR");
    printf("rank %d of %d ok, right %d over %s, tcp addr %s\n", rank, size, right, right_link,
           addr ? addr : "(default)");
    return 0;
}
