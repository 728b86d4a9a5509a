/* Signals (cli/interrupt.c): which one is recorded and the status it gives, a second one
 * ending the process at once except inside a hold window, where it waits, and the window
 * that ck_files_write_atomic (cli/files.c) keeps around its temporary file. Each case runs
 * in a child process, with its stderr in a file; the parent checks how the child ended,
 * what it reported on a pipe before that, and which files it left. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/files.h"
#include "cli/interrupt.h"

#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

static fx_dir dir = {.keep_env = "CK_INTERRUPT_KEEP", .name = "interrupt"};

static int report_fd = -1; /* the child's end of the pipe */

/* What a child tells its parent, in order; nothing more arrives once it is killed. (No
 * ck_assert in a child: Check reports from the test's own process.) */
static void say(const char *what)
{
    ssize_t ignored = write(report_fd, what, strlen(what));
    (void)ignored;
}

/* A child's start: the three signals at their default action (whatever the test runner
 * inherited), then ckplan's handler, as main installs it. */
static void install_from_defaults(void)
{
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    ck_interrupt_install();
}

typedef struct {
    int status;       /* as waitpid gives it */
    char said[256];   /* what the child wrote to the pipe */
    char errors[256]; /* what it wrote to stderr */
} child_result;

static void read_into(int fd, char *buf, size_t size)
{
    size_t n = 0;
    ssize_t got;
    while (n + 1 < size && (got = read(fd, buf + n, size - 1 - n)) > 0)
        n += (size_t)got;
    buf[n] = '\0';
}

/* Runs fn in a child whose stderr is DIR/stderr; exits 0 when fn returns. */
static child_result in_child(void (*fn)(void))
{
    char err_path[512];
    snprintf(err_path, sizeof err_path, "%s/stderr", dir.path);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(p[0]);
        report_fd = p[1];
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (e < 0 || dup2(e, STDERR_FILENO) < 0)
            _exit(99);
        fn();
        _exit(0);
    }
    close(p[1]);
    child_result r;
    read_into(p[0], r.said, sizeof r.said);
    close(p[0]);
    ck_assert_int_eq(waitpid(pid, &r.status, 0), pid);
    int e = open(err_path, O_RDONLY);
    ck_assert_int_ge(e, 0);
    read_into(e, r.errors, sizeof r.errors);
    close(e);
    unlink(err_path);
    return r;
}

/* Runs fn in a child, which must end killed by sig (or exit 0 when sig is 0) after saying
 * said, and with errors on stderr unless errors is NULL. */
static void expect_child(void (*fn)(void), int sig, const char *said, const char *errors)
{
    child_result r = in_child(fn);
    if (sig)
        ck_assert_msg(WIFSIGNALED(r.status) && WTERMSIG(r.status) == sig,
                      "expected the child killed by signal %d, status 0x%x (said '%s')", sig,
                      r.status, r.said);
    else
        ck_assert_msg(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0,
                      "expected the child to exit 0, status 0x%x (said '%s')", r.status, r.said);
    ck_assert_str_eq(r.said, said);
    if (errors)
        ck_assert_str_eq(r.errors, errors);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* Asserts that dir holds exactly the files named in expected (space-separated, sorted). */
static void assert_dir_holds(const char *expected)
{
    char out[1024];
    size_t size = sizeof out;
    DIR *d = opendir(dir.path);
    ck_assert_ptr_nonnull(d);
    char names[16][256];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 16;)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            snprintf(names[n++], sizeof names[0], "%s", e->d_name);
    closedir(d);
    qsort(names, n, sizeof names[0], by_name);
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        snprintf(out + strlen(out), size - strlen(out), "%s%s", i ? " " : "", names[i]);
    ck_assert_str_eq(out, expected);
}

static int sig_of_case;

static void first_signal_child(void)
{
    install_from_defaults();
    raise(sig_of_case);
    ck_err err = {{0}};
    char line[sizeof err.msg + 32];
    int check = ck_interrupt_check(&err);
    snprintf(line, sizeof line, "%d %d %s", check, ck_interrupt_exit_status(0), err.msg);
    say(line);
}

START_TEST(first_signal_is_recorded_and_gives_128_plus_its_number)
{
    static const struct {
        int sig;
        const char *said, *line;
    } cases[] = {
        {SIGINT, "130 130 interrupted by SIGINT", "ckplan: interrupted by SIGINT\n"},
        {SIGTERM, "130 143 interrupted by SIGTERM", "ckplan: interrupted by SIGTERM\n"},
        {SIGHUP, "130 129 interrupted by SIGHUP", "ckplan: interrupted by SIGHUP\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sig_of_case = cases[i].sig;
        expect_child(first_signal_child, 0, cases[i].said, cases[i].line);
    }
}
END_TEST

static void no_signal_child(void)
{
    install_from_defaults();
    ck_err err = {{0}};
    char line[64];
    snprintf(line, sizeof line, "%d %d %d", ck_interrupt_arrived(), ck_interrupt_check(&err),
             ck_interrupt_exit_status(3));
    say(line);
}

START_TEST(without_a_signal_the_status_is_the_commands)
{
    expect_child(no_signal_child, 0, "0 0 3", "");
}
END_TEST

static void second_signal_child(void)
{
    install_from_defaults();
    raise(SIGTERM);
    say("first;");
    raise(SIGINT);
    say("second;");
}

START_TEST(second_signal_ends_the_process_at_once)
{
    expect_child(second_signal_child, SIGINT, "first;",
                 "ckplan: interrupted by SIGTERM, then SIGINT: stopped at once\n");
}
END_TEST

static void held_child(void)
{
    install_from_defaults();
    raise(SIGHUP);
    ck_interrupt_hold();
    ck_interrupt_hold();
    raise(SIGTERM);
    say("held;");
    ck_interrupt_release();
    say("inner released;");
    ck_interrupt_release();
    say("outer released;");
}

START_TEST(second_signal_waits_for_the_outermost_release)
{
    expect_child(held_child, SIGTERM, "held;inner released;",
                 "ckplan: interrupted by SIGHUP, then SIGTERM: stopped at once\n");
}
END_TEST

static void ignored_child(void)
{
    install_from_defaults();
    signal(SIGHUP, SIG_IGN); /* as nohup leaves it */
    ck_interrupt_install();
    raise(SIGHUP);
    say(ck_interrupt_arrived() ? "caught" : "ignored");
}

START_TEST(a_signal_ignored_at_start_stays_ignored)
{
    expect_child(ignored_child, 0, "ignored", "");
}
END_TEST

static char out_path[512];

/* A second signal is pending (deferred by an outer window) when ck_files_write_atomic
 * starts: its window must open before the temporary file is created, and so end ckplan
 * before anything is written. */
static void pending_before_write_child(void)
{
    install_from_defaults();
    raise(SIGINT);
    ck_interrupt_hold();
    raise(SIGTERM);
    ck_err err = {{0}};
    int rc = ck_files_write_atomic(out_path, "{}\n", 3, &err);
    say(rc == CK_OK ? "wrote;" : err.msg);
    ck_interrupt_release();
}

START_TEST(write_file_atomic_creates_no_temporary_file_once_stopping)
{
    expect_child(pending_before_write_child, SIGTERM, "", NULL);
    assert_dir_holds(""); /* neither out.json nor a temporary file */
}
END_TEST

/* After ck_files_write_atomic returns, having written or failed to create its temporary
 * file, its window is closed: a second signal ends ckplan at once. */
static void after_write_child(void)
{
    install_from_defaults();
    ck_err err = {{0}};
    say(ck_files_write_atomic(out_path, "{}\n", 3, &err) == CK_OK ? "wrote;" : err.msg);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-dir/out.json", dir.path);
    say(ck_files_write_atomic(missing, "{}\n", 3, &err) == CK_OK ? "wrote in no directory;"
                                                                : "failed;");
    raise(SIGHUP);
    raise(SIGINT);
    say("alive;");
}

START_TEST(write_file_atomic_closes_its_window_on_every_path)
{
    expect_child(after_write_child, SIGINT, "wrote;failed;", NULL);
    assert_dir_holds("out.json");
    unlink(out_path);
}
END_TEST

static void setup(void)
{
    fx_dir_make(&dir);
    snprintf(out_path, sizeof out_path, "%s/out.json", dir.path);
}

static void teardown(void)
{
    fx_dir_remove(&dir);
}

static Suite *interrupt_suite(void)
{
    Suite *s = suite_create("interrupt");
    TCase *tc = tcase_create("interrupt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, first_signal_is_recorded_and_gives_128_plus_its_number);
    tcase_add_test(tc, without_a_signal_the_status_is_the_commands);
    tcase_add_test(tc, second_signal_ends_the_process_at_once);
    tcase_add_test(tc, second_signal_waits_for_the_outermost_release);
    tcase_add_test(tc, a_signal_ignored_at_start_stays_ignored);
    tcase_add_test(tc, write_file_atomic_creates_no_temporary_file_once_stopping);
    tcase_add_test(tc, write_file_atomic_closes_its_window_on_every_path);
    suite_add_tcase(s, tc);
    return s;
}

CK_TEST_MAIN(interrupt_suite)
