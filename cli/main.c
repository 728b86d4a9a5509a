/* ckplan: a memory planner and simulator for activation checkpointing. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/files.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "planner/err.h"
#include "planner/limits.h"
#include "sim/mem.h"

#define CKPLAN_VERSION "0.1.0"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    {"plan", ck_cmd_plan, "choose where to checkpoint so a training step fits a memory budget"},
    {"run", ck_cmd_run, "execute a plan and the baseline for real, measure, and verify"},
    {"profile", ck_cmd_profile, "measure each stage's time on this machine, for plan --costs"},
    {"sweep", ck_cmd_sweep, "plan (and run) a model at many budgets with several planners"},
    {"report", ck_cmd_report, "tabulate the records of a runs file (table, CSV or JSON)"},
    {"import", ck_cmd_import, "write the model file that a Hugging Face config.json stands for"},
    {"chain", ck_cmd_chain, "write the chain of stages derived from a model as a chain file"},
    {"emit", ck_cmd_emit, "write a plan as Hugging Face, FSDP, Megatron-LM or DeepSpeed apply it"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: ckplan [--force] <command> [options]\n"
                 "\n"
                 "A memory planner for activation checkpointing: it reads a model, decides which\n"
                 "activations to keep and which to recompute so that a training step fits a\n"
                 "memory budget, and reports the cost in time.\n"
                 "\n"
                 "commands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run 'ckplan <command> --help' for a command's options. Outputs replace files\n"
                 "keeping their modes, and read-only ones are refused: --force replaces those too.\n"
                 "Exit codes: 0 ok, 1 verification or runtime failure, 2 usage or input error,\n"
                 "3 budget infeasible, 128 + N stopped by signal N: 130 SIGINT (Ctrl-C), 143\n"
                 "SIGTERM, 129 SIGHUP (every command stops cleanly, its files whole).\n");
}

int ck_main_report(int status, const char *msg)
{
    if (status == CK_HELP_PRINTED)
        return 0;
    if (status != 0 && status != CK_INTERRUPTED) { /* for that one, main names the signal */
        /* messages quote names and paths from the input: never raw terminal controls */
        fputs("ckplan: ", stderr);
        ck_human_put_terminal_text(stderr, msg);
        fputc('\n', stderr);
    }
    return status;
}

/* stdout is buffered: a full disk or a closed file shows only when the buffer is written,
 * often at exit, where nobody looks. Flushing here turns it into an error, so that a
 * report or a chain that was lost does not exit 0. Commands write their files before
 * their summaries, so the files are whole by now. */
static int finish_stdout(int status)
{
    int failed = fflush(stdout) != 0 ? errno : 0;
    if (!failed && !ferror(stdout))
        return status;
    fprintf(stderr, "ckplan: stdout: cannot write: %s\n", failed ? strerror(failed) : "write error");
    return status ? status : CK_ERR_RUNTIME;
}

static int dispatch(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--force") == 0) {
        ck_files_force(true);
        return dispatch(argc - 1, argv + 1);
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(cmd, "help") == 0) {
            char *help_argv[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (strcmp(argv[2], commands[i].name) == 0)
                    return commands[i].run(2, help_argv);
            fputs("ckplan: no command '", stderr);
            ck_human_put_terminal_text(stderr, argv[2]);
            fputs("'\n", stderr);
            return 2;
        }
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("ckplan %s\n", CKPLAN_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fputs("ckplan: '", stderr);
    ck_human_put_terminal_text(stderr, cmd);
    fputs("' is not a command; see 'ckplan --help'\n", stderr);
    return 2;
}

/* A limit's variable set to anything but a positive whole number leaves its default in
 * force (planner/limits): said once, before the command, so that a typo is not silent. */
static void warn_invalid_limits(void)
{
    for (int l = 0; l < CK_N_LIMITS; l++) {
        const char *value;
        if (!ck_limits_invalid((ck_limit)l, &value))
            continue;
        fprintf(stderr, "ckplan: warning: %s=\"", ck_limits_name((ck_limit)l));
        ck_human_put_terminal_text(stderr, value);
        fputs("\" is not a positive whole number: its default limit stays in force\n", stderr);
    }
}

int main(int argc, char **argv)
{
    ck_interrupt_install();
    warn_invalid_limits();
    /* Process-wide, so the program's to choose: run, sweep --run and profile time steps
     * and read the resident peak as a training framework's caching allocator has them. */
    ck_mem_keep_freed_memory();
    return ck_interrupt_exit_status(finish_stdout(dispatch(argc, argv)));
}
