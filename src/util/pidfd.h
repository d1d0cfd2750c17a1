/* Process handles (pidfds): a handle on another process that tells when
 * it exits and lets this one duplicate its file descriptors. Debian's
 * headers may predate the syscalls: their numbers are defined here. */
#ifndef NV_UTIL_PIDFD_H
#define NV_UTIL_PIDFD_H

#include <sys/types.h>

/* A pidfd of pid, or -1 with errno set. */
int nv_pidfd_open(pid_t pid);
/* A copy of the process's descriptor fd (needs ptrace access to it). */
int nv_pidfd_getfd(int pidfd, int fd);
/* 1 once the process has exited (a poll that does not wait). */
int nv_pidfd_exited(int pidfd);

#endif
