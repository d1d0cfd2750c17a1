/* netvm: the command-line front door. argv[1] names the subcommand. */
#include "commands.h"

#include <stdio.h>
#include <string.h>

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *what;
} commands[] = {
    { "run",   nv_cmd_run,   "launch a job: netvm run -n N [options] [--] PROGRAM ARGS..." },
    { "info",  nv_cmd_info,  "print version, links and every NETVM_* variable" },
    { "bench", nv_cmd_bench, "measure put/get/atomic latency, bandwidth and rate" },
    { "memd",  nv_cmd_memd,  "run a memory server: netvm memd --listen tcp:HOST:PORT --size BYTES ..." },
    { "stat",  nv_cmd_stat,  "show a memory server's state, or a program's under gmem run: netvm stat ADDRESS|gmem:PID" },
    { "gmem",  nv_cmd_gmem,  "run a program in network memory: netvm gmem run [--budget B] [--] PROGRAM ARGS..." },
    { "gfile", nv_cmd_gfile, "mount files read through the file cache: netvm gfile mount DIR SRC" },
    { "stacks", nv_cmd_stacks, "show where a process's threads are (/proc and gdb): netvm stacks PID..." },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: netvm COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-6s %s\n", commands[i].name, commands[i].what);
    fprintf(f, "\n'netvm COMMAND --help' describes each.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("netvm %s\n", NETVM_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "netvm: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
