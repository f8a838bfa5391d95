"""Capacity ablations: remove MLP neurons (or whole MLPs) at run time and measure the held-out loss.

Why: the paper argues that late layers mostly reinforce what is already in the residual stream, so
their MLP capacity is worth less. If so, removing late MLP capacity from a trained model should cost
less loss than removing the same amount early or in the middle. This module measures that.

Definitions (SwiGLU/Llama names; TaperedLM uses the same module names):
  neuron i of layer l   one intermediate channel of the MLP: a_i = act(gate_i) * up_i, the i-th INPUT
                        channel of `down_proj` (TransformerLens: blocks.{l}.mlp.hook_post[..., i]).
  contribution score    s_i = mean over scoring tokens of |a_i|  *  ||W_down[:, i]||_2
                        (activation-weighted output norm: how large a vector neuron i writes, on average).
  removing neurons      a forward PRE-hook on down_proj multiplies its input by a 0/1 keep-mask
                        (= zeroing W_down's columns, without touching the weights), so one loaded model
                        serves every condition; `ablated()` removes its hooks on exit, even on error.
  skipping an MLP       a forward hook on the MLP module returns zeros: the layer adds nothing through its
                        MLP (on Gemma's sandwich norm, post_feedforward_layernorm(0) = 0 too).
  loss                  mean next-token cross-entropy (nats) per sequence; a condition's `delta` is the
                        mean over sequences of its paired per-sequence difference to the baseline (same
                        tokens), with a Student-t 95% CI over sequences (tokens within a sequence are
                        correlated, so sequences, not tokens, are the independent units).
Scores are streamed: the pre-hook reduces each batch to per-neuron sums at once; no activations are kept.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.ablations.config import DTYPE_NAMES, GROUPS, SELECTIONS, AblationConfig
from interp.stats import t_quantile

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["GROUPS", "SELECTIONS", "KINDS", "DTYPES", "COLUMNS", "MlpSite", "mlp_sites", "layer_groups",
           "down_column_norms", "contribution_scores", "n_to_remove", "select_neurons", "Condition",
           "build_conditions", "removals", "ablated", "sequence_losses", "paired_delta",
           "AblationConfig", "split_sequences", "run_pretrained_ablation"]

KINDS = ("baseline", "neurons", "skip_mlp")
DTYPES = dict(zip(DTYPE_NAMES, (None, torch.bfloat16)))  # name -> autocast dtype (None: run as loaded)
# Tidy output table, one row per condition. layers: "first-last" layers touched; n_tokens: predicted
# tokens per condition (n_sequences * (seq_len - 1)); delta*: vs the baseline, paired over sequences;
# fp32_baseline_loss: the baseline in fp32 (the bf16-autocast check; = the baseline loss when dtype=float32).
COLUMNS = ("model", "kind", "label", "group", "layers", "fraction", "selection", "seed", "layer",
           "n_neurons_removed", "loss", "delta", "delta_ci_low", "delta_ci_high", "n_tokens", "n_sequences",
           "seq_len", "score_tokens", "text_source", "text_sha256", "dtype", "fp32_baseline_loss", "packages")
_DOWN_NAMES = ("down_proj", "c_proj", "fc2", "dense_4h_to_h")  # Llama/Gemma/Qwen/TaperedLM, GPT-2, OPT/Phi, NeoX


# --------------------------------------------------------------------------------------------------
# Where the MLPs are
# --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class MlpSite:
    """One layer's MLP: `mlp` (its output is what skipping zeroes) and `down` (its input is the neurons)."""

    layer: int
    mlp: nn.Module
    down: nn.Module

    @property
    def width(self) -> int:
        """Number of neurons (d_mlp of this layer; layers of a TaperedLM differ)."""
        return int(down_column_norms(self.down).numel())


def _root(model: Any) -> nn.Module:
    """The nn.Module to run: a LoadedModel's `.model`, else the module itself."""
    root = getattr(model, "model", None) if not isinstance(model, nn.Module) else model
    if not isinstance(root, nn.Module):
        raise TypeError(f"expected a LoadedModel (interp.hf), an HF causal LM or a TaperedLM, "
                        f"got {type(model).__name__}")
    return root


def _mlp_modules(model: Any) -> list[nn.Module]:
    """Per-layer MLP modules: via the SiteMap (LoadedModel / HF model), or `blocks[l].mlp` (TaperedLM)."""
    from interp.hf import get_submodule, layer_modules, site_map_for

    if not isinstance(model, nn.Module) and hasattr(model, "sites"):      # LoadedModel
        return [get_submodule(layer, model.sites.mlp) for layer in layer_modules(model)]
    if hasattr(model, "blocks") and all(hasattr(b, "mlp") for b in model.blocks):  # TaperedLM
        return [b.mlp for b in model.blocks]
    sites = site_map_for(model)
    return [get_submodule(layer, sites.mlp) for layer in get_submodule(model, sites.layers)]


def _down_module(mlp: nn.Module, layer: int) -> nn.Module:
    for name in _DOWN_NAMES:
        if isinstance(getattr(mlp, name, None), nn.Module):
            return getattr(mlp, name)
    raise ValueError(f"layer {layer}: MLP {type(mlp).__name__} has none of the down-projection names "
                     f"{_DOWN_NAMES}; add this architecture's name to interp.ablations._DOWN_NAMES")


def mlp_sites(model: Any) -> list[MlpSite]:
    """Every layer's MlpSite, in depth order, for a LoadedModel, a bare HF causal LM or a TaperedLM."""
    return [MlpSite(layer, mlp, _down_module(mlp, layer)) for layer, mlp in enumerate(_mlp_modules(model))]


def layer_groups(n_layers: int, groups: Sequence[str] = GROUPS) -> dict[str, list[int]]:
    """Contiguous layer groups (thirds by default), sized by interp.schedules.group_sizes so the
    ablation groups are the same layers as the wider-early/-middle/-late training profiles."""
    from interp.schedules import group_sizes

    out, start = {}, 0
    for name, size in zip(groups, group_sizes(n_layers, len(groups)), strict=True):
        out[name] = list(range(start, start + size))
        start += size
    return out


# --------------------------------------------------------------------------------------------------
# Contribution scores (streamed)
# --------------------------------------------------------------------------------------------------

def down_column_norms(down: nn.Module) -> Float[Tensor, "d_mlp"]:
    """||W_down[:, i]||_2 per neuron i: the length of the vector neuron i writes per unit activation."""
    weight = getattr(down, "weight", None)
    if isinstance(down, nn.Linear):          # weight [d_model, d_mlp]
        return weight.detach().float().norm(dim=0)
    if type(down).__name__ == "Conv1D":      # GPT-2's transposed linear: weight [d_mlp, d_model]
        return weight.detach().float().norm(dim=1)
    raise TypeError(f"down projection {type(down).__name__}: expected nn.Linear or transformers Conv1D")


def _forward_logits(root: nn.Module, tokens: Int[Tensor, "batch pos"]) -> Float[Tensor, "batch pos vocab"]:
    out = root(tokens)
    return out.logits if hasattr(out, "logits") else out


def _autocast(dtype: torch.dtype | None, device: torch.device):
    return torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)


def _device(root: nn.Module) -> torch.device:
    return next(root.parameters()).device


@torch.no_grad()
def contribution_scores(model: Any, batches: Iterable[Int[Tensor, "batch pos"]],
                        autocast_dtype: torch.dtype | None = None) -> tuple[list[Float[Tensor, "d_mlp"]], int]:
    """(per-layer scores s_i = mean_tokens |a_i| * ||W_down[:, i]||, number of tokens scored).

    Every position of every sequence counts (the loss is measured at every position too). The hooks
    sum |a| in float64 per batch and drop the activation; they are removed even if the forward fails.
    """
    root, sites = _root(model), mlp_sites(model)
    sums = [torch.zeros(site.width, dtype=torch.float64) for site in sites]
    n_tokens = 0

    def make_hook(layer: int) -> Callable:
        def hook(module: nn.Module, args: tuple) -> None:
            acts = args[0].detach()                                    # [batch, pos, d_mlp]
            sums[layer] += acts.abs().reshape(-1, acts.shape[-1]).sum(0, dtype=torch.float64).cpu()
        return hook

    handles = [site.down.register_forward_pre_hook(make_hook(site.layer)) for site in sites]
    try:
        device = _device(root)
        for tokens in batches:
            with _autocast(autocast_dtype, device):
                _forward_logits(root, tokens.to(device))
            n_tokens += tokens.numel()
    finally:
        for handle in handles:
            handle.remove()
    if n_tokens == 0:
        raise ValueError("contribution_scores: `batches` was empty; pass at least one [batch, pos] token tensor")
    return [(s / n_tokens).float() * down_column_norms(site.down).cpu() for s, site in zip(sums, sites)], n_tokens


# --------------------------------------------------------------------------------------------------
# Which neurons to remove
# --------------------------------------------------------------------------------------------------

def n_to_remove(width: int, fraction: float) -> int:
    """round(fraction * width) (half to even): the same count for 'lowest' and its random control."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"fraction={fraction!r}: must be in [0, 1], e.g. 0.25 to remove a quarter of the neurons")
    return int(round(fraction * width))


def select_neurons(scores: Float[Tensor, "d_mlp"], fraction: float, selection: str,
                   generator: torch.Generator | None = None) -> Int[Tensor, "k"]:
    """Indices of the neurons to remove from one layer.

    lowest: the k lowest-scoring (ties to the lower index, so the choice is deterministic);
    random: a uniformly random k-subset drawn with `generator` (seed it for reproducibility).
    Both are nested in `fraction`: the 10% set is inside the 25% set (same scores / same generator state).
    """
    k = n_to_remove(scores.numel(), fraction)
    if selection == "lowest":
        return torch.sort(torch.argsort(scores, stable=True)[:k]).values
    if selection == "random":
        return torch.sort(torch.randperm(scores.numel(), generator=generator)[:k]).values
    raise ValueError(f"selection={selection!r}: choose one of {SELECTIONS}")


def _layer_generator(seed: int, layer: int) -> torch.Generator:
    """One stream per (seed, layer): a layer's random set does not depend on which group or fraction asks."""
    return torch.Generator().manual_seed(int(seed) * 100_003 + layer)


@dataclass(frozen=True)
class Condition:
    """One ablation: the baseline, neurons removed from a layer group, or one layer's MLP skipped."""

    kind: str                       # one of KINDS
    group: str | None = None        # neurons: one of GROUPS
    fraction: float | None = None   # neurons: share of each layer's neurons removed
    selection: str | None = None    # neurons: one of SELECTIONS
    seed: int | None = None         # neurons + random
    layer: int | None = None        # skip_mlp

    @property
    def label(self) -> str:
        if self.kind == "neurons":
            seed = f" seed{self.seed}" if self.selection == "random" else ""
            return f"{self.group} {self.selection} {self.fraction:g}{seed}"
        return f"skip_mlp L{self.layer}" if self.kind == "skip_mlp" else "baseline"


def build_conditions(n_layers: int, fractions: Sequence[float] = (0.10, 0.25, 0.50), seeds: Sequence[int] = (0, 1, 2),
                     groups: Sequence[str] = GROUPS, selections: Sequence[str] = SELECTIONS,
                     skip_layers: Sequence[int] | None = None) -> list[Condition]:
    """Baseline first; then group x fraction x (lowest, random x seeds); then one MLP skip per layer
    (skip_layers=None: every layer; [] for none)."""
    for s in selections:
        if s not in SELECTIONS:
            raise ValueError(f"selections: {s!r} is not one of {SELECTIONS}")
    for g in groups:
        if g not in GROUPS:
            raise ValueError(f"groups: {g!r} is not one of {GROUPS}")
    for f in fractions:
        n_to_remove(1, f)  # range check
    conditions = [Condition("baseline")]
    for group in groups:
        for fraction in fractions:
            for selection in selections:
                for seed in (seeds if selection == "random" else (None,)):
                    conditions.append(Condition("neurons", group, float(fraction), selection, seed))
    layers = range(n_layers) if skip_layers is None else skip_layers
    for layer in layers:
        if not 0 <= layer < n_layers:
            raise ValueError(f"skip_layers: layer {layer} is out of range for a {n_layers}-layer model")
        conditions.append(Condition("skip_mlp", layer=int(layer)))
    return conditions


def removals(condition: Condition, scores: Sequence[Float[Tensor, "d_mlp"]],
             groups: Mapping[str, Sequence[int]]) -> dict[int, Int[Tensor, "k"]]:
    """{layer: neuron indices to remove} for a `neurons` condition ({} for the others)."""
    if condition.kind != "neurons":
        return {}
    if condition.group not in groups:
        raise ValueError(f"condition {condition.label!r}: group {condition.group!r} not in {list(groups)}")
    return {layer: select_neurons(scores[layer], condition.fraction, condition.selection,
                                  _layer_generator(condition.seed or 0, layer) if condition.selection == "random"
                                  else None)
            for layer in groups[condition.group]}


# --------------------------------------------------------------------------------------------------
# Ablating at run time
# --------------------------------------------------------------------------------------------------

def _mask_hook(keep: Float[Tensor, "d_mlp"]) -> Callable:
    def hook(module: nn.Module, args: tuple) -> tuple:
        x = args[0]                                                    # [batch, pos, d_mlp]
        return (x * keep.to(device=x.device, dtype=x.dtype), *args[1:])
    return hook


def _zero_hook(module: nn.Module, args: tuple, output: Any) -> Any:
    if isinstance(output, tuple):
        return (torch.zeros_like(output[0]), *output[1:])
    return torch.zeros_like(output)


@contextmanager
def ablated(model: Any, remove: Mapping[int, Int[Tensor, "k"]] | None = None,
            skip: Iterable[int] = ()) -> Iterator[None]:
    """Within the block, `model` runs with the neurons in `remove` ({layer: indices}) masked out and the
    MLPs of the layers in `skip` returning zeros. The weights are never edited; every hook is removed
    on exit (also on error), so the model afterwards computes exactly what it did before."""
    sites = mlp_sites(model)
    handles = []
    try:
        for layer, idx in (remove or {}).items():
            site = sites[layer]
            keep = torch.ones(site.width)
            keep[torch.as_tensor(idx, dtype=torch.long)] = 0.0
            handles.append(site.down.register_forward_pre_hook(_mask_hook(keep)))
        for layer in skip:
            handles.append(sites[layer].mlp.register_forward_hook(_zero_hook))
        yield
    finally:
        for handle in handles:
            handle.remove()


# --------------------------------------------------------------------------------------------------
# Loss and paired statistics
# --------------------------------------------------------------------------------------------------

@torch.no_grad()
def sequence_losses(model: Any, batches: Iterable[Int[Tensor, "batch pos"]],
                    autocast_dtype: torch.dtype | None = None) -> Float[Tensor, "n_seq"]:
    """Mean next-token cross-entropy (nats) of each sequence, float64, in batch order.

    Logits are cast to float32 before the softmax, so bf16 autocast only affects the network itself.
    """
    root = _root(model)
    device = _device(root)
    out = []
    for tokens in batches:
        tokens = tokens.to(device)
        with _autocast(autocast_dtype, device):
            logits = _forward_logits(root, tokens)
        ce = F.cross_entropy(logits[:, :-1].float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1),
                             reduction="none")
        out.append(ce.view(tokens.shape[0], -1).double().mean(1).cpu())
    if not out:
        raise ValueError("sequence_losses: `batches` was empty")
    return torch.cat(out)


def paired_delta(losses: Float[Tensor, "n_seq"], baseline: Float[Tensor, "n_seq"],
                 confidence: float = 0.95) -> tuple[float, float, float]:
    """(mean, ci_low, ci_high) of the per-sequence differences losses - baseline (paired: same sequences).
    With one sequence the CI is (nan, nan)."""
    if losses.shape != baseline.shape:
        raise ValueError(f"paired_delta: {tuple(losses.shape)} vs {tuple(baseline.shape)}: the two loss vectors "
                         f"must come from the same sequences")
    diff = (losses.double() - baseline.double())
    mean = float(diff.mean())
    n = diff.numel()
    if n < 2:
        return mean, math.nan, math.nan
    half = t_quantile((1 + confidence) / 2, n - 1) * float(diff.std(correction=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


# --------------------------------------------------------------------------------------------------
# The pretrained-model experiment
# --------------------------------------------------------------------------------------------------

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
    seqs = token_batches(ids, tokens=n * seq_len, seq_len=seq_len, batch_size=n)[0]
    return seqs[:score_sequences], seqs[score_sequences:]


def _load_sequences(cfg: AblationConfig, tokenizer: Any) -> _Sequences:
    import hashlib

    from interp.probes import load_text

    text, source = load_text(cfg.text)
    ids = tokenizer.encode(text, add_special_tokens=False)
    score, evals = split_sequences(list(getattr(ids, "ids", ids)), cfg.seq_len, cfg.score_sequences,
                                   cfg.eval_sequences)
    return _Sequences(score, evals, source, hashlib.sha256(text.encode("utf-8")).hexdigest()[:16])


def _row(cond: Condition, losses: Tensor, baseline: Tensor, groups: Mapping[str, Sequence[int]],
         remove: Mapping[int, Tensor], confidence: float) -> dict[str, Any]:
    delta, lo, hi = paired_delta(losses, baseline, confidence)
    layers = groups.get(cond.group, []) if cond.kind == "neurons" else ([cond.layer] if cond.kind == "skip_mlp" else [])
    return {"kind": cond.kind, "label": cond.label, "group": cond.group,
            "layers": f"{layers[0]}-{layers[-1]}" if layers else None, "fraction": cond.fraction,
            "selection": cond.selection, "seed": cond.seed, "layer": cond.layer,
            "n_neurons_removed": int(sum(len(i) for i in remove.values())), "loss": float(losses.mean()),
            "delta": delta, "delta_ci_low": lo, "delta_ci_high": hi}


def run_pretrained_ablation(cfg: AblationConfig, loaded: Any = None,
                            log: Callable[[str], None] | None = print) -> pd.DataFrame:
    """Run every condition of `cfg` on a pretrained model; one tidy row per condition (COLUMNS).

    loaded: an already-loaded LoadedModel (tests, notebooks); None loads `cfg.model` offline.
    log: progress lines (condition, loss, elapsed, ETA); None for silence.
    """
    import pandas as pd

    from interp._util.provenance import versions_string

    cfg.validate()
    say = log or (lambda _msg: None)
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    if loaded is None:
        from interp.hf import load_pretrained

        loaded = load_pretrained(cfg.model, attn_implementation=cfg.attn_implementation)
    seqs = _load_sequences(cfg, loaded.tokenizer)
    n_layers = len(mlp_sites(loaded))
    groups = layer_groups(n_layers)   # always the thirds; cfg.groups only picks which are ablated
    conditions = build_conditions(n_layers, cfg.fractions, cfg.seeds, cfg.groups, cfg.selections,
                                  None if cfg.skip_layers is None else list(cfg.skip_layers))
    amp = DTYPES[cfg.dtype]
    eval_batches = list(seqs.eval.split(cfg.batch_size))
    say(f"[ablate] {cfg.model}: {n_layers} layers, thirds "
        + ", ".join(f"{g} {v[0]}-{v[-1]}" for g, v in groups.items())
        + f"; {len(conditions)} conditions x {seqs.eval.numel()} eval tokens + {seqs.score.numel()} scoring tokens")

    start = time.perf_counter()
    scores, score_tokens = contribution_scores(loaded, seqs.score.split(cfg.batch_size), amp)
    fp32_baseline = math.nan
    if amp is not None:   # the documented check: bf16 autocast must not move the baseline by >= 1%
        fp32_baseline = float(sequence_losses(loaded, eval_batches, None).mean())
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
    df["model"] = cfg.model
    df["n_tokens"] = seqs.eval.shape[0] * (seqs.eval.shape[1] - 1)     # predicted tokens per condition
    df["n_sequences"] = seqs.eval.shape[0]
    df["seq_len"] = cfg.seq_len
    df["score_tokens"] = score_tokens
    df["text_source"] = seqs.source
    df["text_sha256"] = seqs.sha256
    df["dtype"] = cfg.dtype
    df["fp32_baseline_loss"] = fp32_baseline if amp is not None else float(baseline.mean())
    df["packages"] = versions_string()
    return df.reindex(columns=list(COLUMNS))
