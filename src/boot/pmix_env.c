/* What the PMIx bootstrap needs whether or not libpmix is there: whether a
 * PMIx server started this process, and a namespace's job id (pmix.h). */
#include "boot/pmix.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int nv_boot_pmix_started(void)
{
    const char *rank = getenv("PMIX_RANK"), *ns = getenv("PMIX_NAMESPACE");
    return rank && *rank && ns && *ns;
}

void nv_boot_pmix_job_id(const char *nspace, char *out)
{
    size_t len = strlen(nspace);
    if (nv_boot_job_id_valid(nspace, len)) {
        memcpy(out, nspace, len + 1);
        return;
    }
    /* FNV-1a: a name, not a secret; two namespaces of one machine's jobs
     * differ, and so do their hashes but for a 2^-64 accident */
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h ^= (uint8_t)nspace[i];
        h *= 0x100000001b3ull;
    }
    snprintf(out, NV_BOOT_JOB_ID_MAX + 1, "pmix-%016llx", (unsigned long long)h);
}
