/* Guarded accesses: a copy that survives the fault.
 *
 * The target of a remote operation (the tcp link's receive path, core's
 * active-message handlers) reads and writes application memory that the
 * application may unmap, mprotect or truncate at any moment behind netvm's
 * back. Asking the kernel first (msync, mincore) costs a system call per
 * access and still races: the range can go between the check and the copy.
 * These functions make the access itself the check: a SIGSEGV (unmapped,
 * protection) or SIGBUS (a truncated file mapping, a poisoned userfaultfd
 * page, a hardware memory error) taken by the guarded instruction returns -1
 * to the caller instead of killing the process, and the fast path makes no
 * system call (a sigsetjmp that does not save the mask, and two stores to a
 * thread-local flag).
 *
 * How: nv_guard_init installs process-wide SIGSEGV and SIGBUS handlers. Each
 * guarded function records a jump buffer (sigsetjmp without the mask: no
 * system call) and the ranges it touches in thread-local storage, and
 * raises a thread-local "active" flag around the access. A fault raised by
 * the kernel (si_code > 0) on this thread while the flag is up, at an
 * address inside those ranges, is ours: the handler lowers the flag and
 * returns into a function that siglongjmps back into the guarded function
 * (on x86-64 and arm64; elsewhere the handler jumps itself), which returns
 * -1 with errno EFAULT. On x86-64 (outside the sanitizer builds) a copy
 * of at most 128 bytes sets nothing up at all: it runs in a routine of
 * plain loads and stores, and the handler, seeing the fault at one of that
 * routine's instructions, resumes it at its failure exit (the way a kernel's
 * exception table resumes a faulting copy_from_user). Every other SIGSEGV or SIGBUS (outside a guard, at
 * another address, or sent by kill/tgkill) is passed on as the kernel would
 * have delivered it without netvm: to the handler that was installed before
 * nv_guard_init (an application's, or a sanitizer's, which then reports
 * it), or, if that was SIG_DFL or SIG_IGN, to the default action (a core
 * dump with the right signal, at the faulting instruction).
 *
 * Rules and limits:
 * - Guards do not nest: a guarded function is a leaf (nothing inside calls
 *   another one), and none runs in a signal handler that may interrupt
 *   one; debug builds assert it.
 * - An application that installs its own SIGSEGV or SIGBUS handler after
 *   nv_guard_init turns the guards off unless that handler chains to the
 *   one it replaced, passing on the context it was given (not a copy): a
 *   fault inside a guard then reaches the application's handler and, by
 *   default, kills the process as it did before this module existed.
 * - A fault inside a guard is never offered to the previous handler, so
 *   memory that the application protects and repairs in its own SIGSEGV
 *   handler (mprotect-based dirty tracking, a user-level DSM, a garbage
 *   collector's barriers) fails netvm's access with -1 instead of being
 *   repaired: there is no way to ask a handler whether it would have.
 * - The thread-local state is initial-exec TLS (the handler reads it, and
 *   only initial-exec is safe to read in a signal handler): a libnetvm.so
 *   loaded with dlopen needs about 250 bytes of the static TLS surplus
 *   for it (344 bytes for all of the library's thread-locals, which are
 *   initial-exec too: util/thread.h).
 * - Under ThreadSanitizer the guarded words (load64, store64 and the
 *   atomics) are accessed uninstrumented, because TSan's atomics hold its
 *   internal locks across the access and a fault that jumps out would leave
 *   them held (the next TSan atomic on the word deadlocks); the
 *   synchronisation of the release and seq_cst operations is told to TSan
 *   with __tsan_release and __tsan_acquire instead, and races on those
 *   words are not reported. Copies stay instrumented.
 *
 * Every guarded function returns 0, or -1 with errno EFAULT if the access
 * faulted; nv_guard_last_fault says how. */
#ifndef NV_UTIL_GUARD_H
#define NV_UTIL_GUARD_H

#include <netvm/netvm.h>
#include <stddef.h>
#include <stdint.h>

/* Installs the SIGSEGV and SIGBUS handlers, once per process (pthread_once;
 * later calls return the first call's result), with SA_SIGINFO | SA_ONSTACK
 * | SA_NODEFER and an empty sa_mask, saving the actions they replace for the
 * faults that are not netvm's. Returns 0, or -1 if a handler could not be
 * installed (a sanitizer that owns SIGSEGV, e.g. ASAN_OPTIONS=handle_segv=2).
 * The guarded functions call it themselves the first time (and, if it
 * failed, run unguarded); calling it early keeps the sigaction calls off the
 * data path and lets the caller report a failure. */
int nv_guard_init(void);

/* memcpy(dst, src, n), either side of which may fault. 0, or -1 if it
 * faulted; then a prefix of the bytes, of unspecified length, may have been
 * copied. The ranges must not overlap. */
int nv_guarded_copy(void *dst, const void *src, size_t n);

/* One 8-byte load / store, single-copy atomic (relaxed); p 8-aligned. */
int nv_guarded_load64(const uint64_t *p, uint64_t *out);
int nv_guarded_store64(uint64_t *p, uint64_t v);

/* A netvm atomic on the 8-aligned word w, with the semantics of
 * nv_atomic_apply (util/atomic_op.h; sequentially consistent): *old is the
 * word's value before the operation, written only when 0 is returned. An op
 * outside netvm_atomic_op_t leaves the word alone and gives *old = 0, as
 * nv_atomic_apply does (callers check op first). */
int nv_guarded_atomic(uint64_t *w, netvm_atomic_op_t op, uint64_t operand, uint64_t compare, uint64_t *old);

/* A signal's update of the word w: exchange / fetch-add with release
 * ordering, so a waiter that reads the new value with acquire sees the data
 * written before it. *old as above. */
int nv_guarded_xchg_release(uint64_t *w, uint64_t v, uint64_t *old);
int nv_guarded_fadd_release(uint64_t *w, uint64_t v, uint64_t *old);

/* The signal (SIGSEGV or SIGBUS) and faulting address of this thread's last
 * guarded fault, for a log line; *sig is 0 if there was none. Either pointer
 * may be NULL. */
void nv_guard_last_fault(int *sig, void **addr);

#endif
