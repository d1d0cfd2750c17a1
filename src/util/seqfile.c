/* Reading a statistics file rewritten in place (seqfile.h). */
#include "util/seqfile.h"

#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int nv_seqfile_read(const char *path, void *out, size_t size, size_t seq_off, uint64_t magic)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -1;
    /* a mapping beyond the file's end faults: look at the size first */
    off_t end = lseek(fd, 0, SEEK_END);
    void *p = end >= (off_t)size ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    const uint64_t *mw = p, *seq = (const uint64_t *)((const char *)p + seq_off);
    int rc = -1;
    if (__atomic_load_n(mw, __ATOMIC_ACQUIRE) == magic) {
        for (int tries = 0; tries < 1000 && rc != 0; tries++) {
            uint64_t s0 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
            if (s0 & 1) {
                sched_yield();
                continue;
            }
            memcpy(out, p, size);
            __atomic_thread_fence(__ATOMIC_SEQ_CST);
            if (__atomic_load_n(seq, __ATOMIC_ACQUIRE) == s0)
                rc = 0;
        }
    }
    munmap(p, size);
    return rc;
}
