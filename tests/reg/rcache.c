/* The local registration cache never hands out a stale registration
 * (src/reg/rcache.h), in the spirit of libfabric's fabtests mr_cache_evict
 * and unmap_mem.
 *
 * The registrar numbers every registration it makes (a generation) and
 * pins for real with mlock (except where a pin would make the release
 * fail: madvise DONTNEED/FREE/REMOVE refuse locked pages). Before a test
 * releases memory it notes the generation counter; any lookup made after
 * the release returned must get a registration numbered above it, else
 * the cache returned a registration made before the memory under it was
 * released: a stale hit.
 *
 * reg_rcache [scenario...]: every scenario when none is named; `bench`
 * prints the median hit latency. */
#define _GNU_SOURCE
#include "check.h"
#include "reg/rcache.h"
#include "util/uffd.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

static size_t PG;

/* ---- the recording registrar ---- */

#define VICTIM_BUSY ((char *)1)
struct treg {
    atomic_uint_fast64_t gen;     /* registrations made so far */
    char *_Atomic victim;         /* the next dereg unmaps it (a watched range) */
    size_t victim_len;
    atomic_long live;             /* registrations not yet deregistered */
    atomic_long regs, deregs;
    int pin;
};

struct th {
    uint64_t gen;
    pid_t tid;
    void *addr;
    size_t len;
    int pinned;
};

static netvm_status_t t_reg(void *arg, void *addr, size_t len, unsigned rights, void **handle)
{
    struct treg *t = arg;
    struct th *h = malloc(sizeof *h);
    if (!h)
        return NETVM_ERR_NOMEM;
    h->addr = addr;
    h->len = len;
    h->pinned = 0;
    if (t->pin) {
        if (mlock(addr, len) != 0) {
            free(h);
            return NETVM_ERR_FAULT;
        }
        h->pinned = 1;
    }
    h->gen = atomic_fetch_add(&t->gen, 1) + 1;
    h->tid = gettid();
    atomic_fetch_add(&t->live, 1);
    atomic_fetch_add(&t->regs, 1);
    *handle = h;
    return NETVM_OK;
}

static void t_dereg(void *arg, void *handle)
{
    struct treg *t = arg;
    struct th *h = handle;
    if (h->pinned)
        munlock(h->addr, h->len);   /* ENOMEM once unmapped: nothing left to unpin */
    /* claimed, unmapped, and only then cleared: a thread that waits for
     * NULL looks up after the release returned */
    char *v = atomic_load(&t->victim);
    if (v && v != VICTIM_BUSY && atomic_compare_exchange_strong(&t->victim, &v, VICTIM_BUSY)) {
        CHECK(munmap(v, t->victim_len) == 0);
        atomic_store(&t->victim, NULL);
    }
    atomic_fetch_sub(&t->live, 1);
    atomic_fetch_add(&t->deregs, 1);
    free(h);
}

static struct treg R;

static struct nv_rcache *mk(int pin, size_t max_entries, size_t max_bytes)
{
    memset(&R, 0, sizeof R);
    R.pin = pin;
    struct nv_lreg_registrar r = { .arg = &R, .reg = t_reg, .dereg = t_dereg };
    struct nv_rcache_params p = { .max_entries = max_entries, .max_bytes = max_bytes };
    struct nv_rcache *c;
    CHECK_OK(nv_rcache_create(&c, &r, &p));
    return c;
}

static void done(struct nv_rcache *c)
{
    nv_rcache_destroy(c);
    CHECK(atomic_load(&R.live) == 0);
    CHECK(atomic_load(&R.regs) == atomic_load(&R.deregs));
}

static uint64_t mark(void)
{
    return atomic_load(&R.gen);
}

static uint64_t gen_of(struct nv_lreg *e)
{
    return ((struct th *)e->handle)->gen;
}

/* get and put once: the range is now cached (where it can be) */
static void touch(struct nv_rcache *c, const void *p, size_t len)
{
    struct nv_lreg *e;
    CHECK_OK(nv_rcache_get(c, p, len, NETVM_RW, &e));
    CHECK(e->addr <= (uintptr_t)p && e->addr + e->len >= (uintptr_t)p + len);
    nv_rcache_put(c, e);
}

static void stale_report(const struct nv_lreg *e)
{
    const struct th *h = e->handle;
    fprintf(stderr, "stale entry [%#lx, +%#zx) registered by thread %d (this is %d)\n", (unsigned long)e->addr,
            e->len, h->tid, gettid());
}

/* the memory under [p, p + len) was released after m was noted */
#define EXPECT_FRESH(c, p, len, m) do { \
    struct nv_lreg *e_; \
    CHECK_OK(nv_rcache_get((c), (p), (len), NETVM_RW, &e_)); \
    if (gen_of(e_) <= (m)) \
        stale_report(e_); \
    if (gen_of(e_) <= (m)) \
        FAILF("stale hit: registration %llu, made before the release (generation %llu) of %p", \
              (unsigned long long)gen_of(e_), (unsigned long long)(m), (void *)(p)); \
    nv_rcache_put((c), e_); \
} while (0)

static uint64_t hits(struct nv_rcache *c)
{
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    return s.hits;
}

/* a PROT_NONE placeholder an mremap may land on (MREMAP_FIXED replaces
 * whatever is there: never let it be someone else's) */
static char *placeholder(size_t len)
{
    char *q = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(q != MAP_FAILED);
    return q;
}

static void replace_with_placeholder(char *q, size_t len)
{
    CHECK(mmap(q, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == q);
}

static int reuse_missed;   /* map_at could not map the same address again */

static void *map_at(void *at, size_t len, int flags)
{
    void *p = mmap(at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0) | flags, -1, 0);
    if (p == MAP_FAILED && at && errno == EEXIST) {
        /* another thread mapped the freed address (under ASan its runtime
         * does, for the monitor thread): go on elsewhere */
        p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
    }
    if (p == MAP_FAILED)
        FAILF("mmap at %p: %s", at, strerror(errno));
    if (at && p != at)
        reuse_missed++;
    memset(p, 1, len);
    return p;
}

/* ---- scenarios ---- */

/* the same range unmapped and mapped again, many times */
static void s_mmap_reuse(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 16 * PG;
    char *p = map_at(NULL, len, 0);
    for (int i = 0; i < rounds; i++) {
        touch(c, p + 100, 1000);
        touch(c, p, len);
        uint64_t h0 = hits(c);
        touch(c, p + 5000, 3 * PG);
        CHECK(hits(c) == h0 + 1);   /* it is a cache */
        uint64_t m = mark();
        CHECK(munmap(p, len) == 0);
        p = map_at(p, len, 0);
        EXPECT_FRESH(c, p, len, m);
        EXPECT_FRESH(c, p + 100, 1000, m);
    }
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.invalidations >= (uint64_t)rounds);
    CHECK(s.uncached == 0);
    munmap(p, len);
    done(c);
}

/* MAP_FIXED over a registered range, whole and one page in the middle */
static void s_map_fixed(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 16 * PG;
    char *p = map_at(NULL, len, 0);
    for (int i = 0; i < rounds; i++) {
        touch(c, p, len);
        uint64_t m = mark();
        CHECK(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
        EXPECT_FRESH(c, p, len, m);
        m = mark();
        CHECK(mmap(p + 5 * PG, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
              p + 5 * PG);
        EXPECT_FRESH(c, p, len, m);          /* a partial unmap drops the whole entry */
        EXPECT_FRESH(c, p + 5 * PG, 10, m);
    }
    munmap(p, len);
    done(c);
}

/* the heap's end given back with sbrk and taken again */
static void s_brk(int rounds)
{
    /* malloc keeps a top chunk; warm it so the cache's own small
     * allocations between our sbrk calls do not move the break */
    free(malloc(64));
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 16 * PG;
    for (int i = 0; i < rounds; i++) {
        char *cur = sbrk(0);
        size_t pad = (PG - (uintptr_t)cur % PG) % PG;
        CHECK(sbrk((intptr_t)(pad + len)) == cur);
        char *p = cur + pad;
        memset(p, 1, len);
        touch(c, p, len);
        uint64_t m = mark();
        CHECK(sbrk(0) == p + len);   /* nobody else moved the break */
        CHECK(sbrk(-(intptr_t)len) == p + len);
        CHECK(sbrk((intptr_t)len) == p);
        memset(p, 2, len);
        EXPECT_FRESH(c, p, len, m);
        m = mark();
        CHECK(brk(p) == 0);          /* brk too, not only sbrk */
        CHECK(brk(p + len) == 0);
        EXPECT_FRESH(c, p, len, m);
        CHECK(sbrk(0) == p + len);
        CHECK(sbrk(-(intptr_t)(pad + len)) == p + len);
    }
    done(c);
}

/* pages dropped in place: the address stays mapped, the memory under it
 * is new */
static void s_madvise(int rounds)
{
    static const struct { int advice, shared, pin; const char *name; } kinds[] = {
        { MADV_DONTNEED, 0, 0, "DONTNEED" },
        { MADV_FREE, 0, 0, "FREE" },
        { MADV_REMOVE, 1, 0, "REMOVE" },
        { MADV_DONTNEED_LOCKED, 0, 1, "DONTNEED_LOCKED" },
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        struct nv_rcache *c = mk(kinds[k].pin, 0, 0);
        size_t len = 16 * PG;
        char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       (kinds[k].shared ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
        CHECK(p != MAP_FAILED);
        for (int i = 0; i < rounds; i++) {
            memset(p, 1, len);
            touch(c, p, len);
            uint64_t m = mark();
            if (madvise(p + 3 * PG, 4 * PG, kinds[k].advice) != 0)
                FAILF("madvise %s: %s", kinds[k].name, strerror(errno));
            EXPECT_FRESH(c, p, len, m);
        }
        struct nv_rcache_stats s;
        nv_rcache_get_stats(c, &s);
        if (s.uncached)
            FAILF("madvise %s: the range was not watched", kinds[k].name);
        munmap(p, len);
        done(c);
    }
}

/* mremap moving the range away, and shrinking it */
static void s_mremap(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 16 * PG;
    char *p = map_at(NULL, len, 0);
    char *q = placeholder(len);
    for (int i = 0; i < rounds; i++) {
        /* one VMA again (mremap moves only within one; the shrink below
         * left two) */
        CHECK(munmap(p, len) == 0);
        p = map_at(p, len, 0);
        touch(c, p, len);
        uint64_t m = mark();
        if (mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, q) != q)
            FAILF("mremap: %s", strerror(errno));
        p = map_at(p, len, 0);
        EXPECT_FRESH(c, p, len, m);
        EXPECT_FRESH(c, q, len, m);   /* the moved pages are not cached under either address */
        replace_with_placeholder(q, len);

        touch(c, p, len);
        m = mark();
        CHECK(mremap(p, len, 4 * PG, 0) == p);
        char *t = map_at(p + 4 * PG, len - 4 * PG, 0);
        if (t != p + 4 * PG) {
            munmap(t, len - 4 * PG);
            continue;
        }
        EXPECT_FRESH(c, p + 4 * PG, PG, m);
        EXPECT_FRESH(c, p, len, m);
    }
    munmap(p, len);
    munmap(q, len);
    done(c);
}

/* System V shared memory detached and another segment attached at the
 * same address. userfaultfd cannot watch it (its mappings are not shmem's
 * to the kernel's vma_is_shmem: UFFDIO_REGISTER says EINVAL), so it is
 * registered per use; shared anonymous memory (shmem) is watched. */
static void s_shm(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 16 * PG;
    int id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
    CHECK(id >= 0);
    char *p = shmat(id, NULL, 0);
    CHECK(p != (void *)-1);
    CHECK(shmctl(id, IPC_RMID, NULL) == 0);
    for (int i = 0; i < rounds; i++) {
        memset(p, 1, len);
        touch(c, p, len);
        uint64_t m = mark();
        CHECK(shmdt(p) == 0);
        id = shmget(IPC_PRIVATE, len, IPC_CREAT | 0600);
        CHECK(id >= 0);
        char *np = shmat(id, p, 0);
        if (np == (void *)-1)   /* the address was taken meanwhile (ASan's runtime) */
            np = shmat(id, NULL, 0);
        CHECK(np != (void *)-1);
        p = np;
        CHECK(shmctl(id, IPC_RMID, NULL) == 0);
        EXPECT_FRESH(c, p, len, m);
    }
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.uncached == 2 * (uint64_t)rounds && s.hits == 0);
    shmdt(p);

    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    for (int i = 0; i < rounds; i++) {
        touch(c, p, len);
        uint64_t m = mark();
        CHECK(munmap(p, len) == 0);
        char *np = mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (np == MAP_FAILED)
            np = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        CHECK(np != MAP_FAILED);
        p = np;
        EXPECT_FRESH(c, p, len, m);
    }
    nv_rcache_get_stats(c, &s);
    CHECK(s.uncached == 2 * (uint64_t)rounds);   /* shmem was watched (UFFD_FEATURE_WP_HUGETLBFS_SHMEM) */
    CHECK(s.invalidations >= (uint64_t)rounds);
    munmap(p, len);

    /* a memfd is shmem too: watched */
    int fd = memfd_create("reg_rcache", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    touch(c, p, len);
    uint64_t m = mark();
    CHECK(munmap(p, len) == 0);
    char *np = mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fd, 0);
    if (np == MAP_FAILED)
        np = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(np != MAP_FAILED);
    p = np;
    EXPECT_FRESH(c, p, len, m);
    nv_rcache_get_stats(c, &s);
    CHECK(s.uncached == 2 * (uint64_t)rounds);
    munmap(p, len);
    close(fd);
    done(c);
}

/* free and malloc again across the mmap threshold: the same address back,
 * on new memory */
static void s_malloc(int rounds)
{
    /* a fixed threshold: glibc otherwise raises it after the first free and
     * serves the block from the heap */
    int glibc = mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1;   /* 0 under ASan's allocator */
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 256 * 1024;
    int same = 0;
    char *p = malloc(len);
    CHECK(p);
    for (int i = 0; i < rounds; i++) {
        memset(p, 1, len);
        touch(c, p, len);
        uint64_t m = mark();
        free(p);
        char *q = malloc(len);
        CHECK(q);
        memset(q, 2, len);
        same += q == p;
        EXPECT_FRESH(c, q, len, m);
        p = q;
    }
    free(p);
#if !defined(__SANITIZE_ADDRESS__)
    /* else this tested nothing (ASan's quarantine holds freed blocks back) */
    CHECK(glibc && same > 0);
#else
    (void)glibc;
    printf("  malloc gave the same address back %d times of %d\n", same, rounds);
#endif
    done(c);
}

/* one thread releases and maps again, the others look up meanwhile */
static struct {
    struct nv_rcache *c;
    char *_Atomic p;
    size_t len;
    int rounds;
    atomic_uint_fast64_t mark;     /* the generation before the last release that returned */
    atomic_int stop;
    atomic_long stale_checked;
} T;

static void *t_lookup(void *arg)
{
    (void)arg;
    while (!atomic_load(&T.stop)) {
        uint64_t m = atomic_load_explicit(&T.mark, memory_order_acquire);
        struct nv_lreg *e;
        /* the whole mapping: a registration of part of it splits the VMA
         * (userfaultfd and mlock both), and mremap moves one VMA only */
        netvm_status_t st = nv_rcache_get(T.c, atomic_load(&T.p), T.len, NETVM_RW, &e);
        if (st == NETVM_ERR_FAULT)
            continue;   /* caught between unmap and map: nothing there to pin */
        CHECK_OK(st);
        if (gen_of(e) <= m)
            FAILF("stale hit from a thread: registration %llu, release after %llu",
                  (unsigned long long)gen_of(e), (unsigned long long)m);
        atomic_fetch_add(&T.stale_checked, 1);
        nv_rcache_put(T.c, e);
    }
    return NULL;
}

/* map the range again where it was, or elsewhere if another thread (the
 * lookups' allocator, a sanitizer's) took the address meanwhile */
static void t_remap(void)
{
    char *p = mmap(T.p, T.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED || p != T.p) {
        if (p != MAP_FAILED)
            munmap(p, T.len);
        p = map_at(NULL, T.len, 0);
        atomic_store(&T.p, p);
    }
    memset(p, 1, T.len);
}

static void s_threads(int rounds)
{
    T.c = mk(1, 0, 0);
    T.len = 16 * PG;
    T.p = map_at(NULL, T.len, 0);
    char *spare = placeholder(T.len);
    T.rounds = rounds;
    atomic_store(&T.stop, 0);
    atomic_store(&T.mark, 0);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, t_lookup, NULL) == 0);
    for (int i = 0; i < rounds; i++) {
        uint64_t m = mark();
        switch (i % 4) {
        case 0:
            CHECK(munmap(T.p, T.len) == 0);
            atomic_store_explicit(&T.mark, m, memory_order_release);
            t_remap();
            break;
        case 1:
            CHECK(mmap(T.p, T.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == T.p);
            atomic_store_explicit(&T.mark, m, memory_order_release);
            break;
        case 2: {
            if (mremap(T.p, T.len, T.len, MREMAP_MAYMOVE | MREMAP_FIXED, spare) != spare)
                FAILF("mremap: %s", strerror(errno));
            atomic_store_explicit(&T.mark, m, memory_order_release);
            replace_with_placeholder(spare, T.len);
            t_remap();
            break;
        }
        case 3:   /* the pages dropped in place (the pins stay: _LOCKED) */
            if (madvise(T.p, T.len, MADV_DONTNEED_LOCKED) != 0)
                FAILF("madvise: %s", strerror(errno));
            atomic_store_explicit(&T.mark, m, memory_order_release);
            break;
        }
        /* let the lookups see this generation before the next release */
        long seen = atomic_load(&T.stale_checked);
        for (int k = 0; k < 1000 && atomic_load(&T.stale_checked) < seen + 3; k++)
            sched_yield();
    }
    atomic_store(&T.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(atomic_load(&T.stale_checked) > 0);
    munmap(T.p, T.len);
    munmap(spare, T.len);

    /* free and malloc again above the mmap threshold, the block's address
     * published for the lookups after each. Only with glibc's allocator,
     * whose free unmaps such a block at once (a sanitizer's holds it in a
     * quarantine and unmaps it later, from whichever thread, so free is
     * not the release) */
    if (mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1) {
        done(T.c);
        return;
    }
    T.len = 256 * 1024;
    atomic_store(&T.p, malloc(T.len));
    CHECK(T.p);
    memset(T.p, 1, T.len);
    atomic_store(&T.stop, 0);
    atomic_store(&T.stale_checked, 0);
    for (int i = 0; i < 3; i++)
        CHECK(pthread_create(&th[i], NULL, t_lookup, NULL) == 0);
    for (int i = 0; i < rounds / 4; i++) {
        uint64_t m = mark();
        char *old = T.p;
        free(old);
        atomic_store_explicit(&T.mark, m, memory_order_release);
        char *q = malloc(T.len);
        CHECK(q);
        memset(q, 2, T.len);
        atomic_store(&T.p, q);
        long seen = atomic_load(&T.stale_checked);
        for (int k = 0; k < 1000 && atomic_load(&T.stale_checked) < seen + 3; k++)
            sched_yield();
    }
    atomic_store(&T.stop, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK(atomic_load(&T.stale_checked) > 0);
    free(T.p);
    done(T.c);
}

/* an entry in use when its memory goes: no longer found, deregistered
 * when put */
static void s_in_use(void)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 8 * PG;
    char *p = map_at(NULL, len, 0);
    struct nv_lreg *e, *e2;
    CHECK_OK(nv_rcache_get(c, p, len, NETVM_RW, &e));
    CHECK_OK(nv_rcache_get(c, p, len, NETVM_RW, &e2));
    CHECK(e == e2);
    nv_rcache_put(c, e2);
    uint64_t m = mark();
    CHECK(munmap(p, len) == 0);
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    if (s.invalidations != 1)
        FAILF("invalidations %llu", (unsigned long long)s.invalidations);
    CHECK(atomic_load(&R.deregs) == 0);   /* still in use */
    p = map_at(p, len, 0);
    EXPECT_FRESH(c, p, len, m);
    long d0 = atomic_load(&R.deregs);
    nv_rcache_put(c, e);
    CHECK(atomic_load(&R.deregs) == d0 + 1);
    munmap(p, len);
    done(c);
}

/* unused entries evicted oldest first, by count and by bytes */
static void s_evict(void)
{
    size_t len = 4 * PG;
    char *p = map_at(NULL, 16 * len, 0);
    struct nv_rcache *c = mk(1, 4, 0);
    for (int i = 0; i < 8; i++)
        touch(c, p + i * len, len);
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.evictions == 4);
    CHECK(atomic_load(&R.live) == 4);
    uint64_t h0 = s.hits;
    touch(c, p + 7 * len, len);         /* the newest stayed */
    touch(c, p, len);                   /* the oldest went */
    nv_rcache_get_stats(c, &s);
    CHECK(s.hits == h0 + 1);
    /* in use, nothing can be evicted: the cache grows past its bound */
    struct nv_lreg *e[6];
    for (int i = 0; i < 6; i++)
        CHECK_OK(nv_rcache_get(c, p + (8 + i) * len, len, NETVM_RW, &e[i]));
    CHECK(atomic_load(&R.live) >= 6);
    for (int i = 0; i < 6; i++)
        nv_rcache_put(c, e[i]);
    CHECK(atomic_load(&R.live) == 4);
    done(c);

    c = mk(1, 0, 3 * len);
    for (int i = 0; i < 8; i++)
        touch(c, p + i * len, len);
    CHECK(atomic_load(&R.live) == 3);
    nv_rcache_get_stats(c, &s);
    CHECK(s.evictions == 5);
    done(c);
    munmap(p, 16 * len);
}

/* a file mapping cannot be watched: registered per use, never cached,
 * still correct */
static void s_file(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 8 * PG;
    FILE *f = tmpfile();
    CHECK(f);
    CHECK(ftruncate(fileno(f), (off_t)len) == 0);
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
    CHECK(p != MAP_FAILED);
    for (int i = 0; i < rounds; i++) {
        uint64_t m = mark();
        EXPECT_FRESH(c, p, len, m);   /* never a hit: every use registers */
        CHECK(munmap(p, len) == 0);
        char *np = mmap(p, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED_NOREPLACE, fileno(f), 0);
        if (np == MAP_FAILED)
            np = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fileno(f), 0);
        CHECK(np != MAP_FAILED);
        p = np;
    }
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.uncached == (uint64_t)rounds);
    CHECK(s.hits == 0);
    CHECK(atomic_load(&R.live) == 0);   /* deregistered at each put */
    munmap(p, len);
    fclose(f);
    done(c);
}

/* a range another userfaultfd owns (as netvm's network memory is the
 * pager's): registered per use, never cached */
static void s_foreign(int rounds)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 8 * PG;
    char why[256];
    struct nv_uffd_caps caps;
    int fd = nv_uffd_open(0, &caps, why, sizeof why);
    if (fd < 0)
        FAILF("userfaultfd: %s", why);
    char *p = map_at(NULL, len, 0);
    /* write-protect mode without ever protecting: no fault can arrive */
    CHECK(nv_uffd_register(fd, p, len, UFFDIO_REGISTER_MODE_WP) == 0);
    for (int i = 0; i < rounds; i++) {
        uint64_t m = mark();
        EXPECT_FRESH(c, p, len, m);   /* never a hit: every use registers */
    }
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.uncached == (uint64_t)rounds && s.hits == 0);
    CHECK(atomic_load(&R.live) == 0);
    munmap(p, len);
    close(fd);
    done(c);
}

static atomic_int fork_stop;
/* the worker's buffer, mapped before it starts: a mapping made while
 * another thread's release waits for the monitor could take that hole,
 * and a lookup racing a release is promised nothing (docs/registration.md) */
struct fork_work {
    struct nv_rcache *c;
    char             *p;
};
static void *fork_worker(void *arg);
static void start_worker(pthread_t *w, struct fork_work *fw, struct nv_rcache *c)
{
    fw->c = c;
    fw->p = map_at(NULL, 4 * PG, 0);
    CHECK(pthread_create(w, NULL, fork_worker, fw) == 0);
}

/* the registrar's dereg (another thread's, or this one's) has unmapped the
 * victim */
static void victim_gone(void)
{
    for (int k = 0; k < 100000 && atomic_load(&R.victim); k++)
        sched_yield();
    CHECK(atomic_load(&R.victim) == NULL);
}

/* the registrar's dereg releases watched memory itself (as a link freeing
 * its own buffers may) while another thread keeps the monitor busy with
 * releases of its own: the release inside dereg is seen, and nothing
 * hangs. (A dereg under the cache lock would deadlock only when the
 * monitor already waits for that lock; this catches that only by luck of
 * timing: memmon.c's lock rules are what prevent it.) */
static void s_dereg_releases(int rounds)
{
    struct nv_rcache *c = mk(1, 2, 0);
    atomic_store(&fork_stop, 0);
    pthread_t w;
    struct fork_work fw;
    start_worker(&w, &fw, c);
    size_t len = 4 * PG;
    char *a = map_at(NULL, len, 0), *b = map_at(NULL, len, 0);
    for (int i = 0; i < rounds; i++) {
        char *v = map_at(NULL, len, 0);
        touch(c, v, len);                 /* watched */
        R.victim_len = len;
        atomic_store(&R.victim, v);
        uint64_t m = mark();
        touch(c, a, len);
        touch(c, b, len);                 /* evicts v's entry: its dereg unmaps v */
        victim_gone();
        v = map_at(v, len, 0);
        EXPECT_FRESH(c, v, len, m);
        munmap(v, len);
        /* and from a put: an entry in use whose memory goes */
        struct nv_lreg *e;
        CHECK_OK(nv_rcache_get(c, a, len, NETVM_RW, &e));
        v = map_at(NULL, len, 0);
        touch(c, v, len);
        atomic_store(&R.victim, v);
        m = mark();
        CHECK(munmap(a, len) == 0);
        nv_rcache_put(c, e);              /* deregistered here: unmaps v */
        victim_gone();
        a = map_at(a, len, 0);
        EXPECT_FRESH(c, a, len, m);
    }
    atomic_store(&fork_stop, 1);
    pthread_join(w, NULL);
    munmap(a, len);
    munmap(b, len);
    done(c);
}

/* fork while another thread works the cache: the child never hangs, and
 * gets a working cache of its own that starts empty */
static void *fork_worker(void *arg)
{
    /* released by mapping over it, never by leaving a hole: another
     * thread's mmap could take a hole while our release's event is unread,
     * and a lookup racing a release is promised nothing
     * (docs/registration.md) */
    struct fork_work *fw = arg;
    struct nv_rcache *c = fw->c;
    size_t len = 4 * PG;
    char *p = fw->p;
    while (!atomic_load(&fork_stop)) {
        touch(c, p, len);
        uint64_t m = mark();
        CHECK(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
        memset(p, 1, len);
        EXPECT_FRESH(c, p, len, m);
    }
    munmap(p, len);
    return NULL;
}

static void s_fork(int rounds)
{
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer cannot follow a thread started in the child of a
     * multi-threaded fork (the child's monitor: "dup thread with used id");
     * the Debug and ASan builds run this */
    (void)rounds;
    printf("  skipped under ThreadSanitizer\n");
    return;
#endif
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 8 * PG;
    char *p = map_at(NULL, len, 0);
    touch(c, p, len);
    struct nv_lreg *held;
    CHECK_OK(nv_rcache_get(c, p, len, NETVM_RW, &held));
    atomic_store(&fork_stop, 0);
    pthread_t w;
    struct fork_work fw;
    start_worker(&w, &fw, c);
    for (int i = 0; i < rounds; i++) {
        uint64_t at_fork = mark();
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            long live0 = atomic_load(&R.live);
            /* the parent's registrations are not the child's: a fresh one */
            EXPECT_FRESH(c, p, len, at_fork);
            touch(c, p, len);
            uint64_t m = mark();
            munmap(p, len);
            p = map_at(p, len, 0);
            EXPECT_FRESH(c, p, len, m);   /* the child's own monitor watches */
            nv_rcache_put(c, held);       /* the parent's, forgotten: not deregistered here */
            nv_rcache_destroy(c);
            _exit(atomic_load(&R.live) == live0 ? 0 : 3);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            FAILF("fork child %d: status 0x%x", i, status);
    }
    atomic_store(&fork_stop, 1);
    pthread_join(w, NULL);
    /* the parent's cache still works */
    uint64_t m = mark();
    nv_rcache_put(c, held);
    munmap(p, len);
    p = map_at(p, len, 0);
    EXPECT_FRESH(c, p, len, m);
    munmap(p, len);
    done(c);
}

/* ---- the hit's cost ---- */

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void s_bench(void)
{
    struct nv_rcache *c = mk(1, 0, 0);
    size_t len = 64 * PG;
    char *p = map_at(NULL, len, 0);
    /* a cache holding some other entries, as a link's would */
    char *o = map_at(NULL, 256 * PG, 0);
    for (int i = 0; i < 64; i++)
        touch(c, o + i * 4 * PG, 4 * PG);
    touch(c, p, len);
    enum { BATCHES = 201, PER = 2000 };
    double t[BATCHES];
    struct nv_lreg *e;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_s();
        for (int i = 0; i < PER; i++) {
            if (nv_rcache_get(c, p + (i & 63) * 64, 4096, NETVM_RW, &e) != NETVM_OK)
                FAILF("get");
            nv_rcache_put(c, e);
        }
        t[b] = (now_s() - t0) / PER * 1e6;
    }
    qsort(t, BATCHES, sizeof t[0], cmp_d);
    struct nv_rcache_stats s;
    nv_rcache_get_stats(c, &s);
    CHECK(s.misses == 65 && s.hits == (uint64_t)BATCHES * PER);
    printf("rcache hit (get + put, 65 entries cached): median %.4f us, min %.4f us over %d batches of %d\n",
           t[BATCHES / 2], t[0], BATCHES, PER);

    /* what a watched release costs the releasing call: munmap of a cached
     * range (it waits for the monitor) against one nobody watches */
    enum { REL = 201 };
    double tw[REL], tu[REL];
    char *r = map_at(NULL, 4 * PG, 0);
    for (int i = 0; i < REL; i++) {
        touch(c, r, 4 * PG);
        double t0 = now_s();
        CHECK(munmap(r, 4 * PG) == 0);
        tw[i] = (now_s() - t0) * 1e6;
        r = map_at(r, 4 * PG, 0);
        t0 = now_s();
        CHECK(munmap(r, 4 * PG) == 0);
        tu[i] = (now_s() - t0) * 1e6;
        r = map_at(r, 4 * PG, 0);
    }
    qsort(tw, REL, sizeof tw[0], cmp_d);
    qsort(tu, REL, sizeof tu[0], cmp_d);
    printf("munmap of 4 pages: watched (cached) median %.2f us, unwatched median %.2f us, over %d\n",
           tw[REL / 2], tu[REL / 2], REL);
    munmap(r, 4 * PG);
    munmap(p, len);
    munmap(o, 256 * PG);
    done(c);
}

int main(int argc, char **argv)
{
    PG = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IONBF, 0);
    static const char *all[] = { "mmap_reuse", "map_fixed", "brk", "madvise", "mremap", "shm", "malloc",
                                 "threads", "in_use", "evict", "file", "foreign", "dereg_releases", "fork" };
    int n = argc > 1 ? argc - 1 : (int)(sizeof all / sizeof all[0]);
    for (int i = 0; i < n; i++) {
        const char *s = argc > 1 ? argv[i + 1] : all[i];
        printf("%s\n", s);
        if (!strcmp(s, "mmap_reuse")) s_mmap_reuse(200);
        else if (!strcmp(s, "map_fixed")) s_map_fixed(100);
        else if (!strcmp(s, "brk")) s_brk(100);
        else if (!strcmp(s, "madvise")) s_madvise(100);
        else if (!strcmp(s, "mremap")) s_mremap(100);
        else if (!strcmp(s, "shm")) s_shm(100);
        else if (!strcmp(s, "malloc")) s_malloc(100);
        else if (!strcmp(s, "threads")) s_threads(800);
        else if (!strcmp(s, "in_use")) s_in_use();
        else if (!strcmp(s, "evict")) s_evict();
        else if (!strcmp(s, "file")) s_file(20);
        else if (!strcmp(s, "foreign")) s_foreign(20);
        else if (!strcmp(s, "dereg_releases")) s_dereg_releases(50);
        else if (!strcmp(s, "fork")) s_fork(20);
        else if (!strcmp(s, "bench")) s_bench();
        else FAILF("no scenario %s", s);
    }
    return 0;
}
