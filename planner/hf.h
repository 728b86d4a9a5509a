/* hf: a Hugging Face `config.json` turned into a `ckplan-model/1` document, with the
 * structure of its family's modeling code in transformers (docs/model-format.md section 8
 * maps each family to ops and says where each fact comes from).
 *
 * The document names its sizes as dims (B, T and the config's C, H, KV, D, F, V, L, ...),
 * so that ck_model_from_json_opts can change them (`--set L=2`). */
#ifndef CK_HF_H
#define CK_HF_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "planner/err.h"
#include "planner/model.h"

/* The sequence length of a config's model unless told (--seq): this, or the config's
 * context length when that is shorter. */
#define CK_HF_DEFAULT_SEQ 2048

/* Whether root is a Hugging Face config: an object with "model_type" and no "format". */
bool ck_hf_is_config(const cJSON *root);

/* The model_types understood, as "gpt2, opt, ...". */
const char *ck_hf_families(void);

/* The ckplan-model/1 document of config (read from `file`, named in messages), with
 * opts->lora_rank adapters and opts->attention's kernel (NULL: sdpa), as one rank of
 * opts->layout's tensor, sequence and context parallelism runs it (planner/hf_rank,
 * docs/parallel.md: dims TP, CP and VP, the layers' gather, scatter and context); the
 * caller deletes *out. opts->sets, recipe and optimizer are not applied here: they are
 * ck_model_from_json_opts's. */
int ck_hf_to_model(const cJSON *config, const char *file, const ck_model_opts *opts, cJSON **out,
                   ck_err *err);

/* The ckplan-model/1 document equivalent to config under opts, for `ckplan import`: as
 * ck_hf_to_model, with opts's dims (--set) and optimizer written into it, once the
 * document loaded with these options. */
int ck_hf_import(const cJSON *config, const char *file, const ck_model_opts *opts, cJSON **out,
                 ck_err *err);

/* Whether text, the printed form of such a document (written to `file`), reads back as a
 * model: what ckplan writes, it reads back. */
int ck_hf_check_text(const char *text, const char *file, ck_err *err);

/* opts without what ck_hf_to_model consumed (lora_rank, attention, the layout's tp, sp and
 * cp), for
 * ck_model_from_json_opts. */
ck_model_opts ck_hf_model_opts(const ck_model_opts *opts);

/* The file a config path names: path itself, or path/config.json when path is a
 * directory. The caller frees it; NULL when out of memory. */
char *ck_hf_config_path(const char *path);

#endif
