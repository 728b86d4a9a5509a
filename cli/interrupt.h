/* interrupt: Ctrl-C (SIGINT) as a request to stop at the next operation boundary.
 *
 * Commands that run for long (run, sweep) install the handler; it only sets a flag, which
 * their loops poll between steps and between sweep points, and the executor between
 * operations. They then clean up, keep what
 * was already written completely, and return CK_INTERRUPTED, which ck_report prints as
 * "ckplan: interrupted" and main returns as exit status 130 (128 + SIGINT). */
#ifndef CK_INTERRUPT_H
#define CK_INTERRUPT_H

#include <signal.h>
#include <stdbool.h>

#include "planner/err.h"

/* Installs the SIGINT handler (sigaction with SA_RESTART: system calls under way go on,
 * the flag is polled; and SA_RESETHAND: a second Ctrl-C kills at once). */
void ck_interrupt_install(void);

/* The flag itself, for the executor to poll between operations (ck_exec_opts.stop). */
const volatile sig_atomic_t *ck_interrupt_flag(void);

/* Whether SIGINT arrived since ck_interrupt_install. */
bool ck_interrupted(void);

/* CK_INTERRUPTED with the message "interrupted" when SIGINT arrived, else CK_OK. */
int ck_interrupt_check(ck_err *err);

#endif
