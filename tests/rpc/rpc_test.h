/* Helpers of the RPC tests: the active-message tests' patterns and waits. */
#ifndef NV_TESTS_RPC_TEST_H
#define NV_TESTS_RPC_TEST_H

#include "am/am_test.h"

#include <netvm/rpc.h>

#endif
