/* ckplan-rank: one rank of `ckplan run PLAN --ranks N`, which starts N of them under
 * OpenMPI's mpirun (cli/ranks.c). Built with mpicc apart from ckplan, so that no other
 * command links MPI.
 *
 * Every rank loads the plan and its model, executes the plan's data-parallel step on its
 * own microbatch holding what its ZeRO stage keeps (sim/exec with ck_exec_opts.dp, the
 * collectives over MPI_Allgather), and sends its figures to rank 0, which prints them all.
 * With --verify rank 0 also runs the one-process reference of the same steps and checks
 * that every rank's tracked peak is its prediction to the byte and that the parameters are
 * the reference's bit for bit. A rank that fails within a step aborts the job (MPI_Abort),
 * so that no rank waits for it in a collective. */
#include <getopt.h>
#include <limits.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "cli/human.h"
#include "cli/options.h"
#include "cli/runner.h"
#include "planner/layout.h"
#include "planner/size.h"
#include "sim/blas.h"
#include "sim/exec.h"

typedef struct {
    const char *plan;
    uint64_t seed, steps, threads;
    bool verify, quiet;
} rank_args;

typedef struct {
    int rank, size;
    const char *label; /* the plan, as the user named it */
    ck_plan_file plan;
    bool have_plan;
    ck_runner_basis basis;
    ck_exec_dp dp;
    ck_exec *exec;
} rank_state;

/* One rank's figures, as rank 0 receives them. */
enum { PRED_STATIC, PRED_ACTIVATION, PRED_PEAK, STATIC, ACTIVATION, PEAK, N_FIGURES };

static void print_error(int rank, const char *msg)
{
    fprintf(stderr, "ckplan: rank %d: ", rank);
    ck_human_put_terminal_text(stderr, msg);
    fputc('\n', stderr);
}

static int parse_args(int argc, char **argv, rank_args *a, ck_err *err)
{
    enum { OPT_SEED = 1000, OPT_STEPS, OPT_THREADS, OPT_VERIFY, OPT_QUIET };
    static const struct option longs[] = {
        {"seed", required_argument, NULL, OPT_SEED},       {"steps", required_argument, NULL, OPT_STEPS},
        {"threads", required_argument, NULL, OPT_THREADS}, {"verify", no_argument, NULL, OPT_VERIFY},
        {"quiet", no_argument, NULL, OPT_QUIET},           {NULL, 0, NULL, 0},
    };
    *a = (rank_args){.seed = 1, .steps = 1};
    opterr = 0;
    int code, rc = CK_OK;
    while (rc == CK_OK && (code = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (code) {
        case OPT_SEED: rc = ck_options_parse_count(optarg, "--seed", 0, CK_EXACT_LIMIT - 1, &a->seed, err); break;
        case OPT_STEPS: rc = ck_options_parse_count(optarg, "--steps", 1, 1000, &a->steps, err); break;
        case OPT_THREADS: rc = ck_options_parse_count(optarg, "--threads", 1, 1024, &a->threads, err); break;
        case OPT_VERIFY: a->verify = true; break;
        case OPT_QUIET: a->quiet = true; break;
        default: rc = ck_err_fail(err, CK_ERR_INPUT, "ckplan-rank: unknown option %s (it is started "
                                  "by 'ckplan run --ranks N', not by hand)", argv[optind - 1]);
        }
    }
    if (rc == CK_OK && optind + 1 != argc)
        rc = ck_err_fail(err, CK_ERR_INPUT, "ckplan-rank: expected one PLAN");
    if (rc == CK_OK)
        a->plan = argv[optind];
    return rc;
}

/* The collectives of sim/shard over MPI. */
static int allgather(void *ctx, const void *send, uint64_t bytes, void *recv, ck_err *err)
{
    (void)ctx;
    if (bytes > INT_MAX)
        return ck_err_fail(err, CK_ERR_RUNTIME, "an all-gather of %llu bytes a rank is more than "
                           "MPI's int counts take", (unsigned long long)bytes);
    int rc = MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? CK_OK : ck_err_fail(err, CK_ERR_RUNTIME, "MPI_Allgather failed (%d)", rc);
}

/* The plan, its model and the rank's executor. */
static int set_up(const rank_args *a, rank_state *st, ck_err *err)
{
    st->label = a->plan;
    int rc = ck_runner_read_plan(a->plan, &st->plan, NULL, err);
    st->have_plan = rc == CK_OK;
    if (rc != CK_OK)
        return rc;
    const ck_layout *l = &st->plan.model_opts.layout;
    if (ck_layout_ranks(l) != (uint64_t)st->size)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: the plan is for --dp %llu, not %d ranks", a->plan,
                           (unsigned long long)ck_layout_ranks(l), st->size);
    /* every rank checks that the ranks together fit this machine, and all agree */
    ck_run_settings s = {.plan_path = a->plan, .label = a->plan, .ranks = (uint64_t)st->size};
    rc = ck_runner_prepare(&s, &st->plan, NULL, &st->basis, err);
    if (rc != CK_OK)
        return rc;
    const ck_workload *w = st->basis.w;
    if (!w->model)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: a chain file's plan has no parameters to run "
                           "data-parallel: --ranks runs a model's plan", a->plan);
    st->dp = (ck_exec_dp){.layout = *l, .rank = (uint64_t)st->rank, .comm = {allgather, NULL}};
    ck_exec_opts eo = {.seed = a->seed, .dp = &st->dp};
    rc = ck_exec_create(w->model, &w->chain, w->stage_first, &eo, &st->exec, err);
    if (rc == CK_ERR_INPUT) {
        char why[sizeof err->msg];
        memcpy(why, err->msg, sizeof why);
        ck_err_fail(err, rc, "%s: %s", a->plan, why);
    }
    return rc;
}

/* The ranks' worst setup status; the lowest rank that failed says why. */
static int agree(const rank_state *st, int rc, const ck_err *err)
{
    int worst = rc, first = rc != CK_OK ? st->rank : st->size;
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (first == st->rank)
        print_error(st->rank, err->msg);
    return worst;
}

/* The steps on this rank; its figures are the largest of them (static memory does not
 * change). A failure aborts every rank. */
static void run_steps(const rank_args *a, rank_state *st, uint64_t *fig)
{
    const ck_plan_figures *pred = &st->basis.check.replayed;
    fig[PRED_STATIC] = pred->static_bytes;
    fig[PRED_ACTIVATION] = pred->activation_peak_bytes;
    fig[PRED_PEAK] = pred->static_bytes + pred->activation_peak_bytes;
    fig[STATIC] = fig[ACTIVATION] = fig[PEAK] = 0;
    for (uint64_t k = 0; k < a->steps; k++) {
        ck_step_stats stats;
        ck_err err = {{0}};
        int rc = ck_exec_step(st->exec, &st->basis.schedule, ck_exec_step_rank(k, st->rank, st->size),
                              &stats, NULL, &err);
        if (rc != CK_OK) {
            print_error(st->rank, err.msg);
            MPI_Abort(MPI_COMM_WORLD, rc);
        }
        fig[STATIC] = stats.static_bytes;
        fig[ACTIVATION] = stats.activation_peak_bytes > fig[ACTIVATION] ? stats.activation_peak_bytes : fig[ACTIVATION];
        fig[PEAK] = stats.peak_bytes > fig[PEAK] ? stats.peak_bytes : fig[PEAK];
    }
}

static void print_figures(const rank_args *a, const rank_state *st, const uint64_t *all)
{
    const ck_layout *l = &st->plan.model_opts.layout;
    ck_human_put_terminal_text(stdout, st->basis.w->chain.name);
    printf(": --dp %d --zero %u, %d ranks over MPI, %llu step%s, one microbatch a rank\n\n", st->size,
           l->zero, st->size, (unsigned long long)a->steps, a->steps == 1 ? "" : "s");
    printf("  %4s  %14s %14s %14s   %14s %14s %14s\n", "", "predicted", "", "", "measured", "", "");
    printf("  %4s  %14s %14s %14s   %14s %14s %14s\n", "rank", "static", "activation", "peak",
           "static", "activation", "peak");
    for (int r = 0; r < st->size; r++) {
        const uint64_t *f = all + (size_t)r * N_FIGURES;
        printf("  %4d  %14llu %14llu %14llu   %14llu %14llu %14llu\n", r,
               (unsigned long long)f[PRED_STATIC], (unsigned long long)f[PRED_ACTIVATION],
               (unsigned long long)f[PRED_PEAK], (unsigned long long)f[STATIC],
               (unsigned long long)f[ACTIVATION], (unsigned long long)f[PEAK]);
    }
    printf("  (bytes, tracked by each rank's allocator; communication scratch is not counted)\n\n");
}

/* The ranks whose tracked peak is not their prediction, named in err; true when none. */
static bool peaks_exact(const rank_state *st, const uint64_t *all, ck_err *err)
{
    for (int r = 0; r < st->size; r++) {
        const uint64_t *f = all + (size_t)r * N_FIGURES;
        if (f[PEAK] != f[PRED_PEAK]) {
            ck_err_fail(err, CK_ERR_RUNTIME, "%s: rank %d's tracked peak is %llu bytes (static %llu, "
                        "activation %llu), not the predicted %llu (static %llu, activation %llu)",
                        st->label, r, (unsigned long long)f[PEAK],
                        (unsigned long long)f[STATIC], (unsigned long long)f[ACTIVATION],
                        (unsigned long long)f[PRED_PEAK], (unsigned long long)f[PRED_STATIC],
                        (unsigned long long)f[PRED_ACTIVATION]);
            return false;
        }
    }
    return true;
}

/* Rank 0: the one-process run of the same steps, its parameters into ref. */
static int reference(const rank_args *a, const rank_state *st, float *ref, ck_err *err)
{
    const ck_workload *w = st->basis.w;
    ck_exec *e;
    ck_exec_opts eo = {.seed = a->seed};
    int rc = ck_exec_create(w->model, &w->chain, w->stage_first, &eo, &e, err);
    for (uint64_t k = 0; k < a->steps && rc == CK_OK; k++)
        rc = ck_exec_step_reference(e, &st->basis.schedule, k, (uint64_t)st->size, err);
    if (rc == CK_OK)
        ck_exec_parameters(e, ref);
    ck_exec_free(e);
    return rc;
}

/* Rank 0's verdict on the figures and on the parameters (got: the ranks', whole). */
static int verdict(const rank_args *a, const rank_state *st, const uint64_t *all, const float *got,
                   size_t n, ck_err *err)
{
    float *ref = calloc(n + 1, sizeof *ref);
    if (!ref)
        return ck_err_oom(err);
    int rc = reference(a, st, ref, err);
    size_t differ = 0;
    float worst = 0;
    for (size_t j = 0; j < n && rc == CK_OK; j++) {
        float d = got[j] > ref[j] ? got[j] - ref[j] : ref[j] - got[j];
        differ += memcmp(&got[j], &ref[j], sizeof got[j]) != 0;
        worst = d > worst ? d : worst;
    }
    free(ref);
    if (rc != CK_OK)
        return rc;
    bool peaks = peaks_exact(st, all, err), plan_ok = st->basis.check.n_differences == 0;
    if (!a->quiet) {
        printf("verify: every rank's tracked peak %s its prediction to the byte\n", peaks ? "is" : "is NOT");
        printf("verify: parameters after the steps %s the one-process run's (%d microbatches, "
               "gradients averaged in rank order)", differ ? "DIFFER from" : "equal", st->size);
        if (differ)
            printf(": %zu of %zu differ, by up to %.3g\n", differ, n, (double)worst);
        else
            printf(" bit for bit\n");
        printf("verify: the plan file's figures %s the replay of its schedule\n",
               plan_ok ? "match" : "DIFFER from");
        printf("verify: %s\n", peaks && !differ && plan_ok ? "passed" : "FAILED");
    }
    if (peaks && differ)
        ck_err_fail(err, CK_ERR_RUNTIME, "%s: verify: %zu of %zu parameters after the step differ "
                    "from the one-process run's, by up to %.3g", a->plan, differ, n, (double)worst);
    else if (peaks && !plan_ok)
        ck_plan_check_describe(&st->basis.check.differences[0], err->msg, sizeof err->msg);
    return peaks && !differ && plan_ok ? CK_OK : CK_ERR_RUNTIME;
}

/* After the steps: the figures to rank 0, the parameters whole, and rank 0's report. */
static int report(const rank_args *a, rank_state *st, const uint64_t *fig, ck_err *err)
{
    uint64_t *all = st->rank == 0 ? calloc((size_t)st->size * N_FIGURES, sizeof *all) : NULL;
    size_t n = ck_exec_n_parameters(st->exec);
    float *params = a->verify ? calloc(n + 1, sizeof *params) : NULL;
    if ((st->rank == 0 && !all) || (a->verify && !params)) {
        print_error(st->rank, "out of memory");
        MPI_Abort(MPI_COMM_WORLD, CK_ERR_RUNTIME);
    }
    MPI_Gather(fig, N_FIGURES, MPI_UINT64_T, all, N_FIGURES, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    int rc = a->verify ? ck_exec_whole_parameters(st->exec, params, err) : CK_OK;
    if (rc != CK_OK) {
        print_error(st->rank, err->msg);
        MPI_Abort(MPI_COMM_WORLD, rc);
    }
    if (st->rank == 0 && !a->quiet)
        print_figures(a, st, all);
    if (st->rank == 0 && a->verify)
        rc = verdict(a, st, all, params, n, err);
    free(all);
    free(params);
    MPI_Bcast(&rc, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return rc;
}

int main(int argc, char **argv)
{
    /* A rank dies with its parent (mpirun's launcher), as mpirun dies with ckplan
     * (cli/ranks.c): a ckplan killed by SIGKILL leaves no rank running its steps. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    MPI_Init(&argc, &argv);
    rank_state st = {0};
    MPI_Comm_rank(MPI_COMM_WORLD, &st.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &st.size);
    rank_args a;
    ck_err err = {{0}};
    int rc = parse_args(argc, argv, &a, &err);
    if (rc == CK_OK) {
        ck_blas_set_threads(a.threads ? (int)a.threads : 1); /* ranks share the machine's cores */
        rc = set_up(&a, &st, &err);
    }
    rc = agree(&st, rc, &err);
    uint64_t fig[N_FIGURES];
    if (rc == CK_OK) {
        run_steps(&a, &st, fig);
        rc = report(&a, &st, fig, &err);
        if (rc != CK_OK && st.rank == 0)
            print_error(0, err.msg);
    }
    ck_exec_free(st.exec);
    ck_runner_basis_free(&st.basis);
    if (st.have_plan)
        ck_plan_file_free(&st.plan);
    fflush(stdout);
    MPI_Finalize();
    return rc;
}
