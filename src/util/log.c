#include "util/log.h"
#include "util/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int nv_log_threshold = NV_LOG_WARN;
static int log_rank = -1;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void nv_log_set_rank(int rank) { log_rank = rank; }

void nv_log_init_from_env(void)
{
    const char *v = nv_config_str("NETVM_LOG");
    for (int i = 0; v && i <= NV_LOG_DEBUG; i++)
        if (strcasecmp(v, level_names[i]) == 0)
            nv_log_threshold = i;
}

void nv_log_emit(enum nv_log_level level, const char *file, int line, const char *fmt, ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof buf, "netvm[%d:%d] %s: ", log_rank, (int)getpid(), level_names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof buf)
        n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof buf - 64)
        n = (int)sizeof buf - 64;
    if (level == NV_LOG_DEBUG)
        n += snprintf(buf + n, sizeof buf - (size_t)n, " (%s:%d)", file, line);
    buf[n++] = '\n';
    /* one write per message so lines from threads and ranks do not interleave */
    ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
    (void)w;
}
