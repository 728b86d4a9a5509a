#include "planner/action.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "planner/size.h"

static const char *const action_names[CK_N_ACTIONS] = {"F_all", "F_ck", "F_none", "loss", "B"};

const char *ck_action_name(ck_action_kind kind)
{
    return kind < CK_N_ACTIONS ? action_names[kind] : "?";
}

bool ck_action_parse(const char *name, ck_action_kind *out)
{
    for (int k = 0; k < CK_N_ACTIONS; k++)
        if (strcmp(name, action_names[k]) == 0) {
            *out = (ck_action_kind)k;
            return true;
        }
    return false;
}

int ck_action_state_init(ck_action_state *st, const ck_chain *c, ck_err *err)
{
    size_t n = c->n_stages + 1;
    bool *flags = calloc(4 * n, sizeof *flags);
    size_t *variants = calloc(n, sizeof *variants);
    if (!flags || !variants) {
        free(flags);
        free(variants);
        return ck_err_oom(err);
    }
    *st = (ck_action_state){.chain = c, .x = flags, .xbar = flags + n, .y = flags + 2 * n,
                            .sharded = flags + 3 * n, .xbar_variant = variants,
                            .segment = SIZE_MAX, .held = c->input_bytes};
    st->x[0] = true;
    return CK_OK;
}

void ck_action_state_free(ck_action_state *st)
{
    free(st->x);
    free(st->xbar_variant);
    memset(st, 0, sizeof *st);
}

static bool *flag(const ck_action_state *st, ck_value v)
{
    bool *const table[] = {[CK_VALUE_X] = st->x, [CK_VALUE_XBAR] = st->xbar, [CK_VALUE_Y] = st->y};
    return &table[v.kind][v.index];
}

bool ck_action_state_has(const ck_action_state *st, ck_value v)
{
    return *flag(st, v);
}

uint64_t ck_action_value_bytes(const ck_chain *c, ck_value v)
{
    if (v.kind == CK_VALUE_XBAR && v.index > 0)
        return ck_chain_variant(c, v.index - 1, v.variant).saved_bytes;
    return ck_chain_x_bytes(c, v.index);
}

static ck_value value(ck_value_kind kind, size_t index)
{
    return (ck_value){kind, index, 0};
}

/* x̄_i, live in st, in the variant that made it. */
static ck_value live_xbar(const ck_action_state *st, size_t i)
{
    return (ck_value){CK_VALUE_XBAR, i, st->xbar_variant[i]};
}

static int invalid(ck_err *err, size_t k, const ck_action *a, const char *what)
{
    if (a->kind == CK_LOSS)
        return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (loss): %s", k, what);
    return ck_err_fail(err, CK_ERR_INPUT, "schedule[%zu] (%s %zu): %s", k, ck_action_name(a->kind),
                       a->stage, what);
}

/* The input of an action on stage i: x_i if live, else x̄_i (x̄_0 is x_0). */
static bool find_input(const ck_action_state *st, size_t i, ck_value *out)
{
    if (st->x[i])
        *out = value(CK_VALUE_X, i);
    else if (i > 0 && st->xbar[i])
        *out = live_xbar(st, i);
    else
        return false;
    return true;
}

static void add_free(const ck_chain *c, ck_action_effect *e, ck_value v)
{
    e->frees[e->n_frees++] = v;
    e->freed_bytes += ck_action_value_bytes(c, v);
}

/* Result, transient bytes, time and frees of each action, as spec section 2 lists them. */
static void fill_effect(const ck_action_state *st, const ck_action *a, ck_action_effect *e)
{
    const ck_chain *c = st->chain;
    size_t i = a->stage, L = c->n_stages;
    switch (a->kind) {
    case CK_F_ALL:
    case CK_F_CK:
    case CK_F_NONE:
        e->result = value(a->kind == CK_F_ALL ? CK_VALUE_XBAR : CK_VALUE_X, i + 1);
        e->result.variant = a->variant;
        e->transient_bytes = ck_chain_variant(c, i, a->variant).fwd_tmp_bytes;
        e->time = c->stages[i].fwd_time;
        if (a->kind == CK_F_NONE)
            add_free(c, e, e->input);
        break;
    case CK_LOSS:
        e->result = value(CK_VALUE_Y, L);
        e->transient_bytes = c->loss_bwd_tmp_bytes;
        e->time = c->loss_bwd_time;
        break;
    case CK_B: {
        ck_variant v = ck_chain_variant(c, i, st->xbar_variant[i + 1]);
        e->result = value(CK_VALUE_Y, i);
        e->transient_bytes = v.bwd_tmp_bytes;
        e->time = v.bwd_time;
        if (st->x[i])
            add_free(c, e, value(CK_VALUE_X, i));
        add_free(c, e, value(CK_VALUE_Y, i + 1));
        add_free(c, e, live_xbar(st, i + 1));
        break;
    }
    case CK_N_ACTIONS:
        break;
    }
    e->result_bytes = ck_action_value_bytes(c, e->result);
}

static const char *value_symbol(ck_value_kind kind)
{
    return kind == CK_VALUE_XBAR ? "x̄" : kind == CK_VALUE_Y ? "y" : "x";
}

int ck_action_describe(const ck_action_state *st, size_t k, const ck_action *a,
                     ck_action_effect *out, ck_err *err)
{
    size_t L = st->chain->n_stages;
    char what[160];
    memset(out, 0, sizeof *out);
    if (a->kind >= CK_N_ACTIONS)
        return invalid(err, k, a, "unknown operation");
    if (a->kind != CK_LOSS && a->stage >= L) {
        snprintf(what, sizeof what, "stage out of range (the chain has stages 0 to %zu)", L - 1);
        return invalid(err, k, a, what);
    }
    size_t i = a->kind == CK_LOSS ? L : a->stage;
    size_t variants = a->kind == CK_F_ALL ? st->chain->stages[i].n_variants : 0;
    if (a->variant > variants) {
        snprintf(what, sizeof what, "variant %zu out of range (the stage has %zu besides \""
                 CK_VARIANT_ALL "\")", a->variant, variants);
        return invalid(err, k, a, what);
    }
    if (a->kind == CK_B && !st->y[i + 1])
        snprintf(what, sizeof what, "needs y_%zu, which is not live", i + 1);
    else if (a->kind == CK_B && !st->xbar[i + 1])
        snprintf(what, sizeof what, "needs x̄_%zu, which is not live", i + 1);
    else if (!find_input(st, i, &out->input))
        snprintf(what, sizeof what, "needs x_%zu or x̄_%zu, neither is live", i, i);
    else
        what[0] = '\0';
    if (what[0])
        return invalid(err, k, a, what);
    fill_effect(st, a, out);
    if (ck_action_state_has(st, out->result)) {
        snprintf(what, sizeof what, "would compute %s_%zu, which is already live",
                 value_symbol(out->result.kind), out->result.index);
        return invalid(err, k, a, what);
    }
    return CK_OK;
}

/* The partitioned checkpoints' rules before action a (see action.h): the segment of an
 * earlier F_ck ends, x_i is gathered if a reads it as a shard, and an F_ck of a stage with
 * shard_bytes makes its input's shard. *gathered: the gather's peak, or 0. False past 2^64
 * bytes. */
static bool partition_before(ck_action_state *st, const ck_action *a, const ck_action_effect *e,
                             uint64_t *gathered)
{
    const ck_chain *c = st->chain;
    *gathered = 0;
    if (st->segment != SIZE_MAX && a->kind != CK_F_NONE) {
        st->held -= ck_chain_x_bytes(c, st->segment);
        st->sharded[st->segment] = true;
        st->segment = SIZE_MAX;
    }
    size_t i = e->input.index;
    bool plain = e->input.kind == CK_VALUE_X;
    if (plain && st->sharded[i]) {
        uint64_t whole = ck_chain_x_bytes(c, i);
        if (!ck_size_add(st->held, whole, gathered))
            return false;
        st->held = *gathered - c->stages[i].shard_bytes;
        st->sharded[i] = false;
    }
    if (plain && a->kind == CK_F_CK && c->stages[i].shard_bytes) {
        if (!ck_size_add(st->held, c->stages[i].shard_bytes, &st->held))
            return false;
        st->segment = i;
    }
    return true;
}

int ck_action_apply(ck_action_state *st, size_t k, const ck_action *a, const ck_action_effect *e,
                    uint64_t *peak, ck_err *err)
{
    uint64_t held, top, gathered;
    if (!partition_before(st, a, e, &gathered) || !ck_size_add(st->held, e->result_bytes, &held) ||
        !ck_size_add(held, e->transient_bytes, &top))
        return invalid(err, k, a, "memory held exceeds 2^64 bytes");
    *flag(st, e->result) = true;
    if (e->result.kind == CK_VALUE_XBAR)
        st->xbar_variant[e->result.index] = e->result.variant;
    for (size_t f = 0; f < e->n_frees; f++)
        *flag(st, e->frees[f]) = false;
    st->held = held - e->freed_bytes;
    if (peak)
        *peak = top > gathered ? top : gathered;
    return CK_OK;
}
