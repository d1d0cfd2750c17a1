/* netvm run --stack-traces: where the ranks of a job that outlived its
 * --timeout are, printed before they are terminated (Open MPI's mpirun
 * offers the same with --get-stack-traces). A hang that happens once in
 * a hundred runs of a test suite can then be diagnosed from the one log
 * it left. What is shown of each rank: stacks.c. */
#include "commands.h"
#include "run_job.h"

#include <stdio.h>
#include <stdlib.h>

void run_stack_traces(const struct job *j)
{
    char *gdb = run_find_program("gdb");   /* (run_spawn.c) */
    for (int r = 0; r < j->np; r++) {
        const struct rank_proc *rp = &j->ranks[r];
        if (rp->pid <= 0 || rp->reaped)
            continue;
        fprintf(stderr, "netvm run: rank %d (pid %d) at the timeout:\n", j->first_rank + r, (int)rp->pid);
        nv_stacks_print(rp->pid, "netvm run", gdb, &j->old_mask);
    }
    if (!gdb)
        fprintf(stderr, "netvm run: no gdb on PATH: the ranks' backtraces are not shown\n");
    free(gdb);
}
