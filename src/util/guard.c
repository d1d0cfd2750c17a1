/* Guarded accesses (see guard.h): the access is the check. */
#define _GNU_SOURCE
#include "util/guard.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <ucontext.h>

#if defined(__SANITIZE_THREAD__)
#define NV_GUARD_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NV_GUARD_TSAN 1
#endif
#endif

#ifdef NV_GUARD_TSAN
/* TSan's (non-relaxed) atomics hold the word's sync object lock across
 * the hardware access: a fault that jumps out leaves it held, and the next
 * TSan atomic on the word deadlocks (seen here with GCC 12's libtsan). So under TSan the guarded word accesses are compiled
 * without instrumentation and the ordering they give is told to TSan around
 * them, outside the guard. GCC's no_sanitize_thread removes everything;
 * clang's keeps atomics instrumented, disable_sanitizer_instrumentation
 * does not. */
#if defined(__clang__) && __has_attribute(disable_sanitizer_instrumentation)
#define NV_GUARD_PLAIN __attribute__((disable_sanitizer_instrumentation))
#elif defined(__clang__)
#define NV_GUARD_PLAIN __attribute__((no_sanitize("thread"))) /* clang < 14: atomics stay instrumented */
#else
#define NV_GUARD_PLAIN __attribute__((no_sanitize_thread))
#endif
/* The shared semantics, inlined into the uninstrumented functions (this
 * declaration adds the attributes to atomic_op.h's definition, in this file
 * only: GCC does not inline an instrumented function into one that is not). */
static inline uint64_t nv_atomic_apply(uint64_t *w, netvm_atomic_op_t op, uint64_t operand, uint64_t compare)
    __attribute__((always_inline)) NV_GUARD_PLAIN;
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
/* glibc's sigaction under its other name, which TSan does not intercept:
 * the kernel's action, not TSan's record of the application's. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
#define NV_TSAN_ACQUIRE(a) __tsan_acquire((void *)(a))
#define NV_TSAN_RELEASE(a) __tsan_release((void *)(a))
#else
#define NV_GUARD_PLAIN
#define NV_TSAN_ACQUIRE(a) ((void)0)
#define NV_TSAN_RELEASE(a) ((void)0)
#endif

#include "util/atomic_op.h"

/* Small copies without sigsetjmp (x86-64; not under the sanitizers, whose
 * copies must stay instrumented). A profile of 8-byte messages on shm had
 * a sixth of the sender's time in the sigsetjmp of its one guarded copy.
 * gcopy_small copies with plain loads and stores, and a fault the kernel
 * raises at one of its instructions (between gcopy_begin and gcopy_end)
 * can only be on its two ranges: the handler resumes it at gcopy_fault,
 * which returns -1, as a kernel's exception table resumes a faulting
 * copy_from_user. Nothing is set up before the copy. */
#if defined(__SANITIZE_ADDRESS__)
#define NV_GUARD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NV_GUARD_ASAN 1
#endif
#endif
#if defined(__x86_64__) && !defined(NV_GUARD_TSAN) && !defined(NV_GUARD_ASAN) && !defined(NV_GUARD_NO_FIXUP)
#define NV_GUARD_FIXUP 1
#define GCOPY_SMALL_MAX 128
__asm__(".text\n"
        ".p2align 4\n"
        ".type nv_gcopy_small,@function\n"
        ".globl nv_gcopy_small\n"
        ".hidden nv_gcopy_small\n"
        ".globl nv_gcopy_begin\n"
        ".hidden nv_gcopy_begin\n"
        ".globl nv_gcopy_end\n"
        ".hidden nv_gcopy_end\n"
        ".globl nv_gcopy_fault\n"
        ".hidden nv_gcopy_fault\n"
        "nv_gcopy_small:\n"             /* rdi dst, rsi src, rdx n */
        "nv_gcopy_begin:\n"
        "  cmp $8, %rdx\n"
        "  jb 2f\n"
        "1:mov (%rsi), %rax\n"
        "  mov %rax, (%rdi)\n"
        "  add $8, %rsi\n"
        "  add $8, %rdi\n"
        "  sub $8, %rdx\n"
        "  cmp $8, %rdx\n"
        "  jae 1b\n"
        "2:test %rdx, %rdx\n"
        "  jz 4f\n"
        "3:movzbl (%rsi), %eax\n"
        "  movb %al, (%rdi)\n"
        "  inc %rsi\n"
        "  inc %rdi\n"
        "  dec %rdx\n"
        "  jnz 3b\n"
        "4:\n"
        "nv_gcopy_end:\n"
        "  xor %eax, %eax\n"
        "  ret\n"
        "nv_gcopy_fault:\n"
        "  mov $-1, %eax\n"
        "  ret\n"
        ".size nv_gcopy_small, .-nv_gcopy_small\n");
__attribute__((visibility("hidden"))) int nv_gcopy_small(void *dst, const void *src, size_t n);
extern const char nv_gcopy_begin[] __attribute__((visibility("hidden")));
extern const char nv_gcopy_end[] __attribute__((visibility("hidden")));
extern const char nv_gcopy_fault[] __attribute__((visibility("hidden")));
#endif

/* One thread's guard. Initial-exec: the handler reads it, and other TLS
 * models may call __tls_get_addr, which can allocate (not async-signal-safe). */
struct guard_tls {
    sigjmp_buf env;               /* where a fault returns to */
    volatile sig_atomic_t active; /* a guarded access is under way */
    int fault_sig;                /* the last guarded fault, for the caller's log */
    void *fault_addr;
    uintptr_t lo[2], len[2];      /* the ranges the access touches: faults elsewhere are not ours */
};
static __thread struct guard_tls guard_tls __attribute__((tls_model("initial-exec")));

/* The actions replaced ([0] SIGSEGV, [1] SIGBUS), for the faults that are
 * not ours. Written before our handler is installed (and again only if
 * another thread changed the action in between), read-only afterwards.
 * prev_tsan: the action is ThreadSanitizer's own deadly-signal handler. */
static struct sigaction prev_act[2];
static int prev_tsan[2];

static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static int guard_result = -1;
static atomic_int guard_ready;

/* Gives the fault to what would have had it without us: the previous
 * handler, called as the kernel would have called it, or the default
 * action. */
static void guard_chain(int sig, siginfo_t *info, void *uctx)
{
    const struct sigaction *prev = &prev_act[sig == SIGBUS];
    int saved_errno = errno;
    int from_kernel = info != NULL && info->si_code > 0;
    /* A fault that happens again when the instruction re-executes: a page
     * fault, an alignment check. SI_KERNEL (a general protection fault, but
     * also a SIGSEGV the kernel forces for other reasons) and an
     * action-optional memory error are not certain to. */
    int refaults = from_kernel && info->si_code != SI_KERNEL && !(sig == SIGBUS && info->si_code == BUS_MCEERR_AO);

#ifdef NV_GUARD_TSAN
    if (prev_tsan[sig == SIGBUS]) {
        /* TSan's deadly-signal handler cannot run inside TSan's wrapper of
         * ours: its report allocates, TSan reports that as a call unsafe in
         * a signal handler and dies of a "nested bug" with no stack. Give
         * the signal back to it at the kernel (past TSan's interceptor) and
         * let the fault recur: TSan reports it as it would without us. */
        __sigaction(sig, prev, NULL);
        if (!refaults)
            raise(sig);
        errno = saved_errno;
        return;
    }
#endif
    if (prev->sa_flags & SA_SIGINFO || (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN)) {
        /* What the kernel does when it delivers to a handler: reset a
         * one-shot action, block sa_mask and (without SA_NODEFER) the
         * signal while the handler runs. */
        sigset_t block, saved;
        int masked = 0;
        if (prev->sa_flags & SA_RESETHAND) {
            struct sigaction dfl;
            memset(&dfl, 0, sizeof dfl);
            dfl.sa_handler = SIG_DFL;
            sigaction(sig, &dfl, NULL);
        }
        block = prev->sa_mask;
        if (!(prev->sa_flags & SA_NODEFER))
            sigaddset(&block, sig);
        if (!sigisemptyset(&block))
            masked = pthread_sigmask(SIG_BLOCK, &block, &saved) == 0;
        errno = saved_errno;
        if (prev->sa_flags & SA_SIGINFO)
            prev->sa_sigaction(sig, info, uctx);
        else
            prev->sa_handler(sig);
        if (masked)
            pthread_sigmask(SIG_SETMASK, &saved, NULL);
        errno = saved_errno;
        return;
    }
    if (prev->sa_handler == SIG_IGN && !from_kernel)
        return; /* a SIGSEGV sent by kill() to a process that ignores it */
    /* SIG_DFL, or SIG_IGN for a real fault (which the kernel delivers with
     * the default action anyway): the default action, with the signal's
     * own number and, for a fault, at the faulting instruction (returning
     * re-executes it, and it faults again under SIG_DFL) so that the core
     * dump shows where it happened. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
    if (!refaults)
        raise(sig); /* delivered now, or when the handler returns if the signal is blocked */
    errno = saved_errno;
}

static int guard_ours(const struct guard_tls *g, const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    return a - g->lo[0] < g->len[0] || a - g->lo[1] < g->len[1];
}

/* A guarded fault returns from the handler into guard_resume where we know
 * how to point the interrupted context there; elsewhere (or built with
 * -DNV_GUARD_JUMP_IN_HANDLER, to test that path) the handler jumps. */
#if !defined(NV_GUARD_JUMP_IN_HANDLER) && (defined(__x86_64__) || defined(__aarch64__))
#define NV_GUARD_RESUME 1

/* Where a guarded fault resumes once the handler has returned: on the
 * faulting thread's own stack, with the signal mask and the alternate stack
 * put back by sigreturn, the jump back into the guarded function. */
static __attribute__((noreturn, noinline)) void guard_resume(void)
{
    siglongjmp(guard_tls.env, 1);
}

/* Points the interrupted context at guard_resume, entered as if called
 * there: below the faulting frame (past x86-64's red zone), with the ABI's
 * stack alignment. */
static void guard_redirect(ucontext_t *uc)
{
#if defined(__x86_64__)
    greg_t *r = uc->uc_mcontext.gregs;
    r[REG_RSP] = (greg_t)((((uintptr_t)r[REG_RSP] - 128) & ~(uintptr_t)15) - 8);
    r[REG_RIP] = (greg_t)(uintptr_t)guard_resume;
#else
    mcontext_t *m = &uc->uc_mcontext;
    m->regs[30] = m->pc;
    m->sp &= ~(uint64_t)15;
    m->pc = (uint64_t)(uintptr_t)guard_resume;
#endif
}
#endif

static void guard_handler(int sig, siginfo_t *info, void *uctx)
{
    struct guard_tls *g = &guard_tls;
#ifdef NV_GUARD_FIXUP
    if (uctx != NULL && info != NULL && info->si_code > 0) {
        greg_t *r = ((ucontext_t *)uctx)->uc_mcontext.gregs;
        uintptr_t ip = (uintptr_t)r[REG_RIP];
        if (ip >= (uintptr_t)nv_gcopy_begin && ip < (uintptr_t)nv_gcopy_end) {
            g->fault_sig = sig;
            g->fault_addr = info->si_addr;
            r[REG_RIP] = (greg_t)(uintptr_t)nv_gcopy_fault;
            return;
        }
    }
#endif
    /* Only a fault the kernel raised (si_code > 0: not kill, tgkill or
     * sigqueue, which may target a thread inside a guard) at an address the
     * guarded access touches (not a bug elsewhere in netvm that happens to
     * fault inside the window). */
    if (g->active && info != NULL && info->si_code > 0 && guard_ours(g, info->si_addr)) {
        g->active = 0;
        g->fault_sig = sig;
        g->fault_addr = info->si_addr;
        /* Return from the handler into guard_resume rather than jump out
         * of it: sigreturn then restores what the handler's entry changed,
         * whoever changed it (ThreadSanitizer's wrapper runs handlers with
         * every signal blocked and keeps per-thread signal state; an
         * application's handler that chains to ours runs with its own
         * sa_mask), the alternate stack is left the way the kernel expects
         * (SS_AUTODISARM re-armed), and a sanitizer's longjmp interceptor
         * sees the thread's own stack (ASan's, on an alternate stack,
         * unpoisons the whole thread stack: 350 us a fault). */
#ifdef NV_GUARD_RESUME
        if (uctx != NULL) {
            guard_redirect(uctx);
            return;
        }
#endif
        /* Elsewhere, jump from here. SA_NODEFER and the empty sa_mask leave
         * the mask as it was at the fault when the kernel calls us
         * directly; for the other cases put back the mask the kernel saved
         * in the context (one system call, on the fault path only). */
        if (uctx != NULL)
            pthread_sigmask(SIG_SETMASK, &((ucontext_t *)uctx)->uc_sigmask, NULL);
        siglongjmp(g->env, 1);
    }
    guard_chain(sig, info, uctx);
}

static int guard_install(int sig, struct sigaction *prev, int *is_tsan)
{
    struct sigaction sa, replaced, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    /* Save the previous action before ours can run and read it. */
    if (sigaction(sig, NULL, prev) != 0)
        return -1;
#ifdef NV_GUARD_TSAN
    /* TSan answers with the application's action if it holds one (the
     * kernel then has TSan's wrapper), else with the kernel's, which is
     * TSan's own handler when it is a handler at all. */
    struct sigaction k;
    *is_tsan = (prev->sa_flags & SA_SIGINFO) && __sigaction(sig, NULL, &k) == 0 && (k.sa_flags & SA_SIGINFO) &&
               k.sa_sigaction == prev->sa_sigaction;
#else
    *is_tsan = 0;
#endif
    if (sigaction(sig, &sa, &replaced) != 0)
        return -1;
    if (replaced.sa_handler != prev->sa_handler || replaced.sa_flags != prev->sa_flags)
        *prev = replaced;
    /* A sanitizer that owns the signal (ASAN_OPTIONS=handle_segv=2)
     * accepts sigaction and installs nothing. */
    if (sigaction(sig, NULL, &now) != 0 || !(now.sa_flags & SA_SIGINFO) || now.sa_sigaction != guard_handler)
        return -1;
    return 0;
}

static void guard_init_once(void)
{
    guard_result = guard_install(SIGSEGV, &prev_act[0], &prev_tsan[0]) == 0 &&
                   guard_install(SIGBUS, &prev_act[1], &prev_tsan[1]) == 0 ? 0 : -1;
    if (guard_result == 0)
        atomic_store_explicit(&guard_ready, 1, memory_order_release);
}

int nv_guard_init(void)
{
    pthread_once(&guard_once, guard_init_once);
    return guard_result;
}

/* The fast path's only cost for the lazy initialisation: a relaxed load. */
static inline void guard_ensure(void)
{
    if (__builtin_expect(!atomic_load_explicit(&guard_ready, memory_order_relaxed), 0))
        (void)nv_guard_init();
}

/* Before sigsetjmp: the ranges whose faults are ours ([lo, lo+len), len 0
 * for none). */
#define GUARD_PREPARE(g, a, alen, b, blen) do { \
    assert(!(g)->active && "guards do not nest"); \
    (g)->lo[0] = (uintptr_t)(a); (g)->len[0] = (alen); \
    (g)->lo[1] = (uintptr_t)(b); (g)->len[1] = (blen); \
} while (0)

/* The window: the signal fences keep the compiler from moving the access
 * out of it (the flag is volatile, the access is not). */
#define GUARD_BEGIN(g) do { (g)->active = 1; atomic_signal_fence(memory_order_seq_cst); } while (0)
#define GUARD_END(g)   do { atomic_signal_fence(memory_order_seq_cst); (g)->active = 0; } while (0)

/* After a fault: the handler lowered the flag. Nothing written after
 * sigsetjmp is read here (the locals of the guarded function are
 * indeterminate after the jump). */
static int guard_failed(void)
{
    errno = EFAULT;
    return -1;
}

int nv_guarded_copy(void *dst, const void *src, size_t n)
{
    if (n == 0)
        return 0;
    guard_ensure();
    struct guard_tls *g = &guard_tls;
#ifdef NV_GUARD_FIXUP
    if (n <= GCOPY_SMALL_MAX) {
        assert(!g->active && "guards do not nest");
        if (nv_gcopy_small(dst, src, n) == 0)
            return 0;
        return guard_failed();
    }
#endif
    GUARD_PREPARE(g, dst, n, src, n);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    memcpy(dst, src, n);
    GUARD_END(g);
    return 0;
}

NV_GUARD_PLAIN int nv_guarded_load64(const uint64_t *p, uint64_t *out)
{
    assert(((uintptr_t)p & 7) == 0);
    guard_ensure();
    struct guard_tls *g = &guard_tls;
    GUARD_PREPARE(g, p, 8, 0, 0);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    uint64_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
    GUARD_END(g);
    *out = v;
    return 0;
}

NV_GUARD_PLAIN int nv_guarded_store64(uint64_t *p, uint64_t v)
{
    assert(((uintptr_t)p & 7) == 0);
    guard_ensure();
    struct guard_tls *g = &guard_tls;
    GUARD_PREPARE(g, p, 8, 0, 0);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    __atomic_store_n(p, v, __ATOMIC_RELAXED);
    GUARD_END(g);
    return 0;
}

NV_GUARD_PLAIN int nv_guarded_atomic(uint64_t *w, netvm_atomic_op_t op, uint64_t operand, uint64_t compare,
                                     uint64_t *old)
{
    assert(((uintptr_t)w & 7) == 0);
    guard_ensure();
    struct guard_tls *g = &guard_tls;
    NV_TSAN_RELEASE(w);
    GUARD_PREPARE(g, w, 8, 0, 0);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    uint64_t v = nv_atomic_apply(w, op, operand, compare);
    GUARD_END(g);
    NV_TSAN_ACQUIRE(w);
    *old = v;
    return 0;
}

NV_GUARD_PLAIN int nv_guarded_xchg_release(uint64_t *w, uint64_t v, uint64_t *old)
{
    assert(((uintptr_t)w & 7) == 0);
    guard_ensure();
    struct guard_tls *g = &guard_tls;
    NV_TSAN_RELEASE(w);
    GUARD_PREPARE(g, w, 8, 0, 0);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    uint64_t r = __atomic_exchange_n(w, v, __ATOMIC_RELEASE);
    GUARD_END(g);
    *old = r;
    return 0;
}

NV_GUARD_PLAIN int nv_guarded_fadd_release(uint64_t *w, uint64_t v, uint64_t *old)
{
    assert(((uintptr_t)w & 7) == 0);
    guard_ensure();
    struct guard_tls *g = &guard_tls;
    NV_TSAN_RELEASE(w);
    GUARD_PREPARE(g, w, 8, 0, 0);
    if (sigsetjmp(g->env, 0) != 0)
        return guard_failed();
    GUARD_BEGIN(g);
    uint64_t r = __atomic_fetch_add(w, v, __ATOMIC_RELEASE);
    GUARD_END(g);
    *old = r;
    return 0;
}

void nv_guard_last_fault(int *sig, void **addr)
{
    if (sig != NULL)
        *sig = guard_tls.fault_sig;
    if (addr != NULL)
        *addr = guard_tls.fault_addr;
}
