#define _GNU_SOURCE
#include "util/membarrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

_Atomic int nv_membarrier_registered = -1;   /* -1: not tried; 0: no; 1: yes */

int nv_membarrier_register(void)
{
    int r = atomic_load(&nv_membarrier_registered);
    if (r < 0) {
        long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
        r = cmds >= 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
            syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0) == 0;
        atomic_store(&nv_membarrier_registered, r);
    }
    return r ? 0 : -1;
}

int nv_membarrier_global(void)
{
    return (int)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0);
}
