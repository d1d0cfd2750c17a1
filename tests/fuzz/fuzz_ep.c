/* libFuzzer target: the NIC's side of an endpoint block whose owner is
 * hostile. A peer on the machine maps our block and we map theirs; the
 * tripwire table, the once-only claims, the counters and the ring positions
 * of a peer's block are bytes that peer can write at any time. Whatever
 * they hold, matching an access, counting and posting must stay inside the
 * block and finish. The input overwrites those areas, then drives accesses
 * over the whole address range. */
#define _GNU_SOURCE
#include "link/ep.h"

#include <stdlib.h>
#include <string.h>

static struct nv_ep owner, peer;

static void once(void)
{
    if (owner.h)
        return;
    if (nv_ep_create(&owner, 0, 64, 16, 4) != NETVM_OK)
        abort();
    /* the peer's view, as a shm initiator attaches */
    if (nv_ep_attach(&peer, owner.h, owner.len, owner.wake_fd) != 0)
        abort();
}

/* Copy the next chunk of input over [dst, dst + cap). */
static void overwrite(void *dst, size_t cap, const uint8_t **p, size_t *left)
{
    size_t n = *left < cap ? *left : cap;
    memcpy(dst, *p, n);
    *p += n;
    *left -= n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    once();
    if (size < 8)
        return 0;
    struct nv_ep_hdr *h = owner.h;
    const uint8_t *p = data + 8;
    size_t left = size - 8;
    /* any sequence, counts and table contents (an odd sequence: an owner
     * that died while changing its table) */
    atomic_store(&h->table_seq, data[0]);
    atomic_store(&h->table_n[0], (uint32_t)data[1] | (uint32_t)data[2] << 8);
    atomic_store(&h->table_n[1], (uint32_t)data[2] | (uint32_t)data[1] << 8);
    atomic_store(&h->trips, data[1]);
    overwrite(peer.table[0], 2 * (peer.trip_cap + 1) * sizeof *peer.table[0], &p, &left);
    overwrite(peer.states, peer.trip_cap * sizeof *peer.states, &p, &left);
    overwrite(peer.counters, peer.ncounters * sizeof *peer.counters, &p, &left);
    uint64_t addrs[4] = { 0, UINT64_MAX - 7, 1ull << 40, 0 };
    memcpy(&addrs[3], data + 3, 5);
    for (int i = 0; i < 4; i++) {
        nv_ep_access(&peer, 1, addrs[i], 8, NETVM_TRIP_RW);
        nv_ep_access(&peer, 1, addrs[i], UINT64_MAX, NETVM_TRIP_WRITE);
    }
    for (uint32_t c = 0; c < 6; c++)
        nv_ep_count(&peer, 1, c, data[3]);
    struct nv_ep_rec r = { .type = NETVM_EV_NOTIFY, .rank = 1 };
    nv_ep_post(&peer, &r);
    /* the owner takes what came, and clears the ground for the next input */
    while (nv_ep_pop(&owner, &r))
        ;
    nv_ep_take_overflow(&owner);
    atomic_store(&h->table_seq, 2);
    atomic_store(&h->table_n[0], 0);
    atomic_store(&h->table_n[1], 0);
    atomic_store(&h->trips, 0);
    return 0;
}
