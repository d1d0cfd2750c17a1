/* netvm gmem run: an unmodified program with its large allocations in
 * network memory (docs/gmem-run.md). Checks that the user can have
 * userfaultfd, starts memory servers on loopback unless some are named,
 * runs the program with the interposer (LD_PRELOAD) and the servers and
 * credential in its environment (the credential in a file only the user
 * can read), forwards signals, prints a summary, stops the servers and
 * exits with the program's status. */
#define _GNU_SOURCE
#include "commands.h"
#include "gmem/region_int.h"
#include "gmem/servers.h"
#include "gmem_stat.h"
#include "util/config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NV_GMRUN_MAX_SERVERS 8

struct gmrun {
    const char *budget, *servers, *cred_file, *threshold, *reserve, *server_size;
    int         nservers, quiet;
    char      **prog;
    char        dir[4096];
    pid_t       memd[NV_GMRUN_MAX_SERVERS];
    int         nmemd;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: netvm gmem run [options] [--] PROGRAM ARGS...\n"
            "  runs PROGRAM with its large allocations in network memory (an LD_PRELOAD interposer)\n"
            "  --budget B           bytes of the program's memory resident locally at most (NETVM_GMEM_BUDGET)\n"
            "  --servers LIST       memory servers tcp:HOST:PORT,... (NETVM_GMEM_SERVERS); none: N are\n"
            "                       started on loopback for the run\n"
            "  --credential-file F  the named servers' credential (NETVM_GMEM_CREDENTIAL_FILE)\n"
            "  --local-servers N    servers started when none are named (default 2)\n"
            "  --server-size S      pool of each started server (default: a quarter of this machine's memory)\n"
            "  --threshold T        allocations of at least T bytes go to network memory (default 1M;\n"
            "                       NETVM_GMEM_THRESHOLD)\n"
            "  --reserve R          address space of the program's region (default 4 x memory;\n"
            "                       NETVM_GMEM_RESERVE)\n"
            "  --quiet              no summary on exit\n"
            "sizes take K, M, G or T. Live statistics: netvm stat gmem:PID\n");
}

static int check_size(const char *what, const char *v)
{
    long long x;
    if (nv_parse_size(v, &x) != 0 || x <= 0) {
        fprintf(stderr, "netvm gmem run: %s %s is not a size\n", what, v);
        return -1;
    }
    return 0;
}

static int parse(struct gmrun *o, int argc, char **argv)
{
    o->nservers = 2;
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-')
            break;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            o->quiet = 1;
            continue;
        }
        if (!v) {
            fprintf(stderr, "netvm gmem run: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--budget") && !check_size(a, v))
            o->budget = v;
        else if (!strcmp(a, "--servers"))
            o->servers = v;
        else if (!strcmp(a, "--credential-file"))
            o->cred_file = v;
        else if (!strcmp(a, "--threshold") && !check_size(a, v))
            o->threshold = v;
        else if (!strcmp(a, "--reserve") && !check_size(a, v))
            o->reserve = v;
        else if (!strcmp(a, "--server-size") && !check_size(a, v))
            o->server_size = v;
        else if (!strcmp(a, "--local-servers") && atoi(v) >= 1 && atoi(v) <= NV_GMRUN_MAX_SERVERS)
            o->nservers = atoi(v);
        else {
            fprintf(stderr, "netvm gmem run: bad option %s %s\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (i >= argc) {
        usage(stderr);
        return 2;
    }
    o->prog = argv + i;
    return -1;
}

/* The interposer: NETVM_GMEM_PRELOAD, else the one built beside this
 * netvm binary (this build tree's, or the installed one). */
static const char *preload_path(void)
{
    const char *env = getenv("NETVM_GMEM_PRELOAD");
    if (env && *env)
        return access(env, R_OK) == 0 ? env : NULL;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = 0;
#ifdef NV_GMEM_PRELOAD_BUILD
    if (!strcmp(self, NV_NETVM_TOOL_BUILD) && access(NV_GMEM_PRELOAD_BUILD, R_OK) == 0)
        return NV_GMEM_PRELOAD_BUILD;
#endif
#ifdef NV_GMEM_PRELOAD_INSTALLED
    if (access(NV_GMEM_PRELOAD_INSTALLED, R_OK) == 0)
        return NV_GMEM_PRELOAD_INSTALLED;
#endif
#ifdef NV_GMEM_PRELOAD_BUILD
    if (access(NV_GMEM_PRELOAD_BUILD, R_OK) == 0)
        return NV_GMEM_PRELOAD_BUILD;
#endif
    return NULL;
}

static void cleanup_dir(const char *dir)
{
    if (!dir[0])
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                unlinkat(dirfd(d), e->d_name, 0);
        closedir(d);
    }
    rmdir(dir);
}

/* Run directories of runs that died without cleaning up (SIGKILL): this
 * user's netvm-gmem-run.PID whose PID is gone (or is this process, which
 * has not made its own yet). Each holds a credential: not left lying. */
static void sweep_stale_dirs(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid;
        char end;
        if (sscanf(e->d_name, "netvm-gmem-run.%d%c", &pid, &end) != 1 || pid <= 0)
            continue;
        struct stat sb;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(sb.st_mode) ||
            sb.st_uid != getuid())
            continue;
        if (pid != (int)getpid() && (kill(pid, 0) == 0 || errno != ESRCH))
            continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        cleanup_dir(path);
    }
    closedir(d);
}

static void stop_servers(struct gmrun *o)
{
    for (int i = 0; i < o->nmemd; i++)
        kill(o->memd[i], SIGTERM);
    for (int i = 0; i < o->nmemd; i++)
        while (waitpid(o->memd[i], NULL, 0) < 0 && errno == EINTR) {
        }
    o->nmemd = 0;
}

/* Start the servers, with a fresh credential in dir/credential (mode 600):
 * the program reads it from there, never from argv or the environment. */
static int start_servers(struct gmrun *o, char *list, size_t cap)
{
    uint8_t cred[32];
    if (getrandom(cred, sizeof cred, 0) != (ssize_t)sizeof cred) {
        fprintf(stderr, "netvm gmem run: getrandom: %s\n", strerror(errno));
        return -1;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/credential", o->dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, cred, sizeof cred) != (ssize_t)sizeof cred || close(fd) != 0) {
        fprintf(stderr, "netvm gmem run: cannot write %s: %s\n", path, strerror(errno));
        return -1;
    }
    setenv("NETVM_GMEM_CREDENTIAL_FILE", path, 1);
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "netvm gmem run: cannot find the netvm binary (/proc/self/exe)\n");
        return -1;
    }
    self[n] = 0;
    char size[32];
    if (o->server_size) {
        snprintf(size, sizeof size, "%s", o->server_size);
    } else {
        /* a quarter of memory: a pool is touched only as it is used, but
         * memd's per-page tables are made whole at its start */
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        snprintf(size, sizeof size, "%lld", (long long)pages / 4 * psz);
    }
    list[0] = 0;
    for (int i = 0; i < o->nservers; i++) {
        char addr[NV_GM_ADDR_MAX];
        pid_t pid;
        if (nv_gm_memd_spawn(self, size, cred, sizeof cred, addr, &pid) != NETVM_OK) {
            fprintf(stderr, "netvm gmem run: cannot start a memory server (netvm memd)\n");
            return -1;
        }
        o->memd[o->nmemd++] = pid;
        size_t used = strlen(list);
        snprintf(list + used, cap - used, "%s%s", used ? "," : "", addr);
    }
    memset(cred, 0, sizeof cred);
    return 0;
}

static int set_env(struct gmrun *o, const char *preload)
{
    const char *old = getenv("LD_PRELOAD");
    char *lp;
    if (asprintf(&lp, "%s%s%s", preload, old && *old ? ":" : "", old ? old : "") < 0)
        return -1;
    setenv("LD_PRELOAD", lp, 1);
    free(lp);
    if (o->budget)
        setenv("NETVM_GMEM_BUDGET", o->budget, 1);
    if (o->threshold)
        setenv("NETVM_GMEM_THRESHOLD", o->threshold, 1);
    if (o->reserve)
        setenv("NETVM_GMEM_RESERVE", o->reserve, 1);
    setenv("NETVM_GMEM_STATS_DIR", o->dir, 1);
    /* tcmalloc takes memory with sbrk unless told not to; through mmap it
     * can be put in network memory */
    setenv("TCMALLOC_SKIP_SBRK", "true", 0);
    return 0;
}

static void summary(struct gmrun *o, int status, double secs)
{
    fprintf(stderr, "netvm gmem run: %s ", o->prog[0]);
    if (WIFEXITED(status))
        fprintf(stderr, "exited with status %d", WEXITSTATUS(status));
    else
        fprintf(stderr, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    fprintf(stderr, " after %.2f s\n", secs);
    DIR *d = opendir(o->dir);
    int n = 0;
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t l = strlen(e->d_name), sl = strlen(NVP_STATS_SUFFIX);
            if (l <= sl || strcmp(e->d_name + l - sl, NVP_STATS_SUFFIX))
                continue;
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", o->dir, e->d_name);
            struct nvp_stats_file s;
            if (nvp_stats_read(p, &s) == 0) {
                nv_gmem_stats_print(stderr, &s);
                n++;
            }
        }
        closedir(d);
    }
    if (!n)
        fprintf(stderr, "  no process of it used network memory (nothing of at least the threshold was "
                        "allocated)\n");
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int run(struct gmrun *o)
{
    char why[600];
    if (nv_gmem_check_support(why, sizeof why) != NETVM_OK) {
        fprintf(stderr, "netvm gmem run: network memory is not available to this user:\n  %s\n"
                        "  (docs/gmem-run.md, \"Non-root users\"); the program was not started\n", why);
        return 1;
    }
    const char *preload = preload_path();
    if (!preload) {
        fprintf(stderr, "netvm gmem run: the interposer libnetvm-gmem-preload.so was not found (install netvm, or "
                        "set NETVM_GMEM_PRELOAD)\n");
        return 1;
    }
    sweep_stale_dirs(nv_gmem_stats_base());
    snprintf(o->dir, sizeof o->dir, "%s/netvm-gmem-run.%d", nv_gmem_stats_base(), (int)getpid());
    if (mkdir(o->dir, 0700) != 0) {
        fprintf(stderr, "netvm gmem run: cannot make %s: %s\n", o->dir, strerror(errno));
        o->dir[0] = 0;
        return 1;
    }
    const char *servers = o->servers ? o->servers : getenv("NETVM_GMEM_SERVERS");
    char list[NV_GMRUN_MAX_SERVERS * (NV_GM_ADDR_MAX + 1)];
    if (servers && *servers) {
        const char *cf = o->cred_file ? o->cred_file : getenv("NETVM_GMEM_CREDENTIAL_FILE");
        if (!cf || !*cf) {
            fprintf(stderr, "netvm gmem run: servers are named but no credential: --credential-file or "
                            "NETVM_GMEM_CREDENTIAL_FILE\n");
            return 1;
        }
        setenv("NETVM_GMEM_CREDENTIAL_FILE", cf, 1);
        setenv("NETVM_GMEM_SERVERS", servers, 1);
    } else {
        if (start_servers(o, list, sizeof list) != 0)
            return 1;
        setenv("NETVM_GMEM_SERVERS", list, 1);
    }
    if (set_env(o, preload) != 0)
        return 1;

    sigset_t set, old;
    sigemptyset(&set);
    int fwd[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCONT, SIGWINCH };
    for (size_t i = 0; i < sizeof fwd / sizeof fwd[0]; i++)
        sigaddset(&set, fwd[i]);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);
    double t0 = now_s();
    pid_t child = fork();
    if (child < 0) {
        fprintf(stderr, "netvm gmem run: fork: %s\n", strerror(errno));
        return 1;
    }
    if (child == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        execvp(o->prog[0], o->prog);
        fprintf(stderr, "netvm gmem run: cannot run %s: %s\n", o->prog[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0)
            continue;
        if (sig == SIGCHLD) {
            pid_t w = waitpid(child, &status, WNOHANG);
            if (w == child)
                break;
            continue;
        }
        /* a signal the terminal sent reached the program's process group
         * already; one sent to this process is passed on */
        if (si.si_code == SI_USER || si.si_code == SI_QUEUE || si.si_code == SI_TKILL)
            kill(child, sig);
    }
    double secs = now_s() - t0;
    if (!o->quiet)
        summary(o, status, secs);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int gmem_run(int argc, char **argv)
{
    struct gmrun o;
    memset(&o, 0, sizeof o);
    int rc = parse(&o, argc, argv);
    if (rc >= 0)
        return rc;
    rc = run(&o);
    stop_servers(&o);
    cleanup_dir(o.dir);
    return rc;
}

int nv_cmd_gmem(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "run"))
        return gmem_run(argc - 1, argv + 1);
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
        usage(stdout);
        return 0;
    }
    usage(stderr);
    return 2;
}
