/* How two launchers of a multi-host job prove to each other that they hold
 * the job secret, over a tcp connection anybody could have opened. The
 * secret itself never travels. Each side sends a fresh 32-byte nonce from
 * getrandom; each proof is HMAC-SHA-256 keyed with the secret over a
 * transcript that names its author's role (so one side's proof can never be
 * replayed as the other's), both nonces (so a proof from another connection
 * is worthless) and the job parameters both sides must agree on:
 *
 *   node proof = HMAC(secret, "netvm-boot-1 node\0" || hub nonce || node nonce
 *                     || node || nnodes || nlocal || flags)
 *   hub proof  = HMAC(secret, "netvm-boot-1 hub\0"  || node nonce || hub nonce
 *                     || node || nnodes || nlocal || flags || status || job id)
 *
 * (integers as 4 little-endian bytes, the job id as a 2-byte length and its
 * bytes). The hub sends only its nonce before it has checked the node's
 * proof, so an unauthenticated peer learns nothing it could use; the node
 * acts on nothing the hub says before checking the hub's proof. */
#ifndef NV_BOOT_NODE_AUTH_H
#define NV_BOOT_NODE_AUTH_H

#include "boot/boot.h"
#include "util/hmac.h"
#include "wire/boot_msg.h"

#include <stddef.h>
#include <stdint.h>

struct nv_node_params {
    int32_t  node, nnodes, nlocal;
    uint32_t flags;
};

/* Making one's own proof: 0, or -1 if libcrypto failed (then there is no
 * proof to send: give up the connection). */
int nv_node_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                  const uint8_t node_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                  uint8_t out[NV_HMAC_SHA256_LEN]);

int nv_hub_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                 const uint8_t hub_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                 netvm_status_t status, const char *job_id, size_t job_id_len,
                 uint8_t out[NV_HMAC_SHA256_LEN]);

/* Checking the other side's proof: it is recomputed here and compared in
 * constant time, in one call, so that no caller can compare against a proof
 * it failed to compute. NV_PROOF_OK (0) only for the expected proof; any
 * other value refuses the peer. NV_PROOF_WRONG: the proof (or its length)
 * is wrong; NV_PROOF_ERROR: the expected proof could not be computed
 * (libcrypto failed). The two refusals differ only in what the caller logs:
 * a check that cannot be made fails closed. */
enum nv_proof_check { NV_PROOF_OK = 0, NV_PROOF_WRONG, NV_PROOF_ERROR };

enum nv_proof_check nv_node_proof_check(const uint8_t secret[NV_BOOT_SECRET_LEN],
                                        const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                                        const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                                        const struct nv_node_params *p, const uint8_t *proof, size_t proof_len);

enum nv_proof_check nv_hub_proof_check(const uint8_t secret[NV_BOOT_SECRET_LEN],
                                       const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                                       const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                                       const struct nv_node_params *p, netvm_status_t status,
                                       const char *job_id, size_t job_id_len,
                                       const uint8_t *proof, size_t proof_len);

#endif
