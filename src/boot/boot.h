/* Bootstrap: how the processes of a job learn their rank and size and find
 * each other. A process started by `netvm run` reads NETVM_RANK, NETVM_SIZE,
 * NETVM_JOB_ID, NETVM_SECRET and NETVM_BOOT (its launcher's bootstrap
 * address, "unix:PATH"). In a job across hosts a process still talks only
 * to the launcher of its own host, which relays its collectives to node 0's
 * (src/boot/server.h); ranks and size are the job's, global. A process
 * that a PMIx server started (mpirun, srun --mpi=pmix: PMIX_RANK and
 * PMIX_NAMESPACE set, NETVM_BOOT not) bootstraps through PMIx instead
 * (src/boot/pmix.h). A process started without a launcher is a job of one
 * (rank 0, size 1).
 *
 * The collectives are the PMI shape: allgather of fixed-size "business cards"
 * and a barrier. They never hang on a dead rank: the launcher sees the rank's
 * connection close and fails the collective for everyone with
 * NETVM_ERR_PEER. */
#ifndef NV_BOOT_BOOT_H
#define NV_BOOT_BOOT_H

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nv_boot nv_boot_t;

#define NV_BOOT_SECRET_LEN 32   /* bytes; NETVM_SECRET carries them as 64 hex digits */

/* addr NULL: take NETVM_BOOT from the environment (unset: PMIx if a PMIx
 * server started this process, else singleton).
 * timeout_ms bounds every wait on the launcher, collectives included
 * (NETVM_ERR_TIMEOUT; the handle is unusable afterwards); 0 means
 * NETVM_TIMEOUT, a negative value waits without bound (a dead rank or a
 * dead launcher still ends every wait). A launcher that goes away is
 * NETVM_ERR_BOOT. */
netvm_status_t nv_boot_open(nv_boot_t **boot, const char *addr, int timeout_ms);
void           nv_boot_close(nv_boot_t *boot);

int            nv_boot_rank(const nv_boot_t *boot);
int            nv_boot_size(const nv_boot_t *boot);
const char    *nv_boot_job_id(const nv_boot_t *boot);
/* The per-job secret (NV_BOOT_SECRET_LEN bytes); a singleton generates one. */
const uint8_t *nv_boot_secret(const nv_boot_t *boot);

/* Every rank contributes len bytes; all receives size*len bytes, rank r's
 * at all + r*len. Collective. */
netvm_status_t nv_boot_allgather(nv_boot_t *boot, const void *mine, size_t len, void *all);
netvm_status_t nv_boot_barrier(nv_boot_t *boot);
/* Run fn(arg) about every millisecond while a collective waits for the
 * launcher (fn NULL: just wait). */
void           nv_boot_set_idle(nv_boot_t *boot, void (*fn)(void *arg), void *arg);
/* After a collective returned NETVM_ERR_PEER: a rank that died or left (in
 * allgather its slot is zero-filled); -1 when the last collective had none. */
int            nv_boot_dead_rank(const nv_boot_t *boot);

#endif
