/* The PMIx bootstrap of a build without libpmix (pmix.h): it says it is
 * absent, and a process that a PMIx server started is told why it cannot
 * join its job, instead of running alone as a job of one. */
#ifndef NETVM_HAVE_PMIX
#include "boot/pmix.h"
#include "util/log.h"

const char *nv_boot_pmix_library(void) { return NULL; }

netvm_status_t nv_boot_pmix_open(struct nv_boot_pmix **p, const struct nv_boot_pmix_wait *w,
                                 int *rank, int *size, char job_id[NV_BOOT_JOB_ID_MAX + 1],
                                 uint8_t secret[NV_BOOT_SECRET_LEN])
{
    *p = NULL;
    nv_error("bootstrap: started by a PMIx server (PMIX_RANK is set), but this netvm was built "
             "without PMIx (libpmix-dev was missing): start it with `netvm run`, or rebuild");
    return NETVM_ERR_BOOT;
}

void nv_boot_pmix_close(struct nv_boot_pmix *p) {}

netvm_status_t nv_boot_pmix_allgather(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                      const void *mine, size_t len, void *all, int *dead_rank)
{
    return NETVM_ERR_STATE;
}

netvm_status_t nv_boot_pmix_barrier(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                    int *dead_rank)
{
    return NETVM_ERR_STATE;
}
#else
typedef int nv_boot_pmix_is_present;   /* ISO C wants something in a file */
#endif
