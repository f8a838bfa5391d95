"""Export one of our checkpoints as a Hugging Face folder (`interp export RUN_DIR --out OUT_DIR`).

The folder holds config.json (a TaperedLlamaConfig: Llama fields + `intermediate_sizes`, the per-layer
widths, and an `interp` block saying where it came from; a TaperedGPT2Config for a gpt2-style model),
model.safetensors in Llama's (GPT-2's) tensor names, the tokenizer (tokenizer.json + tokenizer_config.json)
and the modeling code, interp/hf/tapered_llama.py (tapered_gpt2.py) copied as `modeling_tapered_llama.py`
(`modeling_tapered_gpt2.py`) and named by config.json's `auto_map`. So:

    AutoModelForCausalLM.from_pretrained(OUT_DIR, trust_remote_code=True)   # anywhere with transformers
    interp probe --model OUT_DIR                                              # here: no remote code run

Inside the toolkit `register_tapered_llama()` registers the same classes (both styles) with the Auto
classes, so our loaders build exported folders from the installed package and never execute the folder's copy.

Which models export: block style (ModelConfig.arch) "llama" with mixer `attention`, whose block is exactly
Llama's, and "gpt2" (attention only), whose block is exactly GPT-2's. The gated-attention variants add a
head gate and Titans / Hope carry memory modules with their own update rules, which no stock Hugging Face
class computes, so exporting them would need modeling code beyond Llama's (refused, with why).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path

from interp._util.errors import InputError
from interp._util.io import (
    TEMP_SUFFIX,
    LockHeld,
    PathLike,
    exclusive_lock,
    json_sha256,
    raise_if_full,
    read_json,
    remove_entry,
    remove_stale_temps,
    safe_open,
)
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp._util.provenance import provenance
from interp.hf.export_styles import EXPORT_MODEL_TYPES, STYLES, ExportStyle  # noqa: F401 (re-exported)

MODELING_FILE = STYLES["llama"].modeling_file
EXPORTABLE_MIXERS = STYLES["llama"].mixers
AUTO_MAP = STYLES["llama"].auto_map


def register_tapered_llama() -> None:
    """Make AutoConfig / AutoModelForCausalLM know model_types "tapered_llama" and "tapered_gpt2", and the
    probes their sites (Llama's, GPT-2's), so exported folders load from the installed package, with no
    remote code (idempotent)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from interp.hf.adapters import register_site_map, site_map_for

    for style in STYLES.values():
        config_class, model_class = style.classes()
        register_site_map(model_class.__name__, site_map_for(style.sites_of))
        try:
            AutoConfig.register(config_class.model_type, config_class)
        except ValueError:  # already registered
            pass
        try:
            AutoModelForCausalLM.register(config_class, model_class)
        except ValueError:
            pass


def hf_state_dict(model) -> dict:
    """Our TaperedLM's tensors under Llama's (gpt2 style: GPT-2's) names (a tied unembedding is left to
    tie_word_embeddings)."""
    if model.cfg.arch == "gpt2":
        return _gpt2_state_dict(model)
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


def _gpt2_state_dict(model) -> dict:
    """A gpt2-style TaperedLM's tensors under GPT-2's names: q, k, v fused into c_attn, and every projection
    transposed (GPT-2's Conv1D weight is [in, out], our nn.Linear's [out, in])."""
    import torch

    sd = {"transformer.wte.weight": model.embed.weight, "transformer.wpe.weight": model.pos_embed.weight,
          "transformer.ln_f.weight": model.ln_final.weight, "transformer.ln_f.bias": model.ln_final.bias}
    for i, block in enumerate(model.blocks):
        pre, attn, mlp = f"transformer.h.{i}.", block.attn, block.mlp
        for ours, theirs in ((block.ln1, "ln_1"), (block.ln2, "ln_2")):
            sd[pre + f"{theirs}.weight"], sd[pre + f"{theirs}.bias"] = ours.weight, ours.bias
        qkv = (attn.q_proj, attn.k_proj, attn.v_proj)
        sd[pre + "attn.c_attn.weight"] = torch.cat([p.weight for p in qkv]).T
        sd[pre + "attn.c_attn.bias"] = torch.cat([p.bias for p in qkv])
        for ours, theirs in ((attn.o_proj, "attn.c_proj"), (mlp.up_proj, "mlp.c_fc"), (mlp.down_proj, "mlp.c_proj")):
            bias = ours.bias if ours.bias is not None else ours.weight.new_zeros(ours.out_features)   # a layer
            sd[pre + f"{theirs}.weight"], sd[pre + f"{theirs}.bias"] = ours.weight.T, bias   # without MLP: 0 bias
    if not model.cfg.tie_embeddings:
        sd["lm_head.weight"] = model.unembed.weight
    return {k: v.detach().contiguous().cpu() for k, v in sd.items()}


def hf_config(model_cfg, *, eos_id: int | None, source: dict):
    """The TaperedLlamaConfig (gpt2 style: TaperedGPT2Config) of our ModelConfig (source: the provenance block
    stored as `interp`)."""
    if model_cfg.arch == "gpt2":
        return _gpt2_config(model_cfg, eos_id=eos_id, source=source)
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


def _gpt2_config(model_cfg, *, eos_id: int | None, source: dict):
    """The TaperedGPT2Config of a gpt2-style ModelConfig: no dropout (we train without), GELU-tanh computed by
    torch's kernel ("gelu_pytorch_tanh", the same function as GPT-2's "gelu_new"), our eps and tying."""
    from interp.hf.tapered_gpt2 import TaperedGPT2Config

    widths = list(model_cfg.d_mlp)
    style = STYLES["gpt2"]
    cfg = TaperedGPT2Config(
        intermediate_sizes=widths, n_inner=round(sum(widths) / len(widths)), vocab_size=model_cfg.vocab_size,
        n_positions=model_cfg.n_ctx, n_embd=model_cfg.d_model, n_layer=model_cfg.n_layers, n_head=model_cfg.n_heads,
        activation_function="gelu_pytorch_tanh", resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
        layer_norm_epsilon=model_cfg.norm_eps, initializer_range=model_cfg.init_std,
        tie_word_embeddings=bool(model_cfg.tie_embeddings), bos_token_id=eos_id, eos_token_id=eos_id, pad_token_id=None)
    cfg.architectures = [style.model_class]
    cfg.auto_map = style.auto_map
    cfg.interp = source
    return cfg


def _check_out_dir(run_dir: Path, out_dir: Path, overwrite: bool) -> None:
    """out_dir may be new, empty, or (with overwrite) an earlier export; never the run, a folder inside it (its
    step checkpoints) or anything else that holds files, which --overwrite would silently replace."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("is a file, not a folder", path=out_dir, fix="give --out a new folder")
    if out_dir.resolve().is_relative_to(run_dir.resolve()):
        raise InputError(f"is inside the run being exported ({run_dir}): exporting there would overwrite the "
                         "run's own files", path=out_dir, fix="give --out a folder outside the run directory")
    if not out_dir.is_dir() or not any(out_dir.iterdir()):
        return
    if not overwrite:
        raise InputError("exists and is not empty", path=out_dir, fix="choose a new --out folder or pass --overwrite")
    config = read_json(out_dir / CONFIG_FILE, missing_ok=True, torn_ok=True)
    if not isinstance(config, dict) or config.get("model_type") not in EXPORT_MODEL_TYPES:
        raise InputError("--overwrite replaces only an earlier `interp export` folder, and this is not one (its "
                         f"{CONFIG_FILE} has no tapered model_type)", path=out_dir,
                         fix="choose a new --out folder, or empty this one yourself")


LOCAL = "<local>"   # what an absolute path of this machine becomes in a public export's config.json


def public_paths(value: object) -> object:
    """`value` (a JSON-able config block) with every absolute path string (/..., ~/..., C:\\...) replaced by
    "<local>/<its last name>": what a pushed export says of the machine that trained it (a home folder, a
    cluster's scratch layout) is the folder's name, nothing more."""
    if isinstance(value, dict):
        return {k: public_paths(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [public_paths(v) for v in value]
    if isinstance(value, str) and (value.startswith(("/", "~")) or (len(value) > 2 and value[1:3] in (":\\", ":/"))):
        name = value.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1]
        return f"{LOCAL}/{name}" if name else LOCAL
    return value


def export_hf(run_dir: PathLike, out_dir: PathLike, *, overwrite: bool = False, public: bool = False) -> Path:
    """Write the Hugging Face folder of checkpoint `run_dir` to `out_dir`; returns out_dir.

    public: the config's `interp` block keeps no absolute path of this machine (public_paths; `interp export
    --push` sets it): the run folder and the training paths are named, not located.

    Checks everything (checkpoint, mixer, tokenizer, output) before writing; out_dir must not exist or
    be empty unless overwrite (then only the files this function writes are replaced). The lock is taken before
    the "new or empty" check, so of two exports into one new folder the second is refused, never silently
    replacing the first."""
    from interp.hf.sources.checkpoint import checkpoint_tokenizer
    from interp.training import checkpoints

    run_dir, out_dir = Path(run_dir), Path(out_dir)
    if not checkpoints.is_checkpoint_dir(run_dir):
        raise InputError("not one of our checkpoints (no config.json + model.safetensors written by interp "
                         "train)", path=run_dir, fix="give a run directory or checkpoints/step_N of one")
    config = checkpoints.read_config(run_dir)
    model_block = config.get("model") or {}
    arch, mixer = model_block.get("arch", "llama"), model_block.get("mixer", "attention")
    if arch not in STYLES:
        raise InputError(f"block style {arch!r} does not export: only {list(STYLES)} do (see interp.hf.export)",
                         path=run_dir / CONFIG_FILE, field="model.arch")
    style = STYLES[arch]
    if mixer not in style.mixers:
        raise InputError(f"mixer {mixer!r} does not export: only {list(style.mixers)} blocks are exactly "
                         f"{style.family}'s (see interp.hf.export)",
                         path=run_dir / CONFIG_FILE, field="model.mixer")
    tokenizer = checkpoint_tokenizer(config, str(run_dir))  # before any write: a tokenizer we cannot rebuild fails
    model, _ = checkpoints.load_checkpoint(run_dir)
    source = {"exported_from": str(run_dir.resolve()), "checkpoint_config_sha256": json_sha256(config),
              "model": config.get("model"), "train": config.get("train"), **provenance()}
    if public:
        source = public_paths(source)
    hf_cfg = hf_config(model.cfg, eos_id=tokenizer.eos_id, source=source)
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("is a file, not a folder", path=out_dir, fix="give --out a new folder")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = out_dir.parent / f".{out_dir.name}.export.lock"   # beside the folder, so it can be new or replaced
    what = f"export folder {out_dir}"
    with exclusive_lock(lock, what):   # held by another export: LockHeld, and its lock file is left alone
        _check_lock_is_ours(lock, what)
        try:
            remove_stale_temps(out_dir, ["export"])       # a killed export's staging folder, ours to remove now
            _check_out_dir(run_dir, out_dir, overwrite)   # under the lock: a second export is refused, not merged
            _write_export(out_dir, hf_state_dict(model), hf_cfg.to_dict(), tokenizer,
                          Path(__file__).with_name(f"{style.module}.py"), style.modeling_file)
        finally:
            remove_entry(lock)   # while still holding it: only the holder ever removes the lock file
    return out_dir


def _check_lock_is_ours(lock: Path, what: str) -> None:
    """The lock file at `lock` is the one this process holds: another export that removed it just before we
    locked our open copy (and a third that created a new one since) would otherwise both go on."""
    try:
        holder = lock.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        holder = ""
    if holder != str(os.getpid()):
        raise LockHeld(f"{what} is in use by another process (pid {holder or '?'}, lock {lock}); wait for it to "
                       "finish or stop it, or choose another output")


def _write_export(out_dir: Path, tensors: dict, hf_config_dict: dict, tokenizer, modeling: Path,
                  modeling_name: str) -> None:
    """Every file of the export written into a private temporary folder inside out_dir first (a full disk or a
    kill leaves the previous export whole, never half of each), then each moved into place with os.replace,
    which replaces an entry planted there (a symlink to a file outside, say) instead of writing through it."""
    from safetensors.torch import save_file

    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export.", suffix=TEMP_SUFFIX, dir=out_dir))
    moved = False
    try:
        try:
            save_file(tensors, str(staging / WEIGHTS_FILE), metadata={"format": "pt"})  # not-safe-open: fresh temp
            with safe_open(staging / CONFIG_FILE, "w") as f:
                f.write(json.dumps(hf_config_dict, indent=2) + "\n")
            _save_tokenizer(tokenizer, staging)
            shutil.copyfile(modeling, staging / modeling_name)  # not-safe-open: a fresh private temporary
        except BaseException as err:
            raise_if_full(err, out_dir, "the export")
            raise
        moved = True
        for file in sorted(staging.iterdir()):
            os.replace(file, out_dir / file.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if created and not moved:   # a failed export into a new folder leaves no folder behind
            with contextlib.suppress(OSError):
                out_dir.rmdir()


def _save_tokenizer(tokenizer, out_dir: Path) -> None:
    """tokenizer.json + tokenizer_config.json via PreTrainedTokenizerFast; eos = the separator we trained with."""
    from transformers import PreTrainedTokenizerFast

    eos = tokenizer.backend.id_to_token(tokenizer.eos_id)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend, eos_token=eos, bos_token=eos)
    fast.model_max_length = 10**30
    fast.save_pretrained(out_dir)  # not-safe-open: out_dir is export's fresh private staging folder
