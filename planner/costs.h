/* costs: stage times measured on this machine (`ckplan profile`), in `ckplan-costs/1`
 * files, and their use in place of the roofline model (`ckplan plan --costs`). */
#ifndef CK_COSTS_H
#define CK_COSTS_H

#include <cjson/cJSON.h>

#include "planner/chain.h"
#include "planner/err.h"
#include "planner/schedule.h"

#define CK_COSTS_FORMAT "ckplan-costs/1"

/* The measured times of a chain's stages, in seconds. */
typedef struct {
    char *model_path, *model_sha256, *granularity;
    char *model_options; /* ck_model_opts_key of the options it was measured with; "" none */
    ck_chain chain; /* names and times; sizes as derived (for reference) */
    uint64_t measured_activation_peak_bytes; /* tracked peak of a store-everything step */
} ck_costs;

/* The document for chain c of the model at path with digest sha256, loaded with the options
 * whose ck_model_opts_key is options ("" for none) (caller's strings). */
cJSON *ck_costs_to_json(const ck_chain *c, const char *model_path, const char *sha256,
                        const char *options, const char *granularity,
                        uint64_t measured_activation_peak_bytes);
int ck_costs_from_json(const cJSON *root, const char *file, ck_costs *out, ck_err *err);
void ck_costs_free(ck_costs *c);

/* Replaces the times of chain with the measured ones (a stage variant's backward: the
 * measured backward plus its modelled recomputation, scaled as the stage's forward was).
 * Refuses (CK_ERR_INPUT, naming
 * costs_file) costs measured on another model file (sha256), with other model options
 * (options, a ck_model_opts_key), at another granularity, or on a chain whose stages
 * differ. */
int ck_costs_apply(const ck_costs *costs, const char *costs_file, const char *sha256,
                   const char *options, const char *granularity, ck_chain *chain, ck_err *err);

/* The chain times of a profile. median[k] is the measured time of every->actions[k], a
 * schedule that checkpoints every stage of c (each stage runs F_ck, but the last, F_all
 * and B once, and the loss once), and outside_ops the time a step spends outside its
 * operations (optimizer step, inputs). Sets *measured to c with its stages copied (the
 * caller frees measured->stages) and their times replaced, and keep_all[i] (c->n_stages >= 1
 * entries) to stage i's F_all. Every schedule ckplan makes runs each stage's F_all and B
 * once and adds only forwards that keep nothing, so fwd_time is the forward that keeps
 * nothing and bwd_time the backward plus what keeping costs on top of it (never below 0);
 * outside_ops goes with the loss, once a step like it. The chain's times then add up to
 * the measured ones for every such schedule. */
int ck_costs_from_profile(const ck_chain *c, const ck_schedule *every, const double *median,
                          double outside_ops, ck_chain *measured, double *keep_all, ck_err *err);

#endif
