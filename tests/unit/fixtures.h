/* Fixtures for the unit tests: small models, written in JSON with single quotes (turned into
 * double quotes before parsing) so that they read well inside C strings; the models of
 * models/, and gpt2-tiny planned and ready to execute; directories for the files a test
 * writes, and the validators that check them. */
#ifndef CK_TEST_FIXTURES_H
#define CK_TEST_FIXTURES_H

#include <stdbool.h>

#include "planner/model.h"
#include "planner/planner.h"
#include "planner/workload.h"
#include "sim/exec.h"

/* The file name every fixture is loaded as, so messages can be checked for it. */
#define FX_FILE "t.json"

/* Loads a model from printf-formatted JSON; fails the test if it does not load. */
ck_model *fx_load(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Loads a model that must be refused with CK_ERR_INPUT; returns the message. */
const char *fx_refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same, changed by the command-line options o (NULL: none). */
ck_model *fx_load_opts(const ck_model_opts *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *fx_refuse_opts(const ck_model_opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Loads a file of models/ (tests run from the project's root). */
ck_model *fx_load_file(const char *path);
/* Loads a file of models/ as a workload with the default options; fails the test if it
 * does not load. */
void fx_workload_load(const char *path, ck_workload *w);

/* gpt2-tiny with an executor (seed 1), its baseline (store-everything) schedule, and dp's
 * plan at 60% of the baseline's activation peak, a budget at which dp recomputes. */
typedef struct {
    ck_workload w;
    ck_exec *e;
    ck_schedule base;
    ck_replay base_replay;
    uint64_t budget;
    ck_plan_result plan;
    ck_replay plan_replay;
} fx_gpt2_dp;

/* In place, and g must stay where it is: the executor keeps pointers into g->w. */
void fx_gpt2_dp_make(fx_gpt2_dp *g);
void fx_gpt2_dp_free(fx_gpt2_dp *g);

/* The body of a model (dims, inputs, blocks, nodes) with x: f32 [B, T, C] and y like it,
 * B=2 T=4 C=8, to wrap as fx_load(FX_BASE "'nodes': [...]}"). */
#define FX_BASE                                                                                 \
    "{'format': 'ckplan-model/1', 'name': 't', 'dims': {'B': 2, 'T': 4, 'C': 8},"               \
    " 'inputs': [{'name': 'x', 'shape': ['B', 'T', 'C']}, {'name': 'y', 'shape': ['B', 'T', 'C']}],"

/* A GPT model of `layers` transformer layers (the block `layer`, instances h.0 ..) on an
 * input x [b, s, h] of dtype, a heads, dropout 0.1 after attention probabilities, attention
 * output and MLP, flash attention or not, then an mse loss. */
ck_model *fx_gpt(unsigned b, unsigned s, unsigned h, unsigned a, const char *dtype, bool flash,
                 unsigned layers);

/* Asserts that haystack contains each of the NULL-terminated needles. */
void fx_assert_has(const char *haystack, ...);

/* Where a test writes its files: a fresh directory /tmp/ckplan-<name>-XXXXXX, or the
 * directory the environment variable keep_env names, which is left in place so that the
 * files can be looked at. keep_env and name are set by the test, path by fx_dir_make. */
typedef struct {
    const char *keep_env, *name;
    char path[256];
} fx_dir;

void fx_dir_make(fx_dir *d);
/* Removes the directory with what is in it, unless keep_env names one. */
void fx_dir_remove(const fx_dir *d);

/* Runs the validator tests/cli/<script> on path, with args appended to the shell command
 * (so they may redirect its output, which otherwise goes to the test's); returns its
 * status as system() does. */
int fx_validate(const char *script, const char *path, const char *args);

#endif
