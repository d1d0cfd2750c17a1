/* Bootstrap through PMIx: a process started by a PMIx server (Open MPI's
 * mpirun, Slurm's srun --mpi=pmix) learns its rank and size from it and
 * runs the collectives as PMIx fences. client.c chooses it (boot.h); the
 * handle here is what client.c's nv_boot holds in place of a launcher
 * socket.
 *
 * The job secret: rank 0 draws it from getrandom and puts it into PMIx
 * (scope global, so that only the job's processes are given it); the first
 * fence, inside nv_boot_pmix_open, hands it to every rank (docs/security.md
 * says what that trusts).
 *
 * No collective waits for a dead rank: a fence that fails or completes
 * without a rank's contribution, or a PMIx event about a process that
 * ended, fails it with NETVM_ERR_PEER (naming the rank where PMIx lets us
 * know it); a lost PMIx server with NETVM_ERR_BOOT; a launcher that kills
 * the whole job ends the wait too.
 *
 * Built only where libpmix was found (NETVM_HAVE_PMIX); elsewhere
 * pmix_absent.c says so to whoever asks. */
#ifndef NV_BOOT_PMIX_H
#define NV_BOOT_PMIX_H

#include "boot/boot.h"
#include "wire/boot_msg.h"

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

struct nv_boot_pmix;

/* How a collective waits: timeout_ms < 0 without bound; idle (if set) runs
 * about every millisecond meanwhile (nv_boot_set_idle). */
struct nv_boot_pmix_wait {
    int    timeout_ms;
    void (*idle)(void *arg);
    void  *idle_arg;
};

/* Whether the environment shows a process started by a PMIx server
 * (PMIX_RANK and PMIX_NAMESPACE set). */
int nv_boot_pmix_started(void);

/* The PMIx library this build uses ("4.2.2"), or NULL when it was built
 * without PMIx. */
const char *nv_boot_pmix_library(void);

/* Connect to the PMIx server, learn rank and size, derive the job id from
 * the namespace and agree on the job secret (a fence: collective). */
netvm_status_t nv_boot_pmix_open(struct nv_boot_pmix **p, const struct nv_boot_pmix_wait *w,
                                 int *rank, int *size, char job_id[NV_BOOT_JOB_ID_MAX + 1],
                                 uint8_t secret[NV_BOOT_SECRET_LEN]);
void           nv_boot_pmix_close(struct nv_boot_pmix *p);

/* boot.h's collectives; *dead_rank as nv_boot_dead_rank. */
netvm_status_t nv_boot_pmix_allgather(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                      const void *mine, size_t len, void *all, int *dead_rank);
netvm_status_t nv_boot_pmix_barrier(struct nv_boot_pmix *p, const struct nv_boot_pmix_wait *w,
                                    int *dead_rank);

/* The job id for a PMIx namespace: the namespace itself when it is a valid
 * job id (nv_boot_job_id_valid), else "pmix-" and 16 hex digits of a hash of
 * it. out has NV_BOOT_JOB_ID_MAX + 1 bytes. (Pure; tested directly.) */
void nv_boot_pmix_job_id(const char *nspace, char *out);

#endif
