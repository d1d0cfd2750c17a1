/* Message authentication for everything that proves knowledge of the job
 * secret over a network (the launchers' rendezvous, the tcp link): HMAC-SHA-256
 * and a constant-time comparison, both from OpenSSL's libcrypto. netvm
 * implements no cryptography of its own. */
#ifndef NV_UTIL_HMAC_H
#define NV_UTIL_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define NV_HMAC_SHA256_LEN 32

/* One piece of the authenticated message; the MAC covers the pieces in
 * order, as if concatenated (so callers need not build one buffer). */
struct nv_hmac_part {
    const void *data;
    size_t      len;
};

/* out = HMAC-SHA-256(key, parts[0] || ... || parts[n-1]). Returns 0, or -1
 * if libcrypto failed.
 *
 * Callers MUST check the result and treat -1 as a failed authentication:
 * refuse the peer, never send or compare out. On failure out holds fresh
 * random bytes (zeros only if getrandom failed as well), so a caller that
 * forgot the check would compare against a value no peer can predict rather
 * than against a constant; that is a second line, not a licence to skip the
 * check. */
int nv_hmac_sha256(const void *key, size_t key_len, const struct nv_hmac_part *parts, size_t n,
                   uint8_t out[NV_HMAC_SHA256_LEN]);

/* Start libcrypto's HMAC now (milliseconds the first time in a process),
 * so that the first handshake does not pay it. */
void nv_hmac_warm(void);

/* 1 if the len bytes at a and b are equal, else 0, in time that depends on
 * len only: comparing a received MAC must not tell an attacker how many of
 * its leading bytes were right. */
int nv_ct_equal(const void *a, const void *b, size_t len);

/* TEST ONLY (fault injection): the next n calls of nv_hmac_sha256, from any
 * thread, fail as if libcrypto had failed; n <= 0 cancels what is left.
 * Tests of every layer use it to check that an authentication whose MAC
 * cannot be computed is refused. Nothing outside tests calls it. */
void nv_hmac_fail_next(int n);

#endif
