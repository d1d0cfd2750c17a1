#include "util/thread.h"

_Thread_local int nv_is_progress_thread;
_Thread_local int nv_in_handler;
_Thread_local int nv_hold_acks;
