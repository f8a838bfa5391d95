"""Remove one whole layer at a time: the damage (a removal map) and what it does to the later layers (a
layer-dependency map), on SmolLM2 and on our tiny uniform and tapered checkpoints (issue #34 items 3 and 4).

- Removal map (arXiv 2603.19348 reported one for SmolLM2-135M: a "critical core" at layers 8-11 whose removal
  hurts most, and two "anti-layers", 14 and 17, whose removal LOWERS perplexity). Per layer: delta loss
  (t-CI over sequences) and delta perplexity (bootstrap CI over sequences) on held-out wiki. Our copy is the
  Instruct model dequantized from Q4_1 (figures/README.md, "Models"), not the base bf16 weights that paper
  used: instruction tuning and 4-bit rounding can move small effects such as an anti-layer's, so a missing
  anti-layer here does not contradict the paper, and one found here is not the paper's either.
- Dependency map (Csordas, Manning & Potts 2505.13898): for each s < l, the relative change of layer l's
  contribution u_l = h_{l+1} - h_l when layer s is removed, ||u_l(s removed) - u_l|| / ||u_l||, mean over
  tokens then sequences (t-CI). Their finding: in the second half, removing a layer barely changes the later
  layers' computation. Our question: does tapering move where the computation happens (uniform vs cosine)?

interp.ablations.removal computes both from the same n_layers + 1 forwards per batch. HEAVY: SmolLM2's 30
layers over 32 x 256 tokens are 31 forwards of 8,192 tokens (about 6 min on 2 quiet cores); the tiny runs add
seconds. `interp figures --only layer_removal --recompute` recomputes; a plain --recompute re-renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import novelty_pretrained, novelty_tapered, outputs, read_table, repo_relative, write_table

NAME = "layer_removal"
HEAVY = True  # ~6 min quiet for SmolLM2 (see the module docstring), more than `make figures` affords
TABLE = "layer_removal.csv"              # one row per model and removed layer
DEPENDENCY_TABLE = "layer_dependency.csv"  # one row per model and pair (removed s, later layer l)
FIGURE = "layer_removal.png"
OUTPUTS = outputs(TABLE, DEPENDENCY_TABLE, FIGURE)


@dataclass
class Config:
    models: tuple[str, ...] = ("smollm2-135m",)   # registry names; one not installed is skipped
    run_dirs: tuple[str, ...] = field(default_factory=novelty_tapered._default_run_dirs)  # tiny uniform + tapered
    text: str | None = None          # None: the held-out wiki split
    seq_len: int = 256               # the tiny preset's context; SmolLM2 takes 2,048
    sequences: int = 32              # a t-CI over 32 sequences (31 degrees of freedom)
    batch_size: int = 8
    positions: str = "skip_first"
    confidence: float = 0.95
    n_boot: int = 2000
    seed: int = 0


def measure(spec: str, cfg: Config, label: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(removal rows, dependency rows) of one model: a registry name, HF dir, .gguf or our checkpoint."""
    from interp._util.io import text_sha256
    from interp.ablations.removal import removal_effects
    from interp.hf import resolve_model
    from interp.probes.text import encode_text, load_text, token_batches

    ref = resolve_model(spec).fetched()
    tokenizer = ref.load_tokenizer()
    model = ref.load_placed("cpu", "float32", None)
    text, source = load_text(cfg.text)
    ids = encode_text(tokenizer, text)
    batches = token_batches(ids, cfg.sequences * cfg.seq_len, cfg.seq_len, cfg.batch_size)
    fx = removal_effects(model, batches, cfg.positions, log=lambda m: print(f"[{NAME}] {label}: {m}", flush=True))
    common = {"label": label, "model": ref.label if ref.checkpoint else spec,
              "checkpoint": repo_relative(ref.checkpoint or ""), "n_layers": fx.n_layers,
              "text_source": source, "text_sha256": text_sha256(text), "seq_len": cfg.seq_len,
              "n_tokens": cfg.sequences * cfg.seq_len, "positions": cfg.positions, "dtype": "float32"}
    removal = [{**common, **row} for row in fx.removal_rows(cfg.confidence, cfg.n_boot, cfg.seed)]
    contribution = fx.contribution.mean(1).tolist()
    for row in removal:
        row["contribution_norm_ratio"] = contribution[row["layer"]]
    dependency = [{**common, **row} for row in fx.dependency_rows(cfg.confidence)]
    return removal, dependency


def compute(cfg: Config, figures_dir: Path) -> None:
    installed = novelty_pretrained.installed_models(novelty_pretrained.Config(models=cfg.models))
    models = [(name, name) for name in installed]
    runs = novelty_tapered.finished_runs(novelty_tapered.Config(run_dirs=cfg.run_dirs))
    models += [(str(run), run.name) for run in runs]
    if not models:
        print(f"[{NAME}] no model installed and no finished run: nothing to measure", flush=True)
        return
    removal, dependency = [], []
    for spec, label in models:
        r, d = measure(spec, cfg, label)
        removal += r
        dependency += d
    table = pd.DataFrame(removal)
    write_table(table, figures_dir, TABLE, cfg, NAME)
    write_table(pd.DataFrame(dependency), figures_dir, DEPENDENCY_TABLE, cfg, NAME)
    print(table[["label", "layer", "delta_loss", "delta_ppl", "delta_ppl_ci_low", "delta_ppl_ci_high"]]
          .to_string(index=False, float_format=lambda v: f"{v:+.3f}"), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.removal import plot_layer_removal

    removal = read_table(figures_dir, TABLE, NAME)
    dependency = read_table(figures_dir, DEPENDENCY_TABLE, NAME)
    return [save_figure(plot_layer_removal(removal, dependency), Path(figures_dir) / FIGURE)]
