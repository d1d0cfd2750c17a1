/* Run through the launcher at several sizes: every rank sees a consistent
 * job (rank, size, job id, secret), allgather returns every rank's bytes in
 * rank order for many sizes (zero and large included), and no rank leaves a
 * barrier before every rank has entered it. */
#include "check.h"
#include "boot/boot.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);    /* one clock for every process on the machine */
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check_identity(nv_boot_t *b)
{
    int rank = nv_boot_rank(b), size = nv_boot_size(b);
    if (getenv("NETVM_BOOT")) {
        CHECK(rank == atoi(getenv("NETVM_RANK")) && size == atoi(getenv("NETVM_SIZE")));
        CHECK(!strcmp(nv_boot_job_id(b), getenv("NETVM_JOB_ID")));
    } else {
        CHECK(rank == 0 && size == 1);      /* started without the launcher */
    }
    struct card {
        int32_t rank;
        char    job[64];
        uint8_t secret[NV_BOOT_SECRET_LEN];
    } mine = { .rank = rank }, *all = calloc((size_t)size, sizeof mine);
    CHECK(all);
    snprintf(mine.job, sizeof mine.job, "%s", nv_boot_job_id(b));
    memcpy(mine.secret, nv_boot_secret(b), NV_BOOT_SECRET_LEN);
    CHECK_OK(nv_boot_allgather(b, &mine, sizeof mine, all));
    for (int r = 0; r < size; r++) {
        CHECK(all[r].rank == r);
        CHECK(!strcmp(all[r].job, mine.job));
        CHECK(!memcmp(all[r].secret, mine.secret, NV_BOOT_SECRET_LEN));
    }
    free(all);
}

static uint8_t pattern(int rank, size_t i, int round)
{
    return (uint8_t)(rank * 131 + i * 7 + (size_t)round);
}

static void allgathers(nv_boot_t *b)
{
    int rank = nv_boot_rank(b), size = nv_boot_size(b);
    const size_t lens[] = { 0, 1, 3, 8, 1000, 65536, 1 << 20 };
    for (int round = 0; round < (int)(sizeof lens / sizeof lens[0]); round++) {
        size_t len = lens[round];
        if (len * (size_t)size > (8u << 20))
            continue;
        uint8_t *mine = malloc(len + 1), *all = malloc(len * (size_t)size + 1);
        CHECK(mine && all);
        for (size_t i = 0; i < len; i++)
            mine[i] = pattern(rank, i, round);
        memset(all, 0xee, len * (size_t)size);
        CHECK_OK(nv_boot_allgather(b, mine, len, all));
        CHECK(nv_boot_dead_rank(b) == -1);
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < len; i++)
                if (all[(size_t)r * len + i] != pattern(r, i, round)) {
                    fprintf(stderr, "allgather of %zu: rank %d byte %zu wrong\n", len, r, i);
                    exit(1);
                }
        free(mine);
        free(all);
    }
}

/* Ranks enter in a staggered order; every exit must come after the last
 * entry. */
static void barriers(nv_boot_t *b)
{
    int rank = nv_boot_rank(b), size = nv_boot_size(b);
    uint64_t *times = calloc(2 * (size_t)size, sizeof *times);
    CHECK(times);
    for (int round = 0; round < 20; round++) {
        /* a different rank arrives last each time */
        if (rank == round % size)
            usleep(20000);
        uint64_t t[2];
        t[0] = now_ns();
        CHECK_OK(nv_boot_barrier(b));
        t[1] = now_ns();
        CHECK_OK(nv_boot_allgather(b, t, sizeof t, times));
        uint64_t last_in = 0, first_out = UINT64_MAX;
        for (int r = 0; r < size; r++) {
            last_in = times[2 * r] > last_in ? times[2 * r] : last_in;
            first_out = times[2 * r + 1] < first_out ? times[2 * r + 1] : first_out;
        }
        CHECK(first_out >= last_in);
    }
    free(times);
}

int main(int argc, char **argv)
{
    alarm(120);
    int want = argc > 1 ? atoi(argv[1]) : 0;
    nv_boot_t *b;
    CHECK_OK(nv_boot_open(&b, NULL, 30000));
    check_rank = nv_boot_rank(b);
    if (want)
        CHECK(nv_boot_size(b) == want);
    check_identity(b);
    allgathers(b);
    barriers(b);
    CHECK_OK(nv_boot_barrier(b));
    nv_boot_close(b);
    return 0;
}
