#include "cli/chart.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/files.h"

/* ---- a growing string ---- */

/* Appends never fail on the spot: the first allocation failure sets oom and every later
 * append is skipped, so drawing code stays readable and the failure is checked once. */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool reserve(buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->n + more + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + more + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return false;
        }
        cap *= 2;
    }
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

static void put(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) {
        b->oom = true;
        return;
    }
    if (!reserve(b, (size_t)need))
        return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)need + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)need;
}

/* Text content or attribute value, escaped for XML. Control characters other than tab and
 * newline are not allowed in XML 1.0 at all, so they become spaces. */
static void put_text(buf *b, const char *text)
{
    for (const char *p = text ? text : ""; *p; p++) {
        switch (*p) {
        case '&': put(b, "&amp;"); break;
        case '<': put(b, "&lt;"); break;
        case '>': put(b, "&gt;"); break;
        case '"': put(b, "&quot;"); break;
        case '\'': put(b, "&apos;"); break;
        default:
            if ((unsigned char)*p < 0x20 && *p != '\t' && *p != '\n')
                put(b, " ");
            else if (reserve(b, 1)) {
                b->s[b->n++] = *p;
                b->s[b->n] = '\0';
            }
        }
    }
}

static int finish(buf *b, char **svg, size_t *len, ck_err *err)
{
    if (b->oom || !b->s) {
        free(b->s);
        return ck_err_oom(err);
    }
    *svg = b->s;
    *len = b->n;
    return CK_OK;
}

/* ---- scales ---- */

/* Approximate width of text at font size px in a generic sans-serif: used only to lay out
 * legends so that entries do not run into each other. */
static double text_width(const char *s, double px)
{
    return 0.58 * px * (double)strlen(s ? s : "");
}

/* The round step (1, 2, 2.5 or 5 times a power of ten) nearest above raw. */
static double nice_step(double raw)
{
    if (!(raw > 0) || !isfinite(raw))
        return 1;
    double p = pow(10, floor(log10(raw)));
    const double m[] = {1, 2, 2.5, 5, 10};
    for (size_t i = 0; i < 5; i++)
        if (m[i] * p >= raw * (1 - 1e-9))
            return m[i] * p;
    return 10 * p;
}

typedef struct {
    double unit;      /* bytes per displayed unit */
    const char *name; /* "B", "KiB", "MiB", "GiB" */
} byte_unit;

static byte_unit unit_for(double max_bytes)
{
    if (max_bytes >= 2.0 * 1073741824.0)
        return (byte_unit){1073741824.0, "GiB"};
    if (max_bytes >= 2.0 * 1048576.0)
        return (byte_unit){1048576.0, "MiB"};
    if (max_bytes >= 2.0 * 1024.0)
        return (byte_unit){1024.0, "KiB"};
    return (byte_unit){1, "B"};
}

/* An axis: data range [lo, hi] mapped onto pixels [p0, p1], with ticks every step from
 * the first multiple of step at or above lo. */
typedef struct {
    double lo, hi, p0, p1, step;
} axis;

static double at(const axis *a, double v)
{
    double span = a->hi - a->lo;
    return a->p0 + (span > 0 ? (v - a->lo) / span : 0.5) * (a->p1 - a->p0);
}

/* Widens [lo, hi] to multiples of a round step giving about `ticks` intervals. */
static axis round_axis(double lo, double hi, double scale, int ticks, double p0, double p1)
{
    if (!(hi > lo)) {
        double pad = lo != 0 ? fabs(lo) * 0.1 : scale;
        lo -= pad;
        hi += pad;
    }
    double step = nice_step((hi - lo) / ticks / scale) * scale;
    return (axis){floor(lo / step + 1e-9) * step, ceil(hi / step - 1e-9) * step, p0, p1, step};
}

/* A tick label: v in the unit, as short as it can be while exact to three digits. */
static void tick_label(char *out, size_t cap, double v, double unit, const char *suffix)
{
    double x = v / unit;
    if (fabs(x) < 1e-9)
        x = 0;
    /* "10%", but "4 MiB" */
    snprintf(out, cap, "%.4g%s%s", x, *suffix && strcmp(suffix, "%") ? " " : "", suffix);
}

/* ---- drawing ---- */

static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#444444", "#8C564B"};
#define N_COLOURS (sizeof palette / sizeof *palette)
#define N_MARKERS 7

static void put_header(buf *b, double w, double h, const char *title)
{
    put(b, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
           "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%.0f\" "
           "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" "
           "font-size=\"12\">\n<title>",
        w, h, w, h);
    put_text(b, title);
    put(b, "</title>\n<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"white\"/>\n"
           "<text class=\"chart-title\" x=\"%.1f\" y=\"28\" text-anchor=\"middle\" "
           "font-size=\"17\" font-weight=\"bold\">",
        w, h, w / 2);
    put_text(b, title);
    put(b, "</text>\n");
}

/* A marker of shape `shape` centred on (x, y); hollow markers are white inside. */
static void put_marker(buf *b, int shape, double x, double y, double r, const char *colour,
                       bool hollow)
{
    const char *fill = hollow ? "white" : colour;
    switch (shape % N_MARKERS) {
    case 0:
        put(b, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"%.2f\"", x, y, r);
        break;
    case 1:
        put(b, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\"", x - r * 0.9,
            y - r * 0.9, r * 1.8, r * 1.8);
        break;
    case 2:
        put(b, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"", x, y - r * 1.2, x + r * 1.1,
            y + r * 0.8, x - r * 1.1, y + r * 0.8);
        break;
    case 3:
        put(b, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"", x, y - r * 1.3,
            x + r * 1.1, y, x, y + r * 1.3, x - r * 1.1, y);
        break;
    case 4:
        put(b, "<path d=\"M%.2f %.2fL%.2f %.2fL%.2f %.2fZ\"", x, y + r * 1.2, x + r * 1.1,
            y - r * 0.8, x - r * 1.1, y - r * 0.8);
        break;
    case 5: /* plus and cross are strokes only: "hollow" changes nothing for them */
        put(b, "<path d=\"M%.2f %.2fH%.2fM%.2f %.2fV%.2f\" stroke-width=\"2.5\"", x - r * 1.2,
            y, x + r * 1.2, x, y - r * 1.2, y + r * 1.2);
        fill = "none";
        break;
    default:
        put(b, "<path d=\"M%.2f %.2fL%.2f %.2fM%.2f %.2fL%.2f %.2f\" stroke-width=\"2.5\"",
            x - r, y - r, x + r, y + r, x - r, y + r, x + r, y - r);
        fill = "none";
        break;
    }
    put(b, " fill=\"%s\" stroke=\"%s\"/>\n", fill, colour);
}

/* Legend entries are laid out left to right, wrapping, under the plot. */
typedef enum { SW_LINE, SW_MARKER, SW_LINE_MARKER, SW_RECT } swatch;

typedef struct {
    const char *label;
    swatch kind;
    const char *colour;
    int marker;
    bool hollow;
    const char *dash; /* the series' stroke-dasharray, NULL for solid */
} legend_item;

#define LEGEND_ROW 20.0
#define LEGEND_SWATCH 30.0

static double legend_item_width(const legend_item *it)
{
    return LEGEND_SWATCH + 6 + text_width(it->label, 12) + 22;
}

static int legend_rows(const legend_item *items, size_t n, double width)
{
    int rows = n ? 1 : 0;
    double x = 0;
    for (size_t i = 0; i < n; i++) {
        double w = legend_item_width(&items[i]);
        if (x > 0 && x + w > width) {
            rows++;
            x = 0;
        }
        x += w;
    }
    return rows;
}

static void put_legend(buf *b, const legend_item *items, size_t n, double left, double top,
                       double width)
{
    put(b, "<g class=\"legend\">\n");
    double x = 0, y = top;
    for (size_t i = 0; i < n; i++) {
        const legend_item *it = &items[i];
        double w = legend_item_width(it);
        if (x > 0 && x + w > width) {
            x = 0;
            y += LEGEND_ROW;
        }
        double sx = left + x, cy = y + LEGEND_ROW / 2;
        put(b, "<g class=\"legend-item\">");
        switch (it->kind) {
        case SW_RECT:
            put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" fill=\"%s\" "
                   "stroke=\"#999999\" stroke-width=\"0.5\"/>",
                sx + 4, cy - 5, LEGEND_SWATCH - 8, it->colour);
            break;
        case SW_MARKER:
            put_marker(b, it->marker, sx + LEGEND_SWATCH / 2, cy, 4, it->colour, it->hollow);
            break;
        default:
            put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                   "stroke-width=\"2\"%s%s%s/>",
                sx, cy, sx + LEGEND_SWATCH, cy, it->colour, it->dash ? " stroke-dasharray=\"" : "",
                it->dash ? it->dash : "", it->dash ? "\"" : "");
            if (it->kind == SW_LINE_MARKER)
                put_marker(b, it->marker, sx + LEGEND_SWATCH / 2, cy, 4, it->colour, it->hollow);
        }
        put(b, "<text x=\"%.1f\" y=\"%.1f\">", sx + LEGEND_SWATCH + 6, cy + 4);
        put_text(b, it->label);
        put(b, "</text></g>\n");
        x += w;
    }
    put(b, "</g>\n");
}

/* Horizontal grid lines and y tick labels (labels only when left_labels). */
static void put_y_axis(buf *b, const axis *y, double x0, double x1, double unit,
                       const char *suffix, bool left_labels)
{
    for (double v = y->lo; v <= y->hi + y->step * 1e-6; v += y->step) {
        double py = at(y, v);
        put(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\" "
               "stroke-width=\"1\"/>\n",
            x0, py, x1, py);
        if (left_labels) {
            char label[64];
            tick_label(label, sizeof label, v, unit, suffix);
            put(b, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", x0 - 6,
                py + 4, label);
        }
    }
}

static void put_frame(buf *b, double x0, double y0, double x1, double y1)
{
    put(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
           "stroke=\"#333333\" stroke-width=\"1\"/>\n",
        x0, y0, x1 - x0, y1 - y0);
}

static void put_axis_label(buf *b, double x, double y, bool vertical, const char *label)
{
    if (vertical)
        put(b, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "font-size=\"13\" transform=\"rotate(-90 %.1f %.1f)\">",
            x, y, x, y);
    else
        put(b, "<text class=\"axis-label\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
               "font-size=\"13\">",
            x, y);
    put_text(b, label);
    put(b, "</text>\n");
}

/* ---- the memory timeline ---- */

#define TL_WIDTH 1100.0
#define TL_HEIGHT 600.0
#define COLOUR_PLAN "#0072B2"
#define COLOUR_BASELINE "#555555"
#define COLOUR_MEASURED "#D55E00"
#define COLOUR_BUDGET "#C00000"
#define COLOUR_FORWARD "#E8F1FA"
#define COLOUR_BACKWARD "#FDF0E4"
#define COLOUR_RECOMPUTE "#D62728"
#define COLOUR_DROPPED "#9467BD"

static bool is_forward(ck_action_kind k)
{
    return k == CK_F_ALL || k == CK_F_CK || k == CK_F_NONE;
}

/* Index of the loss operation, or n when there is none. */
static size_t loss_index(const ck_schedule *s)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->actions[k].kind == CK_LOSS)
            return k;
    return s->n;
}

static void put_panel(buf *b, const ck_chart_timeline *t, const axis *y, double x0, double x1,
                      double top, double bottom, byte_unit u, bool y_labels, uint64_t budget,
                      const char *line_colour, int series_index)
{
    const ck_schedule *s = t->schedule;
    size_t n = s->n, loss = loss_index(s);
    axis x = {0, (double)n, x0, x1, 1};
    double slot = (x1 - x0) / (double)n;

    /* phases behind everything */
    double xl = at(&x, (double)(loss < n ? loss : n));
    put(b, "<rect class=\"phase-forward\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" "
           "fill=\"%s\"/>\n",
        x0, top, xl - x0, bottom - top, COLOUR_FORWARD);
    if (loss < n)
        put(b, "<rect class=\"phase-backward\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
               "height=\"%.1f\" fill=\"%s\"/>\n",
            xl + slot, top, x1 - xl - slot, bottom - top, COLOUR_BACKWARD);
    put_y_axis(b, y, x0, x1, u.unit, u.name, y_labels);
    if (loss < n) {
        double lx = at(&x, (double)loss + 0.5);
        put(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#888888\" "
               "stroke-dasharray=\"2 3\"/>\n",
            lx, top, lx, bottom);
    }

    /* panel title */
    put(b, "<text class=\"panel-title\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" "
           "font-size=\"14\" font-weight=\"bold\">",
        (x0 + x1) / 2, top - 10);
    put_text(b, t->label);
    put(b, " (%zu operations)</text>\n", n);

    /* recomputation band under the axis */
    for (size_t k = 0; k < n; k++) {
        ck_action_kind kind = s->actions[k].kind;
        const char *colour = NULL;
        if (k > loss && is_forward(kind))
            colour = COLOUR_RECOMPUTE;
        else if (k < loss && (kind == CK_F_CK || kind == CK_F_NONE))
            colour = COLOUR_DROPPED;
        if (colour)
            put(b, "<rect class=\"recompute-mark\" x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                   "height=\"8\" fill=\"%s\"><title>%s %s %zu</title></rect>\n",
                at(&x, (double)k) + (slot > 3 ? 0.5 : 0), bottom + 3,
                slot > 3 ? slot - 1 : slot, colour, k > loss ? "recomputed:" : "dropped:",
                ck_action_name(kind), s->actions[k].stage);
    }

    /* x ticks at operation centres, labels under the band */
    double step = nice_step((double)n / 8.0);
    if (step < 1)
        step = 1;
    for (double v = 0; v < (double)n; v += step) {
        double px = at(&x, v + 0.5);
        put(b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#333333\"/>\n",
            px, bottom, px, bottom + 2);
        put(b, "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>\n", px,
            bottom + 26, v);
    }

    /* budget */
    if (budget > 0) {
        double by = at(y, (double)budget);
        put(b, "<line class=\"budget\" x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" "
               "stroke=\"%s\" stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/>\n",
            x0, by, x1, by, COLOUR_BUDGET);
        if (series_index == 0) {
            char label[64];
            tick_label(label, sizeof label, (double)budget, u.unit, u.name);
            /* above the line at the left: a plan stays within its budget, so the space
             * above the line in the plan's panel holds no data */
            put(b, "<text class=\"budget-label\" x=\"%.1f\" y=\"%.2f\" fill=\"%s\">budget "
                   "%s</text>\n",
                x0 + 6, by - 5, COLOUR_BUDGET, label);
        }
    }

    /* the predicted line, then measured markers on it */
    put(b, "<g class=\"series\"><title>");
    put_text(b, t->label);
    put(b, " predicted</title>\n<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" "
           "stroke-linejoin=\"round\" points=\"",
        line_colour);
    for (size_t k = 0; k < n; k++)
        put(b, "%s%.2f,%.2f", k ? " " : "", at(&x, (double)k + 0.5),
            at(y, (double)t->predicted[k]));
    put(b, "\"/>\n</g>\n");
    if (t->measured) {
        double r = slot / 3 < 3.5 ? (slot / 3 > 1.5 ? slot / 3 : 1.5) : 3.5;
        put(b, "<g class=\"series\"><title>");
        put_text(b, t->label);
        put(b, " measured</title>\n");
        for (size_t k = 0; k < n; k++)
            put_marker(b, 0, at(&x, (double)k + 0.5), at(y, (double)t->measured[k]), r,
                       COLOUR_MEASURED, true);
        put(b, "</g>\n");
    }
    put_frame(b, x0, top, x1, bottom);
}

static int check_timeline(const ck_chart_timeline *t, ck_err *err)
{
    if (!t->schedule || t->schedule->n == 0 || !t->predicted)
        return ck_err_fail(err, CK_ERR_INPUT, "chart: timeline \"%s\" has no operations",
                       t->label ? t->label : "");
    return CK_OK;
}

int ck_chart_memory_svg(const char *title, const ck_chart_timeline *plan,
                        const ck_chart_timeline *baseline, uint64_t budget, char **svg,
                        size_t *len, ck_err *err)
{
    int rc = check_timeline(plan, err);
    if (rc == CK_OK && baseline)
        rc = check_timeline(baseline, err);
    if (rc != CK_OK)
        return rc;

    const ck_chart_timeline *panels[2] = {plan, baseline};
    size_t n_panels = baseline ? 2 : 1;
    double max = (double)budget;
    bool measured = false, recomputes = false, drops = false;
    for (size_t p = 0; p < n_panels; p++) {
        const ck_chart_timeline *t = panels[p];
        size_t loss = loss_index(t->schedule);
        for (size_t k = 0; k < t->schedule->n; k++) {
            max = fmax(max, (double)t->predicted[k]);
            if (t->measured)
                max = fmax(max, (double)t->measured[k]);
            ck_action_kind kind = t->schedule->actions[k].kind;
            recomputes |= k > loss && is_forward(kind);
            drops |= k < loss && (kind == CK_F_CK || kind == CK_F_NONE);
        }
        measured |= t->measured != NULL;
    }

    legend_item items[10];
    size_t n_items = 0;
    char plan_label[160], baseline_label[160];
    snprintf(plan_label, sizeof plan_label, "%s: predicted live bytes",
             plan->label ? plan->label : "plan");
    items[n_items++] = (legend_item){plan_label, SW_LINE, COLOUR_PLAN, 0, 0, NULL};
    if (baseline) {
        snprintf(baseline_label, sizeof baseline_label, "%s: predicted live bytes",
                 baseline->label ? baseline->label : "baseline");
        items[n_items++] = (legend_item){baseline_label, SW_LINE, COLOUR_BASELINE, 0, 0, NULL};
    }
    if (measured)
        items[n_items++] =
            (legend_item){"measured live bytes", SW_MARKER, COLOUR_MEASURED, 0, true, NULL};
    if (budget)
        items[n_items++] = (legend_item){"activation budget", SW_LINE, COLOUR_BUDGET, 0, 0, "8 4"};
    items[n_items++] = (legend_item){"forward phase", SW_RECT, COLOUR_FORWARD, 0, 0, NULL};
    items[n_items++] = (legend_item){"backward phase (after loss)", SW_RECT, COLOUR_BACKWARD, 0,
                                     0, NULL};
    items[n_items++] = (legend_item){"loss operation", SW_LINE, "#888888", 0, 0, "2 3"};
    if (recomputes)
        items[n_items++] = (legend_item){"recomputing forward op", SW_RECT, COLOUR_RECOMPUTE, 0,
                                         0, NULL};
    if (drops)
        items[n_items++] =
            (legend_item){"F_ck/F_none: activations dropped", SW_RECT, COLOUR_DROPPED, 0, 0, NULL};

    const double left = 90, right = TL_WIDTH - 25, gap = 40, top = 75;
    int rows = legend_rows(items, n_items, right - left);
    double bottom = TL_HEIGHT - 62 - rows * LEGEND_ROW;
    byte_unit u = unit_for(max);
    axis y = round_axis(0, max * 1.06, u.unit, 6, bottom, top);
    y.lo = 0;

    buf b = {0};
    put_header(&b, TL_WIDTH, TL_HEIGHT, title);
    double width = (right - left - (double)(n_panels - 1) * gap) / (double)n_panels;
    for (size_t p = 0; p < n_panels; p++) {
        double x0 = left + (double)p * (width + gap);
        put_panel(&b, panels[p], &y, x0, x0 + width, top, bottom, u, p == 0, budget,
                  p == 0 ? COLOUR_PLAN : COLOUR_BASELINE, (int)p);
        put_axis_label(&b, x0 + width / 2, bottom + 44, false, "operation (index in schedule)");
    }
    put_axis_label(&b, 24, (top + bottom) / 2, true, "live activation bytes after operation");
    put_legend(&b, items, n_items, left, bottom + 52, right - left);
    put(&b, "</svg>\n");
    return finish(&b, svg, len, err);
}

static int write_svg(const char *path, char *svg, size_t len, ck_err *err)
{
    int rc = ck_files_write_atomic(path, svg, len, err);
    free(svg);
    return rc;
}

int ck_chart_memory_write(const char *path, const char *title, const ck_chart_timeline *plan,
                          const ck_chart_timeline *baseline, uint64_t budget, ck_err *err)
{
    char *svg;
    size_t len;
    int rc = ck_chart_memory_svg(title, plan, baseline, budget, &svg, &len, err);
    return rc == CK_OK ? write_svg(path, svg, len, err) : rc;
}

/* ---- the trade-off chart ---- */

#define TO_WIDTH 900.0
#define TO_HEIGHT 600.0

static int by_peak(const void *a, const void *b)
{
    const ck_chart_point *p = *(const ck_chart_point *const *)a;
    const ck_chart_point *q = *(const ck_chart_point *const *)b;
    if (p->peak_bytes != q->peak_bytes)
        return p->peak_bytes < q->peak_bytes ? -1 : 1;
    return (p->overhead_pct > q->overhead_pct) - (p->overhead_pct < q->overhead_pct);
}

static bool same_name(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

/* One planner's points of one kind (predicted or measured), sorted by peak, as a line
 * with markers. */
static void put_tradeoff_series(buf *b, const ck_chart_point **sel, size_t m, const axis *x,
                                const axis *y, const char *colour, int marker, bool measured)
{
    put(b, "<g class=\"series\"><title>");
    put_text(b, sel[0]->planner);
    put(b, "%s</title>\n", measured ? " measured" : "");
    if (m > 1) {
        put(b, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\"%s points=\"", colour,
            measured ? "1.5" : "2", measured ? " stroke-dasharray=\"6 3\"" : "");
        for (size_t i = 0; i < m; i++)
            put(b, "%s%.2f,%.2f", i ? " " : "", at(x, (double)sel[i]->peak_bytes),
                at(y, sel[i]->overhead_pct));
        put(b, "\"/>\n");
    }
    for (size_t i = 0; i < m; i++)
        put_marker(b, marker, at(x, (double)sel[i]->peak_bytes), at(y, sel[i]->overhead_pct),
                   measured ? 5 : 4.5, colour, measured);
    put(b, "</g>\n");
}

int ck_chart_tradeoff_svg(const char *title, const char *x_label, const ck_chart_point *pts,
                          size_t n, char **svg, size_t *len, ck_err *err)
{
    if (n == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "chart: a trade-off chart needs at least one point");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(pts[i].overhead_pct))
            return ck_err_fail(err, CK_ERR_INPUT, "chart: point %zu (%s) has no finite overhead", i,
                           pts[i].planner ? pts[i].planner : "");

    /* planners in order of first appearance */
    const char **names = calloc(n, sizeof *names);
    const ck_chart_point **sel = calloc(n, sizeof *sel);
    legend_item *items = calloc(n + 2, sizeof *items);
    if (!names || !sel || !items) {
        free(names);
        free(sel);
        free(items);
        return ck_err_oom(err);
    }
    size_t n_names = 0;
    bool any_measured = false;
    double xmin = INFINITY, xmax = -INFINITY, ymin = 0, ymax = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < n_names && !same_name(names[j], pts[i].planner))
            j++;
        if (j == n_names)
            names[n_names++] = pts[i].planner ? pts[i].planner : "";
        any_measured |= pts[i].measured;
        xmin = fmin(xmin, (double)pts[i].peak_bytes);
        xmax = fmax(xmax, (double)pts[i].peak_bytes);
        ymin = fmin(ymin, pts[i].overhead_pct);
        ymax = fmax(ymax, pts[i].overhead_pct);
    }
    size_t n_items = 0;
    for (size_t j = 0; j < n_names; j++)
        items[n_items++] = (legend_item){names[j], SW_LINE_MARKER, palette[j % N_COLOURS],
                                         (int)(j % N_MARKERS), false, NULL};
    if (any_measured) {
        items[n_items++] = (legend_item){"predicted (filled, solid)", SW_LINE_MARKER, "#333333",
                                         0, false, NULL};
        items[n_items++] = (legend_item){"measured (hollow, dashed)", SW_LINE_MARKER, "#333333",
                                         0, true, "6 3"};
    }

    const double left = 95, right = TO_WIDTH - 30, top = 60;
    int rows = legend_rows(items, n_items, right - left);
    double bottom = TO_HEIGHT - 66 - rows * LEGEND_ROW;
    byte_unit u = unit_for(xmax);
    /* room around the extreme points so that markers are not cut by the frame */
    double xpad = (xmax - xmin) * 0.04, ypad = (ymax - ymin) * 0.06;
    axis x = round_axis(xmin - xpad, xmax + xpad, u.unit, 7, left, right);
    if (x.lo < 0 && xmin >= 0)
        x.lo = 0;
    axis y = round_axis(ymin - (ymin < 0 ? ypad : 0), ymax + ypad, 1, 6, bottom, top);

    buf b = {0};
    put_header(&b, TO_WIDTH, TO_HEIGHT, title);
    put_y_axis(&b, &y, left, right, 1, "%", true);
    for (double v = x.lo; v <= x.hi + x.step * 1e-6; v += x.step) {
        double px = at(&x, v);
        char label[64];
        tick_label(label, sizeof label, v, u.unit, u.name);
        put(&b, "<line x1=\"%.2f\" y1=\"%.1f\" x2=\"%.2f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n"
                "<text x=\"%.2f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
            px, top, px, bottom, px, bottom + 18, label);
    }
    if (y.lo < 0 && y.hi > 0)
        put(&b, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" y2=\"%.2f\" stroke=\"#777777\"/>\n",
            left, at(&y, 0), right, at(&y, 0));
    for (size_t j = 0; j < n_names; j++)
        for (int measured = 0; measured < 2; measured++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (same_name(pts[i].planner, names[j]) && pts[i].measured == (measured != 0))
                    sel[m++] = &pts[i];
            if (m == 0)
                continue;
            qsort(sel, m, sizeof *sel, by_peak);
            put_tradeoff_series(&b, sel, m, &x, &y, palette[j % N_COLOURS], (int)(j % N_MARKERS),
                                measured != 0);
        }
    put_frame(&b, left, top, right, bottom);
    char xl[160];
    snprintf(xl, sizeof xl, "%s (bytes, %s)", x_label ? x_label : "activation peak", u.name);
    put_axis_label(&b, (left + right) / 2, bottom + 40, false, xl);
    put_axis_label(&b, 26, (top + bottom) / 2, true, "time overhead over the baseline (%)");
    put_legend(&b, items, n_items, left, bottom + 50, right - left);
    put(&b, "</svg>\n");
    free(names);
    free(sel);
    free(items);
    return finish(&b, svg, len, err);
}

int ck_chart_tradeoff_write(const char *path, const char *title, const char *x_label,
                            const ck_chart_point *pts, size_t n, ck_err *err)
{
    char *svg;
    size_t len;
    int rc = ck_chart_tradeoff_svg(title, x_label, pts, n, &svg, &len, err);
    if (rc != CK_OK)
        return rc;
    rc = ck_files_write_in_dir(path, svg, len, err);
    free(svg);
    return rc;
}

int ck_chart_schedules_write(const char *path, const char *title, const ck_chain *c,
                             const char *plan_label, const ck_schedule *plan,
                             const uint64_t *plan_measured, const uint64_t *baseline_measured,
                             uint64_t budget, ck_err *err)
{
    ck_schedule base = {0};
    uint64_t *plan_live = malloc(plan->n * sizeof *plan_live), *base_live = NULL;
    ck_replay r;
    int rc = plan_live ? ck_schedule_baseline(c, &base, err) : ck_err_oom(err);
    if (rc == CK_OK && !(base_live = malloc(base.n * sizeof *base_live)))
        rc = ck_err_oom(err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, plan, &r, plan_live, NULL, err);
    if (rc == CK_OK)
        rc = ck_schedule_replay(c, &base, &r, base_live, NULL, err);
    if (rc == CK_OK) {
        ck_chart_timeline p = {plan_label, plan, plan_live, plan_measured};
        ck_chart_timeline b = {"baseline", &base, base_live, baseline_measured};
        rc = ck_chart_memory_write(path, title, &p, &b, budget, err);
    }
    free(plan_live);
    free(base_live);
    ck_schedule_free(&base);
    return rc;
}
