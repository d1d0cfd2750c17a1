/* A program run under `netvm gmem run` by gmem_run_test.py, the way a user
 * runs one: it knows nothing of netvm. Each mode checks its own data and
 * prints checksums that must equal a plain run's.
 *
 *   gmrun_prog all MIB      big malloc, calloc, realloc across the
 *                           threshold, free and calloc again, threads,
 *                           fork (the child checks the parent's data),
 *                           exec of "child"
 *   gmrun_prog child MIB    allocates and checks (the exec'd program)
 *   gmrun_prog mmap MIB     mmap, madvise(DONTNEED), partial munmap,
 *                           mremap grow/shrink, MAP_FIXED over a range
 *   gmrun_prog hold MIB     fills MIB, prints "ready PID", sleeps */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

static int failed;
#define CHECK(c, ...)                                                                                              \
    do {                                                                                                           \
        if (!(c)) {                                                                                                \
            fprintf(stderr, "gmrun_prog: FAIL %s:%d: ", __FILE__, __LINE__);                                       \
            fprintf(stderr, __VA_ARGS__);                                                                          \
            fprintf(stderr, "\n");                                                                                 \
            failed = 1;                                                                                            \
        }                                                                                                          \
    } while (0)

static uint64_t val(uint64_t i, uint64_t seed) { return (i + seed) * 0x9E3779B97F4A7C15ull ^ (seed << 7); }

static void fill(uint64_t *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        a[i] = val(i, seed);
}

/* index of the first word not as filled, or n */
static size_t verify(const uint64_t *a, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != val(i, seed))
            return i;
    return n;
}

static uint64_t sum(const uint64_t *a, size_t n)
{
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++)
        s = (s ^ a[i]) * 0x100000001B3ull;
    return s;
}

static int zeros(const void *p, size_t len)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < len; i++)
        if (c[i])
            return 0;
    return 1;
}

/* --- threads: each writes its stripe, then all read every stripe ------- */
#define NTHR 4
struct thr {
    uint64_t *a;
    size_t    n;
    int       id;
    uint64_t  sum;
    pthread_barrier_t *bar;
};

static void *thr_main(void *p)
{
    struct thr *t = p;
    size_t per = t->n / NTHR;
    for (size_t i = (size_t)t->id * per; i < (size_t)(t->id + 1) * per; i++)
        t->a[i] = val(i, 77);
    pthread_barrier_wait(t->bar);
    /* read from a different starting stripe each, so they fault together */
    for (int k = 0; k < NTHR; k++) {
        int s = (t->id + k) % NTHR;
        for (size_t i = (size_t)s * per; i < (size_t)(s + 1) * per; i++)
            t->sum += t->a[i] == val(i, 77);
    }
    return NULL;
}

static int mode_child(size_t mib)
{
    size_t n = mib * MIB / 8;
    uint64_t *a = malloc(n * 8);
    CHECK(a, "child malloc");
    if (!a)
        return 1;
    fill(a, n, 5);
    size_t bad = verify(a, n, 5);
    CHECK(bad == n, "child: word %zu", bad);
    printf("child checksum %016llx\n", (unsigned long long)sum(a, n));
    free(a);
    return failed;
}

static int mode_all(const char *self, size_t mib)
{
    size_t n = mib * MIB / 8;
    /* big malloc */
    uint64_t *a = malloc(n * 8);
    CHECK(a, "malloc %zu MiB", mib);
    fill(a, n, 1);
    size_t bad = verify(a, n, 1);
    CHECK(bad == n, "malloc: word %zu", bad);
    printf("malloc checksum %016llx\n", (unsigned long long)sum(a, n));

    /* calloc reads zeros */
    uint64_t *c = calloc(n / 4, 8);
    CHECK(c && zeros(c, n / 4 * 8), "calloc not zero");
    fill(c, n / 4, 2);

    /* realloc: a small block grown past the threshold keeps its bytes, an
     * interposed one grows (in place or moved) and shrinks */
    size_t small = 64 * 1024 / 8;
    uint64_t *r = malloc(small * 8);
    fill(r, small, 3);
    r = realloc(r, 4 * MIB);
    CHECK(r && verify(r, small, 3) == small, "realloc past the threshold lost bytes");
    fill(r, 4 * MIB / 8, 3);
    r = realloc(r, 16 * MIB);
    CHECK(r && verify(r, 4 * MIB / 8, 3) == 4 * MIB / 8, "realloc growth lost bytes");
    fill(r, 16 * MIB / 8, 3);
    void *blocker = malloc(2 * MIB);   /* the next growth may have to move */
    r = realloc(r, 40 * MIB);
    CHECK(r && verify(r, 16 * MIB / 8, 3) == 16 * MIB / 8, "realloc growth (moved) lost bytes");
    r = realloc(r, 2 * MIB);
    CHECK(r && verify(r, 2 * MIB / 8, 3) == 2 * MIB / 8, "realloc shrink lost bytes");
    printf("realloc checksum %016llx\n", (unsigned long long)sum(r, 2 * MIB / 8));
    free(blocker);
    free(r);
    bad = verify(c, n / 4, 2);
    CHECK(bad == n / 4, "calloc'd block: word %zu", bad);
    free(c);

    /* freed memory comes back as zeros from calloc, never old data */
    free(a);
    a = calloc(n, 8);
    CHECK(a && zeros(a, n * 8), "calloc after free: not zeros");

    /* threads faulting concurrently over the same pages */
    pthread_t th[NTHR];
    struct thr t[NTHR];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, NTHR);
    for (int i = 0; i < NTHR; i++) {
        t[i] = (struct thr){ a, n, i, 0, &bar };
        pthread_create(&th[i], NULL, thr_main, &t[i]);
    }
    uint64_t good = 0;
    for (int i = 0; i < NTHR; i++) {
        pthread_join(th[i], NULL);
        good += t[i].sum;
    }
    CHECK(good == (uint64_t)NTHR * (n / NTHR * NTHR), "threads saw %llu of %llu words right",
          (unsigned long long)good, (unsigned long long)NTHR * (n / NTHR * NTHR));
    printf("threads checksum %016llx\n", (unsigned long long)sum(a, n / NTHR * NTHR));

    /* fork: the child sees the parent's data (pages resident in the parent
     * and pages on the servers alike); then the parent reads the whole
     * array again with its budget full of pages shared copy-on-write with
     * the child (that hung before the pager went past its budget for them:
     * docs/gmem-run.md, "Fork") */
    uint64_t want = sum(a, n / NTHR * NTHR);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t got = sum(a, n / NTHR * NTHR);
        _exit(got == want ? 0 : 3);
    }
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child saw other data (status %#x)", st);
    CHECK(sum(a, n / NTHR * NTHR) == want, "the parent's array changed across its fork");
    free(a);

    /* exec: the exec'd program runs in network memory too */
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        char m[24];
        snprintf(m, sizeof m, "%zu", mib / 2 ? mib / 2 : 1);
        execl(self, self, "child", m, (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exec'd child failed (status %#x)", st);
    return failed;
}

static int mode_mmap(size_t mib)
{
    size_t len = mib * MIB, n = len / 8;
    uint64_t *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED, "mmap");
    if (p == MAP_FAILED)
        return 1;
    CHECK(zeros(p, len), "fresh mmap not zero");
    fill(p, n, 9);
    size_t bad = verify(p, n, 9);
    CHECK(bad == n, "mmap: word %zu", bad);
    printf("mmap checksum %016llx\n", (unsigned long long)sum(p, n));
    /* DONTNEED: zeros there, the rest kept */
    CHECK(madvise((char *)p + MIB, MIB, MADV_DONTNEED) == 0, "madvise");
    CHECK(zeros((char *)p + MIB, MIB), "DONTNEED range not zero");
    CHECK(verify(p, MIB / 8, 9) == MIB / 8, "before the DONTNEED range");
    bad = verify(p + 2 * MIB / 8, n - 2 * MIB / 8, 9 + 0);
    /* (val depends on the index from the start of what verify sees) */
    for (size_t i = 2 * MIB / 8; i < n; i++)
        if (p[i] != val(i, 9)) {
            CHECK(0, "after the DONTNEED range: word %zu", i);
            break;
        }
    /* partial munmap of the tail */
    CHECK(munmap((char *)p + len - MIB, MIB) == 0, "munmap tail");
    len -= MIB;
    n = len / 8;
    /* mremap: grow (maybe moving), the old bytes kept, the new ones zero */
    uint64_t *q = mremap(p, len, 2 * len, MREMAP_MAYMOVE);
    CHECK(q != MAP_FAILED, "mremap grow");
    if (q == MAP_FAILED)
        return 1;
    CHECK(verify(q, MIB / 8, 9) == MIB / 8, "mremap lost the head");
    CHECK(zeros((char *)q + len, len), "mremap's new part not zero");
    for (size_t i = 2 * MIB / 8; i < n; i++)
        if (q[i] != val(i, 9)) {
            CHECK(0, "mremap lost word %zu", i);
            break;
        }
    fill(q + n, n, 10);
    /* shrink */
    uint64_t *s = mremap(q, 2 * len, len + MIB, 0);
    CHECK(s == q, "mremap shrink moved");
    CHECK(verify(q + n, MIB / 8, 10) == MIB / 8, "mremap shrink lost bytes");
    /* MAP_FIXED anonymous over the start: zeros there */
    void *f = mmap(q, MIB, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(f == q, "MAP_FIXED");
    CHECK(zeros(q, MIB), "MAP_FIXED range not zero");
    printf("mremap checksum %016llx\n", (unsigned long long)sum(q + 2 * MIB / 8, n - 2 * MIB / 8));
    CHECK(munmap(q, len + MIB) == 0, "munmap");
    /* a second mapping after the unmap reads zeros */
    uint64_t *z = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(z != MAP_FAILED && zeros(z, 2 * len), "mmap after munmap not zero");
    munmap(z, 2 * len);
    (void)bad;
    return failed;
}

static int mode_hold(size_t mib)
{
    size_t n = mib * MIB / 8;
    uint64_t *a = malloc(n * 8);
    fill(a, n, 4);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (;;)
        pause();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: gmrun_prog all|child|mmap|hold MIB\n");
        return 2;
    }
    size_t mib = (size_t)atol(argv[2]);
    int rc;
    if (!strcmp(argv[1], "all"))
        rc = mode_all(argv[0], mib);
    else if (!strcmp(argv[1], "child"))
        rc = mode_child(mib);
    else if (!strcmp(argv[1], "mmap"))
        rc = mode_mmap(mib);
    else if (!strcmp(argv[1], "hold"))
        rc = mode_hold(mib);
    else
        return 2;
    printf("%s\n", rc ? "FAILED" : "ok");
    return rc;
}
