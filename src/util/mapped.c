#define _GNU_SOURCE
#include "util/mapped.h"

#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int nv_range_mapped(uint64_t addr, uint64_t len)
{
    if (len == 0)
        return 1;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(page - 1);
    size_t span = (size_t)((addr + len - start + page - 1) / page * page);
    size_t pages = span / page;
    unsigned char stackvec[256];
    unsigned char *vec = pages <= sizeof stackvec ? stackvec : malloc(pages);
    if (!vec)
        return 0;
    int ok = mincore((void *)start, span, vec) == 0;
    if (vec != stackvec)
        free(vec);
    return ok;
}
