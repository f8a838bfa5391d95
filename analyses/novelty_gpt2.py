"""The paper's own experiment, as one command: layer-wise novelty of GPT-2 124M to 1.5B on 2,048 tokens of
WikiText-2 (paper section 4), with the paper's Pearson r values beside ours.

    interp figures --only novelty_gpt2 --recompute          # downloads the four GPT-2 sizes and WikiText-2

HEAVY, and online: the four models (~6.5 GB in fp32 for gpt2-xl) and the dataset come from the Hugging Face hub
(interp.hf.hub, interp.data.hub_text; cached after the first run, HF_HUB_OFFLINE=1 then reruns from the cache).
Our machines have no network, so the committed figures/ holds no table of it yet: `make figures` skips it with a
note, and tests/hf/test_hub_models.py runs it end to end against the loopback hub with random-weight GPT-2 repos
of the same names.

The paper reports only ranges over the four sizes (paper-notes.md): Pearson r of the per-layer mean with the layer
index 0.49 to 0.71 for rho_mlp and 0.27 to 0.71 for rho_block. The summary table sets each model's r (and Spearman r)
beside that range; a value outside it is reported as such, not tuned away.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analyses import outputs, read_table, write_table
from interp.probes.config import ProbeConfig

NAME = "novelty_gpt2"
TABLE = "novelty_gpt2.csv"
SUMMARY = "novelty_gpt2_r.csv"
FIGURE = "novelty_gpt2.png"
OUTPUTS = outputs(TABLE, SUMMARY, FIGURE)
HEAVY = True   # ~7 GB of downloads, then minutes per model on a CPU
MODELS = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")   # TransformerLens names; 124M, 355M, 774M, 1.5B
PAPER_R = {"rho_mlp": (0.49, 0.71), "rho_block": (0.27, 0.71)}   # Pearson r with the layer index, over the 4 sizes


def _default_probe() -> ProbeConfig:
    # the paper's 2,048 tokens of WikiText-2 (test split), GPT-2's context of 1,024 per sequence
    return ProbeConfig(text="wikitext-2", tokens=2048, seq_len=1024, batch_size=1, backend="torch",
                       positions="skip_first")


@dataclass
class Config:
    models: tuple[str, ...] = MODELS          # hub ids or TransformerLens names, each MODEL[@REV]
    probe: ProbeConfig = field(default_factory=_default_probe)


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.probes import probe

    tables = []
    for name in cfg.models:
        df = probe(name, config=dataclasses.replace(cfg.probe))
        timing = df.attrs.get("timing", {})
        print(f"[{NAME}] {name}: {timing.get('positions', '?')} positions in {timing.get('probe_s', float('nan')):.1f} s",
              flush=True)
        tables.append(df)
    df = pd.concat(tables, ignore_index=True)
    write_table(df, figures_dir, TABLE, cfg, NAME)
    summary = against_paper(df)
    write_table(summary, figures_dir, SUMMARY, cfg, NAME)
    print(summary.to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)


def against_paper(df: pd.DataFrame, series: str = "model") -> pd.DataFrame:
    """Per model and metric: our Pearson and Spearman r with depth, and the paper's range of Pearson r."""
    from interp.stats import depth_correlations

    summary = depth_correlations(df, series, tuple(PAPER_R))
    summary["paper_r_low"] = summary["metric"].map(lambda m: PAPER_R[m][0])
    summary["paper_r_high"] = summary["metric"].map(lambda m: PAPER_R[m][1])
    summary["within_paper_range"] = summary["pearson_r"].between(summary["paper_r_low"], summary["paper_r_high"])
    return summary[[series, "metric", "n_layers", "pearson_r", "spearman_r", "paper_r_low", "paper_r_high",
                    "within_paper_range"]]


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.novelty import plot_novelty

    df = read_table(figures_dir, TABLE, NAME)
    # plot_novelty's subtitle quotes the paper's r ranges (PAPER_R) beside each model's r in the legend
    fig = plot_novelty(df, series="model", title="GPT-2 sizes on WikiText-2 (the paper's experiment)")
    return [save_figure(fig, Path(figures_dir) / FIGURE)]
