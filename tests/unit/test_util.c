/* util: every status has its own message; configuration parsing clamps
 * and falls back loudly; random keys are nonzero and differ. */
#include "check.h"
#include "util/config.h"
#include "util/random.h"

#include <string.h>

int main(void)
{
    for (int a = 0; a < NETVM_STATUS_COUNT; a++) {
        CHECK(netvm_strerror((netvm_status_t)a) != NULL);
        CHECK(strcmp(netvm_strerror((netvm_status_t)a), "unknown netvm status") != 0);
        for (int b = 0; b < a; b++)
            CHECK(strcmp(netvm_strerror((netvm_status_t)a), netvm_strerror((netvm_status_t)b)) != 0);
    }
    CHECK(strcmp(netvm_strerror(NETVM_STATUS_COUNT), "unknown netvm status") == 0);
    CHECK(strcmp(netvm_strerror((netvm_status_t)-1), "unknown netvm status") == 0);

    unsetenv("NETVM_TIMEOUT");
    CHECK(nv_config_long("NETVM_TIMEOUT", 1, 1000000) == 10000);
    setenv("NETVM_TIMEOUT", "250", 1);
    CHECK(nv_config_long("NETVM_TIMEOUT", 1, 1000000) == 250);
    setenv("NETVM_TIMEOUT", "12abc", 1);
    CHECK(nv_config_long("NETVM_TIMEOUT", 1, 1000000) == 10000);
    setenv("NETVM_TIMEOUT", "0", 1);
    CHECK(nv_config_long("NETVM_TIMEOUT", 1, 1000000) == 1);
    setenv("NETVM_TIMEOUT", "99999999", 1);
    CHECK(nv_config_long("NETVM_TIMEOUT", 1, 1000000) == 1000000);
    for (size_t i = 0; i < nv_config_nvars; i++)
        CHECK(strncmp(nv_config_vars[i].name, "NETVM_", 6) == 0 && nv_config_vars[i].meaning);

    uint64_t k1 = nv_random_key(), k2 = nv_random_key();
    CHECK(k1 && k2 && k1 != k2);
    return 0;
}
