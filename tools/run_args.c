/* netvm run's command line: options, their checks, and the job secret. */
#define _GNU_SOURCE
#include "run_job.h"
#include "boot/secret.h"
#include "util/log.h"
#include "util/random.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void run_usage(FILE *f)
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
        "      --stack-traces   at the timeout, first show each rank's threads: state,\n"
        "                       wait channel and, with gdb on PATH, backtraces (also\n"
        "                       NETVM_RUN_STACK_TRACES=1)\n"
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

enum { OPT_NNODES = 256, OPT_NODE_RANK, OPT_RENDEZVOUS, OPT_SECRET_FILE, OPT_RDV_TIMEOUT, OPT_STACKS };

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
    if (nv_boot_tcp_split(j->rendezvous, host, sizeof host, port, sizeof port, err, sizeof err) != 0) {
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

int run_parse_args(struct job *j, int argc, char **argv)
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
        { "stack-traces", no_argument,      NULL, OPT_STACKS },
        { NULL, 0, NULL, 0 },
    };
    optind = 1;
    int c, node_given = 0;
    /* the environment's form, for a test suite that starts many jobs */
    const char *st = getenv("NETVM_RUN_STACK_TRACES");
    j->stack_traces = st && *st && strcmp(st, "0") != 0;
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
        case OPT_STACKS: j->stack_traces = 1; break;
        case OPT_SECRET_FILE: j->secret_file = optarg; break;
        case OPT_RDV_TIMEOUT:
            if (parse_seconds("--rendezvous-timeout", optarg, &j->rdv_timeout_s) != 0)
                return EXIT_USAGE;
            break;
        case 'h':
            run_usage(stdout);
            return 0;
        default:
            run_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (j->np == 0) {
        fprintf(stderr, "netvm run: -n N is required\n\n");
        run_usage(stderr);
        return EXIT_USAGE;
    }
    if (optind >= argc) {
        fprintf(stderr, "netvm run: no program to run\n\n");
        run_usage(stderr);
        return EXIT_USAGE;
    }
    j->argv = argv + optind;
    return check_multi(j, node_given);
}

/* The job secret: a multi-host job must be given one (every host the
 * same); a single-host job makes a fresh one unless given a file. */
int run_get_secret(struct job *j)
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
        /* taken out of the launcher's environment: the ranks get it from
         * the job's environment (run_spawn.c), nothing else should */
        int rc = nv_secret_take_env(j->secret);
        if (rc < 0) {
            fprintf(stderr, "netvm run: a job across %d nodes needs its secret, the same on every node: "
                            "--secret-file FILE (64 hex digits, e.g. from `openssl rand -hex 32`) or "
                            "NETVM_SECRET in the environment\n", j->nnodes);
            return EXIT_USAGE;
        }
        if (rc != 0) {
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
