/* The statistics files of `netvm gmem run` (src/preload/stats_file.h):
 * where they are, and how the run's summary and `netvm stat gmem:PID`
 * print them. */
#ifndef NV_TOOLS_GMEM_STAT_H
#define NV_TOOLS_GMEM_STAT_H

#include "preload/stats_file.h"

#include <stddef.h>
#include <stdio.h>

/* The directory the runs' directories are made in: $XDG_RUNTIME_DIR, else
 * /dev/shm, else /tmp. */
const char *nv_gmem_stats_base(void);
/* The newest statistics file of pid in any run's directory: 0 and path. */
int nv_gmem_stats_find(int pid, char *path, size_t cap);
void nv_gmem_stats_print(FILE *f, const struct nvp_stats_file *s);
void nv_gmem_stats_json(FILE *f, const struct nvp_stats_file *s);

#endif
