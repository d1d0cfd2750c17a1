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
#include "run_job.h"
#include "commands.h"
#include "boot/rendezvous.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

/* --- small helpers ------------------------------------------------------ */

int run_write_all(int fd, const void *p, size_t len)
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

int run_watch(int ep, int fd, uint64_t tag)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.u64 = tag };
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
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
    if (!(j->envp = run_job_environment(j))) {
        fprintf(stderr, "netvm run: out of memory\n");
        j->forced_status = 1;
        tell_others(j, -1, 1, what);
        return;
    }
    if (run_start_ranks(j, j->envp) != 0) {
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
    if (j->stack_traces)
        run_stack_traces(j);
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
                run_tag_read(j, &j->ranks[k / 2].out[k % 2]);
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
            run_tag_read(j, t);
            if (t->fd >= 0)
                run_tag_close(j, t);
        }
    return 0;
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
        run_watch(j->ep, j->sfd, TAG_SIGNAL) || run_watch(j->ep, nv_boot_server_fd(j->srv), TAG_BOOT) ||
        run_watch(j->ep, j->timeout_fd, TAG_TIMEOUT) || run_watch(j->ep, j->grace_fd, TAG_GRACE) ||
        run_watch(j->ep, j->rdv_fd, TAG_RDV)) {
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
    run_free_environment(j->envp);
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
    int rc = run_parse_args(&j, argc, argv);
    if (rc < 0)
        rc = run_get_secret(&j);
    if (rc < 0 && !(j.path = run_resolve_program(j.argv[0])))
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
