/* emit_deepspeed: DeepSpeed's `activation_checkpointing` config section and the layers to
 * call through deepspeed.checkpointing.checkpoint, as one JSON object. DeepSpeed's
 * checkpointing is per call: the config says how (partitioning, CPU offload, contiguous
 * buffers, all off here: they change memory ckplan does not model), the model's forward
 * says which layers. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli/emit.h"
#include "cli/human.h"
#include "planner/json.h"

static cJSON *figures_json(const ck_emit_figures *f)
{
    cJSON *o = cJSON_CreateObject();
    if (o && ck_json_add_number(o, "activation_peak_bytes", (double)f->activation_peak_bytes) &&
        ck_json_add_number(o, "peak_bytes", (double)f->peak_bytes) && ck_json_add_number(o, "time", f->time) &&
        ck_json_add_number(o, "overhead", f->overhead) && cJSON_AddBoolToObject(o, "fits_budget", f->fits))
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* Text from an input file, which its loader checked to be UTF-8: kept exactly, as cJSON
 * escapes whatever JSON needs. */
static bool add_text(cJSON *o, const char *key, const char *text)
{
    return cJSON_AddStringToObject(o, key, text) != NULL;
}

/* Text from the command line, any bytes: shown as on a terminal (ck_human_terminal_text,
 * which makes UTF-8 of them and at most quadruples their length). */
static bool add_argument(cJSON *o, const char *key, const char *text)
{
    size_t len = 4 * strlen(text) + 1;
    char *shown = malloc(len);
    if (!shown)
        return false;
    ck_human_terminal_text(text, shown, len);
    bool ok = cJSON_AddStringToObject(o, key, shown) != NULL;
    free(shown);
    return ok;
}

static cJSON *section_json(const ck_emit_input *in)
{
    cJSON *s = cJSON_CreateObject();
    bool ok = s && cJSON_AddBoolToObject(s, "partition_activations", in->plan->model_opts.layout.partition) &&
              cJSON_AddFalseToObject(s, "cpu_checkpointing") &&
              cJSON_AddFalseToObject(s, "contiguous_memory_optimization");
    if (ok && in->view->n_checkpointed)
        ok = ck_json_add_number(s, "number_checkpoints", (double)in->view->n_checkpointed) != NULL;
    else if (ok)
        ok = cJSON_AddNullToObject(s, "number_checkpoints") != NULL;
    ok = ok && cJSON_AddFalseToObject(s, "synchronize_checkpoint_boundary") &&
         cJSON_AddFalseToObject(s, "profile");
    if (!ok) {
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* The layers to wrap, by index and by name. */
static bool add_layers(cJSON *o, const ck_emit_input *in)
{
    cJSON *idx = cJSON_AddArrayToObject(o, "checkpoint_layers");
    cJSON *names = cJSON_AddArrayToObject(o, "checkpoint_layer_names");
    bool ok = idx && names && ck_json_add_number(o, "layers", (double)in->layers->n_layers);
    for (size_t k = 0; ok && k < in->layers->n_layers; k++) {
        if (!in->view->checkpointed[k])
            continue;
        cJSON *i = ck_json_number((double)k), *n = cJSON_CreateString(in->layers->names[k]);
        ok = i && n;
        if (ok) {
            cJSON_AddItemToArray(idx, i);
            cJSON_AddItemToArray(names, n);
        } else {
            cJSON_Delete(i);
            cJSON_Delete(n);
        }
    }
    return ok;
}

static bool add_limits(cJSON *o, const ck_emit_input *in)
{
    cJSON *limits = cJSON_AddArrayToObject(o, "cannot_express");
    for (int i = 0; limits && i < CK_LAYERS_N_LIMITS; i++) {
        if (!in->view->count[i])
            continue;
        char what[1024];
        ck_layers_describe(in->layers, &in->w->chain, in->view, (ck_layers_limit)i, what, sizeof what);
        cJSON *s = cJSON_CreateString(what);
        if (!s)
            return false;
        cJSON_AddItemToArray(limits, s);
    }
    return limits != NULL && cJSON_AddBoolToObject(o, "exact", in->view->exact);
}

/* Adds item (NULL when it could not be made) to o under key; false, and item freed, when
 * either fails. */
static bool attach(cJSON *o, const char *key, cJSON *item)
{
    if (item && cJSON_AddItemToObject(o, key, item))
        return true;
    cJSON_Delete(item);
    return false;
}

static cJSON *ckplan_json(const ck_emit_input *in)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o && add_argument(o, "plan", in->label) && add_text(o, "planner", in->plan->planner) &&
              add_text(o, "model", in->plan->model_path) && add_layers(o, in) &&
              add_text(o, "wrap", "in the model's forward, call each of these layers "
                                  "(model.model.layers[i]) as deepspeed.checkpointing.checkpoint("
                                  "layer, hidden_states, ...), after deepspeed.checkpointing."
                                  "configure(None, deepspeed_config=...)") &&
              add_limits(o, in) && ck_json_add_number(o, "budget_bytes", (double)in->plan->budget_bytes) &&
              attach(o, "predicted", figures_json(&in->expressed)) &&
              attach(o, "plan_predicted", figures_json(&in->planned)) &&
              attach(o, "baseline", figures_json(&in->baseline));
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int ck_emit_deepspeed(FILE *out, const ck_emit_input *in, ck_err *err)
{
    cJSON *root = cJSON_CreateObject();
    bool ok = root && attach(root, "activation_checkpointing", section_json(in)) &&
              attach(root, "ckplan", ckplan_json(in));
    char *text = ok ? ck_json_print(root) : NULL;
    cJSON_Delete(root);
    if (!text)
        return ck_err_oom(err);
    fputs(text, out);
    free(text);
    return CK_OK;
}
