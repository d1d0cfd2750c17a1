/* Which thread is running: the progress thread marks itself, so lower
 * layers can tell an application thread's polling (a sign the application
 * is active and will pick messages up itself) from the progress thread's. */
#ifndef NV_UTIL_THREAD_H
#define NV_UTIL_THREAD_H

extern _Thread_local int nv_is_progress_thread;

#endif
