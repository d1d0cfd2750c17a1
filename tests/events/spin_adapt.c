/* netvm_wait_until adapts its spin (core/signal.c): a word that arrives
 * soon after its waiter went to sleep doubles the next wait's spin, up to
 * NETVM_SPIN_MAX_US; a wait that slept until its timeout halves it, not
 * below NETVM_SPIN_US; NETVM_SPIN_US=0 never spins and never adapts.
 *
 * One rank, two threads: the waiter waits (default flags) for a word of
 * its own exported memory; the setter waits until the waiter has gone to
 * sleep (the endpoint counts sleepers on memory) and then writes the word
 * with a put, which wakes the waiter through its wake tripwire. After each
 * round the spin (read from the context) must be the doubled one: the
 * test's environment sets NETVM_SPIN_MAX_US far above any sleep here, so
 * the outcome does not depend on how busy the machine is.
 *   spin_adapt [off]   (off: run with NETVM_SPIN_US=0) */
#include "check.h"
#include "core/internal.h"

#include <netvm/events.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define ROUNDS 6

static netvm_ctx_t *ctx;
static netvm_rseg_t *self;
static atomic_int round_no;

static void *setter(void *arg)
{
    (void)arg;
    for (int r = 1; r <= ROUNDS; r++) {
        while (atomic_load(&round_no) != r)
            sched_yield();
        /* the waiter has announced its sleep (nv_ep_wake_seq) */
        while (atomic_load(&ctx->ep.h->wake_sleepers) == 0)
            sched_yield();
        CHECK_OK(netvm_put_imm(ctx, self, 0, (uint64_t)r, 0));
    }
    return NULL;
}

static uint64_t spin_now(void) { return atomic_load(&ctx->word_spin_ns); }

int main(int argc, char **argv)
{
    int off = argc > 1 && !strcmp(argv[1], "off");
    netvm_config_t cfg = { .thread_level = NETVM_THREAD_MULTIPLE };
    CHECK_OK(netvm_init(&ctx, &cfg));
    check_rank = netvm_rank(ctx);
    uint64_t *w;
    netvm_seg_t *seg;
    CHECK_OK(netvm_alloc_shared(ctx, 4096, NETVM_RW, "w", (void **)&w, &seg));
    CHECK_OK(netvm_import(ctx, netvm_rank(ctx), "w", &self));
    uint64_t base = ctx->spin_ns, max = ctx->word_spin_max;
    CHECK(off ? base == 0 : base == 20000);
    CHECK(spin_now() == base);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, setter, NULL) == 0);
    uint64_t want = base;
    for (int r = 1; r <= ROUNDS; r++) {
        atomic_store(&round_no, r);
        CHECK_OK(netvm_wait_until(ctx, w, NETVM_CMP_GE, (uint64_t)r, 0, 60000, NULL));
        if (!off)
            want = want * 2 < max ? want * 2 : max;
        printf("round %d: spin %llu ns\n", r, (unsigned long long)spin_now());
        if (spin_now() != want)
            FAILF("after a short sleep in round %d the spin is %llu ns, wanted %llu", r,
                  (unsigned long long)spin_now(), (unsigned long long)want);
    }
    CHECK(pthread_join(t, NULL) == 0);
    /* a word that never comes: the wait spins, sleeps until its timeout */
    int timeout_ms = (int)(spin_now() / 1000000) + 20;
    CHECK(netvm_wait_until(ctx, w, NETVM_CMP_GE, ROUNDS + 1, 0, timeout_ms, NULL) == NETVM_ERR_TIMEOUT);
    if (!off)
        want = want / 2 > base ? want / 2 : base;
    printf("after a timeout: spin %llu ns\n", (unsigned long long)spin_now());
    if (spin_now() != want)
        FAILF("after a timed-out sleep the spin is %llu ns, wanted %llu", (unsigned long long)spin_now(),
              (unsigned long long)want);
    CHECK_OK(netvm_release(self));
    CHECK_OK(netvm_unexport(seg));
    CHECK_OK(netvm_finalize(ctx));
    return 0;
}
