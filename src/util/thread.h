/* Which thread is running, and in what role, for lower layers that must
 * behave differently: the progress thread marks itself (an application
 * thread's polling is a sign the application picks messages up itself),
 * and a thread running an active-message handler or a continuation marks
 * that it must not wait (a link then queues instead of blocking). */
#ifndef NV_UTIL_THREAD_H
#define NV_UTIL_THREAD_H

extern _Thread_local int nv_is_progress_thread;
extern _Thread_local int nv_in_handler;
/* an application thread taking in arrivals: acknowledgements it owes may
 * wait for the next frame it sends (it calls netvm again soon) */
extern _Thread_local int nv_hold_acks;

#endif
