"""Export one of our checkpoints as a Hugging Face folder (`interp export RUN_DIR --hf OUT_DIR`).

The folder holds config.json (a TaperedLlamaConfig: Llama fields + `intermediate_sizes`, the per-layer
widths, and an `interp` block saying where it came from), model.safetensors in Llama's tensor names,
the tokenizer (tokenizer.json + tokenizer_config.json) and the modeling code, interp/hf/tapered_llama.py
copied as `modeling_tapered_llama.py` and named by config.json's `auto_map`. So:

    AutoModelForCausalLM.from_pretrained(OUT_DIR, trust_remote_code=True)   # anywhere with transformers
    interp probe --model OUT_DIR                                              # here: no remote code run

Inside the toolkit `register_tapered_llama()` registers the same classes with the Auto classes, so our
loaders build exported folders from the installed package and never execute the folder's copy.

Which mixers export: `attention` only. Its block is exactly Llama's; the gated-attention variants add a
head gate and Titans / Hope carry memory modules with their own update rules, which no stock Hugging
Face class computes, so exporting them would need modeling code beyond Llama's (refused, with why).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from interp._util.errors import InputError
from interp._util.io import PathLike, atomic_write, exclusive_lock, json_sha256, write_json_atomic
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp._util.provenance import provenance
from interp.hf.resolve import EXPORT_MODEL_TYPE as MODEL_TYPE  # resolve must not import this module
MODELING_FILE = "modeling_tapered_llama.py"
EXPORTABLE_MIXERS = ("attention",)
AUTO_MAP = {"AutoConfig": f"{MODELING_FILE[:-3]}.TaperedLlamaConfig",
            "AutoModelForCausalLM": f"{MODELING_FILE[:-3]}.TaperedLlamaForCausalLM"}


def register_tapered_llama() -> None:
    """Make AutoConfig / AutoModelForCausalLM know model_type "tapered_llama", and the probes its sites
    (Llama's), so exported folders load from the installed package, with no remote code (idempotent)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from interp.hf.adapters import SITE_MAPS, register_site_map
    from interp.hf.tapered_llama import TaperedLlamaConfig, TaperedLlamaForCausalLM

    register_site_map(TaperedLlamaForCausalLM.__name__, SITE_MAPS["LlamaForCausalLM"])
    try:
        AutoConfig.register(MODEL_TYPE, TaperedLlamaConfig)
    except ValueError:  # already registered
        pass
    try:
        AutoModelForCausalLM.register(TaperedLlamaConfig, TaperedLlamaForCausalLM)
    except ValueError:
        pass


def hf_state_dict(model) -> dict:
    """Our TaperedLM's tensors under Llama's names (a tied unembedding is left to tie_word_embeddings)."""
    sd = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.ln_final.weight}
    for i, block in enumerate(model.blocks):
        pre = f"model.layers.{i}."
        sd[pre + "input_layernorm.weight"] = block.ln1.weight
        sd[pre + "post_attention_layernorm.weight"] = block.ln2.weight
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            sd[pre + f"self_attn.{proj}.weight"] = getattr(block.attn, proj).weight
        for proj in ("gate_proj", "up_proj", "down_proj"):
            sd[pre + f"mlp.{proj}.weight"] = getattr(block.mlp, proj).weight
    if not model.cfg.tie_embeddings:
        sd["lm_head.weight"] = model.unembed.weight
    return {k: v.detach().contiguous().cpu() for k, v in sd.items()}


def hf_config(model_cfg, *, eos_id: int | None, source: dict):
    """The TaperedLlamaConfig of our ModelConfig (source: the provenance block stored as `interp`)."""
    from interp.hf.tapered_llama import TaperedLlamaConfig

    widths = list(model_cfg.d_mlp)
    cfg = TaperedLlamaConfig(
        intermediate_sizes=widths, intermediate_size=round(sum(widths) / len(widths)),
        vocab_size=model_cfg.vocab_size, hidden_size=model_cfg.d_model, num_hidden_layers=model_cfg.n_layers,
        num_attention_heads=model_cfg.n_heads, num_key_value_heads=model_cfg.n_heads, head_dim=model_cfg.d_head,
        max_position_embeddings=model_cfg.n_ctx, rms_norm_eps=model_cfg.norm_eps, hidden_act="silu",
        rope_parameters={"rope_type": "default", "rope_theta": float(model_cfg.rope_theta)},
        attention_bias=False, mlp_bias=False, tie_word_embeddings=bool(model_cfg.tie_embeddings),
        initializer_range=model_cfg.init_std, bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=None)
    cfg.architectures = ["TaperedLlamaForCausalLM"]
    cfg.auto_map = dict(AUTO_MAP)
    cfg.interp = source
    return cfg


def export_hf(run_dir: PathLike, out_dir: PathLike, *, overwrite: bool = False) -> Path:
    """Write the Hugging Face folder of checkpoint `run_dir` to `out_dir`; returns out_dir.

    Checks everything (checkpoint, mixer, tokenizer, output) before writing; out_dir must not exist or
    be empty unless overwrite (then only the files this function writes are replaced)."""
    from safetensors.torch import save_file

    from interp.hf.resolve import checkpoint_tokenizer
    from interp.training import checkpoints

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not checkpoints.is_checkpoint_dir(run_dir):
        raise InputError("not one of our checkpoints (no config.json + model.safetensors written by interp "
                         "train)", path=run_dir, fix="give a run directory or checkpoints/step_N of one")
    config = checkpoints.read_config(run_dir)
    mixer = (config.get("model") or {}).get("mixer", "attention")
    if mixer not in EXPORTABLE_MIXERS:
        raise InputError(f"mixer {mixer!r} does not export: only {list(EXPORTABLE_MIXERS)} blocks are exactly "
                         "Llama's (see interp.hf.export)", path=run_dir / CONFIG_FILE, field="model.mixer")
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise InputError("exists and is not empty", path=out_dir, fix="choose a new --hf folder or pass --overwrite")
    tokenizer = checkpoint_tokenizer(config, str(run_dir))  # before any write: a tokenizer we cannot rebuild fails
    model, _ = checkpoints.load_checkpoint(run_dir)
    source = {"exported_from": str(run_dir.resolve()), "checkpoint_config_sha256": json_sha256(config),
              "model": config.get("model"), "train": config.get("train"), **provenance()}
    hf_cfg = hf_config(model.cfg, eos_id=tokenizer.eos_id, source=source)
    out_dir.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(out_dir / ".export.lock", f"export folder {out_dir}"):
        tensors = hf_state_dict(model)
        atomic_write(out_dir, {WEIGHTS_FILE: lambda p: save_file(tensors, str(p), metadata={"format": "pt"})})
        write_json_atomic(out_dir / CONFIG_FILE, hf_cfg.to_dict())
        _save_tokenizer(tokenizer, out_dir)
        shutil.copyfile(Path(__file__).with_name("tapered_llama.py"), out_dir / MODELING_FILE)
    (out_dir / ".export.lock").unlink(missing_ok=True)
    return out_dir


def _save_tokenizer(tokenizer, out_dir: Path) -> None:
    """tokenizer.json + tokenizer_config.json via PreTrainedTokenizerFast; eos = the separator we trained with."""
    from transformers import PreTrainedTokenizerFast

    eos = tokenizer.backend.id_to_token(tokenizer.eos_id)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend, eos_token=eos, bos_token=eos)
    fast.model_max_length = 10**30
    fast.save_pretrained(out_dir)
