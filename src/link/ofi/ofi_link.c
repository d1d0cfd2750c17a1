/* The ofi link's life: opening the provider's fabric, domain, address
 * vector, completion queue and RDM endpoint; progress (the CQ's wait fd in
 * core's epoll set, fi_trywait before core sleeps); peers (address vector
 * entries, and on this host a pidfd so a death is seen at once); the ops
 * table. */
#define _GNU_SOURCE
#include "link/ofi/ofi_priv.h"
#include "util/pidfd.h"
#include "util/log.h"
#include "util/time.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#define OFI_API FI_VERSION(1, 9)

netvm_status_t ofi_status(ssize_t rc)
{
    switch (-rc) {
    case 0:              return NETVM_OK;
    case FI_EAGAIN:      return NETVM_ERR_AGAIN;
    case FI_ENOMEM:      return NETVM_ERR_NOMEM;
    case FI_ECONNREFUSED: case FI_ECONNRESET: case FI_ECONNABORTED: case FI_ENOTCONN:
    case FI_EHOSTUNREACH: case EPIPE: case FI_ESHUTDOWN: case FI_ETIMEDOUT: case FI_EIO:
                         return NETVM_ERR_PEER;
    /* a remote key the target no longer knows: its segment was revoked */
    case FI_EACCES: case FI_EKEYREJECTED: case FI_EPERM: case FI_EINVAL: case FI_EREMOTEIO:
                         return NETVM_ERR_REVOKED;
    default:             return NETVM_ERR_SYS;
    }
}

struct ofi_op *ofi_op_new(struct ofi_link *o, int kind, struct ofi_peer *pe)
{
    struct ofi_op *op = calloc(1, sizeof *op);
    if (op) {
        op->o = o;
        op->kind = (uint8_t)kind;
        op->peer = pe;
    }
    return op;
}

void ofi_op_free(struct ofi_op *op)
{
    if (!op)
        return;
    if (op->rce)
        op->o->base.up.lreg_put(op->o->rc, op->rce);
    free(op->buf);
    free(op);
}

static netvm_status_t post_rx(struct ofi_link *o, struct ofi_op *op)
{
    ssize_t rc;
    void *desc = o->rx_mr ? fi_mr_desc(o->rx_mr) : NULL;
    while ((rc = fi_recv(o->ep, op->buf, OFI_RX_BUF, desc, FI_ADDR_UNSPEC, &op->fctx)) == -FI_EAGAIN) {
        pthread_mutex_unlock(&o->lock);
        ofi_progress(o);
        pthread_mutex_lock(&o->lock);
    }
    if (rc)
        nv_error("ofi link: cannot post a receive buffer: %s", nv_ofi_fi.strerror((int)-rc));
    return ofi_status(rc);
}

/* --- completions ----------------------------------------------------------------------- */

/* Forget a dead peer's address: ofi_rxm then closes its connection, whose
 * socket would otherwise keep the CQ's wait fd readable for ever (every
 * pass would count an event, a sleeping progress thread would spin). */
static void forget_address(struct ofi_link *o, struct ofi_peer *pe)
{
    pthread_mutex_lock(&o->lock);
    if (!pe->av_gone) {
        fi_av_remove(o->av, &pe->fa, 1, 0);
        pe->av_gone = 1;
    }
    pthread_mutex_unlock(&o->lock);
}

void ofi_peer_failed(struct ofi_link *o, struct ofi_peer *pe)
{
    if (!pe || atomic_exchange(&pe->dead, 1))
        return;
    nv_info("ofi link: peer %d is gone", pe->lp->id);
    forget_address(o, pe);
    o->base.up.peer_down(o->base.up.arg, pe->lp, 0);
}

/* The provider refuses a post while a connection is being made or its
 * queue is full, and the caller drives progress and tries again; a
 * connection that never comes up or never drains would keep that caller
 * in its loop for good. Only the mark is set here (the caller may hold
 * the lock): core's waits look at it (peer_dead) and fail what was
 * issued to pe. */
int ofi_refused_too_long(struct ofi_link *o, struct ofi_peer *pe, uint64_t *since)
{
    uint64_t now = nv_now_ns();
    if (!*since) {
        *since = now;
        return 0;
    }
    if (now - *since < (uint64_t)o->p.timeout_ms * 1000000ull)
        return 0;
    if (!atomic_exchange(&pe->dead, 1))
        nv_warn("ofi link: the provider refused every post to peer %d for NETVM_TIMEOUT (its connection is "
                "stuck): the peer is given up", pe->lp->id);
    return 1;
}

void ofi_peer_left(struct ofi_link *o, struct ofi_peer *pe)
{
    if (atomic_exchange(&pe->dead, 1))
        return;
    forget_address(o, pe);
    o->base.up.peer_down(o->base.up.arg, pe->lp, 1);
}

static void handle(struct ofi_link *o, struct ofi_op *op, uint64_t flags, size_t len, uint64_t data,
                   netvm_status_t st)
{
    /* a remote write's data names no operation of ours unless the provider
     * consumed a receive for it (FI_RX_CQ_DATA); shm leaves garbage there */
    if ((flags & FI_REMOTE_WRITE) && !o->rx_cq_data)
        op = NULL;
    if (!op) {
        /* a write with remote CQ data that used no receive buffer */
        if (st == NETVM_OK && (flags & FI_REMOTE_CQ_DATA))
            ofi_rx_data(o, data, len);
        return;
    }
    switch (op->kind) {
    case OP_RX:
        if (st == NETVM_OK) {
            if ((flags & FI_REMOTE_CQ_DATA) && (flags & FI_REMOTE_WRITE))
                ofi_rx_data(o, data, len);   /* FI_RX_CQ_DATA: the data consumed a receive */
            else
                ofi_rx(o, op, len);
        }
        if (st != OFI_CANCELED) {
            pthread_mutex_lock(&o->lock);
            post_rx(o, op);
            pthread_mutex_unlock(&o->lock);
        }
        break;
    case OP_SEND:
        if (st == NETVM_ERR_PEER)
            ofi_peer_failed(o, op->peer);
        ofi_op_free(op);
        break;
    case OP_WRITE:
    case OP_READ:
    case OP_ATOMIC:
        ofi_rma_done(o, op, st);
        break;
    case OP_RDV_READ:
        ofi_rdv_read_done(o, op, st);
        break;
    default:
        break;
    }
}

/* One thread at a time reads the CQ and runs what it brings (core's upcalls
 * expect the one pass holder); another that wants progress meanwhile
 * finds it under way and returns. The thread that reads may read again
 * from inside an upcall: a send that finds the queue full (-FI_EAGAIN)
 * can only wait for completions that it must take in itself. */
static __thread struct ofi_link *reading;

int ofi_progress(struct ofi_link *o)
{
    struct fi_cq_data_entry e[16];
    int total = 0, no = 0, nested = reading == o;
    if (!nested && !atomic_compare_exchange_strong(&o->progressing, &no, 1))
        return 0;
    reading = o;
    for (;;) {
        pthread_mutex_lock(&o->lock);
        ssize_t n = fi_cq_read(o->cq, e, 16);
        struct fi_cq_err_entry err;
        int have_err = 0;
        if (n == -FI_EAVAIL) {
            memset(&err, 0, sizeof err);
            have_err = fi_cq_readerr(o->cq, &err, 0) == 1;
        }
        pthread_mutex_unlock(&o->lock);
        if (have_err) {
            netvm_status_t st = err.err == FI_ECANCELED ? OFI_CANCELED : ofi_status(-(ssize_t)err.err);
            struct ofi_op *op = err.op_context;
            if (err.err != FI_ECANCELED)
                nv_debug("ofi link: an operation failed: %s", nv_ofi_fi.strerror(err.err));
            handle(o, op, err.flags, err.len, err.data, st);
            total++;
            continue;
        }
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++)
            handle(o, e[i].op_context, e[i].flags, e[i].len, e[i].data, NETVM_OK);
        total += (int)n;
        if (n < 16)
            break;
    }
    if (!nested) {
        reading = NULL;
        atomic_store(&o->progressing, 0);
    }
    return total;
}

/* --- progress ops ------------------------------------------------------------------------ */

static int ofi_poll(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)lp;
    return ofi_progress(ofi_of(l));
}

/* fi_trywait on the queue: 0 if the wait fd may be slept on, nonzero if
 * completions are there to be read first (also when there is no wait fd:
 * the timer polls then) */
static int try_wait(struct ofi_link *o)
{
    if (o->wait_fd < 0)
        return 0;
    pthread_mutex_lock(&o->lock);
    struct fid *f = &o->cq->fid;
    int rc = fi_trywait(o->fabric, &f, 1);
    pthread_mutex_unlock(&o->lock);
    return rc != FI_SUCCESS;
}

static void ofi_epoll_event(struct nv_link *l, void *token, unsigned events)
{
    (void)events;
    struct ofi_link *o = ofi_of(l);
    if (token != &o->ev) {
        /* a peer's pidfd: it exited */
        struct ofi_peer *pe = (struct ofi_peer *)token;
        epoll_ctl(l->pfd, EPOLL_CTL_DEL, pe->pidfd, NULL);
        ofi_peer_failed(o, pe);
        return;
    }
    /* The wait fd said ready and the queue was empty: the readiness was
     * the provider's own (ofi_rxm over tcp, after a peer's death, leaves
     * its wait set signalled until something tries to wait). fi_trywait
     * clears it; without this, every pass after a death counted an event
     * and a progress thread sleeping on the set spun. */
    if (ofi_progress(o) == 0)
        (void)try_wait(o);
}

/* Before core sleeps on its epoll set: fi_trywait says whether the wait fd
 * may be slept on, or completions are there to be read first. */
static int ofi_sleep_prepare(struct nv_link *l)
{
    return try_wait(ofi_of(l));
}

static void noop(struct nv_link *l) { (void)l; }

/* Threads spinning on poll() read the queue themselves: the timer's look
 * would only take the queue from them. */
static void ofi_poll_enter(struct nv_link *l) { atomic_fetch_add(&ofi_of(l)->spinners, 1); }
static void ofi_poll_leave(struct nv_link *l) { atomic_fetch_sub(&ofi_of(l)->spinners, 1); }

/* Without a wait fd nothing wakes a sleeping process for a completion: the
 * timer polls every 100 us (the cost: a wake-up each, docs/links.md). */
static uint64_t ofi_timer(struct nv_link *l, uint64_t now)
{
    struct ofi_link *o = ofi_of(l);
    if (o->wait_fd >= 0)
        return UINT64_MAX;
    if (!atomic_load(&o->spinners))
        ofi_progress(o);
    return now + 100000;
}

/* Arrivals are reported through the epoll set (the CQ's wait fd): a thread
 * that waits takes the set over (core's lending), so the progress thread
 * is not woken to read the queue in its place. */
static int ofi_active(struct nv_link *l) { return ofi_of(l)->wait_fd >= 0; }

/* --- peers ------------------------------------------------------------------------------- */

netvm_status_t nv_ofi_attach(struct nv_link *l, struct nv_lpeer *lp, const struct nv_ofi_card *card)
{
    struct ofi_link *o = ofi_of(l);
    if (card->version != OFI_VERSION || !card->addrlen || card->addrlen > NV_OFI_ADDR_MAX) {
        nv_error("ofi link: peer %d has no ofi link of this version", lp->id);
        return NETVM_ERR_UNSUPPORTED;
    }
    struct ofi_peer *pe = calloc(1, sizeof *pe);
    if (!pe)
        return NETVM_ERR_NOMEM;
    pe->ev.link = l;
    pe->o = o;
    pe->lp = lp;
    pe->pidfd = -1;
    pthread_mutex_lock(&o->lock);
    int rc = fi_av_insert(o->av, card->addr, 1, &pe->fa, 0, NULL);
    pthread_mutex_unlock(&o->lock);
    if (rc != 1) {
        nv_error("ofi link: fi_av_insert for peer %d failed (%d)", lp->id, rc);
        free(pe);
        return NETVM_ERR_SYS;
    }
    if (card->host_id == o->p.host_id && card->pid > 0) {
        pe->pidfd = nv_pidfd_open(card->pid);
        if (pe->pidfd >= 0) {
            struct epoll_event ev = { .events = EPOLLIN, .data.ptr = pe };
            if (epoll_ctl(l->pfd, EPOLL_CTL_ADD, pe->pidfd, &ev) != 0) {
                close(pe->pidfd);
                pe->pidfd = -1;
            }
        }
    }
    pthread_mutex_lock(&o->lock);
    pe->next = o->peers;
    o->peers = pe;
    pthread_mutex_unlock(&o->lock);
    __atomic_store_n(&lp->link, l, __ATOMIC_RELAXED);
    __atomic_store_n(&lp->conn, pe, __ATOMIC_RELEASE);
    return NETVM_OK;
}

static int ofi_peer_dead(struct nv_link *l, struct nv_lpeer *lp)
{
    (void)l;
    struct ofi_peer *pe = opeer_of(lp);
    if (!pe || atomic_load(&pe->dead))
        return 1;
    if (pe->pidfd >= 0) {
        struct pollfd p = { .fd = pe->pidfd, .events = POLLIN };
        if (poll(&p, 1, 0) == 1)
            return 1;
    }
    return 0;
}

static void ofi_peer_close(struct nv_link *l, struct nv_lpeer *lp, int graceful)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(lp);
    if (!pe || atomic_exchange(&pe->dead, 1))
        return;
    if (graceful) {
        pthread_mutex_lock(&o->lock);
        ofi_send_locked(o, pe, OK_BYE, 0, NULL, 0, NULL, 0);
        pthread_mutex_unlock(&o->lock);
    }
}

static void peer_release(struct ofi_link *o, struct ofi_peer *pe)
{
    if (pe->pidfd >= 0) {
        epoll_ctl(o->base.pfd, EPOLL_CTL_DEL, pe->pidfd, NULL);
        close(pe->pidfd);
    }
    free(pe);
}

/* Operations still naming pe complete first (their completions come from
 * the provider, or core has given them up): forget pe in them. */
static void ofi_peer_free(struct nv_link *l, struct nv_lpeer *lp)
{
    struct ofi_link *o = ofi_of(l);
    struct ofi_peer *pe = opeer_of(lp);
    if (!pe)
        return;
    pthread_mutex_lock(&o->lock);
    for (struct ofi_op *op = o->waiting; op; op = op->next)
        if (op->peer == pe)
            op->peer = NULL;
    if (!pe->av_gone)
        fi_av_remove(o->av, &pe->fa, 1, 0);
    for (struct ofi_peer **pp = &o->peers; *pp; pp = &(*pp)->next)
        if (*pp == pe) {
            *pp = pe->next;
            break;
        }
    lp->conn = NULL;
    pthread_mutex_unlock(&o->lock);
    peer_release(o, pe);
}

/* --- life ----------------------------------------------------------------------------- */

static void ofi_destroy(struct nv_link *l)
{
    struct ofi_link *o = ofi_of(l);
    /* sends still under way (a BYE) leave before the endpoint closes */
    uint64_t until = nv_now_ns() + 100000000ull;
    while (o->enabled && nv_now_ns() < until && ofi_progress(o) > 0)
        ;   /* (a provider may crash reading the CQ of an endpoint that never came up) */
    if (o->wait_fd >= 0)
        epoll_ctl(l->pfd, EPOLL_CTL_DEL, o->wait_fd, NULL);
    if (o->ep)
        fi_close(&o->ep->fid);
    for (uint32_t i = 0; o->segs && i < o->p.max_segments; i++)
        o->segs[i].mr = NULL;   /* core deregisters its segments itself */
    while (o->waiting) {
        struct ofi_op *op = o->waiting;
        o->waiting = op->next;
        free(op->owned);
        ofi_op_free(op);
    }
    while (o->peers) {
        struct ofi_peer *pe = o->peers;
        o->peers = pe->next;
        for (struct ofi_imp *im = pe->imports; im; im = im->next)
            im->prev = NULL;   /* the imports' owners free them */
        pe->lp->conn = NULL;
        peer_release(o, pe);
    }
    if (o->rc)
        o->base.up.lreg_close(o->base.up.arg, o->rc);
    if (o->rx_mr)
        fi_close(&o->rx_mr->fid);
    if (o->cq)
        fi_close(&o->cq->fid);
    if (o->av)
        fi_close(&o->av->fid);
    if (o->domain)
        fi_close(&o->domain->fid);
    if (o->fabric)
        fi_close(&o->fabric->fid);
    if (o->info)
        nv_ofi_fi.freeinfo(o->info);
    free(o->rxbuf);
    free(o->segs);
    pthread_mutex_destroy(&o->lock);
    free(o);
}

static struct nv_link_ops ofi_ops = {
    .name = "ofi",
    .caps = { .flags = NV_LCAP_REGISTER, .max_xfer = 1ull << 30, .am_eager = OFI_EAGER },
    .mem_reg = ofi_mem_reg,
    .mem_dereg = ofi_mem_dereg,
    .mr_key = ofi_mr_key,
    .seg_publish = ofi_seg_publish,
    .seg_revoke = ofi_seg_revoke,
    .seg_fence = ofi_seg_fence,
    .import_done = ofi_import_done,
    .release = ofi_release,
    .peer_close = ofi_peer_close,
    .peer_free = ofi_peer_free,
    .peer_dead = ofi_peer_dead,
    .put = ofi_put,
    .get = ofi_get,
    .am_send = ofi_am_send,
    .gate_failed = ofi_gate_failed,
    .flush = ofi_flush,
    .atomic = ofi_atomic,
    .poll = ofi_poll,
    .epoll_event = ofi_epoll_event,
    .poll_enter = ofi_poll_enter,
    .poll_leave = ofi_poll_leave,
    .sleep_prepare = ofi_sleep_prepare,
    .sleep_done = noop,
    .timer = ofi_timer,
    .active = ofi_active,
    .destroy = ofi_destroy,
};

const struct nv_link_ops *nv_ofi_link_ops(void) { return &ofi_ops; }

static struct fi_info *hints_for(const char *provider, int atomics)
{
    struct fi_info *h = nv_ofi_fi.dupinfo(NULL);
    if (!h)
        return NULL;
    h->caps = FI_MSG | FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_SEND | FI_RECV;
    if (atomics)
        h->caps |= FI_ATOMIC;
    h->mode = FI_CONTEXT | FI_CONTEXT2 | FI_RX_CQ_DATA;
    h->ep_attr->type = FI_EP_RDM;
    /* what this link can live with; the provider keeps the modes it needs.
     * FI_MR_LOCAL too: local buffers then get descriptors from the
     * registration cache (core's, through the lreg upcalls) */
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    /* registrations come from the registration cache, outside the link's lock */
    h->domain_attr->threading = FI_THREAD_SAFE;
    h->tx_attr->msg_order = FI_ORDER_SAW | FI_ORDER_SAS | FI_ORDER_WAW | FI_ORDER_RAW;
    if (provider && *provider)
        h->fabric_attr->prov_name = strdup(provider);
    return h;
}

/* libfabric's shm provider names an endpoint's region in /dev/shm after
 * the process id ("PID:N:N") and removes it when the endpoint closes; a
 * process killed with SIGKILL leaves it behind, and a later process that
 * gets the same id then fails fi_enable with EBUSY. Before this process's
 * first endpoint exists, every region named after its id is such a
 * leftover: remove them. */
static void shm_sweep_own_stale(void)
{
    static pthread_mutex_t once_lock = PTHREAD_MUTEX_INITIALIZER;
    static pid_t swept;   /* the id swept for (a forked child has its own) */
    pthread_mutex_lock(&once_lock);
    if (swept != getpid()) {
        swept = getpid();
        char prefix[32];
        int n = snprintf(prefix, sizeof prefix, "%d:", (int)getpid());
        DIR *d = opendir("/dev/shm");
        for (struct dirent *e; d && (e = readdir(d));) {
            if (!strncmp(e->d_name, prefix, (size_t)n) && unlinkat(dirfd(d), e->d_name, 0) == 0)
                nv_info("ofi link: removed /dev/shm/%s, left by a killed process that had this id", e->d_name);
        }
        if (d)
            closedir(d);
    }
    pthread_mutex_unlock(&once_lock);
}

/* Native atomics (NETVM_OFI_ATOMICS=native): the provider validates
 * every operation they need on 64-bit words */
static int native_atomics_valid(struct ofi_link *o, const struct fi_info *i)
{
    const char *prov = i->fabric_attr->prov_name;
    size_t n = 0;
    int ok = fi_fetch_atomicvalid(o->ep, FI_UINT64, FI_SUM, &n) == 0 && n >= 1 &&
             fi_fetch_atomicvalid(o->ep, FI_UINT64, FI_ATOMIC_WRITE, &n) == 0 && n >= 1 &&
             fi_compare_atomicvalid(o->ep, FI_UINT64, FI_CSWAP, &n) == 0 && n >= 1;
    if (!ok)
        nv_info("ofi link: atomics emulated: provider %s lacks 64-bit fetch-add, swap or compare-swap", prov);
    return ok;
}

static netvm_status_t fail(struct ofi_link *o, const char *what, int rc)
{
    nv_error("ofi link: %s failed: %s", what, nv_ofi_fi.strerror(-rc));
    ofi_destroy(&o->base);
    return NETVM_ERR_SYS;
}

netvm_status_t nv_ofi_link_open(struct nv_link **out, int pfd, const struct nv_ofi_params *p,
                                const struct nv_link_upcalls *up, struct nv_ofi_card *card)
{
    netvm_status_t dst = nv_ofi_dl_open();
    if (dst != NETVM_OK)
        return dst;
    struct ofi_link *o = calloc(1, sizeof *o);
    if (!o)
        return NETVM_ERR_NOMEM;
    o->base.ops = &ofi_ops;
    o->base.up = *up;
    o->base.pfd = pfd;
    o->ev.link = &o->base;
    o->p = *p;
    o->wait_fd = -1;
    o->next_key = 1;
    pthread_mutex_init(&o->lock, NULL);
    o->segs = calloc(p->max_segments, sizeof *o->segs);
    o->rxbuf = malloc((size_t)OFI_RX_N * OFI_RX_BUF);
    if (!o->segs || !o->rxbuf) {
        ofi_destroy(&o->base);
        return NETVM_ERR_NOMEM;
    }
    /* On-demand paging, NetVM's answer to pinning: libfabric 1.17's verbs
     * provider takes the request only from its environment
     * (FI_VERBS_USE_ODP, read when the provider first loads: before the
     * first fi_getinfo) and uses it where the HCA supports it. A user's own
     * setting stands. */
    if (p->odp && !getenv("FI_VERBS_USE_ODP") && (!p->provider || strstr(p->provider, "verbs")))
        setenv("FI_VERBS_USE_ODP", "1", 0);
    /* with FI_ATOMIC where atomics may be native; a provider without them
     * is then asked again without (libfabric 1.17's tcp;ofi_rxm: with
     * FI_ATOMIC it offers no send-after-write ordering, which the link's
     * OK_ACCESS after a write needs) */
    int rc = -FI_ENODATA;
    for (int amo = p->atomics == NV_OFI_AMO_NATIVE; amo >= 0 && (rc || !o->info); amo--) {
        struct fi_info *h = hints_for(p->provider, amo);
        if (!h) {
            ofi_destroy(&o->base);
            return NETVM_ERR_NOMEM;
        }
        rc = nv_ofi_fi.getinfo(OFI_API, NULL, NULL, 0, h, &o->info);
        nv_ofi_fi.freeinfo(h);
        o->native_amo = amo && !rc && o->info;
        if (amo && !o->native_amo)
            nv_info("ofi link: atomics emulated: the provider offers no FI_ATOMIC with the ordering and "
                    "modes the link needs (%s)", nv_ofi_fi.strerror(-rc));
    }
    if (rc || !o->info) {
        nv_error("ofi link: no libfabric provider%s%s offers a reliable datagram endpoint with RMA: %s",
                 p->provider ? " named " : "", p->provider ? p->provider : "", nv_ofi_fi.strerror(-rc));
        ofi_destroy(&o->base);
        return NETVM_ERR_UNSUPPORTED;
    }
    struct fi_info *i = o->info;
    o->virt_addr = (i->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0;
    o->prov_key = (i->domain_attr->mr_mode & FI_MR_PROV_KEY) != 0;
    o->mr_endpoint = (i->domain_attr->mr_mode & FI_MR_ENDPOINT) != 0;
    o->inject = i->tx_attr->inject_size;
    o->rx_cq_data = (i->mode & FI_RX_CQ_DATA) != 0;
    o->mr_local = (i->domain_attr->mr_mode & FI_MR_LOCAL) != 0 || p->force_mr_local;
    nv_info("ofi link: provider %s, fabric %s, mr_mode 0x%x, inject %zu%s", i->fabric_attr->prov_name,
            i->fabric_attr->name, (unsigned)i->domain_attr->mr_mode, o->inject,
            o->mr_local ? ", local descriptors from the registration cache" : "");
    if ((rc = nv_ofi_fi.fabric(i->fabric_attr, &o->fabric, NULL)))
        return fail(o, "fi_fabric", rc);
    if ((rc = fi_domain(o->fabric, i, &o->domain, NULL)))
        return fail(o, "fi_domain", rc);
    struct fi_av_attr av = { .type = FI_AV_TABLE };
    if ((rc = fi_av_open(o->domain, &av, &o->av, NULL)))
        return fail(o, "fi_av_open", rc);
    struct fi_cq_attr cq = { .size = 4096, .format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_FD };
    if ((rc = fi_cq_open(o->domain, &cq, &o->cq, NULL))) {
        nv_info("ofi link: the provider's CQ has no wait fd (%s): polled by a timer", nv_ofi_fi.strerror(-rc));
        cq.wait_obj = FI_WAIT_NONE;
        if ((rc = fi_cq_open(o->domain, &cq, &o->cq, NULL)))
            return fail(o, "fi_cq_open", rc);
    } else if ((rc = fi_control(&o->cq->fid, FI_GETWAIT, &o->wait_fd)) || o->wait_fd < 0) {
        o->wait_fd = -1;
    }
    if (!strcmp(i->fabric_attr->prov_name, "shm"))
        shm_sweep_own_stale();
    if ((rc = fi_endpoint(o->domain, i, &o->ep, NULL)))
        return fail(o, "fi_endpoint", rc);
    if ((rc = fi_ep_bind(o->ep, &o->av->fid, 0)))
        return fail(o, "fi_ep_bind(av)", rc);
    if ((rc = fi_ep_bind(o->ep, &o->cq->fid, FI_TRANSMIT | FI_RECV)))
        return fail(o, "fi_ep_bind(cq)", rc);
    if ((rc = fi_enable(o->ep)))
        return fail(o, "fi_enable", rc);
    o->enabled = 1;
    o->native_amo = o->native_amo && native_atomics_valid(o, i);
    if (o->native_amo)
        nv_info("ofi link: atomics native (the provider's), FCAA emulated");
    struct nv_lreg_registrar reg = ofi_lreg_registrar;
    reg.arg = o;
    netvm_status_t rst = NETVM_OK;
    if (!(o->rc = o->base.up.lreg_open(o->base.up.arg, &reg, &rst))) {
        ofi_destroy(&o->base);
        return rst;
    }
    if (o->mr_local) {
        uint64_t k;
        if (ofi_reg_raw(o, o->rxbuf, (size_t)OFI_RX_N * OFI_RX_BUF, FI_RECV, &o->rx_mr, &k) != NETVM_OK)
            return fail(o, "fi_mr_reg (receive buffers)", -FI_EIO);
    }
    pthread_mutex_lock(&o->lock);
    for (int k = 0; k < OFI_RX_N; k++) {
        o->rx[k].kind = OP_RX;
        o->rx[k].buf = o->rxbuf + (size_t)k * OFI_RX_BUF;
        if (post_rx(o, &o->rx[k]) != NETVM_OK) {
            pthread_mutex_unlock(&o->lock);
            for (int j = 0; j < OFI_RX_N; j++)
                o->rx[j].buf = NULL;   /* part of rxbuf */
            return fail(o, "fi_recv", -FI_EIO);
        }
    }
    pthread_mutex_unlock(&o->lock);
    memset(card, 0, sizeof *card);
    size_t alen = NV_OFI_ADDR_MAX;
    if ((rc = fi_getname(&o->ep->fid, card->addr, &alen)))
        return fail(o, "fi_getname", rc);
    card->version = OFI_VERSION;
    card->addrlen = (uint32_t)alen;
    card->host_id = p->host_id;
    card->pid = (int32_t)getpid();
    if (o->wait_fd >= 0) {
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &o->ev };
        if (epoll_ctl(pfd, EPOLL_CTL_ADD, o->wait_fd, &ev) != 0) {
            nv_warn("ofi link: cannot watch the CQ's wait fd: polled by a timer");
            o->wait_fd = -1;
        }
    }
    unsigned f = NV_LCAP_REGISTER | (o->native_amo ? NV_LCAP_ATOMIC : 0);
    uint64_t need = FI_ORDER_SAW | FI_ORDER_WAW | FI_ORDER_RAW;
    if ((i->tx_attr->msg_order & need) == need)
        f |= NV_LCAP_ORDERED;
    if (i->domain_attr->data_progress == FI_PROGRESS_AUTO)
        f |= NV_LCAP_ONESIDED;
    ofi_ops.caps.flags = f;
    uint64_t mx = i->ep_attr->max_msg_size;
    ofi_ops.caps.max_xfer = mx && mx < (1ull << 30) ? mx : 1ull << 30;
    *out = &o->base;
    return NETVM_OK;
}
