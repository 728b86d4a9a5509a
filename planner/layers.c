/* layers: a schedule seen as per-layer checkpointing (see layers.h). */
#include "planner/layers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ck_layers_free(ck_layers *l)
{
    free(l->stage_layer);
    free(l->first);
    free(l->end);
    free(l->names);
    memset(l, 0, sizeof *l);
}

/* The length of an instance's block name: "h" of "h.3". */
static size_t block_name_length(const char *instance)
{
    const char *dot = strrchr(instance, '.');
    return dot ? (size_t)(dot - instance) : strlen(instance);
}

/* Counts the instances of m and checks they are of one block. */
static int count_instances(const ck_model *m, ck_layers *out, ck_err *err)
{
    for (size_t g = 0; g < m->n_groups; g++) {
        const char *name = m->groups[g].name;
        if (!m->groups[g].instance)
            continue;
        size_t len = block_name_length(name);
        if (out->n_layers == 0) {
            out->block = name;
            out->block_len = len;
        } else if (len != out->block_len || memcmp(name, out->block, len) != 0) {
            return ck_err_fail(err, CK_ERR_INPUT, "stage_info: expected the instances of one repeated "
                               "block as the decoder layers, got two blocks (%.*s and %.*s): which "
                               "are the layers is ambiguous", (int)out->block_len, out->block,
                               (int)len, name);
        }
        out->n_layers++;
    }
    if (out->n_layers == 0)
        return ck_err_fail(err, CK_ERR_INPUT, "stage_info: expected stages that are instances of a "
                           "repeated block (the decoder layers, as \"h.3\"), got none: model %s "
                           "repeats no block", m->name);
    return CK_OK;
}

/* Stage s covers the groups of nodes [from, to): one layer, or no layer at all. */
static int place_stage(const ck_model *m, size_t s, size_t from, size_t to, const size_t *layer_of_group,
                       ck_layers *out, ck_err *err)
{
    size_t g0 = m->nodes[from].group, g1 = m->nodes[to - 1].group;
    out->stage_layer[s] = CK_LAYERS_NO_LAYER;
    for (size_t g = g0; g <= g1; g++) {
        if (!m->groups[g].instance)
            continue;
        if (g0 != g1)
            return ck_err_fail(err, CK_ERR_INPUT, "stage_info[%zu]: expected a stage within one decoder "
                               "layer or outside them all, got one that covers %s and %s: per-layer "
                               "checkpointing needs each layer in stages of its own",
                               s, m->groups[g0].name, m->groups[g1].name);
        size_t k = layer_of_group[g];
        out->stage_layer[s] = k;
        if (out->first[k] == SIZE_MAX)
            out->first[k] = s;
        out->end[k] = s + 1;
    }
    return CK_OK;
}

int ck_layers_find(const ck_model *m, size_t n_stages, const size_t *stage_first, ck_layers *out,
                   ck_err *err)
{
    memset(out, 0, sizeof *out);
    if (!m)
        return ck_err_fail(err, CK_ERR_INPUT, "model.path: expected a model file or a Hugging Face "
                           "config, whose repeated block gives the decoder layers, got a chain file: "
                           "its stages are no model's layers");
    int rc = count_instances(m, out, err);
    if (rc != CK_OK)
        return rc;
    out->n_stages = n_stages;
    size_t *layer_of_group = calloc(m->n_groups, sizeof *layer_of_group);
    out->stage_layer = calloc(n_stages, sizeof *out->stage_layer);
    out->first = malloc(out->n_layers * sizeof *out->first);
    out->end = calloc(out->n_layers, sizeof *out->end);
    out->names = calloc(out->n_layers, sizeof *out->names);
    if (!layer_of_group || !out->stage_layer || !out->first || !out->end || !out->names)
        rc = ck_err_oom(err);
    for (size_t g = 0, k = 0; rc == CK_OK && g < m->n_groups; g++)
        if (m->groups[g].instance) {
            out->names[k] = m->groups[g].name;
            out->first[k] = SIZE_MAX;
            layer_of_group[g] = k++;
        }
    for (size_t s = 0; rc == CK_OK && s < n_stages; s++)
        rc = place_stage(m, s, stage_first[s], stage_first[s + 1], layer_of_group, out, err);
    free(layer_of_group);
    if (rc != CK_OK)
        ck_layers_free(out);
    return rc;
}

void ck_layers_view_free(ck_layers_view *v)
{
    free(v->checkpointed);
    ck_schedule_free(&v->expressed);
    memset(v, 0, sizeof *v);
}

/* What the forward phase (the operations before the loss) does to a stage. */
typedef struct {
    bool stored, checkpoint; /* some F_all; some F_ck */
} forward_ops;

static void note(ck_layers_view *v, ck_layers_limit which, size_t where)
{
    if (v->count[which]++ == 0)
        v->first[which] = where;
}

/* The limits of the forward phase, layer by layer and for the stages outside them. */
static void forward_limits(const ck_layers *l, const forward_ops *f, ck_layers_view *v)
{
    for (size_t s = 0; s < l->n_stages; s++)
        if (l->stage_layer[s] == CK_LAYERS_NO_LAYER && !f[s].stored)
            note(v, CK_LAYERS_NON_LAYER, s);
    for (size_t k = 0; k < l->n_layers; k++) {
        size_t stored = 0;
        for (size_t s = l->first[k]; s < l->end[k]; s++)
            stored += f[s].stored;
        size_t n = l->end[k] - l->first[k];
        v->checkpointed[k] = stored < n;
        v->n_checkpointed += v->checkpointed[k];
        if (stored == n)
            continue;
        if (stored > 0)
            note(v, CK_LAYERS_PART, l->first[k]);
        if (!f[l->first[k]].stored && !f[l->first[k]].checkpoint)
            note(v, CK_LAYERS_INPUT_DROPPED, l->first[k]);
        for (size_t s = l->first[k] + 1; s < l->end[k]; s++)
            if (!f[s].stored && f[s].checkpoint) {
                note(v, CK_LAYERS_INNER_CHECKPOINT, s);
                break;
            }
    }
}

/* The schedule of checkpointing the view's checkpointed layers, each as a unit. */
static int expressed_schedule(const ck_layers *l, const ck_chain *c, ck_layers_view *v, ck_err *err)
{
    size_t *first = malloc((l->n_layers + 1) * sizeof *first);
    size_t *end = malloc((l->n_layers + 1) * sizeof *end);
    size_t n = 0;
    int rc = first && end ? CK_OK : ck_err_oom(err);
    for (size_t k = 0; rc == CK_OK && k < l->n_layers; k++)
        if (v->checkpointed[k]) {
            first[n] = l->first[k];
            end[n++] = l->end[k];
        }
    if (rc == CK_OK)
        rc = ck_layers_segments_schedule(c, first, end, n, &v->expressed, err);
    free(first);
    free(end);
    return rc;
}

int ck_layers_view_of(const ck_layers *l, const ck_chain *c, const ck_schedule *s,
                      ck_layers_view *out, ck_err *err)
{
    memset(out, 0, sizeof *out);
    forward_ops *f = calloc(l->n_stages, sizeof *f);
    out->checkpointed = calloc(l->n_layers + 1, sizeof *out->checkpointed);
    if (!f || !out->checkpointed) {
        free(f);
        return ck_err_oom(err);
    }
    bool after_loss = false;
    for (size_t k = 0; k < s->n; k++) {
        const ck_action *a = &s->actions[k];
        if (a->kind == CK_LOSS)
            after_loss = true;
        else if (after_loss && (a->kind == CK_F_CK || a->kind == CK_F_NONE))
            note(out, CK_LAYERS_NESTED, k);
        else if (!after_loss && a->stage < l->n_stages) {
            f[a->stage].stored |= a->kind == CK_F_ALL;
            f[a->stage].checkpoint |= a->kind == CK_F_CK;
        }
    }
    forward_limits(l, f, out);
    free(f);
    int rc = expressed_schedule(l, c, out, err);
    if (rc != CK_OK)
        return rc;
    out->exact = ck_layers_same_schedule(&out->expressed, s);
    bool explained = false;
    for (int i = 0; i < CK_LAYERS_ORDER; i++)
        explained |= out->count[i] > 0;
    if (!out->exact && !explained) {
        size_t k = 0;
        while (k < s->n && k < out->expressed.n && s->actions[k].kind == out->expressed.actions[k].kind &&
               s->actions[k].stage == out->expressed.actions[k].stage)
            k++;
        note(out, CK_LAYERS_ORDER, k);
    }
    return CK_OK;
}

void ck_layers_mark(const ck_layers *l, ck_chain *c)
{
    c->layers = CK_CHAIN_LAYERS_FOUND;
    for (size_t i = 0; i < c->n_stages; i++)
        c->stages[i].layer = l->stage_layer[i] == CK_LAYERS_NO_LAYER ? 0 : l->stage_layer[i] + 1;
}

/* The layer stage i stands for where c names no layers: its own, but for the last stage,
 * whose output the loss reads: recomputing it would hold that output twice, as x_L and
 * within x̄_L, for nothing saved (a model's layers are followed by a head). */
static size_t stage_as_layer(const ck_chain *c, size_t i)
{
    return i + 1 < c->n_stages ? i + 1 : 0;
}

/* The layers of c as stage ranges [first[k], end[k]), into arrays of n_stages entries:
 * the runs of stages marked with one layer, or where c names no layers every stage but
 * the last. */
static size_t layer_ranges(const ck_chain *c, size_t *first, size_t *end)
{
    size_t n = 0;
    for (size_t i = 0; i < c->n_stages; i++) {
        size_t layer = c->layers == CK_CHAIN_NO_LAYERS ? stage_as_layer(c, i) : c->stages[i].layer;
        if (layer == 0)
            continue;
        if (n > 0 && end[n - 1] == i && c->layers == CK_CHAIN_LAYERS_FOUND &&
            c->stages[i - 1].layer == layer) {
            end[n - 1] = i + 1;
            continue;
        }
        first[n] = i;
        end[n++] = i + 1;
    }
    return n;
}

int ck_layers_known(const ck_chain *c, ck_err *err)
{
    if (c->layers != CK_CHAIN_LAYERS_UNKNOWN)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "per-layer checkpointing: model %s has no layers it can "
                       "checkpoint one by one: it needs the instances of one repeated block (the "
                       "decoder layers, as \"h.3\"), each in stages of its own, and the model "
                       "repeats no block, repeats two, or cuts a stage across a layer's edge",
                       c->name);
}

int ck_layers_every(const ck_chain *c, ck_schedule *out, size_t *n_layers, ck_err *err)
{
    *out = (ck_schedule){0};
    *n_layers = 0;
    int rc = ck_layers_known(c, err);
    if (rc != CK_OK)
        return rc;
    size_t *first = malloc(c->n_stages * sizeof *first);
    size_t *end = malloc(c->n_stages * sizeof *end);
    rc = first && end ? CK_OK : ck_err_oom(err);
    if (rc == CK_OK) {
        *n_layers = layer_ranges(c, first, end);
        rc = ck_layers_segments_schedule(c, first, end, *n_layers, out, err);
    }
    free(first);
    free(end);
    return rc;
}

bool ck_layers_same_schedule(const ck_schedule *a, const ck_schedule *b)
{
    if (a->n != b->n)
        return false;
    for (size_t k = 0; k < a->n; k++)
        if (a->actions[k].kind != b->actions[k].kind ||
            (a->actions[k].kind != CK_LOSS && a->actions[k].stage != b->actions[k].stage))
            return false;
    return true;
}

void ck_layers_describe(const ck_layers *l, const ck_chain *c, const ck_layers_view *v,
                        ck_layers_limit which, char *buf, size_t len)
{
    size_t n = v->count[which], at = v->first[which];
    const char *stage = at < c->n_stages ? c->stages[at].name : "";
    const char *layer = at < l->n_stages && l->stage_layer[at] != CK_LAYERS_NO_LAYER
                            ? l->names[l->stage_layer[at]] : "";
    const char *s = n == 1 ? "" : "s";
    switch (which) {
    case CK_LAYERS_NON_LAYER:
        snprintf(buf, len, "the plan recomputes %zu stage%s that %s no decoder layer (the first: %s); "
                 "per-layer checkpointing stores them", n, s, n == 1 ? "is" : "are", stage);
        break;
    case CK_LAYERS_INPUT_DROPPED:
        snprintf(buf, len, "the plan drops the input of %zu layer%s (F_none; the first: %s) and "
                 "recomputes it from an earlier checkpoint; per-layer checkpointing keeps the input "
                 "of every layer it checkpoints", n, s, layer);
        break;
    case CK_LAYERS_PART:
        snprintf(buf, len, "the plan recomputes only part of %zu layer%s (the first: %s); per-layer "
                 "checkpointing recomputes a whole layer", n, s, layer);
        break;
    case CK_LAYERS_INNER_CHECKPOINT:
        snprintf(buf, len, "the plan keeps an activation inside %zu layer%s as a checkpoint (F_ck; "
                 "the first: stage %s of %s); per-layer checkpointing keeps only a layer's input",
                 n, s, stage, layer);
        break;
    case CK_LAYERS_NESTED:
        snprintf(buf, len, "the plan's backward recomputes with checkpoints of its own (nested "
                 "recomputation: %zu F_ck or F_none operation%s after the loss, the first "
                 "schedule[%zu]); per-layer checkpointing recomputes each layer once, storing all "
                 "of it", n, s, at);
        break;
    default:
        snprintf(buf, len, "the plan orders its operations otherwise than per-layer checkpointing "
                 "(they first differ at schedule[%zu])", at);
    }
}

int ck_layers_segments_schedule(const ck_chain *c, const size_t *first, const size_t *end,
                                size_t n_segments, ck_schedule *out, ck_err *err)
{
    size_t L = c->n_stages;
    bool ok = true;
    *out = (ck_schedule){0};
    for (size_t i = 0, j = 0; ok && i < L; i++) {
        while (j < n_segments && end[j] <= i)
            j++;
        bool inside = j < n_segments && first[j] <= i;
        ok = ck_schedule_push(out, !inside ? CK_F_ALL : i == first[j] ? CK_F_CK : CK_F_NONE, i);
    }
    ok = ok && ck_schedule_push(out, CK_LOSS, 0);
    size_t j = n_segments;
    for (size_t i = L; ok && i-- > 0;) {
        while (j > 0 && first[j - 1] > i)
            j--;
        if (j == 0 || end[j - 1] <= i) {
            ok = ck_schedule_push(out, CK_B, i);
            continue;
        }
        for (size_t r = first[j - 1]; ok && r <= i; r++)
            ok = ck_schedule_push(out, CK_F_ALL, r);
        for (size_t b = i + 1; ok && b-- > first[j - 1];)
            ok = ck_schedule_push(out, CK_B, b);
        i = first[j - 1];
    }
    if (!ok) {
        ck_schedule_free(out);
        return ck_err_oom(err);
    }
    return CK_OK;
}
