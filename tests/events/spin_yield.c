/* A spinning wait gives the CPU away between passes once it has made
 * NETVM_SPIN_YIELD of them, and never with NETVM_SPIN_YIELD=0 (the test's
 * environment says which it runs under). This program defines
 * sched_yield, so netvm's calls land here and are counted per thread.
 *
 * Waits that find nothing, each bounded by its timeout: netvm_wait_until
 * spinning (NETVM_WAIT_SPIN), netvm_wait_until spinning before it would
 * sleep (NETVM_SPIN_US is set far above the timeout) and netvm_evq_wait
 * (core's waiting loop). Each counts the yields of the waiting thread. */
#include "evt.h"

#include <sys/syscall.h>

static __thread unsigned long yields;

int sched_yield(void)
{
    yields++;
    return (int)syscall(SYS_sched_yield);
}

static void expect(const char *what, int on)
{
    if (on && yields == 0)
        FAILF("%s: no sched_yield in a 50 ms spin with NETVM_SPIN_YIELD=%s", what,
              getenv("NETVM_SPIN_YIELD") ? getenv("NETVM_SPIN_YIELD") : "(default)");
    if (!on && yields != 0)
        FAILF("%s: %lu sched_yield calls with NETVM_SPIN_YIELD=0", what, yields);
    printf("%s: %lu yields\n", what, yields);
}

int main(void)
{
    const char *setting = getenv("NETVM_SPIN_YIELD");
    int on = !setting || atoi(setting) != 0;
    netvm_ctx_t *ctx;
    CHECK_OK(netvm_init(&ctx, NULL));
    check_rank = netvm_rank(ctx);
    static uint64_t word;

    yields = 0;
    CHECK_ST(netvm_wait_until(ctx, &word, NETVM_CMP_EQ, 1, NETVM_WAIT_SPIN, 50, NULL), NETVM_ERR_TIMEOUT);
    expect("netvm_wait_until(NETVM_WAIT_SPIN)", on);

    yields = 0;
    CHECK_ST(netvm_wait_until(ctx, &word, NETVM_CMP_EQ, 1, 0, 50, NULL), NETVM_ERR_TIMEOUT);
    expect("netvm_wait_until(spin, then sleep)", on);

    netvm_event_t ev[4];
    int n = -1;
    yields = 0;
    CHECK_ST(netvm_evq_wait(ctx, ev, 4, &n, 50), NETVM_ERR_TIMEOUT);
    expect("netvm_evq_wait", on);

    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
