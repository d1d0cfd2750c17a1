/* Reading a statistics file (stats_file.h); the tool links this. */
#include "preload/stats_file.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int nvp_stats_read(const char *path, struct nvp_stats_file *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    void *p = mmap(NULL, sizeof *out, PROT_READ, MAP_SHARED, fd, 0);
    off_t size = lseek(fd, 0, SEEK_END);
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    int rc = -1;
    const struct nvp_stats_file *f = p;
    if (size >= (off_t)sizeof *out && __atomic_load_n(&f->magic, __ATOMIC_ACQUIRE) == NVP_STATS_MAGIC) {
        for (int tries = 0; tries < 1000 && rc != 0; tries++) {
            uint64_t s0 = __atomic_load_n(&f->seq, __ATOMIC_ACQUIRE);
            if (s0 & 1) {
                sched_yield();
                continue;
            }
            memcpy(out, f, sizeof *out);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(&f->seq, __ATOMIC_ACQUIRE) == s0)
                rc = 0;
        }
    }
    munmap(p, sizeof *out);
    return rc;
}
