/* The region's free pages as a sorted array of ranges (preload.h). Its
 * memory is mapped with the raw syscall, never taken from malloc (the
 * program's malloc may be the caller); 2^20 ranges of address space, of
 * which only the touched part costs memory. First fit from the lowest
 * address keeps what is used dense at the region's start. */
#define _GNU_SOURCE
#include "preload/preload.h"

#include <string.h>
#include <sys/mman.h>

struct range {
    uintptr_t start, len;
};

#define NVP_MAXRANGES ((size_t)1 << 20)
#define NVP_MAXHOLES  16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range *fr;          /* free ranges, sorted by start, never touching */
static size_t nfr;
static struct range holes[NVP_MAXHOLES];
static int nholes;

void nvp_ranges_lock(void) { pthread_mutex_lock(&lock); }
void nvp_ranges_unlock(void) { pthread_mutex_unlock(&lock); }

void nvp_ranges_init(uintptr_t base, size_t len)
{
    void *p = nvp_sys_mmap(NULL, NVP_MAXRANGES * sizeof *fr, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if ((uintptr_t)p > (uintptr_t)-4096)
        return;   /* nothing is handed out: every request goes on as without the interposer */
    fr = p;
    fr[0] = (struct range){ base, len };
    nfr = 1;
}

static void cut(size_t i, uintptr_t a, size_t len)
{
    /* take [a, a + len) out of free range i, which holds it */
    struct range r = fr[i];
    uintptr_t end = a + len, rend = r.start + r.len;
    if (a == r.start && end == rend) {
        memmove(&fr[i], &fr[i + 1], (nfr - i - 1) * sizeof *fr);
        nfr--;
    } else if (a == r.start) {
        fr[i] = (struct range){ end, rend - end };
    } else if (end == rend) {
        fr[i].len = a - r.start;
    } else if (nfr < NVP_MAXRANGES) {
        memmove(&fr[i + 2], &fr[i + 1], (nfr - i - 1) * sizeof *fr);
        fr[i].len = a - r.start;
        fr[i + 1] = (struct range){ end, rend - end };
        nfr++;
    } else {
        /* no room to split: the tail is given up rather than lost track of */
        fr[i].len = a - r.start;
    }
}

uintptr_t nvp_range_alloc(size_t len, size_t align)
{
    if (!fr || !len)
        return 0;
    if (align < NVP_PAGE)
        align = NVP_PAGE;
    uintptr_t got = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < nfr; i++) {
        uintptr_t a = (fr[i].start + align - 1) & ~(uintptr_t)(align - 1);
        if (a + len <= fr[i].start + fr[i].len && a >= fr[i].start) {
            cut(i, a, len);
            got = a;
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (got) {
        uint64_t live = __atomic_add_fetch(&nvp_n.live_bytes, len, __ATOMIC_RELAXED);
        uint64_t peak = __atomic_load_n(&nvp_n.peak_live_bytes, __ATOMIC_RELAXED);
        while (peak < live && !__atomic_compare_exchange_n(&nvp_n.peak_live_bytes, &peak, live, 1,
                                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        }
    }
    return got;
}

/* index of the first free range starting above a */
static size_t after(uintptr_t a)
{
    size_t lo = 0, hi = nfr;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fr[mid].start <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int nvp_range_grow(uintptr_t start, size_t oldlen, size_t newlen)
{
    if (!fr || newlen <= oldlen)
        return newlen <= oldlen;
    uintptr_t want = start + oldlen;
    size_t more = newlen - oldlen;
    int ok = 0;
    pthread_mutex_lock(&lock);
    size_t i = after(want);
    if (i > 0 && fr[i - 1].start == want)
        i--;
    if (i < nfr && fr[i].start == want && fr[i].len >= more) {
        cut(i, want, more);
        ok = 1;
    }
    pthread_mutex_unlock(&lock);
    if (ok)
        __atomic_add_fetch(&nvp_n.live_bytes, more, __ATOMIC_RELAXED);
    return ok;
}

static int in_hole(uintptr_t a, size_t len)
{
    for (int i = 0; i < nholes; i++)
        if (a < holes[i].start + holes[i].len && a + len > holes[i].start)
            return 1;
    return 0;
}

void nvp_range_free(uintptr_t a, size_t len)
{
    if (!fr || !len)
        return;
    /* discarded first: the pager drops them (and frees them at the
     * servers) before this madvise returns, so whoever gets them next
     * reads zeros */
    nvp_sys_madvise((void *)a, len, MADV_DONTNEED);
    NVP_CNT(discards, 1);
    pthread_mutex_lock(&lock);
    if (in_hole(a, len)) {
        pthread_mutex_unlock(&lock);
        return;
    }
    uintptr_t end = a + len;
    size_t i = after(a);
    /* merge with every free range it overlaps or touches (a range freed
     * twice, or part of one, stays free once) */
    size_t first = i;
    if (i > 0 && fr[i - 1].start + fr[i - 1].len >= a)
        first = i - 1;
    size_t last = i;   /* one past the last merged */
    while (last < nfr && fr[last].start <= end)
        last++;
    uintptr_t lo = a, hi = end;
    size_t freed_before = 0;
    for (size_t k = first; k < last; k++) {
        uintptr_t s = fr[k].start, e = fr[k].start + fr[k].len;
        uintptr_t ol = s > a ? s : a, oh = e < end ? e : end;
        if (oh > ol)
            freed_before += oh - ol;
        if (s < lo)
            lo = s;
        if (e > hi)
            hi = e;
    }
    if (first == last) {
        if (nfr < NVP_MAXRANGES) {
            memmove(&fr[first + 1], &fr[first], (nfr - first) * sizeof *fr);
            fr[first] = (struct range){ lo, hi - lo };
            nfr++;
        }
    } else {
        fr[first] = (struct range){ lo, hi - lo };
        memmove(&fr[first + 1], &fr[last], (nfr - last) * sizeof *fr);
        nfr -= last - first - 1;
    }
    pthread_mutex_unlock(&lock);
    __atomic_sub_fetch(&nvp_n.live_bytes, len - freed_before, __ATOMIC_RELAXED);
}

void nvp_range_take(uintptr_t a, size_t len)
{
    if (!fr)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = after(a + len); i-- > 0;) {
        uintptr_t s = fr[i].start, e = s + fr[i].len;
        if (e <= a)
            break;
        uintptr_t ol = s > a ? s : a, oh = e < a + len ? e : a + len;
        if (oh > ol)
            cut(i, ol, oh - ol);
    }
    if (nholes < NVP_MAXHOLES)
        holes[nholes++] = (struct range){ a, len };
    pthread_mutex_unlock(&lock);
}

int nvp_in_hole(uintptr_t a, size_t len)
{
    pthread_mutex_lock(&lock);
    int h = in_hole(a, len);
    pthread_mutex_unlock(&lock);
    return h;
}
