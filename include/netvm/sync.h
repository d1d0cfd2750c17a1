/*
 * netvm synchronisation: remote locks, reader-writer locks, counting
 * semaphores, wait queues, monitors and barriers over any set of peers
 * (NetVM's Chapter 8 idioms on netvm's remote atomics; EXTOLL's
 * fetch-compare-and-add for the reader-writer lock and the semaphore).
 *
 * Creation: every object lives at a home peer. The home creates it under a
 * name (netvm_*_create: the object's words are netvm_alloc_shared memory
 * exported as "nvsync:<name>"); any peer then opens it by (home, name)
 * (netvm_*_open; NETVM_ERR_NOTFOUND until the home has created it, so
 * synchronise first, e.g. with netvm_barrier). The home uses the handle
 * create gave it like any other. netvm_*_close drops a handle; at the home
 * it also destroys the object: its waiters are woken with
 * NETVM_ERR_REVOKED and later operations by other peers fail.
 *
 * Waiting: a waiter never polls the network. It spins a little on a word
 * of its own process, serving netvm's progress itself, then sleeps; the
 * peer that lets it go (the lock's releaser, the home of a semaphore, wait
 * queue or barrier) sends it one one-way message.
 *
 * Failure (no call hangs): a waiter looks every NETVM_SYNC_CHECK_MS at
 * the peers it depends on. A lock whose holder (or a waiter ahead in the
 * queue) died is marked broken: that waiter, every later one and every
 * later acquire fail with NETVM_ERR_PEER, for ever. A dead home fails
 * every operation on its objects with NETVM_ERR_PEER (or NETVM_ERR_TIMEOUT
 * if it stops answering). A barrier fails with NETVM_ERR_PEER on every
 * member once a member or the home died.
 *
 * Threads: every call is safe at NETVM_THREAD_MULTIPLE, several threads
 * may use one handle at once (each acquire is released by the thread that
 * made it). Blocking calls must not be made inside an active-message
 * handler or continuation (NETVM_ERR_STATE).
 *
 * Every function returns NETVM_OK or an error; NULL or invalid arguments
 * give NETVM_ERR_INVAL. Names are at most NETVM_SYNC_NAME_MAX bytes.
 */
#ifndef NETVM_SYNC_H
#define NETVM_SYNC_H

#include <netvm/netvm.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NETVM_SYNC_NAME_MAX 48

typedef struct netvm_lock     netvm_lock_t;
typedef struct netvm_rwlock   netvm_rwlock_t;
typedef struct netvm_sem      netvm_sem_t;
typedef struct netvm_waitq    netvm_waitq_t;
typedef struct netvm_monitor  netvm_monitor_t;
typedef struct netvm_gbarrier netvm_gbarrier_t;

/* --- queue lock (MCS) ----------------------------------------------------
 * Fair: FIFO in the order acquirers swapped themselves into the tail word
 * at the home. Uncontended acquire + release: two atomics at the home
 * (swap, compare-swap). Contended: the releaser hands the lock to its
 * successor with one one-way message. Operations issued inside the
 * critical section must be complete before release (blocking calls are;
 * wait for nonblocking ones or netvm_flush). */
netvm_status_t netvm_lock_create(netvm_ctx_t *ctx, const char *name, netvm_lock_t **lock);
netvm_status_t netvm_lock_open(netvm_ctx_t *ctx, int home, const char *name, netvm_lock_t **lock);
/* Blocks until held. NETVM_ERR_PEER: the lock is broken (a holder or a
 * waiter ahead died) or the home is dead. */
netvm_status_t netvm_lock_acquire(netvm_lock_t *lock);
/* NETVM_ERR_STATE if this thread does not hold it. May wait (briefly) for a
 * successor that has swapped itself in to link itself. */
netvm_status_t netvm_lock_release(netvm_lock_t *lock);
netvm_status_t netvm_lock_close(netvm_lock_t *lock);

/* --- reader-writer lock (one word, fetch-compare-and-add) ----------------
 * Readers share, writers exclude. A reader enters with one
 * fetch-compare-and-add (add 1 iff no writer is registered) and leaves
 * with one fetch-and-add. A writer first takes a queue lock (FIFO among
 * writers and the readers that arrived while a writer was registered),
 * then registers in the word: from then on new readers queue behind it, so
 * a stream of readers cannot starve a writer; the last reader to leave
 * wakes it with one message. Readers queued behind a writer enter in
 * order after it, so neither side starves. A reader that dies while
 * reading is not detected (the word does not name its readers): a writer
 * then waits for it until the home closes the lock. */
netvm_status_t netvm_rwlock_create(netvm_ctx_t *ctx, const char *name, netvm_rwlock_t **rw);
netvm_status_t netvm_rwlock_open(netvm_ctx_t *ctx, int home, const char *name, netvm_rwlock_t **rw);
netvm_status_t netvm_rwlock_rdlock(netvm_rwlock_t *rw);
/* NETVM_ERR_STATE when no reader holds the lock (an unlock by a thread
 * that holds none goes unseen while others read). */
netvm_status_t netvm_rwlock_rdunlock(netvm_rwlock_t *rw);
netvm_status_t netvm_rwlock_wrlock(netvm_rwlock_t *rw);
netvm_status_t netvm_rwlock_wrunlock(netvm_rwlock_t *rw);
netvm_status_t netvm_rwlock_close(netvm_rwlock_t *rw);

/* --- counting semaphore ---------------------------------------------------
 * The count is one word at the home. wait takes a unit with one
 * fetch-compare-and-add when one is free and nobody queues; otherwise it
 * queues at the home (FIFO) and sleeps until a post hands it a unit.
 * post is one fetch-and-add (plus a one-way message to the home when
 * waiters queue). initial < 2^62. */
netvm_status_t netvm_sem_create(netvm_ctx_t *ctx, const char *name, uint64_t initial, netvm_sem_t **sem);
netvm_status_t netvm_sem_open(netvm_ctx_t *ctx, int home, const char *name, netvm_sem_t **sem);
netvm_status_t netvm_sem_wait(netvm_sem_t *sem);
/* NETVM_ERR_AGAIN instead of waiting. */
netvm_status_t netvm_sem_trywait(netvm_sem_t *sem);
netvm_status_t netvm_sem_post(netvm_sem_t *sem);
/* The count now (a snapshot; 0 while waiters queue). */
netvm_status_t netvm_sem_value(netvm_sem_t *sem, uint64_t *value);
netvm_status_t netvm_sem_close(netvm_sem_t *sem);

/* --- wait queue ------------------------------------------------------------
 * A FIFO of sleeping peers at the home. A signal wakes the oldest waiter
 * queued when the home handles it; one with nobody queued is lost (as a
 * condition variable's): use a monitor for predicates. Each woken waiter
 * costs the home one one-way message. */
netvm_status_t netvm_waitq_create(netvm_ctx_t *ctx, const char *name, netvm_waitq_t **wq);
netvm_status_t netvm_waitq_open(netvm_ctx_t *ctx, int home, const char *name, netvm_waitq_t **wq);
/* Queue at the home, then sleep until signalled (or the queue is closed:
 * NETVM_ERR_REVOKED). */
netvm_status_t netvm_waitq_wait(netvm_waitq_t *wq);
/* Wake the oldest waiter / every waiter; *woken (may be NULL) = how many
 * were queued and woken. Blocks for one round trip to the home. */
netvm_status_t netvm_waitq_signal(netvm_waitq_t *wq, unsigned *woken);
netvm_status_t netvm_waitq_broadcast(netvm_waitq_t *wq, unsigned *woken);
netvm_status_t netvm_waitq_close(netvm_waitq_t *wq);

/* --- monitor ---------------------------------------------------------------
 * A queue lock plus ncond condition queues (Mesa semantics: a woken waiter
 * re-acquires the lock and must re-check its predicate). wait queues the
 * caller on cond at the home before it releases the lock, so a signal made
 * by the next holder is never lost. 1 <= ncond <= 64. */
netvm_status_t netvm_monitor_create(netvm_ctx_t *ctx, const char *name, unsigned ncond, netvm_monitor_t **mon);
netvm_status_t netvm_monitor_open(netvm_ctx_t *ctx, int home, const char *name, netvm_monitor_t **mon);
netvm_status_t netvm_monitor_enter(netvm_monitor_t *mon);
netvm_status_t netvm_monitor_exit(netvm_monitor_t *mon);
/* Holding the monitor: release it, sleep on cond, re-acquire. */
netvm_status_t netvm_monitor_wait(netvm_monitor_t *mon, unsigned cond);
netvm_status_t netvm_monitor_signal(netvm_monitor_t *mon, unsigned cond, unsigned *woken);
netvm_status_t netvm_monitor_broadcast(netvm_monitor_t *mon, unsigned cond, unsigned *woken);
netvm_status_t netvm_monitor_close(netvm_monitor_t *mon);

/* --- barrier over a set of peers --------------------------------------------
 * peers: the n members (distinct peer ids of the home's view; the home
 * need not be one). Each member opens it and calls wait; a call returns
 * once all n have called it in the same round; rounds repeat. A
 * non-member's wait fails with NETVM_ERR_RANK. Members must be job ranks
 * or peers that every member names by the same id. */
netvm_status_t netvm_gbarrier_create(netvm_ctx_t *ctx, const char *name, const int *peers, unsigned n,
                                     netvm_gbarrier_t **bar);
netvm_status_t netvm_gbarrier_open(netvm_ctx_t *ctx, int home, const char *name, netvm_gbarrier_t **bar);
netvm_status_t netvm_gbarrier_wait(netvm_gbarrier_t *bar);
netvm_status_t netvm_gbarrier_close(netvm_gbarrier_t *bar);

#ifdef __cplusplus
}
#endif
#endif
