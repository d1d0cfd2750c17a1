/* Process handles (pidfd.h). */
#define _GNU_SOURCE
#include "util/pidfd.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

int nv_pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

int nv_pidfd_getfd(int pidfd, int fd) { return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); }

int nv_pidfd_exited(int pidfd)
{
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    return poll(&p, 1, 0) > 0;
}
