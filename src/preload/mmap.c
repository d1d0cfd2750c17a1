/* The mapping calls: a private anonymous read-write mapping of at least
 * the threshold, anywhere, becomes a range of the region; munmap, madvise,
 * mremap and MAP_FIXED over such a range are served in the region. This is
 * what jemalloc, tcmalloc and programs that map memory themselves reach
 * (their calls go through the PLT, so through these). */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4
#endif

#define NOT_OURS_FLAGS (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_STACK | MAP_GROWSDOWN | MAP_HUGETLB | MAP_32BIT)

static int wanted(void *addr, size_t len, int prot, int flags)
{
    return !addr && len >= nvp.threshold && (flags & MAP_ANONYMOUS) && (flags & MAP_TYPE) == MAP_PRIVATE &&
           !(flags & NOT_OURS_FLAGS) && prot == (PROT_READ | PROT_WRITE);
}

/* The parts of [a, a + len) outside the region go to fn; returns the part
 * inside (its length in *in_len, 0 if none). */
static uintptr_t split(uintptr_t a, size_t len, size_t *in_len, int (*fn)(void *, size_t, int), int arg, int *rc)
{
    uintptr_t end = a + len;
    uintptr_t lo = a > nvp.base ? a : nvp.base, hi = end < nvp.end ? end : nvp.end;
    *rc = 0;
    if (!nvp.base || lo >= hi || nvp_in_hole(a, len)) {
        *in_len = 0;
        *rc = fn((void *)a, len, arg);
        return 0;
    }
    if (a < lo && fn((void *)a, lo - a, arg) != 0)
        *rc = -1;
    if (hi < end && fn((void *)hi, end - hi, arg) != 0)
        *rc = -1;
    *in_len = hi - lo;
    return lo;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (wanted(addr, len, prot, flags) && nvp_region()) {
        uintptr_t a = nvp_range_alloc(NVP_ROUND(len), NVP_PAGE);
        if (a) {
            NVP_CNT(mmaps, 1);
            return (void *)a;
        }
        /* the reserve is used up: the kernel's memory, as without us */
    }
    if ((flags & MAP_FIXED) && nvp_ours((uintptr_t)addr, 1) && !nvp_inside && !nvp.forked &&
        !nvp_in_hole((uintptr_t)addr, len)) {
        uintptr_t a = (uintptr_t)addr;
        size_t l = NVP_ROUND(len);
        if ((a & (NVP_PAGE - 1)) == 0 && nvp_ours(a, l) && (flags & MAP_ANONYMOUS) &&
            (flags & MAP_TYPE) == MAP_PRIVATE && !(flags & (MAP_HUGETLB | MAP_GROWSDOWN))) {
            /* a fresh anonymous mapping over a range of ours (allocators
             * decommit and recommit this way): zeros, with the protection
             * asked for, still in the region */
            nvp_sys_madvise(addr, l, MADV_DONTNEED);
            if (nvp_sys_mprotect(addr, l, prot) != 0)
                return MAP_FAILED;
            NVP_CNT(discards, 1);
            return addr;
        }
        /* a file or shared mapping over it: that part leaves the region
         * for good (docs/gmem-run.md, "limits") */
        void *p = nvp_sys_mmap(addr, len, prot, flags, fd, off);
        if (p != MAP_FAILED)
            nvp_range_take(a & ~(NVP_PAGE - 1), l);
        return p;
    }
    return nvp_sys_mmap(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) __attribute__((alias("mmap")));

static int unmap_outside(void *a, size_t len, int unused)
{
    (void)unused;
    return nvp_sys_munmap(a, len);
}

int munmap(void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    if (nvp_inside || nvp.forked || !nvp.base || (a & (NVP_PAGE - 1)) || !len)
        return nvp_sys_munmap(addr, len);
    size_t in_len;
    int rc;
    uintptr_t in = split(a, NVP_ROUND(len), &in_len, unmap_outside, 0, &rc);
    if (in_len) {
        nvp_range_free(in, in_len);
        NVP_CNT(munmaps, 1);
    }
    return rc;
}

static int advise_outside(void *a, size_t len, int advice)
{
    return nvp_sys_madvise(a, len, advice);
}

int madvise(void *addr, size_t len, int advice)
{
    uintptr_t a = (uintptr_t)addr;
    if (nvp_inside || nvp.forked || !nvp.base || (a & (NVP_PAGE - 1)))
        return nvp_sys_madvise(addr, len, advice);
    size_t in_len;
    int rc;
    uintptr_t in = split(a, NVP_ROUND(len), &in_len, advise_outside, advice, &rc);
    if (!in_len)
        return rc;
    switch (advice) {
    case MADV_DONTNEED:
    case MADV_FREE:
    case MADV_REMOVE:
        /* the pages read as zeros from now (MADV_FREE allows either its
         * old data or zeros): the pager discards them here and at the
         * servers */
        if (nvp_sys_madvise((void *)in, in_len, MADV_DONTNEED) != 0)
            rc = -1;
        NVP_CNT(discards, 1);
        break;
    case MADV_POPULATE_READ:
    case MADV_POPULATE_WRITE:
        /* faults them in through the pager, as asked */
        if (nvp_sys_madvise((void *)in, in_len, advice) != 0)
            rc = -1;
        break;
    default:
        /* HUGEPAGE (the pager works in 4 KiB pages), WILLNEED, COLD,
         * PAGEOUT, DONTFORK and the rest: the pager decides residence */
        break;
    }
    return rc;
}

void *mremap(void *old, size_t oldlen, size_t newlen, int flags, ...)
{
    void *newaddr = NULL;
    if (flags & MREMAP_FIXED) {
        __builtin_va_list ap;
        __builtin_va_start(ap, flags);
        newaddr = __builtin_va_arg(ap, void *);
        __builtin_va_end(ap);
    }
    uintptr_t a = (uintptr_t)old;
    oldlen = NVP_ROUND(oldlen);
    if (nvp_inside || nvp.forked || !nvp_ours(a, oldlen) || (a & (NVP_PAGE - 1)) || nvp_in_hole(a, oldlen))
        return nvp_sys_mremap(old, oldlen, newlen, flags, newaddr);
    if (flags & (MREMAP_FIXED | MREMAP_DONTUNMAP)) {
        /* moving a range of ours out of the region is not supported */
        errno = EINVAL;
        return MAP_FAILED;
    }
    NVP_CNT(mremaps, 1);
    newlen = NVP_ROUND(newlen);
    if (!newlen) {
        errno = EINVAL;
        return MAP_FAILED;
    }
    if (newlen <= oldlen) {
        nvp_range_free(a + newlen, oldlen - newlen);
        return old;
    }
    if (nvp_range_grow(a, oldlen, newlen))
        return old;
    if (!(flags & MREMAP_MAYMOVE)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    uintptr_t n = nvp_range_alloc(newlen, NVP_PAGE);
    if (!n) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    /* moved by copying through the pager (pages not resident are fetched
     * once; the new range's pages are written once) */
    memcpy((void *)n, old, oldlen);
    nvp_range_free(a, oldlen);
    return (void *)n;
}
