/* Which thread is running, and in what role, for lower layers that must
 * behave differently: the progress thread marks itself (an application
 * thread's polling is a sign the application picks messages up itself),
 * and a thread running an active-message handler or a continuation marks
 * that it must not wait (a link then queues instead of blocking). */
#ifndef NV_UTIL_THREAD_H
#define NV_UTIL_THREAD_H

/* The library's thread-locals on the data path are initial-exec: one load
 * at a fixed offset from the thread pointer, where the dynamic models cost
 * a call each (4% of a 0-byte round trip's own work went to
 * _dl_tlsdesc_return). They take a few bytes of the static TLS
 * block, whose surplus glibc keeps for libraries loaded with dlopen (the
 * guards already take about 250 bytes of it: util/guard.h). */
#define NV_TLS_IE __attribute__((tls_model("initial-exec")))

extern _Thread_local int nv_is_progress_thread NV_TLS_IE;
extern _Thread_local int nv_in_handler NV_TLS_IE;
/* an application thread taking in arrivals: acknowledgements it owes may
 * wait for the next frame it sends (it calls netvm again soon) */
extern _Thread_local int nv_hold_acks NV_TLS_IE;

/* The calling thread's slot: a number below NV_THREAD_SLOTS that no other
 * live thread of the process holds, taken at its first call and given
 * back when the thread exits; NV_THREAD_SLOTS once all are held (such
 * threads share that last one). A word per slot is then written by one
 * thread only, with plain stores where a shared word needs a locked
 * instruction: the shm link's revocation-fence marks and push records,
 * core's message counters. */
#define NV_THREAD_SLOTS 64

extern _Thread_local int nv_thread_slot_cached NV_TLS_IE;   /* -1: none yet */
int nv_thread_slot_take(void);

static inline int nv_thread_slot(void)
{
    int s = nv_thread_slot_cached;
    return s >= 0 ? s : nv_thread_slot_take();
}

#endif
