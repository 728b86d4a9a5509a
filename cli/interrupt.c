#include "cli/interrupt.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
    (void)sig;
    got_sigint = 1; /* async-signal-safe: a store to a volatile sig_atomic_t, nothing else */
}

void ck_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    /* A second Ctrl-C is the default action, killing at once: the way out of a step that
     * takes too long. Output files stay whole even then (renamed into place), though a
     * temporary file may be left next to one. */
    sa.sa_flags = SA_RESTART | SA_RESETHAND;
    sigaction(SIGINT, &sa, NULL);
}

const volatile sig_atomic_t *ck_interrupt_flag(void)
{
    return &got_sigint;
}

bool ck_interrupted(void)
{
    return got_sigint != 0;
}

int ck_interrupt_check(ck_err *err)
{
    return ck_interrupted() ? ck_fail(err, CK_INTERRUPTED, "interrupted") : CK_OK;
}
