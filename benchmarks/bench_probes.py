"""Streaming probes vs caching on SmolLM2: wall time, tokens/s and peak memory over the same held-out tokens.

  (a) interp.probes streaming probe (torch backend, the default metric set) vs a bare forward pass, and
      beside them, in the same interleaved loop, each opt-in measure alone: the per-token geometry
      ratios (added to the default set), the logit lens, the MLP spectrum (erank + participation) and
      CKA. Wall time: in one process, batch by batch, the variants interleaved (ABBA order) on the same
      batch; the issues want default probe / forward <= 1.05 and each opt-in measure's cost as a ratio
      to the forward. The opt-in variants feed ONE accumulator batch after batch, as a whole run does
      (the population metrics' covariances are allocated once); their one-time summary (eigenvalues,
      jackknife) is timed after the loop. Also shown: the decoder body alone (`model.base_model`, no
      unembedding), because the probe stops after the last layer and so skips the unembedding.
      Peak memory: from the fresh-process runs of (b); the issue wants probe / forward <= 1.10.
  (b) side by side: bare forward, the streaming probe, TransformerLens run_with_cache (every hook,
      and names_filter = the 5 residual/MLP hooks per layer) and an nnsight trace with .save() of the
      same 5 sites, at 2,048 and 16,384 tokens: tokens/s and peak RSS. The caching methods KEEP what
      they cache batch after batch (a researcher holding the cache), unless keeping everything would
      exceed the memory budget; then only the current batch is kept and the row says what keeping
      all would have needed.

Peak memory method: each (method, size) runs in a fresh subprocess (`--worker`). After the model is
loaded (and the bridge / nnsight wrapper built) and one tiny warm-up call, the worker records VmRSS
as its baseline and resets the kernel's high-water mark (/proc/self/clear_refs = 5), so the
reported peak is VmHWM at the end: the largest resident set while measuring. "Peak over baseline"
is that minus the baseline, i.e. the memory the method itself needed (activations, caches, the
allocator's retained blocks). tracemalloc cannot see tensor storage; psutil is not needed.
All methods see the same consecutive held-out wiki sequences (seq_len 512, batch 2, no BOS).
`--quick` builds a 2-layer random Llama (SmolLM2's tokenizer) in a temporary folder and uses 64 tokens.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.common import (
    GIB,
    MIB,
    Spread,
    begin,
    emit_result,
    finish,
    interleave_batches,
    mem_available,
    paired_ratios,
    parse_args,
    reset_peak_rss,
    rss,
    run_worker,
    set_threads,
)

NAME = "bench_probes"
TITLE = "Streaming probes vs caching on a pretrained model (bench_probes)"
METHODS = {
    "forward": "bare forward, model(ids, use_cache=False); logits dropped",
    "probe": "interp.probes.accumulate, torch backend, the default metrics (streaming)",
    "tl_resid": "TransformerBridge.run_with_cache, names_filter = 5 hooks x layers; cache kept",
    "tl_all": "TransformerBridge.run_with_cache, every hook; cache kept",
    "nnsight": "nnsight trace, .save() of the same 5 sites x layers; kept",
}
METRIC_SETS = {"forward": "-", "body": "-", "probe": "the default six", "+geometry": "the default six + norm_ratio_attn, "
               "norm_ratio_mlp_mid, resid_growth, angular_distance",
               "loss": "causal: the clean per-sequence loss pass", "skip_block": "causal: one layer's block removed",
               "skip_mlp": "causal: one layer's MLP skipped", "skip_attn": "causal: one layer's attention skipped"}
SITE_HOOKS = ("hook_resid_pre", "hook_attn_out", "hook_resid_mid", "hook_mlp_out", "hook_resid_post")
SIZES = {
    "real": dict(tokens=(2048, 16384), wall_tokens=8192, seq_len=512, batch_size=2, timeout=1800),
    "quick": dict(tokens=(64,), wall_tokens=64, seq_len=32, batch_size=2, timeout=300),
}
DEFAULT_MEM_BUDGET_GIB = 12.0  # and never more than half of MemAvailable at start
GEOMETRY = ("norm_ratio_attn", "norm_ratio_mlp_mid", "resid_growth", "angular_distance")
# causal rows (probe --causal): each is n_layers more passes per batch, one per ablated layer; benched as the
# per-pass cost (the ablated layer rotates with the batch) beside the clean loss pass they are compared with
CAUSAL = {"loss": None, "skip_block": "skip_block", "skip_mlp": "skip_mlp", "skip_attn": "skip_attn"}
OPT_IN = {  # variant -> the metrics its accumulator tracks (names: interp.probes.names)
    "+geometry": ("rho_mlp", "rho_mlp_mid", "rho_block", "rho_attn", "norm_ratio", "block_influence", *GEOMETRY),
    "logit lens": ("logit_lens_kl", "logit_lens_top1"),
    "erank": ("mlp_erank", "mlp_participation"),
    "CKA": ("cka_resid",),
}


# --------------------------------------------------------------------------------- model and data

def build_tiny_llama(folder: Path) -> Path:
    """A 2-layer random Llama with SmolLM2's tokenizer saved as an HF folder (for --quick and tests)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from interp.hf import load_tokenizer

    tok = load_tokenizer("smollm2-135m")
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def heldout_batches(tokenizer: Any, tokens: int, seq_len: int, batch_size: int) -> list[torch.Tensor]:
    """The first `tokens` positions of the held-out wiki text as [batch, seq_len] id tensors (no BOS)."""
    from interp.probes import load_text, token_batches

    text, _ = load_text(None)
    return token_batches(tokenizer.encode(text, add_special_tokens=False), tokens, seq_len, batch_size)


def tensor_bytes(obj: Any) -> int:
    """Bytes of the distinct tensor storages inside obj (dicts, lists, caches); shared storage counted once."""
    seen: dict[int, int] = {}

    def walk(x: Any) -> None:
        if isinstance(x, torch.Tensor):
            storage = x.untyped_storage()
            seen[storage.data_ptr()] = storage.nbytes()
        elif isinstance(x, dict) or hasattr(x, "items"):
            for v in x.values() if isinstance(x, dict) else dict(x.items()).values():
                walk(v)
        elif isinstance(x, list | tuple):
            for v in x:
                walk(v)

    walk(obj)
    return sum(seen.values())


def _first(x: Any) -> torch.Tensor:
    """A module output may be a tensor or a tuple whose first element is the hidden state."""
    return x[0] if isinstance(x, tuple | list) else x


def _envoy(root: Any, dotted: str) -> Any:
    """root.a.b[3].c for dotted = "a.b.3.c" (nnsight envoys mirror the module tree)."""
    for part in dotted.split("."):
        root = root[int(part)] if part.isdigit() else getattr(root, part)
    return root


# ---------------------------------------------------------------------------------------- methods

def make_step(method: str, loaded: Any) -> Callable[[torch.Tensor], Any]:
    """batch -> what the method leaves the researcher holding (None for forward/probe)."""
    from interp import hf as pretrained
    from interp import probes

    n_layers = loaded.n_layers()
    if method == "forward":
        def forward(ids: torch.Tensor) -> None:
            loaded.model(ids, use_cache=False)
        return forward
    if method == "probe":
        def probe(ids: torch.Tensor) -> None:
            probes.accumulate(loaded, [ids], backend="torch")
        return probe
    if method in ("tl_all", "tl_resid"):
        bridge = pretrained.to_transformer_bridge(loaded, inplace=True)
        names = [f"blocks.{l}.{h}" for l in range(n_layers) for h in SITE_HOOKS] if method == "tl_resid" else None
        return lambda ids: bridge.run_with_cache(ids, names_filter=names)[1]
    if method == "nnsight":
        import nnsight

        lm = pretrained.to_nnsight(loaded)
        sm = loaded.sites

        def step(ids: torch.Tensor) -> list[list[torch.Tensor]]:
            saved: list[list[torch.Tensor]] = []  # created outside the trace (nnsight 0.8 rule)
            with lm.trace(ids):
                for l in range(n_layers):
                    layer = _envoy(lm, f"{sm.layers}.{l}")
                    acts = [layer.input,                                            # resid_pre
                            _first(_envoy(layer, sm.attn_out_module).output),  # attn_out
                            _envoy(layer, sm.mlp_input_norm).input,          # resid_mid
                            _first(_envoy(layer, sm.mlp_out_module).output),   # mlp_out
                            _first(layer.output)]                                   # resid_post
                    saved.append([nnsight.save(a) for a in acts])
            return saved
        return step
    raise ValueError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")


def worker(args) -> dict:
    """One (method, tokens) measurement in this fresh process; see the module docstring."""
    from interp.hf import load_pretrained

    set_threads(args.threads)
    start = time.perf_counter()
    loaded = load_pretrained(args.model)
    batches = heldout_batches(loaded.tokenizer, args.tokens, args.seq_len, args.batch_size)
    step = make_step(args.worker, loaded)
    load_s = time.perf_counter() - start
    with torch.no_grad():
        step(batches[0][:1, :16])  # warm-up: lazy init, first-call dispatch (kept out of the peak)
        gc.collect()
        base = rss()["rss"]
        reset_ok = reset_peak_rss()
        budget = args.mem_budget_gib * GIB
        kept: list[Any] = []
        kept_bytes = per_batch = 0
        keep = True
        start = time.perf_counter()
        for i, batch in enumerate(batches):
            out = step(batch)
            if out is None:
                continue
            per_batch = tensor_bytes(out)
            if i == 0:
                keep = per_batch * len(batches) <= budget
            if keep:
                kept.append(out)
                kept_bytes += per_batch
            del out
        seconds = time.perf_counter() - start
    memory = rss()
    n_positions = sum(b.numel() for b in batches)
    return {"method": args.worker, "tokens": n_positions, "seconds": seconds, "tokens_per_s": n_positions / seconds,
            "baseline_rss": base, "peak_rss": memory["peak"], "peak_over_baseline": memory["peak"] - base,
            "peak_reset": reset_ok, "kept_bytes": kept_bytes, "kept_batches": len(kept), "n_batches": len(batches),
            "per_batch_bytes": per_batch, "projected_bytes": per_batch * len(batches), "load_s": load_s,
            "mem_available_at_start": args.mem_available}


# ----------------------------------------------------------------------------------- measurements

def streaming(loaded: Any, metrics: Sequence[str]) -> tuple[Any, Callable[[torch.Tensor], None]]:
    """(accumulator, batch -> None): ONE accumulator fed batch after batch through the torch backend."""
    from interp import probes

    plan = probes.make_plan(loaded, "torch")
    lens = probes.LogitLens.for_model(loaded) if set(probes.LENS_METRICS) & set(metrics) else None
    acc = probes.NoveltyAccumulator(plan.n_layers, metrics, derive_attn_out=plan.derive_attn_out, lens=lens)
    return acc, lambda ids: plan.run([ids], acc, "skip_first")


def ablated_pass(model: Any, kind: str | None) -> Callable[[torch.Tensor], None]:
    """batch -> None: the per-sequence loss pass of interp.ablations.layers.layer_effects with one layer ablated
    (kind None: the clean pass); the layer moves on by one each call, so the batches cover the layers alike."""
    from interp.ablations.layers import layer_ablated
    from interp.ablations.loss import sequence_losses
    from interp.hf import layer_modules

    n_layers, calls = len(layer_modules(model)), [0]

    def run(ids: torch.Tensor) -> None:
        layer = calls[0] % n_layers
        calls[0] += 1
        with layer_ablated(model, kind, layer) if kind else contextlib.nullcontext():
            sequence_losses(model, [ids])
    return run


def interleaved_wall(model_name: str, size: dict, threads: int) -> tuple[dict[str, list[float]], dict[str, dict]]:
    """Per-batch seconds of forward / body-only forward / probe / each opt-in measure, interleaved on each
    batch (ABBA); and per opt-in accumulator its one-time summary seconds and its state's bytes."""
    from interp import probes
    from interp.hf import load_pretrained

    set_threads(threads)
    loaded = load_pretrained(model_name)
    batches = heldout_batches(loaded.tokenizer, size["wall_tokens"], size["seq_len"], size["batch_size"])
    body = loaded.model.base_model
    variants = {"forward": lambda ids: loaded.model(ids, use_cache=False),
                "body": lambda ids: body(ids, use_cache=False),
                "probe": lambda ids: probes.accumulate(loaded, [ids], backend="torch")}
    accumulators = {}
    for name in OPT_IN:
        accumulators[name], variants[name] = streaming(loaded, OPT_IN[name])
    for name, kind in CAUSAL.items():
        variants[name] = ablated_pass(loaded.model, kind)
    with torch.no_grad():
        times = interleave_batches(variants, batches)
    extra = {}
    for name, acc in accumulators.items():
        start = time.perf_counter()
        acc.summary()
        extra[name] = {"summary_s": time.perf_counter() - start, "state_bytes": tensor_bytes(acc.state_dict())}
    return times, extra


def _mib(x: float) -> str:
    return f"{x / MIB:,.0f}"


def method_row(res: dict, tokens: int) -> dict:
    if "error" in res:
        return {"method": res["method"], "tokens": tokens, "tokens/s": "failed", "note": res["error"]}
    note = ""
    if res["kept_batches"] < res["n_batches"] and res["projected_bytes"]:
        note = (f"keeping all {res['n_batches']} batches would need {res['projected_bytes'] / GIB:,.1f} GiB "
                f"(> budget): only the current batch was kept")
    elif res["kept_bytes"]:
        note = f"all {res['kept_batches']} batches kept"
    if not res["peak_reset"]:
        note += "; peak includes model load (clear_refs unavailable)"
    return {"method": res["method"], "tokens": res["tokens"], "tokens/s": res["tokens_per_s"],
            "peak RSS (MiB)": _mib(res["peak_rss"]), "peak over baseline (MiB)": _mib(res["peak_over_baseline"]),
            "cache held (MiB)": _mib(res["kept_bytes"]), "note": note}


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str | dict:
    def extra(p):
        p.add_argument("--model", default=None, help="registry name / HF dir / .gguf (default smollm2-135m; "
                                                     "--quick: a tiny random Llama)")
        p.add_argument("--mem-budget-gib", type=float, default=None,
                       help=f"most memory a cache may hold (default: min({DEFAULT_MEM_BUDGET_GIB:g}, "
                            "half of MemAvailable))")
        p.add_argument("--sizes", default=None, help="comma-separated token counts for (b) (default 2048,16384)")
        p.add_argument("--wall-tokens", type=int, default=None, help="tokens for the (a) wall-time run (default 8192)")
        p.add_argument("--worker", choices=sorted(METHODS), help="internal: run one measurement in this process")
        p.add_argument("--tokens", type=int, help="internal (worker)")
        p.add_argument("--seq-len", type=int, help="internal (worker)")
        p.add_argument("--batch-size", type=int, help="internal (worker)")
        p.add_argument("--mem-available", type=int, default=None, help="internal (worker)")

    args = parse_args(NAME, __doc__.splitlines()[0], argv, extra)
    if args.worker:
        result = worker(args)
        emit_result(result)
        return result
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    if args.sizes:
        size["tokens"] = tuple(int(t) for t in args.sizes.split(","))
    if args.wall_tokens:
        size["wall_tokens"] = args.wall_tokens
    available = mem_available()
    budget = args.mem_budget_gib or min(DEFAULT_MEM_BUDGET_GIB, (available or 0) / 2 / GIB or DEFAULT_MEM_BUDGET_GIB)
    with tempfile.TemporaryDirectory(prefix="bench_probes_") as tmp:
        model = args.model or (str(build_tiny_llama(Path(tmp) / "tiny-llama")) if args.quick else "smollm2-135m")
        results: dict[tuple[str, int], dict] = {}
        for tokens in size["tokens"]:
            for method in METHODS:
                print(f"[{NAME}] worker {method} at {tokens:,} tokens", file=sys.stderr, flush=True)
                res = run_worker(Path(__file__), ["--worker", method, "--model", model, "--tokens", str(tokens),
                                                  "--seq-len", str(size["seq_len"]), "--batch-size",
                                                  str(size["batch_size"]), "--threads", str(args.threads),
                                                  "--mem-budget-gib", str(budget), "--mem-available",
                                                  str(available or 0)], timeout=size["timeout"])
                results[(method, tokens)] = {"method": method, **res}
        print(f"[{NAME}] interleaved wall time at {size['wall_tokens']:,} tokens", file=sys.stderr, flush=True)
        wall, extra = interleaved_wall(model, size, args.threads)

    label = "SmolLM2-135M (fp32, eager attention)" if model == "smollm2-135m" else model
    report.note(f"Model: {label}; held-out wiki text, seq_len {size['seq_len']}, batch {size['batch_size']}, "
                f"{args.threads} threads; cache budget {budget:,.1f} GiB (MemAvailable at start "
                f"{(available or 0) / GIB:,.1f} GiB).")
    report.section("(a) Streaming probe vs bare forward, and each opt-in measure beside them")
    probe_ratio = Spread.of(paired_ratios(wall["probe"], wall["forward"]))
    body_ratio = Spread.of(paired_ratios(wall["probe"], wall["body"]))
    n_tok = size["wall_tokens"]
    report.table([{"variant": name, "metrics": METRIC_SETS.get(name) or ", ".join(OPT_IN.get(name, ())),
                   "seconds per batch": Spread.of(ts).fmt(".3f"), "tokens/s": n_tok / sum(ts),
                   "/ forward": Spread.of(paired_ratios(ts, wall["forward"])).fmt(),
                   "one-time summary (s)": extra.get(name, {}).get("summary_s", ""),
                   "state (MiB)": _mib(extra[name]["state_bytes"]) if name in extra else ""}
                  for name, ts in wall.items()],
                 ["variant", "metrics", "seconds per batch", "tokens/s", "/ forward", "one-time summary (s)",
                  "state (MiB)"])
    big = max(size["tokens"])
    fwd, prb = results[("forward", big)], results[("probe", big)]
    mem_rows, mem_ok, mem_text = [], None, "failed"
    if "error" not in fwd and "error" not in prb:
        total = prb["peak_rss"] / fwd["peak_rss"]
        delta = prb["peak_over_baseline"] / max(fwd["peak_over_baseline"], 1)
        mem_ok, mem_text = total <= 1.10, f"{total:.3f} (over baseline: {delta:.3f})"
    report.note(f"Wall time: {len(wall['probe'])} batches of {size['batch_size']} x {size['seq_len']} "
                f"({n_tok:,} tokens), each batch run by every variant back to back, order rotating (ABBA). "
                f"Default probe / forward per batch: **{probe_ratio.fmt()}**; probe / body-only forward (no "
                f"unembedding): {body_ratio.fmt()}. Peak RSS probe / forward at {big:,} tokens (fresh processes, "
                f"table (b)): **{mem_text}**. The opt-in rows hold one accumulator over all batches; its state "
                f"(what survives a batch, independent of the number of tokens: histograms, and for the population "
                f"metrics 8 jackknife groups x layers x d_model^2 float64 covariances) is in the last column, and "
                f"its one-time summary (eigenvalues per layer and group, CKA norms) runs once per table. "
                f"The causal rows are the per-sequence loss passes of `probe --causal` (interp.ablations.layers): "
                f"the clean pass, and one pass with the named part of one layer ablated (the layer rotating from "
                f"batch to batch, so every layer is timed alike). A causal table runs the clean pass once and "
                f"each of its four kinds (skip_block, skip_mlp, mean_mlp, skip_attn) once per layer: 1 + 4 x "
                f"n_layers passes per batch, on top of the probe.")
    report.check("default probe / forward wall time", probe_ratio.fmt(), "<= 1.05", probe_ratio.median <= 1.05)
    report.check("probe / forward peak memory", mem_text, "<= 1.10", mem_ok)
    report.section("(b) Probe vs TransformerLens run_with_cache vs nnsight .save()")
    report.table([method_row(results[(m, t)], t) for t in size["tokens"] for m in METHODS],
                 ["method", "tokens", "tokens/s", "peak RSS (MiB)", "peak over baseline (MiB)", "cache held (MiB)",
                  "note"])
    report.note("Methods: " + "; ".join(f"`{m}` = {d}" for m, d in METHODS.items()) + ". One fresh process per "
                "row (not interleaved: rows are sequential, so tokens/s between rows carries the load's noise; "
                "the load average is in the header). Tokens/s excludes model loading and bridge/wrapper "
                "construction.")
    return finish(report, args.write)


if __name__ == "__main__":
    main()
