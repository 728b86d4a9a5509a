#include "cli/runs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>

#include <cjson/cJSON.h>

#include "cli/human.h"
#include "planner/graph_plan.h"
#include "planner/json.h"
#include "planner/plan.h"

/* Reads the whole file: runs files are appended to for a long time, so no size limit
 * beyond what memory allows. Under a shared lock: appends (ck_files_append_line) hold an
 * exclusive one while they write, so a record is never read half-written. Where locks
 * are not available (ENOLCK) the file is read all the same. */
static int read_all(const char *path, char **text, size_t *len, ck_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: cannot open: %s", path, strerror(errno));
    while (flock(fileno(f), LOCK_SH) != 0 && errno == EINTR)
        continue;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    int rc = buf ? CK_OK : ck_err_oom(err);
    while (rc == CK_OK) {
        if (n == cap) {
            char *bigger = cap <= SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
            if (!bigger) {
                rc = ck_err_oom(err);
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            if (ferror(f))
                rc = ck_err_fail(err, CK_ERR_INPUT, "%s: read error", path);
            break;
        }
    }
    fclose(f);
    if (rc != CK_OK) {
        free(buf);
        return rc;
    }
    *text = buf;
    *len = n;
    return CK_OK;
}

/* "ckplan: MSG (line skipped)" on the FILE that ctx is, shown safely. */
static void warn_bad_line(void *ctx, const char *msg)
{
    FILE *warn = ctx;
    fputs("ckplan: ", warn);
    ck_human_put_terminal_text(warn, msg);
    fputs(" (line skipped)\n", warn);
}

/* A plan file given for a runs file: told so once, instead of every line refused. Looked
 * at in the text already read, so that a FIFO or a pipe is read once. A graph plan has no
 * records at all: run replays it. */
static int refuse_plan_text(const char *path, const char *text, size_t len, ck_err *err)
{
    cJSON *root = NULL;
    ck_err ignored;
    int rc = ck_json_parse(path, text, len, &root, &ignored);
    if (rc == CK_ERR_RUNTIME)
        return ck_err_oom(err);
    if (rc != CK_OK)
        return CK_OK; /* not one JSON document: a runs file, or its parser says what is wrong */
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    bool plan = cJSON_IsString(format) && strcmp(format->valuestring, CK_PLAN_FORMAT) == 0;
    bool graph = plan && ck_graph_plan_is_graph(root);
    cJSON_Delete(root);
    if (!plan)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "report: %s is a plan file (%s%s), not a runs file: report "
                       "reads the records that 'ckplan run' and 'ckplan sweep' append (--runs FILE)%s",
                       path, CK_PLAN_FORMAT, graph ? ", a graph plan" : "",
                       graph ? "; a graph plan is replayed by 'ckplan run PLAN', which appends no "
                               "record" : "; 'ckplan run PLAN' runs it and appends one");
}

int ck_runs_read(const char *path, FILE *warn, const atomic_int *interrupt, ck_runs *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    char *text = NULL;
    size_t len = 0;
    int rc = read_all(path, &text, &len, err);
    if (rc == CK_OK)
        rc = refuse_plan_text(path, text, len, err);
    if (rc == CK_OK)
        rc = ck_record_parse_runs(path, text, len, warn_bad_line, warn, interrupt, out, err);
    free(text);
    return rc;
}
