/* A tcp connection's life: creation, the socket's settings, its place in
 * core's epoll set, ownership, failure and release. */
#define _GNU_SOURCE
#include "link/tcp/tcp_priv.h"
#include "util/log.h"
#include "util/thread.h"
#include "util/time.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

/* The connection whose receive path this thread is running (handlers it
 * calls may send on it). */
static _Thread_local struct tcp_conn *owned_here NV_TLS_IE;

int tcp_tune_socket(int fd, int timeout_ms)
{
    int one = 1;
    /* small frames must not wait for Nagle */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* an unreachable peer: the kernel gives up after NETVM_TIMEOUT */
    unsigned uto = (unsigned)timeout_ms;
    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &uto, sizeof uto);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    int idle = timeout_ms / 2000 > 0 ? timeout_ms / 2000 : 1, cnt = 2;
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
    int fl = fcntl(fd, F_GETFL);
    return fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

struct tcp_conn *tcp_conn_new(struct tcp_link *t, int fd)
{
    struct tcp_conn *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ev.link = &t->base;
    c->t = t;
    c->fd = fd;
    pthread_mutex_init(&c->mail_lock, NULL);
    return c;
}

/* Listed first, watched last: once in the epoll set, the thread holding
 * the progress pass may serve it at once, and free it (a connect refused at
 * once), so nothing may touch it after epoll_ctl. */
int tcp_conn_publish(struct tcp_conn *c, unsigned events)
{
    struct tcp_link *t = c->t;
    c->interest = events;
    c->watched = 1;
    pthread_mutex_lock(&t->conns_lock);
    c->next = t->conns;
    if (t->conns)
        t->conns->prev = c;
    t->conns = c;
    c->listed = 1;
    pthread_mutex_unlock(&t->conns_lock);
    atomic_fetch_add(&t->nconns, 1);
    struct epoll_event ev = { .events = events, .data.ptr = &c->ev };
    if (epoll_ctl(t->base.pfd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        nv_error("tcp link: cannot watch a connection: %s", strerror(errno));
        pthread_mutex_lock(&t->conns_lock);
        if (c->prev)
            c->prev->next = c->next;
        else if (t->conns == c)
            t->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        c->next = c->prev = NULL;
        c->listed = 0;
        pthread_mutex_unlock(&t->conns_lock);
        c->watched = 0;
        atomic_fetch_sub(&t->nconns, 1);
        return -1;
    }
    return 0;
}

/* The buffers a connection needs once it carries traffic (a stranger in
 * its handshake holds none of them). */
int tcp_conn_buffers(struct tcp_conn *c)
{
    if (!c->stage)
        c->stage = malloc(TCP_STAGE_CAP);
    if (!c->tx.arena)
        c->tx.arena = malloc(TCP_ARENA_CAP);
    return c->stage && c->tx.arena ? 0 : -1;
}

/* Only its owner changes what a connection asks; the lock orders that
 * against tcp_watch putting it back with what it asks. */
void tcp_conn_interest(struct tcp_conn *c, unsigned events)
{
    if (c->interest == events || c->fd < 0)
        return;
    pthread_mutex_lock(&c->t->watch_lock);
    c->interest = events;
    if (c->watched) {
        struct epoll_event ev = { .events = events, .data.ptr = &c->ev };
        epoll_ctl(c->t->base.pfd, EPOLL_CTL_MOD, c->fd, &ev);
    }
    pthread_mutex_unlock(&c->t->watch_lock);
}

/* Out of the epoll set for good (a dead or freed connection). */
static void conn_unwatch(struct tcp_conn *c)
{
    pthread_mutex_lock(&c->t->watch_lock);
    if (c->watched)
        epoll_ctl(c->t->base.pfd, EPOLL_CTL_DEL, c->fd, NULL);
    c->watched = 0;
    pthread_mutex_unlock(&c->t->watch_lock);
}

/* A thread reads the ready connections directly (poll_direct) and nobody
 * sleeps on P: out of the epoll set, an arriving segment runs no epoll
 * callback (msg_lat 8% lower on loopback, docs/performance.md). Back in, epoll
 * reports at once what is pending (level-triggered). A connection that is
 * not ready stays: its handshake is driven by P's events, and a dead one
 * must not come back (tcp_conn_fail marks it dead before it leaves, so
 * seen ready here, it leaves after). */
void tcp_watch(struct nv_link *l, int on)
{
    struct tcp_link *t = tcp_of(l);
    pthread_mutex_lock(&t->conns_lock);
    pthread_mutex_lock(&t->watch_lock);
    for (struct tcp_conn *c = t->conns; c; c = c->next) {
        if (c->watched == on || atomic_load(&c->state) != CONN_READY)
            continue;
        struct epoll_event ev = { .events = c->interest, .data.ptr = &c->ev };
        if (epoll_ctl(t->base.pfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c->fd, on ? &ev : NULL) == 0)
            c->watched = on;
        else
            nv_error("tcp link: cannot %s a connection: %s", on ? "watch" : "unwatch", strerror(errno));
    }
    pthread_mutex_unlock(&t->watch_lock);
    pthread_mutex_unlock(&t->conns_lock);
}

void tcp_conn_free(struct tcp_conn *c)
{
    if (!c)
        return;
    struct tcp_link *t = c->t;
    if (c->listed) {
        pthread_mutex_lock(&t->conns_lock);
        if (c->prev)
            c->prev->next = c->next;
        else if (t->conns == c)
            t->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&t->conns_lock);
        atomic_fetch_sub(&t->nconns, 1);
        conn_unwatch(c);
    }
    /* a large message landing when the connection went: its end, failed */
    tcp_rx_abort(c);
    if (c->fd >= 0)
        close(c->fd);
    tcp_tx_free(c);
    if (c->hs) {
        explicit_bzero(c->hs, sizeof *c->hs);
        free(c->hs);
    }
    free(c->stage);
    pthread_mutex_destroy(&c->mail_lock);
    free(c);
}

void tcp_conn_fail(struct tcp_conn *c, const char *why)
{
    int prev = atomic_exchange(&c->state, CONN_DEAD);
    if (prev == CONN_DEAD)
        return;
    if (!c->lp) {
        if (prev != CONN_CONNECTING && prev != CONN_HS_WELCOME)
            nv_warn("tcp link: closed a connection before it authenticated: %s", why);
        return;
    }
    if (c->bye)
        nv_debug("tcp link: peer %d finished", c->lp->id);
    else
        nv_warn("tcp link: connection to peer %d failed: %s", c->lp->id, why);
    /* the socket stays open (its fd number cannot be reused under a thread
     * still holding the connection) until the peer's state is freed; it
     * leaves the epoll set now: a shut-down socket reports EPOLLHUP
     * whatever it is asked for, so every wait on the set would return at
     * once from now on */
    shutdown(c->fd, SHUT_RDWR);
    conn_unwatch(c);
    atomic_store(&c->lp->down, 1);
    c->t->base.up.peer_down(c->t->base.up.arg, c->lp, c->bye);
}

int tcp_owned_here(struct tcp_conn *c) { return owned_here == c; }

int tcp_own(struct tcp_conn *c)
{
    if (owned_here == c)
        return 0;
    int free_ = 0;
    if (!atomic_compare_exchange_strong_explicit(&c->lock, &free_, 1, memory_order_acquire, memory_order_relaxed))
        return -1;
    return 0;
}

void tcp_own_wait(struct tcp_conn *c)
{
    for (unsigned spins = 0; tcp_own(c) != 0; spins++) {
        if (spins > 128)
            sched_yield();
        else
            nv_cpu_relax();
    }
}

void tcp_release(struct tcp_conn *c)
{
    if (owned_here == c)
        return;   /* the outer owner lets go */
    for (;;) {
        if (atomic_load_explicit(&c->mail_n, memory_order_acquire)) {
            tcp_take_mail(c);
            if (atomic_load(&c->state) == CONN_READY)
                tcp_tx_push(c);
        }
        atomic_store_explicit(&c->lock, 0, memory_order_release);
        /* mail left after our look: whoever owns it next sends it */
        if (!atomic_load_explicit(&c->mail_n, memory_order_seq_cst) || tcp_own(c) != 0)
            return;
    }
}

/* Run fn with c marked as this thread's (handlers it calls may send on c). */
int tcp_rx_owned(struct tcp_conn *c, int (*fn)(struct tcp_conn *))
{
    struct tcp_conn *was = owned_here;
    owned_here = c;
    int n = fn(c);
    owned_here = was;
    return n;
}
