/* userfaultfd for every user in the library (the pager of network memory,
 * the registration cache's memory monitor): opening it (syscall, else
 * /dev/userfaultfd), the features the running kernel offers (Debian's
 * headers are older than the kernel, so the newer constants are defined
 * here and every feature is detected from UFFDIO_API at run time), and
 * registering a range. Each call returns 0 (or an fd) or -errno so no
 * caller reads errno through a library call. */
#ifndef NV_UTIL_UFFD_H
#define NV_UTIL_UFFD_H

#include <linux/userfaultfd.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif
#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef _UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
struct uffdio_poison {
    struct uffdio_range range;
    __u64 mode;
    __s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
#endif
#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
struct uffdio_move {
    __u64 dst, src, len, mode;
    __s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif
#ifndef UFFDIO_MOVE_MODE_DONTWAKE
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif

/* What this kernel offers (UFFD_FEATURE_* bits from UFFDIO_API). */
struct nv_uffd_caps {
    uint64_t features;
    int      via_dev;        /* opened through /dev/userfaultfd */
};

/* Why userfaultfd cannot be opened, in words a user can act on, from the
 * two attempts' errnos and the facts that decide them (split out so the
 * diagnosis is tested without changing the machine). */
struct nv_uffd_why {
    int  sys_errno;          /* userfaultfd(2); 0 if it worked */
    int  dev_errno;          /* open(/dev/userfaultfd) or its ioctl; 0 if it worked */
    int  euid;
    int  unprivileged;       /* vm.unprivileged_userfaultfd; -1 unreadable */
    int  dev_exists;
};
void nv_uffd_explain(const struct nv_uffd_why *w, char *buf, size_t cap);

/* Open a nonblocking, close-on-exec uffd with the features asked for that
 * the kernel has (the rest are dropped; *caps says what is in force).
 * -errno, with the explanation in why (cap bytes) when none can be had. */
int nv_uffd_open(uint64_t want, struct nv_uffd_caps *caps, char *why, size_t cap);

int nv_uffd_register(int fd, void *addr, size_t len, uint64_t mode);

#endif
