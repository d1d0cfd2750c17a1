/* Where a process's threads are: each thread's name, scheduler state,
 * kernel wait channel and system call from /proc (which needs nothing),
 * then every thread's backtrace from gdb when it is on PATH (a batch
 * attach, bounded by NV_STACKS_GDB_S seconds). `netvm run --stack-traces`
 * shows a job's ranks this way at its timeout; `netvm stacks PID...`
 * shows any process, for scripts such as the test suite's watchdog
 * (scripts/test-watch), so that a rare hang leaves its stacks in a log. */
#define _GNU_SOURCE
#include "commands.h"
#include "run_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NV_STACKS_GDB_S 60   /* one process's backtraces, at most (gdb's symbol loading included) */

/* The first line of /proc/PID/task/TID/NAME, without its newline. */
static void read_line(pid_t pid, const char *tid, const char *name, char *out, size_t cap)
{
    char path[320];   /* room for any d_name */
    snprintf(path, sizeof path, "/proc/%d/task/%s/%s", (int)pid, tid, name);
    out[0] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    out[n > 0 ? n : 0] = 0;
    out[strcspn(out, "\n")] = 0;
}

/* The state letter of /proc/.../stat: after the ')' that ends the name
 * (a name may hold spaces and parentheses). */
static char task_state(pid_t pid, const char *tid)
{
    char st[512];
    read_line(pid, tid, "stat", st, sizeof st);
    char *p = strrchr(st, ')');
    return p && p[1] == ' ' && p[2] ? p[2] : '?';
}

/* 0, or -1 when pid has no /proc entry (gone, or never was). */
static int proc_threads(pid_t pid, const char *tag)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char comm[64], wchan[128], sc[256];
        read_line(pid, e->d_name, "comm", comm, sizeof comm);
        read_line(pid, e->d_name, "wchan", wchan, sizeof wchan);
        read_line(pid, e->d_name, "syscall", sc, sizeof sc);
        sc[strcspn(sc, " ")] = 0;   /* the call's number, or "running" */
        fprintf(stderr, "%s:   thread %s (%s): state %c, wchan %s, syscall %s\n", tag, e->d_name, comm,
                task_state(pid, e->d_name), wchan[0] && strcmp(wchan, "0") ? wchan : "-", sc[0] ? sc : "-");
    }
    closedir(d);
    return 0;
}

/* gdb's backtraces of every thread of pid, onto our stderr; the child
 * runs with child_mask when one is given (the launcher blocks its signals
 * for its signalfd), and its alarm bounds it. */
static void gdb_threads(const char *gdb, pid_t pid, const sigset_t *child_mask)
{
    char spid[16];
    snprintf(spid, sizeof spid, "%d", (int)pid);
    fflush(stderr);
    pid_t c = fork();
    if (c < 0)
        return;
    if (c == 0) {
        if (child_mask)
            sigprocmask(SIG_SETMASK, child_mask, NULL);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, STDIN_FILENO);
        alarm(NV_STACKS_GDB_S);   /* kept across exec: SIGALRM ends a gdb that hangs */
        execl(gdb, "gdb", "-q", "-nx", "-batch", "-p", spid, "-ex", "set pagination off",
              "-ex", "thread apply all bt", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(c, &status, 0) < 0 && errno == EINTR)
        ;
}

int nv_stacks_print(pid_t pid, const char *tag, const char *gdb, const sigset_t *child_mask)
{
    if (proc_threads(pid, tag) != 0)
        return -1;
    if (gdb)
        gdb_threads(gdb, pid, child_mask);
    return 0;
}

int nv_cmd_stacks(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: netvm stacks PID...\n"
                "  each process's threads (name, state, kernel wait channel, system call, from\n"
                "  /proc) and gdb's backtrace of every thread (when gdb is on PATH), on stderr\n");
        return argc < 2 ? 2 : 0;
    }
    char *gdb = run_find_program("gdb");   /* (run_spawn.c) */
    int rc = 0;
    for (int i = 1; i < argc; i++) {
        char *end;
        long pid = strtol(argv[i], &end, 10);
        if (*end || pid <= 0 || pid > 0x3fffffff) {
            fprintf(stderr, "netvm stacks: '%s' is not a process id\n", argv[i]);
            rc = 2;
            continue;
        }
        char cmd[512];
        snprintf(cmd, sizeof cmd, "%ld", pid);
        char path[64];
        snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
        FILE *f = fopen(path, "r");
        size_t n = f ? fread(cmd, 1, sizeof cmd - 1, f) : 0;
        if (f)
            fclose(f);
        for (size_t k = 0; k + 1 < n; k++)
            if (!cmd[k])
                cmd[k] = ' ';
        cmd[n] = 0;
        fprintf(stderr, "netvm stacks: pid %ld: %s\n", pid, n ? cmd : "?");
        if (nv_stacks_print((pid_t)pid, "netvm stacks", gdb, NULL) != 0) {
            fprintf(stderr, "netvm stacks: pid %ld: no such process\n", pid);
            rc = 1;
        }
    }
    if (!gdb)
        fprintf(stderr, "netvm stacks: no gdb on PATH: no backtraces are shown\n");
    free(gdb);
    return rc;
}
