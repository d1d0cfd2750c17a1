/* The allocator of netvm's own code inside the interposer (the "inside"
 * flag, preload.h), apart from the program's and from glibc's:
 *
 * - a program thread may hold one of its allocator's locks while it
 *   faults on a page of the region (jemalloc keeps its metadata in memory
 *   it mapped, so in the region), and the fault thread serving the fault
 *   must not need that lock;
 * - glibc's fork holds every glibc malloc lock while the kernel waits for
 *   a fault thread to read the fork event, so a fault thread that then
 *   allocated from glibc would never read it (seen: a hang in fork).
 *
 * So: size classes of powers of two, each a free list under a mutex no
 * fork handler takes, carved from one reserved range of address space
 * (mapped with the raw syscall, touched as used, never given back). A
 * block's class is in the 16 bytes before it, and whether a pointer is
 * one of these is a range check, so free, realloc and malloc_usable_size
 * find it whoever calls them, inside or not. */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <string.h>
#include <sys/mman.h>

#define ARENA_LEN ((size_t)1 << 36)   /* address space only */
#define NCLASS    48
#define MINSHIFT  5                   /* 32 bytes, header included */

struct ihdr {
    uint32_t cls;
    uint32_t off;      /* from the block's start to the pointer */
    uint64_t pad;
};

struct iblock {
    struct iblock *next;
};

static char *arena;
static size_t bump;                   /* __atomic */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    pthread_mutex_t lock;
    struct iblock  *free;
} cls[NCLASS];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    for (int i = 0; i < NCLASS; i++)
        pthread_mutex_init(&cls[i].lock, NULL);
    void *p = nvp_sys_mmap(NULL, ARENA_LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                           -1, 0);
    if ((uintptr_t)p <= (uintptr_t)-4096)
        arena = p;
}

int nvp_inside_owns(const void *p)
{
    return arena && (const char *)p >= arena && (const char *)p < arena + ARENA_LEN;
}

static void *block(unsigned c)
{
    pthread_mutex_lock(&cls[c].lock);
    struct iblock *b = cls[c].free;
    if (b)
        cls[c].free = b->next;
    pthread_mutex_unlock(&cls[c].lock);
    if (b)
        return b;
    size_t sz = (size_t)1 << (c + MINSHIFT);
    /* blocks of a class are aligned to their size (up to a page), so an
     * aligned request needs no slack beyond its class */
    size_t al = sz < NVP_PAGE ? sz : NVP_PAGE;
    pthread_mutex_lock(&arena_lock);
    size_t at = (bump + al - 1) & ~(al - 1);
    if (at + sz > ARENA_LEN) {
        pthread_mutex_unlock(&arena_lock);
        return NULL;
    }
    bump = at + sz;
    pthread_mutex_unlock(&arena_lock);
    return arena + at;
}

static unsigned class_of(size_t need)
{
    unsigned c = 0;
    while (((size_t)1 << (c + MINSHIFT)) < need)
        c++;
    return c;
}

void *nvp_inside_alloc(size_t n, size_t align)
{
    pthread_once(&once, init);
    if (!arena || n > ARENA_LEN / 4)
        return NULL;
    if (align < 16)
        align = 16;
    size_t need = n + sizeof(struct ihdr) + (align > 16 ? align : 0);
    unsigned c = class_of(need);
    if (c >= NCLASS)
        return NULL;
    char *b = block(c);
    if (!b)
        return NULL;
    uintptr_t p = ((uintptr_t)b + sizeof(struct ihdr) + align - 1) & ~(uintptr_t)(align - 1);
    struct ihdr *h = (struct ihdr *)(p - sizeof *h);
    h->cls = c;
    h->off = (uint32_t)(p - (uintptr_t)b);
    return (void *)p;
}

size_t nvp_inside_usable(const void *p)
{
    const struct ihdr *h = (const struct ihdr *)((uintptr_t)p - sizeof(struct ihdr));
    return ((size_t)1 << (h->cls + MINSHIFT)) - h->off;
}

void nvp_inside_free(void *p)
{
    struct ihdr *h = (struct ihdr *)((uintptr_t)p - sizeof(struct ihdr));
    unsigned c = h->cls;
    struct iblock *b = (struct iblock *)((uintptr_t)p - h->off);
    pthread_mutex_lock(&cls[c].lock);
    b->next = cls[c].free;
    cls[c].free = b;
    pthread_mutex_unlock(&cls[c].lock);
}

void *nvp_inside_realloc(void *p, size_t n)
{
    size_t have = nvp_inside_usable(p);
    if (n <= have)
        return p;
    void *q = nvp_inside_alloc(n, 16);
    if (!q)
        return NULL;
    memcpy(q, p, have);
    nvp_inside_free(p);
    return q;
}
