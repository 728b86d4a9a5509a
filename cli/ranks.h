/* ranks: `ckplan run PLAN --ranks N`, which starts N processes of ckplan-rank (mpi/rank.c,
 * the one program built with MPI) under OpenMPI's mpirun on this machine and waits for
 * them. The ranks print their own figures and errors; mpirun aborts the job when one
 * fails or is killed, so that none waits for it. */
#ifndef CK_RANKS_H
#define CK_RANKS_H

#include <stdbool.h>
#include <stdint.h>

#include "planner/err.h"

typedef struct {
    const char *plan_path;
    uint64_t ranks, steps, seed, threads; /* threads 0: one a rank */
    bool verify, quiet;
} ck_ranks_run;

/* Runs the ranks: CK_OK when they all succeeded, else the status they exited with (1 a
 * check or a rank failed, 2 an input error), with err saying so. CK_ERR_INPUT, before
 * starting anything, when mpirun or ckplan-rank is missing, saying how to get them. */
int ck_ranks_launch(const ck_ranks_run *r, ck_err *err);

#endif
