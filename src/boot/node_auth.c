/* The launchers' challenge-response proofs (node_auth.h). */
#include "boot/node_auth.h"
#include "wire/endian.h"

static const char node_label[] = "netvm-boot-1 node";   /* sizeof includes the NUL */
static const char hub_label[] = "netvm-boot-1 hub";

static void put_params(uint8_t buf[16], const struct nv_node_params *p)
{
    nv_put32(buf, (uint32_t)p->node);
    nv_put32(buf + 4, (uint32_t)p->nnodes);
    nv_put32(buf + 8, (uint32_t)p->nlocal);
    nv_put32(buf + 12, p->flags);
}

int nv_node_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                  const uint8_t node_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                  uint8_t out[NV_HMAC_SHA256_LEN])
{
    uint8_t params[16];
    put_params(params, p);
    const struct nv_hmac_part parts[] = {
        { node_label, sizeof node_label },
        { hub_nonce, NV_BOOT_NONCE_LEN },
        { node_nonce, NV_BOOT_NONCE_LEN },
        { params, sizeof params },
    };
    return nv_hmac_sha256(secret, NV_BOOT_SECRET_LEN, parts, 4, out);
}

int nv_hub_proof(const uint8_t secret[NV_BOOT_SECRET_LEN], const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                 const uint8_t hub_nonce[NV_BOOT_NONCE_LEN], const struct nv_node_params *p,
                 netvm_status_t status, const char *job_id, size_t job_id_len,
                 uint8_t out[NV_HMAC_SHA256_LEN])
{
    uint8_t params[16], tail[6];
    put_params(params, p);
    nv_put32(tail, (uint32_t)status);
    nv_put16(tail + 4, (uint16_t)job_id_len);
    const struct nv_hmac_part parts[] = {
        { hub_label, sizeof hub_label },
        { node_nonce, NV_BOOT_NONCE_LEN },
        { hub_nonce, NV_BOOT_NONCE_LEN },
        { params, sizeof params },
        { tail, sizeof tail },
        { job_id, job_id_len },
    };
    return nv_hmac_sha256(secret, NV_BOOT_SECRET_LEN, parts, 6, out);
}

static enum nv_proof_check compare(int computed, const uint8_t want[NV_HMAC_SHA256_LEN], const uint8_t *proof,
                                   size_t proof_len)
{
    if (computed != 0)
        return NV_PROOF_ERROR;
    if (!proof || proof_len != NV_HMAC_SHA256_LEN || !nv_ct_equal(proof, want, NV_HMAC_SHA256_LEN))
        return NV_PROOF_WRONG;
    return NV_PROOF_OK;
}

enum nv_proof_check nv_node_proof_check(const uint8_t secret[NV_BOOT_SECRET_LEN],
                                        const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                                        const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                                        const struct nv_node_params *p, const uint8_t *proof, size_t proof_len)
{
    uint8_t want[NV_HMAC_SHA256_LEN];
    return compare(nv_node_proof(secret, hub_nonce, node_nonce, p, want), want, proof, proof_len);
}

enum nv_proof_check nv_hub_proof_check(const uint8_t secret[NV_BOOT_SECRET_LEN],
                                       const uint8_t node_nonce[NV_BOOT_NONCE_LEN],
                                       const uint8_t hub_nonce[NV_BOOT_NONCE_LEN],
                                       const struct nv_node_params *p, netvm_status_t status,
                                       const char *job_id, size_t job_id_len,
                                       const uint8_t *proof, size_t proof_len)
{
    uint8_t want[NV_HMAC_SHA256_LEN];
    return compare(nv_hub_proof(secret, node_nonce, hub_nonce, p, status, job_id, job_id_len, want), want,
                   proof, proof_len);
}
