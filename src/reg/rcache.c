/* The local registration cache (rcache.h).
 *
 * Entries live in an interval index (util/itree) under one mutex; unused
 * cached entries are also on an LRU list, oldest first. An entry leaves the
 * index when its memory is released (the monitor's invalidate, memmon.c),
 * when it is evicted, or in a forked child; it is deregistered once it is
 * out of the index and nobody uses it.
 *
 * Rules that keep the memory monitor from deadlocking (memmon.c says why):
 * under the cache lock nothing allocates, frees, calls the registrar or
 * makes a system call. Entries to deregister go on the `dead` list and are
 * deregistered and freed by whichever user call comes next, outside the
 * lock. The index grows by an array allocated outside the lock.
 *
 * A miss registers outside the lock, so a release can race it: the range is
 * watched first, the registrar called next, and the entry is cached only if
 * no event was read in between (nv_memmon_events); otherwise it is handed
 * out uncached and deregistered when put. An event read after the check
 * finds the entry in the index, since the check and the insert are under
 * the lock the invalidation takes. */
#define _GNU_SOURCE
#include "reg/rcache.h"

#include "reg/memmon.h"
#include "util/itree.h"
#include "util/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_MAX_ENTRIES 1024

struct ent {
    struct nv_lreg pub;     /* first: the user's pointer is ours */
    unsigned       rights;
    int            refs;            /* under the lock */
    unsigned char  cached;          /* in the index */
    unsigned char  forgotten;       /* a forked child's copy of the parent's: never deregistered */
    struct ent    *prev, *next;     /* LRU while cached and unused; dead list after */
};

struct nv_rcache {
    pthread_mutex_t lock;
    struct nv_lreg_registrar r;
    size_t max_entries, max_bytes;
    uintptr_t page;
    struct nv_itree_node *idx;
    size_t n, cap;
    struct ent lru;                 /* sentinel: lru.next oldest, lru.prev newest */
    size_t unused_bytes;
    struct ent *dead;
    struct nv_rcache_stats st;
    struct nv_memmon_client mc;
};

static void lru_unlink(struct ent *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = NULL;
}

static void lru_append(struct nv_rcache *c, struct ent *e)
{
    e->prev = c->lru.prev;
    e->next = &c->lru;
    c->lru.prev->next = e;
    c->lru.prev = e;
}

static void push_dead(struct nv_rcache *c, struct ent *e)
{
    e->next = c->dead;
    c->dead = e;
}

/* under the lock: out of the index (and off the LRU, onto the dead list if
 * unused) */
static void drop(struct nv_rcache *c, struct ent *e)
{
    c->n = nv_itree_remove(c->idx, c->n, e->pub.addr, (uint64_t)(uintptr_t)e);
    e->cached = 0;
    if (e->refs == 0) {
        lru_unlink(e);
        c->unused_bytes -= e->pub.len;
        push_dead(c, e);
    }
}

/* under the lock */
static void evict(struct nv_rcache *c)
{
    int changed = 0;
    while (c->lru.next != &c->lru && (c->n > c->max_entries || (c->max_bytes && c->unused_bytes > c->max_bytes))) {
        drop(c, c->lru.next);
        c->st.evictions++;
        changed = 1;
    }
    if (changed)
        nv_itree_build(c->idx, c->n);
}

/* outside the lock */
static void reap(struct nv_rcache *c, struct ent *list)
{
    uint64_t n = 0;
    while (list) {
        struct ent *e = list;
        list = e->next;
        if (!e->forgotten) {
            c->r.dereg(c->r.arg, e->pub.handle);
            n++;
        }
        free(e);
    }
    if (n) {
        pthread_mutex_lock(&c->lock);
        c->st.deregs += n;
        pthread_mutex_unlock(&c->lock);
    }
}

static struct ent *take_dead(struct nv_rcache *c)
{
    struct ent *d = c->dead;
    c->dead = NULL;
    return d;
}

/* ---- the monitor's side ---- */

struct collect {
    struct ent *e[32];
    int n;
};

static int collect_one(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    struct collect *k = arg;
    k->e[k->n++] = (struct ent *)(uintptr_t)data;
    return k->n == (int)(sizeof k->e / sizeof k->e[0]);
}

static void on_release(void *arg, uintptr_t start, uintptr_t end)
{
    struct nv_rcache *c = arg;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        struct collect k = { .n = 0 };
        nv_itree_query(c->idx, c->n, start, end, collect_one, &k);
        if (!k.n)
            break;
        for (int i = 0; i < k.n; i++) {
            drop(c, k.e[i]);
            c->st.invalidations++;
        }
        nv_itree_build(c->idx, c->n);
    }
    pthread_mutex_unlock(&c->lock);
}

static void on_fork_prepare(void *arg)
{
    pthread_mutex_lock(&((struct nv_rcache *)arg)->lock);
}

static void on_fork_parent(void *arg)
{
    pthread_mutex_unlock(&((struct nv_rcache *)arg)->lock);
}

/* The child's memory is no longer watched (the kernel dropped every
 * userfaultfd registration) and the registrations are the parent's
 * (mlock is not inherited; an RDMA region belongs to the parent's
 * device context): the child forgets them all, deregistering none, and
 * starts empty. An entry the forking thread still holds stays valid for
 * it until put, and is then forgotten too. */
static void on_fork_child(void *arg)
{
    struct nv_rcache *c = arg;
    for (struct ent *e = c->dead; e; e = e->next)
        e->forgotten = 1;
    for (size_t i = 0; i < c->n; i++) {
        struct ent *e = (struct ent *)(uintptr_t)c->idx[i].data;
        e->forgotten = 1;
        e->cached = 0;
        if (e->refs == 0) {
            lru_unlink(e);
            push_dead(c, e);
        }
    }
    c->n = 0;
    c->unused_bytes = 0;
    pthread_mutex_unlock(&c->lock);
}

/* ---- the users' side ---- */

netvm_status_t nv_rcache_create(struct nv_rcache **cp, const struct nv_lreg_registrar *r,
                                const struct nv_rcache_params *p)
{
    if (!cp || !r || !r->reg || !r->dereg)
        return NETVM_ERR_INVAL;
    struct nv_rcache *c = calloc(1, sizeof *c);
    if (!c)
        return NETVM_ERR_NOMEM;
    c->r = *r;
    c->max_entries = p && p->max_entries ? p->max_entries : DEFAULT_MAX_ENTRIES;
    c->max_bytes = p ? p->max_bytes : 0;
    c->page = (uintptr_t)sysconf(_SC_PAGESIZE);
    c->cap = (c->max_entries < 1024 ? c->max_entries : 1024) + 16;
    c->idx = malloc(c->cap * sizeof *c->idx);
    if (!c->idx) {
        free(c);
        return NETVM_ERR_NOMEM;
    }
    c->lru.next = c->lru.prev = &c->lru;
    pthread_mutex_init(&c->lock, NULL);
    c->mc = (struct nv_memmon_client){ .arg = c, .invalidate = on_release, .fork_prepare = on_fork_prepare,
                                       .fork_parent = on_fork_parent, .fork_child = on_fork_child };
    /* without a monitor the cache still works, registering per use */
    (void)nv_memmon_add(&c->mc);
    *cp = c;
    return NETVM_OK;
}

void nv_rcache_destroy(struct nv_rcache *c)
{
    if (!c)
        return;
    nv_memmon_remove(&c->mc);
    pthread_mutex_lock(&c->lock);
    size_t busy = 0;
    for (size_t i = 0; i < c->n; i++) {
        struct ent *e = (struct ent *)(uintptr_t)c->idx[i].data;
        if (e->refs) {
            busy++;   /* still someone's: left to leak rather than freed under them */
            e->cached = 0;
            e->forgotten = 1;
        } else {
            lru_unlink(e);
            push_dead(c, e);
        }
    }
    c->n = 0;
    struct ent *d = take_dead(c);
    pthread_mutex_unlock(&c->lock);
    if (busy)
        nv_error("registration cache destroyed with %zu entries in use: they are leaked, not deregistered", busy);
    reap(c, d);
    pthread_mutex_destroy(&c->lock);
    free(c->idx);
    free(c);
}

struct find {
    uintptr_t end;
    unsigned rights;
    struct ent *hit;
};

static int find_cover(void *arg, uint64_t data, uint64_t start, uint64_t end)
{
    struct find *f = arg;
    struct ent *e = (struct ent *)(uintptr_t)data;
    if (end >= f->end && (e->rights & f->rights) == f->rights) {
        f->hit = e;
        return 1;
    }
    return 0;
}

/* Under the lock, returns with it held and room for one more node; arrays
 * are allocated and freed with it released. */
static int reserve(struct nv_rcache *c)
{
    while (c->n + 1 > c->cap) {
        size_t want = c->cap * 2;
        pthread_mutex_unlock(&c->lock);
        struct nv_itree_node *a = malloc(want * sizeof *a);
        pthread_mutex_lock(&c->lock);
        if (!a)
            return -1;
        struct nv_itree_node *old = a;
        if (c->n + 1 > c->cap && want > c->cap) {
            memcpy(a, c->idx, c->n * sizeof *a);
            old = c->idx;
            c->idx = a;
            c->cap = want;
        }
        pthread_mutex_unlock(&c->lock);
        free(old);
        pthread_mutex_lock(&c->lock);
    }
    return 0;
}

netvm_status_t nv_rcache_get(struct nv_rcache *c, const void *addr, size_t len, unsigned rights,
                             struct nv_lreg **out)
{
    uintptr_t a = (uintptr_t)addr;
    if (!c || !out || !len || a + len < a)
        return NETVM_ERR_INVAL;
    uintptr_t start = a & ~(c->page - 1);
    uintptr_t end = (a + len + c->page - 1) & ~(c->page - 1);
    if (end < a)
        return NETVM_ERR_INVAL;

    /* a release that returned before this call is invalidated by now */
    nv_memmon_sync();
    pthread_mutex_lock(&c->lock);
    struct find f = { .end = a + len, .rights = rights };
    nv_itree_query(c->idx, c->n, a, a + 1, find_cover, &f);
    if (f.hit) {
        struct ent *e = f.hit;
        if (e->refs++ == 0) {
            lru_unlink(e);
            c->unused_bytes -= e->pub.len;
        }
        c->st.hits++;
        pthread_mutex_unlock(&c->lock);
        *out = &e->pub;
        return NETVM_OK;
    }
    struct ent *d = take_dead(c);
    pthread_mutex_unlock(&c->lock);
    reap(c, d);

    struct ent *e = calloc(1, sizeof *e);
    if (!e)
        return NETVM_ERR_NOMEM;
    e->pub.addr = start;
    e->pub.len = end - start;
    e->rights = rights;
    e->refs = 1;
    uint64_t seen = nv_memmon_events();
    int w = nv_memmon_watch((void *)start, end - start);
    netvm_status_t st = c->r.reg(c->r.arg, (void *)start, end - start, rights, &e->pub.handle);
    if (st != NETVM_OK) {
        free(e);
        return st;
    }
    pthread_mutex_lock(&c->lock);
    c->st.regs++;
    if (w != 0) {
        c->st.uncached++;
    } else {
        c->st.misses++;
        if (reserve(c) == 0 && nv_memmon_events() == seen) {
            c->n = nv_itree_insert(c->idx, c->n, start, end, (uint64_t)(uintptr_t)e);
            nv_itree_build(c->idx, c->n);
            e->cached = 1;
            evict(c);
        }
    }
    d = take_dead(c);
    pthread_mutex_unlock(&c->lock);
    reap(c, d);
    *out = &e->pub;
    return NETVM_OK;
}

void nv_rcache_put(struct nv_rcache *c, struct nv_lreg *pe)
{
    if (!c || !pe)
        return;
    struct ent *e = (struct ent *)pe;
    /* a release that returned before this call has dropped the entry, so
     * it is deregistered now, not at some later call */
    nv_memmon_sync();
    pthread_mutex_lock(&c->lock);
    if (--e->refs > 0) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    if (e->cached) {
        lru_append(c, e);
        c->unused_bytes += e->pub.len;
        evict(c);
    } else {
        push_dead(c, e);
    }
    struct ent *d = c->dead ? take_dead(c) : NULL;
    pthread_mutex_unlock(&c->lock);
    if (d)
        reap(c, d);
}

void nv_rcache_get_stats(struct nv_rcache *c, struct nv_rcache_stats *s)
{
    /* releases that returned before this call are counted */
    nv_memmon_sync();
    pthread_mutex_lock(&c->lock);
    struct ent *d = take_dead(c);
    pthread_mutex_unlock(&c->lock);
    reap(c, d);
    pthread_mutex_lock(&c->lock);
    *s = c->st;
    pthread_mutex_unlock(&c->lock);
}
