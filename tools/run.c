/* netvm run: the launcher. Starts N copies of a program as the ranks of one
 * job, serves their bootstrap (src/boot/server.h), and watches them so that
 * one rank's death never leaves the others hanging: by default the job is
 * torn down; with --keep-going the survivors' collectives fail with
 * NETVM_ERR_PEER instead.
 *
 * A job across hosts runs one launcher per host (--nnodes, --node-rank,
 * --rendezvous, the torchrun shape). Node 0's launcher is the hub: it
 * serves the whole job's bootstrap and listens for the other launchers,
 * which join it (src/boot/rendezvous.h) before anything starts and then
 * relay their processes' collectives to it. Failures travel the same way:
 * a node reports its ranks' failures to the hub, the hub tells every node
 * to tear down, and a launcher that vanishes takes its ranks with it.
 *
 * One thread, one epoll loop: signals arrive through a signalfd, the boot
 * server is one pollable fd, --tag-output reads the ranks' pipes, and the
 * deadlines (--timeout, the grace period before SIGKILL, the hub's wait for
 * the nodes) are timerfds. Nothing polls on a clock. */
#define _GNU_SOURCE
#include "commands.h"
#include "boot/rendezvous.h"
#include "boot/secret.h"
#include "boot/server.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_RANKS      1024
#define GRACE_MS       2000     /* SIGTERM, then SIGKILL this much later */
#define LINE_MAX_BYTES 65536    /* --tag-output breaks longer lines */
#define EXIT_NOEXEC    127
#define EXIT_TIMEOUT   124      /* as timeout(1) */
#define EXIT_USAGE     2
#define RDV_TIMEOUT_S  30.0     /* default --rendezvous-timeout */
#define RDV_MARGIN_MS  5000     /* a node waits this much longer than node 0 for the start */
#define FLUSH_MS       5000     /* a launcher's last words to the others, at most */

extern char **environ;

/* epoll tags; a rank's output pipes are TAG_PIPE + 2*rank (+1 for stderr) */
enum { TAG_SIGNAL, TAG_BOOT, TAG_TIMEOUT, TAG_GRACE, TAG_RDV, TAG_PIPE };

/* One of a rank's output streams, read through a pipe so each line can be
 * prefixed with the rank. */
struct tagger {
    int    fd;           /* read end; -1 once closed */
    int    dst;          /* STDOUT_FILENO or STDERR_FILENO */
    int    rank;
    char  *buf;
    size_t len, cap;
};

struct rank_proc {
    pid_t         pid;
    int           reaped;
    struct tagger out[2];    /* stdout, stderr (--tag-output only) */
};

struct job {
    /* options */
    int          np;             /* processes on this host */
    int          tag;
    int          keep_going;
    double       timeout_s;
    int          nnodes;         /* > 1: a multi-host job */
    int          node;
    const char  *rendezvous;     /* HOST:PORT */
    const char  *secret_file;
    double       rdv_timeout_s;
    char       **argv;
    char        *path;           /* the program, resolved once */
    /* identity */
    int          first_rank;     /* global rank of this host's first process */
    int          size;           /* ranks in the whole job */
    char         job_id[NV_BOOT_JOB_ID_MAX + 1];
    uint8_t      secret[NV_BOOT_SECRET_LEN];
    char         tcp_addr[NV_TCP_ADDR_MAX];   /* NETVM_TCP_ADDR */
    int          upstream_fd;    /* a node: its connection to the hub, until the server takes it */
    /* state */
    struct rank_proc *ranks;
    pid_t        pgid;
    pid_t        self;
    int          ep, sfd, timeout_fd, grace_fd, rdv_fd;
    nv_boot_server_t *srv;
    char       **envp;
    int          started;        /* the ranks were started (or the job gave up before) */
    int          nlive;          /* ranks not reaped yet */
    int          first_status;   /* exit status of the first rank that failed, else -1 */
    int          forced_status;  /* the launcher ended the job (signal, timeout, abort), else -1 */
    int          terminating;
    int          told_others;    /* the other launchers heard why the job ends */
    sigset_t     old_mask;
    struct rlimit old_nofile;
};

static int multi(const struct job *j) { return j->nnodes > 1; }
static int is_hub(const struct job *j) { return multi(j) && j->node == 0; }

/* --- small helpers ------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: netvm run -n N [options] [--] PROGRAM [ARGS...]\n"
        "       netvm run -n N --nnodes M --node-rank K --rendezvous HOST:PORT\n"
        "                 --secret-file FILE [options] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Start N processes of PROGRAM as the ranks 0..N-1 of one netvm job; or, with\n"
        "--nnodes, one launcher per host: every host runs N processes, host K's are\n"
        "the ranks K*N..K*N+N-1 of a job of M*N ranks.\n"
        "\n"
        "options:\n"
        "  -n, --np N           processes on this host, 1..%d (required)\n"
        "  -t, --tag-output     prefix each line of the ranks' output with \"[RANK] \"\n"
        "  -k, --keep-going     when a rank fails, let the others run on (their\n"
        "                       collectives return NETVM_ERR_PEER); the job still fails\n"
        "      --timeout SECS   terminate the job after SECS seconds (exit status %d)\n"
        "  -h, --help           show this help\n"
        "\n"
        "jobs across hosts (the same -n, --nnodes, --rendezvous and secret on every host):\n"
        "      --nnodes M       hosts in the job, each with its own launcher\n"
        "      --node-rank K    this host, 0..M-1; node 0 hosts the rendezvous\n"
        "      --rendezvous HOST:PORT\n"
        "                       where node 0 listens and the others connect\n"
        "      --secret-file FILE\n"
        "                       the job secret: 64 hex digits, a file only its owner\n"
        "                       may read (else NETVM_SECRET; there is no default)\n"
        "      --rendezvous-timeout SECS\n"
        "                       how long to wait for the other launchers (default %g)\n"
        "\n"
        "Exit status: 0 if every rank exited 0, else the status of the first rank\n"
        "that failed (its exit code, or 128+signal); %d if PROGRAM cannot be run;\n"
        "130/143 when the launcher was interrupted/terminated. See docs/launcher.md.\n",
        MAX_RANKS, EXIT_TIMEOUT, RDV_TIMEOUT_S, EXIT_NOEXEC);
}

static int write_all(int fd, const void *p, size_t len)
{
    const char *c = p;
    while (len) {
        ssize_t n = write(fd, c, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        c += n;
        len -= (size_t)n;
    }
    return 0;
}

static int status_code(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return 1;
}

static int arm_timer(int fd, double seconds)
{
    struct itimerspec its = { .it_value = { .tv_sec = (time_t)seconds,
                                            .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9) } };
    if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0)
        its.it_value.tv_nsec = 1;   /* zero would disarm */
    return timerfd_settime(fd, 0, &its, NULL);
}

static int watch(int ep, int fd, uint64_t tag)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* --- the program ---------------------------------------------------------- */

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

/* Resolve PROGRAM the way a shell would, once, so that "not found" is one
 * clear message instead of N failed execs. */
static char *resolve_program(const char *prog)
{
    if (strchr(prog, '/')) {
        if (runnable(prog) == 0)
            return strdup(prog);
        fprintf(stderr, "netvm run: %s: %s\n", prog, strerror(errno));
        return NULL;
    }
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
    fprintf(stderr, "netvm run: %s: %s\n", prog, saw_eacces ? "permission denied" : "command not found");
    return NULL;
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

static void free_environment(char **envp)
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
static char **job_environment(const struct job *j)
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
            free_environment(envp);
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
    return watch(j->ep, p[0], TAG_PIPE + 2 * (uint64_t)rank + (uint64_t)which);
}

static int start_ranks(struct job *j, char **envp)
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

/* --- tearing down ------------------------------------------------------------ */

static void signal_job(struct job *j, int sig)
{
    if (j->nlive == 0)
        return;
    /* while a rank is unreaped the group id cannot be reused */
    killpg(j->pgid, sig);
    /* ranks that moved to a group of their own; only those, so that a rank
     * with a handler is not signalled twice */
    for (int r = 0; r < j->np; r++)
        if (j->ranks[r].pid > 0 && !j->ranks[r].reaped && getpgid(j->ranks[r].pid) != j->pgid)
            kill(j->ranks[r].pid, sig);
}

static void terminate(struct job *j, int sig)
{
    if (!j->terminating) {
        j->terminating = 1;
        arm_timer(j->grace_fd, GRACE_MS / 1000.0);
    }
    signal_job(j, sig);
}

/* --- output tagging ------------------------------------------------------------ */

static void tag_emit(struct tagger *t, const char *line, size_t len)
{
    char prefix[16];
    int plen = snprintf(prefix, sizeof prefix, "[%d] ", t->rank);
    /* one write per line, so lines of different ranks never interleave */
    char *buf = malloc((size_t)plen + len + 1);
    if (!buf)
        return;
    memcpy(buf, prefix, (size_t)plen);
    memcpy(buf + plen, line, len);
    buf[(size_t)plen + len] = '\n';
    (void)write_all(t->dst, buf, (size_t)plen + len + 1);
    free(buf);
}

static void tag_close(struct job *j, struct tagger *t)
{
    if (t->len)
        tag_emit(t, t->buf, t->len);   /* a last line without its newline */
    t->len = 0;
    epoll_ctl(j->ep, EPOLL_CTL_DEL, t->fd, NULL);
    close(t->fd);
    t->fd = -1;
}

/* Read what the pipe has now; emit every complete line. */
static void tag_read(struct job *j, struct tagger *t)
{
    if (t->fd < 0)
        return;
    for (;;) {
        if (t->len == t->cap) {
            /* grow as lines get long: a thousand quiet ranks cost little */
            size_t cap = t->cap ? 2 * t->cap : 4096;
            char *nb = realloc(t->buf, cap);
            if (!nb) {
                tag_close(j, t);
                return;
            }
            t->buf = nb;
            t->cap = cap;
        }
        ssize_t n = read(t->fd, t->buf + t->len, t->cap - t->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            tag_close(j, t);
            return;
        }
        t->len += (size_t)n;
        size_t start = 0;
        for (size_t i = t->len - (size_t)n; i < t->len; i++)
            if (t->buf[i] == '\n') {
                tag_emit(t, t->buf + start, i - start);
                start = i + 1;
            }
        memmove(t->buf, t->buf + start, t->len - start);
        t->len -= start;
        if (t->len == LINE_MAX_BYTES) {     /* an endless line: break it */
            tag_emit(t, t->buf, t->len);
            t->len = 0;
        }
    }
}

/* --- the other launchers ---------------------------------------------------------- */

/* Tell the other launchers, once, that this one is ending the job and why:
 * the hub tells every node to tear down; a node tells the hub, which does.
 * rank -1: no one rank's fault (a signal, a timeout, a lost node). */
static void tell_others(struct job *j, int rank, int code, const char *what)
{
    if (!multi(j) || j->told_others || !j->srv)
        return;
    j->told_others = 1;
    if (is_hub(j))
        nv_boot_server_abort(j->srv, rank, j->node, code, what);
    else
        nv_boot_server_report_failure(j->srv, rank, code, what);
}

/* Start this host's ranks: at once on a single host and on a node (which
 * waited for the start before setting up), at the hub once every node has
 * joined. */
static void launch(struct job *j)
{
    j->started = 1;
    if (is_hub(j))
        snprintf(j->tcp_addr, sizeof j->tcp_addr, "%s", nv_boot_server_tcp_addr(j->srv));
    char what[96];
    snprintf(what, sizeof what, "the launcher of node %d could not start its ranks", j->node);
    if (!(j->envp = job_environment(j))) {
        fprintf(stderr, "netvm run: out of memory\n");
        j->forced_status = 1;
        tell_others(j, -1, 1, what);
        return;
    }
    if (start_ranks(j, j->envp) != 0) {
        if (j->forced_status < 0)
            j->forced_status = 1;
        tell_others(j, -1, 1, what);
        terminate(j, SIGKILL);
    }
}

/* What the boot server says about the other launchers. */
static void on_boot_event(struct job *j, const struct nv_boot_event *ev)
{
    char what[NV_BOOT_TEXT_MAX + 64];
    const char *outcome = j->keep_going ? "the others go on (--keep-going)" : "terminating the job";
    switch (ev->kind) {
    case NV_BOOT_EV_NODE_JOINED:
        nv_info("run: node %d joined from %s", ev->node, ev->text);
        break;
    case NV_BOOT_EV_ALL_JOINED:
        if (!j->started && j->forced_status < 0)
            launch(j);
        break;
    case NV_BOOT_EV_NODE_FAILED:
        if (j->first_status < 0)
            j->first_status = ev->code;
        if (j->terminating)
            break;
        fprintf(stderr, "netvm run: %s; %s\n", ev->text, outcome);
        if (!j->keep_going) {
            tell_others(j, ev->rank, ev->code, ev->text);
            terminate(j, SIGTERM);
        }
        break;
    case NV_BOOT_EV_NODE_DONE:
        if (ev->code != 0 && j->first_status < 0)
            j->first_status = ev->code;
        break;
    case NV_BOOT_EV_NODE_LOST:
        snprintf(what, sizeof what, "lost node %d (ranks %d..%d): %s", ev->node, ev->node * j->np,
                 ev->node * j->np + j->np - 1, ev->text);
        if (j->first_status < 0)
            j->first_status = 1;
        if (!j->started) {
            /* a node gone before the start: the job cannot start */
            fprintf(stderr, "netvm run: %s; giving up\n", what);
            j->forced_status = 1;
            tell_others(j, -1, 1, what);
            break;
        }
        if (j->terminating)
            break;
        fprintf(stderr, "netvm run: %s; %s\n", what, outcome);
        if (!j->keep_going) {
            tell_others(j, -1, 1, what);
            terminate(j, SIGTERM);
        }
        break;
    case NV_BOOT_EV_ABORT:
        j->told_others = 1;      /* the hub knows: it is its news */
        if (j->terminating)
            break;
        fprintf(stderr, "netvm run: %s; terminating the job\n", ev->text);
        j->forced_status = ev->code;
        terminate(j, SIGTERM);
        break;
    case NV_BOOT_EV_HUB_LOST:
        j->told_others = 1;
        if (j->terminating)
            break;
        fprintf(stderr, "netvm run: lost node 0 (the rendezvous at %s): %s; terminating the job\n",
                j->rendezvous, ev->text);
        j->forced_status = 1;
        terminate(j, SIGTERM);
        break;
    }
}

static void on_boot(struct job *j)
{
    nv_boot_server_progress(j->srv);
    struct nv_boot_event ev;
    while (nv_boot_server_next_event(j->srv, &ev))
        on_boot_event(j, &ev);
}

/* The hub waited --rendezvous-timeout for the nodes: some never came. */
static void on_rendezvous_timeout(struct job *j)
{
    uint64_t ticks;
    if (read(j->rdv_fd, &ticks, sizeof ticks) < 0 || j->started || j->forced_status >= 0)
        return;
    char missing[128] = "";
    size_t len = 0;
    int n = 0;
    for (int k = 1; k < j->nnodes; k++)
        if (nv_boot_server_node_state(j->srv, k) == NV_BOOT_NODE_WAITING && len + 16 < sizeof missing) {
            len += (size_t)snprintf(missing + len, sizeof missing - len, "%s%d", n ? ", " : "", k);
            n++;
        }
    char what[256];
    snprintf(what, sizeof what, "node%s %s did not join the rendezvous at %s within %g s", n == 1 ? "" : "s",
             missing, j->rendezvous, j->rdv_timeout_s);
    fprintf(stderr, "netvm run: %s; giving up\n", what);
    j->forced_status = 1;
    tell_others(j, -1, 1, what);
}

/* --- this host's ranks ------------------------------------------------------------- */

static void describe_exit(char *buf, size_t cap, int wstatus)
{
    if (WIFSIGNALED(wstatus))
        snprintf(buf, cap, "killed by signal %d (%s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(wstatus));
}

static void rank_ended(struct job *j, int r, int wstatus)
{
    struct rank_proc *p = &j->ranks[r];
    int rank = j->first_rank + r;
    p->reaped = 1;
    j->nlive--;
    int code = status_code(wstatus);
    nv_boot_server_rank_exited(j->srv, rank, code == 0);
    if (code == 0)
        return;
    if (j->first_status < 0)
        j->first_status = code;
    if (j->terminating)
        return;     /* an expected casualty of the teardown */
    char how[96], where[32] = "", what[NV_BOOT_TEXT_MAX];
    describe_exit(how, sizeof how, wstatus);
    if (multi(j))
        snprintf(where, sizeof where, " on node %d", j->node);
    snprintf(what, sizeof what, "rank %d (pid %d)%s %s", rank, (int)p->pid, where, how);
    fprintf(stderr, "netvm run: %s; %s\n", what,
            j->keep_going ? "the others go on (--keep-going)" : "terminating the job");
    /* the hub hears of every failure (it decides the job's status); the
     * nodes hear from the hub when the job ends */
    if (multi(j) && !is_hub(j))
        nv_boot_server_report_failure(j->srv, rank, code, what);
    if (!j->keep_going) {
        if (is_hub(j))
            tell_others(j, rank, code, what);
        j->told_others = 1;
        terminate(j, SIGTERM);
    }
}

static void reap(struct job *j)
{
    for (;;) {
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, WNOHANG);
        if (pid <= 0)
            return;
        for (int r = 0; r < j->np; r++)
            if (j->ranks[r].pid == pid && !j->ranks[r].reaped) {
                rank_ended(j, r, wstatus);
                break;
            }
    }
}

static void on_signals(struct job *j)
{
    struct signalfd_siginfo si;
    while (read(j->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            reap(j);
            continue;
        }
        if (j->forced_status >= 0) {
            /* asked twice: no more grace */
            signal_job(j, SIGKILL);
            continue;
        }
        fprintf(stderr, "netvm run: received %s; terminating the job\n", strsignal(sig));
        j->forced_status = 128 + sig;
        char what[96];
        snprintf(what, sizeof what, "the launcher of node %d received %s", j->node, strsignal(sig));
        tell_others(j, -1, 128 + sig, what);
        terminate(j, sig);
    }
}

static void on_timeout(struct job *j)
{
    uint64_t ticks;
    if (read(j->timeout_fd, &ticks, sizeof ticks) < 0)
        return;
    if (j->forced_status >= 0)
        return;
    fprintf(stderr, "netvm run: the job ran longer than --timeout %g s; terminating it\n", j->timeout_s);
    j->forced_status = EXIT_TIMEOUT;
    char what[96];
    snprintf(what, sizeof what, "the job ran longer than --timeout %g s on node %d", j->timeout_s, j->node);
    tell_others(j, -1, EXIT_TIMEOUT, what);
    terminate(j, SIGTERM);
}

static void on_grace(struct job *j)
{
    uint64_t ticks;
    if (read(j->grace_fd, &ticks, sizeof ticks) < 0)
        return;
    int left = 0;
    for (int r = 0; r < j->np; r++)
        left += j->ranks[r].pid > 0 && !j->ranks[r].reaped;
    if (left)
        fprintf(stderr, "netvm run: %d rank%s still running after %d ms; killing\n", left,
                left == 1 ? "" : "s", GRACE_MS);
    signal_job(j, SIGKILL);
}

/* The loop ends when this host's ranks are all reaped, and the hub also
 * waits for the nodes still running (unless it is ending the job). Before
 * the start only a decision to give up ends it. */
static int finished(const struct job *j)
{
    if (j->nlive > 0)
        return 0;
    if (!j->started)
        return j->forced_status >= 0;
    if (is_hub(j) && !j->terminating && j->forced_status < 0)
        for (int k = 1; k < j->nnodes; k++)
            if (nv_boot_server_node_state(j->srv, k) == NV_BOOT_NODE_JOINED)
                return 0;
    return 1;
}

static int loop(struct job *j)
{
    while (!finished(j)) {
        struct epoll_event evs[32];
        int n = epoll_wait(j->ep, evs, 32, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            fprintf(stderr, "netvm run: epoll_wait: %s\n", strerror(errno));
            return -1;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            switch (tag) {
            case TAG_SIGNAL:  on_signals(j); break;
            case TAG_BOOT:    on_boot(j); break;
            case TAG_TIMEOUT: on_timeout(j); break;
            case TAG_GRACE:   on_grace(j); break;
            case TAG_RDV:     on_rendezvous_timeout(j); break;
            default: {
                uint64_t k = tag - TAG_PIPE;
                tag_read(j, &j->ranks[k / 2].out[k % 2]);
            }
            }
        }
    }
    /* Every rank is gone; what it wrote is in its pipes already. Read it,
     * but do not wait for EOF: a rank's orphaned child may hold a pipe. */
    for (int r = 0; j->tag && r < j->np; r++)
        for (int w = 0; w < 2; w++) {
            struct tagger *t = &j->ranks[r].out[w];
            if (t->fd < 0)
                continue;
            tag_read(j, t);
            if (t->fd >= 0)
                tag_close(j, t);
        }
    return 0;
}

/* --- setting up ------------------------------------------------------------------------- */

enum { OPT_NNODES = 256, OPT_NODE_RANK, OPT_RENDEZVOUS, OPT_SECRET_FILE, OPT_RDV_TIMEOUT };

static int parse_int(const char *opt, const char *arg, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(arg, &end, 10);
    if (errno || *end || end == arg || n < lo || n > hi) {
        fprintf(stderr, "netvm run: %s wants a number in %ld..%ld, not '%s'\n", opt, lo, hi, arg);
        return -1;
    }
    *out = (int)n;
    return 0;
}

static int parse_seconds(const char *opt, const char *arg, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    if (errno || *end || end == arg || !(v > 0) || v > 1e8) {
        fprintf(stderr, "netvm run: %s wants a positive number of seconds, not '%s'\n", opt, arg);
        return -1;
    }
    *out = v;
    return 0;
}

/* The options of a job across hosts, checked together. */
static int check_multi(struct job *j, int node_given)
{
    if (!multi(j)) {
        /* --nnodes 1 (or none) is a single-host job; scripts written for
         * many hosts may still pass the other options */
        if (node_given && j->node != 0) {
            fprintf(stderr, "netvm run: --node-rank %d needs --nnodes greater than %d\n", j->node, j->node);
            return EXIT_USAGE;
        }
        return -1;
    }
    if (!node_given) {
        fprintf(stderr, "netvm run: --nnodes %d needs --node-rank K (0..%d): which host this is\n", j->nnodes,
                j->nnodes - 1);
        return EXIT_USAGE;
    }
    if (j->node >= j->nnodes) {
        fprintf(stderr, "netvm run: --node-rank %d is not in 0..%d\n", j->node, j->nnodes - 1);
        return EXIT_USAGE;
    }
    if (!j->rendezvous) {
        fprintf(stderr, "netvm run: --nnodes %d needs --rendezvous HOST:PORT (where node 0 listens)\n", j->nnodes);
        return EXIT_USAGE;
    }
    char host[256], port[8], err[256];
    if (nv_tcp_split(j->rendezvous, host, sizeof host, port, sizeof port, err, sizeof err) != 0) {
        fprintf(stderr, "netvm run: --rendezvous %s\n", err);
        return EXIT_USAGE;
    }
    if (j->node > 0 && !host[0]) {
        fprintf(stderr, "netvm run: --rendezvous %s: node %d must name node 0's host\n", j->rendezvous, j->node);
        return EXIT_USAGE;
    }
    if ((long)j->np * j->nnodes > NV_BOOT_MAX_RANKS) {
        fprintf(stderr, "netvm run: %d nodes x %d ranks is more than %d ranks\n", j->nnodes, j->np,
                NV_BOOT_MAX_RANKS);
        return EXIT_USAGE;
    }
    return -1;
}

static int parse_args(struct job *j, int argc, char **argv)
{
    static const struct option opts[] = {
        { "np",          required_argument, NULL, 'n' },
        { "tag-output",  no_argument,       NULL, 't' },
        { "keep-going",  no_argument,       NULL, 'k' },
        { "timeout",     required_argument, NULL, 'T' },
        { "help",        no_argument,       NULL, 'h' },
        { "nnodes",      required_argument, NULL, OPT_NNODES },
        { "node-rank",   required_argument, NULL, OPT_NODE_RANK },
        { "rendezvous",  required_argument, NULL, OPT_RENDEZVOUS },
        { "secret-file", required_argument, NULL, OPT_SECRET_FILE },
        { "rendezvous-timeout", required_argument, NULL, OPT_RDV_TIMEOUT },
        { NULL, 0, NULL, 0 },
    };
    optind = 1;
    int c, node_given = 0;
    /* '+': the first non-option is PROGRAM; what follows belongs to it */
    while ((c = getopt_long(argc, argv, "+n:tkh", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            if (parse_int("-n", optarg, 1, MAX_RANKS, &j->np) != 0)
                return EXIT_USAGE;
            break;
        case 't': j->tag = 1; break;
        case 'k': j->keep_going = 1; break;
        case 'T':
            if (parse_seconds("--timeout", optarg, &j->timeout_s) != 0)
                return EXIT_USAGE;
            break;
        case OPT_NNODES:
            if (parse_int("--nnodes", optarg, 1, NV_BOOT_MAX_NODES, &j->nnodes) != 0)
                return EXIT_USAGE;
            break;
        case OPT_NODE_RANK:
            if (parse_int("--node-rank", optarg, 0, NV_BOOT_MAX_NODES - 1, &j->node) != 0)
                return EXIT_USAGE;
            node_given = 1;
            break;
        case OPT_RENDEZVOUS: j->rendezvous = optarg; break;
        case OPT_SECRET_FILE: j->secret_file = optarg; break;
        case OPT_RDV_TIMEOUT:
            if (parse_seconds("--rendezvous-timeout", optarg, &j->rdv_timeout_s) != 0)
                return EXIT_USAGE;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (j->np == 0) {
        fprintf(stderr, "netvm run: -n N is required\n\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    if (optind >= argc) {
        fprintf(stderr, "netvm run: no program to run\n\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    j->argv = argv + optind;
    return check_multi(j, node_given);
}

/* The job secret: a multi-host job must be given one (every host the
 * same); a single-host job makes a fresh one unless given a file. */
static int get_secret(struct job *j)
{
    char err[512];
    if (j->secret_file) {
        if (nv_secret_read_file(j->secret_file, j->secret, err, sizeof err) != 0) {
            fprintf(stderr, "netvm run: --secret-file %s\n", err);
            return EXIT_USAGE;
        }
        return -1;
    }
    if (multi(j)) {
        const char *v = getenv("NETVM_SECRET");
        if (!v || !*v) {
            fprintf(stderr, "netvm run: a job across %d nodes needs its secret, the same on every node: "
                            "--secret-file FILE (64 hex digits, e.g. from `openssl rand -hex 32`) or "
                            "NETVM_SECRET in the environment\n", j->nnodes);
            return EXIT_USAGE;
        }
        if (nv_secret_from_hex(v, strlen(v), j->secret) != 0) {
            fprintf(stderr, "netvm run: NETVM_SECRET must be %d hex digits\n", NV_BOOT_SECRET_HEX_LEN);
            return EXIT_USAGE;
        }
        return -1;
    }
    if (nv_random_bytes(j->secret, sizeof j->secret) != 0) {
        fprintf(stderr, "netvm run: getrandom: %s\n", strerror(errno));
        return 1;
    }
    return -1;
}

/* Signals become events on a signalfd; SIGPIPE (a closed stdout) must not
 * kill the launcher and, through PDEATHSIG, the whole job. */
static int setup_signals(struct job *j)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    if (sigprocmask(SIG_BLOCK, &set, &j->old_mask) != 0)
        return -1;
    signal(SIGPIPE, SIG_IGN);
    j->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    return j->sfd < 0 ? -1 : 0;
}

/* A job of N ranks with tagged output holds 2N pipes and N sockets. */
static void raise_fd_limit(struct job *j)
{
    getrlimit(RLIMIT_NOFILE, &j->old_nofile);
    struct rlimit rl = j->old_nofile;
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* A job id for a job this launcher heads (a single host, or the hub). */
static int make_job_id(struct job *j)
{
    uint8_t id[4];
    if (nv_random_bytes(id, sizeof id) != 0) {
        fprintf(stderr, "netvm run: getrandom: %s\n", strerror(errno));
        return -1;
    }
    snprintf(j->job_id, sizeof j->job_id, "%d-%02x%02x%02x%02x", (int)getpid(), id[0], id[1], id[2], id[3]);
    return 0;
}

/* A node: meet the hub before anything else; returns an exit status, or -1
 * once this node may start. Signals still have their default effect here:
 * nothing has been started that an interrupted launcher could leave behind. */
static int join_rendezvous(struct job *j)
{
    int ms = (int)(j->rdv_timeout_s * 1000);
    struct nv_rendezvous_opts o = { .addr = j->rendezvous, .node = j->node, .nnodes = j->nnodes,
                                    .nlocal = j->np, .flags = j->keep_going ? NV_BOOT_NODE_KEEP_GOING : 0,
                                    .secret = j->secret, .timeout_ms = ms };
    struct nv_rendezvous r;
    char err[512];
    int code;
    if (nv_rendezvous_join(&o, &r, err, sizeof err) != 0) {
        fprintf(stderr, "netvm run: node %d: %s\n", j->node, err);
        return 1;
    }
    nv_info("run: node %d joined the rendezvous at %s as %s; waiting for the others", j->node, j->rendezvous,
            r.local_ip);
    /* node 0 waits at most as long for the rest, counted from before we joined */
    if (nv_rendezvous_wait_start(&r, ms + RDV_MARGIN_MS, &code, err, sizeof err) != 0) {
        fprintf(stderr, "netvm run: node %d: %s\n", j->node, err);
        return code;
    }
    j->upstream_fd = r.fd;
    snprintf(j->job_id, sizeof j->job_id, "%s", r.job_id);
    snprintf(j->tcp_addr, sizeof j->tcp_addr, "%s", r.local_ip);
    return -1;
}

static int setup(struct job *j)
{
    struct nv_boot_server_opts o = {
        .size = j->size, .job_id = j->job_id, .secret = j->secret,
        .nnodes = multi(j) ? j->nnodes : 0, .node = j->node, .nlocal = j->np,
        .flags = j->keep_going ? NV_BOOT_NODE_KEEP_GOING : 0,
        .listen = j->rendezvous, .upstream_fd = j->upstream_fd,
    };
    netvm_status_t st = nv_boot_server_create(&j->srv, &o);
    j->upstream_fd = -1;        /* the server's now, whatever happened */
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm run: cannot start the bootstrap server: %s\n", netvm_strerror(st));
        return -1;
    }
    j->ep = epoll_create1(EPOLL_CLOEXEC);
    j->timeout_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    j->grace_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    j->rdv_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (j->ep < 0 || j->timeout_fd < 0 || j->grace_fd < 0 || j->rdv_fd < 0 || setup_signals(j) != 0 ||
        watch(j->ep, j->sfd, TAG_SIGNAL) || watch(j->ep, nv_boot_server_fd(j->srv), TAG_BOOT) ||
        watch(j->ep, j->timeout_fd, TAG_TIMEOUT) || watch(j->ep, j->grace_fd, TAG_GRACE) ||
        watch(j->ep, j->rdv_fd, TAG_RDV)) {
        fprintf(stderr, "netvm run: cannot set up the event loop: %s\n", strerror(errno));
        return -1;
    }
    if (j->timeout_s > 0)
        arm_timer(j->timeout_fd, j->timeout_s);
    if (is_hub(j))
        arm_timer(j->rdv_fd, j->rdv_timeout_s);
    j->ranks = calloc((size_t)j->np, sizeof *j->ranks);
    if (!j->ranks)
        return -1;
    for (int r = 0; r < j->np; r++)
        j->ranks[r].out[0].fd = j->ranks[r].out[1].fd = -1;
    return 0;
}

static void cleanup(struct job *j)
{
    if (j->ranks)
        for (int r = 0; r < j->np; r++)
            for (int w = 0; w < 2; w++) {
                if (j->ranks[r].out[w].fd >= 0)
                    close(j->ranks[r].out[w].fd);
                free(j->ranks[r].out[w].buf);
            }
    free(j->ranks);
    free_environment(j->envp);
    nv_boot_server_destroy(j->srv);
    int fds[] = { j->ep, j->sfd, j->timeout_fd, j->grace_fd, j->rdv_fd, j->upstream_fd };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(j->path);
    explicit_bzero(j->secret, sizeof j->secret);
    sigprocmask(SIG_SETMASK, &j->old_mask, NULL);
}

static int exit_status(const struct job *j, int ok)
{
    if (j->forced_status >= 0)
        return j->forced_status;
    if (!ok)
        return 1;
    return j->first_status >= 0 ? j->first_status : 0;
}

int nv_cmd_run(int argc, char **argv)
{
    nv_log_init_from_env();
    struct job j = { .ep = -1, .sfd = -1, .timeout_fd = -1, .grace_fd = -1, .rdv_fd = -1, .upstream_fd = -1,
                     .first_status = -1, .forced_status = -1, .self = getpid(),
                     .rdv_timeout_s = RDV_TIMEOUT_S };
    sigprocmask(SIG_SETMASK, NULL, &j.old_mask);
    int rc = parse_args(&j, argc, argv);
    if (rc < 0)
        rc = get_secret(&j);
    if (rc < 0 && !(j.path = resolve_program(j.argv[0])))
        rc = EXIT_NOEXEC;
    if (rc >= 0) {
        explicit_bzero(j.secret, sizeof j.secret);
        return rc;
    }
    raise_fd_limit(&j);
    j.first_rank = multi(&j) ? j.node * j.np : 0;
    j.size = multi(&j) ? j.nnodes * j.np : j.np;
    if (multi(&j) && j.node > 0)
        rc = join_rendezvous(&j);
    else if (make_job_id(&j) != 0)
        rc = 1;
    if (!multi(&j))
        snprintf(j.tcp_addr, sizeof j.tcp_addr, "127.0.0.1");
    if (rc >= 0) {
        cleanup(&j);
        return rc;
    }
    int ok = setup(&j) == 0;
    if (ok && !is_hub(&j))
        launch(&j);
    if (ok)
        loop(&j);       /* also after a failed start: reap what was started */
    rc = exit_status(&j, ok);
    if (ok && multi(&j)) {
        /* the others must hear how this host ended before it goes */
        if (!is_hub(&j))
            nv_boot_server_node_done(j.srv, rc);
        nv_boot_server_flush(j.srv, FLUSH_MS);
    }
    cleanup(&j);
    return rc;
}
