#include "planner/hf_rank.h"

#include <string.h>

#include "planner/hf.h"

/* Dim name's value: --set's when given, else the config's. */
static uint64_t dim_value(const ck_model_opts *opts, const char *name, uint64_t config)
{
    for (size_t i = 0; i < opts->n_sets; i++)
        if (opts->sets[i].len == strlen(name) && strncmp(opts->sets[i].name, name, opts->sets[i].len) == 0)
            return opts->sets[i].value;
    return config;
}

static int divides(uint64_t n, const char *field, uint64_t whole, const char *flag, const char *file,
                   ck_err *err)
{
    if (whole % n == 0)
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "%s: %s: %llu does not divide by %s %llu: every rank "
                       "must hold an equal part (docs/parallel.md)", file, field,
                       (unsigned long long)whole, flag, (unsigned long long)n);
}

/* What has no rank model here. */
static int refuse(const ck_hf_config *c, const ck_model_opts *opts, const ck_hf_rank *r,
                  const char *file, ck_err *err)
{
    if (opts->lora_rank && (r->tp > 1 || r->cp > 1))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --lora with --tp or --cp: adapters split over "
                           "ranks are not modelled", file);
    if (r->sp && c->family->mlp == CK_HF_MLP_MOE)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --sp with %s's experts: sequence-parallel "
                           "expert routing is not modelled; use --tp without --sp", file,
                           c->family->model_type);
    return CK_OK;
}

int ck_hf_rank_of(const ck_hf_config *c, const ck_model_opts *opts, const char *file,
                  ck_hf_rank *out, ck_err *err)
{
    const ck_layout *l = &opts->layout;
    *out = (ck_hf_rank){.tp = ck_layout_tp(l), .cp = ck_layout_cp(l), .sp = l->sp};
    uint64_t H = dim_value(opts, "H", c->H), KV = dim_value(opts, "KV", c->KV ? c->KV : H);
    uint64_t F = dim_value(opts, "F", c->F ? c->F : 4 * c->C), V = dim_value(opts, "V", c->V);
    uint64_t T = dim_value(opts, "T", c->P && c->P < CK_HF_DEFAULT_SEQ ? c->P : CK_HF_DEFAULT_SEQ);
    int rc = refuse(c, opts, out, file, err);
    if (rc == CK_OK) rc = divides(out->tp, "heads (H)", H, "--tp", file, err);
    if (rc == CK_OK) rc = divides(out->tp, "key/value heads (KV)", KV, "--tp", file, err);
    if (rc == CK_OK) rc = divides(out->tp, "the MLP width (F)", F, "--tp", file, err);
    if (rc == CK_OK) rc = divides(out->cp, "the sequence (T, --seq)", T, "--cp", file, err);
    if (rc == CK_OK && out->sp)
        rc = divides(out->tp, out->cp > 1 ? "a context-parallel rank's sequence (T / --cp)"
                                          : "the sequence (T, --seq)",
                     T / out->cp, "--tp under --sp", file, err);
    out->vocab = (V + out->tp - 1) / out->tp * out->tp; /* V < 2^53, tp <= 1024 */
    return rc;
}
