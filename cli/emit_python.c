/* emit_python: the targets that print Python for a model of Hugging Face's shape, whose
 * decoder layers are one nn.ModuleList where transformers' causal LMs keep it (found by
 * ckplan_decoder_layers in the output): hf wraps their forward in torch.utils.checkpoint,
 * fsdp gives apply_activation_checkpointing a check_fn. Both checkpoint non-reentrantly,
 * restoring the random state when recomputing, so that dropout sees the same masks and
 * gradients equal those without checkpointing. */
#include "cli/emit.h"

/* The comments, the imports, then the layer count and list both targets check against
 * the model. */
static void put_preamble(FILE *out, const ck_emit_input *in, const char *what, const char *how,
                         const char *imports)
{
    ck_emit_comment_header(out, in, what);
    fputs(how, out);
    ck_emit_comment_limits(out, in);
    ck_emit_comment_figures(out, in, "these layers", &in->expressed);
    fprintf(out, "\n%s\nCKPLAN_LAYERS = %zu  # the decoder layers the plan was made for\n",
            imports, in->layers->n_layers);
    fputs("CKPLAN_CHECKPOINT = ", out);
    ck_emit_put_layer_list(out, in);
    fputs("  # the indices of the layers to checkpoint\n\n\n", out);
}

/* Where transformers' causal LMs keep their decoder layers: model.layers (Llama, Mistral,
 * Mixtral, Qwen, Phi-3, Gemma), transformer.h (GPT-2), model.decoder.layers (OPT); under
 * PEFT's wrapper the same paths below get_base_model(). The first path that exists wins. */
static void put_layers_finder(FILE *out)
{
    fputs("CKPLAN_LAYER_PATHS = (\"model.layers\", \"transformer.h\", \"model.decoder.layers\")\n"
          "\n"
          "\n"
          "def ckplan_decoder_layers(model):\n"
          "    \"\"\"The decoder layers of a transformers causal LM, PEFT-wrapped or not.\"\"\"\n"
          "    roots = [model] + ([model.get_base_model()] if hasattr(model, \"get_base_model\") else [])\n"
          "    for root in roots:\n"
          "        for path in CKPLAN_LAYER_PATHS:\n"
          "            found = root\n"
          "            for name in path.split(\".\"):\n"
          "                found = getattr(found, name, None)\n"
          "            if found is not None:\n"
          "                return found, path\n"
          "    raise ValueError(\"ckplan: no decoder layers at model.\" + \", model.\".join(CKPLAN_LAYER_PATHS))\n"
          "\n"
          "\n",
          out);
}

/* The Python function `def NAME(model):` opening with the check of the layer count. */
static void put_layers_check(FILE *out, const char *name, const char *doc)
{
    put_layers_finder(out);
    fprintf(out, "def %s(model):\n"
                 "    \"\"\"%s\"\"\"\n"
                 "    layers, path = ckplan_decoder_layers(model)\n"
                 "    if len(layers) != CKPLAN_LAYERS:\n"
                 "        raise ValueError(f\"ckplan: the plan is for {CKPLAN_LAYERS} decoder layers, \"\n"
                 "                         f\"model.{path} has {len(layers)}\")\n",
            name, doc);
}

/* The lines that make a frozen embedding's output require grad, as
 * gradient_checkpointing_enable() and PEFT's LoRA preparation do through
 * enable_input_require_grads(): ckplan's figures for a frozen table (LoRA) assume it
 * (the embedding's `leaf`, docs/profiles.md), so the snippet makes it whichever way
 * checkpointing is turned on. A trained table's output requires grad already: then the hook
 * changes nothing. */
static void put_input_grads(FILE *out, const char *indent)
{
    fprintf(out, "%sif hasattr(model, \"enable_input_require_grads\"):\n"
                 "%s    model.enable_input_require_grads()  # as gradient_checkpointing_enable() does\n",
            indent, indent);
}

int ck_emit_hf(FILE *out, const ck_emit_input *in, ck_err *err)
{
    (void)err;
    put_preamble(out, in, "hf: activation checkpointing for a Hugging Face transformers model",
                 "# Paste after loading the model (`model`). It wraps the forward of exactly these\n"
                 "# layers in non-reentrant torch.utils.checkpoint and turns the KV cache off, which\n"
                 "# training has no use for, and makes a frozen embedding's output require grad\n"
                 "# (LoRA), as transformers does. Leave model.gradient_checkpointing_enable() off:\n"
                 "# it checkpoints every layer.\n",
                 "import torch.utils.checkpoint\n");
    put_layers_check(out, "ckplan_checkpoint_layers",
                     "Checkpoints decoder layer i for i in CKPLAN_CHECKPOINT; use_cache off.");
    fputs("    model.config.use_cache = False\n", out);
    put_input_grads(out, "    ");
    fputs("    for i in CKPLAN_CHECKPOINT:\n"
          "        forward = layers[i].forward\n"
          "\n"
          "        def checkpointed(*args, _forward=forward, **kwargs):\n"
          "            return torch.utils.checkpoint.checkpoint(\n"
          "                _forward, *args, use_reentrant=False, preserve_rng_state=True, **kwargs)\n"
          "\n"
          "        layers[i].forward = checkpointed\n"
          "    return model\n"
          "\n"
          "\n"
          "ckplan_checkpoint_layers(model)\n",
          out);
    return CK_OK;
}

int ck_emit_fsdp(FILE *out, const ck_emit_input *in, ck_err *err)
{
    (void)err;
    put_preamble(out, in, "fsdp: a check_fn for apply_activation_checkpointing",
                 "# Paste after loading the model (`model`): ckplan_check_fn(model) selects these\n"
                 "# layers by identity, so build it before FSDP wraps the model, and apply it after\n"
                 "# (model = FSDP(model, ...) goes between the two lines at the end).\n",
                 "import functools\n"
                 "\n"
                 "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (\n"
                 "    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper)\n");
    put_layers_check(out, "ckplan_check_fn",
                     "A check_fn that is true of decoder layer i for i in CKPLAN_CHECKPOINT alone.");
    fputs("    chosen = frozenset(id(layers[i]) for i in CKPLAN_CHECKPOINT)\n"
          "    return lambda module: id(module) in chosen\n"
          "\n"
          "\n"
          "ckplan_wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)\n"
          "check_fn = ckplan_check_fn(model)\n",
          out);
    put_input_grads(out, "");
    fputs("apply_activation_checkpointing(model, checkpoint_wrapper_fn=ckplan_wrapper, check_fn=check_fn)\n",
          out);
    return CK_OK;
}
