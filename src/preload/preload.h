/* The interposer of `netvm gmem run` (libnetvm-gmem-preload.so, loaded with
 * LD_PRELOAD into an unmodified program): the program's large anonymous
 * mappings and, where its malloc is glibc's, its large malloc blocks are
 * carved out of one network-memory region (docs/gmem-run.md). Not part of
 * libnetvm: it sits above the gmem layer and links the library's objects
 * in, hidden. */
#ifndef NV_PRELOAD_H
#define NV_PRELOAD_H

#include "preload/stats_file.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define NVP_PAGE 4096ul
#define NVP_ROUND(x) (((x) + NVP_PAGE - 1) & ~(NVP_PAGE - 1))

/* Set while this thread runs netvm's code (and in every thread netvm
 * starts): its allocations and mappings go where they would without the
 * interposer, so netvm never allocates its own state in its region. */
extern __thread int nvp_inside __attribute__((tls_model("initial-exec")));

struct nvp_state {
    uintptr_t base, end;          /* the region; 0 until first used */
    size_t    threshold;          /* bytes: smaller requests are not ours */
    size_t    reserve;            /* bytes of address space the region reserves */
    int       glibc_malloc;       /* the malloc family is intercepted */
    int       forked;             /* a forked child's copy: nothing new goes to the region */
    int       configured;         /* the constructor ran */
};
extern struct nvp_state nvp;
extern struct nvp_counts nvp_n;   /* __atomic */
#define NVP_CNT(f, v) __atomic_fetch_add(&nvp_n.f, (v), __ATOMIC_RELAXED)

/* the kernel's calls, never through the PLT (so never through ourselves) */
void *nvp_sys_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int   nvp_sys_munmap(void *addr, size_t len);
int   nvp_sys_madvise(void *addr, size_t len, int advice);
int   nvp_sys_mprotect(void *addr, size_t len, int prot);
void *nvp_sys_mremap(void *old, size_t oldlen, size_t newlen, int flags, void *newaddr);

/* [a, a + len) lies in the region (and in no hole of it). */
static inline int nvp_ours(uintptr_t a, size_t len)
{
    return nvp.base && a >= nvp.base && a < nvp.end && len <= nvp.end - a;
}

/* The region, mapped on first use: 1, or the process exits with the
 * reason (never a silent fallback to local memory). 0 in a forked child's
 * copy or while netvm itself runs: the caller passes the request on. */
int nvp_region(void);

/* preload_ranges.c: pages of the region handed out, first fit from its
 * start (so the pages ever used stay few and low: the pager's walks stop
 * at the highest used). Lengths are page multiples. */
void      nvp_ranges_init(uintptr_t base, size_t len);
uintptr_t nvp_range_alloc(size_t len, size_t align);       /* 0: the reserve is exhausted */
int       nvp_range_grow(uintptr_t start, size_t oldlen, size_t newlen);   /* 1: grown in place */
/* Back to the free ranges; the pages are discarded first (they read as
 * zeros when handed out again, and leave the budget and the servers). */
void      nvp_range_free(uintptr_t start, size_t len);
/* [start, start + len) is no longer the region's (a file or shared mapping
 * was put over it): never handed out again. */
void      nvp_range_take(uintptr_t start, size_t len);
int       nvp_in_hole(uintptr_t start, size_t len);
void      nvp_ranges_lock(void);
void      nvp_ranges_unlock(void);

/* inside_alloc.c: what netvm's own code allocates (why: there) */
void  *nvp_inside_alloc(size_t n, size_t align);
void  *nvp_inside_realloc(void *p, size_t n);
void   nvp_inside_free(void *p);
size_t nvp_inside_usable(const void *p);
int    nvp_inside_owns(const void *p);

/* preload_malloc.c */
void nvp_malloc_resolve(void);

/* preload_stats.c */
void nvp_stats_start(void *region);   /* netvm_gmem_t * */
void nvp_stats_final(void);

#endif
