/* Measures what docs/gmem.md bases the pager's dirty tracking and
 * eviction on, on this machine (a measurement, not a test):
 *  - a synchronous write-protect fault per first write of a page, served
 *    by a handler thread (UFFDIO_WRITEPROTECT to unprotect);
 *  - WP_ASYNC: the kernel unprotects by itself, PAGEMAP_SCAN with
 *    PAGE_IS_WRITTEN and PM_SCAN_WP_MATCHING finds and re-protects the
 *    written pages;
 *  - the eviction primitives: UFFDIO_MOVE out, UFFDIO_COPY in, madvise.
 * Usage: gmem_tracking [PAGES] */
#include "gmem_test.h"
#include "gmem/uffd.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef PAGEMAP_SCAN
struct page_region {
    __u64 start, end, categories;
};
struct pm_scan_arg {
    __u64 size, flags, start, end, walk_end, vec, vec_len, max_pages, category_inverted, category_mask,
        category_anyof_mask, return_mask;
};
#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#define PM_SCAN_WP_MATCHING (1 << 0)
#define PAGE_IS_WRITTEN (1 << 1)
#endif

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static int fd;
static volatile int quit;

static void *wp_server(void *a)
{
    (void)a;
    struct pollfd p = { fd, POLLIN, 0 };
    struct uffd_msg m[16];
    while (!quit) {
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, m, sizeof m);
        for (ssize_t i = 0; i < n / (ssize_t)sizeof m[0]; i++)
            nv_gm_uffd_wp(fd, m[i].arg.pagefault.address & ~(uint64_t)(GPAGE - 1), GPAGE, 0);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 0) : 16384;
    char why[512];
    struct nv_uffd_caps c;
    static unsigned char buf[GPAGE] __attribute__((aligned(GPAGE)));
    memset(buf, 1, sizeof buf);

    /* 1. synchronous write-protect faults */
    fd = nv_uffd_open(UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_MOVE, &c, why, sizeof why);
    CHECK(fd >= 0);
    unsigned char *r = mmap(NULL, n * GPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(r, n * GPAGE, MADV_NOHUGEPAGE);
    CHECK(nv_uffd_register(fd, r, n * GPAGE, UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP) == 0);
    double t0 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(nv_gm_uffd_copy(fd, (uintptr_t)(r + i * GPAGE), buf, GPAGE, UFFDIO_COPY_MODE_WP) == 0);
    double t1 = now_us();
    pthread_t th;
    pthread_create(&th, NULL, wp_server, NULL);
    for (size_t i = 0; i < n; i++)
        r[i * GPAGE] = 2;
    double t2 = now_us();
    for (size_t i = 0; i < n; i++)
        r[i * GPAGE] = 3;                       /* already unprotected: plain stores */
    double t3 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(nv_gm_uffd_wp(fd, (uintptr_t)(r + i * GPAGE), GPAGE, UFFDIO_WRITEPROTECT_MODE_WP) == 0);
    double t4 = now_us();
    quit = 1;
    pthread_join(th, NULL);
    /* eviction primitives */
    int sfd = nv_uffd_open(UFFD_FEATURE_MOVE, &c, why, sizeof why);
    unsigned char *st = mmap(NULL, n * GPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(st, n * GPAGE, MADV_NOHUGEPAGE);
    CHECK(nv_uffd_register(sfd, st, n * GPAGE, UFFDIO_REGISTER_MODE_MISSING) == 0);
    double t5 = now_us();
    for (size_t i = 0; i < n; i++)
        CHECK(nv_gm_uffd_move(sfd, (uintptr_t)(st + i * GPAGE), (uintptr_t)(r + i * GPAGE), GPAGE) == 0);
    double t6 = now_us();
    madvise(st, n * GPAGE, MADV_DONTNEED);
    double t7 = now_us();
    printf("tracking: %zu pages\n", n);
    printf("  UFFDIO_COPY (write-protected) in       %6.2f us/page\n", (t1 - t0) / (double)n);
    printf("  first write: sync write-protect fault  %6.2f us/page (served by a handler thread)\n",
           (t2 - t1) / (double)n);
    printf("  later writes                           %6.3f us/page\n", (t3 - t2) / (double)n);
    printf("  UFFDIO_WRITEPROTECT one page           %6.2f us/page\n", (t4 - t3) / (double)n);
    printf("  UFFDIO_MOVE out to staging             %6.2f us/page\n", (t6 - t5) / (double)n);
    printf("  madvise(DONTNEED) of staging           %6.3f us/page\n", (t7 - t6) / (double)n);
    close(fd);
    close(sfd);
    munmap(r, n * GPAGE);
    munmap(st, n * GPAGE);

    /* 2. WP_ASYNC + PAGEMAP_SCAN */
    fd = nv_uffd_open(UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED, &c,
                         why, sizeof why);
    if (fd < 0 || !(c.features & UFFD_FEATURE_WP_ASYNC)) {
        printf("  WP_ASYNC: not offered by this kernel\n");
        return 0;
    }
    r = mmap(NULL, n * GPAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    madvise(r, n * GPAGE, MADV_NOHUGEPAGE);
    CHECK(nv_uffd_register(fd, r, n * GPAGE, UFFDIO_REGISTER_MODE_WP) == 0);
    for (size_t i = 0; i < n; i++)
        r[i * GPAGE] = 1;
    CHECK(nv_gm_uffd_wp(fd, (uintptr_t)r, n * GPAGE, UFFDIO_WRITEPROTECT_MODE_WP) == 0);
    t0 = now_us();
    for (size_t i = 0; i < n; i++)
        r[i * GPAGE] = 2;                       /* async write-protect faults */
    t1 = now_us();
    printf("  WP_ASYNC first write                   %6.2f us/page (no handler)\n", (t1 - t0) / (double)n);
    struct page_region *vec = calloc(n, sizeof *vec);
    struct pm_scan_arg a = { .size = sizeof a, .flags = PM_SCAN_WP_MATCHING, .start = (uintptr_t)r,
                             .end = (uintptr_t)(r + n * GPAGE), .vec = (uintptr_t)vec, .vec_len = n,
                             .category_mask = PAGE_IS_WRITTEN, .return_mask = PAGE_IS_WRITTEN };
    int pm = open("/proc/self/pagemap", O_RDONLY);
    t1 = now_us();
    long got = ioctl(pm, PAGEMAP_SCAN, &a);
    t2 = now_us();
    long got2 = ioctl(pm, PAGEMAP_SCAN, &a);    /* nothing written since: an empty scan */
    close(pm);
    t3 = now_us();
    printf("  PAGEMAP_SCAN written+re-protect        %6.3f us/page (%ld ranges)\n", (t2 - t1) / (double)n, got);
    printf("  PAGEMAP_SCAN, nothing written          %6.3f us/page (%ld ranges)\n", (t3 - t2) / (double)n, got2);
    printf("  /sys/kernel/mm/page_idle: %s\n", access("/sys/kernel/mm/page_idle/bitmap", R_OK) == 0
                                                   ? "present" : "absent on this kernel");
    free(vec);
    return 0;
}
