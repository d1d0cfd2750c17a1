/* The pager's userfaultfd ioctls (uffd.h). */
#include "gmem/uffd.h"

#include <errno.h>

int nv_gm_uffd_copy(int fd, uintptr_t dst, const void *src, size_t len, uint64_t mode)
{
    struct uffdio_copy c = { .dst = dst, .src = (uintptr_t)src, .len = len, .mode = mode };
    if (ioctl(fd, UFFDIO_COPY, &c) == 0)
        return 0;
    return c.copy < 0 ? (int)c.copy : -errno;
}

int nv_gm_uffd_zeropage(int fd, uintptr_t dst, size_t len, uint64_t mode)
{
    struct uffdio_zeropage z = { .range = { dst, len }, .mode = mode };
    if (ioctl(fd, UFFDIO_ZEROPAGE, &z) == 0)
        return 0;
    return z.zeropage < 0 ? (int)z.zeropage : -errno;
}

int nv_gm_uffd_wp(int fd, uintptr_t addr, size_t len, uint64_t mode)
{
    struct uffdio_writeprotect p = { .range = { addr, len }, .mode = mode };
    return ioctl(fd, UFFDIO_WRITEPROTECT, &p) < 0 ? -errno : 0;
}

int nv_gm_uffd_wake(int fd, uintptr_t addr, size_t len)
{
    struct uffdio_range r = { addr, len };
    return ioctl(fd, UFFDIO_WAKE, &r) < 0 ? -errno : 0;
}

int nv_gm_uffd_poison(int fd, uintptr_t addr, size_t len)
{
    struct uffdio_poison p = { .range = { addr, len }, .mode = 0 };
    if (ioctl(fd, UFFDIO_POISON, &p) == 0)
        return 0;
    return p.updated < 0 ? (int)p.updated : -errno;
}

int nv_gm_uffd_move(int fd, uintptr_t dst, uintptr_t src, size_t len)
{
    struct uffdio_move m = { .dst = dst, .src = src, .len = len, .mode = 0 };
    if (ioctl(fd, UFFDIO_MOVE, &m) == 0)
        return 0;
    return m.move < 0 ? (int)m.move : -errno;
}

int nv_gm_uffd_move_run(int fd, uintptr_t dst, uintptr_t src, size_t len, uint64_t mode, size_t *moved)
{
    struct uffdio_move m = { .dst = dst, .src = src, .len = len, .mode = mode };
    if (ioctl(fd, UFFDIO_MOVE, &m) == 0) {
        *moved = len;
        return 0;
    }
    int e = errno;
    *moved = m.move > 0 ? (size_t)m.move : 0;
    return m.move < 0 ? (int)m.move : -e;
}
