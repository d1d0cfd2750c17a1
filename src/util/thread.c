#include "util/thread.h"

_Thread_local int nv_is_progress_thread NV_TLS_IE;
_Thread_local int nv_in_handler NV_TLS_IE;
_Thread_local int nv_hold_acks NV_TLS_IE;
