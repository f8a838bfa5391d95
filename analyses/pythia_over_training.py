"""Novelty over training on a public checkpoint series: a Pythia size at revisions of the user's choice
(`stepN` branches), probed by interp batch into one table and drawn as the layer x step heatmap that
novelty_over_training draws for our runs.

    interp figures --only pythia_over_training --recompute
    interp figures --only pythia_over_training --recompute --set 'model="EleutherAI/pythia-410m"' \
        --set 'revisions="step0..step143000:13000"'

HEAVY, and online: each revision is downloaded from the Hugging Face hub (interp.hf.hub) into its cache and
probed in turn, one model in memory at a time; the batch table under `root` resumes, so a rerun probes only
the revisions it lacks. Our machines have no network, so figures/ holds no table of it yet (`make figures`
skips it with a note); tests/hf/test_hub_models.py runs it against the loopback hub with a random-weight
GPT-NeoX series.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from analyses import outputs, read_table, resolve_root, write_table
from interp.probes.config import ProbeConfig

NAME = "pythia_over_training"
TABLE = "pythia_over_training.csv"
FIGURE = "pythia_over_training.png"
OUTPUTS = outputs(TABLE, FIGURE)
HEAVY = True
FIGURE_METRICS = ("rho_mlp", "rho_block")
COLUMNS = ["run", "label", "revision", "commit", "step", "tokens", "layer", "n_layers", "depth", "metric", "mean",
           "sem", "ci_low", "ci_high", "ci_method", "n_tokens", "n_sequences", "weights_sha256", "text_source",
           "text_sha256", "positions", "seq_len", "dtype", "backend", "device", "hardware", "versions"]


def _default_probe() -> ProbeConfig:
    return ProbeConfig(text="wikitext-2", tokens=2048, seq_len=512, batch_size=4, backend="torch")


@dataclass
class Config:
    model: str = "EleutherAI/pythia-70m"
    # Pythia's log-spaced early steps, then every 13,000 (interp.hf.hub.parse_revisions: a list, a range or all)
    revisions: str = "step0,step1,step8,step64,step512,step1000,step13000..step143000:13000"
    probe: ProbeConfig = field(default_factory=_default_probe)
    root: str = "repo:runs/figures/pythia"    # the resumable batch table (analyses.resolve_root)


def compute(cfg: Config, figures_dir: Path) -> None:
    from interp.probes.batch import BatchConfig, run_batch

    result = run_batch(BatchConfig(paths=[cfg.model], revisions=cfg.revisions, probe=cfg.probe,
                                   out=str(resolve_root(cfg.root) / "batch.parquet")))
    if result.failed:
        raise RuntimeError(f"{len(result.failed)} revision(s) failed to probe: {result.failed[0]}")
    wanted = {str(t.path) for t in result.targets}
    df = result.table
    df = df[(df["status"] == "ok") & (df["settings_hash"] == result.settings_hash) & df["path"].isin(wanted)]
    df = df.assign(label=df["run"])[COLUMNS].sort_values(["step", "metric", "layer"]).reset_index(drop=True)
    write_table(df, figures_dir, TABLE, cfg, NAME)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.training import plot_novelty_over_training

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_novelty_over_training(df, FIGURE_METRICS), Path(figures_dir) / FIGURE)]
