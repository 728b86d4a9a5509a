/* main: the program's entry point, and how every command reports an error to the user. */
#ifndef CK_MAIN_H
#define CK_MAIN_H

/* Prints "ckplan: message" on stderr and returns status: the one way errors reach users.
 * CK_HELP_PRINTED is no error: nothing is printed and the exit code is 0. Nor is anything
 * printed for CK_INTERRUPTED: main names the signal (cli/interrupt.h). */
int ck_main_report(int status, const char *msg);

#endif
