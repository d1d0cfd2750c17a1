/* Opening userfaultfd and registering a range (uffd.h). */
#include "util/uffd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int read_sysctl(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char b[16] = {0};
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    return n > 0 ? b[0] - '0' : -1;
}

void nv_uffd_explain(const struct nv_uffd_why *w, char *buf, size_t cap)
{
    if (w->sys_errno == ENOSYS && (!w->dev_exists || w->dev_errno == ENOENT || w->dev_errno == ENODEV)) {
        snprintf(buf, cap, "this kernel has no userfaultfd (userfaultfd(2): ENOSYS, no /dev/userfaultfd): "
                           "a kernel built with CONFIG_USERFAULTFD is needed");
        return;
    }
    char sys[160], dev[200];
    if (w->sys_errno == EPERM && w->euid != 0 && w->unprivileged == 0)
        snprintf(sys, sizeof sys, "userfaultfd(2) refused: not root and vm.unprivileged_userfaultfd=0 "
                                  "(sysctl -w vm.unprivileged_userfaultfd=1)");
    else if (w->sys_errno == EPERM)
        snprintf(sys, sizeof sys, "userfaultfd(2) refused (EPERM%s)",
                 w->euid != 0 ? ": not root and no CAP_SYS_PTRACE" : ": a seccomp or LSM policy");
    else
        snprintf(sys, sizeof sys, "userfaultfd(2) failed: %s", strerror(w->sys_errno));
    if (!w->dev_exists)
        snprintf(dev, sizeof dev, "/dev/userfaultfd does not exist (kernel older than 6.1 or not created)");
    else if (w->dev_errno == EACCES || w->dev_errno == EPERM)
        snprintf(dev, sizeof dev, "no read-write access to /dev/userfaultfd (give this user access, e.g. a "
                                  "group owning it with mode 0660)");
    else
        snprintf(dev, sizeof dev, "/dev/userfaultfd failed: %s", strerror(w->dev_errno));
    snprintf(buf, cap, "no userfaultfd for this process: %s; %s", sys, dev);
}

static int raw_open(int *via_dev, struct nv_uffd_why *w)
{
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        *via_dev = 0;
        return fd;
    }
    w->sys_errno = errno;
    int dfd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dfd < 0) {
        w->dev_errno = errno;
        w->dev_exists = errno != ENOENT;
        return -1;
    }
    w->dev_exists = 1;
    fd = ioctl(dfd, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        w->dev_errno = errno;
    close(dfd);
    *via_dev = 1;
    return fd;
}

int nv_uffd_open(uint64_t want, struct nv_uffd_caps *caps, char *why, size_t cap)
{
    struct nv_uffd_why w = { .euid = (int)geteuid(), .dev_exists = 1,
                                .unprivileged = read_sysctl("/proc/sys/vm/unprivileged_userfaultfd") };
    /* UFFDIO_API takes effect once per fd: probe what the kernel has on a
     * first fd, then ask for the usable subset on a second */
    int via_dev = 0;
    int probe = raw_open(&via_dev, &w);
    if (probe < 0) {
        nv_uffd_explain(&w, why, cap);
        return -(w.dev_errno ? w.dev_errno : w.sys_errno);
    }
    struct uffdio_api api = { .api = UFFD_API, .features = 0 };
    if (ioctl(probe, UFFDIO_API, &api) < 0) {
        int e = errno;
        close(probe);
        snprintf(why, cap, "UFFDIO_API failed: %s", strerror(e));
        return -e;
    }
    close(probe);
    uint64_t have = api.features;
    int fd = raw_open(&via_dev, &w);
    if (fd < 0) {
        nv_uffd_explain(&w, why, cap);
        return -(w.dev_errno ? w.dev_errno : w.sys_errno);
    }
    api = (struct uffdio_api){ .api = UFFD_API, .features = want & have };
    if (ioctl(fd, UFFDIO_API, &api) < 0) {
        int e = errno;
        close(fd);
        snprintf(why, cap, "UFFDIO_API with features 0x%llx failed: %s", (unsigned long long)(want & have),
                 strerror(e));
        return -e;
    }
    caps->features = want & have;
    caps->via_dev = via_dev;
    return fd;
}

int nv_uffd_register(int fd, void *addr, size_t len, uint64_t mode)
{
    struct uffdio_register r = { .range = { (uintptr_t)addr, len }, .mode = mode };
    return ioctl(fd, UFFDIO_REGISTER, &r) < 0 ? -errno : 0;
}

