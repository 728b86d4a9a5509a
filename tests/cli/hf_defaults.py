"""Each family's defaults are its config class's (issue 24): for every tiny config of
models/hf, and that config less each key in turn, ckplan's parameter count equals that of
the model transformers builds from the same dict (on the meta device), and the figures
ckplan writes (norm epsilon, dropouts, rotary base, window, soft caps, tied head,
use_cache) equal the config object's attributes. A key ckplan requires is refused by it
(exit 2, "missing"), which is allowed; any other disagreement fails.

usage: hf_defaults.py CKPLAN MODELS_HF_DIR WORK_DIR  (exit 0 all agree, 1 not, 77 skipped)
"""
import glob
import json
import os
import subprocess
import sys

try:
    import torch
    import transformers
except ImportError as e:  # the referee's packages are not installed: nothing to compare with
    print(f"skipped: {e}")
    sys.exit(77)

transformers.logging.set_verbosity_error()
CKPLAN, MODELS, WORK = sys.argv[1:4]
# Keys a config may leave out, beside those the tiny configs state.
EXTRA = ["num_key_value_heads", "head_dim", "attention_bias", "mlp_bias", "attention_dropout",
         "rope_theta", "sliding_window", "num_local_experts", "num_experts_per_tok", "n_inner",
         "attn_pdrop", "resid_pdrop", "embd_pdrop", "dropout", "enable_bias",
         "word_embed_proj_dim", "attn_logit_softcapping", "final_logit_softcapping",
         "activation_dropout", "hidden_activation", "hidden_act", "activation_function"]
HEADS = 64  # a multiple of every family's default num_key_value_heads, and above each
# Keys set beside the tiny configs' own, to values other than their defaults, so that what
# ckplan reads of them (or must not) is compared too.
ADDED = {"opt": {"activation_dropout": 0.1}, "gemma": {"attention_bias": True},
         "gemma2": {"attention_bias": True}}


def ckplan_model(config, path):
    """ckplan's document of config (imported with eager attention, which shows the caps),
    or None when it refuses a missing key."""
    with open(path, "w") as f:
        json.dump(config, f)
    out = path + ".model.json"
    r = subprocess.run([CKPLAN, "import", path, "--attention", "eager", "-o", out],
                       capture_output=True, text=True)
    if r.returncode == 2 and "missing" in r.stderr:
        return None
    assert r.returncode == 0, (path, r.stderr)
    r = subprocess.run([CKPLAN, "plan", out, "--budget", "1T", "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, (path, r.stderr)
    doc = json.load(open(out))
    doc["n_params"] = json.loads(r.stdout)["model"]["parameters"]
    return doc


def nodes(doc):
    return {n["name"]: n for n in doc["blocks"]["layer"]["nodes"] + doc["nodes"]}


def ckplan_figures(doc):
    n = nodes(doc)
    return {
        "params": doc["n_params"],
        "eps": n["norm1"]["eps"],
        "attn_dropout": n["attn"].get("dropout", 0),
        "resid_dropout": n["drop1"]["p"] if "drop1" in n else 0,
        "act_dropout": n["drop_act"]["p"] if "drop_act" in n else 0,
        "embd_dropout": n["drop_embed"]["p"] if "drop_embed" in n else 0,
        "theta": n["rope"].get("theta", 10000) if "rope" in n else None,
        "window": n["attn"].get("window", 0),
        "attn_cap": n["attn"].get("softcap", 0),
        "final_cap": n["logit_softcap"]["cap"] if "logit_softcap" in n else 0,
        "tied": n["lm_head"].get("tied", False),
        "use_cache": doc["use_cache"],
    }


def hf_figures(config):
    # token ids change no size, and a class's defaults may lie outside a tiny vocabulary
    cfg = transformers.AutoConfig.for_model(**config, pad_token_id=None, bos_token_id=None,
                                            eos_token_id=None)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    t = config["model_type"]
    get = lambda k, d=0: getattr(cfg, k, d)
    rope = get("rope_parameters", None)
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "eps": get("layer_norm_epsilon") if t == "gpt2" else 1e-5 if t == "opt" else get("rms_norm_eps"),
        "attn_dropout": get("attn_pdrop") if t == "gpt2" else get("attention_dropout"),
        "resid_dropout": get("resid_pdrop") if t in ("gpt2", "phi3") else get("dropout") if t == "opt" else 0,
        "act_dropout": 0,  # no family's MLP drops after its activation in transformers 5
        "embd_dropout": get("embd_pdrop") if t == "gpt2" else 0,
        "theta": None if t in ("gpt2", "opt") else rope["rope_theta"],
        "window": (get("sliding_window", None) or 0) if t in ("mistral", "mixtral", "phi3") else 0,
        "attn_cap": (get("attn_logit_softcapping", None) or 0) if t == "gemma2" else 0,
        "final_cap": (get("final_logit_softcapping", None) or 0) if t == "gemma2" else 0,
        "tied": bool(get("tie_word_embeddings")),
        "use_cache": bool(get("use_cache")),
    }


def main():
    failed = compared = required = 0
    for path in sorted(glob.glob(os.path.join(MODELS, "*-tiny.json"))):
        base = json.load(open(path))
        base.pop("architectures", None)
        heads, width = ("n_head", "n_embd") if "n_head" in base else ("num_attention_heads", "hidden_size")
        base[heads], base[width] = HEADS, 2 * HEADS  # head size 2 unless the config says
        if "word_embed_proj_dim" in base:  # OPT's, which ckplan takes equal to the width only
            base["word_embed_proj_dim"] = base[width]
        family = base["model_type"]
        base.update(ADDED.get(family, {}))
        for key in [None] + sorted(set(base) - {"model_type", heads, width} | set(EXTRA)):
            if key is not None and key not in base:
                continue
            config = {k: v for k, v in base.items() if k != key}
            doc = ckplan_model(config, os.path.join(WORK, f"{family}-{key}.json"))
            if doc is None:
                required += 1
                continue
            ours, theirs = ckplan_figures(doc), hf_figures(config)
            compared += 1
            for k in ours:
                if ours[k] != theirs[k] and not (isinstance(ours[k], float) and abs(ours[k] - theirs[k]) < 1e-12):
                    failed += 1
                    print(f"{family} without {key}: {k}: ckplan {ours[k]}, transformers {theirs[k]}")
    print(f"{compared} configs compared, {required} refused for a required key, {failed} differences")
    return 1 if failed or not compared else 0


sys.exit(main())
