/* Every NETVM_* environment variable, in one table: its default, its meaning.
 * `netvm info` prints the table with the values in force. */
#ifndef NV_UTIL_CONFIG_H
#define NV_UTIL_CONFIG_H

#include <stddef.h>

struct nv_config_var {
    const char *name;
    const char *def;      /* default, as text; NULL: unset */
    const char *meaning;
};

extern const struct nv_config_var nv_config_vars[];
extern const size_t nv_config_nvars;

/* The value in force (environment, else default); NULL if neither. */
const char *nv_config_str(const char *name);
/* Parsed as a decimal integer; falls back to the default if unparseable
 * (with a warning) and clamps to [lo, hi] with a warning, never silently. */
long nv_config_long(const char *name, long lo, long hi);
/* A size in bytes with an optional K, M, G or T suffix (powers of 1024),
 * falling back and clamping as nv_config_long does. */
long long nv_config_size(const char *name, long long lo, long long hi);
/* Parse such a size ("64M", "4096"); 0, or -1 if it is not one. */
int nv_parse_size(const char *text, long long *out);

#endif
