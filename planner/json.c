#include "planner/json.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/limits.h"

#define SHOWN_PATH(path) ((path)[0] ? (path) : "(top level)")

size_t ck_json_utf8_length(const unsigned char *p, size_t n)
{
    unsigned char c = p[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && c < 0xC2) || (len == 4 && c > 0xF4))
        return 0;
    for (size_t k = 1; k < len; k++)
        if ((p[k] & 0xC0) != 0x80)
            return 0;
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0) || (c == 0xF0 && p[1] < 0x90) ||
        (c == 0xF4 && p[1] >= 0x90))
        return 0;
    return len;
}

/* Where a document is, for messages: a whole file ("m.json:3:14: ...") or one line of a
 * file holding a record per line ("runs.jsonl:7: ... (column 14 ...)"). */
typedef struct {
    const char *file;
    size_t record_line; /* 0 for a whole file */
} json_source;

#define LABEL_MAX 1024 /* as long as a whole message (ck_err) */

/* The file, or "FILE:LINE" for a record: what messages without a column start with. */
static const char *source_label(const json_source *src, char *buf, size_t len)
{
    if (src->record_line == 0)
        return src->file;
    snprintf(buf, len, "%.*s:%zu", (int)(len - 24), src->file, src->record_line);
    return buf;
}

/* A fault at line/col of the text: `syntax` ones are "not valid JSON (why)". */
static int fault_at(const json_source *src, size_t line, size_t col, bool syntax,
                    const char *why, ck_err *err)
{
    if (src->record_line == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "%s:%zu:%zu: %s%s%s", src->file, line, col,
                       syntax ? "not valid JSON (" : "", why, syntax ? ")" : "");
    if (syntax)
        return ck_err_fail(err, CK_ERR_INPUT, "%s:%zu: not valid JSON (column %zu: %s)", src->file,
                       src->record_line, col, why);
    return ck_err_fail(err, CK_ERR_INPUT, "%s:%zu: %s (column %zu)", src->file, src->record_line, why,
                   col);
}

/* Whether the escape at p (just after its backslash, n bytes available) is \u0000: cJSON
 * would end the string there, and a name would silently lose its tail. */
static bool escapes_nul(const unsigned char *p, size_t n)
{
    return n >= 5 && p[0] == 'u' && memcmp(p + 1, "0000", 4) == 0;
}

/* What cJSON lets through but JSON (RFC 8259) does not, and what ckplan will not parse:
 * NUL bytes (cJSON would stop there and read a shorter document), raw control characters
 * in strings, text that is not UTF-8, \u0000 in strings, and nesting deeper than
 * max_depth. */
static int scan_text(const json_source *src, const char *text, size_t len,
                     unsigned long max_depth, ck_err *err)
{
    const unsigned char *t = (const unsigned char *)text;
    unsigned long depth = 0;
    size_t line = 1, col = 1;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < len;) {
        const char *why = NULL;
        size_t step = ck_json_utf8_length(t + i, len - i);
        unsigned char c = t[i];
        if (c == 0)
            why = "a NUL byte";
        else if (step == 0)
            why = "bytes that are not UTF-8";
        else if (in_string && c < 0x20)
            why = "a control character inside a string (write it escaped, e.g. \\t)";
        else if (escaped && escapes_nul(t + i, len - i))
            why = "a NUL character (\\u0000) inside a string";
        if (why)
            return fault_at(src, line, col, true, why, err);
        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if ((c == '[' || c == '{') && ++depth > max_depth) {
            char why_deep[160];
            snprintf(why_deep, sizeof why_deep, "nested deeper than the limit of %lu levels of "
                     "arrays and objects (set %s to raise it)", max_depth,
                     ck_limits_name(CK_LIMIT_JSON_DEPTH));
            return fault_at(src, line, col, false, why_deep, err);
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
        if (c == '\n')
            line++, col = 1;
        else
            col++;
        i += step;
    }
    return CK_OK;
}

/* cJSON returns NULL from a parse both for bad JSON and when out of memory: its
 * allocations go through this function, which notes a failure, to tell them apart. */
static bool cjson_alloc_failed;

static void *cjson_malloc(size_t size)
{
    void *p = malloc(size);
    if (!p)
        cjson_alloc_failed = true;
    return p;
}

/* cJSON's parse alone: CK_OK with *root, CK_ERR_RUNTIME when out of memory, CK_ERR_INPUT
 * (no message) for text that is not JSON, with *end where cJSON stopped (or NULL). */
static int parse_raw(const char *text, size_t len, cJSON **root, const char **end, ck_err *err)
{
    static bool hooked;
    if (!hooked) {
        cJSON_Hooks hooks = {.malloc_fn = cjson_malloc, .free_fn = free};
        cJSON_InitHooks(&hooks);
        hooked = true;
    }
    cjson_alloc_failed = false;
    *end = NULL;
    *root = cJSON_ParseWithLengthOpts(text, len, end, 0);
    if (*root)
        return CK_OK;
    return cjson_alloc_failed ? ck_err_oom(err) : CK_ERR_INPUT;
}

/* The message for text cJSON could not parse, at the line and column where it stopped. */
static int syntax_error(const json_source *src, const char *text, size_t len, const char *end,
                        ck_err *err)
{
    char label[LABEL_MAX];
    if (!end || end < text || end > text + len)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: not valid JSON", source_label(src, label, sizeof label));
    size_t line = 1, col = 1;
    for (const char *p = text; p < end; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    /* cJSON stops at the token it could not finish; when only blanks follow that, the
     * document was cut short rather than malformed there. */
    const char *rest = end < text + len ? end + 1 : end;
    while (rest < text + len && (*rest == ' ' || *rest == '\n' || *rest == '\r' || *rest == '\t'))
        rest++;
    const char *cut = src->record_line ? "unexpected end of the line" : "unexpected end of file";
    return fault_at(src, line, col, true, rest >= text + len ? cut : "syntax error here", err);
}

/* Names of an object's members sorted, to find a repeated one in n log n. */
static int compare_names(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Objects up to this many keys are checked pair by pair, without allocating. */
#define FEW_KEYS 16

/* A key of object v given twice (NULL if none); CK_ERR_RUNTIME when out of memory. */
static int repeated_key(const cJSON *v, const char **repeated, ck_err *err)
{
    size_t n = 0;
    for (const cJSON *m = v->child; m; m = m->next)
        n++;
    *repeated = NULL;
    if (n <= FEW_KEYS) {
        for (const cJSON *m = v->child; m && !*repeated; m = m->next)
            for (const cJSON *o = v->child; o != m && !*repeated; o = o->next)
                if (strcmp(o->string, m->string) == 0)
                    *repeated = m->string;
        return CK_OK;
    }
    const char **names = malloc(n * sizeof *names);
    if (!names)
        return ck_err_oom(err);
    n = 0;
    for (const cJSON *m = v->child; m; m = m->next)
        names[n++] = m->string;
    qsort(names, n, sizeof *names, compare_names);
    for (size_t i = 1; i < n && !*repeated; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            *repeated = names[i];
    free(names);
    return CK_OK;
}

/* Fails naming the JSON path of a key given twice in any object of the document: cJSON
 * would keep both and lookups would see only the first, whatever the writer meant. */
static int check_unique_keys(const cJSON *v, const char *path, const char *label, ck_err *err)
{
    if (cJSON_IsObject(v)) {
        const char *twice;
        int rc = repeated_key(v, &twice, err);
        if (rc != CK_OK)
            return rc;
        char mpath[CK_JSON_PATH_MAX];
        if (twice) {
            ck_json_path_key(mpath, path, twice);
            return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: field given twice", label, mpath);
        }
        for (const cJSON *m = v->child; m; m = m->next) {
            ck_json_path_key(mpath, path, m->string);
            if ((rc = check_unique_keys(m, mpath, label, err)) != CK_OK)
                return rc;
        }
    } else if (cJSON_IsArray(v)) {
        size_t i = 0;
        for (const cJSON *m = v->child; m; m = m->next, i++) {
            char ipath[CK_JSON_PATH_MAX];
            ck_json_path_index(ipath, path, i);
            int rc = check_unique_keys(m, ipath, label, err);
            if (rc != CK_OK)
                return rc;
        }
    }
    return CK_OK;
}

/* Every check, then the parse: what ck_json_parse and ck_json_parse_record share. */
static int parse_checked(const json_source *src, const char *text, size_t len, cJSON **root,
                         ck_err *err)
{
    unsigned long max_depth = ck_limits_get(CK_LIMIT_JSON_DEPTH, CK_JSON_MAX_DEPTH);
    if (max_depth > 1000) /* cJSON refuses deeper documents whatever we allow */
        max_depth = 1000;
    int rc = scan_text(src, text, len, max_depth, err);
    if (rc != CK_OK)
        return rc;
    const char *end;
    cJSON *doc;
    rc = parse_raw(text, len, &doc, &end, err);
    if (rc == CK_ERR_INPUT)
        return syntax_error(src, text, len, end, err);
    if (rc != CK_OK)
        return rc;
    char buf[LABEL_MAX];
    const char *label = source_label(src, buf, sizeof buf);
    /* Trailing content after the document ("{} x") is an error, not something to ignore. */
    while (end < text + len && (*end == ' ' || *end == '\n' || *end == '\r' || *end == '\t'))
        end++;
    if (end < text + len)
        rc = ck_err_fail(err, CK_ERR_INPUT, "%s: not valid JSON (trailing data after the %s)", label,
                     src->record_line ? "record" : "document");
    else
        rc = check_unique_keys(doc, "", label, err);
    if (rc != CK_OK) {
        cJSON_Delete(doc);
        return rc;
    }
    *root = doc;
    return CK_OK;
}

int ck_json_parse(const char *file, const char *text, size_t len, cJSON **root, ck_err *err)
{
    const json_source src = {file, 0};
    return parse_checked(&src, text, len, root, err);
}

int ck_json_parse_record(const char *file, size_t line, const char *text, size_t len,
                         cJSON **root, ck_err *err)
{
    const json_source src = {file, line};
    return parse_checked(&src, text, len, root, err);
}

static int too_large(const char *file, unsigned long max_mb, ck_err *err)
{
    return ck_err_fail(err, CK_ERR_INPUT, "%s: larger than the limit of %lu MiB for input files (set "
                                      "%s to raise it)", file, max_mb, ck_limits_name(CK_LIMIT_INPUT_MB));
}

/* The input limit in force, in bytes; *max_mb in MiB as the messages give it. */
static size_t input_limit(unsigned long *max_mb)
{
    *max_mb = ck_limits_get(CK_LIMIT_INPUT_MB, CK_JSON_MAX_FILE_BYTES >> 20);
    return *max_mb > SIZE_MAX >> 21 ? SIZE_MAX >> 1 : (size_t)*max_mb << 20;
}

int ck_json_check_output_size(const char *file, size_t len, ck_err *err)
{
    unsigned long max_mb;
    if (len <= input_limit(&max_mb))
        return CK_OK;
    char size[32];
    ck_size_format(len, size, sizeof size);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: would be %s, larger than the limit of %lu MiB for "
                                          "input files, so ckplan could not read it back (set "
                                          "%s to raise it)", file, size, max_mb,
                       ck_limits_name(CK_LIMIT_INPUT_MB));
}

int ck_json_load_file(const char *file, cJSON **root, char **raw, size_t *raw_len, ck_err *err)
{
    unsigned long max_mb;
    size_t max_bytes = input_limit(&max_mb);
    FILE *f = fopen(file, "rb");
    if (!f)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: cannot open: %s", file, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return ck_err_oom(err);
    }
    for (;;) {
        if (len == cap) {
            if (cap > max_bytes) {
                free(buf);
                fclose(f);
                return too_large(file, max_mb, err);
            }
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                fclose(f);
                return ck_err_oom(err);
            }
            buf = grown;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0)
            break;
    }
    int read_errno = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (read_errno) {
        free(buf);
        return ck_err_fail(err, CK_ERR_INPUT, "%s: read error: %s", file, strerror(read_errno));
    }
    if (len > max_bytes) {
        free(buf);
        return too_large(file, max_mb, err);
    }
    int rc = ck_json_parse(file, buf, len, root, err);
    if (rc == CK_OK && raw) {
        *raw = buf;
        *raw_len = len;
    } else {
        free(buf);
    }
    return rc;
}

/* Paths are built for every node and field that is read, so they are put together by hand:
 * snprintf would cost more than the reading. As snprintf, they are cut to CK_JSON_PATH_MAX. */
static size_t path_put(char *buf, size_t used, const char *s, size_t len)
{
    size_t room = CK_JSON_PATH_MAX - 1 - used;
    memmove(buf + used, s, len < room ? len : room);
    return used + (len < room ? len : room);
}

void ck_json_path_key(char *buf, const char *parent, const char *key)
{
    size_t used = path_put(buf, 0, parent, strlen(parent));
    if (used > 0)
        used = path_put(buf, used, ".", 1);
    used = path_put(buf, used, key, strlen(key));
    buf[used] = '\0';
}

void ck_json_path_index(char *buf, const char *parent, size_t index)
{
    char digits[24];
    size_t n = sizeof digits;
    digits[--n] = ']';
    do
        digits[--n] = (char)('0' + index % 10);
    while ((index /= 10) > 0);
    digits[--n] = '[';
    size_t used = path_put(buf, 0, parent, strlen(parent));
    used = path_put(buf, used, digits + n, sizeof digits - n);
    buf[used] = '\0';
}

void ck_json_describe(const cJSON *v, char *buf, size_t len)
{
    if (!v)
        snprintf(buf, len, "nothing");
    else if (cJSON_IsString(v))
        snprintf(buf, len, "the string \"%.40s\"", v->valuestring);
    else if (cJSON_IsNumber(v))
        snprintf(buf, len, "the number %.17g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(buf, len, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsNull(v))
        snprintf(buf, len, "null");
    else if (cJSON_IsArray(v))
        snprintf(buf, len, "an array");
    else
        snprintf(buf, len, "an object");
}

static int expected(const cJSON *v, const char *what, const char *file, const char *path, ck_err *err)
{
    char got[96];
    ck_json_describe(v, got, sizeof got);
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: expected %s, got %s", file, SHOWN_PATH(path), what, got);
}

int ck_json_expect_object(const cJSON *v, const char *const *allowed, const char *file,
                          const char *path, ck_err *err)
{
    if (!cJSON_IsObject(v))
        return expected(v, "an object", file, path, err);
    for (const cJSON *m = v->child; m; m = m->next) {
        bool known = false;
        for (const char *const *a = allowed; *a && !known; a++)
            known = strcmp(*a, m->string) == 0;
        /* Every key is one of `allowed`, so a repeat shows within their number of members:
         * comparing with the earlier ones stays cheap whatever the object's size. */
        const cJSON *o = v->child;
        while (known && o != m && strcmp(o->string, m->string) != 0)
            o = o->next;
        if (known && o == m)
            continue;
        /* paths only for messages: formatting one per member costs more than the checks */
        char mpath[CK_JSON_PATH_MAX];
        ck_json_path_key(mpath, path, m->string);
        if (!known) {
            char list[512] = "";
            size_t used = 0;
            for (const char *const *a = allowed; *a; a++)
                used += (size_t)snprintf(list + used, used < sizeof list ? sizeof list - used : 0,
                                         "%s%s", a == allowed ? "" : ", ", *a);
            return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: unknown field (allowed here: %s)", file,
                           mpath, list);
        }
    }
    return CK_OK;
}

/* The member's path is formatted only for a message: the getters run for every field of
 * every node, and formatting costs more than the lookup. */
static const cJSON *member(const cJSON *obj, const char *key, bool required, const char *what,
                           const char *file, const char *path, int *rc, ck_err *err)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    *rc = CK_OK;
    if (!v && required) {
        char mpath[CK_JSON_PATH_MAX];
        ck_json_path_key(mpath, path, key);
        *rc = ck_err_fail(err, CK_ERR_INPUT, "%s: %s: missing (expected %s)", file, mpath, what);
    }
    return v;
}

static int expected_member(const cJSON *v, const char *what, const char *file, const char *path,
                           const char *key, ck_err *err)
{
    char mpath[CK_JSON_PATH_MAX];
    ck_json_path_key(mpath, path, key);
    return expected(v, what, file, mpath, err);
}

#define U64_EXPECTED "a non-negative integer below 2^53"

static bool is_exact_u64(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble >= 0 &&
           v->valuedouble == floor(v->valuedouble) && v->valuedouble < CK_JSON_MAX_EXACT_INT;
}

int ck_json_as_u64(const cJSON *v, uint64_t *out, const char *file, const char *path, ck_err *err)
{
    if (!is_exact_u64(v))
        return expected(v, U64_EXPECTED, file, path, err);
    *out = (uint64_t)v->valuedouble;
    return CK_OK;
}

int ck_json_get_u64(const cJSON *obj, const char *key, bool required, uint64_t *out,
                    const char *file, const char *path, ck_err *err)
{
    int rc;
    const cJSON *v = member(obj, key, required, "a non-negative integer", file, path, &rc, err);
    if (!v)
        return rc;
    if (!is_exact_u64(v))
        return expected_member(v, U64_EXPECTED, file, path, key, err);
    *out = (uint64_t)v->valuedouble;
    return CK_OK;
}

int ck_json_get_time(const cJSON *obj, const char *key, bool required, double *out,
                     const char *file, const char *path, ck_err *err)
{
    int rc;
    const cJSON *v = member(obj, key, required, "a non-negative number", file, path, &rc, err);
    if (!v)
        return rc;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < 0)
        return expected_member(v, "a finite non-negative number", file, path, key, err);
    *out = v->valuedouble;
    return CK_OK;
}

int ck_json_get_string(const cJSON *obj, const char *key, bool required, const char **out,
                       const char *file, const char *path, ck_err *err)
{
    int rc;
    const cJSON *v = member(obj, key, required, "a string", file, path, &rc, err);
    if (!v)
        return rc;
    if (!cJSON_IsString(v))
        return expected_member(v, "a string", file, path, key, err);
    *out = v->valuestring;
    return CK_OK;
}

int ck_json_get_bool(const cJSON *obj, const char *key, bool required, bool *out,
                     const char *file, const char *path, ck_err *err)
{
    int rc;
    const cJSON *v = member(obj, key, required, "true or false", file, path, &rc, err);
    if (!v)
        return rc;
    if (!cJSON_IsBool(v))
        return expected_member(v, "true or false", file, path, key, err);
    *out = cJSON_IsTrue(v);
    return CK_OK;
}

int ck_json_get_array(const cJSON *obj, const char *key, bool required, const cJSON **out,
                      const char *file, const char *path, ck_err *err)
{
    int rc;
    const cJSON *v = member(obj, key, required, "an array", file, path, &rc, err);
    if (!v)
        return rc;
    if (!cJSON_IsArray(v))
        return expected_member(v, "an array", file, path, key, err);
    *out = v;
    return CK_OK;
}

int ck_json_expect_format(const cJSON *root, const char *const *formats, const char *file,
                          const char *path, const char **format, ck_err *err)
{
    char wanted[256] = "";
    size_t used = 0;
    for (const char *const *f = formats; *f; f++)
        used += (size_t)snprintf(wanted + used, used < sizeof wanted ? sizeof wanted - used : 0,
                                 "%s\"%s\"", f == formats ? "" : f[1] ? ", " : " or ", *f);
    if (!cJSON_IsObject(root))
        return expected(root, "an object", file, path, err);
    char format_path[CK_JSON_PATH_MAX];
    ck_json_path_key(format_path, path, "format");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "format");
    for (const char *const *f = formats; cJSON_IsString(v) && *f; f++)
        if (strcmp(v->valuestring, *f) == 0) {
            *format = *f;
            return CK_OK;
        }
    return expected(v, wanted, file, format_path, err);
}

cJSON *ck_json_number(double v)
{
    if (!isfinite(v))
        return cJSON_CreateNull();
    char text[32];
    if (v == floor(v) && fabs(v) < CK_JSON_MAX_EXACT_INT) /* sizes, counts: in full */
        snprintf(text, sizeof text, "%.0f", v);
    else
        for (int digits = 15; digits <= 17; digits++) { /* 17 always reads back */
            snprintf(text, sizeof text, "%.*g", digits, v);
            if (strtod(text, NULL) == v)
                break;
        }
    return cJSON_CreateRaw(text);
}

cJSON *ck_json_add_number(cJSON *obj, const char *key, double v)
{
    cJSON *item = ck_json_number(v);
    if (item && !cJSON_AddItemToObject(obj, key, item)) {
        cJSON_Delete(item);
        item = NULL;
    }
    return item;
}

bool ck_json_put(cJSON *obj, const char *key, cJSON *item)
{
    cJSON *old = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!old)
        return cJSON_AddItemToObject(obj, key, item);
    /* The old member's key moves to item: nothing to allocate, so nothing to fail. */
    if (!(item->type & cJSON_StringIsConst))
        cJSON_free(item->string);
    item->string = old->string;
    item->type = (item->type & ~cJSON_StringIsConst) | (old->type & cJSON_StringIsConst);
    old->string = NULL;
    return cJSON_ReplaceItemViaPointer(obj, old, item);
}

char *ck_json_print(const cJSON *root)
{
    char *text = cJSON_Print(root);
    if (!text)
        return NULL;
    size_t n = strlen(text);
    char *with_newline = realloc(text, n + 2);
    if (!with_newline) {
        free(text);
        return NULL;
    }
    with_newline[n] = '\n';
    with_newline[n + 1] = '\0';
    return with_newline;
}
