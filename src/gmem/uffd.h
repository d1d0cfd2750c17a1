/* userfaultfd for the pager: the few ioctls it issues beyond opening and
 * registering (util/uffd.h), each returning 0 or -errno so the fault path
 * never reads errno through a library call. */
#ifndef NV_GMEM_UFFD_H
#define NV_GMEM_UFFD_H

#include "util/uffd.h"

int nv_gm_uffd_copy(int fd, uintptr_t dst, const void *src, size_t len, uint64_t mode);
int nv_gm_uffd_zeropage(int fd, uintptr_t dst, size_t len, uint64_t mode);
/* mode WP never wakes (the kernel refuses WP with DONTWAKE) */
int nv_gm_uffd_wp(int fd, uintptr_t addr, size_t len, uint64_t mode);
int nv_gm_uffd_wake(int fd, uintptr_t addr, size_t len);
int nv_gm_uffd_move(int fd, uintptr_t dst, uintptr_t src, size_t len);
/* Move a run of pages with one ioctl (the kernel flushes the TLB once per
 * call, not once per page): 0 when all of len moved, else *moved < len bytes
 * went and -errno (-EAGAIN when some went: the failing page's own reason is
 * learnt by moving it alone). */
int nv_gm_uffd_move_run(int fd, uintptr_t dst, uintptr_t src, size_t len, uint64_t mode, size_t *moved);
int nv_gm_uffd_poison(int fd, uintptr_t addr, size_t len);

#endif
