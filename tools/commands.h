/* The subcommands of the netvm tool; each returns the process exit status. */
#ifndef NV_TOOLS_COMMANDS_H
#define NV_TOOLS_COMMANDS_H

int nv_cmd_run(int argc, char **argv);    /* run.c:   the launcher */
int nv_cmd_info(int argc, char **argv);   /* info.c:  version, links, configuration */
int nv_cmd_bench(int argc, char **argv);  /* bench.c: latency, bandwidth, atomics */
int nv_cmd_memd(int argc, char **argv);   /* memd.c:  the memory server */
int nv_cmd_stat(int argc, char **argv);   /* stat.c:  a memory server's state, gmem:PID's or pid:PID's */
/* ctx_stat.c: netvm stat pid:PID, the contexts' files in dir (NETVM_STATS_DIR) */
int nv_stat_ctx(const char *pid, const char *dir, int json);
int nv_cmd_gmem(int argc, char **argv);   /* gmem_run.c: netvm gmem run, a program in network memory */
int nv_cmd_gfile(int argc, char **argv);  /* gfile.c: the file cache's FUSE mount */
int nv_cmd_stacks(int argc, char **argv); /* stacks.c: where a process's threads are */

#include <signal.h>
#include <sys/types.h>
/* stacks.c: pid's threads from /proc, then gdb's backtraces when gdb (a
 * path) is given, each line on stderr tagged with tag; gdb runs with
 * child_mask as its signal mask when one is given. -1: no such process. */
int nv_stacks_print(pid_t pid, const char *tag, const char *gdb, const sigset_t *child_mask);

#endif
