#include "cli/interrupt.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The handler may run on any thread (OpenBLAS has its own), so the flags are lock-free
 * atomics, which C11 allows a handler to use, and not volatile sig_atomic_t. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the signal handler needs lock-free atomic ints");

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};

static atomic_int first_signal; /* what commands poll: 0 until a signal arrives */
static atomic_int second_signal; /* a later one, waiting for the window to close */
static atomic_int holding;       /* depth of ck_interrupt_hold windows */

static const char *signal_name(int sig)
{
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "a signal";
}

/* Appends s to buf at *at, within size (no snprintf: this runs in the handler). */
static void append(char *buf, size_t size, size_t *at, const char *s)
{
    while (*s && *at < size)
        buf[(*at)++] = *s++;
}

/* Ends the process by sig's default action, so that the parent sees it killed by sig, after
 * one line on stderr. Only async-signal-safe calls: it runs in the handler, or in
 * ck_interrupt_hold / release when a second signal came. */
static void die(int sig)
{
    char line[128];
    size_t n = 0;
    append(line, sizeof line, &n, "ckplan: interrupted by ");
    append(line, sizeof line, &n, signal_name(atomic_load(&first_signal)));
    append(line, sizeof line, &n, ", then ");
    append(line, sizeof line, &n, signal_name(sig));
    append(line, sizeof line, &n, ": stopped at once\n");
    ssize_t ignored = write(STDERR_FILENO, line, n);
    (void)ignored;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig); /* in the handler, sig is blocked until it returns, and then kills */
}

static void on_signal(int sig)
{
    int saved_errno = errno;
    int none = 0;
    if (!atomic_compare_exchange_strong(&first_signal, &none, sig)) {
        /* A second signal. Storing it before looking at holding, as hold stores holding
         * before looking at it, means that one of the two always sees the other. */
        atomic_store(&second_signal, sig);
        if (atomic_load(&holding) == 0)
            die(sig);
    }
    errno = saved_errno;
}

void ck_interrupt_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (size_t i = 0; i < sizeof handled / sizeof handled[0]; i++) {
        struct sigaction old;
        if (sigaction(handled[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
            sigaction(handled[i], &sa, NULL);
    }
    /* Past the file size limit (ulimit -f) the kernel sends SIGXFSZ, whose default action
     * kills at once, leaving half a record or a temporary file; ignored, the write fails
     * with EFBIG instead, which cli/files.c reports and undoes like any failed write. */
    signal(SIGXFSZ, SIG_IGN);
}

const atomic_int *ck_interrupt_flag(void)
{
    return &first_signal;
}

bool ck_interrupt_arrived(void)
{
    return atomic_load(&first_signal) != 0;
}

int ck_interrupt_check(ck_err *err)
{
    int sig = atomic_load(&first_signal);
    return sig ? ck_err_fail(err, CK_INTERRUPTED, "interrupted by %s", signal_name(sig)) : CK_OK;
}

int ck_interrupt_exit_status(int status)
{
    int sig = atomic_load(&first_signal);
    if (!sig)
        return status;
    fprintf(stderr, "ckplan: interrupted by %s\n", signal_name(sig));
    return 128 + sig;
}

void ck_interrupt_hold(void)
{
    atomic_fetch_add(&holding, 1);
    int sig = atomic_load(&second_signal);
    if (sig)
        die(sig); /* it came just before, and its handler may have seen no window yet */
}

void ck_interrupt_release(void)
{
    if (atomic_fetch_sub(&holding, 1) != 1)
        return;
    int sig = atomic_load(&second_signal);
    if (sig)
        die(sig);
}
