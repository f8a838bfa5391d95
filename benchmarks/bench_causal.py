"""`interp probe --causal` at its defaults against a probe alone, before and after #48, side by side in one process.

Before: every causal row a full forward over all the probe's tokens (1 + 4 x n_layers passes over 16,384 tokens for
SmolLM2's 30 layers). After: each pass resumed at the layer it ablates (interp.ablations.layers, resume=True) over the
causal rows' own budget (ProbeConfig.causal_tokens, 4,096 tokens).

  (a) per pass, on the same batch (4 x 512 tokens of the held-out wiki split), interleaved in ABBA order: a bare
      forward, a full forward with one layer's MLP skipped (what "before" runs for every row) and passes resumed
      at layers 0, L/3, 2L/3 and L-1 (what "after" runs), each as a multiple of the bare forward;
  (b) end to end, at the defaults: the probe alone (interp.probes.probe) and the probe with the causal rows
      (interp.causal.probe(causal=True)), both measured; "before" predicted from (a) as (1 + 4 L) full passes per
      batch x its 8 batches + the per-sequence profile pass over 16,384 tokens (running it takes hours here);
  (c) the quiet-machine estimate: every time of (b) in units of this run's bare forward, times the bare forward of
      2 quiet AMD EPYC cores (QUIET_FORWARD_S, bench_probes' table (a) of 2026-12-06, load ~2).
`--curve TABLE` measures (d) instead, its own section: the CI width of the causal rows against the number of sequences, from a causal probe table
written with --causal-tokens 0 (every sequence; e.g. `interp probe --model smollm2-135m --causal --tokens 8192
--causal-tokens 0 --out results/causal-curve.parquet`): for the first S sequences, each row's Student-t 95% CI
half-width, its ratio to the widest S, and the Spearman rho of each kind's layer profile with the profile over all.
`--quick` uses a tiny random Llama and a few tokens.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.common import Spread, begin, finish, interleave_batches, paired_ratios, parse_args

NAME = "bench_causal"
TITLE = "Causal rows: probe --causal before and after resuming at the ablated layer (bench_causal)"
CURVE_NAME = "bench_causal_curve"
CURVE_TITLE = "Causal rows: CI width against tokens on SmolLM2 (bench_causal --curve)"
# s per token of a bare SmolLM2 forward (eager, the loss; batch 4 x 512, the probe's), 2 threads on 2 quiet AMD EPYC
# cores: the mean of the three bare forwards of bench_causal's quiet run of 2026-12-07 19:26 UTC (5.61 / 6.04 /
# 5.24 s), whose end-to-end run it then reproduces. Between processes this forward takes 5.2-7.4 s on the same
# quiet machine. The earlier constant, bench_probes (a) at batch 2 (4.69 s per 2,048 tokens), made the estimate
# 12.9 min where the (then eager) run took 15 min 13 s end to end.
QUIET_FORWARD_S = 5.63 / (4 * 512)
SIZES = {
    "real": dict(model="smollm2-135m", batches=2, reps=2),
    "quick": dict(model="", batches=2, reps=1),
}


def _tiny(folder: Path) -> str:
    from benchmarks.bench_probes import build_tiny_llama

    return str(build_tiny_llama(folder))


def per_pass(loaded: Any, batches: Sequence[torch.Tensor], reps: int) -> dict[str, Spread]:
    """Seconds of each pass kind on each batch (interleaved ABBA), as multiples of the bare forward on that batch."""
    from interp.ablations import layers as al
    from interp.ablations.loss import token_losses
    from interp.causal import CAUSAL_ATTENTION
    from interp.hf import layer_modules, unwrap
    from interp.hf.attention import attention_within

    root, layers = unwrap(loaded), layer_modules(loaded)
    n = len(layers)
    starts = sorted({0, n // 3, 2 * n // 3, n - 1})
    kept: dict[int, list] = {}

    def bare(ids: torch.Tensor) -> None:
        token_losses(root, ids)

    def full(ids: torch.Tensor) -> None:
        with al.layer_ablated(loaded, "skip_mlp", n // 2):
            token_losses(root, ids)

    def resumed(start: int):
        def run(ids: torch.Tensor) -> None:
            if id(ids) not in kept:
                kept[id(ids)] = al.kept_clean_pass(root, layers, ids)[0]
            with (attention_within(root, CAUSAL_ATTENTION), al.layer_ablated(loaded, "skip_mlp", start),
                  al._replaying(layers, kept[id(ids)], start)):
                token_losses(root, ids)
        return run

    variants = {"bare forward": bare, "full pass (before)": full,
                **{f"resumed at layer {s} (after, sdpa)": resumed(s) for s in starts}}
    with torch.no_grad():
        for ids in batches:   # the kept stream of each batch exists before any timing (its pass is timed in (b))
            kept[id(ids)] = al.kept_clean_pass(root, layers, ids)[0]
        times = interleave_batches(variants, list(batches) * reps)
    return {name: Spread.of(paired_ratios(t, times["bare forward"])) for name, t in times.items()} | {
        "_bare_s": Spread.of(times["bare forward"])}


CURVE_TABLE = Path(__file__).resolve().parent / "causal_ci_curve.csv"   # (d), committed: docs/probes.md reads it
DOCS = Path(__file__).resolve().parent.parent / "docs" / "probes.md"
CURVE_PROVENANCE = ("model", "dtype", "hardware", "device", "text_source", "text_sha256", "weights_sha256", "versions")
DOCS_MARKERS = ("<!-- causal-curve:begin -->", "<!-- causal-curve:end -->")


def curve(path: str) -> list[dict[str, Any]]:
    """(d): per kind and number of sequences S (the first S of the table's), the median and largest 95% CI
    half-width over layers (nats), the median relative to that over every sequence, how many layers' CIs exclude 0,
    and how the layer profile over the first S ranks the layers: Spearman rho with the profile over every sequence
    (which contains them), and, where the table has S more sequences, with the profile over the LAST S (independent
    sequences: how well two budgets of S agree with each other)."""
    import numpy as np
    import pandas as pd

    from interp.causal import causal_data
    from interp.stats import spearman_r, t_quantile

    table = pd.read_parquet(path)
    effects, _ = causal_data(table)
    stamp = {c: table[c].iloc[0] for c in CURVE_PROVENANCE if c in table}   # what produced the rows
    n_seq, seq_len = effects.n_sequences, effects.predicted + 1
    sizes = [s for s in (2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) if s < n_seq] + [n_seq]
    rows = []
    for kind in effects.ablated:
        d = effects.deltas(kind).numpy()                                       # [n_layers, n_seq]
        every = t_quantile(0.975, n_seq - 1) * d.std(1, ddof=1) / math.sqrt(n_seq)
        for s in sizes:
            part = d[:, :s]
            width = t_quantile(0.975, s - 1) * part.std(1, ddof=1) / math.sqrt(s)
            rows.append({"kind": kind, "sequences": s, "tokens": s * seq_len,
                         "median_ci_half_width": float(np.median(width)), "max_ci_half_width": float(width.max()),
                         "median_width_vs_all": float(np.median(width / every)),
                         "layers_resolved": int((np.abs(part.mean(1)) > width).sum()), "n_layers": int(d.shape[0]),
                         "rho_with_all": spearman_r(part.mean(1), d.mean(1)),
                         "rho_with_other_half": (spearman_r(part.mean(1), d[:, -s:].mean(1)) if 2 * s <= n_seq
                                                 else float("nan")), **stamp})
    return rows


def curve_markdown(df: Any) -> str:
    """The docs' table of the curve: per number of sequences, each kind's median CI half-width and its rank agreement
    with independent sequences (rows of causal_ci_curve.csv)."""
    kinds = list(dict.fromkeys(df["kind"]))
    head = "| sequences (tokens) | " + " | ".join(f"{k}: median CI half-width, rho" for k in kinds) + " |"
    lines = [head, "|" + "---|" * (len(kinds) + 1)]
    for s in sorted(set(df["sequences"])):
        cells = []
        for k in kinds:
            r = df[(df["kind"] == k) & (df["sequences"] == s)].iloc[0]
            rho = "" if r["rho_with_other_half"] != r["rho_with_other_half"] else f", {r['rho_with_other_half']:.2f}"
            cells.append(f"{r['median_ci_half_width']:.3f}{rho}")
        tokens = int(df[df["sequences"] == s]["tokens"].iloc[0])
        lines.append(f"| {s} ({tokens:,}) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_curve(rows: list[dict[str, Any]]) -> None:
    """causal_ci_curve.csv, and the docs' table between DOCS_MARKERS rendered from it (atomic writes)."""
    import pandas as pd

    from interp._util.io import atomic_write, write_text_atomic

    df = pd.DataFrame(rows)
    atomic_write(CURVE_TABLE.parent, {CURVE_TABLE.name: lambda p: df.to_csv(p, index=False)})
    text = DOCS.read_text()
    begin, end = DOCS_MARKERS
    if begin not in text or end not in text:
        raise ValueError(f"{DOCS}: no {begin} ... {end} block to write the curve into")
    text = text[:text.index(begin) + len(begin)] + "\n" + curve_markdown(df) + "\n" + text[text.index(end):]
    write_text_atomic(DOCS, text)


def bare_forward_s(loaded: Any, tokens: torch.Tensor, reps: int = 2) -> float:
    """Median seconds of a bare forward (the loss, no hook) of one batch."""
    from interp.ablations.loss import token_losses
    from interp.hf import unwrap

    times = []
    with torch.no_grad():
        for _ in range(reps):
            start = time.perf_counter()
            token_losses(unwrap(loaded), tokens)
            times.append(time.perf_counter() - start)
    return Spread.of(times).median


def curve_section(args: Any, argv: Sequence[str] | None, command: str | None) -> str:
    """(d) alone, as its own section of RESULTS.md (CURVE_NAME); with --write also the CSV and the docs' table."""
    report = begin(args, SIZES, CURVE_NAME, CURVE_TITLE, argv, command)[1]
    rows = curve(args.curve)
    report.section("(d) CI width of the causal rows against the number of sequences (first S)")
    report.table(rows)
    report.note(f"From `{args.curve}` (exact rows over every sequence: --causal-tokens 0). A half-width is "
                "t(0.975, S-1) x sd / sqrt(S) of the per-sequence deltas of one (kind, layer) row; rho_with_other_half "
                "ranks the layers by the first S sequences against the last S (independent sequences). Written to "
                f"{CURVE_TABLE.name}, from which docs/probes.md's table is rendered.")
    if args.write and not args.quick:
        write_curve(rows)
    return finish(report, args.write)


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    import tempfile

    def extra(parser):
        parser.add_argument("--curve", default=None, metavar="TABLE",
                            help="a causal probe table written with --causal-tokens 0: add the CI-width curve (d)")

    args = parse_args(NAME, __doc__.splitlines()[0], argv, extra)
    if args.curve:
        return curve_section(args, argv, command)
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    from interp import causal, hf, probes
    from interp.ablations import causal_pass_count
    from interp.probes.config import DEFAULT_CAUSAL_TOKENS, ProbeConfig

    with tempfile.TemporaryDirectory() as tmp:
        model = size["model"] or _tiny(Path(tmp))
        cfg = ProbeConfig() if not args.quick else ProbeConfig(tokens=256, seq_len=32, causal_tokens=64)
        loaded = hf.load_pretrained(model)
        ids = probes.encode_text(loaded.tokenizer, probes.load_text(cfg.text)[0])
        cfg = cfg.for_context(hf.context_length(loaded))
        batches = probes.token_batches(ids, cfg.tokens, cfg.seq_len, cfg.batch_size)
        n_layers = len(hf.layer_modules(loaded))
        passes = per_pass(loaded, batches[:size["batches"]], size["reps"])
        passes.pop("_bare_s")
        report.note(f"Model: {model} (fp32; eager attention for the probe, the bare forward and the passes before, sdpa "
                    f"for the passes after: interp.causal.CAUSAL_ATTENTION), {n_layers} layers; held-out wiki text; probe defaults "
                    f"({cfg.tokens:,} tokens = {len(batches)} batches of {cfg.batch_size} x {cfg.seq_len}); causal "
                    f"rows' budget {cfg.causal_tokens or cfg.tokens:,} tokens; {args.threads} thread(s).")
        report.section("(a) One pass, as a multiple of a bare forward on the same batch (interleaved, ABBA)")
        report.table([{"pass": name, "/ bare forward": s.fmt()} for name, s in passes.items()])
        # (b): each end-to-end run between bare forwards of one batch, its unit (the load may drift meanwhile)
        bare = [bare_forward_s(loaded, batches[0])]
        start = time.perf_counter()
        probes.probe(model, config=cfg)
        alone_s = time.perf_counter() - start
        bare.append(bare_forward_s(loaded, batches[0]))
        start = time.perf_counter()
        joined = causal.probe(model, config=dataclasses.replace(cfg, causal=True), progress=True)
        after_s = time.perf_counter() - start
        bare.append(bare_forward_s(loaded, batches[0]))
    timing = joined.attrs["timing"]
    unit_alone, unit_after = (bare[0] + bare[1]) / 2, (bare[1] + bare[2]) / 2   # s per bare forward of one batch
    worth_alone, worth_after = alone_s / unit_alone / len(batches), after_s / unit_after / len(batches)
    # before: the probe alone, then every row a full pass over every batch, and the profile pass (one forward)
    worth_before = worth_alone + passes["full pass (before)"].median * (1 + 4 * n_layers) + 1
    n_seq_all = sum(int(b.shape[0]) for b in batches)
    quiet_batch_s = QUIET_FORWARD_S * batches[0].numel()
    worth = f"forwards' worth (of {cfg.tokens:,} tokens)"
    rows = [{"run": "probe alone (defaults)", "how": "measured", "seconds here": alone_s,
             worth: worth_alone,
             "quiet estimate (min)": worth_alone * len(batches) * quiet_batch_s / 60},
            {"run": "probe --causal, after", "how": f"measured (causal phase {timing['extra_s']:.0f} s)",
             "seconds here": after_s, worth: worth_after,
             "quiet estimate (min)": worth_after * len(batches) * quiet_batch_s / 60},
            {"run": "probe --causal, before", "how": f"predicted: the probe alone + (1 + 4 x {n_layers}) full passes "
             "over every batch at (a)'s full pass + the profile pass",
             "seconds here": worth_before * len(batches) * unit_after,
             worth: worth_before,
             "quiet estimate (min)": worth_before * len(batches) * quiet_batch_s / 60}]
    report.section("(b, c) End to end at the defaults, here and estimated for 2 quiet cores")
    report.table(rows)
    causal_tokens = cfg.causal_tokens or cfg.tokens
    report.note(f"A bare forward of one batch ({cfg.batch_size} x {cfg.seq_len}) here took {bare[0]:.2f} / "
                f"{bare[1]:.2f} / {bare[2]:.2f} s before / between / after the two runs (each run is counted in the "
                f"mean of the two around it); on 2 quiet cores {quiet_batch_s:.2f} s ({1 / QUIET_FORWARD_S:,.0f} "
                "tokens/s, QUIET_FORWARD_S: the same bare forward timed on 2 quiet cores), which turns forwards' worth "
                "into the quiet estimate. Both "
                f"runs include loading the model. Before: every one of {n_seq_all} sequences, {1 + 4 * n_layers} full "
                f"passes each. After: the first {causal_tokens // cfg.seq_len} sequences ({causal_tokens:,} tokens), "
                f"{causal_pass_count(n_layers):.1f} forwards' worth of passes by the progress's weights (a pass resumed "
                "at layer L runs L.. and the unembedding). Rows equal to the old algorithm's on the same tokens: "
                "tests/ablations/test_resume.py.")
    after_s_quiet = rows[1]["quiet estimate (min)"] * 60
    after_quiet = after_s_quiet / 60
    report.check("probe --causal at defaults, 2 quiet cores (estimated)", f"{after_quiet:.1f} min", "<= 15 min",
                 after_quiet <= 15)
    speedup = (worth_before - worth_alone) / (worth_after - worth_alone)
    report.check("speed-up of the causal phase, before / after", f"{speedup:.1f}x", "> 1", speedup > 1)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
