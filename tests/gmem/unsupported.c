/* No userfaultfd: netvm_gmem_map fails with NETVM_ERR_UNSUPPORTED and the
 * log says why. For real: a child process drops to an unprivileged user
 * (when this runs as root and vm.unprivileged_userfaultfd is 0 and
 * /dev/userfaultfd is root's only), and its log is read back. And the
 * diagnosis itself, for the cases this machine cannot arrange. */
#include "gmem_test.h"
#include "gmem/uffd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void expect(const struct nv_uffd_why *w, const char *want)
{
    char buf[512];
    nv_uffd_explain(w, buf, sizeof buf);
    if (!strstr(buf, want))
        FAILF("explanation \"%s\" does not say \"%s\"", buf, want);
    printf("unsupported: \"%s\"\n", buf);
}

int main(void)
{
    expect(&(struct nv_uffd_why){ .sys_errno = EPERM, .dev_errno = EACCES, .euid = 1000, .unprivileged = 0,
                                     .dev_exists = 1 },
           "not root and vm.unprivileged_userfaultfd=0");
    expect(&(struct nv_uffd_why){ .sys_errno = EPERM, .dev_errno = EACCES, .euid = 1000, .unprivileged = 0,
                                     .dev_exists = 1 },
           "no read-write access to /dev/userfaultfd");
    expect(&(struct nv_uffd_why){ .sys_errno = ENOSYS, .dev_errno = ENOENT, .euid = 0, .unprivileged = -1,
                                     .dev_exists = 0 },
           "this kernel has no userfaultfd");
    expect(&(struct nv_uffd_why){ .sys_errno = EPERM, .dev_errno = ENOENT, .euid = 1000, .unprivileged = 0,
                                     .dev_exists = 0 },
           "/dev/userfaultfd does not exist");

    struct stat st;
    int sysctl = open("/proc/sys/vm/unprivileged_userfaultfd", O_RDONLY);
    char v = '1';
    if (sysctl >= 0) {
        if (read(sysctl, &v, 1) != 1)
            v = '1';
        close(sysctl);
    }
    if (geteuid() != 0 || v != '0' || stat("/dev/userfaultfd", &st) != 0 || (st.st_mode & 0006)) {
        printf("unsupported: the unprivileged case cannot be arranged here (needs root, "
               "vm.unprivileged_userfaultfd=0, /dev/userfaultfd closed to others): diagnosis checked only\n");
        printf("unsupported: ok\n");
        return 0;
    }
    int err[2];
    CHECK(pipe(err) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(err[1], 2);
        if (setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        setenv("NETVM_GMEM_STORE", "local", 1);
        netvm_gmem_opts_t o = { .budget = 1 << 20 };
        netvm_gmem_t *g;
        void *a;
        netvm_status_t s = netvm_gmem_map(NULL, 1 << 22, &o, &g, &a);
        _exit(s == NETVM_ERR_UNSUPPORTED ? 0 : 4);
    }
    close(err[1]);
    char log[2048] = { 0 };
    size_t got = 0;
    ssize_t n;
    while (got < sizeof log - 1 && (n = read(err[0], log + got, sizeof log - 1 - got)) > 0)
        got += (size_t)n;
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    printf("unsupported: as user 65534: NETVM_ERR_UNSUPPORTED, logged: %s", log);
    CHECK(strstr(log, "not root and vm.unprivileged_userfaultfd=0"));
    CHECK(strstr(log, "/dev/userfaultfd"));
    printf("unsupported: ok\n");
    return 0;
}
