/* The malloc family, for programs whose malloc is glibc's: glibc's malloc
 * maps its large blocks with its internal __mmap, which no interposer
 * sees, so blocks of at least the threshold are made here, in the region;
 * smaller ones, and every block not ours, go to the next malloc. When the
 * program runs on another allocator (jemalloc, tcmalloc), that one stays
 * in charge of everything and its mmap calls are what is intercepted
 * (mmap.c): a program may call allocator-specific functions on its
 * pointers (redis calls jemalloc's).
 *
 * netvm's own code (the "inside" flag, preload.h) allocates from an
 * allocator of its own (inside_alloc.c says why); its blocks are told
 * apart by address wherever they are freed.
 *
 * A block of ours is a range of the region: a header page, then the block
 * (page aligned, or aligned more for memalign). The header holds the
 * range, so free and realloc need no table. */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <dlfcn.h>
#include <errno.h>
#include <string.h>

#define HDR_MAGIC 0x6b636f6c626d766eull   /* "nvmblock" */

struct hdr {
    uint64_t  magic;
    uintptr_t start;      /* the range */
    size_t    len;
    size_t    size;       /* asked for */
};

struct fns {
    void *(*malloc)(size_t);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void  (*free)(void *);
    void *(*memalign)(size_t, size_t);
    size_t (*usable)(void *);
};
static struct fns next, libc;   /* the next malloc (the program's), glibc's own */

/* dlsym may allocate before the next malloc is known: from here */
static char boot[1 << 16] __attribute__((aligned(64)));
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n)
{
    size_t at = __atomic_fetch_add(&boot_used, (n + 63) & ~(size_t)63, __ATOMIC_RELAXED);
    return at + n <= sizeof boot ? boot + at : NULL;
}

static int is_boot(const void *p)
{
    return (const char *)p >= boot && (const char *)p < boot + sizeof boot;
}

void nvp_malloc_resolve(void)
{
    if (next.malloc || resolving)
        return;
    resolving = 1;
    next.calloc = dlsym(RTLD_NEXT, "calloc");
    next.realloc = dlsym(RTLD_NEXT, "realloc");
    next.free = dlsym(RTLD_NEXT, "free");
    next.memalign = dlsym(RTLD_NEXT, "memalign");
    next.usable = dlsym(RTLD_NEXT, "malloc_usable_size");
    void *m = dlsym(RTLD_NEXT, "malloc");
    /* glibc's own, looked up in libc.so.6 itself (tcmalloc defines even
     * __libc_malloc) */
    void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        libc.calloc = dlsym(h, "calloc");
        libc.realloc = dlsym(h, "realloc");
        libc.free = dlsym(h, "free");
        libc.memalign = dlsym(h, "memalign");
        libc.usable = dlsym(h, "malloc_usable_size");
        libc.malloc = dlsym(h, "malloc");
    }
    if (!libc.malloc || !libc.calloc || !libc.realloc || !libc.free || !libc.memalign || !libc.usable)
        libc = next;
    /* ours only when the next malloc is glibc's own */
    nvp.glibc_malloc = m && m == (void *)libc.malloc;
    __atomic_store_n(&next.malloc, m, __ATOMIC_RELEASE);
    resolving = 0;
}


static int mine(size_t size)
{
    return nvp.glibc_malloc && size >= nvp.threshold && nvp_region();
}

static struct hdr *hdr_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    if (!nvp_ours(a, 1) || (a & (NVP_PAGE - 1)) || a - nvp.base < NVP_PAGE)
        return NULL;
    struct hdr *h = (struct hdr *)(a - NVP_PAGE);
    return h->magic == HDR_MAGIC ? h : NULL;
}

static void *block_alloc(size_t size, size_t align)
{
    if (align < NVP_PAGE)
        align = NVP_PAGE;
    if (size > nvp.reserve)
        return NULL;
    /* the header page before an aligned block: room for it and the slack */
    size_t len = NVP_ROUND(size) + align + (align > NVP_PAGE ? NVP_PAGE : 0);
    uintptr_t r = nvp_range_alloc(len, NVP_PAGE);
    if (!r)
        return NULL;
    uintptr_t p = (r + NVP_PAGE + align - 1) & ~(uintptr_t)(align - 1);
    struct hdr *h = (struct hdr *)(p - NVP_PAGE);
    *h = (struct hdr){ HDR_MAGIC, r, len, size };
    NVP_CNT(mallocs, 1);
    return (void *)p;
}

static void block_free(struct hdr *h)
{
    uintptr_t start = h->start;
    size_t len = h->len;
    h->magic = 0;
    NVP_CNT(frees, 1);
    nvp_range_free(start, len);
}

static size_t block_usable(const struct hdr *h, const void *p)
{
    return h->start + h->len - (uintptr_t)p;
}

static void *next_malloc(size_t n)
{
    if (!__atomic_load_n(&next.malloc, __ATOMIC_ACQUIRE)) {
        nvp_malloc_resolve();
        if (!next.malloc)
            return boot_alloc(n);
    }
    return next.malloc(n);
}

void *malloc(size_t n)
{
    if (nvp_inside)
        return nvp_inside_alloc(n, 16);
    if (mine(n)) {
        void *p = block_alloc(n, NVP_PAGE);
        if (p)
            return p;
    }
    return next_malloc(n);
}

void *calloc(size_t k, size_t n)
{
    size_t total;
    if (__builtin_mul_overflow(k, n, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (nvp_inside) {
        void *p = nvp_inside_alloc(total, 16);
        if (p)
            memset(p, 0, total);   /* a block may be reused */
        return p;
    }
    if (mine(total)) {
        void *p = block_alloc(total, NVP_PAGE);   /* the region's free pages read as zeros */
        if (p)
            return p;
    }
    if (!__atomic_load_n(&next.calloc, __ATOMIC_ACQUIRE)) {
        nvp_malloc_resolve();
        if (!next.calloc)
            return boot_alloc(total);   /* static: zeros */
    }
    return next.calloc(k, n);
}

void free(void *p)
{
    if (!p || is_boot(p))
        return;
    if (nvp_inside_owns(p)) {
        nvp_inside_free(p);
        return;
    }
    struct hdr *h = nvp.glibc_malloc ? hdr_of(p) : NULL;
    if (h) {
        if (!nvp.forked)
            block_free(h);   /* a forked child's copy keeps it: the parent's */
        return;
    }
    if (!next.free)
        nvp_malloc_resolve();
    if (next.free)
        next.free(p);
}

size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (is_boot(p))
        return 0;
    if (nvp_inside_owns(p))
        return nvp_inside_usable(p);
    struct hdr *h = nvp.glibc_malloc ? hdr_of(p) : NULL;
    if (h)
        return block_usable(h, p);
    if (!next.usable)
        nvp_malloc_resolve();
    return next.usable ? next.usable(p) : 0;
}

void *realloc(void *p, size_t n)
{
    if (!p)
        return malloc(n);
    if (nvp_inside_owns(p))
        return nvp_inside_realloc(p, n);
    struct hdr *h = nvp.glibc_malloc ? hdr_of(p) : NULL;
    if (is_boot(p) || (!h && n >= nvp.threshold && mine(n))) {
        /* from the bootstrap arena, or a block of the next malloc grown
         * past the threshold: moved into the region */
        size_t old = is_boot(p) ? (size_t)(boot + sizeof boot - (char *)p) : malloc_usable_size(p);
        void *q = malloc(n);
        if (!q)
            return NULL;
        memcpy(q, p, old < n ? old : n);
        if (!is_boot(p))
            free(p);
        NVP_CNT(realloc_moves, 1);
        return q;
    }
    if (!h) {
        if (!next.realloc)
            nvp_malloc_resolve();
        return next.realloc ? next.realloc(p, n) : NULL;
    }
    NVP_CNT(reallocs, 1);
    if (!n) {
        free(p);
        return NULL;
    }
    if (nvp.forked) {
        /* a forked child's copy is the parent's: a new block of the next
         * malloc, filled from it */
        void *q = next_malloc(n);
        if (q)
            memcpy(q, p, h->size < n ? h->size : n);
        return q;
    }
    uintptr_t a = (uintptr_t)p;
    size_t need = NVP_ROUND(a - h->start + n);
    if (need <= h->len) {
        /* shrinks in place: whole pages past the end go back */
        if (h->len - need >= NVP_PAGE) {
            nvp_range_free(h->start + need, h->len - need);
            h->len = need;
        }
        h->size = n;
        return p;
    }
    if (nvp_range_grow(h->start, h->len, need)) {
        h->len = need;
        h->size = n;
        return p;
    }
    void *q = block_alloc(n, NVP_PAGE);
    if (!q)
        return NULL;
    memcpy(q, p, h->size < n ? h->size : n);
    block_free(h);
    NVP_CNT(realloc_moves, 1);
    return q;
}

static void *aligned(size_t align, size_t n)
{
    if (nvp_inside)
        return nvp_inside_alloc(n, align);
    if (mine(n)) {
        void *p = block_alloc(n, align);
        if (p)
            return p;
    }
    if (!next.memalign)
        nvp_malloc_resolve();
    return next.memalign ? next.memalign(align, n) : NULL;
}

void *memalign(size_t align, size_t n)
{
    if (!align || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    return aligned(align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    return memalign(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!align || (align & (align - 1)) || align % sizeof(void *))
        return EINVAL;
    void *p = aligned(align, n);
    if (!p && n)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t n)
{
    return aligned(NVP_PAGE, n);
}

void *pvalloc(size_t n)
{
    return aligned(NVP_PAGE, NVP_ROUND(n ? n : 1));
}
