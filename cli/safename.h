/* safename: file names made from names found in input files (a model's name in a runs
 * file), so that whatever the name says ("../x", "a/b", "", ".hidden", escape sequences,
 * 10,000 characters), the file it names is a plain, visible name inside the directory it is
 * meant for, and different names give different files. */
#ifndef CK_SAFENAME_H
#define CK_SAFENAME_H

#include <stddef.h>

#include "planner/err.h"

/* Bytes kept of the name; a stem is at most CK_SAFE_STEM_MAX - 1 bytes with its suffixes. */
#define CK_SAFE_NAME_KEPT 64
#define CK_SAFE_STEM_MAX 96

/* The stem for `name`: ASCII letters, digits, '_', '-' and '.' are kept, every other
 * character (a UTF-8 character, or a byte that is not UTF-8) becomes one '_', a leading '.'
 * or '-' becomes '_', and at most CK_SAFE_NAME_KEPT bytes are kept; an empty name is
 * "unnamed". When any of that changed the name, '-' and 8 hex digits of the name's SHA-256
 * follow, so that names that read alike ("a/b", "a:b") still differ. Depends on the name
 * alone. */
void ck_safename_stem(const char *name, char stem[CK_SAFE_STEM_MAX]);

/* Stems for n different names, different from each other also to a file system that
 * ignores case: ck_safename_stem's, and for a stem already taken by an earlier name (of
 * names[0..n), in order) a counter, "-2", "-3"... The result depends only on the names and
 * their order. CK_ERR_RUNTIME when out of memory. */
int ck_safename_distinct_stems(const char *const *names, size_t n, char (*stems)[CK_SAFE_STEM_MAX],
                      ck_err *err);

#endif
