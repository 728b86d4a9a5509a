/* json: reading JSON files with errors that name the file, the JSON path and what was
 * expected ("m.json: nodes[3].inputs[0]: expected a tensor name, got 7").
 *
 * Paths are built by the caller with ck_json_path_key / ck_json_path_index into buffers of
 * CK_JSON_PATH_MAX bytes; the root object's path is "" and prints as "(top level)". */
#ifndef CK_JSON_H
#define CK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"
#include "planner/size.h"

#define CK_JSON_PATH_MAX 256
/* Input files larger than this are refused before parsing; the environment variable
 * CKPLAN_MAX_INPUT_MB raises (or lowers) it. */
#define CK_JSON_MAX_FILE_BYTES (64u << 20)
/* Documents nested deeper than this are refused before parsing (ckplan's own formats need
 * fewer than 10 levels); CKPLAN_MAX_JSON_DEPTH changes it, up to cJSON's own 1000. */
#define CK_JSON_MAX_DEPTH 64
/* Integers in JSON are read through doubles; from 2^53 on they are no longer exact, so
 * the readers refuse them (CK_EXACT_LIMIT, planner/size.h). */
#define CK_JSON_MAX_EXACT_INT ((double)CK_EXACT_LIMIT)

/* Reads and parses a whole file. On success *root is owned by the caller (cJSON_Delete),
 * and, when raw is non-NULL, *raw / *raw_len hold the file's bytes (caller frees). */
int ck_json_load_file(const char *file, cJSON **root, char **raw, size_t *raw_len, ck_err *err);

/* CK_OK when a file of len bytes that ckplan is about to write to `file` is within the
 * input limit in force, so that what ckplan writes it reads back; otherwise CK_ERR_INPUT
 * naming the file, the size, the limit and how to raise it. */
int ck_json_check_output_size(const char *file, size_t len, ck_err *err);

/* Parses JSON text held in memory; `file` only names it in messages. Before parsing, the
 * text is checked for what cJSON would let through: NUL bytes, raw control characters and
 * \u0000 in strings, bytes that are not UTF-8, nesting deeper than CK_JSON_MAX_DEPTH;
 * after it, for trailing data and for a key given twice in any object (with its JSON path).
 * Running out of memory is CK_ERR_RUNTIME "out of memory", not a syntax error: the first
 * call routes cJSON's allocations through planner/json.c (cJSON_InitHooks) to tell the two
 * apart. Messages are "FILE:LINE:COL: ..." or "FILE: PATH: ...". */
int ck_json_parse(const char *file, const char *text, size_t len, cJSON **root, ck_err *err);
/* The same checks and parse for a document that is line `line` of `file` (a record of a
 * runs file): messages are "FILE:LINE: ... (column COL...)" or "FILE:LINE: PATH: ...". */
int ck_json_parse_record(const char *file, size_t line, const char *text, size_t len,
                         cJSON **root, ck_err *err);

void ck_json_path_key(char *buf, const char *parent, const char *key);
void ck_json_path_index(char *buf, const char *parent, size_t index);

/* Fails unless v is an object whose keys are all in `allowed` (NULL-terminated); that
 * each is there once was checked by the parse. */
int ck_json_expect_object(const cJSON *v, const char *const *allowed, const char *file,
                          const char *path, ck_err *err);

/* Checks that root, the object at `path`, has a "format" that is one of `formats`
 * (NULL-terminated) and sets *format to it; otherwise names what was expected. */
int ck_json_expect_format(const cJSON *root, const char *const *formats, const char *file,
                          const char *path, const char **format, ck_err *err);

/* Member getters. `obj` is an object at `path`. When the key is absent, a required getter
 * fails and an optional one returns CK_OK leaving *out untouched (so preset the default). */
int ck_json_get_u64(const cJSON *obj, const char *key, bool required, uint64_t *out,
                    const char *file, const char *path, ck_err *err);
/* A finite number >= 0. */
int ck_json_get_time(const cJSON *obj, const char *key, bool required, double *out,
                     const char *file, const char *path, ck_err *err);
int ck_json_get_string(const cJSON *obj, const char *key, bool required, const char **out,
                       const char *file, const char *path, ck_err *err);
int ck_json_get_bool(const cJSON *obj, const char *key, bool required, bool *out,
                     const char *file, const char *path, ck_err *err);
/* An array (possibly empty) */
int ck_json_get_array(const cJSON *obj, const char *key, bool required, const cJSON **out,
                      const char *file, const char *path, ck_err *err);

/* Converts a value at `path` (not a member lookup). */
int ck_json_as_u64(const cJSON *v, uint64_t *out, const char *file, const char *path, ck_err *err);

/* A short description of a JSON value's type and value for messages: "the string \"x\"". */
void ck_json_describe(const cJSON *v, char *buf, size_t len);

/* Length of the UTF-8 sequence starting at p (at most n >= 1 bytes available), or 0 when it
 * is not well-formed (overlong forms, surrogates and code points above U+10FFFF included). */
size_t ck_json_utf8_length(const unsigned char *p, size_t n);

/* Numbers as ckplan writes them: integers below 2^53 in full ("9007199254740991"), other
 * values as the shortest text that reads back as exactly v. (cJSON's own printer settles
 * for 15 digits when they come within a relative DBL_EPSILON of v, which turns the size
 * 9007199254740991 into 9.00719925474099e+15 and DBL_MAX into a text that overflows.) v
 * must be finite: JSON has no infinity; a non-finite v is written as null, which every
 * reader refuses. The item holds the text (cJSON_Raw), not a number: a tree built with it
 * is for printing, and is read back from its printed text, as a file would be. NULL when
 * out of memory. */
cJSON *ck_json_number(double v);
/* Adds ck_json_number(v) to obj as `key`; the item, or NULL when out of memory. */
cJSON *ck_json_add_number(cJSON *obj, const char *key, double v);
/* Puts item into obj as `key`, in place of the member of that name if there is one (its
 * place kept) or last; obj then owns item. false, with obj unchanged and item the caller's,
 * when out of memory. (cJSON 1.7.15's own replace goes on when copying the key fails and
 * leaves a member without a name, printed as "".) */
bool ck_json_put(cJSON *obj, const char *key, cJSON *item);

/* Writes JSON text of root, formatted, with a final newline. Caller frees. NULL on OOM. */
char *ck_json_print(const cJSON *root);

#endif
