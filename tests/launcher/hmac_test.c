/* util/hmac: HMAC-SHA-256 against the test vectors of RFC 4231 (cases 1, 2
 * and 6: short key, short "Jefe" key, key longer than a block), the same MAC
 * given in pieces, the constant-time comparison, and the fault-injection
 * hook: a failed MAC is -1 with neither the right MAC nor zeros in out, and
 * n injected failures are n, however many threads race for them. */
#include "check.h"
#include "util/hmac.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static void unhex(const char *hex, uint8_t *out)
{
    for (size_t i = 0; hex[2 * i]; i++) {
        unsigned v;
        CHECK(sscanf(hex + 2 * i, "%2x", &v) == 1);
        out[i] = (uint8_t)v;
    }
}

static void check_vector(const void *key, size_t key_len, const char *msg, const char *want_hex)
{
    uint8_t want[NV_HMAC_SHA256_LEN], got[NV_HMAC_SHA256_LEN];
    unhex(want_hex, want);
    struct nv_hmac_part whole = { msg, strlen(msg) };
    CHECK(nv_hmac_sha256(key, key_len, &whole, 1, got) == 0);
    CHECK(memcmp(got, want, sizeof want) == 0);
    /* the same message cut into pieces, an empty one among them */
    size_t n = strlen(msg), a = n / 3, b = n / 2;
    struct nv_hmac_part cut[] = { { msg, a }, { "", 0 }, { msg + a, b - a }, { msg + b, n - b } };
    memset(got, 0, sizeof got);
    CHECK(nv_hmac_sha256(key, key_len, cut, 4, got) == 0);
    CHECK(memcmp(got, want, sizeof want) == 0);
}

static const uint8_t zeros[NV_HMAC_SHA256_LEN];

static int mac_once(uint8_t out[NV_HMAC_SHA256_LEN])
{
    struct nv_hmac_part part = { "message", 7 };
    return nv_hmac_sha256("key", 3, &part, 1, out);
}

#define RACERS     4
#define RACE_CALLS 200
#define INJECTED   150

static atomic_int race_failures;

static void *racer(void *arg)
{
    (void)arg;
    uint8_t out[NV_HMAC_SHA256_LEN];
    for (int i = 0; i < RACE_CALLS; i++)
        if (mac_once(out) != 0)
            atomic_fetch_add(&race_failures, 1);
    return NULL;
}

static void injection(void)
{
    uint8_t right[NV_HMAC_SHA256_LEN], out[NV_HMAC_SHA256_LEN];
    CHECK(mac_once(right) == 0);
    nv_hmac_fail_next(2);
    for (int i = 0; i < 2; i++) {
        memcpy(out, right, sizeof out);
        CHECK(mac_once(out) == -1);
        CHECK(memcmp(out, right, sizeof out) != 0 && memcmp(out, zeros, sizeof out) != 0);
    }
    CHECK(mac_once(out) == 0 && memcmp(out, right, sizeof out) == 0);
    /* cancelled before it is used up */
    nv_hmac_fail_next(5);
    nv_hmac_fail_next(0);
    CHECK(mac_once(out) == 0);
    nv_hmac_fail_next(-3);
    CHECK(mac_once(out) == 0);
    /* exactly INJECTED failures among RACERS threads calling at once */
    nv_hmac_fail_next(INJECTED);
    pthread_t t[RACERS];
    for (int i = 0; i < RACERS; i++)
        CHECK(pthread_create(&t[i], NULL, racer, NULL) == 0);
    for (int i = 0; i < RACERS; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(atomic_load(&race_failures) == INJECTED);
    CHECK(mac_once(out) == 0);
}

int main(void)
{
    uint8_t key1[20], key6[131];
    memset(key1, 0x0b, sizeof key1);
    memset(key6, 0xaa, sizeof key6);
    check_vector(key1, sizeof key1, "Hi There",
                 "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    check_vector("Jefe", 4, "what do ya want for nothing?",
                 "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    check_vector(key6, sizeof key6, "Test Using Larger Than Block-Size Key - Hash Key First",
                 "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");

    uint8_t a[32], b[32];
    memset(a, 7, sizeof a);
    memcpy(b, a, sizeof b);
    CHECK(nv_ct_equal(a, b, sizeof a));
    for (size_t i = 0; i < sizeof a; i += 31) {
        b[i] ^= 1;
        CHECK(!nv_ct_equal(a, b, sizeof a));
        b[i] ^= 1;
    }
    CHECK(nv_ct_equal(a, b, 0));
    injection();
    printf("hmac: ok\n");
    return 0;
}
