/* Reading a statistics file (stats_file.h); the tool links this. */
#include "preload/stats_file.h"
#include "util/seqfile.h"

#include <stddef.h>

int nvp_stats_read(const char *path, struct nvp_stats_file *out)
{
    return nv_seqfile_read(path, out, sizeof *out, offsetof(struct nvp_stats_file, seq), NVP_STATS_MAGIC);
}
