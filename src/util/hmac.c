/* HMAC-SHA-256 through OpenSSL 3's EVP_MAC interface (the HMAC_CTX calls are
 * deprecated there). Fetching the algorithm on every call costs a few
 * microseconds; the callers authenticate connections, not packets. */
#include "util/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <string.h>

int nv_hmac_sha256(const void *key, size_t key_len, const struct nv_hmac_part *parts, size_t n,
                   uint8_t out[NV_HMAC_SHA256_LEN])
{
    int ok = 0;
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    size_t out_len = 0;
    if (ctx && EVP_MAC_init(ctx, key, key_len, params) == 1) {
        ok = 1;
        for (size_t i = 0; ok && i < n; i++)
            if (parts[i].len)
                ok = EVP_MAC_update(ctx, parts[i].data, parts[i].len) == 1;
        ok = ok && EVP_MAC_final(ctx, out, &out_len, NV_HMAC_SHA256_LEN) == 1 &&
             out_len == NV_HMAC_SHA256_LEN;
    }
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    if (!ok)
        memset(out, 0, NV_HMAC_SHA256_LEN);
    return ok ? 0 : -1;
}

int nv_ct_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}
