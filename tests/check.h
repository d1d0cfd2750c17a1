/* The test harness: CHECK-style assertions that name the failing expression,
 * the rank and the line, and exit non-zero so ctest and the launcher see it. */
#ifndef NV_TESTS_CHECK_H
#define NV_TESTS_CHECK_H

#include <netvm/netvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int check_rank = -1;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf(stderr, "FAIL rank %d %s:%d: %s\n", check_rank, __FILE__, __LINE__, #cond); \
        exit(1); \
    } } while (0)

/* Expect a specific netvm status. */
#define CHECK_ST(expr, want) do { \
    netvm_status_t st_ = (expr); \
    if (st_ != (want)) { \
        fprintf(stderr, "FAIL rank %d %s:%d: %s returned %d (%s), wanted %s\n", check_rank, \
                __FILE__, __LINE__, #expr, (int)st_, netvm_strerror(st_), #want); \
        exit(1); \
    } } while (0)

#define CHECK_OK(expr) CHECK_ST(expr, NETVM_OK)

/* A failure with a message of its own. */
#define FAILF(...) do { \
    fprintf(stderr, "FAIL rank %d %s:%d: ", check_rank, __FILE__, __LINE__); \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr); \
    exit(1); \
} while (0)

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif
