/* The shm link's life cycle and progress: creating our block, attaching to
 * peers' blocks as they connect and letting them go, the wake-ups. */
#define _GNU_SOURCE
#include "link/shm/shm_priv.h"
#include "util/pidfd.h"
#include "util/log.h"
#include "util/membarrier.h"
#include "wire/endian.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#define RING_SIZE 4096u

static void shm_epoll_event(struct nv_link *l, void *token, unsigned events);
static void shm_poll_enter(struct nv_link *l);
static void shm_poll_leave(struct nv_link *l);
static int  shm_sleep_prepare(struct nv_link *l);
static void shm_sleep_done(struct nv_link *l);
static netvm_status_t shm_flush(struct nv_link *l, struct nv_lpeer *lp, void *token, uint32_t id);
static netvm_status_t shm_notify(struct nv_link *l, struct nv_lpeer *lp, unsigned kind, uint32_t id,
                                 uint64_t value);
static int  shm_peer_dead(struct nv_link *l, struct nv_lpeer *lp);
static void shm_peer_close(struct nv_link *l, struct nv_lpeer *lp, int graceful);
static void shm_peer_free(struct nv_link *l, struct nv_lpeer *lp);
static void shm_destroy(struct nv_link *l);

/* Filled by nv_shm_link_open (eager size is configuration). */
static struct nv_link_ops shm_ops = {
    .name = "shm",
    .caps = { .flags = NV_LCAP_ORDERED | NV_LCAP_ONESIDED | NV_LCAP_SYNC | NV_LCAP_ATOMIC | NV_LCAP_NOTIFY |
                       NV_LCAP_IMPORT | NV_LCAP_MAPPED,
              .max_xfer = UINT64_MAX },
    .seg_publish = shm_seg_publish,
    .seg_revoke = shm_seg_revoke,
    .seg_fence = shm_seg_fence,
    .peer_close = shm_peer_close,
    .peer_free = shm_peer_free,
    .peer_dead = shm_peer_dead,
    .import = shm_import,
    .release = shm_release,
    .put = shm_put,
    .get = shm_get,
    .atomic = shm_atomic,
    .notify = shm_notify,
    .am_send = shm_am_send,
    .flush = shm_flush,
    .poll = shm_poll,
    .epoll_event = shm_epoll_event,
    .poll_enter = shm_poll_enter,
    .poll_leave = shm_poll_leave,
    .sleep_prepare = shm_sleep_prepare,
    .sleep_done = shm_sleep_done,
    .destroy = shm_destroy,
};

const struct nv_link_ops *nv_shm_link_ops(void) { return &shm_ops; }

/* Under Yama ptrace_scope 1 a process may only be read by its ancestors;
 * peers are siblings or strangers, so before a peer on this machine
 * attaches, each process allows any process of its user, which is the
 * trust the default scope 0 gives. Nothing is changed under scope 0 (not
 * needed) or 2 and 3 (not allowed), nor for processes without such peers. */
void nv_shm_allow_peers(void)
{
    static _Atomic int done;
    if (atomic_exchange(&done, 1))
        return;
    int fd = open("/proc/sys/kernel/yama/ptrace_scope", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char c = '0';
    if (read(fd, &c, 1) == 1 && c == '1') {
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
        nv_info("shm link: ptrace_scope 1: peers of this user may attach (PR_SET_PTRACER_ANY)");
    }
    close(fd);
}

void nv_shm_card_encode(const struct nv_shm_card *c, uint8_t out[NV_SHM_CARD_LEN])
{
    nv_put32(out, c->version);
    nv_put32(out + 4, (uint32_t)c->pid);
    nv_put32(out + 8, (uint32_t)c->block_fd);
    nv_put32(out + 12, (uint32_t)c->ep_fd);
    nv_put64(out + 16, c->host_id);
}

int nv_shm_card_decode(const uint8_t *in, size_t len, struct nv_shm_card *c)
{
    if (len != NV_SHM_CARD_LEN)
        return -1;
    c->version = nv_get32(in);
    c->pid = (int32_t)nv_get32(in + 4);
    c->block_fd = (int32_t)nv_get32(in + 8);
    c->ep_fd = (int32_t)nv_get32(in + 12);
    c->host_id = nv_get64(in + 16);
    return c->pid > 0 && c->block_fd >= 0 ? 0 : -1;
}

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

netvm_status_t nv_shm_link_open(struct nv_link **out, int pfd, const struct nv_shm_params *p,
                                const struct nv_link_upcalls *up, struct nv_shm_card *card)
{
    static _Atomic uint64_t next_uid = 1;
    struct shm_link *s = calloc(1, sizeof *s);
    if (!s)
        return NETVM_ERR_NOMEM;
    s->uid = atomic_fetch_add(&next_uid, 1);
    s->asym = nv_membarrier_register() == 0;
    const char *die = getenv("NETVM_TEST_SHM_DIE_IN_PUSH");
    char *rest = NULL;
    atomic_store(&s->test_die_in_push, die ? strtol(die, &rest, 10) : 0);
    s->test_die_at_swap = rest && strcmp(rest, ":swap") == 0;
    shm_ops.caps.am_eager = p->eager;
    s->base.ops = &shm_ops;
    s->base.up = *up;
    s->base.pfd = pfd;
    s->p = *p;
    s->block_fd = s->doorbell = -1;
    atomic_flag_clear(&s->consuming);
    pthread_mutex_init(&s->peers_lock, NULL);
    pthread_mutex_init(&s->rndv_lock, NULL);
    pthread_mutex_init(&s->push_shared, NULL);
    pthread_mutex_init(&s->claims_lock, NULL);
    s->rxcap = SHM_REC_PREFIX + SHM_RNDV_DESC + NV_AM_HDR_MAX + p->eager + 64;
    s->rxbuf = malloc(s->rxcap);

    size_t seg_off = round_up(sizeof(struct nv_shm_hdr), 4096);
    size_t ring_off = round_up(seg_off + (size_t)p->max_segments * sizeof(struct nv_shm_seg), 4096);
    size_t len = round_up(ring_off + RING_SIZE * sizeof(struct nv_shm_ring_slot), 4096);

    s->block_fd = memfd_create("netvm-shm-block", MFD_CLOEXEC);
    s->doorbell = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (!s->rxbuf || s->block_fd < 0 || s->doorbell < 0 || ftruncate(s->block_fd, (off_t)len) != 0) {
        nv_error("shm link: cannot create its shared block: %s", strerror(errno));
        shm_destroy(&s->base);
        return NETVM_ERR_SYS;
    }
    s->self = shm_map_fd(s->block_fd, len, 1);
    if (!s->self) {
        shm_destroy(&s->base);
        return NETVM_ERR_NOMEM;
    }
    struct nv_shm_hdr *h = s->self;
    h->version = NV_SHM_VERSION;
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
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &s->doorbell_ev };
    if (epoll_ctl(pfd, EPOLL_CTL_ADD, s->doorbell, &ev) != 0) {
        shm_destroy(&s->base);
        return NETVM_ERR_SYS;
    }
    memset(card, 0, sizeof *card);
    card->version = NV_SHM_VERSION;
    card->pid = getpid();
    card->block_fd = s->block_fd;
    card->ep_fd = p->ep ? p->ep->memfd : -1;
    card->host_id = nv_shm_host_id();
    s->card = *card;
    *out = &s->base;
    return NETVM_OK;
}

void nv_shm_card_of(struct nv_link *l, struct nv_shm_card *card)
{
    *card = shm_of(l)->card;
}

/* Map the peer's endpoint block: as its NIC we match its tripwires and
 * post its events. */
static netvm_status_t attach_ep(struct shm_peer *pe, int remote_fd)
{
    int fd = nv_pidfd_getfd(pe->pidfd, remote_fd);
    off_t len = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
    void *p = len > 0 ? shm_map_fd(fd, (size_t)len, 1) : NULL;
    if (fd >= 0)
        close(fd);
    if (!p) {
        nv_error("shm link: cannot map peer %d's event queue: %s", pe->lp->id, strerror(errno));
        return NETVM_ERR_SYS;
    }
    const struct nv_ep_hdr *h = p;
    int wake = len >= (off_t)sizeof *h ? nv_pidfd_getfd(pe->pidfd, h->wake_fd) : -1;
    if (wake < 0 || nv_ep_attach(&pe->ep, p, (size_t)len, wake) != 0) {
        nv_error("shm link: peer %d's event queue is not one of this netvm version", pe->lp->id);
        if (wake >= 0)
            close(wake);
        munmap(p, (size_t)len);
        memset(&pe->ep, 0, sizeof pe->ep);
        return NETVM_ERR_SYS;
    }
    return NETVM_OK;
}

static netvm_status_t attach_remote(struct shm_peer *pe, const struct nv_shm_card *c)
{
    int fd = nv_pidfd_getfd(pe->pidfd, c->block_fd);
    if (fd < 0) {
        nv_error("shm link: cannot reach peer %d (pid %d): %s%s", pe->lp->id, c->pid, strerror(errno),
                 errno == EPERM ? " (ptrace access denied: see docs/config.md)" : "");
        return errno == ESRCH ? NETVM_ERR_PEER : NETVM_ERR_SYS;
    }
    off_t len = lseek(fd, 0, SEEK_END);
    struct nv_shm_hdr *h = len > 0 ? shm_map_fd(fd, (size_t)len, 1) : NULL;
    close(fd);
    if (!h || h->magic != NV_SHM_MAGIC || h->version != NV_SHM_VERSION || h->block_len != (uint64_t)len) {
        nv_error("shm link: peer %d's shared block is not a netvm block of this version", pe->lp->id);
        if (h)
            munmap(h, (size_t)len);
        return NETVM_ERR_SYS;
    }
    pe->hdr = h;
    pe->doorbell = nv_pidfd_getfd(pe->pidfd, h->doorbell_fd);
    if (pe->doorbell < 0) {
        nv_error("shm link: cannot reach peer %d's doorbell: %s", pe->lp->id, strerror(errno));
        return NETVM_ERR_SYS;
    }
    return c->ep_fd >= 0 ? attach_ep(pe, c->ep_fd) : NETVM_OK;
}

static void release_peer(struct shm_peer *pe)
{
    if (!pe->self) {
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
    shm_spill_free(pe);
    pthread_mutex_destroy(&pe->spill_lock);
    free(pe);
}

netvm_status_t nv_shm_attach(struct nv_link *l, struct nv_lpeer *lp, const struct nv_shm_card *c, int self)
{
    struct shm_link *s = shm_of(l);
    if (c->version != NV_SHM_VERSION || c->host_id != nv_shm_host_id())
        return NETVM_ERR_UNSUPPORTED;
    struct shm_peer *pe = calloc(1, sizeof *pe);
    if (!pe)
        return NETVM_ERR_NOMEM;
    pe->ev.link = l;
    pe->lp = lp;
    pe->self = self;
    pe->pid = c->pid;
    pe->doorbell = -1;
    pthread_mutex_init(&pe->spill_lock, NULL);
    pe->pidfd = nv_pidfd_open(c->pid);
    netvm_status_t st = NETVM_OK;
    if (pe->pidfd < 0) {
        nv_error("shm link: peer %d (pid %d) is gone: %s", lp->id, c->pid, strerror(errno));
        st = NETVM_ERR_PEER;
    } else if (self) {
        pe->hdr = s->self;
        pe->doorbell = s->doorbell;
        if (s->p.ep)
            pe->ep = *s->p.ep;   /* a view of our own; the owner frees it */
    } else {
        st = attach_remote(pe, c);
        if (st == NETVM_OK) {
            /* the pidfd becomes readable when the peer exits */
            struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &pe->ev };
            if (epoll_ctl(l->pfd, EPOLL_CTL_ADD, pe->pidfd, &ev) != 0)
                st = NETVM_ERR_SYS;
        }
    }
    if (st != NETVM_OK) {
        release_peer(pe);
        return st;
    }
    pthread_mutex_lock(&s->peers_lock);
    pe->next = s->peers;
    if (s->peers)
        s->peers->prev = pe;
    s->peers = pe;
    pthread_mutex_unlock(&s->peers_lock);
    /* atomic: the peer may already be found by its id in another thread's
     * receive path (take_record), which reads these */
    __atomic_store_n(&lp->link, l, __ATOMIC_RELAXED);
    __atomic_store_n(&lp->conn, pe, __ATOMIC_RELEASE);
    return NETVM_OK;
}

static void mark_dead(struct shm_link *s, struct shm_peer *pe)
{
    if (atomic_load(&pe->dead))
        return;
    /* what it sent before it exited is taken in first: a goodbye waiting
     * in the ring makes its end a graceful one (and closes it), also when
     * another thread is taking the ring in right now */
    shm_poll_all(&s->base);
    if (atomic_exchange(&pe->dead, 1))
        return;
    /* what it left half-written in our ring would hold up the rest */
    shm_finish_dead_pushes(s, pe);
    shm_poll_all(&s->base);
    nv_info("shm link: peer %d (pid %d) exited", pe->lp->id, (int)pe->pid);
    shm_rndv_fail_peer(s, pe);
    s->base.up.peer_down(s->base.up.arg, pe->lp, 0);
}

static void shm_epoll_event(struct nv_link *l, void *token, unsigned events)
{
    struct shm_link *s = shm_of(l);
    (void)events;
    if (token == &s->doorbell_ev) {
        uint64_t v;
        ssize_t n = read(s->doorbell, &v, sizeof v);
        (void)n;
        /* taken: the next producer rings again (it pushes, then looks) */
        atomic_store_explicit(&s->self->rung, 0, memory_order_seq_cst);
        shm_poll(l, NULL);
        return;
    }
    /* a peer's pidfd: it exited. The pidfd stays readable, so it leaves
     * the epoll set, else every wait on it would return at once from now
     * on (a busy progress thread, or a busy caller without one) */
    struct shm_peer *pe = token;
    epoll_ctl(l->pfd, EPOLL_CTL_DEL, pe->pidfd, NULL);
    mark_dead(s, pe);
}

static void shm_poll_enter(struct nv_link *l)
{
    atomic_fetch_add_explicit(&shm_of(l)->self->pollers, 1, memory_order_seq_cst);
}

static void shm_poll_leave(struct nv_link *l)
{
    atomic_fetch_sub_explicit(&shm_of(l)->self->pollers, 1, memory_order_seq_cst);
    /* a producer that saw us polling did not ring: look once more */
    shm_poll(l, NULL);
}

static int shm_sleep_prepare(struct nv_link *l)
{
    struct nv_shm_hdr *h = shm_of(l)->self;
    atomic_fetch_add_explicit(&h->sleeping, 1, memory_order_seq_cst);
    if (nv_shm_ring_nonempty(h) || atomic_load(&shm_of(l)->spilling)) {
        atomic_fetch_sub_explicit(&h->sleeping, 1, memory_order_relaxed);
        return 1;
    }
    return 0;
}

static void shm_sleep_done(struct nv_link *l)
{
    atomic_fetch_sub_explicit(&shm_of(l)->self->sleeping, 1, memory_order_relaxed);
}

static netvm_status_t shm_flush(struct nv_link *l, struct nv_lpeer *lp, void *token, uint32_t id)
{
    (void)l; (void)lp; (void)token; (void)id;
    /* direct stores are complete once executed; the fence drains this CPU's
     * store buffer so they are visible to the target's loads */
    atomic_thread_fence(memory_order_seq_cst);
    return NETVM_OK;
}

static netvm_status_t shm_notify(struct nv_link *l, struct nv_lpeer *lp, unsigned kind, uint32_t id,
                                 uint64_t value)
{
    struct shm_peer *pe = shm_peer_of(lp);
    if (!pe->ep.h)
        return NETVM_ERR_UNSUPPORTED;
    /* the flag the pidfd's epoll event sets: no system call per notify */
    if (atomic_load_explicit(&pe->dead, memory_order_relaxed))
        return NETVM_ERR_PEER;
    if (kind == NV_EP_COUNTER)
        return nv_ep_count(&pe->ep, (int)lp->remote_id, id, value);
    struct nv_ep_rec r = { .type = (uint16_t)kind, .rank = (int32_t)lp->remote_id, .id = id, .value = value };
    /* a full queue is reported to its owner (NETVM_EV_OVERFLOW) */
    nv_ep_post(&pe->ep, &r);
    return NETVM_OK;
}

static int shm_peer_dead(struct nv_link *l, struct nv_lpeer *lp)
{
    struct shm_link *s = shm_of(l);
    struct shm_peer *pe = shm_peer_of(lp);
    if (!pe || atomic_load_explicit(&pe->dead, memory_order_relaxed))
        return 1;
    if (!pe->self && pe->pidfd >= 0 && nv_pidfd_exited(pe->pidfd)) {
        mark_dead(s, pe);
        return 1;
    }
    return 0;
}

static void shm_peer_close(struct nv_link *l, struct nv_lpeer *lp, int graceful)
{
    (void)graceful;
    struct shm_peer *pe = shm_peer_of(lp);
    if (pe && !atomic_exchange(&pe->dead, 1))
        shm_rndv_fail_peer(shm_of(l), pe);
}

static void shm_peer_free(struct nv_link *l, struct nv_lpeer *lp)
{
    struct shm_link *s = shm_of(l);
    struct shm_peer *pe = shm_peer_of(lp);
    if (!pe)
        return;
    atomic_store(&pe->dead, 1);
    shm_rndv_fail_peer(s, pe);
    pthread_mutex_lock(&s->peers_lock);
    if (pe->prev)
        pe->prev->next = pe->next;
    else
        s->peers = pe->next;
    if (pe->next)
        pe->next->prev = pe->prev;
    pthread_mutex_unlock(&s->peers_lock);
    if (atomic_load(&pe->nspill))
        atomic_fetch_sub(&s->spilling, 1);
    if (!pe->self && pe->pidfd >= 0)
        epoll_ctl(l->pfd, EPOLL_CTL_DEL, pe->pidfd, NULL);
    lp->conn = NULL;
    release_peer(pe);
}

static void shm_destroy(struct nv_link *l)
{
    struct shm_link *s = shm_of(l);
    while (s->peers)
        shm_peer_free(l, s->peers->lp);
    if (s->self)
        munmap(s->self, s->self->block_len);
    if (s->block_fd >= 0)
        close(s->block_fd);
    if (s->doorbell >= 0)
        close(s->doorbell);
    free(s->rndv);
    free(s->rxbuf);
    free(s->claims);
    pthread_mutex_destroy(&s->peers_lock);
    pthread_mutex_destroy(&s->rndv_lock);
    pthread_mutex_destroy(&s->push_shared);
    pthread_mutex_destroy(&s->claims_lock);
    free(s);
}
