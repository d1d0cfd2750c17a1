/* netvm run: the program, the ranks' environment, and starting the ranks. */
#define _GNU_SOURCE
#include "run_job.h"
#include "util/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

static int runnable(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    return access(path, X_OK);
}

/* PROGRAM found the way a shell would (a path as it is, else each PATH
 * directory in turn), malloc'd; NULL and errno when it is not there
 * (EACCES if some candidate could not be run). Says nothing. */
char *run_find_program(const char *prog)
{
    if (strchr(prog, '/'))
        return runnable(prog) == 0 ? strdup(prog) : NULL;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    int saw_eacces = 0;
    for (const char *p = path;; ) {
        const char *end = strchr(p, ':');
        size_t dlen = end ? (size_t)(end - p) : strlen(p);
        char *cand;
        if (asprintf(&cand, "%.*s/%s", (int)(dlen ? dlen : 1), dlen ? p : ".", prog) < 0)
            return NULL;
        if (runnable(cand) == 0)
            return cand;
        if (errno == EACCES)
            saw_eacces = 1;
        free(cand);
        if (!end)
            break;
        p = end + 1;
    }
    errno = saw_eacces ? EACCES : ENOENT;
    return NULL;
}

/* Resolve PROGRAM once, so that "not found" is one clear message instead
 * of N failed execs. */
char *run_resolve_program(const char *prog)
{
    char *found = run_find_program(prog);
    if (!found)
        fprintf(stderr, "netvm run: %s: %s\n", prog,
                strchr(prog, '/') ? strerror(errno) : errno == EACCES ? "permission denied" : "command not found");
    return found;
}

/* --- the ranks' environment ----------------------------------------------- */

/* What the launcher sets for every rank; the first two differ per rank and
 * are rewritten before each fork. Inherited values are dropped: a job
 * started from inside another job is a job of its own. */
static const char *const job_vars[] = {
    "NETVM_RANK", "NETVM_LOCAL_RANK", "NETVM_SIZE", "NETVM_JOB_ID", "NETVM_SECRET", "NETVM_BOOT",
    "NETVM_NODE", "NETVM_NNODES", "NETVM_LOCAL_SIZE", "NETVM_TCP_ADDR",
};
#define NJOB_VARS   (sizeof job_vars / sizeof job_vars[0])
#define SECRET_VAR  4

static int is_job_var(const char *kv)
{
    for (size_t i = 0; i < NJOB_VARS; i++) {
        size_t n = strlen(job_vars[i]);
        if (strncmp(kv, job_vars[i], n) == 0 && kv[n] == '=')
            return 1;
    }
    return 0;
}

static char rank_buf[32], local_rank_buf[32];

void run_free_environment(char **envp)
{
    if (!envp)
        return;
    for (size_t i = 2; i < NJOB_VARS; i++) {
        if (i == SECRET_VAR && envp[i])
            explicit_bzero(envp[i], strlen(envp[i]));
        free(envp[i]);
    }
    free(envp);
}

/* "NAME=value" in fresh memory, or NULL. */
static char *env_entry(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *env_entry(const char *fmt, ...)
{
    char *kv;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&kv, fmt, ap);
    va_end(ap);
    return n < 0 ? NULL : kv;
}

/* environ without any inherited job variables, plus this job's. */
char **run_job_environment(const struct job *j)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + NJOB_VARS + 1, sizeof *envp);
    if (!envp)
        return NULL;
    char hex[NV_BOOT_SECRET_HEX_LEN + 1];
    nv_secret_to_hex(j->secret, hex);
    envp[0] = rank_buf;
    envp[1] = local_rank_buf;
    envp[2] = env_entry("NETVM_SIZE=%d", j->size);
    envp[3] = env_entry("NETVM_JOB_ID=%s", j->job_id);
    envp[4] = env_entry("NETVM_SECRET=%s", hex);
    envp[5] = env_entry("NETVM_BOOT=%s", nv_boot_server_addr(j->srv));
    envp[6] = env_entry("NETVM_NODE=%d", multi(j) ? j->node : 0);
    envp[7] = env_entry("NETVM_NNODES=%d", multi(j) ? j->nnodes : 1);
    envp[8] = env_entry("NETVM_LOCAL_SIZE=%d", j->np);
    envp[9] = env_entry("NETVM_TCP_ADDR=%s", j->tcp_addr);
    explicit_bzero(hex, sizeof hex);
    for (size_t i = 2; i < NJOB_VARS; i++)
        if (!envp[i]) {
            run_free_environment(envp);
            return NULL;
        }
    size_t k = NJOB_VARS;
    for (size_t i = 0; i < n; i++)
        if (!is_job_var(environ[i]))
            envp[k++] = environ[i];
    return envp;
}

/* --- starting the ranks ----------------------------------------------------- */

/* In the child, between fork and exec. The launcher has one thread, so the
 * child may call what it likes; it still keeps to plain system calls. */
static void child_exec(const struct job *j, int rank, char **envp, int out_fd, int err_fd)
{
    sigprocmask(SIG_SETMASK, &j->old_mask, NULL);
    signal(SIGPIPE, SIG_DFL);
    setrlimit(RLIMIT_NOFILE, &j->old_nofile);
    /* one process group for the job, so it is signalled as a whole */
    setpgid(0, rank == 0 ? 0 : j->pgid);
    /* die with the launcher, even if it is SIGKILLed */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != j->self)
        _exit(EXIT_NOEXEC);
    if (out_fd >= 0) {
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
    }
    /* stdin goes to rank 0 only, and not from a terminal: the job is not the
     * terminal's foreground group, so reading it would stop the rank */
    if (j->first_rank + rank != 0 || isatty(STDIN_FILENO)) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0 && nul != STDIN_FILENO) {
            dup2(nul, STDIN_FILENO);
            close(nul);
        }
    }
    execve(j->path, j->argv, envp);
    /* rare, since the program was checked before any fork (it changed since) */
    char msg[512];
    int n = snprintf(msg, sizeof msg, "netvm run: rank %d: cannot execute %s: %s\n", j->first_rank + rank,
                     j->path, strerror(errno));
    ssize_t w = write(STDERR_FILENO, msg, n > 0 && (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
    (void)w;
    _exit(EXIT_NOEXEC);
}

static int open_pipe(struct job *j, int rank, int which, int *child_end)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return -1;
    /* only the launcher's end is non-blocking: the rank writes as usual */
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    struct tagger *t = &j->ranks[rank].out[which];
    t->fd = p[0];
    t->dst = which ? STDERR_FILENO : STDOUT_FILENO;
    t->rank = j->first_rank + rank;     /* the prefix names the global rank */
    *child_end = p[1];
    return run_watch(j->ep, p[0], TAG_PIPE + 2 * (uint64_t)rank + (uint64_t)which);
}

int run_start_ranks(struct job *j, char **envp)
{
    for (int r = 0; r < j->np; r++) {
        int out_fd = -1, err_fd = -1;
        if (j->tag && (open_pipe(j, r, 0, &out_fd) != 0 || open_pipe(j, r, 1, &err_fd) != 0)) {
            fprintf(stderr, "netvm run: cannot create pipes: %s\n", strerror(errno));
            if (out_fd >= 0)
                close(out_fd);
            return -1;
        }
        snprintf(rank_buf, sizeof rank_buf, "NETVM_RANK=%d", j->first_rank + r);
        snprintf(local_rank_buf, sizeof local_rank_buf, "NETVM_LOCAL_RANK=%d", r);
        pid_t pid = fork();
        if (pid == 0)
            child_exec(j, r, envp, out_fd, err_fd);
        if (out_fd >= 0) {
            close(out_fd);
            close(err_fd);
        }
        if (pid < 0) {
            fprintf(stderr, "netvm run: fork: %s\n", strerror(errno));
            return -1;
        }
        if (r == 0)
            j->pgid = pid;
        /* also here, so the group exists before the next fork, whichever of
         * parent and child runs first (EACCES: the child has exec'd already) */
        setpgid(pid, j->pgid);
        j->ranks[r].pid = pid;
        j->nlive++;
    }
    return 0;
}
