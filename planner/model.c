#include "planner/model.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/dimexpr.h"
#include "planner/index.h"
#include "planner/json.h"
#include "planner/size.h"

/* The file is read in two passes. The first turns the top-level node list and each block
 * into a scope: entries whose inputs are resolved to indices and whose attributes are
 * numbers. The second expands the top-level scope, instantiating blocks, into nodes and
 * tensors, inferring shapes as it goes.
 *
 * Names are found through sorted indexes (planner/index), never by scanning a list, so that
 * loading takes O(n log n) in the size of the file; every count limit is checked before
 * the work it bounds. */

typedef struct {
    bool outer;   /* a scope input: a graph input, or the block's input */
    size_t index; /* of the scope input, or of an earlier entry */
} ref;

typedef struct {
    const char *name;
    const ck_op_def *op; /* NULL: an instance of block `block` */
    ck_attrs attrs;
    size_t block;
    uint64_t repeat;
    bool frozen; /* "frozen": true */
    ref in[CK_OP_MAX_ARITY];
} entry;

typedef struct {
    const char *name;     /* blocks only */
    char path[CK_JSON_PATH_MAX]; /* of its node list: "nodes", "blocks.layer.nodes" */
    size_t n;
    entry *e;
    ck_index names; /* of e[], by entry number */
} scope;

typedef struct {
    const char *name;
    uint64_t value;
} dim;

typedef struct {
    const char *file;
    ck_err *err;
    const ck_model_opts *opts; /* never NULL */
    dim dims[CK_MODEL_MAX_DIMS];
    size_t n_dims;
    const char **input_names;
    size_t n_inputs;
    ck_index input_index;
    scope *blocks;
    size_t n_blocks;
    ck_index block_index;
    scope top;
    size_t n_nodes, n_groups; /* what the top scope expands to */
    /* The sizes (vocab, dim) of every embedding entry, for tied heads to find their table:
     * table_node[i] is the first expanded embedding of the sizes of key i (CK_NO_NODE: none
     * yet). */
    ck_index tables;
    uint64_t (*table_keys)[2];
    size_t *table_node;
    ck_model *m;
} loader;

static int fail_at(loader *ld, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail_at(loader *ld, const char *path, const char *fmt, ...)
{
    char why[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return ck_err_fail(ld->err, CK_ERR_INPUT, "%s: %s: %s", ld->file, path[0] ? path : "(top level)", why);
}

static int expected(loader *ld, const char *path, const char *what, const cJSON *got)
{
    char shown[96];
    ck_json_describe(got, shown, sizeof shown);
    return fail_at(ld, path, "expected %s, got %s", what, shown);
}

static bool is_identifier(const char *s)
{
    if (!isalpha((unsigned char)s[0]) && s[0] != '_')
        return false;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '_')
            return false;
    return true;
}

static int get_name(loader *ld, const cJSON *obj, const char *key, const char *path, const char **out)
{
    int rc = ck_json_get_string(obj, key, true, out, ld->file, path, ld->err);
    if (rc == CK_OK && !is_identifier(*out)) {
        char mpath[CK_JSON_PATH_MAX];
        ck_json_path_key(mpath, path, key);
        return fail_at(ld, mpath, "expected a name made of letters, digits and '_' not starting "
                                  "with a digit, got \"%s\"", *out);
    }
    return rc;
}

/* Repeated names are found once a list is read, by sorting the n names read (ix holds them,
 * each by its position in `list`). A repeat is at an earlier position than `rc`, the
 * failure that stopped the reading if there was one, so it is the error reported: the
 * same as if each name had been checked as it was read. */
static int refuse_repeated_name(loader *ld, ck_index *ix, const char *list, int rc)
{
    ck_index_sort(ix);
    size_t first;
    const ck_index_entry *again = ck_index_first_repeat(ix, &first);
    if (!again)
        return rc;
    char path[CK_JSON_PATH_MAX];
    ck_json_path_index(path, list, again->id);
    return fail_at(ld, path, "duplicate name \"%s\" (also %s[%zu])", (const char *)again->key, list,
                   first);
}

/* ---- dims and dim expressions ---- */

#define DIM_EXPECTED "a positive integer, a dim name or an expression like \"4*C\" or \"(H+2*KV)*D\""

/* The number of the dim called name[0, len), or CK_INDEX_NONE. A scan, since there are at
 * most CK_MODEL_MAX_DIMS dims. */
static size_t find_dim(const loader *ld, const char *name, size_t len)
{
    for (size_t i = 0; i < ld->n_dims; i++)
        if (strlen(ld->dims[i].name) == len && strncmp(ld->dims[i].name, name, len) == 0)
            return i;
    return CK_INDEX_NONE;
}

static bool lookup_dim(const void *ctx, const char *name, size_t len, uint64_t *value)
{
    size_t d = find_dim(ctx, name, len);
    if (d != CK_INDEX_NONE)
        *value = ((const loader *)ctx)->dims[d].value;
    return d != CK_INDEX_NONE;
}

static int parse_dim(loader *ld, const cJSON *v, const char *path, uint64_t *out)
{
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (!isfinite(d) || d != floor(d) || d < 1 || d >= CK_JSON_MAX_EXACT_INT)
            return expected(ld, path, DIM_EXPECTED, v);
        *out = (uint64_t)d;
        return CK_OK;
    }
    if (!cJSON_IsString(v))
        return expected(ld, path, DIM_EXPECTED, v);
    const char *text = v->valuestring;
    int shown = strlen(text) > 200 ? 200 : (int)strlen(text);
    char why[256];
    if (!ck_dimexpr_eval(text, lookup_dim, ld, out, why, sizeof why))
        return fail_at(ld, path, "%s in \"%.*s\" (expected %s; dims are defined in \"dims\", "
                                 "before their use)", why, shown, text, DIM_EXPECTED);
    if (*out == 0)
        return fail_at(ld, path, "expected a positive size, got \"%.*s\" = 0", shown, text);
    return CK_OK;
}

/* The value --set gives dim name[0, len), or NULL. */
static const ck_model_set *find_set(const ck_model_opts *o, const char *name, size_t len)
{
    for (size_t i = 0; i < o->n_sets; i++)
        if (o->sets[i].len == len && strncmp(o->sets[i].name, name, len) == 0)
            return &o->sets[i];
    return NULL;
}

bool ck_model_opts_set(ck_model_opts *o, const char *name, size_t len, uint64_t value)
{
    ck_model_set *s = (ck_model_set *)find_set(o, name, len);
    if (!s && o->n_sets == CK_MODEL_MAX_DIMS)
        return false;
    if (!s)
        s = &o->sets[o->n_sets++];
    *s = (ck_model_set){name, len, value};
    return true;
}

bool ck_model_opts_any(const ck_model_opts *o)
{
    return o->n_sets || o->recipe || o->optimizer || o->impl || o->grads || o->optimizer_step || o->grad_accum ||
           o->lora_rank || o->attention || o->layout.dp ||
           ck_layout_pipelined(&o->layout) || ck_layout_model_parallel_given(&o->layout);
}

bool ck_model_opts_parallel(const ck_model_opts *o)
{
    const ck_layout *l = &o->layout;
    return l->dp > 1 || l->zero > 0 || ck_layout_tp(l) > 1 || ck_layout_pp(l) > 1;
}

int ck_model_opts_check_grads(const ck_model_opts *o, ck_err *err)
{
    if (!o->grads || strcmp(o->grads, "autograd") != 0 || !ck_model_opts_parallel(o))
        return CK_OK;
    return ck_err_fail(err, CK_ERR_INPUT, "--grads autograd: autograd's gradient lifetimes are "
                       "modelled for one process; a parallel layout (--dp, --zero, --tp, --pp) "
                       "keeps its framework's gradient buffers: use held");
}

static int compare_sets(const void *a, const void *b)
{
    const ck_model_set *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = strncmp(x->name, y->name, n);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/* o as text: ck_model_opts_key's, and with whole_layout the data-parallel and pipeline
 * parts of the layout too. */
static char *opts_text(const ck_model_opts *o, bool whole_layout)
{
    ck_model_set sorted[CK_MODEL_MAX_DIMS];
    memcpy(sorted, o->sets, o->n_sets * sizeof *sorted);
    qsort(sorted, o->n_sets, sizeof *sorted, compare_sets);
    size_t size = 256 + (o->recipe ? strlen(o->recipe) : 0) + (o->optimizer ? strlen(o->optimizer) : 0) +
                  (o->impl ? strlen(o->impl) : 0) + (o->grads ? strlen(o->grads) : 0) +
                  (o->optimizer_step ? strlen(o->optimizer_step) : 0) +
                  (o->attention ? strlen(o->attention) : 0);
    for (size_t i = 0; i < o->n_sets; i++)
        size += sorted[i].len + 24;
    char *key = malloc(size);
    if (!key)
        return NULL;
    size_t used = 0;
    key[0] = '\0';
#define KEY_ADD(...) used += (size_t)snprintf(key + used, size - used, __VA_ARGS__)
    for (size_t i = 0; i < o->n_sets; i++)
        KEY_ADD("%s%.*s=%llu", used ? " " : "", (int)sorted[i].len, sorted[i].name,
                (unsigned long long)sorted[i].value);
    if (o->recipe) KEY_ADD("%srecipe=%s", used ? " " : "", o->recipe);
    if (o->optimizer) KEY_ADD("%soptimizer=%s", used ? " " : "", o->optimizer);
    if (o->impl) KEY_ADD("%simpl=%s", used ? " " : "", o->impl);
    if (o->grads) KEY_ADD("%sgrads=%s", used ? " " : "", o->grads);
    if (o->optimizer_step) KEY_ADD("%soptimizer_step=%s", used ? " " : "", o->optimizer_step);
    if (o->grad_accum) KEY_ADD("%sgrad_accum=%llu", used ? " " : "", (unsigned long long)o->grad_accum);
    if (o->lora_rank) KEY_ADD("%slora=%llu", used ? " " : "", (unsigned long long)o->lora_rank);
    if (o->attention) KEY_ADD("%sattention=%s", used ? " " : "", o->attention);
    /* model parallelism changes the model a rank runs, hence its stages */
    if (ck_layout_tp(&o->layout) > 1) KEY_ADD("%stp=%llu", used ? " " : "", (unsigned long long)o->layout.tp);
    if (o->layout.sp) KEY_ADD("%ssp", used ? " " : "");
    if (ck_layout_cp(&o->layout) > 1) KEY_ADD("%scp=%llu", used ? " " : "", (unsigned long long)o->layout.cp);
    const ck_layout *l = &o->layout;
    if (whole_layout && l->partition)
        KEY_ADD("%spartition_activations", used ? " " : "");
    if (whole_layout && l->dp)
        KEY_ADD("%sdp=%llu zero=%u", used ? " " : "", (unsigned long long)l->dp, l->zero);
    if (whole_layout && ck_layout_pipelined(l))
        KEY_ADD("%spp=%llu microbatches=%llu virtual_stages=%llu", used ? " " : "",
                (unsigned long long)ck_layout_pp(l), (unsigned long long)ck_layout_microbatches(l),
                (unsigned long long)ck_layout_virtual(l));
#undef KEY_ADD
    return key;
}

char *ck_model_opts_key(const ck_model_opts *o)
{
    return opts_text(o, false);
}

char *ck_model_opts_text(const ck_model_opts *o)
{
    return opts_text(o, true);
}

/* Every --set must name a dim of the file: a misspelt name would otherwise change nothing. */
static int check_sets_used(loader *ld)
{
    for (size_t i = 0; i < ld->opts->n_sets; i++) {
        const ck_model_set *set = &ld->opts->sets[i];
        if (find_dim(ld, set->name, set->len) != CK_INDEX_NONE)
            continue;
        char names[512] = "";
        size_t used = 0;
        for (size_t d = 0; d < ld->n_dims && used < sizeof names; d++)
            used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", d ? ", " : "",
                                     ld->dims[d].name);
        return fail_at(ld, "dims", "--set %.*s: the model has no dim of that name (its dims: %s)",
                       set->len > 200 ? 200 : (int)set->len, set->name, ld->n_dims ? names : "none");
    }
    return CK_OK;
}

/* Reads dims in order; a dim given by --set takes that value (after its own expression is
 * checked), and later dims are computed from it. */
static int read_dims(loader *ld, const cJSON *root)
{
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dims");
    if (dims && !cJSON_IsObject(dims))
        return expected(ld, "dims", "an object of named sizes", dims);
    /* dims are keys: the parse refused a name given twice (ck_json_parse) */
    for (const cJSON *d = dims ? dims->child : NULL; d; d = d->next) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_key(path, "dims", d->string);
        if (!is_identifier(d->string))
            return fail_at(ld, path, "expected a dim name made of letters, digits and '_'");
        if (ld->n_dims == CK_MODEL_MAX_DIMS)
            return fail_at(ld, path, "more than %d dims", CK_MODEL_MAX_DIMS);
        uint64_t value;
        int rc = parse_dim(ld, d, path, &value);
        if (rc != CK_OK)
            return rc;
        const ck_model_set *set = find_set(ld->opts, d->string, strlen(d->string));
        ld->dims[ld->n_dims++] = (dim){d->string, set ? set->value : value};
    }
    return check_sets_used(ld);
}

static int get_dtype(loader *ld, const cJSON *obj, const char *key, const char *path,
                     bool float_only, ck_dtype *out)
{
    const char *name = NULL;
    int rc = ck_json_get_string(obj, key, false, &name, ld->file, path, ld->err);
    if (rc != CK_OK || !name)
        return rc;
    char mpath[CK_JSON_PATH_MAX];
    ck_json_path_key(mpath, path, key);
    if (!ck_dtype_parse(name, out) || (float_only && !ck_dtype_is_float(*out)) ||
        *out == CK_I64) /* int64 is moe's saved indices' type, not an input's */
        return fail_at(ld, mpath, "expected %s, got \"%s\"",
                       float_only ? "f32, bf16 or f16" : "f32, bf16, f16, int32 or u8", name);
    return CK_OK;
}

/* The name the command line gives (flag, value), else training.key, else NULL; given
 * receives which, for messages. */
static int chosen_name(loader *ld, const cJSON *tr, const char *key, const char *flag,
                       const char *value, const char **name, char given[CK_JSON_PATH_MAX])
{
    *name = value;
    snprintf(given, CK_JSON_PATH_MAX, "%s%s", value ? flag : "training.", value ? "" : key);
    return value || !tr ? CK_OK : ck_json_get_string(tr, key, false, name, ld->file, "training", ld->err);
}

static int unknown_name(loader *ld, const char *given, const char *names, const char *name)
{
    return ck_err_fail(ld->err, CK_ERR_INPUT, "%s: %s: expected one of %s, got \"%.*s\"", ld->file,
                       given, names, strlen(name) > 200 ? 200 : (int)strlen(name), name);
}

/* The optimizer: --optimizer, else training.optimizer, else none. */
static int read_optimizer(loader *ld, const cJSON *tr, ck_optimizer *out)
{
    const char *name;
    char given[CK_JSON_PATH_MAX];
    int rc = chosen_name(ld, tr, "optimizer", "--optimizer", ld->opts->optimizer, &name, given);
    *out = CK_OPT_NONE;
    if (rc != CK_OK || !name || ck_training_optimizer_parse(name, out))
        return rc;
    return unknown_name(ld, given, ck_training_optimizer_names(), name);
}

/* The recipe: --recipe, else training.recipe, else none (CK_RECIPE_CUSTOM). */
static int read_recipe(loader *ld, const cJSON *tr, ck_recipe *out)
{
    const char *name;
    char given[CK_JSON_PATH_MAX];
    int rc = chosen_name(ld, tr, "recipe", "--recipe", ld->opts->recipe, &name, given);
    *out = CK_RECIPE_CUSTOM;
    if (rc != CK_OK || !name || ck_training_recipe_parse(name, out))
        return rc;
    return unknown_name(ld, given, ck_training_recipe_names(), name);
}

/* The file's own mix: dtype (already in m->dtype), param_dtype, grad_dtype, master_weights. */
static int read_mix(loader *ld, const cJSON *tr, ck_training *t)
{
    int rc = get_dtype(ld, tr, "param_dtype", "training", true, &t->param_dtype);
    t->grad_dtype = t->param_dtype;
    if (rc == CK_OK) rc = get_dtype(ld, tr, "grad_dtype", "training", true, &t->grad_dtype);
    if (rc == CK_OK) rc = ck_json_get_bool(tr, "master_weights", false, &t->master_weights, ld->file, "training", ld->err);
    if (rc == CK_OK && t->master_weights && t->param_dtype == CK_F32)
        return fail_at(ld, "training.master_weights",
                       "expected false with f32 parameters (master weights are an f32 copy of "
                       "16-bit parameters)");
    return rc;
}

/* A field of the mix that the file gives beside training.recipe must say what the recipe
 * says: the file would otherwise say two things. */
static int check_mix_agrees(loader *ld, const cJSON *root, const cJSON *tr, const ck_training *mix,
                            const ck_recipe_def *r)
{
    const struct {
        const cJSON *obj;
        const char *key, *path, *file_says, *recipe_says;
    } fields[] = {
        {root, "dtype", "dtype", ck_dtype_name(ld->m->dtype), ck_dtype_name(r->activations)},
        {tr, "param_dtype", "training.param_dtype", ck_dtype_name(mix->param_dtype), ck_dtype_name(r->params)},
        {tr, "grad_dtype", "training.grad_dtype", ck_dtype_name(mix->grad_dtype), ck_dtype_name(r->grads)},
        {tr, "master_weights", "training.master_weights", mix->master_weights ? "true" : "false",
         r->master_weights ? "true" : "false"},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (cJSON_GetObjectItemCaseSensitive(fields[i].obj, fields[i].key) &&
            strcmp(fields[i].file_says, fields[i].recipe_says) != 0)
            return fail_at(ld, fields[i].path, "%s contradicts training.recipe \"%s\", which sets %s "
                           "to %s (drop the field, or the recipe for a mix of your own)",
                           fields[i].file_says, r->name, fields[i].key, fields[i].recipe_says);
    return CK_OK;
}

/* The implementation profile: --impl, else training.impl, else none. */
static int read_impl(loader *ld, const cJSON *tr, const ck_impl **out)
{
    const char *name;
    char given[CK_JSON_PATH_MAX];
    int rc = chosen_name(ld, tr, "impl", "--impl", ld->opts->impl, &name, given);
    if (rc != CK_OK || !name || (*out = ck_impl_find(name)))
        return rc;
    return unknown_name(ld, given, ck_impl_names(), name);
}

/* When gradients exist: --grads, else training.grads, else held. PyTorch's own lifetimes
 * are modelled for one process only: a data-parallel, ZeRO, tensor- or pipeline-parallel
 * rank keeps its gradients in the buffers its framework allocates for the step, so a file's
 * autograd means held there, and --grads autograd with such a layout is refused. */
static int read_grads(loader *ld, const cJSON *tr, ck_grads *out)
{
    const char *name;
    char given[CK_JSON_PATH_MAX];
    int rc = chosen_name(ld, tr, "grads", "--grads", ld->opts->grads, &name, given);
    *out = CK_GRADS_HELD;
    if (rc != CK_OK || !name)
        return rc;
    if (!ck_training_grads_parse(name, out))
        return unknown_name(ld, given, ck_training_grads_names(), name);
    if (ck_model_opts_parallel(ld->opts))
        *out = CK_GRADS_HELD;
    return ck_model_opts_check_grads(ld->opts, ld->err);
}

/* How the optimizer's step is computed: --optimizer-step, else training.optimizer_step, else
 * fused. */
static int read_optimizer_step(loader *ld, const cJSON *tr, ck_optstep *out)
{
    const char *name;
    char given[CK_JSON_PATH_MAX];
    int rc = chosen_name(ld, tr, "optimizer_step", "--optimizer-step", ld->opts->optimizer_step, &name, given);
    *out = CK_OPTSTEP_FUSED;
    if (rc != CK_OK || !name || ck_training_optstep_parse(name, out))
        return rc;
    return unknown_name(ld, given, ck_training_optstep_names(), name);
}

/* Micro-steps per optimizer step: --grad-accum, else training.grad_accum, else 1. */
static int read_grad_accum(loader *ld, const cJSON *tr, uint64_t *out)
{
    *out = ld->opts->grad_accum;
    if (*out || !tr || !cJSON_GetObjectItemCaseSensitive(tr, "grad_accum")) {
        *out = *out ? *out : 1;
        return CK_OK;
    }
    int rc = ck_json_get_u64(tr, "grad_accum", true, out, ld->file, "training", ld->err);
    if (rc == CK_OK && (*out < 1 || *out > CK_TRAINING_MAX_GRAD_ACCUM))
        return fail_at(ld, "training.grad_accum", "expected 1 to %d micro-steps, got %llu",
                       CK_TRAINING_MAX_GRAD_ACCUM, (unsigned long long)*out);
    return rc;
}

/* --recipe replaces the file's recipe and mix; training.recipe sets the mix, and fields
 * of the mix given beside it must agree; without a recipe, the mix is the file's. */
static int read_training(loader *ld, const cJSON *root, ck_training *t)
{
    static const char *const keys[] = {"optimizer", "recipe", "param_dtype", "grad_dtype",
                                       "master_weights", "impl", "grads", "optimizer_step", "grad_accum", NULL};
    *t = (ck_training){CK_RECIPE_CUSTOM, CK_OPT_NONE, CK_F32, CK_F32, false, CK_F32, CK_GRADS_HELD,
                       CK_OPTSTEP_FUSED, 1};
    const cJSON *tr = cJSON_GetObjectItemCaseSensitive(root, "training");
    int rc = tr ? ck_json_expect_object(tr, keys, ld->file, "training", ld->err) : CK_OK;
    if (rc == CK_OK) rc = read_impl(ld, tr, &ld->m->impl);
    if (rc == CK_OK) rc = read_grads(ld, tr, &t->grads);
    if (rc == CK_OK) rc = read_optimizer_step(ld, tr, &t->optimizer_step);
    if (rc == CK_OK) rc = read_grad_accum(ld, tr, &t->grad_accum);
    if (rc == CK_OK) rc = read_optimizer(ld, tr, &t->optimizer);
    if (rc == CK_OK) rc = read_recipe(ld, tr, &t->recipe);
    if (rc == CK_OK && tr) rc = read_mix(ld, tr, t);
    if (rc != CK_OK || t->recipe == CK_RECIPE_CUSTOM)
        return rc;
    const ck_recipe_def *r = ck_training_recipe(t->recipe);
    if (!ld->opts->recipe && (rc = check_mix_agrees(ld, root, tr, t, r)) != CK_OK)
        return rc;
    ld->m->dtype = r->activations;
    t->param_dtype = r->params;
    t->grad_dtype = r->grads;
    t->master_weights = r->master_weights;
    t->state_dtype = r->state;
    return CK_OK;
}

/* ---- graph inputs ---- */

static int read_shape(loader *ld, const cJSON *js, const char *path, ck_ttype *t)
{
    const cJSON *shape = NULL;
    char spath[CK_JSON_PATH_MAX];
    ck_json_path_key(spath, path, "shape");
    int rc = ck_json_get_array(js, "shape", true, &shape, ld->file, path, ld->err);
    if (rc != CK_OK)
        return rc;
    int n = cJSON_GetArraySize(shape);
    if (n < 1 || n > CK_MAX_RANK)
        return fail_at(ld, spath, "expected 1 to %d dimensions, got %d", CK_MAX_RANK, n);
    t->rank = 0;
    for (const cJSON *d = shape->child; d; d = d->next) {
        char dpath[CK_JSON_PATH_MAX];
        ck_json_path_index(dpath, spath, t->rank);
        rc = parse_dim(ld, d, dpath, &t->dim[t->rank++]);
        if (rc != CK_OK)
            return rc;
    }
    uint64_t bytes;
    if (!ck_ttype_bytes(t, &bytes))
        return fail_at(ld, spath, "the tensor's size in bytes overflows 64 bits");
    return CK_OK;
}

static int read_inputs(loader *ld, const cJSON *root, ck_ttype **types)
{
    static const char *const keys[] = {"name", "shape", "dtype", NULL};
    const cJSON *inputs = NULL;
    int rc = ck_json_get_array(root, "inputs", true, &inputs, ld->file, "", ld->err);
    if (rc != CK_OK)
        return rc;
    size_t n = (size_t)cJSON_GetArraySize(inputs);
    if (n == 0)
        return fail_at(ld, "inputs", "expected at least one input (the first is the chain's x_0)");
    ld->input_names = calloc(n, sizeof *ld->input_names);
    *types = calloc(n, sizeof **types);
    if (!ld->input_names || !*types)
        return ck_err_oom(ld->err);
    for (const cJSON *js = inputs->child; js; js = js->next, ld->n_inputs++) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, "inputs", ld->n_inputs);
        ck_ttype *t = &(*types)[ld->n_inputs];
        t->dtype = ld->m->dtype;
        const char **name = &ld->input_names[ld->n_inputs];
        rc = ck_json_expect_object(js, keys, ld->file, path, ld->err);
        if (rc == CK_OK) rc = get_name(ld, js, "name", path, name);
        if (rc == CK_OK) rc = get_dtype(ld, js, "dtype", path, false, &t->dtype);
        if (rc == CK_OK) rc = read_shape(ld, js, path, t);
        if (rc != CK_OK)
            break;
    }
    if (!ck_index_alloc(&ld->input_index, ld->n_inputs))
        return ck_err_oom(ld->err);
    for (size_t i = 0; i < ld->n_inputs; i++)
        ck_index_set_name(&ld->input_index, i, ld->input_names[i]);
    return refuse_repeated_name(ld, &ld->input_index, "inputs", rc);
}

/* ---- scopes: the top-level node list and blocks ---- */

static const char *outer_name(const loader *ld, const scope *s, const char *block_input, size_t i)
{
    return s == &ld->top ? ld->input_names[i] : block_input;
}

static size_t n_outer(const loader *ld, const scope *s)
{
    return s == &ld->top ? ld->n_inputs : 1;
}

/* The scope input called `name`, or CK_INDEX_NONE. */
static size_t find_outer(const loader *ld, const scope *s, const char *block_input,
                         const char *name)
{
    if (s == &ld->top)
        return ck_index_find_name(&ld->input_index, name);
    return strcmp(block_input, name) == 0 ? 0 : CK_INDEX_NONE;
}

static int resolve(loader *ld, const scope *s, const char *block_input, size_t k, const char *name,
                   const char *path, ref *out)
{
    size_t i = find_outer(ld, s, block_input, name);
    if (i != CK_INDEX_NONE) {
        *out = (ref){true, i};
        return CK_OK;
    }
    size_t j = ck_index_find_name(&s->names, name);
    if (j == CK_INDEX_NONE)
        return fail_at(ld, path, "unknown tensor \"%s\" (expected the name of %s or of an earlier "
                       "node)", name, s == &ld->top ? "an input" : "the block's input");
    if (j >= k)
        return fail_at(ld, path,
                       "\"%s\" is defined later, by %s[%zu]: a node may only use %s and "
                       "earlier nodes, which also rules out cycles",
                       name, s->path, j, s == &ld->top ? "inputs" : "the block's input");
    *out = (ref){false, j};
    return CK_OK;
}

static int parse_float_dtype(loader *ld, const cJSON *v, const char *path, ck_dtype *out)
{
    if (cJSON_IsString(v) && ck_dtype_parse(v->valuestring, out) && ck_dtype_is_float(*out))
        return CK_OK;
    return expected(ld, path, "a float dtype (\"f32\", \"bf16\" or \"f16\")", v);
}

/* A PROB or POSITIVE attribute. */
static int parse_number(loader *ld, ck_attr_kind kind, const cJSON *v, const char *path,
                        double *out)
{
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (kind == CK_ATTR_POSITIVE && !(x > 0 && isfinite(x)))
        return expected(ld, path, "a positive number", v);
    if (kind == CK_ATTR_PROB && !(x >= 0 && x < 1))
        return expected(ld, path, "a probability in [0, 1)", v);
    *out = x;
    return CK_OK;
}

static int read_attrs(loader *ld, const cJSON *js, const ck_op_def *op, const char *path, ck_attrs *a)
{
    ck_op_default_attrs(op, a);
    if (ld->m->impl)
        ck_impl_apply(ld->m->impl, op, a);
    a->weights = ld->m->training.param_dtype;
    a->master_weights = ld->m->training.master_weights;
    for (size_t i = 0; i < op->n_attrs; i++) {
        const ck_attr_spec *spec = &op->attrs[i];
        void *field = (char *)a + spec->offset;
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(js, spec->name);
        if (!v && !spec->required)
            continue; /* before formatting the path, which costs more than the rest */
        char apath[CK_JSON_PATH_MAX];
        ck_json_path_key(apath, path, spec->name);
        int rc = CK_OK;
        if (!v) {
            return fail_at(ld, apath, "missing (%s needs it)", op->name);
        } else if (spec->kind == CK_ATTR_DIM) {
            rc = parse_dim(ld, v, apath, field);
        } else if (spec->kind == CK_ATTR_BOOL) {
            rc = ck_json_get_bool(js, spec->name, true, field, ld->file, path, ld->err);
        } else if (spec->kind == CK_ATTR_DTYPE) {
            rc = parse_float_dtype(ld, v, apath, field);
        } else {
            rc = parse_number(ld, spec->kind, v, apath, field);
        }
        if (rc != CK_OK)
            return rc;
    }
    return CK_OK;
}

static int read_entry_inputs(loader *ld, scope *s, const char *block_input, size_t k,
                             const cJSON *js, const char *path, size_t arity, const char *what)
{
    const cJSON *inputs = NULL;
    char ipath[CK_JSON_PATH_MAX];
    ck_json_path_key(ipath, path, "inputs");
    int rc = ck_json_get_array(js, "inputs", true, &inputs, ld->file, path, ld->err);
    if (rc != CK_OK)
        return rc;
    if ((size_t)cJSON_GetArraySize(inputs) != arity)
        return fail_at(ld, ipath, "expected %zu input%s (%s), got %d", arity, arity == 1 ? "" : "s",
                       what, cJSON_GetArraySize(inputs));
    size_t i = 0;
    for (const cJSON *v = inputs->child; v; v = v->next, i++) {
        char vpath[CK_JSON_PATH_MAX];
        ck_json_path_index(vpath, ipath, i);
        if (!cJSON_IsString(v))
            return expected(ld, vpath, "a tensor name", v);
        rc = resolve(ld, s, block_input, k, v->valuestring, vpath, &s->e[k].in[i]);
        if (rc != CK_OK)
            return rc;
    }
    return CK_OK;
}

static int read_block_instance(loader *ld, scope *s, const char *block_input, size_t k,
                               const cJSON *js, const char *path)
{
    static const char *const keys[] = {"name", "block", "repeat", "inputs", "frozen", NULL};
    entry *e = &s->e[k];
    const char *block = NULL;
    if (s != &ld->top)
        return fail_at(ld, path, "a block's nodes cannot instantiate blocks");
    int rc = ck_json_expect_object(js, keys, ld->file, path, ld->err);
    if (rc == CK_OK) rc = ck_json_get_string(js, "block", true, &block, ld->file, path, ld->err);
    if (rc == CK_OK) rc = ck_json_get_bool(js, "frozen", false, &e->frozen, ld->file, path, ld->err);
    if (rc != CK_OK)
        return rc;
    char bpath[CK_JSON_PATH_MAX], rpath[CK_JSON_PATH_MAX];
    ck_json_path_key(bpath, path, "block");
    ck_json_path_key(rpath, path, "repeat");
    e->block = ck_index_find_name(&ld->block_index, block);
    if (e->block == CK_INDEX_NONE)
        return fail_at(ld, bpath, "unknown block \"%s\" (expected a key of \"blocks\")", block);
    e->repeat = 1;
    const cJSON *repeat = cJSON_GetObjectItemCaseSensitive(js, "repeat");
    if (repeat && (rc = parse_dim(ld, repeat, rpath, &e->repeat)) != CK_OK)
        return rc;
    if (e->repeat > CK_MODEL_MAX_REPEAT)
        return fail_at(ld, rpath, "%llu is more than the limit of %d repeats (CK_MODEL_MAX_REPEAT "
                                  "in planner/model.h)", (unsigned long long)e->repeat,
                       CK_MODEL_MAX_REPEAT);
    return read_entry_inputs(ld, s, block_input, k, js, path, 1, "a block has one input");
}

static int read_op_entry(loader *ld, scope *s, const char *block_input, size_t k, const cJSON *js,
                         const char *path)
{
    entry *e = &s->e[k];
    const char *op = NULL;
    int rc = ck_json_get_string(js, "op", true, &op, ld->file, path, ld->err);
    if (rc != CK_OK)
        return rc;
    char opath[CK_JSON_PATH_MAX];
    ck_json_path_key(opath, path, "op");
    e->op = ck_op_find(op);
    if (!e->op)
        return fail_at(ld, opath, "unknown op \"%s\" (expected one of: %s)", op, ck_op_names());
    const char *keys[4 + CK_OP_MAX_ATTRS + 1] = {"name", "op", "inputs", "frozen"};
    for (size_t i = 0; i < e->op->n_attrs; i++)
        keys[4 + i] = e->op->attrs[i].name;
    rc = ck_json_expect_object(js, keys, ld->file, path, ld->err);
    if (rc == CK_OK) rc = ck_json_get_bool(js, "frozen", false, &e->frozen, ld->file, path, ld->err);
    if (rc == CK_OK) rc = read_attrs(ld, js, e->op, path, &e->attrs);
    if (rc != CK_OK)
        return rc;
    if (e->op->is_loss && s != &ld->top)
        return fail_at(ld, opath, "a loss cannot be inside a block (it must be the model's last node)");
    if (e->op->is_loss && k + 1 != s->n)
        return fail_at(ld, opath, "a loss must be the last node, and there is exactly one");
    return read_entry_inputs(ld, s, block_input, k, js, path, e->op->arity, e->op->name);
}

/* Every tensor a scope makes or receives must be read by a later node: an unused output is
 * a mistake in the file, and would also break the chain into pieces. */
static int check_all_used(loader *ld, const scope *s, const char *block_input)
{
    size_t n_out = n_outer(ld, s);
    bool *used = calloc(s->n + n_out, sizeof *used);
    if (!used)
        return ck_err_oom(ld->err);
    for (size_t k = 0; k < s->n; k++) {
        size_t arity = s->e[k].op ? s->e[k].op->arity : 1;
        for (size_t i = 0; i < arity; i++)
            used[s->e[k].in[i].outer ? s->n + s->e[k].in[i].index : s->e[k].in[i].index] = true;
    }
    int rc = CK_OK;
    char path[CK_JSON_PATH_MAX];
    for (size_t k = 0; k + 1 < s->n && rc == CK_OK; k++)
        if (!used[k]) {
            ck_json_path_index(path, s->path, k);
            rc = fail_at(ld, path, "the output of \"%s\" is never used (every node but the %s "
                         "must feed a later node)", s->e[k].name, s == &ld->top ? "loss" : "block's last");
        }
    for (size_t i = 0; i < n_out && rc == CK_OK; i++)
        if (!used[s->n + i]) {
            if (s == &ld->top)
                ck_json_path_index(path, "inputs", i);
            else
                snprintf(path, sizeof path, "blocks.%s.input", s->name);
            rc = fail_at(ld, path, "input \"%s\" is never used", outer_name(ld, s, block_input, i));
        }
    free(used);
    return rc;
}

static int read_entry_name(loader *ld, const scope *s, const char *block_input, const cJSON *js,
                           const char *path, const char **name)
{
    if (!cJSON_IsObject(js))
        return expected(ld, path, "a node object", js);
    int rc = get_name(ld, js, "name", path, name);
    if (rc == CK_OK && find_outer(ld, s, block_input, *name) != CK_INDEX_NONE)
        rc = fail_at(ld, path, "duplicate name \"%s\" (also an input)", *name);
    return rc;
}

/* Names first, so that a use before definition can be told from an unknown name. */
static int read_scope_names(loader *ld, scope *s, const cJSON *nodes, const char *block_input)
{
    int rc = CK_OK;
    size_t k = 0;
    for (const cJSON *js = nodes->child; js && rc == CK_OK; js = js->next) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, s->path, k);
        rc = read_entry_name(ld, s, block_input, js, path, &s->e[k].name);
        if (rc == CK_OK)
            k++;
    }
    if (!ck_index_alloc(&s->names, k))
        return ck_err_oom(ld->err);
    for (size_t j = 0; j < k; j++)
        ck_index_set_name(&s->names, j, s->e[j].name);
    return refuse_repeated_name(ld, &s->names, s->path, rc);
}

static int read_scope(loader *ld, scope *s, const cJSON *nodes, const char *block_input)
{
    s->n = (size_t)cJSON_GetArraySize(nodes);
    if (s->n == 0)
        return fail_at(ld, s->path, "expected at least one node, got an empty array");
    if (s->n > CK_MODEL_MAX_NODES) /* each entry is at least one node */
        return fail_at(ld, s->path, "%zu nodes is more than the limit of %d nodes a model may "
                       "expand to (CK_MODEL_MAX_NODES in planner/model.h)", s->n,
                       CK_MODEL_MAX_NODES);
    s->e = calloc(s->n, sizeof *s->e);
    if (!s->e)
        return ck_err_oom(ld->err);
    int rc = read_scope_names(ld, s, nodes, block_input);
    if (rc != CK_OK)
        return rc;
    size_t k = 0;
    for (const cJSON *js = nodes->child; js; js = js->next, k++) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, s->path, k);
        int rc = cJSON_GetObjectItemCaseSensitive(js, "block")
                     ? read_block_instance(ld, s, block_input, k, js, path)
                     : read_op_entry(ld, s, block_input, k, js, path);
        if (rc != CK_OK)
            return rc;
    }
    return CK_OK;
}

/* The index by which instances find their block; rc is read_blocks' status so far. */
static int index_blocks(loader *ld, int rc)
{
    if (rc != CK_OK)
        return rc;
    if (!ck_index_alloc(&ld->block_index, ld->n_blocks))
        return ck_err_oom(ld->err);
    for (size_t b = 0; b < ld->n_blocks; b++)
        ck_index_set_name(&ld->block_index, b, ld->blocks[b].name);
    ck_index_sort(&ld->block_index);
    return CK_OK;
}

static int read_blocks(loader *ld, const cJSON *root)
{
    static const char *const keys[] = {"input", "nodes", NULL};
    const cJSON *blocks = cJSON_GetObjectItemCaseSensitive(root, "blocks");
    if (!blocks)
        return CK_OK;
    if (!cJSON_IsObject(blocks))
        return expected(ld, "blocks", "an object of named blocks", blocks);
    ld->blocks = calloc((size_t)cJSON_GetArraySize(blocks) + 1, sizeof *ld->blocks);
    if (!ld->blocks)
        return ck_err_oom(ld->err);
    /* blocks are keys: the parse refused a name given twice (ck_json_parse) */
    int rc = CK_OK;
    for (const cJSON *b = blocks->child; b && rc == CK_OK; b = b->next) {
        char path[CK_JSON_PATH_MAX];
        ck_json_path_key(path, "blocks", b->string);
        if (!is_identifier(b->string)) {
            rc = fail_at(ld, path, "expected a block name made of letters, digits and '_'");
            break;
        }
        scope *s = &ld->blocks[ld->n_blocks++];
        s->name = b->string;
        ck_json_path_key(s->path, path, "nodes");
        const char *input = NULL;
        const cJSON *nodes = NULL;
        rc = ck_json_expect_object(b, keys, ld->file, path, ld->err);
        if (rc == CK_OK) rc = get_name(ld, b, "input", path, &input);
        if (rc == CK_OK) rc = ck_json_get_array(b, "nodes", true, &nodes, ld->file, path, ld->err);
        if (rc == CK_OK) rc = read_scope(ld, s, nodes, input);
        if (rc == CK_OK) rc = check_all_used(ld, s, input);
    }
    return index_blocks(ld, rc);
}

/* The chain ends with the loss: its prediction must be the node just before it, and its
 * other inputs the targets, held for the whole step. */
static int check_loss(loader *ld)
{
    const scope *s = &ld->top;
    const entry *last = &s->e[s->n - 1];
    char path[CK_JSON_PATH_MAX], ipath[CK_JSON_PATH_MAX];
    ck_json_path_index(path, "nodes", s->n - 1);
    if (!last->op || !last->op->is_loss)
        return fail_at(ld, path, "expected the loss (cross_entropy or mse) as the last node, got "
                       "%s: a training step needs a loss",
                       last->op ? last->op->name : "a block instance");
    if (s->n < 2)
        return fail_at(ld, path, "expected at least one node before the loss");
    ck_json_path_key(ipath, path, "inputs[0]");
    if (last->in[0].outer || last->in[0].index != s->n - 2)
        return fail_at(ld, ipath, "expected the output of the node just before the loss (\"%s\")",
                       s->e[s->n - 2].name);
    for (size_t i = 1; i < last->op->arity; i++)
        if (!last->in[i].outer || last->in[i].index == 0) {
            char inputs[CK_JSON_PATH_MAX];
            ck_json_path_key(inputs, path, "inputs");
            ck_json_path_index(ipath, inputs, i);
            return fail_at(ld, ipath, "expected an input other than the first (the targets)");
        }
    return CK_OK;
}

/* ---- expansion into nodes and tensors ---- */

static int count_nodes(loader *ld)
{
    uint64_t nodes = 0, groups = 0;
    for (size_t k = 0; k < ld->top.n; k++) {
        const entry *e = &ld->top.e[k];
        uint64_t size = 1, count = 1;
        if (!e->op) {
            count = e->repeat;
            size = ld->blocks[e->block].n;
        }
        uint64_t added;
        if (!ck_size_mul(size, count, &added) || !ck_size_add(nodes, added, &nodes) ||
            nodes > CK_MODEL_MAX_NODES) {
            char path[CK_JSON_PATH_MAX];
            ck_json_path_index(path, "nodes", k);
            return fail_at(ld, path, "the model expands to more than %d nodes (CK_MODEL_MAX_NODES "
                           "in planner/model.h)", CK_MODEL_MAX_NODES);
        }
        groups += count;
    }
    ld->n_nodes = (size_t)nodes;
    ld->n_groups = (size_t)groups;
    return CK_OK;
}

/* Counts the embedding entries of s from n on, and when the keys are allocated, sets theirs. */
static size_t add_table_keys(loader *ld, const scope *s, size_t n)
{
    for (size_t k = 0; k < s->n; k++) {
        const entry *e = &s->e[k];
        if (!e->op || e->op->kind != CK_OP_EMBEDDING)
            continue;
        if (ld->table_keys) {
            ld->table_keys[n][0] = e->attrs.vocab;
            ld->table_keys[n][1] = e->attrs.dim;
            ck_index_set(&ld->tables, n, ld->table_keys[n], sizeof ld->table_keys[n]);
        }
        n++;
    }
    return n;
}

/* Indexes the sizes of every embedding of the file, before any is expanded. */
static int index_tables(loader *ld)
{
    size_t n = add_table_keys(ld, &ld->top, 0);
    for (size_t b = 0; b < ld->n_blocks; b++)
        n = add_table_keys(ld, &ld->blocks[b], n);
    ld->table_keys = calloc(n ? n : 1, sizeof *ld->table_keys);
    ld->table_node = malloc((n ? n : 1) * sizeof *ld->table_node);
    if (!ld->table_keys || !ld->table_node || !ck_index_alloc(&ld->tables, n))
        return ck_err_oom(ld->err);
    for (size_t i = 0; i < n; i++)
        ld->table_node[i] = CK_NO_NODE;
    n = add_table_keys(ld, &ld->top, 0);
    for (size_t b = 0; b < ld->n_blocks; b++)
        n = add_table_keys(ld, &ld->blocks[b], n);
    ck_index_sort(&ld->tables);
    return CK_OK;
}

/* The indexed table of these sizes, or CK_INDEX_NONE. */
static size_t find_table(const loader *ld, uint64_t vocab, uint64_t dim)
{
    const uint64_t key[2] = {vocab, dim};
    return ck_index_find(&ld->tables, key, sizeof key);
}

/* The tie is resolved here once: n->tied_to names the embedding whose table n uses. */
static int resolve_tie(loader *ld, ck_node *n, const char *path)
{
    const ck_ttype *in = &ld->m->tensors[n->inputs[0]].type;
    size_t table = find_table(ld, n->attrs.out, in->dim[in->rank - 1]);
    if (table != CK_INDEX_NONE && ld->table_node[table] != CK_NO_NODE) {
        n->tied_to = ld->table_node[table];
        return CK_OK;
    }
    char tpath[CK_JSON_PATH_MAX];
    ck_json_path_key(tpath, path, "tied");
    return fail_at(ld, tpath, "expected an earlier embedding with vocab = out (%llu) and dim = %llu, "
                   "whose table this head shares", (unsigned long long)n->attrs.out,
                   (unsigned long long)in->dim[in->rank - 1]);
}

/* "frozen": true on an op without parameters, and a tied head frozen unlike its table's
 * embedding (one tensor, one requires_grad flag in PyTorch), are refused. */
static int check_frozen(loader *ld, const entry *e, const ck_node *n, const char *path)
{
    char fpath[CK_JSON_PATH_MAX];
    ck_json_path_key(fpath, path, "frozen");
    if (e->frozen && n->info.n_param_tensors == 0)
        return fail_at(ld, fpath, "expected only on a node with parameters (embedding, linear, "
                       "a norm...) or a block instance: %s has no parameters to freeze",
                       e->op->name);
    const ck_node *table = n->tied_to == CK_NO_NODE ? NULL : &ld->m->nodes[n->tied_to];
    if (table && table->frozen != n->frozen)
        return fail_at(ld, fpath, "expected %s, as on embedding \"%s\" whose table this head "
                       "shares (one tensor, one requires_grad flag): mark both frozen or neither",
                       table->frozen ? "true" : "false", table->name);
    return CK_OK;
}

/* Appends the node `name` (owned by the node afterwards, freed by the caller on failure);
 * frozen: its block instance is. */
static int add_node(loader *ld, char *name, const entry *e, const size_t *inputs, size_t group,
                    bool frozen, const char *path)
{
    ck_model *m = ld->m;
    ck_node *n = &m->nodes[m->n_nodes];
    ck_tensor *t = &m->tensors[m->n_inputs + m->n_nodes];
    *n = (ck_node){.name = name, .op = e->op, .output = m->n_inputs + m->n_nodes,
                   .attrs = e->attrs, .tied_to = CK_NO_NODE, .group = group,
                   .frozen = frozen || e->frozen};
    ck_ttype in[CK_OP_MAX_ARITY];
    for (size_t i = 0; i < e->op->arity; i++) {
        n->inputs[i] = inputs[i];
        in[i] = m->tensors[inputs[i]].type;
    }
    t->name = strdup(name);
    if (!t->name) {
        free(name);
        n->name = NULL;
        return ck_err_oom(ld->err);
    }
    m->n_nodes++; /* from here the model owns the names */
    t->producer = m->n_nodes - 1;
    int rc = ck_op_infer(e->op, &n->attrs, m->dtype, in, &t->type, ld->file, path, ld->err);
    if (rc == CK_OK && !ck_ttype_bytes(&t->type, &t->bytes))
        rc = fail_at(ld, path, "the output's size in bytes overflows 64 bits");
    if (rc == CK_OK && n->attrs.tied)
        rc = resolve_tie(ld, n, path);
    if (rc == CK_OK && e->op->kind == CK_OP_EMBEDDING) {
        size_t *first = &ld->table_node[find_table(ld, e->attrs.vocab, e->attrs.dim)]; /* indexed */
        if (*first == CK_NO_NODE)
            *first = m->n_nodes - 1;
    }
    if (rc == CK_OK)
        rc = ck_op_describe(e->op, &n->attrs, in, &t->type, &n->info, ld->file, path, ld->err);
    if (rc == CK_OK)
        rc = check_frozen(ld, e, n, path);
    if (rc != CK_OK && strchr(name, '.') && ld->err) {
        size_t used = strlen(ld->err->msg);
        snprintf(ld->err->msg + used, sizeof ld->err->msg - used, " (in %s)", m->groups[group].name);
    }
    return rc;
}

static char *joined(const char *a, const char *sep, const char *b)
{
    size_t len = strlen(a) + strlen(sep) + strlen(b) + 1;
    char *s = malloc(len);
    if (s)
        snprintf(s, len, "%s%s%s", a, sep, b);
    return s;
}

static int add_group(loader *ld, char *name, bool instance)
{
    ck_model *m = ld->m;
    if (!name)
        return ck_err_oom(ld->err);
    m->groups[m->n_groups++] = (ck_group){name, m->n_nodes, m->n_nodes, instance};
    return CK_OK;
}

/* A frozen block instance must freeze something: a node of group g with parameters. */
static int check_frozen_block(loader *ld, const entry *e, size_t g, const char *path)
{
    const ck_group *gr = &ld->m->groups[g];
    for (size_t k = gr->first; k < gr->end; k++)
        if (ld->m->nodes[k].info.n_param_tensors > 0)
            return CK_OK;
    char fpath[CK_JSON_PATH_MAX];
    ck_json_path_key(fpath, path, "frozen");
    return fail_at(ld, fpath, "expected only on an instance of a block with parameters: block "
                   "\"%s\" has no node with parameters to freeze", ld->blocks[e->block].name);
}

/* Instances of block entry e, at JSON path `path`. */
static int expand_block(loader *ld, const entry *e, size_t input, size_t *output, const char *path)
{
    const scope *b = &ld->blocks[e->block];
    size_t *local = calloc(b->n, sizeof *local);
    if (!local)
        return ck_err_oom(ld->err);
    int rc = CK_OK;
    for (uint64_t r = 0; r < e->repeat && rc == CK_OK; r++) {
        char index[24];
        snprintf(index, sizeof index, "%llu", (unsigned long long)r);
        rc = add_group(ld, joined(e->name, ".", index), true);
        for (size_t j = 0; j < b->n && rc == CK_OK; j++) {
            const entry *be = &b->e[j];
            size_t ins[CK_OP_MAX_ARITY];
            for (size_t i = 0; i < be->op->arity; i++)
                ins[i] = be->in[i].outer ? input : local[be->in[i].index];
            char npath[CK_JSON_PATH_MAX];
            ck_json_path_index(npath, b->path, j);
            char *name = joined(ld->m->groups[ld->m->n_groups - 1].name, ".", be->name);
            rc = name ? add_node(ld, name, be, ins, ld->m->n_groups - 1, e->frozen, npath)
                      : ck_err_oom(ld->err);
            local[j] = ld->m->n_inputs + ld->m->n_nodes - 1;
        }
        if (rc == CK_OK) /* otherwise the group may not have been added */
            ld->m->groups[ld->m->n_groups - 1].end = ld->m->n_nodes;
        if (rc == CK_OK && e->frozen && r == 0)
            rc = check_frozen_block(ld, e, ld->m->n_groups - 1, path);
        input = local[b->n - 1];
    }
    *output = input;
    free(local);
    return rc;
}

static int expand(loader *ld, const ck_ttype *input_types)
{
    ck_model *m = ld->m;
    int rc = index_tables(ld);
    if (rc != CK_OK)
        return rc;
    m->n_inputs = ld->n_inputs;
    m->n_tensors = ld->n_inputs + ld->n_nodes;
    m->tensors = calloc(m->n_tensors, sizeof *m->tensors);
    m->nodes = calloc(ld->n_nodes, sizeof *m->nodes);
    m->groups = calloc(ld->n_groups, sizeof *m->groups);
    size_t *entry_out = calloc(ld->top.n, sizeof *entry_out);
    if (!m->tensors || !m->nodes || !m->groups || !entry_out) {
        free(entry_out);
        return ck_err_oom(ld->err);
    }
    for (size_t i = 0; i < ld->n_inputs && rc == CK_OK; i++) {
        ck_tensor *t = &m->tensors[i];
        *t = (ck_tensor){.name = strdup(ld->input_names[i]), .type = input_types[i],
                         .producer = CK_NO_NODE};
        ck_ttype_bytes(&t->type, &t->bytes); /* checked by read_shape */
        if (!t->name)
            rc = ck_err_oom(ld->err);
    }
    for (size_t k = 0; k < ld->top.n && rc == CK_OK; k++) {
        const entry *e = &ld->top.e[k];
        size_t ins[CK_OP_MAX_ARITY];
        size_t arity = e->op ? e->op->arity : 1;
        for (size_t i = 0; i < arity; i++)
            ins[i] = e->in[i].outer ? e->in[i].index : entry_out[e->in[i].index];
        char path[CK_JSON_PATH_MAX];
        ck_json_path_index(path, "nodes", k);
        if (!e->op) {
            rc = expand_block(ld, e, ins[0], &entry_out[k], path);
            continue;
        }
        rc = add_group(ld, strdup(e->name), false);
        char *name = rc == CK_OK ? strdup(e->name) : NULL;
        if (rc == CK_OK)
            rc = name ? add_node(ld, name, e, ins, m->n_groups - 1, false, path) : ck_err_oom(ld->err);
        if (rc == CK_OK)
            m->groups[m->n_groups - 1].end = m->n_nodes;
        entry_out[k] = m->n_inputs + m->n_nodes - 1;
    }
    free(entry_out);
    return rc;
}

/* Pairs of 64-bit values, in order of the first, then the second. */
static int by_pair(const void *a, const void *b)
{
    const uint64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] > y[0]) - (x[0] < y[0]) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The model's step tensors from what its nodes read: a mask per distinct window, each
 * window's the largest a node reads, added; of the rest, the largest (the leaf only where
 * the table is frozen: a trained table's lookup requires grad already). */
static int sum_step_tensors(loader *ld)
{
    ck_model *m = ld->m;
    uint64_t (*masks)[2] = malloc((m->n_nodes + 1) * sizeof *masks); /* window, bytes */
    if (!masks)
        return ck_err_oom(ld->err);
    size_t n = 0;
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_op_info *info = &m->nodes[k].info;
        for (int s = 0; s < CK_N_STEPS; s++)
            if (s != CK_STEP_MASK && info->step_bytes[s] > m->step_bytes[s] &&
                (s != CK_STEP_LEAF || ck_model_input_leaf(&m->nodes[k])))
                m->step_bytes[s] = info->step_bytes[s];
        if (info->step_bytes[CK_STEP_MASK])
            memcpy(masks[n++], (uint64_t[2]){info->step_window, info->step_bytes[CK_STEP_MASK]}, sizeof *masks);
    }
    qsort(masks, n, sizeof *masks, by_pair); /* by window, then bytes: a window's largest last */
    bool ok = true;
    for (size_t j = 0; j < n && ok; j++)
        if (j + 1 == n || masks[j + 1][0] != masks[j][0])
            ok = ck_size_add(m->step_bytes[CK_STEP_MASK], masks[j][1], &m->step_bytes[CK_STEP_MASK]);
    free(masks);
    return ok ? CK_OK : ck_err_fail(ld->err, CK_ERR_INPUT, "%s: the attention masks' size in bytes "
                                                       "overflows 64 bits", ld->file);
}

static int load(loader *ld, const cJSON *root)
{
    static const char *const keys[] = {"format", "name", "dtype", "dims", "training", "inputs",
                                       "blocks", "nodes", "use_cache", NULL};
    static const char *const model_format[] = {CK_MODEL_FORMAT, NULL};
    const char *format = NULL, *name = "";
    const cJSON *nodes = NULL;
    ck_ttype *input_types = NULL;
    int rc = ck_json_expect_object(root, keys, ld->file, "", ld->err);
    if (rc == CK_OK) rc = ck_json_expect_format(root, model_format, ld->file, "", &format, ld->err);
    if (rc == CK_OK) rc = ck_json_get_string(root, "name", false, &name, ld->file, "", ld->err);
    ld->m->dtype = CK_F32;
    if (rc == CK_OK) rc = get_dtype(ld, root, "dtype", "", true, &ld->m->dtype);
    if (rc == CK_OK) rc = ck_json_get_bool(root, "use_cache", false, &ld->m->use_cache, ld->file, "", ld->err);
    if (rc == CK_OK) rc = read_dims(ld, root);
    if (rc == CK_OK) rc = read_training(ld, root, &ld->m->training);
    if (rc == CK_OK) rc = read_inputs(ld, root, &input_types);
    if (rc == CK_OK) rc = read_blocks(ld, root);
    if (rc == CK_OK) rc = ck_json_get_array(root, "nodes", true, &nodes, ld->file, "", ld->err);
    snprintf(ld->top.path, sizeof ld->top.path, "nodes");
    if (rc == CK_OK) rc = read_scope(ld, &ld->top, nodes, NULL);
    if (rc == CK_OK) rc = count_nodes(ld);
    /* The loss first: without one, the targets are unused, and saying so would mislead. */
    if (rc == CK_OK) rc = check_loss(ld);
    if (rc == CK_OK) rc = check_all_used(ld, &ld->top, NULL);
    if (rc == CK_OK) {
        ld->m->file = strdup(ld->file);
        ld->m->name = strdup(name);
        if (!ld->m->file || !ld->m->name)
            rc = ck_err_oom(ld->err);
    }
    if (rc == CK_OK) rc = expand(ld, input_types);
    if (rc == CK_OK) rc = sum_step_tensors(ld);
    if (rc == CK_OK) rc = ck_model_grad_propagate(ld->m, ld->err);
    free(input_types);
    return rc;
}

int ck_model_from_json(const cJSON *root, const char *file, ck_model **out, ck_err *err)
{
    return ck_model_from_json_opts(root, file, NULL, out, err);
}

int ck_model_from_json_opts(const cJSON *root, const char *file, const ck_model_opts *opts,
                            ck_model **out, ck_err *err)
{
    static const ck_model_opts none = {0};
    if (!opts)
        opts = &none;
    if (opts->lora_rank || opts->attention)
        return ck_err_fail(err, CK_ERR_INPUT, "%s: %s applies to Hugging Face configs only; in a "
                       "ckplan-model/1 file, write it in the graph", file,
                       opts->lora_rank ? "--lora" : "--attention");
    if (ck_layout_model_parallel_given(&opts->layout))
        return ck_err_fail(err, CK_ERR_INPUT, "%s: --tp, --sp and --cp apply to Hugging Face configs "
                           "only, whose layers ckplan builds and can split per rank; a "
                           "ckplan-model/1 file's graph is one rank's as written (docs/parallel.md)",
                           file);
    loader ld = {.file = file, .err = err, .opts = opts};
    ld.m = calloc(1, sizeof *ld.m);
    if (!ld.m)
        return ck_err_oom(err);
    int rc = load(&ld, root);
    for (size_t b = 0; b < ld.n_blocks; b++) {
        free(ld.blocks[b].e);
        ck_index_free(&ld.blocks[b].names);
    }
    free(ld.blocks);
    free(ld.top.e);
    ck_index_free(&ld.top.names);
    free(ld.input_names);
    ck_index_free(&ld.input_index);
    ck_index_free(&ld.block_index);
    ck_index_free(&ld.tables);
    free(ld.table_keys);
    free(ld.table_node);
    if (rc != CK_OK) {
        ck_model_free(ld.m);
        return rc;
    }
    *out = ld.m;
    return CK_OK;
}

void ck_model_free(ck_model *m)
{
    if (!m)
        return;
    if (m->tensors)
        for (size_t i = 0; i < m->n_tensors; i++)
            free(m->tensors[i].name);
    for (size_t k = 0; k < m->n_nodes; k++)
        free(m->nodes[k].name);
    for (size_t g = 0; g < m->n_groups; g++)
        free(m->groups[g].name);
    free(m->tensors);
    free(m->nodes);
    free(m->groups);
    free(m->file);
    free(m->name);
    free(m);
}

size_t ck_model_saved_tensor(const ck_node *n, const ck_saved *sv)
{
    return sv->kind == CK_SAVE_OUTPUT ? n->output
           : sv->kind == CK_SAVE_INPUT ? n->inputs[sv->input]
                                       : SIZE_MAX;
}

void ck_model_last_uses(const ck_model *m, size_t *last_use)
{
    for (size_t t = 0; t < m->n_tensors; t++)
        last_use[t] = 0;
    for (size_t k = 0; k < m->n_nodes; k++)
        for (size_t i = 0; i < m->nodes[k].op->arity; i++)
            last_use[m->nodes[k].inputs[i]] = k;
}

bool ck_model_is_held(const ck_model *m, size_t t)
{
    return t != 0 && t < m->n_inputs;
}

ck_adapters ck_model_adapters(const ck_model *m, ck_dtype *copy_dtype)
{
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_node *n = &m->nodes[k];
        if (n->op->kind != CK_OP_LORA || !n->attrs.upcast || m->tensors[n->inputs[0]].type.dtype == CK_F32)
            continue;
        for (size_t s = 0; s < n->info.n_saved; s++) {
            const ck_saved *sv = &n->info.saved[s];
            if (sv->kind == CK_SAVE_INTERNAL && sv->slot == CK_SLOT_ADAPTER_IN) {
                *copy_dtype = sv->type.dtype;
                return CK_ADAPTERS_COPY;
            }
        }
        return CK_ADAPTERS_CAST;
    }
    return CK_ADAPTERS_PLAIN;
}

bool ck_model_is_static(const ck_model *m, size_t t)
{
    return ck_model_is_held(m, t) || (t == 0 && !ck_dtype_is_float(m->tensors[0].type.dtype));
}

const ck_node *ck_model_rank_exchange(const ck_model *m)
{
    for (size_t k = 0; k < m->n_nodes; k++) {
        const ck_attrs *a = &m->nodes[k].attrs;
        if (a->gather > 1 || a->scatter > 1 || a->context > 1)
            return &m->nodes[k];
    }
    return NULL;
}
