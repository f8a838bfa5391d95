"""The paper's evaluations on the four-mixer comparison's checkpoints (issue 12): does cosine 1.5 -> 0.5 beat
uniform on the paper's tasks for each token mixer, or only in held-out perplexity?

    interp experiment architectures --preset tiny --seeds 2 --budget preset \\
        --mixers titans,attention,gated_attention,hope_attention \\
        --jobs 2 --set threads=1 --set 'dtype="fp32"' --out /tmp/arch-ckpt             # weights: ~1.9 h (AMD)
    interp figures --only downstream_architectures --recompute                # HEAVY: evaluate them, ~40 min

The first command trains the comparison's 16 runs (the tiny preset's own budget, as figures/architectures.csv,
but in fp32 on the CPU) into the repository's runs/architectures-tiny-full/<mixer>/<width>/seed<k>/; its `--out`
elsewhere keeps the committed figures/architectures.csv (trained on a lent GPU, bf16) as it is. Measured per run
(fp32, 1 thread, two at once, quiet AMD EPYC): attention and gated attention 385-421 s, Hope-attention 639-692 s,
Titans 1,876-1,906 s (~270 tokens/s). Titans first in --mixers only so its long pair starts at once; the runner
goes seed-major either way, and the analysis takes whatever mixers the root holds.

Everything else is downstream_groups on another root: the same lm-eval tasks, the same per-run and summary tables
(figures/downstream_architectures_runs.csv, figures/downstream_architectures.csv) and figure, with variants named
"<mixer>/<width>" and each mixer's tapered model paired by seed with that mixer's uniform model
(downstream_groups.baseline_of). `interp experiment eval runs/architectures-tiny-full --out DIR` gives the same
numbers into any folder (EXPERIMENT_DIR relative to the working directory).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analyses import downstream_groups as dg
from analyses import outputs
from interp._util.config import option

NAME = "downstream_architectures"
HEAVY = True   # 16 training runs (~1.9 h on 2 cores, fp32) + ~40 min of evaluation: the docstring's commands
TABLE, RUNS_TABLE, FIGURE = f"{NAME}.csv", f"{NAME}_runs.csv", f"{NAME}.png"
OUTPUTS = outputs(TABLE, RUNS_TABLE, FIGURE)


@dataclass
class Config(dg.Config):
    runs: str = option("repo:runs/architectures-tiny-full", "experiment root of the architecture comparison's "
                       "runs (<mixer>/<width>/seed<k>; relative: to the working directory)")
    out: str = option("repo:runs/eval/downstream_architectures.parquet", "the resumable interp eval table "
                      "(relative: to the working directory)")


def compute(cfg: Config, figures_dir: Path) -> bool:
    return dg.compute(cfg, figures_dir, (TABLE, RUNS_TABLE), NAME)


def render(figures_dir: Path) -> list[Path]:
    return dg.render(figures_dir, (TABLE, RUNS_TABLE, FIGURE), NAME)
