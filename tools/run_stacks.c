/* netvm run --stack-traces: where the ranks of a job that outlived its
 * --timeout are, printed before they are terminated (Open MPI's mpirun
 * offers the same with --get-stack-traces). A hang that happens once in
 * a hundred runs of a test suite can then be diagnosed from the one log
 * it left. Each thread's name, scheduler state, kernel wait channel and
 * system call come from /proc, which needs nothing; each thread's
 * backtrace comes from gdb when it is on PATH (a batch attach, bounded by
 * STACK_GDB_S seconds). */
#define _GNU_SOURCE
#include "run_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define STACK_GDB_S 60   /* one rank's backtraces, at most (gdb's symbol loading included) */

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

static void proc_threads(pid_t pid)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", (int)pid);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char comm[64], wchan[128], sc[256];
        read_line(pid, e->d_name, "comm", comm, sizeof comm);
        read_line(pid, e->d_name, "wchan", wchan, sizeof wchan);
        read_line(pid, e->d_name, "syscall", sc, sizeof sc);
        sc[strcspn(sc, " ")] = 0;   /* the call's number, or "running" */
        fprintf(stderr, "netvm run:   thread %s (%s): state %c, wchan %s, syscall %s\n", e->d_name, comm,
                task_state(pid, e->d_name), wchan[0] && strcmp(wchan, "0") ? wchan : "-", sc[0] ? sc : "-");
    }
    closedir(d);
}

/* gdb's backtraces of every thread of pid, onto our stderr. The launcher
 * blocks its signals for its signalfd: the child gets the mask the
 * launcher was started with, and its own alarm bounds it. */
static void gdb_threads(const struct job *j, const char *gdb, pid_t pid)
{
    char spid[16];
    snprintf(spid, sizeof spid, "%d", (int)pid);
    fflush(stderr);
    pid_t c = fork();
    if (c < 0)
        return;
    if (c == 0) {
        sigprocmask(SIG_SETMASK, &j->old_mask, NULL);
        dup2(STDERR_FILENO, STDOUT_FILENO);
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0)
            dup2(nul, STDIN_FILENO);
        alarm(STACK_GDB_S);   /* kept across exec: SIGALRM ends a gdb that hangs */
        execl(gdb, "gdb", "-q", "-nx", "-batch", "-p", spid, "-ex", "set pagination off",
              "-ex", "thread apply all bt", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(c, &status, 0) < 0 && errno == EINTR)
        ;
}

void run_stack_traces(const struct job *j)
{
    char *gdb = run_find_program("gdb");   /* (run_spawn.c) */
    for (int r = 0; r < j->np; r++) {
        const struct rank_proc *rp = &j->ranks[r];
        if (rp->pid <= 0 || rp->reaped)
            continue;
        fprintf(stderr, "netvm run: rank %d (pid %d) at the timeout:\n", j->first_rank + r, (int)rp->pid);
        proc_threads(rp->pid);
        if (gdb)
            gdb_threads(j, gdb, rp->pid);
    }
    if (!gdb)
        fprintf(stderr, "netvm run: no gdb on PATH: the ranks' backtraces are not shown\n");
    free(gdb);
}
