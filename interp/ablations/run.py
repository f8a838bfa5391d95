"""The pretrained-model capacity ablation: load any model spec, score the neurons, run every condition,
return one tidy row per condition (COLUMNS)."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Int
from torch import Tensor

from interp._util.dtypes import torch_dtype
from interp._util.errors import InputError
from interp._util.io import text_sha256
from interp.ablations.conditions import Condition, ablated, build_conditions, removals
from interp.ablations.config import DTYPE_NAMES, AblationConfig
from interp.ablations.loss import paired_delta, sequence_losses
from interp.ablations.scores import contribution_scores
from interp.ablations.sites import layer_groups
from interp.hf import layer_modules, root_and_sites, unwrap

if TYPE_CHECKING:
    import pandas as pd

# name -> autocast dtype; float32 means no autocast (None: the model runs as loaded)
DTYPES = {name: None if name == "float32" else torch_dtype(name) for name in DTYPE_NAMES}
# Tidy output table, one row per condition. layers: "first-last" layers touched; n_tokens: predicted
# tokens per condition (n_sequences * (seq_len - 1)); delta*: vs the baseline, paired over sequences;
# fp32_baseline_loss: the baseline in fp32 (the bf16-autocast check; = the baseline loss when dtype=float32);
# text_sha256: the full sha256 of the text (interp._util.io.text_sha256), as in the probe tables; device and
# hardware: where the forwards ran (interp._util.provenance.hardware_label), as in the probe tables.
COLUMNS = ("model", "kind", "label", "group", "layers", "fraction", "selection", "seed", "layer",
           "n_neurons_removed", "loss", "delta", "delta_ci_low", "delta_ci_high", "n_tokens", "n_sequences",
           "seq_len", "score_tokens", "text_source", "text_sha256", "dtype", "fp32_baseline_loss", "device", "hardware",
           "versions")


@dataclass
class _Sequences:
    score: Int[Tensor, "n_score seq_len"]
    eval: Int[Tensor, "n_eval seq_len"]
    source: str
    sha256: str


def split_sequences(ids: Sequence[int] | Tensor, seq_len: int, score_sequences: int, eval_sequences: int
                    ) -> tuple[Int[Tensor, "n_score seq_len"], Int[Tensor, "n_eval seq_len"]]:
    """Cut token ids into consecutive sequences: the first `score_sequences` score, the next
    `eval_sequences` evaluate. Disjoint by construction (they can share at most one document, at the seam)."""
    from interp.probes import token_batches

    n = score_sequences + eval_sequences
    if len(ids) < n * seq_len:  # say it in this experiment's terms (token_batches speaks of `tokens`)
        fits = len(ids) // seq_len
        fix = (f"lower eval_sequences to at most {fits - score_sequences}" if fits > score_sequences else
               f"lower score_sequences + eval_sequences to at most {fits}" if fits >= 2 else
               "lower seq_len")
        raise ValueError(f"the text has {len(ids)} tokens, but score_sequences + eval_sequences = {n} sequences of "
                         f"seq_len {seq_len} need {n * seq_len}: pass a longer text (--text FILE) or {fix}")
    seqs = token_batches(ids, tokens=n * seq_len, seq_len=seq_len, batch_size=n)[0]
    return seqs[:score_sequences], seqs[score_sequences:]


def _load_sequences(cfg: AblationConfig, tokenizer: Any) -> _Sequences:
    from interp.probes import encode_text, load_text

    text, source = load_text(cfg.text)
    score, evals = split_sequences(encode_text(tokenizer, text), cfg.seq_len, cfg.score_sequences,
                                   cfg.eval_sequences)
    return _Sequences(score, evals, source, text_sha256(text))


def _load(cfg: AblationConfig, device: str) -> tuple[Any, Any]:
    """(model, tokenizer) for any spec interp.hf.resolve_model accepts, in cfg.model_dtype, on `device` or
    placed by cfg.device_map: a LoadedModel and its tokenizer, or one of our checkpoints (TaperedLM) and the
    tokenizer it was trained with."""
    from interp.hf import resolve_model

    ref = resolve_model(cfg.model, trust_remote_code=cfg.trust_remote_code, revision=cfg.revision).fetched()
    # sdpa and eager are the same math for a TaperedLM; anything else is refused
    loaded = ref.load_placed(device, cfg.model_dtype, cfg.device_map, attn_implementation=cfg.attn_implementation)
    return loaded, ref.tokenizer_for(loaded)


def _row(cond: Condition, losses: Tensor, baseline: Tensor, groups: Mapping[str, Sequence[int]],
         remove: Mapping[int, Tensor], confidence: float) -> dict[str, Any]:
    delta, lo, hi = paired_delta(losses, baseline, confidence)
    layers = groups.get(cond.group, []) if cond.kind == "neurons" else ([cond.layer] if cond.kind == "skip_mlp" else [])
    return {"kind": cond.kind, "label": cond.label, "group": cond.group,
            "layers": f"{layers[0]}-{layers[-1]}" if layers else None, "fraction": cond.fraction,
            "selection": cond.selection, "seed": cond.seed, "layer": cond.layer,
            "n_neurons_removed": int(sum(len(i) for i in remove.values())), "loss": float(losses.mean()),
            "delta": delta, "delta_ci_low": lo, "delta_ci_high": hi}


def _label(cfg: AblationConfig, loaded: Any, passed_in: bool) -> str:
    """The rows' `model`: cfg.model, which names what was loaded; for a model passed in, the name the caller gave
    in cfg.model, else the object's own (a LoadedModel's name, or its class), never the field's default."""
    from dataclasses import fields

    default = next(f.default for f in fields(AblationConfig) if f.name == "model")
    if not passed_in or cfg.model != default:
        return cfg.model
    from interp.probes.model_kinds import _model_label

    return _model_label(loaded)


def _whole_mlp_only(loaded: Any, conditions: list[Condition], name: str, say: Callable[[str], None]
                    ) -> list[Condition]:
    """`conditions` less the neuron removals for a mixture of experts (no single down projection: no neuron to
    score), said in one line; InputError when nothing but the baseline would be left."""
    if root_and_sites(loaded)[1].mlp_down is not None or all(c.kind != "neurons" for c in conditions):
        return conditions
    kept = [c for c in conditions if c.kind != "neurons"]
    why = (f"{type(unwrap(loaded)).__name__}'s MLP is a mixture of experts (no single down projection), so its "
           "neurons cannot be scored or removed")
    if len(kept) == 1:
        raise InputError(why, field="--skip-layers", fix="ask for the whole-MLP ablation: --skip-layers all or L[,L]")
    say(f"[ablate] {name}: {why}; the {len(conditions) - len(kept)} neuron conditions are left out, the "
        f"{len(kept) - 1} whole-MLP skips run")
    return kept


def run_pretrained_ablation(cfg: AblationConfig, loaded: Any = None,
                            log: Callable[[str], None] | None = print, tokenizer: Any = None) -> pd.DataFrame:
    """Run every condition of `cfg` on a model; one tidy row per condition (COLUMNS).

    loaded: an already-loaded model (LoadedModel, HF causal LM, TaperedLM; tests, notebooks); None loads
        `cfg.model` through interp.hf.resolve_model: a registry name, .gguf, HF directory, hub id or one of
        our checkpoints (with the tokenizer it was trained with), then moves it to `cfg.device`; a model passed
        in stays where it is (rows record where it ran either way).
    tokenizer: the tokenizer, when `loaded` carries none (a bare HF model or a TaperedLM).
    log: progress lines (condition, loss, elapsed, ETA); None for silence.
    """
    import pandas as pd

    from interp._util.devices import model_device, model_dtype, resolve_device
    from interp._util.provenance import hardware_label, versions_string

    cfg.validate()
    device = resolve_device(cfg.device)  # a missing GPU fails here, before any weights are read
    say = log or (lambda _msg: None)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    passed_in = loaded is not None
    if loaded is None:
        loaded, tokenizer = _load(cfg, device)
    from interp.hf import check_fits

    check_fits(loaded, cfg.seq_len)   # beyond its context a model fails in its embedding, or runs blind
    tokenizer = tokenizer if tokenizer is not None else getattr(loaded, "tokenizer", None)
    if tokenizer is None:
        raise ValueError(f"run_pretrained_ablation: {type(loaded).__name__} carries no tokenizer; pass tokenizer=")
    seqs = _load_sequences(cfg, tokenizer)
    n_layers = len(layer_modules(loaded))
    groups = layer_groups(n_layers)   # always the thirds; cfg.groups only picks which are ablated
    conditions = _whole_mlp_only(loaded, build_conditions(n_layers, cfg.fractions, cfg.seeds, cfg.groups,
                                                          cfg.selections,
                                                          None if cfg.skip_layers is None else list(cfg.skip_layers)),
                                 cfg.model, say)
    amp = DTYPES[cfg.dtype]
    eval_batches = list(seqs.eval.split(cfg.batch_size))
    say(f"[ablate] {cfg.model}: {n_layers} layers, thirds "
        + ", ".join(f"{g} {v[0]}-{v[-1]}" for g, v in groups.items())
        + f"; {len(conditions)} conditions x {seqs.eval.numel()} eval tokens + {seqs.score.numel()} scoring tokens")

    start = time.perf_counter()
    scores, score_tokens = [], 0
    if any(c.kind == "neurons" for c in conditions):
        scores, score_tokens = contribution_scores(loaded, seqs.score.split(cfg.batch_size), amp)
    fp32_baseline = math.nan
    if amp is not None:   # the documented check: bf16 autocast must not move the baseline by >= 1%
        fp32_baseline = float(sequence_losses(loaded, eval_batches, None).mean())
    if score_tokens:
        say(f"[ablate] scored {score_tokens} tokens in {time.perf_counter() - start:.0f}s")

    rows, baseline = [], None
    for i, cond in enumerate(conditions):
        remove = removals(cond, scores, groups)
        with ablated(loaded, remove=remove, skip=[cond.layer] if cond.kind == "skip_mlp" else []):
            losses = sequence_losses(loaded, eval_batches, amp)
        if baseline is None:
            if cond.kind != "baseline":
                raise AssertionError("build_conditions must put the baseline first")
            baseline = losses
            if amp is not None and abs(float(losses.mean()) / fp32_baseline - 1) >= 0.01:
                say(f"[ablate] WARNING: {cfg.dtype} baseline {float(losses.mean()):.4f} differs from fp32 "
                    f"{fp32_baseline:.4f} by >= 1%; rerun with dtype='float32'")
        rows.append(_row(cond, losses, baseline, groups, remove, cfg.confidence))
        elapsed = time.perf_counter() - start
        say(f"[ablate] {i + 1}/{len(conditions)} {cond.label:<26} loss {rows[-1]['loss']:.4f} "
            f"delta {rows[-1]['delta']:+.4f}  {elapsed:.0f}s, ETA {elapsed / (i + 1) * (len(conditions) - i - 1):.0f}s")

    df = pd.DataFrame(rows)
    df["model"] = _label(cfg, loaded, passed_in)
    df["n_tokens"] = seqs.eval.shape[0] * (seqs.eval.shape[1] - 1)     # predicted tokens per condition
    df["n_sequences"] = seqs.eval.shape[0]
    df["seq_len"] = cfg.seq_len
    df["score_tokens"] = score_tokens
    df["text_source"] = seqs.source
    df["text_sha256"] = seqs.sha256
    df["dtype"] = cfg.dtype
    df["fp32_baseline_loss"] = fp32_baseline if amp is not None else float(baseline.mean())
    ran_on = model_device(loaded)
    forward_dtype = amp if amp is not None else model_dtype(loaded)
    df["device"], df["hardware"] = str(ran_on), hardware_label(ran_on, dtype=forward_dtype)
    df["versions"] = versions_string()   # the provenance column's one name, as in the probe and eval tables
    df = df.reindex(columns=list(COLUMNS))
    ref = getattr(loaded, "ref", None)
    for name, value in (ref.table_columns() if ref is not None else {}).items():
        df[name] = value   # which revision of a hub model, and the commit it resolved to
    if cfg.model_dtype != "float32" or cfg.device_map is not None:   # how it was loaded, where not the default
        df["model_dtype"] = str(model_dtype(loaded)).removeprefix("torch.") + (" (auto)" if cfg.model_dtype == "auto"
                                                                                else "")
        df["device_map"] = str(cfg.device_map or "")
    return df
