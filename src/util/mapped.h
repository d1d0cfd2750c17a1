/* Whether a range of this process's address space is mapped. A target that
 * touches exported memory itself (atomics, tcp puts and gets) checks first:
 * memory unmapped behind netvm's back must give NETVM_ERR_FAULT to the
 * initiator, never a crash of the target. */
#ifndef NV_UTIL_MAPPED_H
#define NV_UTIL_MAPPED_H

#include <stdint.h>

int nv_range_mapped(uint64_t addr, uint64_t len);

#endif
