/* Faults across hosts, driven by tests/tcp/multihost.py. Every rank writes
 * DIR/ready.RANK once the job is up, then:
 *   kill:     the ranks of the last host kill themselves; the others must see
 *             NETVM_ERR_PEER for every operation to them within 5 s, and
 *             still reach each other.
 *   linkdown: the driver takes the last host's link down; the first rank
 *             keeps getting from the last rank and must see NETVM_ERR_TIMEOUT
 *             or NETVM_ERR_PEER within NETVM_TIMEOUT plus slack, not hang.
 *   garbage:  (any number of hosts, one is fine) the driver sends random bytes
 *             and broken frames to every rank's tcp port, then creates
 *             DIR/go; the ranks must still serve each other correctly.
 * Usage: tcp_fault kill|linkdown|garbage DIR */
#include "check.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void mark(const char *dir, const char *what, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%d", dir, what, rank);
    FILE *f = fopen(path, "w");
    CHECK(f);
    fclose(f);
}

int main(int argc, char **argv)
{
    CHECK(argc == 3);
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    int rank = check_rank = netvm_rank(ctx), size = netvm_size(ctx);
    int per_host = atoi(getenv("NETVM_LOCAL_SIZE") ? getenv("NETVM_LOCAL_SIZE") : "1");
    int nhosts = atoi(getenv("NETVM_NNODES") ? getenv("NETVM_NNODES") : "1");
    int first_victim = (nhosts - 1) * per_host;
    CHECK(nhosts >= 2 || !strcmp(argv[1], "garbage"));
    static uint64_t mem[1024];
    netvm_seg_t *seg;
    CHECK_OK(netvm_export(ctx, mem, sizeof mem, NETVM_RWA, "mem", &seg));
    CHECK_OK(netvm_barrier(ctx));
    netvm_rseg_t **r = calloc((size_t)size, sizeof *r);
    for (int p = 0; p < size; p++)
        CHECK_OK(netvm_import(ctx, p, "mem", &r[p]));
    CHECK_OK(netvm_barrier(ctx));
    mark(argv[2], "ready", rank);

    uint64_t v = 7, got;
    if (!strcmp(argv[1], "garbage")) {
        char go[4096];
        snprintf(go, sizeof go, "%s/go", argv[2]);
        double t0 = now();
        while (access(go, F_OK) != 0) {
            CHECK(now() - t0 < 60);
            netvm_progress(ctx);
            usleep(1000);
        }
        /* after the junk: every peer still answers, and right */
        for (int i = 0; i < 2000; i++) {
            int p = i % size;
            uint64_t mine = ((uint64_t)rank << 32) | (uint64_t)i;
            CHECK_OK(netvm_put(ctx, r[p], 64 + 8 * (size_t)rank, &mine, 8, 0));
            CHECK_OK(netvm_get(ctx, &got, r[p], 64 + 8 * (size_t)rank, 8, 0));
            CHECK(got == mine);
            CHECK_OK(netvm_atomic(ctx, r[p], 0, NETVM_AOP_ADD, 1, 0, NULL));
        }
        CHECK_OK(netvm_barrier(ctx));
        /* every rank added 1 here for each i with i % size == rank */
        uint64_t each = (uint64_t)(2000 - rank + size - 1) / (uint64_t)size;
        CHECK(__atomic_load_n(&mem[0], __ATOMIC_SEQ_CST) == each * (uint64_t)size);
        printf("rank %d served through the junk\n", rank);
        CHECK_OK(netvm_finalize(ctx));
        free(r);
        return 0;
    }
    if (!strcmp(argv[1], "kill")) {
        CHECK_OK(netvm_barrier(ctx));
        if (rank >= first_victim)
            raise(SIGKILL);
        for (int p = first_victim; p < size; p++) {
            double t0 = now();
            netvm_status_t st;
            while ((st = netvm_get(ctx, &got, r[p], 0, 8, 0)) == NETVM_OK)
                CHECK(now() - t0 < 5.0);
            CHECK_ST(st, NETVM_ERR_PEER);
            CHECK_ST(netvm_put(ctx, r[p], 0, &v, 8, 0), NETVM_ERR_PEER);
            CHECK_ST(netvm_atomic(ctx, r[p], 8, NETVM_AOP_FADD, 1, 0, &got), NETVM_ERR_PEER);
        }
        for (int p = 0; p < first_victim; p++) {
            CHECK_OK(netvm_atomic(ctx, r[p], 16, NETVM_AOP_ADD, 1, 0, NULL));
            CHECK_OK(netvm_put(ctx, r[p], 24 + 8 * (size_t)rank, &v, 8, 0));
        }
        CHECK_ST(netvm_barrier(ctx), NETVM_ERR_PEER);
        printf("survivor %d ok\n", rank);
    } else {
        if (rank == 0) {
            double t0 = now(), limit = atof(getenv("NETVM_TIMEOUT")) / 1000.0 + 5.0;
            netvm_status_t st = NETVM_OK;
            /* the driver takes the link down once every rank is ready */
            while (st == NETVM_OK) {
                st = netvm_get(ctx, &got, r[size - 1], 0, 8, 0);
                if (st == NETVM_OK)
                    t0 = now();
                CHECK(now() - t0 < limit);
            }
            CHECK(st == NETVM_ERR_TIMEOUT || st == NETVM_ERR_PEER);
            printf("link down detected: %s after %.1f s\n", netvm_strerror(st), now() - t0);
            fflush(stdout);
            mark(argv[2], "detected", rank);
        } else {
            sleep(60);   /* the launcher ends the job */
        }
    }
    fflush(stdout);
    _exit(0);   /* the job is broken: leave without the collective finalize */
}
