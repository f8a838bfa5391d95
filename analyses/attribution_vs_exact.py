"""How good is the fast mode? `--causal-method attribution` (first-order estimates of every causal row from one
forward and one backward: interp.ablations.attribution) against the exact rows (interp.ablations.layers), per model,
on the same sequences.

For each model (SmolLM2-135M and Gemma-3-270m, the registry's offline copies) one `interp.causal.probe(...,
causal=True)` with the exact rows and one with the estimates, at the causal rows' default budget (the first 8
sequences of 512 tokens of the held-out wiki split). Per model and kind (skip_mlp, mean_mlp, skip_attn, skip_block):
the Spearman rho across layers of the estimated with the exact per-layer means, with a percentile bootstrap CI over
sequences (interp.stats.bootstrap_spearman: the same resampled sequences on both sides), the Pearson r, how often the
signs agree, the median absolute error and the worst layers. An estimate is one more proxy to judge, like rho: a
high rank correlation says it orders the layers as removal does; the errors say how far its values are from the
exact ones (removing a whole MLP or block is no small change, and the estimate is linear in it).

Cost: the exact rows, ~66 forwards' worth of passes over 4,096 tokens for SmolLM2 and ~40 for Gemma-3 (whose
262k-token unembedding, paid by every pass, dwarfs its 18 layers), plus 3 for the estimates and the probe passes:
see the table's seconds. HEAVY: `interp figures --only attribution_vs_exact --recompute` recomputes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analyses import novelty_pretrained, outputs, read_table, write_table
from interp._util.paths import FIGURES_DIR, REPO_ROOT
from interp.data.report import fill_block
from interp.probes.config import DEFAULT_CAUSAL_TOKENS, ProbeConfig

NAME = "attribution_vs_exact"
HEAVY = True   # tens of minutes on 2 quiet cores (the exact rows of two pretrained models)
TABLE = "attribution_vs_exact.csv"                 # one row per model and kind
LAYERS_TABLE = "attribution_vs_exact_layers.csv"   # one row per model, kind and layer
FIGURE = "attribution_vs_exact.png"
OUTPUTS = outputs(TABLE, LAYERS_TABLE, FIGURE)
PROVENANCE = ("text_source", "text_sha256", "weights_sha256", "seq_len", "positions", "dtype", "device", "hardware",
              "versions")


def _probe() -> ProbeConfig:
    # the causal rows' defaults: 8 sequences of 512 (the probe's own pass over the same tokens is all it needs)
    return ProbeConfig(tokens=DEFAULT_CAUSAL_TOKENS, seq_len=512, batch_size=4, backend="torch", metrics=("rho_mlp",),
                       causal=True, causal_tokens=0)


@dataclass
class Config:
    models: tuple[str, ...] = ("smollm2-135m", "gemma3-270m")   # registry names; one not installed is skipped
    probe: ProbeConfig = field(default_factory=_probe)
    worst: int = 3            # the layers with the largest |estimate - exact| named per row
    n_boot: int = 2000        # bootstrap draws over sequences
    confidence: float = 0.95
    seed: int = 0


def compare(exact: pd.DataFrame, estimate: pd.DataFrame, worst: int = 3, n_boot: int = 2000,
            confidence: float = 0.95, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(one row per kind, one row per kind and layer) comparing two causal probe tables of one model over the same
    sequences: `exact` (causal_method="exact") and `estimate` ("attribution")."""
    from interp.causal import causal_data
    from interp.stats import bootstrap_spearman

    (ex, _), (est, _) = causal_data(exact), causal_data(estimate)
    if ex.method != "exact" or est.method != "attribution":
        raise ValueError(f"compare: expected an exact and an attribution table, got {ex.method!r} and {est.method!r}")
    if ex.clean.shape != est.clean.shape or not np.allclose(ex.clean.numpy(), est.clean.numpy(), atol=1e-5):
        raise ValueError("compare: the two tables' clean losses differ: not the same model and sequences")
    first = exact.iloc[0]
    common = {"model": first["model"], "n_layers": ex.n_layers, "n_sequences": ex.n_sequences,
              "n_tokens": ex.n_sequences * ex.predicted}
    rows, layer_rows = [], []
    for kind in ex.ablated:
        x, y = ex.deltas(kind).numpy(), est.deltas(kind).numpy()          # [n_layers, n_seq]
        mx, my = x.mean(1), y.mean(1)
        rho, low, high = bootstrap_spearman(x.T, y.T, n_boot, confidence, seed)
        error = my - mx
        order = np.argsort(-np.abs(error), kind="stable")[:worst]
        exact_rows = exact[exact["metric"] == ex.metric(kind)].set_index("layer").sort_index()
        rows.append({**common, "kind": kind, "exact_metric": ex.metric(kind), "estimate_metric": est.metric(kind),
                     "spearman_rho": rho, "ci_low": low, "ci_high": high, "confidence": confidence, "n_boot": n_boot,
                     "pearson_r": float(np.corrcoef(mx, my)[0, 1]), "sign_agreement": float(np.mean(np.sign(mx) ==
                                                                                             np.sign(my))),
                     "median_abs_error": float(np.median(np.abs(error))),
                     "median_abs_exact": float(np.median(np.abs(mx))),
                     "worst_layers": " ".join(str(int(l)) for l in order),
                     "worst_exact": " ".join(f"{mx[l]:+.4f}" for l in order),
                     "worst_estimate": " ".join(f"{my[l]:+.4f}" for l in order)})
        for layer in range(ex.n_layers):
            layer_rows.append({"model": first["model"], "kind": kind, "layer": layer,
                               "depth": layer / max(ex.n_layers - 1, 1), "exact_mean": mx[layer],
                               "exact_ci_low": exact_rows.loc[layer, "ci_low"],
                               "exact_ci_high": exact_rows.loc[layer, "ci_high"], "estimate_mean": my[layer],
                               "error": error[layer]})
    seconds = {"exact_seconds": exact.attrs["causal"]["seconds"],
               "estimate_seconds": estimate.attrs["causal"]["seconds"]}
    stamp = {c: first[c] for c in PROVENANCE if c in exact.columns}
    return (pd.DataFrame(rows).assign(**seconds, **stamp), pd.DataFrame(layer_rows).assign(**stamp))


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.causal import probe

    summaries, layer_tables = [], []
    for name in novelty_pretrained.installed_models(novelty_pretrained.Config(models=cfg.models)):
        tables = {}
        for method in ("exact", "attribution"):
            tables[method] = probe(name, config=dataclasses.replace(cfg.probe, causal=True, causal_method=method))
            print(f"[{NAME}] {name} {method}: causal rows {tables[method].attrs['causal']['seconds']:.0f} s",
                  flush=True)
        summary, layers = compare(tables["exact"], tables["attribution"], cfg.worst, cfg.n_boot, cfg.confidence,
                                  cfg.seed)
        summaries.append(summary)
        layer_tables.append(layers)
    if not summaries:
        print(f"[{NAME}] no model installed: nothing to measure", flush=True)
        return
    summary = pd.concat(summaries, ignore_index=True)
    write_table(pd.concat(layer_tables, ignore_index=True), figures_dir, LAYERS_TABLE, cfg, NAME)
    write_table(summary, figures_dir, TABLE, cfg, NAME)
    if Path(figures_dir).resolve() == Path(FIGURES_DIR).resolve():   # the committed table: its README block follows
        fill_block(Path(REPO_ROOT) / "figures" / "README.md", README_BLOCK, summary_markdown(summary))
    print(summary[["model", "kind", "spearman_rho", "ci_low", "ci_high", "pearson_r", "sign_agreement",
                   "median_abs_error", "worst_layers"]].to_string(index=False, float_format=lambda v: f"{v:+.3f}"),
          flush=True)


README_BLOCK = "attribution_vs_exact"   # figures/README.md's <!-- begin:attribution_vs_exact --> table


def summary_markdown(summary: pd.DataFrame) -> str:
    """figures/README.md's table (tested equal there): per model and kind, the estimate's rank agreement with the
    exact rows, its errors and its worst layers, the seconds of both."""
    lines = [("| model | kind | Spearman rho [95% CI] | Pearson r | signs agree | median abs error / median abs exact "
              "(nats) | worst layers: exact vs estimated | seconds: exact, estimated |"), "|---" * 8 + "|"]
    for _, r in summary.iterrows():
        worst = "; ".join(f"{layer}: {e} vs {a}" for layer, e, a in zip(str(r["worst_layers"]).split(),
                                                                      str(r["worst_exact"]).split(),
                                                                      str(r["worst_estimate"]).split()))
        lines.append(f"| {r['model']} | {r['kind']} | {r['spearman_rho']:+.2f} [{r['ci_low']:+.2f}, "
                     f"{r['ci_high']:+.2f}] | {r['pearson_r']:+.2f} | {r['sign_agreement']:.0%} | "
                     f"{r['median_abs_error']:.3g} / {r['median_abs_exact']:.3g} | {worst} | "
                     f"{r['exact_seconds']:.0f}, {r['estimate_seconds']:.0f} |")
    return "\n".join(lines)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.attribution import plot_attribution_vs_exact

    layers = read_table(figures_dir, LAYERS_TABLE, NAME)
    summary = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_attribution_vs_exact(layers, summary), Path(figures_dir) / FIGURE)]
