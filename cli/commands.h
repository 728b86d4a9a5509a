/* commands: the subcommands of ckplan, each a function of its own arguments (argv[0] is
 * the subcommand's name) returning the process exit code. */
#ifndef CK_COMMANDS_H
#define CK_COMMANDS_H

int ck_cmd_plan(int argc, char **argv);
int ck_cmd_chain(int argc, char **argv);
int ck_cmd_run(int argc, char **argv);
int ck_cmd_profile(int argc, char **argv);
int ck_cmd_report(int argc, char **argv);
int ck_cmd_sweep(int argc, char **argv);
int ck_cmd_import(int argc, char **argv);
int ck_cmd_emit(int argc, char **argv);

/* What a command's argument parsing returns when it printed the help: the command is done,
 * and exits 0. Negative, so that no status or exit code is taken for it. */
#define CK_HELP_PRINTED (-1)

/* How commands report errors: ck_main_report. */
#include "cli/main.h"

#endif
