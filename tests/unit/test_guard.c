/* util/guard: guarded copies and atomics return -1 instead of crashing when
 * the memory is unmapped, protected or its backing is gone (SIGSEGV,
 * SIGBUS), many times over and from two threads at once, with the thread's
 * signal mask and stack as they were; a fault outside a guard still kills
 * the process with its signal, or reaches the handler installed before
 * netvm's (a sanitizer's, an application's). Prints what a guarded access
 * costs next to memcpy and the msync check it replaces. */
#define _GNU_SOURCE
#include "check.h"
#include "util/guard.h"
#include "util/mapped.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif

#if defined(TEST_ASAN) || defined(TEST_TSAN)
#define SANITIZED 1
#endif

static size_t pagesz;

static char *map_pages(size_t n, int prot)
{
    char *p = mmap(NULL, n * pagesz, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

/* An address with nothing mapped at it. Use it at once: a later mmap (of
 * this thread or another) may take the page again. Under TSan, the
 * runtime's per-thread state for signals and sigsetjmp is allocated at a
 * thread's first guarded access or fault, and took the hole for itself:
 * one guarded fault first. */
static char *hole(void)
{
    static char *none;
    uint64_t v;
    if (none == NULL)
        none = map_pages(1, PROT_NONE);
    CHECK(nv_guarded_load64((uint64_t *)none, &v) == -1);
    char *p = map_pages(1, PROT_READ | PROT_WRITE);
    CHECK(munmap(p, pagesz) == 0);
    return p;
}

static void expect_fault(int r, int sig, const void *addr)
{
    int s = 0;
    void *a = NULL;
    CHECK(r == -1);
    CHECK(errno == EFAULT);
    nv_guard_last_fault(&s, &a);
    if (s != sig || (addr != NULL && a != addr))
        FAILF("fault: signal %d at %p, wanted %d at %p", s, a, sig, addr);
}

/* A file mapping of two pages whose file now holds one: the second page's
 * backing is gone (SIGBUS). */
static char *truncated_mapping(void)
{
    char path[] = "/tmp/nv_guard_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    CHECK(ftruncate(fd, (off_t)(2 * pagesz)) == 0);
    char *p = mmap(NULL, 2 * pagesz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    memset(p, 0x5a, 2 * pagesz);
    CHECK(ftruncate(fd, (off_t)pagesz) == 0);
    close(fd);
    return p;
}

/* ---- children: what a fault does where no guard is ---- */

/* Runs fn in a child (no core file); returns its wait status, its stderr
 * in err. */
static int run_child(void (*fn)(void), char *err, size_t errlen)
{
    int p[2];
    CHECK(pipe(p) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct rlimit none = { 0, 0 };
        setrlimit(RLIMIT_CORE, &none);
        close(p[0]);
        dup2(p[1], 2);
        close(p[1]);
        fn();
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    char sink[4096];
    for (;;) {
        ssize_t r = got + 1 < errlen ? read(p[0], err + got, errlen - 1 - got) : read(p[0], sink, sizeof sink);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (got + 1 < errlen)
            got += (size_t)r;
    }
    err[got] = '\0';
    close(p[0]);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

/* A fault (or a SIGSEGV sent by kill) where no guard is must end the child
 * as it would without netvm: killed by the signal, or, under a sanitizer,
 * by the sanitizer's own handler (installed before ours), which reports it
 * and exits non-zero. */
static void expect_death(const char *what, void (*fn)(void), int sig)
{
    char err[16384];
    int st = run_child(fn, err, sizeof err);
#ifdef SANITIZED
#ifdef TEST_ASAN
    const char *want = sig == SIGBUS ? "AddressSanitizer: BUS" : "AddressSanitizer: SEGV";
#else
    const char *want = sig == SIGBUS ? "ThreadSanitizer: BUS" : "ThreadSanitizer: SEGV";
#endif
    if (!(WIFEXITED(st) && WEXITSTATUS(st) != 0 && strstr(err, want) && !strstr(err, "nested bug")))
        FAILF("%s: wait status %#x, wanted the sanitizer's report \"%s\"; child's stderr:\n%s", what, st, want, err);
#else
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == sig))
        FAILF("%s: wait status %#x, wanted death by signal %d; child's stderr:\n%s", what, st, sig, err);
#endif
    printf("%s: as without netvm (status %#x)\n", what, st);
}

/* Outside a guard, a fault's address is in the page at 0, which nothing
 * can map: a hole() could be taken again before the fault (under TSan, by
 * the runtime's own per-thread signal state, allocated at a thread's first
 * signal, inside the very handler that chains the fault). Volatile: GCC
 * refuses a constant address it can see. */
static char *volatile never_mapped = (char *)(uintptr_t)16;

static void child_segv_outside(void)
{
    *(volatile char *)never_mapped = 1;
    _exit(3); /* not reached */
}

static void child_bus_outside(void)
{
    char *p = truncated_mapping();
    (void)*(volatile char *)(p + pagesz);
    _exit(3);
}

static void child_kill_self(void)
{
    kill(getpid(), SIGSEGV);
    _exit(3);
}

/* While another thread sits in guarded faults, a fault outside a guard in
 * this one is still fatal. */
static void *fault_loop(void *arg)
{
    char *none = arg;
    char buf[64];
    for (;;)
        CHECK(nv_guarded_copy(buf, none, sizeof buf) == -1);
    return NULL;
}

static void child_segv_beside_guards(void)
{
    pthread_t t;
    char *none = map_pages(1, PROT_NONE);
    CHECK(pthread_create(&t, NULL, fault_loop, none) == 0);
    usleep(20000);
    child_segv_outside();
}

/* ---- children: chaining to a handler installed before nv_guard_init ---- */

static char *volatile chain_addr; /* volatile: read by the handler */
static volatile sig_atomic_t chain_user_signals;

static void prev_siginfo(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (sig == SIGSEGV && info->si_code <= 0) { /* the kill() below: counted, then resumed */
        chain_user_signals++;
        return;
    }
    _exit(sig == SIGSEGV && info->si_code == SEGV_MAPERR && info->si_addr == (void *)chain_addr &&
                  chain_user_signals == 1
              ? 42 : 43);
}

static void prev_plain(int sig)
{
    _exit(sig == SIGSEGV ? 44 : 45);
}

/* A guarded fault stays ours: the previous handler does not see it. */
static void guarded_faults_are_ours(void)
{
    char buf[16];
    char *p = hole();
    CHECK(nv_guarded_copy(buf, p, sizeof buf) == -1);
    CHECK(nv_guarded_copy(p, buf, sizeof buf) == -1);
}

static void child_chain_siginfo(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prev_siginfo;
    sa.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    CHECK(nv_guard_init() == 0);
    guarded_faults_are_ours();
    kill(getpid(), SIGSEGV); /* sent, not a fault: to the previous handler, which returns */
    CHECK(chain_user_signals == 1);
    chain_addr = never_mapped;
    *(volatile char *)chain_addr = 1;
    _exit(3);
}

static void child_chain_plain(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = prev_plain;
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    CHECK(nv_guard_init() == 0);
    guarded_faults_are_ours();
    child_segv_outside();
}

/* SIG_IGN: a fault is fatal all the same (the kernel does not let a
 * process ignore its own faults), a kill() is ignored. */
static void child_chain_ignored(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    CHECK(nv_guard_init() == 0);
    guarded_faults_are_ours();
    kill(getpid(), SIGSEGV);
    child_segv_outside();
}

static void test_chaining(void)
{
    char err[4096];
    int st = run_child(child_chain_siginfo, err, sizeof err);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 42))
        FAILF("previous SA_SIGINFO handler: wait status %#x (42: it ran once for kill, then for the fault at "
              "the right address); stderr:\n%s", st, err);
    st = run_child(child_chain_plain, err, sizeof err);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 44))
        FAILF("previous plain handler: wait status %#x; stderr:\n%s", st, err);
    st = run_child(child_chain_ignored, err, sizeof err);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV))
        FAILF("previous SIG_IGN: wait status %#x; stderr:\n%s", st, err);
    printf("chaining: previous SA_SIGINFO, plain and SIG_IGN actions behave as without netvm\n");
}

/* ---- the guard itself ---- */

static void *init_racer(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)nv_guard_init();
}

static void test_init(void)
{
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, init_racer, NULL) == 0);
    for (int i = 0; i < 4; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0);
        CHECK(r == NULL);
    }
    CHECK(nv_guard_init() == 0);
    struct sigaction now;
    CHECK(sigaction(SIGSEGV, NULL, &now) == 0);
    CHECK(now.sa_flags & SA_SIGINFO);
    CHECK(now.sa_flags & SA_NODEFER);
    CHECK(sigaction(SIGBUS, NULL, &now) == 0);
    CHECK(now.sa_flags & SA_SIGINFO);
}

static void test_copies(void)
{
    char src[256], dst[256];
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = (char)i;
    memset(dst, 0, sizeof dst);
    CHECK(nv_guarded_copy(dst, src, sizeof src) == 0);
    CHECK(memcmp(dst, src, sizeof src) == 0);
    CHECK(nv_guarded_copy(NULL, NULL, 0) == 0);

    /* unmapped */
    char *p = hole();
    expect_fault(nv_guarded_copy(dst, p, 64), SIGSEGV, p);
    p = hole();
    expect_fault(nv_guarded_copy(p + 100, src, 64), SIGSEGV, p + 100);

    /* PROT_NONE; read-only */
    char *none = map_pages(1, PROT_NONE);
    expect_fault(nv_guarded_copy(dst, none, 8), SIGSEGV, none);
    expect_fault(nv_guarded_copy(none, src, 8), SIGSEGV, none);
    char *ro = map_pages(1, PROT_READ);
    CHECK(nv_guarded_copy(dst, ro, 64) == 0);
    expect_fault(nv_guarded_copy(ro, src, 64), SIGSEGV, ro);
    CHECK(munmap(none, pagesz) == 0 && munmap(ro, pagesz) == 0);

    /* straddling a mapped and an unmapped page: the mapped part alone
     * copies; the whole fails at the hole, having copied at most the part
     * before it, byte for byte */
    char *two = map_pages(2, PROT_READ | PROT_WRITE);
    CHECK(munmap(two + pagesz, pagesz) == 0);
    char *edge = two + pagesz - 100;
    memset(two, 0x11, pagesz);
    CHECK(nv_guarded_copy(edge, src, 100) == 0);
    CHECK(memcmp(edge, src, 100) == 0);
    memset(two, 0x11, pagesz);
    expect_fault(nv_guarded_copy(edge, src, 200), SIGSEGV, two + pagesz);
    for (int i = 0; i < 100; i++)
        CHECK(edge[i] == 0x11 || edge[i] == src[i]);
    /* every small size (the copy without a jump buffer, and its byte
     * tail) and a few past it, ending right at the hole and one byte into
     * it, from either side */
    for (size_t n = 1; n <= 160; n++) {
        char *end = two + pagesz;
        CHECK(nv_guarded_copy(end - n, src, n) == 0);
        CHECK(memcmp(end - n, src, n) == 0);
        CHECK(nv_guarded_copy(dst, end - n, n) == 0 && memcmp(dst, src, n) == 0);
        expect_fault(nv_guarded_copy(end - n + 1, src, n), SIGSEGV, end);
        expect_fault(nv_guarded_copy(dst, end - n + 1, n), SIGSEGV, end);
    }
    char *big = map_pages(2, PROT_READ | PROT_WRITE);
    expect_fault(nv_guarded_copy(big, two, 2 * pagesz), SIGSEGV, two + pagesz);
    CHECK(munmap(two, pagesz) == 0 && munmap(big, 2 * pagesz) == 0);

    /* SIGBUS: the file under a shared mapping was truncated */
    char *f = truncated_mapping();
    CHECK(nv_guarded_copy(dst, f, 64) == 0);
    expect_fault(nv_guarded_copy(dst, f + pagesz, 64), SIGBUS, f + pagesz);
    expect_fault(nv_guarded_copy(f + pagesz - 32, src, 64), SIGBUS, f + pagesz);
    uint64_t v;
    expect_fault(nv_guarded_load64((uint64_t *)(f + pagesz), &v), SIGBUS, f + pagesz);
    expect_fault(nv_guarded_atomic((uint64_t *)(f + pagesz), NETVM_AOP_FADD, 1, 0, &v), SIGBUS, f + pagesz);
    CHECK(munmap(f, 2 * pagesz) == 0);
    printf("copies: unmapped, PROT_NONE, read-only, straddling and truncated-file ranges fail cleanly\n");
}

static void test_atomics(void)
{
    uint64_t *w = (uint64_t *)map_pages(1, PROT_READ | PROT_WRITE), old = 0, v = 0;
    *w = 10;
    CHECK(nv_guarded_atomic(w, NETVM_AOP_ADD, 5, 0, &old) == 0 && old == 10 && *w == 15);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_FADD, 5, 0, &old) == 0 && old == 15 && *w == 20);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_SWAP, 7, 0, &old) == 0 && old == 20 && *w == 7);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_CSWAP, 9, 6, &old) == 0 && old == 7 && *w == 7);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_CSWAP, 9, 7, &old) == 0 && old == 7 && *w == 9);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_FCAA, 1, 8, &old) == 0 && old == 9 && *w == 9);
    CHECK(nv_guarded_atomic(w, NETVM_AOP_FCAA, 1, 9, &old) == 0 && old == 9 && *w == 10);
    CHECK(nv_guarded_xchg_release(w, 3, &old) == 0 && old == 10 && *w == 3);
    CHECK(nv_guarded_fadd_release(w, 4, &old) == 0 && old == 3 && *w == 7);
    CHECK(nv_guarded_store64(w, 99) == 0 && *w == 99);
    CHECK(nv_guarded_load64(w, &v) == 0 && v == 99);

    /* unmapped (a fresh hole for each write: see never_mapped) and
     * PROT_NONE: every kind fails, *old untouched */
    uint64_t *none = (uint64_t *)map_pages(1, PROT_NONE), *bad;
    for (int round = 0; round < 2; round++) {
#define BAD() (bad = round == 0 ? (uint64_t *)hole() + 3 : none + 5)
        for (int op = 0; op < NETVM_AOP_COUNT; op++) {
            old = 1234;
            BAD();
            expect_fault(nv_guarded_atomic(bad, (netvm_atomic_op_t)op, 1, 0, &old), SIGSEGV, bad);
            CHECK(old == 1234);
        }
        BAD();
        expect_fault(nv_guarded_xchg_release(bad, 1, &old), SIGSEGV, bad);
        BAD();
        expect_fault(nv_guarded_fadd_release(bad, 1, &old), SIGSEGV, bad);
        BAD();
        expect_fault(nv_guarded_store64(bad, 1), SIGSEGV, bad);
        BAD();
        expect_fault(nv_guarded_load64(bad, &v), SIGSEGV, bad);
        CHECK(old == 1234 && v == 99);
#undef BAD
    }
    /* the word mapped again at the same address works again (under TSan
     * an instrumented atomic would deadlock here: see guard.c) */
    uint64_t *again = mmap(none, pagesz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(again == none);
    CHECK(nv_guarded_atomic(again + 5, NETVM_AOP_FADD, 2, 0, &old) == 0 && old == 0 && again[5] == 2);
    CHECK(nv_guarded_fadd_release(again + 5, 2, &old) == 0 && old == 2 && again[5] == 4);
    CHECK(munmap(again, pagesz) == 0 && munmap(w, pagesz) == 0);
    printf("atomics: results right on mapped words, -1 on unmapped and PROT_NONE ones\n");
}

/* A signal word updated with release publishes the data written before
 * it to a thread that reads the word with acquire (what netvm's signals
 * promise). Under TSan this also checks that the uninstrumented guarded
 * atomics tell TSan so: without it, the reader's loads are reported as a
 * race. */
static uint64_t published[8];

static void *publish_reader(void *arg)
{
    uint64_t *w = arg, sum = 0;
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) == 0)
        sched_yield();
    for (int i = 0; i < 8; i++)
        sum += published[i];
    return (void *)(uintptr_t)sum;
}

static void test_release_publishes(void)
{
    uint64_t *w = (uint64_t *)map_pages(1, PROT_READ | PROT_WRITE);
    for (int round = 0; round < 3; round++) {
        pthread_t t;
        void *sum;
        uint64_t old = 99;
        __atomic_store_n(w, 0, __ATOMIC_RELAXED);
        CHECK(pthread_create(&t, NULL, publish_reader, w) == 0);
        usleep(1000);
        for (int i = 0; i < 8; i++)
            published[i] = (uint64_t)(round * 8 + i);
        if (round == 0)
            CHECK(nv_guarded_xchg_release(w, 1, &old) == 0);
        else if (round == 1)
            CHECK(nv_guarded_fadd_release(w, 1, &old) == 0);
        else
            CHECK(nv_guarded_atomic(w, NETVM_AOP_FADD, 1, 0, &old) == 0);
        CHECK(old == 0);
        CHECK(pthread_join(t, &sum) == 0);
        CHECK((uintptr_t)sum == (uintptr_t)(64 * round + 28));
    }
    CHECK(munmap(w, pagesz) == 0);
    printf("release: guarded exchange, fetch-add and atomic publish the data before them\n");
}

/* userfaultfd's poisoned page (UFFDIO_POISON, Linux 6.6): the SIGBUS
 * network memory raises for a page it lost. Skipped where unavailable. */
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFDIO_POISON
struct uffdio_poison {
    struct uffdio_range range;
    uint64_t mode;
    int64_t updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, 0x08, struct uffdio_poison)
#endif

static void test_uffd_poison(void)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
    if (fd < 0) {
        printf("uffd poison: skipped (userfaultfd: %s)\n", strerror(errno));
        return;
    }
    struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_POISON };
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        printf("uffd poison: skipped (no UFFD_FEATURE_POISON: %s)\n", strerror(errno));
        close(fd);
        return;
    }
    char *p = map_pages(2, PROT_READ | PROT_WRITE);
    struct uffdio_register reg = { .range = { (uintptr_t)p, 2 * pagesz }, .mode = UFFDIO_REGISTER_MODE_MISSING };
    CHECK(ioctl(fd, UFFDIO_REGISTER, &reg) == 0);
    struct uffdio_poison poison = { .range = { (uintptr_t)p, pagesz } };
    CHECK(ioctl(fd, UFFDIO_POISON, &poison) == 0);
    char buf[64];
    uint64_t v;
    expect_fault(nv_guarded_copy(buf, p + 8, sizeof buf), SIGBUS, p + 8);
    expect_fault(nv_guarded_copy(p, buf, sizeof buf), SIGBUS, p);
    expect_fault(nv_guarded_load64((uint64_t *)p, &v), SIGBUS, p);
    expect_fault(nv_guarded_atomic((uint64_t *)p, NETVM_AOP_SWAP, 1, 0, &v), SIGBUS, p);
    CHECK(munmap(p, 2 * pagesz) == 0);
    close(fd);
    printf("uffd poison: a poisoned userfaultfd page fails with SIGBUS\n");
}

/* Many faults: the signal must keep working, and neither the signal mask
 * nor the stack may carry anything over from a fault to the next. */
static __attribute__((noinline)) uintptr_t frame_here(void)
{
    return (uintptr_t)__builtin_frame_address(0);
}

static void test_many(int iters)
{
    sigset_t before, after;
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &before) == 0);
    uintptr_t frame = frame_here();
    char *none = map_pages(1, PROT_NONE);
    char *gone = hole();
    char buf[64], src[64];
    memset(src, 7, sizeof src);
    double t0 = now_s();
    for (int i = 0; i < iters; i++) {
        if (nv_guarded_copy(buf, gone, sizeof buf) != -1 || nv_guarded_store64((uint64_t *)none, 1) != -1)
            FAILF("iteration %d: a fault was not caught", i);
        if (i % 1000 == 0) {
            memset(buf, 0, sizeof buf);
            CHECK(nv_guarded_copy(buf, src, sizeof buf) == 0 && memcmp(buf, src, sizeof buf) == 0);
        }
    }
    double t = now_s() - t0;
    CHECK(pthread_sigmask(SIG_BLOCK, NULL, &after) == 0);
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&before, s) != sigismember(&after, s))
            FAILF("signal %d's blocked state changed after %d faults", s, 2 * iters);
    CHECK(!sigismember(&after, SIGSEGV) && !sigismember(&after, SIGBUS));
    CHECK(frame_here() == frame);
    CHECK(munmap(none, pagesz) == 0);
    printf("many: %d caught faults, %.2f us each; mask and stack unchanged\n", 2 * iters, t / (2 * iters) * 1e6);
}

/* Two threads fault at once, each on its own page, between good copies:
 * each sees its own faults only. */
struct racer {
    char *bad;
    int iters;
    int ok;
};

static void *racer(void *arg)
{
    struct racer *r = arg;
    char buf[128], src[128];
    for (int i = 0; i < r->iters; i++) {
        int s;
        void *a;
        memset(src, (char)i, sizeof src);
        if (nv_guarded_copy(buf, src, sizeof buf) != 0 || memcmp(buf, src, sizeof buf) != 0)
            return NULL;
        if (nv_guarded_copy(i & 1 ? r->bad : buf, i & 1 ? buf : r->bad, sizeof buf) != -1)
            return NULL;
        nv_guard_last_fault(&s, &a);
        if (s != SIGSEGV || a != r->bad)
            return NULL;
        uint64_t old;
        if (nv_guarded_fadd_release((uint64_t *)r->bad, 1, &old) != -1)
            return NULL;
    }
    r->ok = 1;
    return NULL;
}

static void test_threads(int iters)
{
    char *none = map_pages(2, PROT_NONE);
    struct racer r[2] = { { none, iters, 0 }, { none + pagesz, iters, 0 } };
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, racer, &r[i]) == 0);
    for (int i = 0; i < 2; i++)
        CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(r[0].ok && r[1].ok);
    CHECK(munmap(none, 2 * pagesz) == 0);
    printf("threads: 2 threads, %d faults each, all caught and each its own\n", 2 * iters);
}

/* ---- what it costs (printed, not checked) ---- */

static void *(*volatile memcpy_fn)(void *, const void *, size_t) = memcpy;

static void bench(int n)
{
    char *page = map_pages(1, PROT_READ | PROT_WRITE);
    uint64_t src = 1, *dst = (uint64_t *)page, old;
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        memcpy_fn(dst, &src, 8);
    double plain = (now_s() - t0) / n * 1e9;
    t0 = now_s();
    for (int i = 0; i < n; i++)
        nv_guarded_copy(dst, &src, 8);
    double guarded = (now_s() - t0) / n * 1e9;
    t0 = now_s();
    for (int i = 0; i < n; i++)
        if (nv_range_mapped((uintptr_t)dst, 8))
            memcpy_fn(dst, &src, 8);
    double checked = (now_s() - t0) / n * 1e9;
    t0 = now_s();
    for (int i = 0; i < n / 10; i++)
        msync(page, pagesz, MS_ASYNC);
    double ms = (now_s() - t0) / (n / 10) * 1e9;
    t0 = now_s();
    for (int i = 0; i < n; i++)
        __atomic_fetch_add(dst, 1, __ATOMIC_SEQ_CST);
    double fadd = (now_s() - t0) / n * 1e9;
    t0 = now_s();
    for (int i = 0; i < n; i++)
        nv_guarded_atomic(dst, NETVM_AOP_FADD, 1, 0, &old);
    double gfadd = (now_s() - t0) / n * 1e9;
    printf("bench (ns per call): memcpy 8 B %.1f, guarded copy 8 B %.1f, msync(MS_ASYNC) 1 page %.1f, "
           "nv_range_mapped + memcpy 8 B %.1f; fetch-add %.1f, guarded fetch-add %.1f%s\n",
           plain, guarded, ms, checked, fadd, gfadd,
#ifdef SANITIZED
           " (sanitizer build: not representative)"
#else
           ""
#endif
    );
    CHECK(munmap(page, pagesz) == 0);
}

int main(void)
{
    pagesz = (size_t)sysconf(_SC_PAGESIZE);
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* First, before this process installs the guard: children that install
     * a handler of their own, then the guard over it. */
    test_chaining();

    test_init();
    test_copies();
    test_atomics();
    test_release_publishes();
    test_uffd_poison();
    test_many(100000);
    test_threads(50000);
    /* After all those faults, a fault outside a guard is still fatal. */
    expect_death("SIGSEGV outside a guard", child_segv_outside, SIGSEGV);
    expect_death("SIGBUS outside a guard", child_bus_outside, SIGBUS);
    expect_death("SIGSEGV sent by kill", child_kill_self, SIGSEGV);
    expect_death("SIGSEGV outside a guard while another thread faults in guards", child_segv_beside_guards, SIGSEGV);
#ifdef SANITIZED
    bench(200000);
#else
    bench(5000000);
#endif
    return 0;
}
