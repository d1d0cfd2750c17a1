/* The PMIx bootstrap through src/boot's interface (boot.h), in a job that
 * mpirun started: the job id is the namespace's, every rank holds the same
 * secret, allgathers of several sizes put every rank's bytes in its slot,
 * barriers pass. Prints "secret FINGERPRINT" (rank 0): two jobs must not
 * share it (pmix_test.py compares them), so it is never a constant. */
#include "boot/boot.h"
#include "boot/pmix.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    nv_boot_t *b;
    CHECK_OK(nv_boot_open(&b, NULL, 60000));
    int rank = check_rank = nv_boot_rank(b), size = nv_boot_size(b);
    CHECK(rank == atoi(getenv("PMIX_RANK")));
    char want_id[NV_BOOT_JOB_ID_MAX + 1];
    nv_boot_pmix_job_id(getenv("PMIX_NAMESPACE"), want_id);
    CHECK(!strcmp(nv_boot_job_id(b), want_id));

    /* the same secret everywhere */
    uint8_t *secrets = malloc((size_t)size * NV_BOOT_SECRET_LEN);
    CHECK(secrets);
    CHECK_OK(nv_boot_allgather(b, nv_boot_secret(b), NV_BOOT_SECRET_LEN, secrets));
    for (int r = 0; r < size; r++)
        if (memcmp(secrets + (size_t)r * NV_BOOT_SECRET_LEN, nv_boot_secret(b), NV_BOOT_SECRET_LEN))
            FAILF("rank %d holds another secret", r);
    static const uint8_t zero[NV_BOOT_SECRET_LEN];
    CHECK(memcmp(nv_boot_secret(b), zero, sizeof zero) != 0);
    free(secrets);

    /* allgathers of 1 byte to 64 KiB, each rank's own bytes */
    size_t lens[] = { 1, 8, 100, 4096, 65536 };
    for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
        size_t len = lens[k];
        uint8_t *mine = malloc(len), *all = malloc(len * (size_t)size);
        CHECK(mine && all);
        for (size_t i = 0; i < len; i++)
            mine[i] = (uint8_t)(rank * 13 + i * 7 + k);
        CHECK_OK(nv_boot_allgather(b, mine, len, all));
        CHECK(nv_boot_dead_rank(b) == -1);
        for (int r = 0; r < size; r++)
            for (size_t i = 0; i < len; i++)
                if (all[(size_t)r * len + i] != (uint8_t)(r * 13 + i * 7 + k))
                    FAILF("allgather of %zu bytes: rank %d's byte %zu is wrong", len, r, i);
        free(mine);
        free(all);
        CHECK_OK(nv_boot_barrier(b));
    }
    if (rank == 0) {
        uint64_t h = 0xcbf29ce484222325ull;   /* a fingerprint, not the secret */
        for (int i = 0; i < NV_BOOT_SECRET_LEN; i++)
            h = (h ^ nv_boot_secret(b)[i]) * 0x100000001b3ull;
        printf("secret %016llx\n", (unsigned long long)h);
    }
    nv_boot_close(b);
    printf("rank %d of %d ok\n", rank, size);
    return 0;
}
