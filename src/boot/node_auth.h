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

int nv_node_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                  const uint8_t node_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                  uint8_t out[NV_HMAC_SHA256_LEN]);

int nv_hub_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                 const uint8_t hub_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                 netvm_status_t status, const char *job_id, size_t job_id_len,
                 uint8_t out[NV_HMAC_SHA256_LEN]);

/* 1 if proof (proof_len bytes) is the expected one, compared in constant
 * time; a proof of the wrong length is simply wrong. */
int nv_proof_ok(const uint8_t *proof, size_t proof_len, const uint8_t expected[NV_HMAC_SHA256_LEN]);

#endif
