/* Once-only tripwires re-armed under a stream of accesses: every arming is
 * hit after it was made, so each must deliver exactly one event of its own
 * generation. An access that matched the previous arming and reaches its
 * claim late (after the owner disarmed and re-armed the same id) must not
 * use up the new arming's claim: its event would then be lost, and the
 * owner would wait for nothing (what the dqueue example's consumer once
 * did, under ThreadSanitizer's slower timing). One thread is the owner, the
 * other the initiator, on the same endpoint block. */
#define _GNU_SOURCE
#include "link/ep.h"
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

static struct nv_ep owner, peer;
static uint64_t word __attribute__((aligned(64)));
static atomic_int stop;
static atomic_ulong accesses;

static void *initiator(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        __atomic_store_n(&word, __atomic_load_n(&word, __ATOMIC_RELAXED) + 1, __ATOMIC_RELEASE);
        nv_ep_access(&peer, 1, (uint64_t)(uintptr_t)&word, 8, NETVM_TRIP_WRITE);
        atomic_fetch_add_explicit(&accesses, 1, memory_order_relaxed);
    }
    return NULL;
}

int main(void)
{
    CHECK(nv_ep_create(&owner, 0, 1024, 4, 1) == NETVM_OK);
    CHECK(nv_ep_attach(&peer, owner.h, owner.len, owner.wake_fd) == 0);
    pthread_t th;
    CHECK(pthread_create(&th, NULL, initiator, NULL) == 0);
    uint64_t start = (uint64_t)(uintptr_t)&word;
    uint32_t gen = 0;
    uint64_t stale = 0;
    double t0 = now_s();
    while (now_s() - t0 < 2.0) {
        gen++;
        nv_ep_trip_add(&owner, 0, gen, NETVM_TRIP_WRITE | NV_TRIP_ONCE, gen, start, start + 8);
        /* the initiator keeps writing: this arming's event must come */
        double t1 = now_s();
        int got = 0;
        while (!got) {
            struct nv_ep_rec r;
            while (nv_ep_pop(&owner, &r)) {
                CHECK(r.type == NETVM_EV_TRIPWIRE && r.id == 0);
                if (r.gen == gen)
                    got++;
                else if (r.gen < gen)
                    stale++;   /* an earlier arming's access, late: the owner drops it */
                else
                    FAILF("an event of generation %u while %u is the newest", r.gen, gen);
            }
            CHECK(nv_ep_take_overflow(&owner) == 0);
            if (!got && now_s() - t1 > 2.0)
                FAILF("arming %u of a once-only tripwire never fired (%lu accesses so far): its claim "
                      "was taken by an access to an earlier arming", gen, atomic_load(&accesses));
        }
        nv_ep_trip_del(&owner, 0, start);
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    printf("%u armings, each fired once; %lu late events of earlier armings dropped; %lu accesses\n", gen,
           (unsigned long)stale, atomic_load(&accesses));
    nv_ep_destroy(&owner);
    return 0;
}
