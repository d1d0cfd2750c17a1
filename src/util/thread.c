#include "util/thread.h"

_Thread_local int nv_is_progress_thread;
