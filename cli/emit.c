/* emit: what the targets of `ckplan emit` print alike (see emit.h). */
#include "cli/emit.h"

#include <string.h>

#include "cli/human.h"
#include "planner/size.h"

int ck_emit_check_no_variants(const ck_plan_file *p, const char *label, ck_err *err)
{
    if (p->n_variants == 0)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: schedule[%zu].variant: emit writes checkpointing "
                       "of whole layers, which has no recompute inside a stage; plan without "
                       "--variants to emit", label, p->variants[0].op);
}

int ck_emit_replay(const ck_emit_input *in, const ck_schedule *s, ck_emit_figures *out, ck_err *err)
{
    ck_replay r;
    int rc = ck_workload_replay(in->w, s, &r, NULL, NULL, err);
    if (rc != CK_OK)
        return rc;
    out->activation_peak_bytes = r.peak_bytes;
    if (!ck_size_add(in->w->statics.total, r.peak_bytes, &out->peak_bytes))
        return ck_err_fail(err, CK_ERR_INPUT, "static memory plus activations exceed 2^64 bytes");
    out->time = r.time;
    out->overhead = ck_plan_overhead(r.time, in->baseline.time);
    out->fits = out->peak_bytes <= in->plan->budget_bytes;
    return CK_OK;
}

void ck_emit_comment_header(FILE *out, const ck_emit_input *in, const char *what)
{
    fprintf(out, "# ckplan emit %s, from the plan ", what);
    ck_human_put_terminal_text(out, in->label);
    fputs(" (planner ", out);
    ck_human_put_terminal_text(out, in->plan->planner);
    fputs(", model ", out);
    ck_human_put_terminal_text(out, in->plan->model_path);
    fprintf(out, ", %zu decoder layers ", in->layers->n_layers);
    ck_human_put_terminal_text(out, in->layers->names[0]);
    if (in->layers->n_layers > 1) {
        fputs("..", out);
        ck_human_put_terminal_text(out, in->layers->names[in->layers->n_layers - 1]);
    }
    fputs(")\n", out);
    const ck_layers_view *v = in->view;
    fprintf(out, "# checkpointed layers: %zu of %zu", v->n_checkpointed, in->layers->n_layers);
    const char *sep = ": ";
    for (size_t k = 0; k < in->layers->n_layers; k++)
        if (v->checkpointed[k]) {
            fputs(sep, out);
            ck_human_put_terminal_text(out, in->layers->names[k]);
            sep = ", ";
        }
    fputc('\n', out);
}

void ck_emit_comment_limit_list(FILE *out, const ck_emit_input *in)
{
    for (int i = 0; i < CK_LAYERS_N_LIMITS; i++) {
        if (!in->view->count[i])
            continue;
        char what[1024];
        ck_layers_describe(in->layers, &in->w->chain, in->view, (ck_layers_limit)i, what, sizeof what);
        fputs("#   - ", out);
        ck_human_put_terminal_text(out, what);
        fputc('\n', out);
    }
}

void ck_emit_comment_limits(FILE *out, const ck_emit_input *in)
{
    if (in->view->exact) {
        fputs("# checkpointing these layers is exactly the plan's schedule\n", out);
        return;
    }
    fputs("# per-layer checkpointing cannot express all of the plan; this is the closest it\n"
          "# comes, checkpointing these layers, each recomputed whole from its input:\n", out);
    ck_emit_comment_limit_list(out, in);
}

static void put_figures_line(FILE *out, const char *name, const ck_emit_figures *f)
{
    char act[32], total[32], t[32];
    ck_size_format(f->activation_peak_bytes, act, sizeof act);
    ck_size_format(f->peak_bytes, total, sizeof total);
    ck_human_seconds(f->time, t, sizeof t);
    fprintf(out, "#   %-18s %12llu bytes %10s %10s %10s %+8.1f%%\n", name,
            (unsigned long long)f->activation_peak_bytes, act, total, t, 100 * f->overhead);
}

void ck_emit_comment_figures(FILE *out, const ck_emit_input *in, const char *what,
                             const ck_emit_figures *f)
{
    char budget[32], over[32];
    fputs("# predicted, from replaying each schedule's compiled program (roofline step times):\n", out);
    fprintf(out, "#   %-18s %18s %10s %10s %10s %9s\n", "", "activation peak", "", "with static",
            "step", "overhead");
    put_figures_line(out, what, f);
    put_figures_line(out, "the plan", &in->planned);
    put_figures_line(out, "storing everything", &in->baseline);
    ck_size_format(in->plan->budget_bytes, budget, sizeof budget);
    if (f->fits) {
        fprintf(out, "# %s: within the plan's budget of %s for the whole step\n", what, budget);
    } else {
        ck_size_format(f->peak_bytes - in->plan->budget_bytes, over, sizeof over);
        fprintf(out, "# %s: OVER the plan's budget of %s for the whole step, by %s\n", what, budget,
                over);
    }
}

void ck_emit_put_layer_list(FILE *out, const ck_emit_input *in)
{
    const char *sep = "";
    fputc('[', out);
    for (size_t k = 0; k < in->layers->n_layers; k++)
        if (in->view->checkpointed[k]) {
            fprintf(out, "%s%zu", sep, k);
            sep = ", ";
        }
    fputc(']', out);
}
