/* The registration policy without a network (a keyed pinner at the end:
 * every pin a registration with a key of its own, learnt per bucket): an initiator's firehose
 * table whose moves go straight to a target's pin table in this process
 * (real mlock on real memory). Hits cost no move, a miss past F moves the
 * oldest unused firehose, the victim FIFO keeps MAXVICTIM buckets and
 * unpins the oldest beyond, the pinned total never exceeds M + MAXVICTIM,
 * a bucket in use is never a victim, a failed move leaves nothing held, a
 * dead peer's holds go back, rendezvous unpins through its next move. */
#include "check.h"
#include "reg/reg.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define BS 4096ull

/* A keyed pinner as an RDMA link's would be: each pin a new key, each
 * unpin retires one; live keys are the ones a NIC would accept. */
static uint64_t next_key = 100, live_keys[64];
static unsigned nlive, key_rights[256];   /* by key - 100: what each registration allows */

static netvm_status_t key_pin(void *arg, uint64_t addr, uint64_t len, unsigned rights, void **h, uint64_t *key)
{
    (void)arg;
    (void)addr;
    (void)len;
    CHECK(nlive < 64 && next_key < 100 + 256);
    key_rights[next_key - 100] = rights;
    live_keys[nlive++] = *key = next_key++;
    *h = (void *)(uintptr_t)*key;
    return NETVM_OK;
}

static void key_unpin(void *arg, void *h)
{
    (void)arg;
    for (unsigned i = 0; i < nlive; i++)
        if (live_keys[i] == (uintptr_t)h) {
            live_keys[i] = live_keys[--nlive];
            return;
        }
    CHECK(!"unpinned a key never pinned");
}

static int key_live(uint64_t k)
{
    for (unsigned i = 0; i < nlive; i++)
        if (live_keys[i] == k)
            return 1;
    return 0;
}

static struct nv_reg *target;
static int fail_next;

static netvm_status_t loop_move(void *arg, int peer, const void *seg, unsigned flags, const uint64_t *rel,
                                unsigned nrel, const struct nv_reg_range *acq, unsigned nacq,
                                struct nv_reg_key *keys)
{
    (void)arg;
    /* seg: the segment's rights, where a test names them */
    unsigned rights = seg ? *(const unsigned *)seg : NETVM_RW;
    if (fail_next) {
        /* the target took the releases, then the answer was lost */
        fail_next = 0;
        CHECK_OK(nv_reg_serve_move(target, peer, flags, rights, rel, nrel, NULL, 0, NULL));
        return NETVM_ERR_PEER;
    }
    return nv_reg_serve_move(target, peer, flags, rights, rel, nrel, acq, nacq, keys);
}

static netvm_status_t no_wait(void *arg, int (*done)(void *), void *darg, int timeout_ms)
{
    (void)arg;
    (void)timeout_ms;
    return done(darg) ? NETVM_OK : NETVM_ERR_TIMEOUT;
}

static struct nv_reg *make(enum nv_reg_kind k, uint64_t m, uint64_t mv)
{
    struct nv_reg_params p = { .kind = k, .bucket = BS, .m = m, .maxvictim = mv, .peers = 1, .timeout_ms = 0 };
    struct nv_reg_net net = { .move = loop_move, .wait = no_wait };
    struct nv_reg *r;
    CHECK_OK(nv_reg_create(&r, &p, &net));
    return r;
}

static netvm_reg_stats_t st(struct nv_reg *r)
{
    netvm_reg_stats_t s;
    nv_reg_get_stats(r, &s);
    return s;
}

int main(void)
{
    uint8_t *mem = mmap(NULL, 64 * BS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(mem != MAP_FAILED);
    uint64_t a = (uint64_t)(uintptr_t)mem;

    /* firehose: M = 4 buckets (F = 4), MAXVICTIM = 2 */
    target = make(NV_REG_FIREHOSE, 4 * BS, 2 * BS);
    struct nv_reg *ini = make(NV_REG_FIREHOSE, 4 * BS, 2 * BS);
    CHECK(!nv_reg_pinned(target, a, 8));
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 10, 8, NULL));
    CHECK(nv_reg_pinned(target, a + 10, 8) && !nv_reg_pinned(target, a + BS, 8));
    nv_reg_release(ini, 1, 0, a + 10, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 100, 8, NULL));   /* a hit: no move */
    nv_reg_release(ini, 1, 0, a + 100, 8);
    netvm_reg_stats_t s = st(ini);
    CHECK(s.hits == 1 && s.misses == 1 && s.moves == 1);
    /* two buckets at once, then F full: buckets 0..3 */
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + BS - 4, 8, NULL));
    nv_reg_release(ini, 1, 0, a + BS - 4, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 2 * BS, 2 * BS, NULL));
    /* buckets 2 and 3 in use; 0 and 1 unused: the next miss moves bucket 0 */
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 8 * BS, 8, NULL));
    s = st(target);
    CHECK(s.buckets == 5 && s.victims == 1 && s.pinned_bytes == 5 * BS);
    CHECK(nv_reg_pinned(target, a, 8));   /* a victim stays pinned */
    /* bucket 1 moves too; then the in-use ones (2, 3, 8) cannot: F is taken */
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 9 * BS, 8, NULL));
    CHECK_ST(nv_reg_acquire(ini, 1, 0, NULL, a + 10 * BS, 8, NULL), NETVM_ERR_TIMEOUT);
    s = st(target);
    CHECK(s.victims == 2 && s.buckets == 6 && s.unpins == 0);
    nv_reg_release(ini, 1, 0, a + 9 * BS, 8);
    /* now bucket 9 is the only unused one: 10 replaces it, the FIFO
     * overflows MAXVICTIM and its oldest (bucket 0) is unpinned */
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 10 * BS, 8, NULL));
    s = st(target);
    CHECK(s.victims == 2 && s.unpins == 1 && !nv_reg_pinned(target, a, 8) && nv_reg_pinned(target, a + BS, 8));
    CHECK(s.pinned_high <= 6 * BS);
    /* buckets in use are never unpinned */
    CHECK(nv_reg_pinned(target, a + 2 * BS, 2 * BS) && nv_reg_pinned(target, a + 8 * BS, 8));
    /* a failed move leaves nothing held at either end */
    nv_reg_release(ini, 1, 0, a + 10 * BS, 8);
    fail_next = 1;
    CHECK_ST(nv_reg_acquire(ini, 1, 0, NULL, a + 20 * BS, 8, NULL), NETVM_ERR_PEER);
    CHECK(!nv_reg_pinned(target, a + 20 * BS, 8));
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 20 * BS, 8, NULL));
    CHECK(nv_reg_pinned(target, a + 20 * BS, 8));
    /* the target refuses holds beyond M whoever asks (another peer) */
    CHECK_ST(nv_reg_serve_move(target, 2, 0, NETVM_RW, NULL, 0, &(struct nv_reg_range){ a + 30 * BS, BS }, 1, NULL), NETVM_ERR_NOMEM);
    /* peer 1 dies: its holds go back, at most MAXVICTIM stays pinned */
    nv_reg_peer_gone(target, 1);
    s = st(target);
    CHECK(s.peer_releases == 4 && s.victims == 2 && s.buckets == 2 && s.pinned_bytes == 2 * BS);
    nv_reg_destroy(ini);
    nv_reg_destroy(target);

    /* rendezvous: each acquire is a move; the release rides on the next */
    target = make(NV_REG_RENDEZVOUS, 16 * BS, 0);
    ini = make(NV_REG_RENDEZVOUS, 16 * BS, 0);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a, 3 * BS, NULL));
    CHECK(nv_reg_pinned(target, a, 3 * BS));
    nv_reg_release(ini, 1, 0, a, 3 * BS);
    CHECK(nv_reg_pinned(target, a, 3 * BS));   /* nothing sent yet */
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 5 * BS, 8, NULL));
    CHECK(!nv_reg_pinned(target, a, 8) && nv_reg_pinned(target, a + 5 * BS, 8));
    s = st(target);
    CHECK(s.unpins == 3 && s.buckets == 1);
    CHECK(st(ini).moves == 2 && st(ini).hits == 0);
    nv_reg_destroy(ini);
    nv_reg_destroy(target);

    /* rendezvous-keep: asked again, a held bucket takes no second hold */
    target = make(NV_REG_RENDEZVOUS_KEEP, 16 * BS, 0);
    ini = make(NV_REG_RENDEZVOUS_KEEP, 16 * BS, 0);
    for (int i = 0; i < 3; i++) {
        CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a, 8, NULL));
        nv_reg_release(ini, 1, 0, a, 8);
    }
    s = st(target);
    CHECK(s.pins == 1 && s.unpins == 0);
    nv_reg_peer_gone(target, 1);
    CHECK(st(target).peer_releases == 1 && st(target).unpins == 1);
    nv_reg_destroy(ini);
    nv_reg_destroy(target);

    /* pin-all: a range pinned whole, then not */
    target = make(NV_REG_PIN_ALL, 16 * BS, 0);
    CHECK_OK(nv_reg_pin_whole(target, a + 1, 40 * BS));
    CHECK(nv_reg_pinned(target, a + 1, 40 * BS) && !nv_reg_pinned(target, a, 8));
    nv_reg_unpin_whole(target, a + 1, 40 * BS);
    CHECK(!nv_reg_pinned(target, a + 1, 8) && st(target).pinned_bytes == 0);
    nv_reg_destroy(target);

    /* keyed (the ofi link's registrations): firehose with F = 1 and no
     * victims. Each bucket gets its own key; a bucket moved away loses its
     * key, moved back it has a new one, which the acquire learns. */
    static const struct nv_reg_pinner kp = { .pin = key_pin, .unpin = key_unpin };
    target = make(NV_REG_FIREHOSE, BS, 0);
    ini = make(NV_REG_FIREHOSE, BS, 0);
    nv_reg_set_pinner(target, &kp, 1);
    nv_reg_set_pinner(ini, NULL, 1);
    CHECK(nv_reg_max_span(ini) == BS);
    struct nv_reg_key k1, k2, k3, k4;
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 8, 8, &k1));
    CHECK(key_live(k1.key) && k1.base == a);
    nv_reg_release(ini, 1, 0, a + 8, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + 16, 8, &k2));   /* a hit: the same key */
    CHECK(k2.key == k1.key && st(ini).hits == 1);
    nv_reg_release(ini, 1, 0, a + 16, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a + BS, 8, &k3));   /* moves: bucket 0 unpinned */
    CHECK(k3.key != k1.key && key_live(k3.key) && !key_live(k1.key) && k3.base == a + BS);
    nv_reg_release(ini, 1, 0, a + BS, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 0, NULL, a, 8, &k4));        /* back: a new registration */
    CHECK(key_live(k4.key) && k4.key != k1.key && !key_live(k3.key));
    nv_reg_release(ini, 1, 0, a, 8);
    s = st(target);
    CHECK(s.pins == 3 && s.unpins == 2 && s.pinned_bytes == BS);
    nv_reg_destroy(ini);
    nv_reg_destroy(target);
    CHECK(nlive == 0);   /* destroy closed the last registration */

    /* keyed, one bucket shared by a read-only segment (sid 1) and a
     * read-write one (sid 2): each segment gets a firehose of its own and
     * a registration with its own rights, so the read-only segment's key
     * never allows a write */
    target = make(NV_REG_FIREHOSE, 4 * BS, 0);
    ini = make(NV_REG_FIREHOSE, 4 * BS, 0);
    nv_reg_set_pinner(target, &kp, 1);
    nv_reg_set_pinner(ini, NULL, 1);
    static const unsigned ro = NETVM_READ, rw = NETVM_RW;
    struct nv_reg_key kr, kw, kr2;
    CHECK_OK(nv_reg_acquire(ini, 1, 1, &ro, a + 8, 8, &kr));
    CHECK_OK(nv_reg_acquire(ini, 1, 2, &rw, a + 16, 8, &kw));
    CHECK(kr.key != kw.key && key_live(kr.key) && key_live(kw.key));
    CHECK(key_rights[kr.key - 100] == NETVM_READ && key_rights[kw.key - 100] == NETVM_RW);
    nv_reg_release(ini, 1, 1, a + 8, 8);
    nv_reg_release(ini, 1, 2, a + 16, 8);
    CHECK_OK(nv_reg_acquire(ini, 1, 1, &ro, a + 24, 8, &kr2));   /* a hit on the read-only firehose */
    CHECK(kr2.key == kr.key && st(ini).hits == 1);
    nv_reg_release(ini, 1, 1, a + 24, 8);
    nv_reg_destroy(ini);
    nv_reg_destroy(target);
    CHECK(nlive == 0);
    munmap(mem, 64 * BS);
    printf("reg policy ok\n");
    return 0;
}
