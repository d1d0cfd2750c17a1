/* The semantics of every netvm atomic, in one place: the shm link applies it
 * to mapped memory and the target's progress engine to its own. */
#ifndef NV_UTIL_ATOMIC_OP_H
#define NV_UTIL_ATOMIC_OP_H

#include <netvm/netvm.h>
#include <stdint.h>

/* Returns the word's value before the operation. */
static inline uint64_t nv_atomic_apply(uint64_t *w, netvm_atomic_op_t op, uint64_t operand, uint64_t compare)
{
    switch (op) {
    case NETVM_AOP_ADD:
    case NETVM_AOP_FADD:
        return __atomic_fetch_add(w, operand, __ATOMIC_SEQ_CST);
    case NETVM_AOP_SWAP:
        return __atomic_exchange_n(w, operand, __ATOMIC_SEQ_CST);
    case NETVM_AOP_CSWAP: {
        uint64_t old = compare;
        __atomic_compare_exchange_n(w, &old, operand, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
        return old;
    }
    case NETVM_AOP_FCAA: {
        uint64_t old = __atomic_load_n(w, __ATOMIC_RELAXED);
        while (old <= compare &&
               !__atomic_compare_exchange_n(w, &old, old + operand, 1, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
            ;
        return old;
    }
    default:
        return 0;
    }
}

#endif
