/* HMAC-SHA-256 through OpenSSL 3's EVP_MAC interface (the HMAC_CTX calls are
 * deprecated there). Fetching the algorithm on every call costs a few
 * microseconds; the callers authenticate connections, not packets. */
#include "util/hmac.h"
#include "util/random.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* Calls left to fail on purpose (nv_hmac_fail_next). Atomic because the
 * hook is set by a test's thread and consumed by whichever thread
 * authenticates next (a progress thread, a launcher's event loop). */
static atomic_int fail_left;

void nv_hmac_fail_next(int n)
{
    atomic_store(&fail_left, n > 0 ? n : 0);
}

static int injected_failure(void)
{
    int n = atomic_load_explicit(&fail_left, memory_order_relaxed);
    while (n > 0)
        if (atomic_compare_exchange_weak(&fail_left, &n, n - 1))
            return 1;
    return 0;
}

/* The algorithm is fetched once per process: the first fetch starts
 * libcrypto's providers (milliseconds), and every fetch looks it up. */
static EVP_MAC *hmac_alg;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void fetch_alg(void) { hmac_alg = EVP_MAC_fetch(NULL, "HMAC", NULL); }

void nv_hmac_warm(void) { pthread_once(&hmac_once, fetch_alg); }

static int compute(const void *key, size_t key_len, const struct nv_hmac_part *parts, size_t n,
                   uint8_t out[NV_HMAC_SHA256_LEN])
{
    int ok = 0;
    nv_hmac_warm();
    EVP_MAC_CTX *ctx = hmac_alg ? EVP_MAC_CTX_new(hmac_alg) : NULL;
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
    return ok;
}

int nv_hmac_sha256(const void *key, size_t key_len, const struct nv_hmac_part *parts, size_t n,
                   uint8_t out[NV_HMAC_SHA256_LEN])
{
    if (!injected_failure() && compute(key, key_len, parts, n, out))
        return 0;
    /* Whatever libcrypto left in out must not be used, and a constant
     * (all zeros) is exactly what an attacker would send to a caller that
     * forgot to check: unpredictable bytes instead. */
    if (nv_random_bytes(out, NV_HMAC_SHA256_LEN) != 0)
        memset(out, 0, NV_HMAC_SHA256_LEN);
    return -1;
}

int nv_ct_equal(const void *a, const void *b, size_t len)
{
    return CRYPTO_memcmp(a, b, len) == 0;
}
