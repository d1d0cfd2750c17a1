/* One logging module for the whole library: levels, quiet by default
 * (NETVM_LOG=error|warn|info|debug). Messages go to stderr prefixed with the
 * rank, so the output of a job stays readable. */
#ifndef NV_UTIL_LOG_H
#define NV_UTIL_LOG_H

#include <stddef.h>

enum nv_log_level { NV_LOG_ERROR = 0, NV_LOG_WARN, NV_LOG_INFO, NV_LOG_DEBUG };

extern int nv_log_threshold;
void nv_log_set_rank(int rank);
void nv_log_init_from_env(void);
void nv_log_emit(enum nv_log_level level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define nv_log(level, ...) \
    do { if ((level) <= nv_log_threshold) nv_log_emit((level), __FILE__, __LINE__, __VA_ARGS__); } while (0)
#define nv_error(...) nv_log(NV_LOG_ERROR, __VA_ARGS__)
#define nv_warn(...)  nv_log(NV_LOG_WARN, __VA_ARGS__)
#define nv_info(...)  nv_log(NV_LOG_INFO, __VA_ARGS__)
#define nv_debug(...) nv_log(NV_LOG_DEBUG, __VA_ARGS__)

/* Bytes a peer sent that are to be written in a log (a name, an address)
 * must pass this first: printable ASCII only, so that a peer's bytes never
 * become control characters or a forged line in an operator's log. */
static inline int nv_log_printable(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] < 0x20 || c[i] > 0x7e)
            return 0;
    return 1;
}

#endif
