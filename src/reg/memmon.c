/* The memory monitor (memmon.h).
 *
 * Why the releasing call is closed off without a syscall on the hit path.
 * For UNMAP, REMOVE and REMAP the kernel queues the event once the memory
 * is gone and blocks the releasing thread until the event is READ from the
 * userfaultfd; read() itself lets it go, before this thread has
 * invalidated anything. So the monitor raises `busy` (seq_cst) BEFORE each
 * read() and lowers it (release) only after every client invalidated what
 * that read returned. Take a lookup made after a releasing call R
 * returned: R returned after read() dequeued its event (the kernel's
 * wake-up orders the two), and that read() came after busy was raised, so
 * the lookup's load of busy (in nv_memmon_sync) sees that store or a later
 * one. Seeing 1, it waits for 0; the store of 0 comes after the
 * invalidation, so either way the lookup then searches a cache that no
 * longer holds R's range. Between lowering busy and raising it again no
 * read() happens, so no releasing thread is let go unseen.
 *
 * What the monitor must never wait for: a thread inside a releasing call
 * is blocked in the kernel until we read, and it may hold anything its
 * caller held: the malloc arena lock (free() trimming the heap with brk or
 * madvise), a registrar's own locks, the stdio lock. So the monitor thread
 * never allocates, frees, logs or calls a registrar between poll() and the
 * end of an invalidation; clients' invalidate callbacks only take the
 * client's lock, which nobody holds across a releasing call (rcache.c never
 * calls munmap, free or the registrar under it). The list lock is taken
 * only by add/remove and fork, which make no releasing call under it.
 *
 * Fork. Without UFFD_FEATURE_EVENT_FORK the kernel clears every userfaultfd
 * registration in the child, and the child inherits the parent's
 * userfaultfd, bound to the parent's address space, and no monitor thread.
 * The child handler closes that descriptor, clears busy (the thread that
 * raised it does not exist there) and lets clients forget what they
 * cached; the next nv_memmon_watch in the child opens its own userfaultfd
 * and starts its own thread. The prepare handler takes the lifecycle lock,
 * the list lock and every client's lock so the child finds them all in a
 * known state. */
#define _GNU_SOURCE
#include "reg/memmon.h"

#include "util/log.h"
#include "util/time.h"
#include "util/uffd.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_EVENT_REMAP
#define UFFD_EVENT_REMAP 0x14
#endif
#ifndef UFFD_EVENT_REMOVE
#define UFFD_EVENT_REMOVE 0x15
#endif
#ifndef UFFD_EVENT_UNMAP
#define UFFD_EVENT_UNMAP 0x16
#endif

atomic_int nv_memmon_busy_;

static struct {
    pthread_mutex_t life;            /* start and stop; taken before lock */
    pthread_mutex_t lock;            /* the client list */
    struct nv_memmon_client *clients;
    int             running;         /* under life */
    _Atomic int     uffd;            /* -1 when not running */
    int             stopfd;
    pthread_t       thread;
    int             open_err;        /* the last start's -errno, 0 if it ran */
    int             warned;
    atomic_uint_fast64_t events;
} mon = {
    .life = PTHREAD_MUTEX_INITIALIZER,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .uffd = -1,
    .stopfd = -1,
};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

void nv_memmon_wait_idle_(void)
{
    /* the monitor needs a CPU to finish; on two cores spinning long only
     * delays it */
    for (int i = 0; atomic_load_explicit(&nv_memmon_busy_, memory_order_acquire); i++) {
        if (i < 64)
            nv_cpu_relax();
        else
            sched_yield();
    }
}

uint64_t nv_memmon_events(void)
{
    return atomic_load_explicit(&mon.events, memory_order_seq_cst);
}

static void dispatch(uintptr_t start, uintptr_t end)
{
    for (struct nv_memmon_client *c = mon.clients; c; c = c->next)
        c->invalidate(c->arg, start, end);
}

static void *monitor_main(void *unused)
{
    (void)unused;
    pthread_setname_np(pthread_self(), "netvm-memmon");
    int fd = atomic_load(&mon.uffd);
    struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = mon.stopfd, .events = POLLIN } };
    struct uffd_msg msg[32];
    for (;;) {
        if (poll(p, 2, -1) < 0)
            continue;                  /* EINTR: signals are blocked, but be safe */
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        atomic_store_explicit(&nv_memmon_busy_, 1, memory_order_seq_cst);
        ssize_t n = read(fd, msg, sizeof msg);
        if (n <= 0) {
            /* EAGAIN: another reader cannot exist, but a spurious wake-up
             * can; nothing was dequeued, so nobody was let go */
            atomic_store_explicit(&nv_memmon_busy_, 0, memory_order_release);
            continue;
        }
        atomic_fetch_add_explicit(&mon.events, 1, memory_order_seq_cst);
        pthread_mutex_lock(&mon.lock);
        for (size_t i = 0; i < (size_t)n / sizeof msg[0]; i++) {
            const struct uffd_msg *m = &msg[i];
            switch (m->event) {
            case UFFD_EVENT_UNMAP:
            case UFFD_EVENT_REMOVE:
                dispatch((uintptr_t)m->arg.remove.start, (uintptr_t)m->arg.remove.end);
                break;
            case UFFD_EVENT_REMAP:
                /* the pages left the old range; the new one is watched
                 * (the registration moves with the mapping) but holds no
                 * entry until someone asks for it */
                dispatch((uintptr_t)m->arg.remap.from, (uintptr_t)m->arg.remap.from + m->arg.remap.len);
                break;
            default:
                /* no write-protection is ever set and no other event was
                 * asked for: nothing else can arrive */
                break;
            }
        }
        pthread_mutex_unlock(&mon.lock);
        atomic_store_explicit(&nv_memmon_busy_, 0, memory_order_release);
    }
    return NULL;
}

static void on_prepare(void)
{
    pthread_mutex_lock(&mon.life);
    pthread_mutex_lock(&mon.lock);
    for (struct nv_memmon_client *c = mon.clients; c; c = c->next)
        c->fork_prepare(c->arg);
}

static void on_parent(void)
{
    for (struct nv_memmon_client *c = mon.clients; c; c = c->next)
        c->fork_parent(c->arg);
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
}

static void on_child(void)
{
    int fd = atomic_exchange(&mon.uffd, -1);
    if (fd >= 0)
        close(fd);
    if (mon.stopfd >= 0)
        close(mon.stopfd);
    mon.stopfd = -1;
    mon.running = 0;
    mon.open_err = 0;
    atomic_store(&nv_memmon_busy_, 0);
    for (struct nv_memmon_client *c = mon.clients; c; c = c->next)
        c->fork_child(c->arg);
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
}

static void register_atfork(void)
{
    pthread_atfork(on_prepare, on_parent, on_child);
}

/* under life */
static int start_locked(void)
{
    if (mon.running)
        return 0;
    char why[256] = "";
    struct nv_uffd_caps caps;
    int fd = nv_uffd_open(UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP |
                              UFFD_FEATURE_WP_HUGETLBFS_SHMEM,
                          &caps, why, sizeof why);
    if (fd >= 0) {
        uint64_t need = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_REMAP;
        if ((caps.features & need) != need) {
            snprintf(why, sizeof why, "this kernel's userfaultfd lacks the unmap, remove or remap event");
            close(fd);
            fd = -EOPNOTSUPP;
        }
    }
    if (fd < 0) {
        if (!mon.warned)
            nv_warn("registration cache: memory cannot be watched, every registration is made per use: %s", why);
        mon.warned = 1;
        mon.open_err = fd;
        return fd;
    }
    int sfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sfd < 0) {
        int e = -errno;
        close(fd);
        mon.open_err = e;
        return e;
    }
    atomic_store(&mon.uffd, fd);
    mon.stopfd = sfd;
    /* the monitor must not run signal handlers: one could do anything */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int e = pthread_create(&mon.thread, NULL, monitor_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) {
        atomic_store(&mon.uffd, -1);
        close(fd);
        close(sfd);
        mon.stopfd = -1;
        mon.open_err = -e;
        return -e;
    }
    mon.running = 1;
    mon.open_err = 0;
    return 0;
}

/* under life */
static void stop_locked(void)
{
    if (!mon.running)
        return;
    uint64_t one = 1;
    if (write(mon.stopfd, &one, sizeof one) != (ssize_t)sizeof one)
        nv_error("registration cache: cannot stop the memory monitor: %s", strerror(errno));
    pthread_join(mon.thread, NULL);
    /* a releasing call that came in after the thread stopped reading is
     * blocked in the kernel: closing the last descriptor wakes it and
     * unregisters every range */
    int fd = atomic_exchange(&mon.uffd, -1);
    close(fd);
    close(mon.stopfd);
    mon.stopfd = -1;
    mon.running = 0;
}

int nv_memmon_add(struct nv_memmon_client *cl)
{
    pthread_once(&atfork_once, register_atfork);
    pthread_mutex_lock(&mon.life);
    int r = start_locked();
    pthread_mutex_lock(&mon.lock);
    cl->next = mon.clients;
    mon.clients = cl;
    pthread_mutex_unlock(&mon.lock);
    pthread_mutex_unlock(&mon.life);
    return r;
}

void nv_memmon_remove(struct nv_memmon_client *cl)
{
    pthread_mutex_lock(&mon.life);
    pthread_mutex_lock(&mon.lock);
    for (struct nv_memmon_client **p = &mon.clients; *p; p = &(*p)->next)
        if (*p == cl) {
            *p = cl->next;
            break;
        }
    int last = mon.clients == NULL;
    pthread_mutex_unlock(&mon.lock);
    if (last)
        stop_locked();
    pthread_mutex_unlock(&mon.life);
}

int nv_memmon_watch(void *addr, size_t len)
{
    int fd = atomic_load(&mon.uffd);
    if (fd < 0) {
        /* a forked child, or a start that failed: try (again) once per
         * state change, not on every call */
        pthread_mutex_lock(&mon.life);
        int r = mon.clients && mon.open_err == 0 ? start_locked() : (mon.open_err ? mon.open_err : -ENODEV);
        pthread_mutex_unlock(&mon.life);
        if (r < 0)
            return -ENODEV;
        fd = atomic_load(&mon.uffd);
    }
    return nv_uffd_register(fd, addr, len, UFFDIO_REGISTER_MODE_WP);
}
