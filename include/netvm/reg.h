/* Registration strategies: what a context pinned for its peers and what it
 * asked its peers to pin (docs/registration.md). The strategy is chosen by
 * NETVM_REG (none, pin-all, rendezvous, rendezvous-keep, firehose). */
#ifndef NETVM_REG_H
#define NETVM_REG_H

#include <netvm/netvm.h>

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct netvm_reg_stats {
    const char *strategy;   /* NETVM_REG in force ("none", "firehose", ...) */
    /* initiator: operations whose remote range was already pinned for them
     * (a firehose hit), that needed a round trip first (misses), and the
     * round trips sent (moves: a miss's, or any rendezvous pin) */
    uint64_t hits, misses, moves;
    /* target: mlock and munlock calls made for peers, bytes pinned now,
     * the most ever pinned at once, buckets pinned now (in use or
     * victims), the victims now, and the peers' holds given back because
     * the peer left or died */
    uint64_t pins, unpins;
    uint64_t pinned_bytes, pinned_high;
    uint64_t buckets, victims;
    uint64_t peer_releases;
    /* accesses by peers refused because their range was not pinned
     * (NETVM_ERR_UNPINNED, with NETVM_TCP_PINNED) */
    uint64_t refused;
} netvm_reg_stats_t;

/* The counters of this context (both sides). NETVM_ERR_INVAL if ctx or
 * out is NULL. */
netvm_status_t netvm_reg_stats(netvm_ctx_t *ctx, netvm_reg_stats_t *out);

#ifdef __cplusplus
}
#endif

#endif
