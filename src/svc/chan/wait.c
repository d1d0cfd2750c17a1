/* Waiting on a local word written by a peer, without trusting the peer to
 * be alive: netvm_wait_until sleeps until the word changes, which a dead
 * peer never does, so the wait runs in slices and looks at the peer's
 * liveness between them. */
#include "chan_int.h"
#include "util/config.h"

#include <stdlib.h>
#include <time.h>

int nv_chan_poll_ms(void)
{
    static _Atomic int cached;   /* 0: not read yet */
    int v = cached;
    if (v == 0)
        cached = v = (int)nv_config_long("NETVM_CHAN_POLL_MS", 1, 60000);
    return v;
}

int nv_chan_spin_us(void)
{
    static _Atomic int cached = -1;   /* -1: not read yet */
    int v = cached;
    if (v < 0)
        cached = v = (int)nv_config_long("NETVM_SPIN_US", 0, 10000000);
    return v;
}

double nv_chan_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int nv_chan_left_ms(int timeout_ms, double start_ms)
{
    if (timeout_ms < 0)
        return -1;
    double left = (double)timeout_ms - (nv_chan_now_ms() - start_ms);
    return left <= 0 ? 0 : (int)left + 1;
}

int nv_chan_peer_alive(netvm_ctx_t *ctx, int peer)
{
    if (peer < 0)
        return 1;
    netvm_peer_info_t info;
    if (netvm_peer_info(ctx, peer, &info) != NETVM_OK)
        return 0;
    return info.alive;
}

netvm_status_t nv_chan_wait_word(netvm_ctx_t *ctx, const uint64_t *word, netvm_cmp_t cmp, uint64_t value,
                                 int peer, int timeout_ms)
{
    if (timeout_ms == 0)
        return NETVM_ERR_AGAIN;
    double start = nv_chan_now_ms();
    for (;;) {
        int slice = nv_chan_poll_ms();
        int left = nv_chan_left_ms(timeout_ms, start);
        if (left >= 0 && left < slice)
            slice = left;
        if (slice == 0)
            return NETVM_ERR_TIMEOUT;
        netvm_status_t st = netvm_wait_until(ctx, word, cmp, value, 0, slice, NULL);
        if (st != NETVM_ERR_TIMEOUT)
            return st;
        if (!nv_chan_peer_alive(ctx, peer))
            return NETVM_ERR_PEER;
    }
}
