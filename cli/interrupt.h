/* interrupt: SIGINT (Ctrl-C), SIGTERM and SIGHUP as a request to stop at the next boundary.
 *
 * main installs one handler for the three signals before any command runs. It records which
 * signal arrived first and does nothing else; the long loops poll that (run's and sweep's
 * steps, the executor between operations, profile's measured steps, dp's table, report's
 * lines) and every command polls before it writes its output. A command then frees what it
 * holds, keeps what it already wrote completely and returns CK_INTERRUPTED; main exits
 * 128 + the signal's number (130, 143, 129) after the line "ckplan: interrupted by SIGx".
 *
 * A second signal, of any of the three, ends the process at once, with that signal's default
 * action, except between ck_interrupt_hold and ck_interrupt_release: there it is deferred to
 * ck_interrupt_release, so that no temporary file or half-written record is left behind. */
#ifndef CK_INTERRUPT_H
#define CK_INTERRUPT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "planner/err.h"

/* Installs the handler (sigaction with SA_RESTART: system calls under way go on, the flag
 * is polled) for each of the three signals, except those ignored when ckplan started: a
 * command run under nohup keeps running when the terminal goes away. Ignores SIGXFSZ, so
 * that a write past the file size limit fails (EFBIG) and is reported and undone. */
void ck_interrupt_install(void);

/* The number of the first signal that arrived, 0 before any: for the executor and the
 * planners to poll (ck_exec_opts.stop, ck_planner_opts.stop). */
const atomic_int *ck_interrupt_flag(void);

/* Whether a signal arrived since ck_interrupt_install. */
bool ck_interrupt_arrived(void);

/* CK_INTERRUPTED, with the message "interrupted by SIGx", when a signal arrived, else CK_OK. */
int ck_interrupt_check(ck_err *err);

/* main's exit status: when a signal arrived (whatever the command returned, since it may have
 * finished after the signal came), prints "ckplan: interrupted by SIGx" and returns 128 + its
 * number; otherwise returns status unchanged. */
int ck_interrupt_exit_status(int status);

/* Around a window in which a signal must not end the process: from before a temporary file
 * is created until it is renamed or removed, or while a record is being appended. A second
 * signal inside it ends the process in ck_interrupt_release; so does one that arrived just
 * before ck_interrupt_hold, which then does not return. Windows may nest. */
void ck_interrupt_hold(void);
void ck_interrupt_release(void);

#endif
