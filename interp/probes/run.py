"""Running the probes: token batches through a model into an accumulator (accumulate), into a table
(probe_model), or the whole job from a model name and a text (probe).

Data flow: ProbeConfig -> text + tokenizer -> token batches -> model -> backend hooks -> NoveltyAccumulator
-> tidy table (interp.probes.table). Cheap checks run first: a typo or a too-short text fails before any
weights are loaded (the tokenizer is loaded alone first).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor

from interp._util.devices import model_device, model_dtype, resolve_device
from interp._util.errors import InputError
from interp._util.progress import progress as progress_reporter
from interp._util.provenance import hardware_label
from interp.jobs.keys import ref_weights_sha256
from interp.probes.accumulator import NoveltyAccumulator
from interp.probes.backends.choice import make_plan
from interp.probes.config import (
    DEFAULT_SEQ_LEN,
    ProbeConfig,
    exclusion_request,
    sequence_plan,
    too_little_text,
    with_reference,
)
from interp.probes.lens import LogitLens
from interp.probes.massive import _residual_abs_mean
from interp.probes.metrics import COMPUTE_DTYPES
from interp.probes.model_kinds import _model_label, _vocab_size, absent_mlp_layers
from interp.probes.names import DEFAULT_EPS, JACKKNIFE_GROUPS, LENS_METRICS, METRIC_NAMES, POSITIONS
from interp.probes.table import mask_absent_mlps, to_frame
from interp.probes.text import _bos_id, encode_text, load_text, text_sha256, token_batches

if TYPE_CHECKING:
    import pandas as pd

# extra_rows of probe(): (the correlational rows, the model, its token batches, the config, progress=bool) -> the
# table with more rows joined, for the same model, tokens and positions (interp.causal.add_causal_rows: the causal
# rows); progress: whether probe() was asked to report on stderr
ExtraRows = Callable[..., "pd.DataFrame"]


def accumulate(model: Any, batches: Iterable[Tensor | dict], config: ProbeConfig | None = None, *,
               jackknife_groups: int = JACKKNIFE_GROUPS, progress: Any = None, **options: Any) -> NoveltyAccumulator:
    """Stream `batches` ([batch, pos] token tensors, or dicts with input_ids and attention_mask) through
    `model` and return the filled accumulator (merge it with others for sharded analyses).

    config: the ProbeConfig whose measuring fields it reads (backend, metrics, positions, dtype, eps, reference,
        exclude_massive_dims; the text, token and loading fields are the callers'); `options`, by ProbeConfig's
        field names, replace those of `config` (or of the defaults): accumulate(model, toks, backend="hookpoints").
    `acc.meta` records the backend and where each site came from. The model is run under no_grad;
    padding (attention_mask == 0) is masked out of the statistics.
    reference: "raw" (default) or "normed", which adds rho_mlp_normed (cosine with the MLP's normalised input).
    exclude_massive_dims: None (default); k, to zero the k dimensions of largest mean |resid_pre| in every
        operand (measured on a first pass over the same batches, so it costs a second forward); or a list
        of dimensions. acc.meta then holds excluded_dims (and the measured dims' mean |resid_pre|).
    jackknife_groups: groups of whole sequences behind the population metrics' CI (mlp_erank,
        mlp_participation, cka_resid; interp.probes.population); their memory grows with it (no ProbeConfig field).
    progress: an interp._util.progress reporter, told after each batch of the probing pass (batches done,
        positions/s); None: silent.
    """
    cfg = ProbeConfig.build(config, **options)
    backend, metrics, positions, dtype, eps = cfg.backend, cfg.metrics, cfg.positions, cfg.dtype, cfg.eps
    reference, exclude_massive_dims = cfg.reference, cfg.exclude_massive_dims
    if dtype not in COMPUTE_DTYPES:
        raise ValueError(f"dtype={dtype!r}: choose one of {tuple(COMPUTE_DTYPES)}")
    if positions not in POSITIONS:
        raise ValueError(f"positions={positions!r}: choose one of {POSITIONS}")
    metrics = with_reference(metrics, reference)
    k, given_dims = exclusion_request(exclude_massive_dims)
    plan = make_plan(model, backend, mlp_in="rho_mlp_normed" in metrics)
    device = model_device(model)
    meta: dict[str, Any] = {"backend": backend, "mlp_out_site": plan.mlp_out_site, "hook_sites": plan.hook_sites,
                            "dtype": dtype, "positions": positions, "eps": eps, "device": str(device),
                            "hardware": hardware_label(device, dtype=model_dtype(model))}
    if reference != "raw":
        meta["reference_mode"] = reference
    dims = given_dims
    if k:
        batches = list(batches)  # read twice: the first pass measures, the second probes
        scale = _residual_abs_mean(plan, batches, positions).mean(0)  # [d_model]
        if k >= scale.numel():
            raise ValueError(f"exclude_massive_dims={k} must be below d_model={scale.numel()}")
        top = scale.topk(k)
        dims = tuple(sorted(top.indices.tolist()))
        meta["excluded_dims_mean_abs"] = str([round(v, 4) for v in scale[list(dims)].tolist()])
        meta["median_dim_mean_abs"] = round(scale.median().item(), 6)
    if exclude_massive_dims is not None:
        meta["exclude_massive_dims"] = k if k else "given"
        meta["excluded_dims"] = str(list(dims))
    lens = LogitLens.for_model(model, COMPUTE_DTYPES[dtype]) if set(LENS_METRICS) & set(metrics) else None
    acc = NoveltyAccumulator(plan.n_layers, metrics, COMPUTE_DTYPES[dtype], eps, derive_attn_out=plan.derive_attn_out,
                             exclude_dims=dims, lens=lens, jackknife_groups=jackknife_groups,
                             derive_resid_mid=plan.derive_resid_mid)
    acc.meta = meta
    plan.run(batches if progress is None else _reporting(batches, progress), acc, positions)
    return acc


def _reporting(batches: Iterable[Tensor | dict], progress: Any) -> Iterator[Tensor | dict]:
    """`batches`, telling `progress` of each one done (when the backend asks for the next) and the pace so far."""
    positions, start = 0, time.perf_counter()
    for i, batch in enumerate(batches, 1):
        yield batch
        if isinstance(batch, dict):  # padding (attention_mask 0) is no position
            mask = batch.get("attention_mask")
            positions += int(mask.sum()) if mask is not None else batch["input_ids"].numel()
        else:
            positions += batch.numel()
        progress.update(i, f"{positions / max(time.perf_counter() - start, 1e-9):,.0f} positions/s")


def probe_model(model: Any, batches: Iterable[Tensor | dict], backend: str = "torch",
                metrics: Sequence[str] = METRIC_NAMES, positions: str = "skip_first", dtype: str = "float32",
                eps: float = DEFAULT_EPS, reference: str = "raw",
                exclude_massive_dims: int | Sequence[int] | None = None, jackknife_groups: int = JACKKNIFE_GROUPS,
                **columns: Any) -> pd.DataFrame:
    """Lower-level entry for notebooks and batch analysis: an already-loaded model and token batches in,
    the tidy table out (`columns` are added to every row, e.g. model="...", checkpoint="...").
    reference / exclude_massive_dims / jackknife_groups: see accumulate()."""
    acc = accumulate(model, batches, backend=backend, metrics=metrics, positions=positions, dtype=dtype, eps=eps,
                     reference=reference, exclude_massive_dims=exclude_massive_dims, jackknife_groups=jackknife_groups)
    return to_frame(acc, **{"model": _model_label(model), **columns})


def _check_vocab(ids: list[int], model: Any, tokenizer: Any) -> None:
    """InputError when the tokenizer gives ids the model has no embedding for (a tokenizer of another
    model; the forward would fail with a bare IndexError)."""
    vocab, top = _vocab_size(model), max(ids, default=-1)
    if vocab is not None and top >= vocab:
        name = getattr(tokenizer, "name", None) or type(tokenizer).__name__
        raise InputError(f"the tokenizer {name!r} gives token id {top} but the model's embedding has {vocab} "
                         "rows: it is not this model's tokenizer; drop --tokenizer or pass the one the model was "
                         "trained with", field="tokenizer")


def _refuse_nonfinite(df: pd.DataFrame, label: str) -> None:
    """InputError when a metric has no finite value at some layer (every token NaN or inf): the model computes
    nothing finite there, which a table of NaN means would hide behind status ok. Names the first such layer."""
    if "n_nonfinite" not in df.columns:
        return
    dead = df[df["mean"].isna() & (df["n_nonfinite"] > 0)]
    if dead.empty:
        return
    first = dead.sort_values("layer").iloc[0]
    raise InputError(f"model {label}: every value of {first['metric']} at layer {int(first['layer'])} is NaN or "
                     f"inf ({int(first['n_nonfinite'])} tokens); its activations are not finite there",
                     fix="the weights (or the dtype they run in) do not give finite numbers: check the checkpoint "
                         "with torch.isfinite, or load it in float32")


def probe(model: Any = "smollm2-135m", text: str | Path | None = None, *, config: ProbeConfig | None = None,
          trust_remote_code: bool = False, revision: str | None = None, progress: bool = False,
          extra_rows: ExtraRows | None = None, **options: Any) -> pd.DataFrame:
    """Per-layer novelty metrics of one model over held-out text, as a tidy long table (one row per
    layer and metric; columns: interp.probes.table.to_frame).

        probe("smollm2-135m", tokens=2048, seq_len=512)
        probe("runs/cosine", config=ProbeConfig(tokens=2048, seq_len=256, reference="normed"))

    model: a registry name / HF dir / .gguf / hub id, one of our checkpoint directories (tokenized with
        the checkpoint's own tokenizer) -- all through interp.hf.resolve_model --, a ModelRef it returned (a hub
        ref whose commit is set downloads that commit: interp batch pins what it planned), or an already-loaded
        object (LoadedModel, HF model, TaperedLM, TransformerBridge) with tokenizer=.
    text and **options: the fields of ProbeConfig (defaults there: tokens=16384, seq_len=512,
        batch_size=4, backend="torch", positions="skip_first", prepend_bos=False, dtype="float32",
        metrics=METRIC_NAMES, reference="raw", exclude_massive_dims=None, eps=1e-8, tokenizer=None),
        replacing those of `config` when both are given. tokenizer may also be a tokenizer object.
    dtype: precision of the metric math ("float32" or "float64"); the model runs in its own dtype.
    reference: "raw" (default) | "normed": also rho_mlp_normed, the cosine with the MLP's normalised input.
    exclude_massive_dims: None | k (measure the top-k mean-|resid_pre| dims on a first pass; a second
        forward) | a list of dims: zeroed in every operand; rows get columns excluded_dims etc.
    trust_remote_code: let a Hugging Face directory whose config.json names its own Python code (auto_map)
        run it; such a directory is refused otherwise (a loader option, not a probe setting: it is no
        ProbeConfig field and changes no number).
    revision: a hub model's branch, tag or commit (or write "MODEL@REV"); its rows get `revision` and the
        resolved `commit` beside weights_sha256.
    progress: report the probing pass on stderr (a bar on a terminal, else a line every tenth of the batches
        or 30 s, with positions/s and the ETA; interp._util.progress); `interp probe` turns it on.
    extra_rows: rows joined to the table, computed on the same model, tokens and positions: causal=True needs
        interp.causal's (interp.causal.probe passes them). Probes cannot import ablations (ablations imports probes),
        so the join is made one layer up; causal=True without extra_rows is refused before any load.
    The table's attrs["timing"] holds load and probe seconds.
    """
    from interp import data, hf

    tokenizer = options.get("tokenizer")
    if tokenizer is not None and not isinstance(tokenizer, str):
        del options["tokenizer"]  # an object is used as given; ProbeConfig holds names only
    else:
        tokenizer = None
    if text is not None:
        options["text"] = text
    cfg = ProbeConfig.build(config, **options).validate()  # cheap checks before touching any file
    if cfg.causal and extra_rows is None:
        raise InputError("the causal rows are joined by interp.causal (above probes and ablations), not by "
                         "interp.probes.probe", field="causal=True",
                         fix="call interp.causal.probe with the same arguments, or run `interp probe --causal`")
    device = resolve_device(cfg.device)
    text_str, text_source = load_text(cfg.text)
    # the rows' `tokenizer`: "" = the model's own; else the name given, or an object's class
    tokenizer_label = cfg.tokenizer or ("" if tokenizer is None else f"<{type(tokenizer).__name__}>")
    if tokenizer is None and cfg.tokenizer is not None:
        tokenizer = data.get_tokenizer(cfg.tokenizer)

    def check_ids(tok: Any) -> list[int]:
        ids = encode_text(tok, text_str)
        n_seqs, per_seq = sequence_plan(cfg.tokens, cfg.seq_len, cfg.batch_size, cfg.prepend_bos)
        if len(ids) < n_seqs * per_seq:
            raise ValueError(too_little_text(len(ids), n_seqs * per_seq, cfg.tokens, cfg.seq_len, cfg.prepend_bos))
        return ids

    ids: list[int] | None = None
    checkpoint, ref = "", None
    start = time.perf_counter()
    seq_len_given = cfg.seq_len is not None
    if isinstance(model, str | Path | hf.ModelRef):
        ref = (model if isinstance(model, hf.ModelRef)
               else hf.resolve_model(model, trust_remote_code=trust_remote_code, revision=revision)).fetched()
        checkpoint = ref.checkpoint
        cfg = cfg.for_context(ref.context_length())   # an unset seq_len fits the model, before any weights load
        tok = tokenizer if tokenizer is not None else ref.load_tokenizer()
        ids = check_ids(tok)
        model_obj = ref.load_placed(device, cfg.model_dtype, cfg.device_map)
        label = ref.model_column
        context = hf.context_length(model_obj)   # a .gguf or registry model tells its context only once loaded
        if not seq_len_given and context and cfg.seq_len > context:
            cfg = dataclasses.replace(cfg, seq_len=None).for_context(context)
            ids = check_ids(tok)
    else:
        cfg = cfg.for_context(hf.context_length(model))
        model_obj = model
        tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
        if tok is None:
            raise ValueError(f"probe(model=<{type(model).__name__}>): pass tokenizer= for an object without one")
        label = _model_label(model)
    if ids is None:
        ids = check_ids(tok)
    load_s = time.perf_counter() - start
    if not seq_len_given and cfg.seq_len < DEFAULT_SEQ_LEN:
        print(f"[probe] seq_len {cfg.seq_len}: the model's context (the default {DEFAULT_SEQ_LEN} does not fit)",
              file=sys.stderr)
    hf.check_fits(model_obj, cfg.seq_len)   # beyond its context a model fails in its embedding, or runs blind
    bos = _bos_id(tok, model_obj) if cfg.prepend_bos else None
    _check_vocab(ids if bos is None else [*ids, bos], model_obj, tok)
    batches = token_batches(ids, cfg.tokens, cfg.seq_len, cfg.batch_size, bos)
    if cfg.backend == "transformer_lens" and isinstance(model_obj, hf.LoadedModel) and model_obj is not model:
        if cfg.causal:   # the bridge wraps the modules in place: hooks on its components would never fire
            raise InputError("the causal rows hook a Hugging Face model's own modules, which a TransformerBridge "
                             "wraps in place (their hooks would never fire)", field="backend=transformer_lens",
                             fix="probe with --backend torch or nnsight for --causal: the probe rows are the same")
        model_obj = hf.to_transformer_bridge(model_obj, inplace=True)  # we own it: no copy needed
    start = time.perf_counter()
    phase = " (phase 1 of 2; the causal rows next)" if extra_rows is not None else ""
    report = progress_reporter(len(batches), f"probe {label}{phase}", "batches", enabled=progress)
    acc = accumulate(model_obj, batches, cfg, progress=report)
    report.close()
    probe_s = time.perf_counter() - start
    # the weights' sha256 (a model given by name or path), once everything has been checked and measured: a bad
    # input writes nothing, not even the hash cache
    weights = ref_weights_sha256(ref) if ref is not None else ""
    load_columns = dict(ref.table_columns()) if ref is not None else {}   # a hub model's revision and commit
    if cfg.model_dtype != "float32" or cfg.device_map is not None:   # how it was loaded, where not the default
        loaded_as = str(model_dtype(model_obj)).removeprefix("torch.")   # "auto": what it resolved to
        load_columns.update(model_dtype=loaded_as + (" (auto)" if cfg.model_dtype == "auto" else ""),
                            device_map=str(cfg.device_map or ""))
    df = to_frame(acc, model=label, checkpoint=checkpoint, seq_len=cfg.seq_len, prepend_bos=cfg.prepend_bos,
                  text_source=text_source, text_sha256=text_sha256(text_str), weights_sha256=weights,
                  **load_columns, tokenizer=tokenizer_label)
    _refuse_nonfinite(df, label)
    df = mask_absent_mlps(df, absent_mlp_layers(model_obj))
    n_positions = sum(b.numel() for b in batches)
    timing = {"load_s": load_s, "probe_s": probe_s, "positions": n_positions,
              "positions_per_s": n_positions / probe_s if probe_s else float("nan")}
    # how the model was loaded, for a summary's header (the columns hold it only where not the default)
    load = {"revision": getattr(ref, "revision", None) or "", "commit": getattr(ref, "commit", None) or "",
            "model_dtype": str(model_dtype(model_obj)).removeprefix("torch.")}
    df.attrs.update(timing=timing, load=load)
    if extra_rows is not None:  # the same model, tokens and positions: rows that join the correlational ones
        start = time.perf_counter()
        df = extra_rows(df, model_obj, batches, cfg, progress=progress)
        timing["extra_s"] = time.perf_counter() - start
        df.attrs.update(timing=timing, load=load)
    return df
