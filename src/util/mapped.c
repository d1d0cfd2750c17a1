#define _GNU_SOURCE
#include "util/mapped.h"

#include <sys/mman.h>
#include <unistd.h>

int nv_range_mapped(uint64_t addr, uint64_t len)
{
    if (len == 0)
        return 1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1);
    size_t span = (size_t)((addr + len - start + page - 1) / page * page);
    /* msync(MS_ASYNC) walks the mappings and fails with ENOMEM where the
     * range has a hole, and does nothing else (no write-back since Linux
     * 2.6.19): the question mincore answers, without its walk of the page
     * tables or a vector to fill (a fifth of mincore's cost here, on the
     * tcp link's path for every put and get it serves) */
    return msync((void *)start, span, MS_ASYNC) == 0;
}
