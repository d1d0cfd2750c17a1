#include "util/thread.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

_Thread_local int nv_is_progress_thread NV_TLS_IE;
_Thread_local int nv_in_handler NV_TLS_IE;
_Thread_local int nv_hold_acks NV_TLS_IE;

_Thread_local int nv_thread_slot_cached NV_TLS_IE = -1;

_Static_assert(NV_THREAD_SLOTS == 64, "the slots taken are one 64-bit word");
static _Atomic uint64_t slots_taken;
static pthread_key_t slot_key;
static pthread_once_t slot_once = PTHREAD_ONCE_INIT;

/* at the thread's exit: a later thread may take the slot (and continue
 * its words: the bit's release here orders this thread's last writes
 * before the next owner's first) */
static void slot_release(void *v)
{
    int i = (int)(intptr_t)v - 1;
    atomic_fetch_and_explicit(&slots_taken, ~(1ull << i), memory_order_release);
}

static void slot_key_make(void) { pthread_key_create(&slot_key, slot_release); }

int nv_thread_slot_take(void)
{
    pthread_once(&slot_once, slot_key_make);
    uint64_t t = atomic_load_explicit(&slots_taken, memory_order_acquire);
    int slot = NV_THREAD_SLOTS;
    while (t != ~0ull) {
        int i = __builtin_ctzll(~t);
        if (atomic_compare_exchange_weak_explicit(&slots_taken, &t, t | 1ull << i, memory_order_acq_rel,
                                                  memory_order_acquire)) {
            slot = i;
            pthread_setspecific(slot_key, (void *)(intptr_t)(i + 1));
            break;
        }
    }
    nv_thread_slot_cached = slot;
    return slot;
}
