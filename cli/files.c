#include "cli/files.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/interrupt.h"
#include "planner/hf.h"
#include "planner/json.h"

/* As the kernel's own limit on links followed in one path (ELOOP). */
#define MAX_LINK_HOPS 40
#define TEMP_NAME ".ckplan-XXXXXX"

static const char *write_all(int fd, const char *data, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return "write";
        data += n;
        len -= (size_t)n;
    }
    return NULL;
}

/* How often a FIFO without a reader is opened again, and the interrupt flag looked at. */
#define READER_POLL_NS 50000000L

/* Opens path (flags: how), waiting for a reader when it is a FIFO without one, but never
 * past a signal: a blocking open() of such a FIFO waits in the kernel, and SA_RESTART
 * restarts it after the handler, so that no signal could stop ckplan there. Opened
 * non-blocking (ENXIO while no reader), then made blocking again for the writes.
 * doing: "writing" or "appending", for the message. */
static int open_output(const char *path, int how, const char *doing, int *fd, ck_err *err)
{
    while ((*fd = open(path, how | O_NONBLOCK | O_CLOEXEC, 0644)) < 0) {
        if (errno != ENXIO && errno != EINTR)
            return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot open for %s: %s", path, doing,
                               strerror(errno));
        int rc = ck_interrupt_check(err);
        if (rc != CK_OK)
            return rc;
        nanosleep(&(struct timespec){0, READER_POLL_NS}, NULL);
    }
    int flags = fcntl(*fd, F_GETFL);
    if (flags >= 0 && fcntl(*fd, F_SETFL, flags & ~O_NONBLOCK) == 0)
        return CK_OK;
    int rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot open for %s (fcntl: %s)", path, doing,
                         strerror(errno));
    close(*fd);
    *fd = -1;
    return rc;
}

static int write_in_place(const char *path, const char *data, size_t len, ck_err *err)
{
    int fd;
    int rc = open_output(path, O_WRONLY, "writing", &fd, err);
    if (rc != CK_OK)
        return rc;
    const char *failed = write_all(fd, data, len);
    if (close(fd) != 0 && !failed)
        failed = "close";
    if (failed)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write (%s: %s)", path, failed, strerror(errno));
    return CK_OK;
}

/* The directory part of path, with room for "/" TEMP_NAME after it: "." for a bare name. */
static char *temp_template(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    char *t = malloc(dir + sizeof TEMP_NAME);
    if (t) {
        memcpy(t, path, dir);
        memcpy(t + dir, TEMP_NAME, sizeof TEMP_NAME);
    }
    return t;
}

/* What the link at path points to, relative targets taken from path's directory. */
static int link_target(const char *path, char **out, ck_err *err)
{
    char target[PATH_MAX];
    ssize_t n = readlink(path, target, sizeof target);
    if (n < 0 || (size_t)n >= sizeof target)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot read the symbolic link: %s", path,
                       n < 0 ? strerror(errno) : "target too long");
    const char *slash = target[0] == '/' ? NULL : strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path) + 1 : 0;
    if (!(*out = malloc(dir + (size_t)n + 1)))
        return ck_err_oom(err);
    memcpy(*out, path, dir);
    memcpy(*out + dir, target, (size_t)n);
    (*out)[dir + (size_t)n] = '\0';
    return CK_OK;
}

/* The file that path ends at after following every symbolic link (it may not exist: a
 * dangling link's target), so that writing replaces the target and keeps the links. */
static int resolve_links(const char *path, char **out, ck_err *err)
{
    char *cur = strdup(path);
    struct stat st;
    for (int hops = 0; cur && lstat(cur, &st) == 0 && S_ISLNK(st.st_mode); hops++) {
        char *next = NULL;
        int rc = hops == MAX_LINK_HOPS
                     ? ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write: more than %d symbolic "
                                                    "links to follow", path, MAX_LINK_HOPS)
                     : link_target(cur, &next, err);
        free(cur);
        if (rc != CK_OK)
            return rc;
        cur = next;
    }
    *out = cur;
    return cur ? CK_OK : ck_err_oom(err);
}

/* The process's umask, which mkstemp's 0600 does not apply: read by setting it back. */
static mode_t current_umask(void)
{
    mode_t mask = umask(077);
    umask(mask);
    return mask;
}

/* The temporary-file window, all of it: creates a temporary file beside target, writes
 * data, flushes it to disk and renames it over target; on any failure removes it. path is
 * the name the user gave, for messages. */
static int replace_via_temp(const char *path, const char *target, const struct stat *old,
                            const char *data, size_t len, ck_err *err)
{
    char *tmp = temp_template(target);
    if (!tmp)
        return ck_err_oom(err);
    ck_interrupt_hold(); /* from here until tmp is renamed or removed, no signal ends ckplan */
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        int rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot create a temporary file %s: %s", path,
                         tmp, strerror(errno));
        ck_interrupt_release();
        free(tmp);
        return rc;
    }
    /* the mode the user gave the file it replaces, or a new file's */
    mode_t mode = old ? old->st_mode & 07777 : 0644 & ~current_umask();
    const char *failed = fchmod(fd, mode) != 0 ? "fchmod" : NULL;
    if (!failed)
        failed = write_all(fd, data, len);
    if (!failed && fsync(fd) != 0)
        failed = "fsync";
    if (close(fd) != 0 && !failed)
        failed = "close";
    if (!failed && rename(tmp, target) != 0)
        failed = "rename";
    int rc = CK_OK;
    if (failed) {
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write (%s: %s); the previous file, if any, "
                                          "is unchanged", path, failed, strerror(errno));
        unlink(tmp);
    }
    ck_interrupt_release();
    free(tmp);
    return rc;
}

static bool force_read_only;

void ck_files_force(bool force)
{
    force_read_only = force;
}

/* CK_ERR_RUNTIME when st (of the file at path) is a regular file nobody may write (no write
 * bit: 0444) and --force was not given; root, whom the mode does not stop, included. */
static int refuse_read_only(const char *path, const struct stat *st, ck_err *err)
{
    if (force_read_only || !S_ISREG(st->st_mode) || (st->st_mode & 0222))
        return CK_OK;
    return ck_err_fail(err, CK_ERR_RUNTIME, "%s: the file is read-only (mode %04o): ckplan leaves "
                       "it as it is; make it writable, or give 'ckplan --force ...' to replace it "
                       "(keeping its mode)", path, (unsigned)(st->st_mode & 07777));
}

/* Writes path's target (links followed when follow_links, else the name itself replaced). */
static int write_file(const char *path, bool follow_links, const char *data, size_t len, ck_err *err)
{
    char *target = NULL;
    int rc = follow_links ? resolve_links(path, &target, err)
                          : (target = strdup(path)) ? CK_OK : ck_err_oom(err);
    if (rc != CK_OK)
        return rc;
    struct stat st;
    bool exists = (follow_links ? stat(target, &st) : lstat(target, &st)) == 0;
    if (exists)
        rc = refuse_read_only(path, &st, err);
    if (rc == CK_OK && exists && follow_links && !S_ISREG(st.st_mode))
        rc = write_in_place(path, data, len, err);
    else if (rc == CK_OK)
        rc = replace_via_temp(path, target, exists && S_ISREG(st.st_mode) ? &st : NULL, data, len, err);
    free(target);
    return rc;
}

int ck_files_write_atomic(const char *path, const char *data, size_t len, ck_err *err)
{
    return write_file(path, true, data, len, err);
}

int ck_files_write_in_dir(const char *path, const char *data, size_t len, ck_err *err)
{
    return write_file(path, false, data, len, err);
}

/* Whether the regular file of fd, size bytes long, needs a newline before a new line:
 * when it was cut short. */
static bool cut_short(int fd, off_t size)
{
    char last;
    return size > 0 && pread(fd, &last, 1, size - 1) == 1 && last != '\n';
}

/* The append itself, fd locked: one write of the record, undone by truncation back to the
 * old length if it fails part-way. */
static int append_locked(int fd, const char *path, char *record, size_t len, ck_err *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot append: %s", path, strerror(errno));
    bool regular = S_ISREG(st.st_mode);
    if (!regular || !cut_short(fd, st.st_size)) {
        record++; /* the newline in front, only for a file cut short */
        len--;
    }
    if (!write_all(fd, record, len))
        return CK_OK;
    int cause = errno;
    if (regular && ftruncate(fd, st.st_size) != 0)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write (write: %s), and cannot truncate the "
                                            "partial record away (%s)", path, strerror(cause),
                       strerror(errno));
    return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write (write: %s)%s", path, strerror(cause),
                   regular ? "; the file is as it was" : "");
}

int ck_files_append_line(const char *path, const char *line, ck_err *err)
{
    size_t line_len = strlen(line);
    char *record = malloc(line_len + 2); /* "\n" LINE "\n": the first only when cut short */
    if (!record)
        return ck_err_oom(err);
    record[0] = '\n';
    memcpy(record + 1, line, line_len);
    record[line_len + 1] = '\n';
    /* A regular file is opened to read too: its last byte says whether it was cut short.
     * A FIFO opened so would not wait for its reader, and what was written would be lost. */
    struct stat st;
    int mode = stat(path, &st) == 0 && !S_ISREG(st.st_mode) ? O_WRONLY : O_RDWR;
    int fd;
    int rc = open_output(path, mode | O_APPEND | O_CREAT, "appending", &fd, err);
    if (rc == CK_OK && fstat(fd, &st) == 0)
        rc = refuse_read_only(path, &st, err);
    while (rc == CK_OK && flock(fd, LOCK_EX) != 0)
        if (errno != EINTR)
            rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot lock: %s", path, strerror(errno));
    if (rc == CK_OK) {
        /* a second signal waits until the record is written whole, or taken back */
        ck_interrupt_hold();
        rc = append_locked(fd, path, record, line_len + 2, err);
        ck_interrupt_release();
    }
    /* closing releases the lock */
    if (fd >= 0 && close(fd) != 0 && rc == CK_OK)
        rc = ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot write (close: %s)", path, strerror(errno));
    free(record);
    return rc;
}

/* Whether a and b are one regular file: same device and inode, links followed. */
static bool same_file(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && S_ISREG(sa.st_mode) &&
           sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static bool utf8_text(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = ck_json_utf8_length(p, strnlen((const char *)p, 4));
        if (n == 0)
            return false;
        p += n;
    }
    return true;
}

/* Whether writing output would destroy input: output is the file input names, which for a
 * directory is the config.json in it, as a model given as a directory is read
 * (ck_hf_config_path). false when out of memory: the loader then fails first. */
static bool output_is_input(const char *output, const char *input)
{
    char *read = ck_hf_config_path(input);
    bool same = read && (same_file(output, read) || same_file(output, input));
    free(read);
    return same;
}

/* Whether two outputs would land in one file: the same regular file, or the same name of one
 * that does not exist yet (so that neither is written over the other). */
static bool same_output(const char *a, const char *b)
{
    struct stat st;
    if (strcmp(a, b) == 0)
        return stat(a, &st) != 0 || S_ISREG(st.st_mode);
    return same_file(a, b);
}

int ck_files_check_apart(const char *cmd, const ck_named_file *inputs, size_t n_inputs,
                           const ck_named_file *outputs, size_t n_outputs, ck_err *err)
{
    for (size_t i = 0; i < n_inputs; i++)
        if (inputs[i].path && !utf8_text(inputs[i].path))
            return ck_err_fail(err, CK_ERR_INPUT, "%s: the path %s (%s) is not UTF-8: ckplan records "
                               "the files it reads in what it writes (plans, runs files, emitted "
                               "code), which are UTF-8 text; rename it", cmd, inputs[i].path,
                               inputs[i].role);
    for (size_t o = 0; o < n_outputs; o++) {
        const ck_named_file *out = &outputs[o];
        for (size_t i = 0; out->path && i < n_inputs; i++)
            if (inputs[i].path && output_is_input(out->path, inputs[i].path))
                return ck_err_fail(err, CK_ERR_INPUT, "%s: the output %s (%s) is the same file as the "
                                                  "input %s (%s): writing it would destroy that "
                                                  "input; choose another output",
                               cmd, out->path, out->role, inputs[i].path, inputs[i].role);
        for (size_t p = o + 1; out->path && p < n_outputs; p++)
            if (outputs[p].path && same_output(out->path, outputs[p].path))
                return ck_err_fail(err, CK_ERR_INPUT, "%s: the outputs %s (%s) and %s (%s) are the same "
                                                  "file: one would overwrite the other; choose "
                                                  "another name for one of them",
                               cmd, out->path, out->role, outputs[p].path, outputs[p].role);
    }
    return CK_OK;
}
