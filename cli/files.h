/* files: writing output files so that a failed or interrupted command leaves the old file
 * intact, appending records that concurrent processes do not lose, and refusing outputs
 * that would overwrite a command's own inputs. */
#ifndef CK_FILES_H
#define CK_FILES_H

#include <stdbool.h>
#include <stddef.h>

#include "planner/err.h"

/* Writes data to a temporary file with a short name (.ckplan-XXXXXX) in the directory of
 * path's target, flushes it to disk and renames it over the target: any valid file name
 * works as path. A symbolic link is written through, as editors do: the file it ends at
 * (following a chain of links; a dangling link's target is created) is replaced, and the
 * link stays. On failure the temporary file is removed and the target is untouched. A
 * target that exists and is not a regular file (/dev/stdout, /dev/null, a FIFO) is
 * written in place: renaming over it would replace the device or pipe with a file.
 * Two processes writing the same path at once each rename a whole file: the last wins.
 * The file that replaces another keeps its mode (0600 stays 0600), and a read-only one
 * (no write bit, as 0444) is refused, CK_ERR_RUNTIME, unless ck_files_force: the mode says
 * the user wants it kept, root or not. */
int ck_files_write_atomic(const char *path, const char *data, size_t len, ck_err *err);

/* The same for a file whose name ckplan made inside a directory the user gave (report's
 * charts in --svg DIR): whatever is at path, a symbolic link included, is replaced, never
 * written through, so that nothing planted in the directory can send a write outside it. */
int ck_files_write_in_dir(const char *path, const char *data, size_t len, ck_err *err);

/* `ckplan --force`: read-only outputs (and runs files) are replaced (appended to) too. */
void ck_files_force(bool force);

/* Appends one line (a newline is added) to the file at path, creating it if needed, with
 * one write under an exclusive advisory lock (flock) on the file, opened O_APPEND: appends
 * of concurrent processes (sweeps into one runs file) each land whole, none is lost, and
 * each costs the same whatever the file's size. A file cut short (not ending in a newline)
 * first gets one, so that its last line stays apart from the new one. If the write fails
 * part-way (a full disk, EIO), the file is truncated back to its length before the append:
 * it only ever gains whole lines. Records are not synced one by one: a power failure may
 * lose the last ones. Writers that do not take the lock (a shell's >>) are not ordered. A
 * read-only file is refused as ck_files_write_atomic refuses it. */
int ck_files_append_line(const char *path, const char *line, ck_err *err);

/* A file a command reads or writes, with how the user named it, for messages. */
typedef struct {
    const char *path; /* NULL: not given, skipped */
    const char *role; /* the option or operand: "MODEL", "--costs", "-o", ... */
} ck_named_file;

/* CK_ERR_INPUT, naming both, when an output is the same file as an input (same st_dev and
 * st_ino; symbolic links followed, so a link or a hard link to an input counts): writing
 * it would destroy what the command reads. An input that is a directory counts as the
 * config.json in it, which is what a model given as a directory is read from. Called by
 * every command before it reads or writes anything, and again by those that read files an
 * input names (a plan's model and costs: ck_runner_plan_files_apart). Outputs that do not exist yet, inputs that do not (their loader says
 * so) and files that are not regular (/dev/null, FIFOs: writing them destroys nothing) are
 * never refused. Two outputs that are one file (or one name not created yet) are refused
 * too, since the second would overwrite the first. An input whose path is not UTF-8 is
 * refused as well: what ckplan writes records the files it read, as UTF-8 text (JSON, Python),
 * and must read back. cmd names the command in the message. */
int ck_files_check_apart(const char *cmd, const ck_named_file *inputs, size_t n_inputs,
                           const ck_named_file *outputs, size_t n_outputs, ck_err *err);
/* The same for two arrays, counted here so that no count can disagree with its array. */
#define CK_CHECK_OUTPUTS_APART(cmd, inputs, outputs, err)                                          \
    ck_files_check_apart(cmd, inputs, sizeof(inputs) / sizeof(inputs)[0], outputs,             \
                           sizeof(outputs) / sizeof(outputs)[0], err)

#endif
