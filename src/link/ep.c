/* The endpoint block: creation by its owner, and the NIC's work on it
 * (matching tripwires, posting events, counting, waking). */
#define _GNU_SOURCE
#include "link/ep.h"
#include "util/log.h"
#include "util/membarrier.h"

#include <errno.h>
#include <stddef.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct nv_ep_slot {
    _Atomic uint64_t seq;
    struct nv_ep_rec rec;
} __attribute__((aligned(64)));

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static struct nv_ep_trip *states(const struct nv_ep *ep)    { return ep->states; }
static struct nv_ep_counter *counters(const struct nv_ep *ep) { return ep->counters; }

/* Take the layout from a checked copy of the header. */
static void make_view(struct nv_ep *ep, const struct nv_ep_hdr *layout)
{
    struct nv_ep_hdr *h = ep->h;
    struct nv_mpsc q = { .head = &h->ring_head, .tail = &h->ring_tail,
                         .slots = (uint8_t *)h + layout->ring_off, .mask = layout->ring_size - 1,
                         .stride = sizeof(struct nv_ep_slot), .size = sizeof(struct nv_ep_rec) };
    ep->ring = q;
    ep->table[0] = (struct nv_itree_node *)((char *)h + layout->table_off);
    ep->table[1] = ep->table[0] + layout->trip_cap + 1;
    ep->states = (struct nv_ep_trip *)((char *)h + layout->states_off);
    ep->counters = (struct nv_ep_counter *)((char *)h + layout->counters_off);
    ep->trip_cap = layout->trip_cap;
    ep->ncounters = layout->ncounters;
}

/* [off, off + n * size) lies inside a block of len bytes. */
static int fits(uint64_t off, uint64_t n, uint64_t size, uint64_t len)
{
    return off <= len && n <= (len - off) / size;
}

netvm_status_t nv_ep_create(struct nv_ep *ep, int rank, uint32_t ring_size, uint32_t trip_cap,
                            uint32_t ncounters)
{
    memset(ep, 0, sizeof *ep);
    ep->memfd = ep->wake_fd = -1;
    ep->owner = 1;
    if (ring_size < 2 || (ring_size & (ring_size - 1)) || !trip_cap || !ncounters)
        return NETVM_ERR_INVAL;
    size_t ring_off = round_up(sizeof(struct nv_ep_hdr), 4096);
    size_t table_off = round_up(ring_off + (size_t)ring_size * sizeof(struct nv_ep_slot), 4096);
    size_t states_off = round_up(table_off + 2 * ((size_t)trip_cap + 1) * sizeof(struct nv_itree_node), 4096);
    size_t counters_off = round_up(states_off + (size_t)trip_cap * sizeof(struct nv_ep_trip), 4096);
    size_t len = round_up(counters_off + (size_t)ncounters * sizeof(struct nv_ep_counter), 4096);
    ep->memfd = memfd_create("netvm-endpoint", MFD_CLOEXEC);
    ep->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ep->memfd < 0 || ep->wake_fd < 0 || ftruncate(ep->memfd, (off_t)len) != 0) {
        nv_error("cannot create the event queue: %s", strerror(errno));
        nv_ep_destroy(ep);
        return NETVM_ERR_SYS;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, ep->memfd, 0);
    if (p == MAP_FAILED) {
        nv_ep_destroy(ep);
        return NETVM_ERR_NOMEM;
    }
    ep->h = p;
    ep->len = len;
    struct nv_ep_hdr *h = ep->h;
    h->version = NV_EP_VERSION;
    h->rank = rank;
    h->wake_fd = ep->wake_fd;
    h->ring_size = ring_size;
    h->trip_cap = trip_cap;
    h->ncounters = ncounters;
    h->ring_off = ring_off;
    h->table_off = table_off;
    h->states_off = states_off;
    h->counters_off = counters_off;
    h->block_len = len;
    make_view(ep, h);
    nv_mpsc_init(&ep->ring);
    __atomic_store_n(&h->magic, NV_EP_MAGIC, __ATOMIC_RELEASE);
    return NETVM_OK;
}

void nv_ep_destroy(struct nv_ep *ep)
{
    if (ep->h)
        munmap(ep->h, ep->len);
    if (ep->memfd >= 0)
        close(ep->memfd);
    if (ep->wake_fd >= 0)
        close(ep->wake_fd);
    memset(ep, 0, sizeof *ep);
    ep->memfd = ep->wake_fd = -1;
}

int nv_ep_attach(struct nv_ep *ep, void *base, size_t len, int wake_fd)
{
    memset(ep, 0, sizeof *ep);
    ep->memfd = -1;
    ep->wake_fd = wake_fd;
    struct nv_ep_hdr c;   /* a copy: the owner can write the original while we check */
    if (len < sizeof c)
        return -1;
    memcpy(&c, base, offsetof(struct nv_ep_hdr, ring_head));
    if (c.magic != NV_EP_MAGIC || c.version != NV_EP_VERSION || c.block_len != len ||
        c.ring_size < 2 || (c.ring_size & (c.ring_size - 1)) || !c.trip_cap ||
        !fits(c.ring_off, c.ring_size, sizeof(struct nv_ep_slot), len) ||
        !fits(c.table_off, 2 * ((uint64_t)c.trip_cap + 1), sizeof(struct nv_itree_node), len) ||
        !fits(c.states_off, c.trip_cap, sizeof(struct nv_ep_trip), len) ||
        !fits(c.counters_off, c.ncounters, sizeof(struct nv_ep_counter), len))
        return -1;
    ep->h = base;
    ep->len = len;
    make_view(ep, &c);
    return 0;
}

/* --- posting and waking ---------------------------------------------------- */

static void wake_owner(struct nv_ep *ep)
{
    struct nv_ep_hdr *h = ep->h;
    /* the push, then the look at fd_armed: the light side of the handshake
     * whose heavy side is the owner's arming (nv_ep_arm_fd), so a poster
     * pays no fence and only a sleeper pays for one */
    nv_fence_light();
    if (atomic_load_explicit(&h->fd_armed, memory_order_relaxed) &&
        atomic_exchange_explicit(&h->fd_armed, 0, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t n = write(ep->wake_fd, &one, sizeof one);
        (void)n;   /* EAGAIN: already readable */
    }
}

int nv_ep_post(struct nv_ep *ep, const struct nv_ep_rec *r)
{
    int rc = nv_mpsc_push(&ep->ring, r);
    if (rc != 0)
        atomic_fetch_add_explicit(&ep->h->overflow, 1, memory_order_relaxed);
    /* a loss is reported as an event too: wake the owner either way */
    wake_owner(ep);
    return rc;
}

static void wake_memory_waiters(struct nv_ep *ep)
{
    struct nv_ep_hdr *h = ep->h;
    atomic_fetch_add_explicit(&h->wake_seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&h->wake_sleepers, memory_order_seq_cst))
        syscall(SYS_futex, &h->wake_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* --- matching ----------------------------------------------------------------- */

#define MATCH_MAX 64

/* Matches collected into a buffer of cap entries (full: look again with a
 * larger one). */
struct matches {
    uint64_t *data;
    size_t    n, cap;
};

static int collect(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    struct matches *m = arg;
    (void)start;
    (void)end;
    m->data[m->n++] = data;
    return m->n == m->cap;
}

/* Read the current copy of the table in one snapshot. Retried only if the
 * owner finished a change and began another one into the copy being read;
 * never waits for the owner. */
static void match(struct nv_ep *ep, uint64_t lo, uint64_t hi, struct matches *m)
{
    struct nv_ep_hdr *h = ep->h;
    for (unsigned tries = 0;; tries++) {
        uint64_t s1 = atomic_load_explicit(&h->table_seq, memory_order_acquire);
        unsigned cur = (unsigned)(s1 >> 1) & 1;
        uint32_t n = atomic_load_explicit(&h->table_n[cur], memory_order_relaxed);
        if (n > ep->trip_cap)
            n = ep->trip_cap;
        m->n = 0;
        nv_itree_query(ep->table[cur], n, lo, hi, collect, m);
        atomic_thread_fence(memory_order_acquire);
        uint64_t s2 = atomic_load_explicit(&h->table_seq, memory_order_relaxed);
        /* our copy is rewritten only from the second change after an even
         * s1 (the first goes into the other copy), the first after an odd */
        if (s2 - s1 < ((s1 & 1) ? 2u : 3u))
            return;
        if (tries > 1000) {
            /* a table changing faster than it can be read: the owner is
             * misbehaving; its tripwires do not fire for this access */
            m->n = 0;
            return;
        }
    }
}

static void fire(struct nv_ep *ep, uint32_t id, uint32_t gen, int src_rank, uint64_t addr, uint64_t len,
                 unsigned access, int *woke)
{
    if (id >= ep->trip_cap)
        return;
    struct nv_ep_trip *t = &states(ep)[id];
    uint64_t w = atomic_load_explicit(&t->word, memory_order_acquire);
    unsigned fl = NV_TRIP_FLAGS(w);
    if (NV_TRIP_GEN(w) != gen || !(fl & NV_TRIP_LIVE) || !(fl & access))
        return;
    if (fl & NV_TRIP_WAKE) {
        if (!*woke)
            wake_memory_waiters(ep);
        *woke = 1;
        return;
    }
    uint64_t user = atomic_load_explicit(&t->user, memory_order_relaxed);
    if (atomic_load_explicit(&t->word, memory_order_acquire) != w)
        return;   /* disarmed meanwhile */
    if (fl & NV_TRIP_ONCE) {
        /* the claim names the generation: an access that matched an
         * earlier arming of this id and comes late cannot use up the
         * claim of the arming now live (whose own match would then find
         * it taken, and its event would be lost) */
        uint32_t unclaimed = NV_TRIP_CLAIM_GEN(gen);
        if (!atomic_compare_exchange_strong(&t->claimed, &unclaimed, unclaimed | NV_TRIP_CLAIMED))
            return;
    }
    struct nv_ep_rec r = { .type = NETVM_EV_TRIPWIRE, .access = (uint16_t)(access & NETVM_TRIP_RW),
                           .rank = src_rank, .id = id, .gen = gen, .value = user, .addr = addr, .len = len };
    nv_ep_post(ep, &r);
}

/* Fire what one snapshot of the table matched. */
static void fire_all(struct nv_ep *ep, const struct matches *m, int src_rank, uint64_t addr, uint64_t len,
                     unsigned access)
{
    int woke = 0;
    for (size_t i = 0; i < m->n; i++)
        fire(ep, (uint32_t)(m->data[i] >> 32), (uint32_t)m->data[i], src_rank, addr, len, access, &woke);
}

void nv_ep_access(struct nv_ep *ep, int src_rank, uint64_t addr, uint64_t len, unsigned access)
{
    /* the data is written; the table is read after it (see ep.h) */
    nv_fence_light();
    if (!nv_ep_has_trips(ep) || !len)
        return;
    uint64_t hi = addr + len < addr ? UINT64_MAX : addr + len;
    uint64_t small[MATCH_MAX];   /* the common case, on the stack and not zeroed */
    struct matches m = { small, 0, MATCH_MAX };
    match(ep, addr, hi, &m);
    if (m.n == m.cap) {
        /* many tripwires overlap this access: all of them from one snapshot
         * (pieces of several could straddle a change of the table) */
        uint64_t *big = malloc((size_t)ep->trip_cap * sizeof *big);
        if (big) {
            m = (struct matches){ big, 0, ep->trip_cap };
            match(ep, addr, hi, &m);
        } else {
            nv_error("out of memory matching tripwires; only %d of them fire", MATCH_MAX);
        }
        fire_all(ep, &m, src_rank, addr, len, access);
        free(big);
        return;
    }
    fire_all(ep, &m, src_rank, addr, len, access);
}

netvm_status_t nv_ep_count(struct nv_ep *ep, int src_rank, uint32_t c, uint64_t n)
{
    if (c >= ep->ncounters)
        return NETVM_ERR_INVAL;
    struct nv_ep_counter *k = &counters(ep)[c];
    /* pairs with the owner's store of armed then load of pending */
    uint64_t old = atomic_fetch_add_explicit(&k->pending, n, memory_order_seq_cst);
    if (old == 0 && n && atomic_load_explicit(&k->armed, memory_order_seq_cst)) {
        struct nv_ep_rec r = { .type = NV_EP_COUNTER, .rank = src_rank, .id = c };
        nv_ep_post(ep, &r);
    }
    return NETVM_OK;
}

/* --- the owner ------------------------------------------------------------------ */

int nv_ep_pop(struct nv_ep *ep, struct nv_ep_rec *r)
{
    return nv_mpsc_pop(&ep->ring, r);
}

int nv_ep_nonempty(struct nv_ep *ep)
{
    return nv_mpsc_nonempty(&ep->ring) || atomic_load_explicit(&ep->h->overflow, memory_order_relaxed);
}

uint64_t nv_ep_take_overflow(struct nv_ep *ep)
{
    if (!atomic_load_explicit(&ep->h->overflow, memory_order_relaxed))
        return 0;
    return atomic_exchange_explicit(&ep->h->overflow, 0, memory_order_relaxed);
}

int nv_ep_arm_fd(struct nv_ep *ep)
{
    uint64_t v;
    /* what was signalled before is consumed: readable again means new */
    while (read(ep->wake_fd, &v, sizeof v) > 0)
        ;
    atomic_store_explicit(&ep->h->fd_armed, 1, memory_order_seq_cst);
    nv_fence_heavy();
    if (nv_ep_nonempty(ep)) {
        atomic_store_explicit(&ep->h->fd_armed, 0, memory_order_relaxed);
        return 1;
    }
    return 0;
}

/* A change of the table: write the copy readers do not use, starting from
 * the current one, then make it current. */
static struct nv_itree_node *table_change_begin(struct nv_ep *ep, uint32_t *n)
{
    struct nv_ep_hdr *h = ep->h;
    uint64_t s = atomic_load_explicit(&h->table_seq, memory_order_relaxed);
    unsigned cur = (unsigned)(s >> 1) & 1;
    atomic_store_explicit(&h->table_seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    struct nv_itree_node *from = ep->table[cur], *to = ep->table[cur ^ 1];
    *n = atomic_load_explicit(&h->table_n[cur], memory_order_relaxed);
    for (uint32_t i = 0; i < *n; i++) {
        __atomic_store_n(&to[i].start, __atomic_load_n(&from[i].start, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        __atomic_store_n(&to[i].end, __atomic_load_n(&from[i].end, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
        __atomic_store_n(&to[i].data, __atomic_load_n(&from[i].data, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    }
    return to;
}

static void table_change_end(struct nv_ep *ep, struct nv_itree_node *to, uint32_t n)
{
    struct nv_ep_hdr *h = ep->h;
    nv_itree_build(to, n);
    uint64_t s = atomic_load_explicit(&h->table_seq, memory_order_relaxed);
    unsigned next = (unsigned)((s + 1) >> 1) & 1;
    atomic_store_explicit(&h->table_n[next], n, memory_order_relaxed);
    atomic_store_explicit(&h->table_seq, s + 1, memory_order_release);
    atomic_store_explicit(&h->trips, n, memory_order_release);
}

void nv_ep_trip_add(struct nv_ep *ep, uint32_t id, uint32_t gen, unsigned flags, uint64_t user,
                    uint64_t start, uint64_t end)
{
    struct nv_ep_trip *t = &states(ep)[id];
    atomic_store_explicit(&t->claimed, NV_TRIP_CLAIM_GEN(gen), memory_order_relaxed);
    atomic_store_explicit(&t->user, user, memory_order_relaxed);
    atomic_store_explicit(&t->word, NV_TRIP_WORD(gen, flags | NV_TRIP_LIVE), memory_order_release);
    uint32_t n;
    struct nv_itree_node *to = table_change_begin(ep, &n);
    n = (uint32_t)nv_itree_insert(to, n, start, end, (uint64_t)id << 32 | gen);
    table_change_end(ep, to, n);
    /* the owner looks at its memory next: every access either sees this
     * table or wrote before the owner looks */
    nv_fence_heavy();
}

void nv_ep_trip_del(struct nv_ep *ep, uint32_t id, uint64_t start)
{
    struct nv_ep_trip *t = &states(ep)[id];
    uint64_t w = atomic_load_explicit(&t->word, memory_order_relaxed);
    atomic_store_explicit(&t->word, w & ~(uint64_t)NV_TRIP_LIVE, memory_order_release);
    uint32_t n;
    struct nv_itree_node *to = table_change_begin(ep, &n);
    n = (uint32_t)nv_itree_remove(to, n, start, (uint64_t)id << 32 | NV_TRIP_GEN(w));
    table_change_end(ep, to, n);
}

uint64_t nv_ep_counter_arm(struct nv_ep *ep, uint32_t c)
{
    struct nv_ep_counter *k = &counters(ep)[c];
    atomic_store_explicit(&k->armed, 1, memory_order_seq_cst);
    if (!atomic_load_explicit(&k->pending, memory_order_seq_cst))
        return 0;   /* the next increment posts a record */
    return nv_ep_counter_take(ep, c);
}

uint64_t nv_ep_counter_take(struct nv_ep *ep, uint32_t c)
{
    if (c >= ep->ncounters)
        return 0;
    struct nv_ep_counter *k = &counters(ep)[c];
    if (!atomic_load_explicit(&k->armed, memory_order_relaxed))
        return 0;   /* a stale record: the owner took these already */
    uint64_t n = atomic_exchange_explicit(&k->pending, 0, memory_order_seq_cst);
    if (n)
        atomic_store_explicit(&k->armed, 0, memory_order_relaxed);
    return n;
}

uint32_t nv_ep_wake_seq(struct nv_ep *ep)
{
    atomic_fetch_add_explicit(&ep->h->wake_sleepers, 1, memory_order_seq_cst);
    return atomic_load_explicit(&ep->h->wake_seq, memory_order_seq_cst);
}

void nv_ep_wake_wait(struct nv_ep *ep, uint32_t seen, uint64_t timeout_ns)
{
    struct timespec ts = { (time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull) };
    if (atomic_load_explicit(&ep->h->wake_seq, memory_order_seq_cst) == seen)
        syscall(SYS_futex, &ep->h->wake_seq, FUTEX_WAIT, seen, &ts, NULL, 0);
    atomic_fetch_sub_explicit(&ep->h->wake_sleepers, 1, memory_order_relaxed);
}

void nv_ep_wake_cancel(struct nv_ep *ep)
{
    atomic_fetch_sub_explicit(&ep->h->wake_sleepers, 1, memory_order_relaxed);
}
