/* The Linux primitives the shm link stands on: shared mappings (pidfds,
 * the handle on a peer that tells when it exits and lets us duplicate its
 * memfds and eventfd, are util/pidfd.h's). */
#define _GNU_SOURCE
#include "link/shm/shm_priv.h"
#include "util/hash.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


void *shm_map_fd(int fd, size_t len, int writable)
{
    void *p = mmap(NULL, len, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Processes that can reach each other by shm share the kernel (its boot
 * id), the host name, and the network and pid namespaces: a job spread over
 * network namespaces is treated as spread over machines. */
static unsigned long ns_inode(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

uint64_t nv_shm_host_id(void)
{
    char buf[64] = "";
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        buf[n > 0 ? n : 0] = 0;
        close(fd);
    }
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char both[400];
    snprintf(both, sizeof both, "%s/%s/%lu/%lu", buf, host, ns_inode("/proc/self/ns/net"),
             ns_inode("/proc/self/ns/pid"));
    return nv_hash_str(both);
}
