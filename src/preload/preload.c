/* The interposer's life: configuration (the constructor), the region
 * (mapped on first use), the "inside netvm" flag and the threads that
 * inherit it, fork, and the kernel's calls made without the PLT. */
#define _GNU_SOURCE
#include "preload/preload.h"
#include "gmem/region_int.h"
#include "util/config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread int nvp_inside __attribute__((tls_model("initial-exec")));
struct nvp_state nvp;
struct nvp_counts nvp_n;

void *nvp_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
}

int nvp_sys_munmap(void *addr, size_t len) { return (int)syscall(SYS_munmap, addr, len); }
int nvp_sys_madvise(void *addr, size_t len, int advice) { return (int)syscall(SYS_madvise, addr, len, advice); }
int nvp_sys_mprotect(void *addr, size_t len, int prot) { return (int)syscall(SYS_mprotect, addr, len, prot); }

void *nvp_sys_mremap(void *old, size_t oldlen, size_t newlen, int flags, void *newaddr)
{
    return (void *)syscall(SYS_mremap, old, oldlen, newlen, flags, newaddr);
}

/* Messages without stdio (which may allocate, or hold a lock the
 * interrupted program holds). */
static void say(const char *a, const char *b)
{
    static const char head[] = "netvm gmem: ";
    if (write(2, head, sizeof head - 1) < 0 || write(2, a, strlen(a)) < 0 || (b && write(2, b, strlen(b)) < 0) ||
        write(2, "\n", 1) < 0) {
        /* stderr is gone: nothing to tell */
    }
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    long long x;
    if (!v || !*v)
        return dflt;
    if (nv_parse_size(v, &x) != 0 || x <= 0) {
        say("ignored a value that is not a size: ", name);
        return dflt;
    }
    return (size_t)x;
}

/* 4 x physical memory: more than a program can use, and free until used
 * (the pager's and the store's per-page arrays are touched lazily). */
static size_t default_reserve(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    size_t ram = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz : (size_t)1 << 34;
    return 4 * ram;
}

static pthread_mutex_t region_lock = PTHREAD_MUTEX_INITIALIZER;
static int region_state;          /* 0 not yet, 1 mapped; __atomic */
static void *region_handle;

static void atfork_prepare(void) { nvp_ranges_lock(); }
static void atfork_parent(void) { nvp_ranges_unlock(); }
static void atfork_child(void)
{
    /* the region here is the parent's copy, served by the parent as of the
     * fork (docs/gmem-run.md, "fork"): nothing new is placed in it */
    nvp.forked = 1;
    nvp_ranges_unlock();
}

__attribute__((constructor)) static void nvp_configure(void)
{
    nvp_inside++;
    nvp.threshold = env_size("NETVM_GMEM_THRESHOLD", (size_t)1 << 20);
    if (nvp.threshold < NVP_PAGE)
        nvp.threshold = NVP_PAGE;
    nvp.reserve = NVP_ROUND(env_size("NETVM_GMEM_RESERVE", default_reserve()));
    nvp_malloc_resolve();
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    nvp.configured = 1;
    nvp_inside--;
    /* Under another allocator the region is mapped now, not at its first
     * large mmap: that allocator calls mmap holding its own locks, and
     * mapping the region starts netvm's threads, which allocate. */
    if (!nvp.glibc_malloc)
        nvp_region();
}

__attribute__((destructor)) static void nvp_finish(void)
{
    if (__atomic_load_n(&region_state, __ATOMIC_ACQUIRE) == 1 && !nvp.forked)
        nvp_stats_final();
}

static void map_region(void)
{
    char why[600];
    if (nv_gmem_check_support(why, sizeof why) != NETVM_OK) {
        say(why, NULL);
        say("cannot put this program's memory in network memory; stopped (no fallback to local memory)", NULL);
        _exit(125);
    }
    netvm_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.boot = "none";                          /* a job of one, whatever launched the program */
    cfg.thread_level = NETVM_THREAD_MULTIPLE;   /* the fault threads and the program call at once */
    netvm_ctx_t *ctx;
    netvm_status_t st = netvm_init(&ctx, &cfg);
    void *base = NULL;
    if (st == NETVM_OK)
        st = nv_gmem_map_reserve(ctx, nvp.reserve, NULL, (netvm_gmem_t **)&region_handle, &base);
    if (st != NETVM_OK) {
        say("cannot map the network-memory region: ", netvm_strerror(st));
        say("(the lines above say why); stopped (no fallback to local memory)", NULL);
        _exit(125);
    }
    nvp_ranges_init((uintptr_t)base, nvp.reserve);
    nvp.base = (uintptr_t)base;
    nvp.end = (uintptr_t)base + nvp.reserve;
    nvp_stats_start(region_handle);
}

int nvp_region(void)
{
    if (nvp_inside || nvp.forked || !nvp.configured)
        return 0;
    if (__atomic_load_n(&region_state, __ATOMIC_ACQUIRE) == 1)
        return 1;
    pthread_mutex_lock(&region_lock);
    if (!region_state) {
        nvp_inside++;
        map_region();
        nvp_inside--;
        __atomic_store_n(&region_state, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&region_lock);
    return 1;
}

/* --- threads: those netvm starts are inside it too -------------------- */

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static pthread_create_fn next_pthread_create;

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *inside_start(void *p)
{
    struct start s = *(struct start *)p;
    nvp_inside = 1;
    free(p);
    return s.fn(s.arg);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (!next_pthread_create) {
        next_pthread_create = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
        if (!next_pthread_create)
            return EAGAIN;
    }
    if (!nvp_inside)
        return next_pthread_create(t, attr, fn, arg);
    struct start *s = malloc(sizeof *s);   /* inside: the next malloc's */
    if (!s)
        return EAGAIN;
    s->fn = fn;
    s->arg = arg;
    int e = next_pthread_create(t, attr, inside_start, s);
    if (e)
        free(s);
    return e;
}
