#include "cli/ranks.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/interrupt.h"

/* The first executable `name` on PATH, into out. */
static bool on_path(const char *name, char *out, size_t size)
{
    const char *path = getenv("PATH");
    while (path && *path) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        if (len > 0 && (size_t)snprintf(out, size, "%.*s/%s", (int)len, path, name) < size &&
            access(out, X_OK) == 0)
            return true;
        path = end ? end + 1 : NULL;
    }
    return false;
}

/* ckplan-rank beside this ckplan (each build puts both in one folder). */
static int find_worker(char *out, size_t size, ck_err *err)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: cannot find this program's folder "
                           "(/proc/self/exe: %s)", strerror(errno));
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    if ((size_t)snprintf(out, size, "%s/ckplan-rank", self) >= size || access(out, X_OK) != 0)
        return ck_err_fail(err, CK_ERR_INPUT, "run --ranks: the MPI worker %s/ckplan-rank is "
                           "missing: build it with 'make ckplan-rank' (it needs OpenMPI's mpicc: "
                           "'make deps' installs libopenmpi-dev)", self);
    return CK_OK;
}

/* mpirun's command line for r: as root OpenMPI wants to be told it may run; more ranks
 * than cores need --oversubscribe, and unbound ranks share the cores as they come. At most
 * 21 entries with the NULL. */
static size_t command_line(const ck_ranks_run *r, char *mpirun, char *worker, char nums[4][24],
                           char **argv)
{
    size_t n = 0;
    argv[n++] = mpirun;
    if (geteuid() == 0)
        argv[n++] = "--allow-run-as-root";
    argv[n++] = "--oversubscribe";
    argv[n++] = "--bind-to";
    argv[n++] = "none";
    argv[n++] = "-np";
    snprintf(nums[0], sizeof nums[0], "%llu", (unsigned long long)r->ranks);
    argv[n++] = nums[0];
    argv[n++] = worker;
    argv[n++] = "--seed";
    snprintf(nums[1], sizeof nums[1], "%llu", (unsigned long long)r->seed);
    argv[n++] = nums[1];
    argv[n++] = "--steps";
    snprintf(nums[2], sizeof nums[2], "%llu", (unsigned long long)r->steps);
    argv[n++] = nums[2];
    if (r->threads) {
        argv[n++] = "--threads";
        snprintf(nums[3], sizeof nums[3], "%llu", (unsigned long long)r->threads);
        argv[n++] = nums[3];
    }
    if (r->verify)
        argv[n++] = "--verify";
    if (r->quiet)
        argv[n++] = "--quiet";
    argv[n++] = "--"; /* a plan named like an option is still the plan */
    argv[n++] = (char *)r->plan_path;
    argv[n] = NULL;
    return n;
}

/* What mpirun is told through its environment rather than its command line: a parameter
 * given there is ignored by a release that does not have it, where an unknown option or
 * --mca name is an error, and OpenMPI 4 and 5 name these differently. Shared memory without
 * cross-process reads (CMA), which containers forbid: the transport is "vader" in 4 and
 * "sm" in 5. No help text after a rank fails (4's --quiet, which 5's mpirun refuses): the
 * ranks say what failed. Called in the child, before exec. */
static void mpirun_environment(void)
{
    setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
    setenv("OMPI_MCA_btl_sm_single_copy_mechanism", "none", 1);
    setenv("OMPI_MCA_orte_execute_quiet", "1", 1);
}

/* What mpirun's end says: the ranks' own status (0, 1, 2), or a failure of the job. */
static int job_status(int status, ck_err *err)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return CK_OK;
    if (WIFEXITED(status) && (WEXITSTATUS(status) == CK_ERR_RUNTIME || WEXITSTATUS(status) == CK_ERR_INPUT))
        return ck_err_fail(err, WEXITSTATUS(status), "run --ranks: a rank failed (exit %d; its "
                           "message is above) and mpirun ended the job", WEXITSTATUS(status));
    if (WIFEXITED(status) && WEXITSTATUS(status) > 128)
        return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: a rank was killed by signal %d and "
                           "mpirun ended the job", WEXITSTATUS(status) - 128);
    if (WIFEXITED(status))
        return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: the job failed: mpirun exited with "
                           "status %d (it could not start the ranks, or one ended without saying "
                           "why)", WEXITSTATUS(status));
    return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: mpirun was killed by signal %d",
                       WTERMSIG(status));
}

/* How often the wait for mpirun looks at the interrupt flag, and how long mpirun has to end
 * the job once a signal was passed on before it is killed. */
#define WAIT_POLL_NS 20000000L
#define KILL_AFTER_NS 10000000000LL

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Waits for mpirun. waitpid() alone would not do: SA_RESTART restarts it after ckplan's
 * handler, and a SIGTERM sent to ckplan alone (not to its process group, as Ctrl-C is)
 * never reached mpirun, which ran every step first. So it polls: the first signal ckplan
 * gets is passed on to mpirun, which ends its ranks; if mpirun is still there
 * KILL_AFTER_NS later, it is killed. */
static int wait_job(pid_t pid, int *status, ck_err *err)
{
    long long forwarded = 0;
    for (;;) {
        pid_t done = waitpid(pid, status, WNOHANG);
        if (done == pid)
            return CK_OK;
        if (done < 0 && errno != EINTR)
            return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: waiting for mpirun: %s",
                               strerror(errno));
        int sig = atomic_load(ck_interrupt_flag());
        if (sig && !forwarded) {
            kill(pid, sig);
            forwarded = now_ns();
        } else if (forwarded && now_ns() - forwarded > KILL_AFTER_NS) {
            kill(pid, SIGKILL);
        }
        nanosleep(&(struct timespec){0, WAIT_POLL_NS}, NULL);
    }
}

/* The child, before exec: it dies with ckplan (SIGKILL when ckplan ends, even by SIGKILL;
 * the ranks likewise die with mpirun, mpi/rank.c), and gets mpirun's environment. */
static void exec_mpirun(pid_t parent, const char *mpirun, char **argv)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127); /* ckplan is already gone, or cannot be followed */
    mpirun_environment();
    execv(mpirun, argv);
    fprintf(stderr, "ckplan: run --ranks: cannot run %s: %s\n", mpirun, strerror(errno));
    _exit(127);
}

int ck_ranks_launch(const ck_ranks_run *r, ck_err *err)
{
    char mpirun[PATH_MAX], worker[PATH_MAX], nums[4][24];
    if (!on_path("mpirun", mpirun, sizeof mpirun))
        return ck_err_fail(err, CK_ERR_INPUT, "run --ranks: OpenMPI's mpirun is not on PATH: "
                           "install it with 'make deps' (Debian: apt-get install openmpi-bin "
                           "libopenmpi-dev)");
    int rc = find_worker(worker, sizeof worker, err);
    if (rc != CK_OK)
        return rc;
    char *argv[21];
    command_line(r, mpirun, worker, nums, argv);
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid < 0)
        return ck_err_fail(err, CK_ERR_RUNTIME, "run --ranks: cannot start mpirun: %s", strerror(errno));
    if (pid == 0)
        exec_mpirun(parent, mpirun, argv);
    int status;
    rc = wait_job(pid, &status, err);
    if (rc == CK_OK)
        rc = ck_interrupt_check(err);
    return rc != CK_OK ? rc : job_status(status, err);
}
