/* ckplan report: the records of a runs file as a table, CSV or JSON, one row per record. */
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "cli/chart.h"
#include "cli/commands.h"
#include "cli/files.h"
#include "cli/human.h"
#include "cli/interrupt.h"
#include "cli/options.h"
#include "cli/runs.h"
#include "cli/safename.h"
#include "planner/json.h"
#include "planner/size.h"

#define DEFAULT_RUNS_FILE "ckplan.runs.jsonl"

static void report_usage(FILE *out)
{
    fprintf(out,
            "usage: ckplan report [--runs FILE] [--csv | --json] [--svg DIR]\n"
            "\n"
            "Prints one row per record of a runs file (what 'ckplan run' and 'ckplan sweep'\n"
            "append): model, planner, the options the model was planned with (--seq,\n"
            "--recipe, a layout such as --dp 8 --zero 3 or --pp 4; in the table only when a\n"
            "record has some), budget, predicted and measured activation peak, resident peak,\n"
            "predicted and measured step time and overhead, the baseline's figures, and the\n"
            "outcome: passed, FAILED, not checked, infeasible or planned only.\n"
            "\n"
            "  --runs FILE   the runs file (default %s)\n"
            "  --csv         RFC 4180 CSV with a header: sizes in bytes, times in seconds,\n"
            "                overheads as fractions; empty cells where a record has no figure\n"
            "  --json        a JSON array of objects with the CSV's columns (null when absent)\n"
            "  --svg DIR     also draw, per model (and options), the trade-off of activation\n"
            "                peak against overhead, one line per planner, in\n"
            "                DIR/MODEL.tradeoff.svg (MODEL followed by the options, if any; a\n"
            "                name with characters other than letters, digits, '.', '-' and\n"
            "                '_' gets '_' for them and a hash; each chart is printed with\n"
            "                its model and options)\n"
            "  -h, --help    show this help\n"
            "\n"
            "The table shows control characters in names escaped (\\x1b); --csv and --json\n"
            "keep every character (JSON escapes them, CSV quotes the field).\n"
            "A line that is not a valid record is reported with its line number and skipped.\n"
            "Exit codes: 0 ok (also for an empty file), 2 usage error, a missing file, or a\n"
            "file with corrupt lines (the valid rows are still printed).\n",
            DEFAULT_RUNS_FILE);
}

/* The columns of --csv and --json, in order: one definition so both always agree. */
enum kind { TEXT, BYTES, NUMBER };
enum col {
    C_LINE, C_TIME, C_MODEL, C_PLANNER, C_OPTIONS, C_BUDGET, C_OUTCOME, C_MIN_BUDGET, C_PRED_PEAK,
    C_MEAS_PEAK, C_MEAS_RSS, C_PRED_TIME, C_MEAS_TIME, C_PRED_OVH, C_MEAS_OVH, C_BASE_PRED_PEAK,
    C_BASE_MEAS_PEAK, C_BASE_MEAS_RSS, C_BASE_PRED_TIME, C_BASE_MEAS_TIME, C_STATIC, N_COLS
};
static const struct {
    const char *name;
    enum kind kind;
} columns[N_COLS] = {
    [C_LINE] = {"line", BYTES},
    [C_TIME] = {"time", TEXT},
    [C_MODEL] = {"model", TEXT},
    [C_PLANNER] = {"planner", TEXT},
    [C_OPTIONS] = {"options", TEXT},
    [C_BUDGET] = {"budget_bytes", BYTES},
    [C_OUTCOME] = {"verification", TEXT},
    [C_MIN_BUDGET] = {"minimum_budget_bytes", BYTES},
    [C_PRED_PEAK] = {"predicted_activation_peak_bytes", BYTES},
    [C_MEAS_PEAK] = {"measured_activation_peak_bytes", BYTES},
    [C_MEAS_RSS] = {"measured_rss_peak_bytes", BYTES},
    [C_PRED_TIME] = {"predicted_time_seconds", NUMBER},
    [C_MEAS_TIME] = {"measured_time_seconds", NUMBER},
    [C_PRED_OVH] = {"predicted_overhead", NUMBER},
    [C_MEAS_OVH] = {"measured_overhead", NUMBER},
    [C_BASE_PRED_PEAK] = {"baseline_predicted_activation_peak_bytes", BYTES},
    [C_BASE_MEAS_PEAK] = {"baseline_measured_activation_peak_bytes", BYTES},
    [C_BASE_MEAS_RSS] = {"baseline_measured_rss_peak_bytes", BYTES},
    [C_BASE_PRED_TIME] = {"baseline_predicted_time_seconds", NUMBER},
    [C_BASE_MEAS_TIME] = {"baseline_measured_time_seconds", NUMBER},
    [C_STATIC] = {"static_bytes", BYTES},
};

typedef struct {
    bool present;
    const char *text;
    uint64_t bytes;
    double number;
} cell;

static cell get_cell(const ck_run_row *r, enum col c)
{
    bool p = r->has_predicted, m = r->has_measured;
    switch (c) {
    case C_LINE: return (cell){true, NULL, r->line, 0};
    case C_TIME: return (cell){true, r->time, 0, 0};
    case C_MODEL: return (cell){true, r->model, 0, 0};
    case C_PLANNER: return (cell){true, r->planner, 0, 0};
    case C_OPTIONS: return (cell){true, r->options, 0, 0};
    case C_BUDGET: return (cell){true, NULL, r->budget_bytes, 0};
    case C_OUTCOME: return (cell){true, ck_record_outcome(r), 0, 0};
    case C_MIN_BUDGET: return (cell){r->status == CK_RUN_INFEASIBLE, NULL, r->min_budget_bytes, 0};
    case C_PRED_PEAK: return (cell){p, NULL, r->predicted_peak, 0};
    case C_MEAS_PEAK: return (cell){m, NULL, r->measured_peak, 0};
    case C_MEAS_RSS: return (cell){m, NULL, r->measured_rss, 0};
    case C_PRED_TIME: return (cell){p, NULL, 0, r->predicted_time};
    case C_MEAS_TIME: return (cell){m, NULL, 0, r->measured_time};
    case C_PRED_OVH: return (cell){p, NULL, 0, r->predicted_overhead};
    case C_MEAS_OVH: return (cell){m, NULL, 0, r->measured_overhead};
    case C_BASE_PRED_PEAK: return (cell){p, NULL, r->predicted_baseline_peak, 0};
    case C_BASE_MEAS_PEAK: return (cell){m, NULL, r->baseline_peak, 0};
    case C_BASE_MEAS_RSS: return (cell){m, NULL, r->baseline_rss, 0};
    case C_BASE_PRED_TIME: return (cell){p, NULL, 0, r->predicted_baseline_time};
    case C_BASE_MEAS_TIME: return (cell){m, NULL, 0, r->baseline_time};
    case C_STATIC: return (cell){p, NULL, r->static_bytes, 0};
    case N_COLS: break;
    }
    return (cell){false, NULL, 0, 0};
}

/* RFC 4180: a field holding a comma, quote, CR or LF is quoted, its quotes doubled. Any
 * other control character is kept as it is, faithful to the record, and quoted too, so
 * that readers take the field as text. */
static bool csv_needs_quotes(const char *s)
{
    for (; *s; s++)
        if (*s == ',' || *s == '"' || (unsigned char)*s < 0x20 || *s == 0x7f)
            return true;
    return false;
}

static void csv_field(FILE *out, const char *s)
{
    if (!csv_needs_quotes(s)) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void print_csv(FILE *out, const ck_runs *runs)
{
    for (int c = 0; c < N_COLS; c++) {
        fputs(c ? "," : "", out);
        csv_field(out, columns[c].name);
    }
    fputs("\r\n", out);
    for (size_t i = 0; i < runs->n; i++) {
        for (int c = 0; c < N_COLS; c++) {
            cell v = get_cell(&runs->rows[i], (enum col)c);
            fputs(c ? "," : "", out);
            if (!v.present)
                continue;
            if (columns[c].kind == TEXT)
                csv_field(out, v.text);
            else if (columns[c].kind == BYTES)
                fprintf(out, "%llu", (unsigned long long)v.bytes);
            else /* %.17g: the exact double, so the CSV and JSON agree to the last bit */
                fprintf(out, "%.17g", v.number);
        }
        fputs("\r\n", out);
    }
}

static int print_json(FILE *out, const ck_runs *runs)
{
    cJSON *arr = cJSON_CreateArray();
    bool ok = arr != NULL;
    for (size_t i = 0; ok && i < runs->n; i++) {
        cJSON *o = cJSON_CreateObject();
        ok = o && cJSON_AddItemToArray(arr, o);
        for (int c = 0; ok && c < N_COLS; c++) {
            cell v = get_cell(&runs->rows[i], (enum col)c);
            const char *k = columns[c].name;
            if (!v.present)
                ok = cJSON_AddNullToObject(o, k) != NULL;
            else if (columns[c].kind == TEXT)
                ok = cJSON_AddStringToObject(o, k, v.text) != NULL;
            else if (columns[c].kind == BYTES)
                ok = ck_json_add_number(o, k, (double)v.bytes) != NULL;
            else
                ok = ck_json_add_number(o, k, v.number) != NULL;
        }
    }
    char *text = ok ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    if (!text)
        return CK_ERR_RUNTIME;
    fprintf(out, "%s\n", text);
    free(text);
    return CK_OK;
}

static void fmt_size(bool present, uint64_t v, char *buf, size_t len)
{
    if (present)
        ck_size_format(v, buf, len);
    else
        snprintf(buf, len, "-");
}

static void fmt_time(bool present, double t, char *buf, size_t len)
{
    if (present)
        ck_human_seconds(t, buf, len);
    else
        snprintf(buf, len, "-");
}

static void fmt_pct(bool present, double v, char *buf, size_t len)
{
    if (present)
        snprintf(buf, len, "%+.1f%%", 100 * v);
    else
        snprintf(buf, len, "-");
}

/* Columns a cell takes on a terminal: one per UTF-8 character (not per byte). */
static int shown_width(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

#define TABLE_COLS 16
#define TABLE_OPTIONS 2 /* the options column, shown only when a record has some */
#define CELL 64
/* The options, longer than the other cells, are escaped when they are shown rather than
 * kept in every row's cells: a table of many records would otherwise double its memory. */
#define OPTIONS_CELL 256

/* The text of cell c of table row i (0: the header; record i - 1 after it). */
static const char *cell_text(char (*cells)[TABLE_COLS][CELL], const ck_runs *runs, size_t i, int c,
                             char buf[OPTIONS_CELL])
{
    if (c != TABLE_OPTIONS || i == 0)
        return cells[i][c];
    const char *options = runs->rows[i - 1].options;
    ck_human_terminal_text(options[0] ? options : "-", buf, OPTIONS_CELL);
    return buf;
}

/* The table for a terminal: each column as wide as its widest cell. */
static int print_table(FILE *out, const ck_runs *runs)
{
    static const char *const head[TABLE_COLS] = {
        "model", "planner", "options", "budget", "peak pred", "peak meas", "RSS meas", "time pred",
        "time meas", "ovh pred", "ovh meas", "base peak pred", "base peak meas", "base time pred",
        "base time meas", "verification"};
    size_t n = runs->n + 1;
    char(*cells)[TABLE_COLS][CELL] = calloc(n, sizeof *cells);
    if (!cells)
        return CK_ERR_RUNTIME;
    int width[TABLE_COLS] = {0};
    bool options = false;
    for (int c = 0; c < TABLE_COLS; c++)
        snprintf(cells[0][c], CELL, "%s", head[c]);
    for (size_t i = 0; i < runs->n; i++) {
        const ck_run_row *r = &runs->rows[i];
        char(*row)[CELL] = cells[i + 1];
        bool p = r->has_predicted, m = r->has_measured;
        options = options || r->options[0];
        ck_human_terminal_text(r->model, row[0], CELL);
        ck_human_terminal_text(r->planner, row[1], CELL);
        fmt_size(true, r->budget_bytes, row[3], CELL);
        fmt_size(p, r->predicted_peak, row[4], CELL);
        fmt_size(m, r->measured_peak, row[5], CELL);
        fmt_size(m, r->measured_rss, row[6], CELL);
        fmt_time(p, r->predicted_time, row[7], CELL);
        fmt_time(m, r->measured_time, row[8], CELL);
        fmt_pct(p, r->predicted_overhead, row[9], CELL);
        fmt_pct(m, r->measured_overhead, row[10], CELL);
        fmt_size(p, r->predicted_baseline_peak, row[11], CELL);
        fmt_size(m, r->baseline_peak, row[12], CELL);
        fmt_time(p, r->predicted_baseline_time, row[13], CELL);
        fmt_time(m, r->baseline_time, row[14], CELL);
        if (r->status == CK_RUN_INFEASIBLE) {
            char need[32];
            ck_size_format(r->min_budget_bytes, need, sizeof need);
            snprintf(row[15], CELL, "infeasible (needs %s)", need);
        } else {
            snprintf(row[15], CELL, "%s", ck_record_outcome(r));
        }
    }
    char buf[OPTIONS_CELL];
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < TABLE_COLS; c++) {
            int w = shown_width(cell_text(cells, runs, i, c, buf));
            width[c] = w > width[c] ? w : width[c];
        }
    for (size_t i = 0; i < n; i++) {
        /* names left-aligned, figures right-aligned so that their units line up */
        for (int c = 0; c < TABLE_COLS; c++) {
            if (c == TABLE_OPTIONS && !options)
                continue;
            const char *text = cell_text(cells, runs, i, c, buf);
            int pad = c == TABLE_COLS - 1 ? 0 : width[c] - shown_width(text);
            bool left = c <= TABLE_OPTIONS || c == TABLE_COLS - 1;
            fprintf(out, "%s%*s%s%*s", c ? "  " : "", left ? 0 : pad, "", text, left ? pad : 0, "");
        }
        fputc('\n', out);
    }
    free(cells);
    return CK_OK;
}

enum { OPT_RUNS = 3000, OPT_CSV, OPT_JSON_OUT, OPT_SVG_DIR };

/* One trade-off chart: a model's records are order[begin..end), the first at `first`. */
typedef struct {
    size_t first, begin, end;
} chart_group;

static const ck_run_row *sort_rows;

/* Whether two records are of the same model planned with the same options: one chart. */
static int by_model_options(const ck_run_row *x, const ck_run_row *y)
{
    int c = strcmp(x->model, y->model);
    return c ? c : strcmp(x->options, y->options);
}

/* Records by model and options, then by line, so that each chart's records are side by side. */
static int by_model(const void *a, const void *b)
{
    size_t i = *(const size_t *)a, j = *(const size_t *)b;
    int c = by_model_options(&sort_rows[i], &sort_rows[j]);
    return c ? c : (i > j) - (i < j);
}

static int by_first_record(const void *a, const void *b)
{
    size_t i = ((const chart_group *)a)->first, j = ((const chart_group *)b)->first;
    return (i > j) - (i < j);
}

/* Groups the records by model and options into *groups, in the order they first appear,
 * leaving out groups with nothing to draw (only infeasible points); returns how many. */
static size_t group_by_model(const ck_runs *runs, size_t *order, chart_group *groups)
{
    for (size_t i = 0; i < runs->n; i++)
        order[i] = i;
    sort_rows = runs->rows;
    qsort(order, runs->n, sizeof *order, by_model);
    size_t m = 0;
    for (size_t begin = 0, end; begin < runs->n; begin = end) {
        const ck_run_row *first = &runs->rows[order[begin]];
        bool drawn = false;
        for (end = begin; end < runs->n && by_model_options(&runs->rows[order[end]], first) == 0; end++)
            drawn = drawn || runs->rows[order[end]].has_predicted || runs->rows[order[end]].has_measured;
        if (drawn)
            groups[m++] = (chart_group){order[begin], begin, end};
    }
    qsort(groups, m, sizeof *groups, by_first_record);
    return m;
}

/* Draws one model's chart into path and says on `names` which model it is for. */
static int draw_model(const ck_runs *runs, const size_t *order, const chart_group *g,
                      const char *path, ck_chart_point *pts, FILE *names, ck_err *err)
{
    size_t n = 0;
    for (size_t k = g->begin; k < g->end; k++) {
        const ck_run_row *r = &runs->rows[order[k]];
        if (r->has_predicted)
            pts[n++] = (ck_chart_point){r->planner, r->predicted_peak, 100 * r->predicted_overhead, false};
        if (r->has_measured)
            pts[n++] = (ck_chart_point){r->planner, r->measured_peak, 100 * r->measured_overhead, true};
    }
    const ck_run_row *first = &runs->rows[g->first];
    char shown[160], options[160], title[400]; /* cut whole characters at a time */
    ck_human_terminal_text(first->model, shown, sizeof shown);
    ck_human_terminal_text(first->options, options, sizeof options);
    snprintf(title, sizeof title, "%s%s%s%s: activation memory against time overhead", shown,
             options[0] ? " (" : "", options, options[0] ? ")" : "");
    int rc = ck_chart_tradeoff_write(path, title, NULL, pts, n, err);
    if (rc == CK_OK) {
        fputs("chart: ", names);
        ck_human_put_terminal_text(names, path);
        fputs(" (model \"", names);
        ck_human_put_terminal_text(names, first->model);
        if (first->options[0]) {
            fputs("\", options \"", names);
            ck_human_put_terminal_text(names, first->options);
        }
        fputs("\")\n", names);
    }
    return rc;
}

/* The trade-off charts of a runs file: one per model with something to draw, model k's
 * records at order[groups[k].begin..end), its file DIR/<stems[k]>.tradeoff.svg. The file
 * names come from the model names (cli/safename.h): always inside DIR, one per model. */
typedef struct {
    size_t m, *order;
    chart_group *groups;
    char (*stems)[CK_SAFE_STEM_MAX];
} chart_set;

static void chart_set_free(chart_set *cs)
{
    free(cs->order);
    free(cs->groups);
    free(cs->stems);
}

static int chart_set_make(const ck_runs *runs, chart_set *cs, ck_err *err)
{
    size_t n = runs->n + 1;
    cs->order = malloc(n * sizeof *cs->order);
    cs->groups = malloc(n * sizeof *cs->groups);
    cs->stems = malloc(n * sizeof *cs->stems);
    char **names = calloc(n, sizeof *names);
    int rc = cs->order && cs->groups && cs->stems && names ? CK_OK : ck_err_oom(err);
    cs->m = rc == CK_OK ? group_by_model(runs, cs->order, cs->groups) : 0;
    /* a chart is named after its model, and its options when it has some */
    for (size_t k = 0; rc == CK_OK && k < cs->m; k++) {
        const ck_run_row *r = &runs->rows[cs->groups[k].first];
        size_t len = strlen(r->model) + strlen(r->options) + 2;
        if (!(names[k] = malloc(len)))
            rc = ck_err_oom(err);
        else
            snprintf(names[k], len, "%s%s%s", r->model, r->options[0] ? " " : "", r->options);
    }
    if (rc == CK_OK)
        rc = ck_safename_distinct_stems((const char *const *)names, cs->m, cs->stems, err);
    for (size_t k = 0; names && k < cs->m; k++)
        free(names[k]);
    free(names);
    return rc;
}

static int chart_path(const char *dir, const chart_set *cs, size_t k, char *path, size_t len,
                      ck_err *err)
{
    if (snprintf(path, len, "%s/%s.tradeoff.svg", dir, cs->stems[k]) >= (int)len)
        return ck_err_fail(err, CK_ERR_INPUT, "%.200s...: --svg DIR: too long a path", dir);
    return CK_OK;
}

/* Refuses, before anything is printed or drawn, a chart file that is the runs file. */
static int charts_apart(const char *dir, const chart_set *cs, const char *runs_path, ck_err *err)
{
    const ck_named_file in[] = {{runs_path, "--runs"}};
    char path[4096];
    const ck_named_file out[] = {{path, "a chart of --svg"}};
    int rc = CK_OK;
    for (size_t k = 0; rc == CK_OK && k < cs->m; k++)
        if ((rc = chart_path(dir, cs, k, path, sizeof path, err)) == CK_OK)
            rc = CK_CHECK_OUTPUTS_APART("report", in, out, err);
    return rc;
}

/* Writes the charts into DIR: activation peak against overhead, one series per planner,
 * predicted points and, for runs, measured ones. The names of the files written, and their
 * models, are printed on `names`. */
static int write_tradeoff_charts(const char *dir, const chart_set *cs, const ck_runs *runs,
                                 FILE *names, ck_err *err)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return ck_err_fail(err, CK_ERR_RUNTIME, "%s: cannot create: %s", dir, strerror(errno));
    ck_chart_point *pts = malloc((2 * runs->n + 1) * sizeof *pts);
    int rc = pts ? CK_OK : ck_err_oom(err);
    for (size_t k = 0; rc == CK_OK && k < cs->m; k++) {
        char path[4096];
        if ((rc = chart_path(dir, cs, k, path, sizeof path, err)) == CK_OK)
            rc = draw_model(runs, cs->order, &cs->groups[k], path, pts, names, err);
    }
    free(pts);
    return rc;
}

int ck_cmd_report(int argc, char **argv)
{
    static const struct option longs[] = {
        {"runs", required_argument, NULL, OPT_RUNS}, {"csv", no_argument, NULL, OPT_CSV},
        {"json", no_argument, NULL, OPT_JSON_OUT},   {"help", no_argument, NULL, 'h'},
        {"svg", required_argument, NULL, OPT_SVG_DIR},
        {NULL, 0, NULL, 0},
    };
    const char *path = DEFAULT_RUNS_FILE, *svg_dir = NULL;
    bool csv = false, json = false;
    ck_err err = {{0}};
    opterr = 0;
    optind = 1;
    int code, rc = CK_OK;
    while (rc == CK_OK && (code = getopt_long(argc, argv, ":h", longs, NULL)) != -1) {
        switch (code) {
        case 'h': report_usage(stdout); return 0;
        case OPT_RUNS: path = optarg; break;
        case OPT_CSV: csv = true; break;
        case OPT_JSON_OUT: json = true; break;
        case OPT_SVG_DIR: svg_dir = optarg; break;
        default: rc = ck_options_error("report", argv, longs, code, &err);
        }
    }
    if (rc == CK_OK && csv && json)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "report: --csv and --json exclude each other");
    if (rc == CK_OK && optind < argc)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "report: unexpected argument '%s' (the runs file is "
                                         "given with --runs FILE)", argv[optind]);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    ck_runs runs;
    rc = ck_runs_read(path, stderr, ck_interrupt_flag(), &runs, &err);
    if (rc != CK_OK)
        return ck_main_report(rc, err.msg);
    chart_set charts = {0};
    if (svg_dir && ((rc = chart_set_make(&runs, &charts, &err)) != CK_OK ||
                    (rc = charts_apart(svg_dir, &charts, path, &err)) != CK_OK)) {
        chart_set_free(&charts);
        ck_record_runs_free(&runs);
        return ck_main_report(rc, err.msg);
    }
    if (runs.n_lines == 0) {
        /* Not an error: a fresh runs file is a normal state, but an empty table would look
         * like a failure. Said on stdout so that it is the answer, not a diagnostic. */
        fputs("no runs recorded in ", stdout);
        ck_human_put_terminal_text(stdout, path);
        fputc('\n', stdout);
        chart_set_free(&charts);
        ck_record_runs_free(&runs);
        return 0;
    }
    if (csv)
        print_csv(stdout, &runs);
    else if (json)
        rc = print_json(stdout, &runs);
    else
        rc = print_table(stdout, &runs);
    if (rc != CK_OK)
        ck_err_oom(&err);
    else if (svg_dir)
        rc = write_tradeoff_charts(svg_dir, &charts, &runs, csv || json ? stderr : stdout, &err);
    if (rc == CK_OK && runs.n_bad)
        rc = ck_err_fail(&err, CK_ERR_INPUT, "%s: %zu of %zu records could not be read (see above)",
                     path, runs.n_bad, runs.n_lines);
    chart_set_free(&charts);
    ck_record_runs_free(&runs);
    return ck_main_report(rc, err.msg);
}
