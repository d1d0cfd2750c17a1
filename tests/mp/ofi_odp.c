/* NETVM_OFI_ODP asks the verbs provider for on-demand paging through its
 * environment (FI_VERBS_USE_ODP), before the provider loads. This machine
 * has no verbs device, so opening the link fails (what ODP then does is
 * the HCA's); what is checked is that the request was made, or not:
 *
 *   ofi_odp 1|0   -- the expected FI_VERBS_USE_ODP afterwards ("1" / unset)
 */
#include "check.h"

#include <string.h>

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    int want = atoi(argv[1]);
    netvm_ctx_t *ctx = NULL;
    netvm_status_t st = netvm_init(&ctx, NULL);
    if (st == NETVM_OK) {
        /* a verbs device after all: the request must have been made too */
        check_rank = netvm_rank(ctx);
        CHECK_OK(netvm_finalize(ctx));
    }
    const char *v = getenv("FI_VERBS_USE_ODP");
    if (want)
        CHECK(v && !strcmp(v, "1"));
    else
        CHECK(!v);
    printf("FI_VERBS_USE_ODP=%s after netvm_init (%s)\n", v ? v : "(unset)", netvm_strerror(st));
    return 0;
}
