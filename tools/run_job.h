/* The launcher's job: what `netvm run` knows of the ranks it starts, shared
 * by its parts (tools/run.c: the event loop and the job's life;
 * run_args.c: the command line and the secret; run_spawn.c: the program,
 * the ranks' environment and their start; run_output.c: --tag-output). */
#ifndef NV_TOOLS_RUN_JOB_H
#define NV_TOOLS_RUN_JOB_H

#include "boot/secret.h"
#include "boot/server.h"
#include "boot/tcp.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

#define MAX_RANKS      1024
#define GRACE_MS       2000     /* SIGTERM, then SIGKILL this much later */
#define LINE_MAX_BYTES 65536    /* --tag-output breaks longer lines */
#define EXIT_NOEXEC    127
#define EXIT_TIMEOUT   124      /* as timeout(1) */
#define EXIT_USAGE     2
#define RDV_TIMEOUT_S  30.0     /* default --rendezvous-timeout */
#define RDV_MARGIN_MS  5000     /* a node waits this much longer than node 0 for the start */
#define FLUSH_MS       5000     /* a launcher's last words to the others, at most */

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
    int          stack_traces;   /* at the timeout, show where each rank is */
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
static inline int multi(const struct job *j) { return j->nnodes > 1; }
static inline int is_hub(const struct job *j) { return multi(j) && j->node == 0; }

/* run.c */
int  run_write_all(int fd, const void *p, size_t len);
int  run_watch(int ep, int fd, uint64_t tag);

/* run_args.c: exit status EXIT_USAGE (or 0 after --help) when it fails */
void run_usage(FILE *f);
int  run_parse_args(struct job *j, int argc, char **argv);
int  run_get_secret(struct job *j);

/* run_spawn.c */
char  *run_find_program(const char *prog);
char  *run_resolve_program(const char *prog);
char **run_job_environment(const struct job *j);
void   run_free_environment(char **envp);
int    run_start_ranks(struct job *j, char **envp);

/* run_stacks.c */
void run_stack_traces(const struct job *j);

/* run_output.c */
void run_tag_close(struct job *j, struct tagger *t);
void run_tag_read(struct job *j, struct tagger *t);

#endif
