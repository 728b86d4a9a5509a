/* files: writing output files so that an interrupted run leaves the old file intact. */
#ifndef CK_FILES_H
#define CK_FILES_H

#include <stddef.h>

#include "planner/err.h"

/* Writes data to a temporary file next to path, flushes it to disk and renames it over
 * path. On failure the temporary file is removed and path is untouched. A path that
 * exists and is not a regular file (/dev/stdout, /dev/null, a FIFO) is written in place:
 * renaming over it would replace the device or pipe with a file. */
int ck_write_file_atomic(const char *path, const char *data, size_t len, ck_err *err);

/* Appends one line (a newline is added) to the file at path, creating it if needed, by
 * writing the old contents plus the line to a new file and renaming it: an interrupted
 * append leaves the old file as it was. */
int ck_append_line_atomic(const char *path, const char *line, ck_err *err);

#endif
