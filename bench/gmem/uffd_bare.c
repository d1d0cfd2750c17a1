/* netvm_gm_uffd: the bare userfaultfd baseline of network memory's fault
 * target (DESIGN.md section 5, "a bare userfaultfd fault resolved locally
 * by the same kind of handler"). One handler thread resolves the missing
 * faults of a private anonymous region with UFFDIO_COPY from a local
 * buffer; the main thread touches the region's pages in a random order and
 * times each touch. After every pass MADV_DONTNEED empties the region, so
 * every touch of the next pass faults again.
 *   --wait sleep  the handler sleeps in poll(2) on the userfaultfd (what a
 *                 pager thread that does not burn a core does)
 *   --wait poll   the handler spins on a nonblocking read(2)
 * Rows: uffd_fault (per touch, the main thread's clock: median, p99, mean)
 * and uffd_copy (the UFFDIO_COPY ioctl alone, timed in the handler).
 * Needs userfaultfd: root, vm.unprivileged_userfaultfd=1 or /dev/userfaultfd. */
#include "gm_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static int uffd, polling;
static uint8_t *src;
static uint64_t *copy_ns;
static atomic_size_t ncopies;
static size_t copy_cap;
static atomic_int stop;

static void die(const char *what)
{
    fprintf(stderr, "netvm_gm_uffd: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void *handler(void *arg)
{
    (void)arg;
    struct pollfd pfd = { .fd = uffd, .events = POLLIN };
    while (!atomic_load(&stop)) {
        struct uffd_msg m;
        if (!polling && poll(&pfd, 1, 100) < 0 && errno != EINTR)
            die("poll");
        ssize_t r = read(uffd, &m, sizeof m);
        if (r < 0 && (errno == EAGAIN || errno == EINTR))
            continue;
        if (r != sizeof m)
            die("read");
        if (m.event != UFFD_EVENT_PAGEFAULT)
            continue;
        struct uffdio_copy c = {
            .dst = m.arg.pagefault.address & ~(uint64_t)(GM_PAGE - 1),
            .src = (uintptr_t)src, .len = GM_PAGE, .mode = 0,
        };
        uint64_t t0 = gm_now_ns();
        /* EEXIST: the page arrived another way; the faulting thread is
         * woken all the same. */
        if (ioctl(uffd, UFFDIO_COPY, &c) && errno != EEXIST)
            die("UFFDIO_COPY");
        uint64_t dt = gm_now_ns() - t0;
        size_t i = atomic_fetch_add(&ncopies, 1);
        if (i < copy_cap)
            copy_ns[i] = dt;
    }
    return NULL;
}

static void usage(void)
{
    fprintf(stderr, "usage: netvm_gm_uffd [--wait sleep|poll] [--pages N] [--passes N] [--seed S]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    size_t pages = 4096, passes = 4;
    uint64_t seed = 1;
    if (argc % 2 == 0)
        usage();
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--wait")) {
            if (strcmp(argv[i + 1], "poll") && strcmp(argv[i + 1], "sleep"))
                usage();
            polling = !strcmp(argv[i + 1], "poll");
        } else if (!strcmp(argv[i], "--pages")) {
            pages = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--passes")) {
            passes = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "--seed")) {
            seed = strtoull(argv[i + 1], NULL, 10);
        } else {
            usage();
        }
    }
    if (!pages || !passes || pages > (1u << 24))
        usage();
    uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (uffd < 0) {
        /* /dev/userfaultfd: for users the sysctl keeps out */
        int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (dev < 0 || (uffd = ioctl(dev, _IO(0xAA, 0x00), O_CLOEXEC | O_NONBLOCK)) < 0)
            die("userfaultfd (root, vm.unprivileged_userfaultfd=1 or /dev/userfaultfd needed)");
        close(dev);
    }
    struct uffdio_api api = { .api = UFFD_API };
    if (ioctl(uffd, UFFDIO_API, &api))
        die("UFFDIO_API");
    size_t len = pages * GM_PAGE;
    uint8_t *region = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED)
        die("mmap");
    madvise(region, len, MADV_NOHUGEPAGE);   /* a huge page would hide 511 faults */
    struct uffdio_register reg = { .range = { (uintptr_t)region, len }, .mode = UFFDIO_REGISTER_MODE_MISSING };
    if (ioctl(uffd, UFFDIO_REGISTER, &reg))
        die("UFFDIO_REGISTER");
    src = aligned_alloc(GM_PAGE, GM_PAGE);
    if (!src)
        die("aligned_alloc");
    gm_fill_page((uint64_t *)src, 7);
    size_t n = pages * passes;
    uint64_t *lat = malloc(n * sizeof *lat);
    copy_cap = n;
    copy_ns = malloc(n * sizeof *copy_ns);
    uint32_t *perm = gm_perm(pages, seed);
    if (!lat || !copy_ns || !perm)
        die("malloc");
    pthread_t th;
    if (pthread_create(&th, NULL, handler, NULL))
        die("pthread_create");
    uint64_t sum = 0;
    for (size_t p = 0; p < passes; p++) {
        for (size_t i = 0; i < pages; i++) {
            volatile uint64_t *w = (volatile uint64_t *)(region + (size_t)perm[i] * GM_PAGE);
            uint64_t t0 = gm_now_ns();
            sum += *w;
            lat[p * pages + i] = gm_now_ns() - t0;
        }
        if (madvise(region, len, MADV_DONTNEED))
            die("madvise");
    }
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    if (sum != 7 * n) {
        fprintf(stderr, "netvm_gm_uffd: read %llu, expected %llu: a page was not the copied one\n",
                (unsigned long long)sum, (unsigned long long)(7 * n));
        return 1;
    }
    size_t nc = atomic_load(&ncopies);
    if (nc != n) {
        fprintf(stderr, "netvm_gm_uffd: %zu faults for %zu touches\n", nc, n);
        return 1;
    }
    int rows = 0;
    double pollv = polling;
    gm_pct_t f = gm_pct(lat, n), c = gm_pct(copy_ns, nc);
    gm_row(&rows, "uffd_fault", GM_PAGE, "us", f.p50, "p99", f.p99, "mean", f.mean, "iters", (double)n,
           "poll", pollv, (const char *)NULL);
    gm_row(&rows, "uffd_copy", GM_PAGE, "us", c.p50, "p99", c.p99, "mean", c.mean, "iters", (double)nc,
           "poll", pollv, (const char *)NULL);
    printf("{\"done\":%d}\n", rows);
    free(perm);
    free(copy_ns);
    free(lat);
    free(src);
    munmap(region, len);
    close(uffd);
    return 0;
}
