/* netvm run: the launcher. Starts N copies of a program as the ranks of one
 * job, serves their bootstrap (src/boot/server.h), and watches them so that
 * one rank's death never leaves the others hanging: by default the job is
 * torn down; with --keep-going the survivors' collectives fail with
 * NETVM_ERR_PEER instead.
 *
 * One thread, one epoll loop: signals arrive through a signalfd, the boot
 * server is one pollable fd, --tag-output reads the ranks' pipes, and the
 * two deadlines (--timeout, the grace period before SIGKILL) are timerfds.
 * Nothing polls on a clock. */
#define _GNU_SOURCE
#include "commands.h"
#include "boot/server.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
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

extern char **environ;

/* epoll tags; a rank's output pipes are TAG_PIPE + 2*rank (+1 for stderr) */
enum { TAG_SIGNAL, TAG_BOOT, TAG_TIMEOUT, TAG_GRACE, TAG_PIPE };

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
    int          np;
    int          tag;
    int          keep_going;
    double       timeout_s;
    char       **argv;
    char        *path;           /* the program, resolved once */
    /* state */
    struct rank_proc *ranks;
    pid_t        pgid;
    pid_t        self;
    int          ep, sfd, timeout_fd, grace_fd;
    nv_boot_server_t *srv;
    int          nlive;          /* ranks not reaped yet */
    int          first_status;   /* exit status of the first rank that failed, else -1 */
    int          forced_status;  /* the launcher ended the job (signal, timeout), else -1 */
    int          terminating;
    sigset_t     old_mask;
    struct rlimit old_nofile;
};

/* --- small helpers ------------------------------------------------------ */

static void usage(FILE *f)
{
    fprintf(f,
        "usage: netvm run -n N [options] [--] PROGRAM [ARGS...]\n"
        "\n"
        "Start N processes of PROGRAM as the ranks 0..N-1 of one netvm job.\n"
        "\n"
        "options:\n"
        "  -n, --np N           number of ranks, 1..%d (required)\n"
        "  -t, --tag-output     prefix each line of the ranks' output with \"[RANK] \"\n"
        "  -k, --keep-going     when a rank fails, let the others run on (their\n"
        "                       collectives return NETVM_ERR_PEER); the job still fails\n"
        "      --timeout SECS   terminate the job after SECS seconds (exit status %d)\n"
        "  -h, --help           show this help\n"
        "\n"
        "Exit status: 0 if every rank exited 0, else the status of the first rank\n"
        "that failed (its exit code, or 128+signal); %d if PROGRAM cannot be run;\n"
        "130/143 when the launcher was interrupted/terminated. See docs/launcher.md.\n",
        MAX_RANKS, EXIT_TIMEOUT, EXIT_NOEXEC);
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

static int is_job_var(const char *kv)
{
    static const char *const vars[] = { "NETVM_RANK=", "NETVM_SIZE=", "NETVM_JOB_ID=",
                                        "NETVM_SECRET=", "NETVM_BOOT=" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (strncmp(kv, vars[i], strlen(vars[i])) == 0)
            return 1;
    return 0;
}

/* environ without any inherited job variables, plus this job's. envp[0] is
 * the NETVM_RANK entry, rewritten before each fork. */
static char **job_environment(const struct job *j, const char *job_id, const char *secret_hex,
                              char *rank_buf)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 6, sizeof *envp);
    if (!envp)
        return NULL;
    size_t k = 0;
    envp[k++] = rank_buf;
    if (asprintf(&envp[k++], "NETVM_SIZE=%d", j->np) < 0 ||
        asprintf(&envp[k++], "NETVM_JOB_ID=%s", job_id) < 0 ||
        asprintf(&envp[k++], "NETVM_SECRET=%s", secret_hex) < 0 ||
        asprintf(&envp[k++], "NETVM_BOOT=%s", nv_boot_server_addr(j->srv)) < 0) {
        envp[k - 1] = NULL;
        for (size_t i = 1; i < k; i++)
            free(envp[i]);
        free(envp);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!is_job_var(environ[i]))
            envp[k++] = environ[i];
    return envp;
}

static void free_environment(char **envp)
{
    if (!envp)
        return;
    for (int i = 1; i <= 4; i++) {
        if (i == 3)
            explicit_bzero(envp[i], strlen(envp[i]));   /* the secret */
        free(envp[i]);
    }
    free(envp);
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
    if (rank != 0 || isatty(STDIN_FILENO)) {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0 && nul != STDIN_FILENO) {
            dup2(nul, STDIN_FILENO);
            close(nul);
        }
    }
    execve(j->path, j->argv, envp);
    /* rare, since the program was checked before any fork (it changed since) */
    char msg[512];
    int n = snprintf(msg, sizeof msg, "netvm run: rank %d: cannot execute %s: %s\n", rank, j->path,
                     strerror(errno));
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
    t->rank = rank;
    *child_end = p[1];
    return watch(j->ep, p[0], TAG_PIPE + 2 * (uint64_t)rank + (uint64_t)which);
}

static int start_ranks(struct job *j, char **envp, char *rank_buf, size_t rank_cap)
{
    for (int r = 0; r < j->np; r++) {
        int out_fd = -1, err_fd = -1;
        if (j->tag && (open_pipe(j, r, 0, &out_fd) != 0 || open_pipe(j, r, 1, &err_fd) != 0)) {
            fprintf(stderr, "netvm run: cannot create pipes: %s\n", strerror(errno));
            if (out_fd >= 0)
                close(out_fd);
            return -1;
        }
        snprintf(rank_buf, rank_cap, "NETVM_RANK=%d", r);
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

/* --- events ------------------------------------------------------------------------ */

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
    p->reaped = 1;
    j->nlive--;
    int code = status_code(wstatus);
    nv_boot_server_rank_exited(j->srv, r, code == 0);
    if (code == 0)
        return;
    if (j->first_status < 0)
        j->first_status = code;
    if (j->terminating)
        return;     /* an expected casualty of the teardown */
    char how[96];
    describe_exit(how, sizeof how, wstatus);
    fprintf(stderr, "netvm run: rank %d (pid %d) %s; %s\n", r, (int)p->pid, how,
            j->keep_going ? "the others go on (--keep-going)" : "terminating the job");
    if (!j->keep_going)
        terminate(j, SIGTERM);
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
    terminate(j, SIGTERM);
}

static void on_grace(struct job *j)
{
    uint64_t ticks;
    if (read(j->grace_fd, &ticks, sizeof ticks) < 0)
        return;
    int left = 0;
    for (int r = 0; r < j->np; r++)
        left += !j->ranks[r].reaped;
    if (left)
        fprintf(stderr, "netvm run: %d rank%s still running after %d ms; killing\n", left,
                left == 1 ? "" : "s", GRACE_MS);
    signal_job(j, SIGKILL);
}

static int loop(struct job *j)
{
    while (j->nlive > 0) {
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
            case TAG_BOOT:    nv_boot_server_progress(j->srv); break;
            case TAG_TIMEOUT: on_timeout(j); break;
            case TAG_GRACE:   on_grace(j); break;
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
            tag_read(j, t);
            if (t->fd >= 0)
                tag_close(j, t);
        }
    return 0;
}

/* --- setting up ------------------------------------------------------------------------- */

static int parse_args(struct job *j, int argc, char **argv)
{
    static const struct option opts[] = {
        { "np",          required_argument, NULL, 'n' },
        { "tag-output",  no_argument,       NULL, 't' },
        { "keep-going",  no_argument,       NULL, 'k' },
        { "timeout",     required_argument, NULL, 'T' },
        { "help",        no_argument,       NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    optind = 1;
    int c;
    char *end;
    /* '+': the first non-option is PROGRAM; what follows belongs to it */
    while ((c = getopt_long(argc, argv, "+n:tkh", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            errno = 0;
            long n = strtol(optarg, &end, 10);
            if (errno || *end || end == optarg || n < 1 || n > MAX_RANKS) {
                fprintf(stderr, "netvm run: -n wants a number of ranks in 1..%d, not '%s'\n", MAX_RANKS, optarg);
                return 2;
            }
            j->np = (int)n;
            break;
        }
        case 't': j->tag = 1; break;
        case 'k': j->keep_going = 1; break;
        case 'T':
            errno = 0;
            j->timeout_s = strtod(optarg, &end);
            if (errno || *end || end == optarg || !(j->timeout_s > 0) || j->timeout_s > 1e8) {
                fprintf(stderr, "netvm run: --timeout wants a positive number of seconds, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (j->np == 0) {
        fprintf(stderr, "netvm run: -n N is required\n\n");
        usage(stderr);
        return 2;
    }
    if (optind >= argc) {
        fprintf(stderr, "netvm run: no program to run\n\n");
        usage(stderr);
        return 2;
    }
    j->argv = argv + optind;
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

static int make_identity(char *job_id, size_t id_cap, char *secret_hex, uint8_t *secret)
{
    uint8_t id[4];
    if (nv_random_bytes(secret, NV_BOOT_SECRET_LEN) != 0 || nv_random_bytes(id, sizeof id) != 0) {
        fprintf(stderr, "netvm run: getrandom: %s\n", strerror(errno));
        return -1;
    }
    for (int i = 0; i < NV_BOOT_SECRET_LEN; i++)
        snprintf(secret_hex + 2 * i, 3, "%02x", secret[i]);
    snprintf(job_id, id_cap, "%d-%02x%02x%02x%02x", (int)getpid(), id[0], id[1], id[2], id[3]);
    return 0;
}

static int setup(struct job *j, char *job_id, size_t id_cap, char *secret_hex)
{
    uint8_t secret[NV_BOOT_SECRET_LEN];
    if (make_identity(job_id, id_cap, secret_hex, secret) != 0)
        return -1;
    struct nv_boot_server_opts o = { .size = j->np, .job_id = job_id, .secret = secret };
    netvm_status_t st = nv_boot_server_create(&j->srv, &o);
    explicit_bzero(secret, sizeof secret);
    if (st != NETVM_OK) {
        fprintf(stderr, "netvm run: cannot start the bootstrap server: %s\n", netvm_strerror(st));
        return -1;
    }
    j->ep = epoll_create1(EPOLL_CLOEXEC);
    j->timeout_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    j->grace_fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (j->ep < 0 || j->timeout_fd < 0 || j->grace_fd < 0 || setup_signals(j) != 0 ||
        watch(j->ep, j->sfd, TAG_SIGNAL) || watch(j->ep, nv_boot_server_fd(j->srv), TAG_BOOT) ||
        watch(j->ep, j->timeout_fd, TAG_TIMEOUT) || watch(j->ep, j->grace_fd, TAG_GRACE)) {
        fprintf(stderr, "netvm run: cannot set up the event loop: %s\n", strerror(errno));
        return -1;
    }
    if (j->timeout_s > 0)
        arm_timer(j->timeout_fd, j->timeout_s);
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
    nv_boot_server_destroy(j->srv);
    int fds[] = { j->ep, j->sfd, j->timeout_fd, j->grace_fd };
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(j->path);
    sigprocmask(SIG_SETMASK, &j->old_mask, NULL);
}

int nv_cmd_run(int argc, char **argv)
{
    nv_log_init_from_env();
    struct job j = { .ep = -1, .sfd = -1, .timeout_fd = -1, .grace_fd = -1,
                     .first_status = -1, .forced_status = -1, .self = getpid() };
    sigprocmask(SIG_SETMASK, NULL, &j.old_mask);
    int rc = parse_args(&j, argc, argv);
    if (rc >= 0)
        return rc;
    if (!(j.path = resolve_program(j.argv[0])))
        return EXIT_NOEXEC;
    raise_fd_limit(&j);

    char job_id[32], secret_hex[2 * NV_BOOT_SECRET_LEN + 1], rank_buf[32];
    char **envp = NULL;
    int ok = setup(&j, job_id, sizeof job_id, secret_hex) == 0 &&
             (envp = job_environment(&j, job_id, secret_hex, rank_buf)) != NULL;
    explicit_bzero(secret_hex, sizeof secret_hex);
    if (ok && start_ranks(&j, envp, rank_buf, sizeof rank_buf) != 0) {
        ok = 0;
        if (j.forced_status < 0)
            j.forced_status = 1;
        terminate(&j, SIGKILL);
    }
    if (j.nlive > 0)
        loop(&j);        /* also after a failed start: reap what was started */
    free_environment(envp);
    cleanup(&j);
    if (!ok && j.forced_status < 0)
        return 1;
    if (j.forced_status >= 0)
        return j.forced_status;
    return j.first_status >= 0 ? j.first_status : 0;
}
