#include "planner/model.h"

#include <string.h>

#include "planner/derive.h"
#include "planner/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fixtures.h"

/* A loss over the relu of x: the smallest valid body for FX_BASE. */
#define RELU_LOSS                                                                              \
    "{'name': 'r', 'op': 'relu', 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'y']}"

START_TEST(expands_blocks_in_order_with_shapes)
{
    ck_model *m = fx_load(FX_BASE
        "'blocks': {'mlp': {'input': 'u', 'nodes': ["
        " {'name': 'up', 'op': 'linear', 'out': '4*C', 'inputs': ['u']},"
        " {'name': 'act', 'op': 'gelu', 'inputs': ['up']},"
        " {'name': 'down', 'op': 'linear', 'out': 'C', 'bias': false, 'inputs': ['act']}]}},"
        "'nodes': [{'name': 'h', 'block': 'mlp', 'repeat': 3, 'inputs': ['x']},"
        " {'name': 'out', 'op': 'add', 'inputs': ['h', 'x']},"
        " {'name': 'loss', 'op': 'mse', 'inputs': ['out', 'y']}]}");
    ck_assert_uint_eq(m->n_inputs, 2);
    ck_assert_uint_eq(m->n_nodes, 11);
    ck_assert_uint_eq(m->n_tensors, 13);
    ck_assert_uint_eq(m->n_groups, 5);
    ck_assert_str_eq(m->nodes[0].name, "h.0.up");
    ck_assert_str_eq(m->nodes[8].name, "h.2.down");
    ck_assert_str_eq(m->groups[1].name, "h.1");
    ck_assert_uint_eq(m->groups[1].first, 3);
    ck_assert_uint_eq(m->groups[1].end, 6);
    ck_assert_str_eq(m->groups[3].name, "out");
    /* h.1.up reads h.0.down's output; out reads h.2.down and x. */
    ck_assert_uint_eq(m->nodes[3].inputs[0], m->nodes[2].output);
    ck_assert_uint_eq(m->nodes[9].inputs[0], m->nodes[8].output);
    ck_assert_uint_eq(m->nodes[9].inputs[1], 0);
    const ck_tensor *up = &m->tensors[m->nodes[4].inputs[0]];
    ck_assert_str_eq(up->name, "h.1.up");
    ck_assert_uint_eq(up->type.rank, 3);
    ck_assert_uint_eq(up->type.dim[2], 32);
    ck_assert_uint_eq(up->bytes, 2 * 4 * 32 * 4);
    ck_assert_uint_eq(up->producer, 3);
    ck_assert_uint_eq(m->tensors[1].producer, CK_NO_NODE);
    ck_assert(m->nodes[0].attrs.bias && !m->nodes[2].attrs.bias);
    ck_assert_uint_eq(m->nodes[10].op->kind, CK_OP_MSE);
    ck_model_free(m);
}
END_TEST

START_TEST(reads_dtypes_training_and_expressions)
{
    ck_model *m = fx_load(
        "{'format': 'ckplan-model/1', 'name': 'n', 'dtype': 'bf16', 'dims': {'C': 8, 'W': 'C * 3*C'},"
        " 'training': {'optimizer': 'momentum', 'param_dtype': 'bf16', 'grad_dtype': 'f32',"
        "  'master_weights': true},"
        " 'inputs': [{'name': 'x', 'shape': [2, 'W']}, {'name': 'y', 'shape': [2, 'W'], 'dtype': 'bf16'}],"
        " 'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']},"
        "  {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'y']}]}");
    ck_assert_str_eq(m->name, "n");
    ck_assert_str_eq(m->file, FX_FILE);
    ck_assert_int_eq(m->dtype, CK_BF16);
    ck_assert_int_eq(m->tensors[0].type.dtype, CK_BF16);
    ck_assert_uint_eq(m->tensors[0].type.dim[1], 192);
    ck_assert_uint_eq(m->tensors[0].bytes, 2 * 192 * 2);
    ck_assert_int_eq(m->training.optimizer, CK_OPT_MOMENTUM);
    ck_assert_int_eq(m->training.param_dtype, CK_BF16);
    ck_assert_int_eq(m->training.grad_dtype, CK_F32);
    ck_assert(m->training.master_weights);
    ck_assert_str_eq(ck_training_optimizer_name(m->training.optimizer), "momentum");
    ck_model_free(m);
}
END_TEST

START_TEST(defaults)
{
    ck_model *m = fx_load(FX_BASE "'nodes': [" RELU_LOSS "]}");
    ck_assert_int_eq(m->dtype, CK_F32);
    ck_assert_int_eq(m->training.optimizer, CK_OPT_NONE);
    ck_assert_int_eq(m->training.param_dtype, CK_F32);
    ck_assert_int_eq(m->training.grad_dtype, CK_F32);
    ck_assert(!m->training.master_weights);
    ck_model_free(m);
}
END_TEST

START_TEST(shipped_models_load)
{
    const char *files[] = {"models/mlp-deep.json", "models/gpt2-tiny.json", "models/gpt2-small.json",
                           "models/llama-tiny.json", NULL};
    for (int i = 0; files[i]; i++)
        ck_model_free(fx_load_file(files[i]));
}
END_TEST

/* GPT-2 with the head tied to the token embedding:
 * V*C + T*C (tables) + L*(12*C^2 + 13*C) (layers) + 2*C (final layernorm). */
START_TEST(gpt2_small_has_124m_parameters)
{
    ck_model *m = fx_load_file("models/gpt2-small.json");
    const uint64_t V = 50257, T = 1024, C = 768, L = 12;
    ck_static_mem sm;
    ck_err err = {{0}};
    ck_assert_int_eq(ck_derive_static_memory(m, NULL, &sm, &err), CK_OK);
    ck_assert_uint_eq(sm.n_params, V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C);
    ck_assert_uint_eq(sm.n_params, 124439808);
    ck_model_free(m);
}
END_TEST

/* ---- every input error: CK_ERR_INPUT, naming the file, the JSON path and the
 * expectation ---- */

START_TEST(err_bad_json)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1',"), FX_FILE ":1:", "not valid JSON", NULL);
}
END_TEST

START_TEST(err_missing_field)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'nodes': []}"),
                  FX_FILE ": inputs: missing (expected an array)", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].op: missing (expected a string)", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'linear', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].out: missing (linear needs it)", NULL);
}
END_TEST

START_TEST(err_unknown_field)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'p': 1, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'y']}]}"),
                  FX_FILE ": nodes[0].p: unknown field (allowed here: name, op, inputs, frozen)", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/2'}"),
                  FX_FILE ": format: expected \"ckplan-model/1\"", NULL);
}
END_TEST

START_TEST(err_wrong_type)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 8, 'bias': 'no',"
                            " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['l', 'y']}]}"),
                  FX_FILE ": nodes[0].bias: expected true or false, got the string \"no\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'add', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].inputs: expected 2 inputs (add), got 1", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': [3]}]}"),
                  FX_FILE ": nodes[0].inputs[0]: expected a tensor name, got the number 3", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'd', 'op': 'dropout', 'p': 1.5, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['d', 'y']}]}"),
                  FX_FILE ": nodes[0].p: expected a probability in [0, 1), got the number 1.5", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'e', 'op': 'embedding', 'vocab': 9, 'dim': 'C',"
                            " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['e', 'y']}]}"),
                  FX_FILE ": nodes[0].inputs[0]: expected int32 token ids", "got f32 [2, 4, 8]", NULL);
}
END_TEST

START_TEST(err_unknown_op)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'c', 'op': 'conv2d', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].op: unknown op \"conv2d\" (expected one of: embedding, linear",
                  NULL);
}
END_TEST

START_TEST(err_unknown_tensor)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['z']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'y']}]}"),
                  FX_FILE ": nodes[0].inputs[0]: unknown tensor \"z\" (expected the name of an input",
                  NULL);
    /* Inside a block only the block's input and its own nodes are visible. */
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'add', 'inputs': ['u', 'y']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}"),
                  FX_FILE ": blocks.b.nodes[0].inputs[1]: unknown tensor \"y\" (expected the name of "
                  "the block's input", NULL);
}
END_TEST

START_TEST(err_unknown_block)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'h', 'block': 'layer', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}"),
                  FX_FILE ": nodes[0].block: unknown block \"layer\" (expected a key of \"blocks\")",
                  NULL);
}
END_TEST

START_TEST(err_unknown_dim)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'B': 2},"
                            " 'inputs': [{'name': 'x', 'shape': ['B', '4*Q']}], 'nodes': []}"),
                  FX_FILE ": inputs[0].shape[1]: unknown dim \"Q\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C/0',"
                            " 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].out: it divides by zero in \"C/0\" (expected a "
                  "positive integer, a dim name or an expression like \"4*C\"", NULL);
}
END_TEST

START_TEST(err_duplicate_name)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']},"
                            " {'name': 'r', 'op': 'relu', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[1]: duplicate name \"r\" (also nodes[0])", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'y', 'op': 'relu', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0]: duplicate name \"y\" (also an input)", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'B': 2},"
                            " 'inputs': [{'name': 'x', 'shape': ['B']}, {'name': 'x', 'shape': ['B']}],"
                            " 'nodes': []}"),
                  FX_FILE ": inputs[1]: duplicate name \"x\" (also inputs[0])", NULL);
}
END_TEST

/* Nodes may only read earlier nodes, so a cycle shows up as a use before definition. */
START_TEST(err_cycle_is_use_before_definition)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'a', 'op': 'add', 'inputs': ['x', 'b']},"
                            " {'name': 'b', 'op': 'relu', 'inputs': ['a']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['b', 'y']}]}"),
                  FX_FILE ": nodes[0].inputs[1]: \"b\" is defined later, by nodes[1]",
                  "rules out cycles", NULL);
}
END_TEST

START_TEST(err_shape_mismatch)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'w', 'op': 'linear', 'out': '2*C', 'inputs': ['x']},"
                            " {'name': 's', 'op': 'add', 'inputs': ['x', 'w']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['s', 'y']}]}"),
                  FX_FILE ": nodes[1].inputs[1]: expected the type of inputs[0], f32 [2, 4, 8], "
                  "got f32 [2, 4, 16]", NULL);
    /* 8 is not divisible by heads + 2*kv_heads = 3 */
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'a', 'op': 'attention', 'heads': 1,"
                            " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['a', 'y']}]}"),
                  FX_FILE ": nodes[0].inputs[0]: expected a last dimension divisible by heads + "
                  "2*kv_heads = 3", "got f32 [2, 4, 8]", NULL);
    /* ... and the error inside a block names the block's node and the instance */
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'a', 'op': 'attention', 'heads': 2, 'kv_heads': 3, 'inputs': ['u']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}"),
                  FX_FILE ": blocks.b.nodes[0].kv_heads: expected a divisor of heads (2), got 3",
                  "(in h.0)", NULL);
}
END_TEST

START_TEST(err_zero_dim)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'C': 0}, 'inputs': [], 'nodes': []}"),
                  FX_FILE ": dims.C: expected a positive integer", "got the number 0", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'inputs': [{'name': 'x', 'shape': [2, '0*7']}],"
                            " 'nodes': []}"),
                  FX_FILE ": inputs[0].shape[1]: expected a positive size, got \"0*7\" = 0", NULL);
}
END_TEST

START_TEST(err_negative_number)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'C': -3}, 'inputs': [], 'nodes': []}"),
                  FX_FILE ": dims.C: expected a positive integer", "got the number -3", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 2.5, 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].out: expected a positive integer", "got the number 2.5", NULL);
}
END_TEST

START_TEST(err_overflowing_size)
{
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'G': 4294967296},"
                            " 'inputs': [{'name': 'x', 'shape': ['G', 'G']}], 'nodes': []}"),
                  FX_FILE ": inputs[0].shape: the tensor's size in bytes overflows 64 bits", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'dims': {'G': 4294967296, 'H': 'G*G*2'},"
                            " 'inputs': [], 'nodes': []}"),
                  FX_FILE ": dims.H: a product overflows 64 bits in \"G*G*2\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 4611686018427387904,"
                            " 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0].out: expected a positive integer", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': '4294967296*1073741824',"
                            " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['l', 'y']}]}"),
                  FX_FILE ": nodes[0]: the output's size in bytes overflows 64 bits", NULL);
}
END_TEST

START_TEST(err_repeat_too_large)
{
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'relu', 'inputs': ['u']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'repeat': 100000, 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}"),
                  FX_FILE ": nodes[0].repeat: 100000 is more than the limit of 10000 repeats",
                  "CK_MODEL_MAX_REPEAT in planner/model.h", NULL);
    /* within the repeat limit, but too many nodes in all */
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'relu', 'inputs': ['u']}, {'name': 's', 'op': 'relu', 'inputs': ['r']},"
                            " {'name': 't', 'op': 'relu', 'inputs': ['s']}, {'name': 'v', 'op': 'relu', 'inputs': ['t']},"
                            " {'name': 'w', 'op': 'relu', 'inputs': ['v']}, {'name': 'z', 'op': 'relu', 'inputs': ['w']},"
                            " {'name': 'q', 'op': 'relu', 'inputs': ['z']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'repeat': 10000, 'inputs': ['x']},"
                            " {'name': 'g', 'block': 'b', 'repeat': 10000, 'inputs': ['h']},"
                            " {'name': 'k', 'block': 'b', 'repeat': 10000, 'inputs': ['g']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['k', 'y']}]}"),
                  FX_FILE ": nodes[2]: the model expands to more than 200000 nodes", NULL);
}
END_TEST

START_TEST(err_no_loss_or_loss_not_last)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'add', 'inputs': ['x', 'y']}]}"),
                  FX_FILE ": nodes[0]: expected the loss (cross_entropy or mse) as the last node, got add: "
                  "a training step needs a loss", NULL);
    /* without a loss the targets are unused too, but the missing loss is what to say */
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']}]}"),
                  FX_FILE ": nodes[0]: expected the loss (cross_entropy or mse) as the last node, got relu: "
                  "a training step needs a loss", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'mse', 'inputs': ['x', 'y']},"
                            " {'name': 'r', 'op': 'relu', 'inputs': ['l']}]}"),
                  FX_FILE ": nodes[0].op: a loss must be the last node", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'loss', 'op': 'mse', 'inputs': ['x', 'y']}]}"),
                  FX_FILE ": nodes[0]: expected at least one node before the loss", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']},"
                            " {'name': 's', 'op': 'add', 'inputs': ['r', 'y']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['r', 's']}]}"),
                  FX_FILE ": nodes[2].inputs[0]: expected the output of the node just before the loss (\"s\")",
                  NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'add', 'inputs': ['x', 'y']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'r']}]}"),
                  FX_FILE ": nodes[1].inputs[1]: expected an input other than the first (the targets)",
                  NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'l', 'op': 'mse', 'inputs': ['u', 'u']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'inputs': ['x']}]}"),
                  FX_FILE ": blocks.b.nodes[0].op: a loss cannot be inside a block", NULL);
}
END_TEST

START_TEST(err_unused_output)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']},"
                            " {'name': 's', 'op': 'relu', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['s', 'y']}]}"),
                  FX_FILE ": nodes[0]: the output of \"r\" is never used", NULL);
    fx_assert_has(fx_refuse("{'format': 'ckplan-model/1', 'inputs': [{'name': 'x', 'shape': [2]},"
                            " {'name': 'y', 'shape': [2]}, {'name': 'z', 'shape': [2]}],"
                            " 'nodes': [{'name': 'r', 'op': 'relu', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['r', 'y']}]}"),
                  FX_FILE ": inputs[2]: input \"z\" is never used", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'relu', 'inputs': ['u']}, {'name': 's', 'op': 'relu', 'inputs': ['u']}]}},"
                            " 'nodes': [{'name': 'h', 'block': 'b', 'inputs': ['x']},"
                            " {'name': 'loss', 'op': 'mse', 'inputs': ['h', 'y']}]}"),
                  FX_FILE ": blocks.b.nodes[0]: the output of \"r\" is never used", NULL);
}
END_TEST

START_TEST(err_block_rules)
{
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'relu', 'inputs': ['x']}]}}, 'nodes': []}"),
                  FX_FILE ": blocks.b.nodes[0].inputs[0]: unknown tensor \"x\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': ["
                            " {'name': 'r', 'op': 'relu', 'inputs': ['u']}]},"
                            " 'c': {'input': 'u', 'nodes': [{'name': 'i', 'block': 'b', 'inputs': ['u']}]}},"
                            " 'nodes': []}"),
                  FX_FILE ": blocks.c.nodes[0]: a block's nodes cannot instantiate blocks", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'blocks': {'b': {'input': 'u', 'nodes': []}}, 'nodes': []}"),
                  FX_FILE ": blocks.b.nodes: expected at least one node", NULL);
}
END_TEST

START_TEST(err_tied_head_needs_embedding)
{
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C', 'bias': false,"
                            " 'tied': true, 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['l', 'y']}]}"),
                  FX_FILE ": nodes[0].tied: expected an earlier embedding with vocab = out (8) and dim = 8",
                  NULL);
    fx_assert_has(fx_refuse(FX_BASE "'nodes': [{'name': 'l', 'op': 'linear', 'out': 'C', 'tied': true,"
                            " 'inputs': ['x']}, {'name': 'loss', 'op': 'mse', 'inputs': ['l', 'y']}]}"),
                  FX_FILE ": nodes[0].bias: expected false with \"tied\": true", NULL);
}
END_TEST

START_TEST(err_training)
{
    fx_assert_has(fx_refuse(FX_BASE "'training': {'optimizer': 'lion'}, 'nodes': [" RELU_LOSS "]}"),
                  FX_FILE ": training.optimizer: expected one of none, sgd, momentum, adam, adamw, adafactor, adam8bit, got \"lion\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'training': {'param_dtype': 'int32'}, 'nodes': [" RELU_LOSS "]}"),
                  FX_FILE ": training.param_dtype: expected f32, bf16 or f16, got \"int32\"", NULL);
    fx_assert_has(fx_refuse(FX_BASE "'training': {'master_weights': true}, 'nodes': [" RELU_LOSS "]}"),
                  FX_FILE ": training.master_weights: expected false with f32 parameters", NULL);
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, expands_blocks_in_order_with_shapes);
    tcase_add_test(tc, reads_dtypes_training_and_expressions);
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, shipped_models_load);
    tcase_add_test(tc, gpt2_small_has_124m_parameters);
    suite_add_tcase(s, tc);
    TCase *te = tcase_create("errors");
    tcase_add_test(te, err_bad_json);
    tcase_add_test(te, err_missing_field);
    tcase_add_test(te, err_unknown_field);
    tcase_add_test(te, err_wrong_type);
    tcase_add_test(te, err_unknown_op);
    tcase_add_test(te, err_unknown_tensor);
    tcase_add_test(te, err_unknown_block);
    tcase_add_test(te, err_unknown_dim);
    tcase_add_test(te, err_duplicate_name);
    tcase_add_test(te, err_cycle_is_use_before_definition);
    tcase_add_test(te, err_shape_mismatch);
    tcase_add_test(te, err_zero_dim);
    tcase_add_test(te, err_negative_number);
    tcase_add_test(te, err_overflowing_size);
    tcase_add_test(te, err_repeat_too_large);
    tcase_add_test(te, err_no_loss_or_loss_not_last);
    tcase_add_test(te, err_unused_output);
    tcase_add_test(te, err_block_rules);
    tcase_add_test(te, err_tied_head_needs_embedding);
    tcase_add_test(te, err_training);
    suite_add_tcase(s, te);
    return s;
}

CK_TEST_MAIN(model_suite)
