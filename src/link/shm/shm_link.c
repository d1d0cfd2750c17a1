/* The shm link's life cycle and progress: creating our block, attaching to
 * peers' blocks, the active-message ring and its wake-ups. */
#define _GNU_SOURCE
#include "link/shm/shm_priv.h"
#include "util/log.h"
#include "util/membarrier.h"

#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define RING_SIZE 4096u

static netvm_status_t shm_am_send(struct nv_link *l, int rank, const uint8_t *msg, unsigned flags);
static int  shm_poll(struct nv_link *l, int rank);
static void shm_poll_enter(struct nv_link *l);
static void shm_poll_leave(struct nv_link *l);
static netvm_status_t shm_epoll_add(struct nv_link *l, int epfd);
static void shm_epoll_event(struct nv_link *l, void *token);
static int  shm_sleep_prepare(struct nv_link *l);
static void shm_sleep_done(struct nv_link *l);
static int  shm_reply_wait_enter(struct nv_link *l);
static void shm_reply_wait_leave(struct nv_link *l);
static netvm_status_t shm_flush(struct nv_link *l, int rank, void *token, uint32_t id);
static netvm_status_t shm_notify(struct nv_link *l, int rank, unsigned kind, uint32_t id, uint64_t value);
static int  shm_peer_dead(struct nv_link *l, int rank);
static void shm_destroy(struct nv_link *l);
static int  shm_sleep_limit_ms(struct nv_link *l) { (void)l; return -1; }
static void shm_tick(struct nv_link *l) { (void)l; }

static const struct nv_link_ops shm_ops = {
    .name = "shm",
    .caps = 0,
    .seg_publish = shm_seg_publish,
    .seg_revoke = shm_seg_revoke,
    .seg_fence = shm_seg_fence,
    .import = shm_import,
    .release = shm_release,
    .put = shm_put,
    .get = shm_get,
    .atomic = shm_atomic,
    .am_send = shm_am_send,
    .poll = shm_poll,
    .poll_enter = shm_poll_enter,
    .poll_leave = shm_poll_leave,
    .epoll_add = shm_epoll_add,
    .epoll_event = shm_epoll_event,
    .sleep_prepare = shm_sleep_prepare,
    .sleep_done = shm_sleep_done,
    .sleep_limit_ms = shm_sleep_limit_ms,
    .tick = shm_tick,
    .reply_wait_enter = shm_reply_wait_enter,
    .reply_wait_leave = shm_reply_wait_leave,
    .flush = shm_flush,
    .notify = shm_notify,
    .peer_dead = shm_peer_dead,
    .destroy = shm_destroy,
};

/* Under Yama ptrace_scope 1 a process may only be read by its ancestors;
 * peers are siblings, so each allows any process of its user, which is the
 * same trust the default scope 0 gives. */
static void allow_peer_access(void)
{
    int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char c = '0';
    if (read(fd, &c, 1) == 1 && c == '1')
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    close(fd);
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

netvm_status_t nv_shm_link_open(struct nv_link **out, int rank, int size,
                                const struct nv_shm_params *p,
                                const struct nv_link_upcalls *up, struct nv_shm_card *card)
{
    allow_peer_access();
    struct shm_link *s = calloc(1, sizeof *s);
    if (!s)
        return NETVM_ERR_NOMEM;
    s->asym = nv_membarrier_register() == 0;
    s->base.ops = &shm_ops;
    s->base.up = *up;
    s->base.rank = rank;
    s->base.size = size;
    s->p = *p;
    s->block_fd = s->doorbell = -1;
    atomic_flag_clear(&s->consuming);

    size_t seg_off = round_up(sizeof(struct nv_shm_hdr), 4096);
    size_t ring_off = round_up(seg_off + (size_t)p->max_segments * sizeof(struct nv_shm_seg), 4096);
    size_t len = round_up(ring_off + RING_SIZE * sizeof(struct nv_shm_ring_slot), 4096);

    s->block_fd = memfd_create("netvm-shm-block", MFD_CLOEXEC);
    s->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->block_fd < 0 || s->doorbell < 0 || ftruncate(s->block_fd, (off_t)len) != 0) {
        nv_error("shm link: cannot create its shared block: %s", strerror(errno));
        shm_destroy(&s->base);
        return NETVM_ERR_SYS;
    }
    s->self = shm_map_fd(s->block_fd, len);
    s->peers = calloc((size_t)size, sizeof *s->peers);
    if (!s->self || !s->peers) {
        shm_destroy(&s->base);
        return NETVM_ERR_NOMEM;
    }
    struct nv_shm_hdr *h = s->self;
    h->version = NV_SHM_VERSION;
    h->rank = rank;
    h->pid = getpid();
    h->doorbell_fd = s->doorbell;
    h->nseg = p->max_segments;
    h->ring_size = RING_SIZE;
    h->seg_off = seg_off;
    h->ring_off = ring_off;
    h->block_len = len;
    struct nv_mpsc ring = nv_shm_ring_view(h);
    nv_mpsc_init(&ring);
    struct nv_shm_seg *segs = nv_shm_segs(h);
    for (uint32_t i = 0; i < h->nseg; i++)
        segs[i].memfd = -1;
    __atomic_store_n(&h->magic, NV_SHM_MAGIC, __ATOMIC_RELEASE);

    s->doorbell_ev.link = &s->base;
    for (int r = 0; r < size; r++) {
        s->peers[r].pidfd = s->peers[r].doorbell = -1;
        s->peers[r].ev.link = &s->base;
    }

    memset(card, 0, sizeof *card);
    card->version = NV_SHM_VERSION;
    card->pid = getpid();
    card->block_fd = s->block_fd;
    card->ep_fd = p->ep ? p->ep->memfd : -1;
    card->host_id = shm_host_id();
    *out = &s->base;
    return NETVM_OK;
}

/* Map the peer's endpoint block: as its NIC we match its tripwires and
 * post its events. */
static netvm_status_t attach_ep(struct shm_peer *pe, int remote_fd)
{
    int fd = shm_pidfd_getfd(pe->pidfd, remote_fd);
    off_t len = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    void *p = len > 0 ? shm_map_fd(fd, (size_t)len) : NULL;
    if (fd >= 0)
        close(fd);
    if (!p) {
        nv_error("shm link: cannot map rank %d's event queue: %s", pe->rank, strerror(errno));
        return NETVM_ERR_SYS;
    }
    const struct nv_ep_hdr *h = p;
    int wake = len >= (off_t)sizeof *h ? shm_pidfd_getfd(pe->pidfd, h->wake_fd) : -1;
    if (wake < 0 || nv_ep_attach(&pe->ep, p, (size_t)len, wake) != 0) {
        nv_error("shm link: rank %d's event queue is not one of this netvm version", pe->rank);
        if (wake >= 0)
            close(wake);
        munmap(p, (size_t)len);
        memset(&pe->ep, 0, sizeof pe->ep);
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

static netvm_status_t attach_peer(struct shm_link *s, struct shm_peer *pe, const struct nv_shm_card *c)
{
    pe->pid = c->pid;
    pe->pidfd = shm_pidfd_open(c->pid);
    if (pe->pidfd < 0) {
        nv_error("shm link: rank %d (pid %d) is gone: %s", pe->rank, c->pid, strerror(errno));
        return NETVM_ERR_PEER;
    }
    if (pe->rank == s->base.rank) {
        pe->hdr = s->self;
        pe->doorbell = s->doorbell;
        if (s->p.ep)
            pe->ep = *s->p.ep;   /* a view of our own; the owner frees it */
        return NETVM_OK;
    }
    int fd = shm_pidfd_getfd(pe->pidfd, c->block_fd);
    if (fd < 0) {
        nv_error("shm link: cannot reach rank %d (pid %d): %s%s", pe->rank, c->pid, strerror(errno),
                 errno == EPERM ? " (ptrace access denied: see docs/config.md)" : "");
        return errno == ESRCH ? NETVM_ERR_PEER : NETVM_ERR_SYS;
    }
    off_t len = lseek(fd, 0, SEEK_END);
    struct nv_shm_hdr *h = len > 0 ? shm_map_fd(fd, (size_t)len) : NULL;
    close(fd);
    if (!h || h->magic != NV_SHM_MAGIC || h->version != NV_SHM_VERSION || h->block_len != (uint64_t)len) {
        nv_error("shm link: rank %d's shared block is not a netvm block of this version", pe->rank);
        if (h)
            munmap(h, (size_t)len);
        return NETVM_ERR_SYS;
    }
    pe->hdr = h;
    pe->doorbell = shm_pidfd_getfd(pe->pidfd, h->doorbell_fd);
    if (pe->doorbell < 0) {
        nv_error("shm link: cannot reach rank %d's doorbell: %s", pe->rank, strerror(errno));
        return NETVM_ERR_SYS;
    }
    return c->ep_fd >= 0 ? attach_ep(pe, c->ep_fd) : NETVM_OK;
}

netvm_status_t nv_shm_link_connect(struct nv_link *l, const struct nv_shm_card *cards, size_t stride,
                                   const uint8_t *use)
{
    struct shm_link *s = shm_of(l);
    uint64_t host = shm_host_id();
    for (int r = 0; r < l->size; r++) {
        struct shm_peer *pe = &s->peers[r];
        pe->rank = r;
        if (!use[r])
            continue;
        const struct nv_shm_card *c = (const struct nv_shm_card *)((const char *)cards + (size_t)r * stride);
        if (c->version != NV_SHM_VERSION || c->host_id != host) {
            nv_error("shm link: rank %d is not on this machine (or runs another netvm version)", r);
            return NETVM_ERR_UNSUPPORTED;
        }
        netvm_status_t st = attach_peer(s, pe, c);
        if (st != NETVM_OK)
            return st;
    }
    return NETVM_OK;
}

static void ring_doorbell(struct shm_peer *pe, unsigned flags)
{
    struct nv_shm_hdr *h = pe->hdr;
    /* the push above and these loads are ordered by the fence, pairing with
     * the consumer's stores to sleeping / reply_sleepers and its re-check of
     * the ring */
    atomic_thread_fence(memory_order_seq_cst);
    if ((flags & NV_AM_SEND_REPLY) && !atomic_load_explicit(&h->reply_sleepers, memory_order_relaxed))
        return;
    if (atomic_load_explicit(&h->sleeping, memory_order_relaxed) &&
        !atomic_load_explicit(&h->pollers, memory_order_relaxed) &&
        atomic_exchange_explicit(&h->sleeping, 0, memory_order_acq_rel)) {
        uint64_t one = 1;
        ssize_t n = write(pe->doorbell, &one, sizeof one);
        (void)n;   /* EAGAIN: the counter is already nonzero, the sleeper wakes anyway */
    }
}

static netvm_status_t shm_am_send(struct nv_link *l, int rank, const uint8_t *msg, unsigned flags)
{
    struct shm_link *s = shm_of(l);
    struct shm_peer *pe = &s->peers[rank];
    /* core bounds the requests in flight per peer (credits) so that the ring
     * never fills; a full ring means the peer stopped draining it */
    while (nv_shm_ring_push(pe->hdr, msg) != 0) {
        if (shm_peer_dead(l, rank))
            return NETVM_ERR_PEER;
        shm_poll(l, -1);
        ring_doorbell(pe, 0);
        sched_yield();
    }
    ring_doorbell(pe, flags);
    return NETVM_OK;
}

static int shm_poll(struct nv_link *l, int rank)
{
    struct shm_link *s = shm_of(l);
    if (!nv_shm_ring_nonempty(s->self))
        return 0;   /* the common case of a poll loop: no locked instruction */
    if (atomic_flag_test_and_set_explicit(&s->consuming, memory_order_acquire))
        return 0;
    int n = 0;
    uint8_t msg[NV_AM_SIZE];
    while (nv_shm_ring_pop(s->self, msg)) {
        /* the sender's rank is inside the message; core validates it */
        l->up.am(l->up.arg, -1, msg, sizeof msg);
        n++;
    }
    atomic_flag_clear_explicit(&s->consuming, memory_order_release);
    return n;
}

static void shm_poll_enter(struct nv_link *l)
{
    atomic_fetch_add_explicit(&shm_of(l)->self->pollers, 1, memory_order_seq_cst);
}

static void shm_poll_leave(struct nv_link *l)
{
    atomic_fetch_sub_explicit(&shm_of(l)->self->pollers, 1, memory_order_seq_cst);
    /* a producer that saw us polling did not ring: look once more */
    shm_poll(l, -1);
}

static netvm_status_t shm_epoll_add(struct nv_link *l, int epfd)
{
    struct shm_link *s = shm_of(l);
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->doorbell_ev };
    if (epoll_ctl(epfd, EPOLL_CTL_ADD, s->doorbell, &ev) != 0)
        return NETVM_ERR_SYS;
    for (int r = 0; r < l->size; r++) {
        if (r == l->rank || s->peers[r].pidfd < 0)
            continue;
        ev.data.ptr = &s->peers[r];
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, s->peers[r].pidfd, &ev) != 0)
            return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

static void mark_dead(struct shm_link *s, struct shm_peer *pe)
{
    if (atomic_exchange(&pe->dead, 1))
        return;
    nv_info("shm link: rank %d (pid %d) exited", pe->rank, (int)pe->pid);
    s->base.up.peer_down(s->base.up.arg, pe->rank);
}

static void shm_epoll_event(struct nv_link *l, void *token)
{
    struct shm_link *s = shm_of(l);
    if (token == &s->doorbell_ev) {
        uint64_t v;
        ssize_t n = read(s->doorbell, &v, sizeof v);
        (void)n;
        shm_poll(l, -1);
        return;
    }
    struct shm_peer *pe = token;
    mark_dead(s, pe);
}

static int shm_sleep_prepare(struct nv_link *l)
{
    struct nv_shm_hdr *h = shm_of(l)->self;
    atomic_store_explicit(&h->sleeping, 1, memory_order_seq_cst);
    if (nv_shm_ring_nonempty(h)) {
        atomic_store_explicit(&h->sleeping, 0, memory_order_relaxed);
        return 1;
    }
    return 0;
}

static void shm_sleep_done(struct nv_link *l)
{
    atomic_store_explicit(&shm_of(l)->self->sleeping, 0, memory_order_relaxed);
}

static int shm_reply_wait_enter(struct nv_link *l)
{
    struct nv_shm_hdr *h = shm_of(l)->self;
    atomic_fetch_add_explicit(&h->reply_sleepers, 1, memory_order_seq_cst);
    /* a reply pushed before the increment did not ring: look for it */
    return nv_shm_ring_nonempty(h);
}

static void shm_reply_wait_leave(struct nv_link *l)
{
    atomic_fetch_sub_explicit(&shm_of(l)->self->reply_sleepers, 1, memory_order_relaxed);
}

static netvm_status_t shm_flush(struct nv_link *l, int rank, void *token, uint32_t id)
{
    /* direct stores are complete once executed; the fence drains this CPU's
     * store buffer so they are visible to the target's loads */
    atomic_thread_fence(memory_order_seq_cst);
    return NETVM_OK;
}

static netvm_status_t shm_notify(struct nv_link *l, int rank, unsigned kind, uint32_t id, uint64_t value)
{
    struct shm_peer *pe = &shm_of(l)->peers[rank];
    if (!pe->ep.h)
        return NETVM_ERR_UNSUPPORTED;
    /* the flag the pidfd's epoll event sets: no system call per notify */
    if (atomic_load_explicit(&pe->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    if (kind == NV_EP_COUNTER)
        return nv_ep_count(&pe->ep, l->rank, id, value);
    struct nv_ep_rec r = { .type = (uint16_t)kind, .rank = l->rank, .id = id, .value = value };
    /* a full queue is reported to its owner (NETVM_EV_OVERFLOW) */
    nv_ep_post(&pe->ep, &r);
    return NETVM_OK;
}

static int shm_peer_dead(struct nv_link *l, int rank)
{
    struct shm_link *s = shm_of(l);
    struct shm_peer *pe = &s->peers[rank];
    if (atomic_load_explicit(&pe->dead, memory_order_relaxed))
        return 1;
    if (rank != l->rank && pe->pidfd >= 0 && shm_pidfd_exited(pe->pidfd)) {
        mark_dead(s, pe);
        return 1;
    }
    return 0;
}

static void shm_destroy(struct nv_link *l)
{
    struct shm_link *s = shm_of(l);
    for (int r = 0; s->peers && r < l->size; r++) {
        struct shm_peer *pe = &s->peers[r];
        if (r != l->rank) {
            if (pe->hdr)
                munmap(pe->hdr, pe->hdr->block_len);
            if (pe->doorbell >= 0)
                close(pe->doorbell);
            if (pe->ep.h) {
                munmap(pe->ep.h, pe->ep.len);
                close(pe->ep.wake_fd);
            }
        }
        if (pe->pidfd >= 0)
            close(pe->pidfd);
    }
    free(s->peers);
    if (s->self)
        munmap(s->self, s->self->block_len);
    if (s->block_fd >= 0)
        close(s->block_fd);
    if (s->doorbell >= 0)
        close(s->doorbell);
    free(s);
}
