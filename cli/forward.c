#include "cli/forward.h"

#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "cli/human.h"
#include "planner/inference.h"
#include "planner/json.h"
#include "planner/size.h"
#include "planner/warning.h"

static void explain(const ck_workload *w, const ck_inference *f, ck_warning *x)
{
    char weights[32], gather[64] = "", kv[32], peak[32], total[32];
    ck_size_format(f->weights, weights, sizeof weights);
    if (f->gather) {
        char g[32];
        ck_size_format(f->gather, g, sizeof g);
        snprintf(gather, sizeof gather, " + ZeRO-3 all-gather buffers %s", g);
    }
    ck_size_format(f->kv_cache, kv, sizeof kv);
    ck_size_format(f->forward_peak, peak, sizeof peak);
    ck_size_format(f->total, total, sizeof total);
    *x = (ck_warning){.code = "inference", .bytes = f->total};
    snprintf(x->message, sizeof x->message,
             "--inference plans a forward pass only, so there is no plan: checkpointing saves "
             "nothing without a backward (nothing is kept for one, and recomputing costs time). "
             "The pass needs %s (%llu bytes): weights %s%s + KV cache %s + the forward's largest "
             "transient %s (at stage '%s')",
             total, (unsigned long long)f->total, weights, gather, kv, peak,
             w->chain.stages[f->peak_stage].name);
}

static void print_row(const char *label, uint64_t bytes, const char *note)
{
    char size[32];
    ck_size_format(bytes, size, sizeof size);
    printf("  %-13s %12s   %s\n", label, size, note);
}

static void print_summary(const ck_workload *w, const ck_inference *f, uint64_t budget,
                          const char *budget_source)
{
    char size[32], note[160];
    ck_human_put_terminal_text(stdout, w->chain.name); /* names from the input: shown, never obeyed */
    fputs(" (", stdout);
    ck_human_put_terminal_text(stdout, w->path);
    ck_size_format(budget, size, sizeof size);
    printf("): inference, a forward pass only\nbudget %s (%llu bytes) from %s\n\n", size,
           (unsigned long long)budget, budget_source);
    print_row("weights", f->weights, "the parameters, in their dtype (ZeRO-3: this rank's shard)");
    if (f->gather) /* the units the forward gathers whole, as in training (docs/parallel.md) */
        print_row("gathered", f->gather, "ZeRO-3's all-gather buffers: a unit and the next, whole");
    print_row("KV cache", f->kv_cache, "K and V of every attention, at this batch and sequence");
    print_row("forward peak", f->forward_peak, "largest transient of the forward (replayed)");
    ck_size_format(f->total > budget ? f->total - budget : budget - f->total, size, sizeof size);
    snprintf(note, sizeof note, "%s %s", size, f->total > budget ? "over the budget" : "to spare");
    print_row("total", f->total, note);
}

static char *to_json(const ck_workload *w, const ck_inference *f, uint64_t budget,
                     const char *device, const ck_warnings *ws)
{
    cJSON *root = cJSON_CreateObject(), *model = NULL;
    bool ok = root && cJSON_AddStringToObject(root, "format", CK_INFERENCE_FORMAT) &&
              (model = cJSON_AddObjectToObject(root, "model")) &&
              cJSON_AddStringToObject(model, "path", w->path) &&
              cJSON_AddStringToObject(model, "sha256", w->sha256) &&
              ck_json_add_number(root, "budget_bytes", (double)budget) &&
              (!device || cJSON_AddStringToObject(root, "device", device)) &&
              ck_json_add_number(root, "weights_bytes", (double)f->weights) &&
              ck_json_add_number(root, "gather_buffers_bytes", (double)f->gather) &&
              ck_json_add_number(root, "kv_cache_bytes", (double)f->kv_cache) &&
              ck_json_add_number(root, "forward_peak_bytes", (double)f->forward_peak) &&
              cJSON_AddStringToObject(root, "forward_peak_stage", w->chain.stages[f->peak_stage].name) &&
              ck_json_add_number(root, "total_bytes", (double)f->total) &&
              cJSON_AddBoolToObject(root, "fits", f->total <= budget) &&
              ck_warning_add_json(root, ws);
    char *text = ok ? ck_json_print(root) : NULL;
    cJSON_Delete(root);
    return text;
}

int ck_forward_report(const ck_workload *w, uint64_t budget, const char *budget_source,
                      const char *device, bool json, ck_err *err)
{
    ck_inference f;
    int rc = ck_inference_measure(w, &f, err);
    if (rc != CK_OK)
        return rc;
    ck_warnings ws = {.n = 1};
    explain(w, &f, &ws.items[0]);
    char *text = json ? to_json(w, &f, budget, device, &ws) : NULL;
    if (json && !text)
        return ck_err_oom(err);
    if (json)
        fputs(text, stdout);
    else
        print_summary(w, &f, budget, budget_source);
    free(text);
    ck_warning_print(stderr, &ws);
    if (f.total <= budget)
        return CK_OK;
    char need[32], have[32];
    ck_size_format(f.total, need, sizeof need);
    ck_size_format(budget, have, sizeof have);
    fprintf(stderr, "ckplan: the forward pass needs %s (%llu bytes), more than the budget of %s "
                    "(%llu bytes)\n",
            need, (unsigned long long)f.total, have, (unsigned long long)budget);
    return CK_ERR_INFEASIBLE;
}
