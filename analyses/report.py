"""One generated report of every claim and its verdict: REPORT.md and a self-contained REPORT.html, rendered from
one document (analyses/report_render.py), so the two hold the same claims, notes and caveats.

Every number is read from the committed tables under figures/ (never recomputed from a model), so the report
is as current as the tables and `make figures` regenerates it in a second. Each claim states what the paper (or
the literature) says, how we measured it, our value with its 95% interval, the regime it was measured in
(parameters, tokens per run, tokens per parameter, seeds, hardware, dtype), a link to its figure and its table,
and a verdict computed by one stated rule (RULE; interp.stats_intervals.direction on the claim's interval):

    a claim predicts a sign (better = lower perplexity = negative change; a correlation that should be positive
    or negative). reproduces: the interval lies entirely on the predicted side of zero; contradicts: entirely on
    the other side; unresolved: it contains zero (or no interval could be formed). A table that is not there
    gives "not measured" and the command that computes it.

One section is read by another stated rule, given in its intro: our evaluations on every document beside the
published numbers (analyses.report_evals.FULL_SET: analyses.full_set_evals' RULE, consistent / differs / not
comparable / not measured, computed by full_set_evals.verdict from each row's z and shots). Beside each Spearman
rho of a measure against the cost of removing a layer, the note names the layers where the measure misleads
(analyses.misleading_layers: their rank by the measure and by the removal cost, both with intervals).

The interval covers every source of noise the table measures (COVERAGE): an accuracy change of the evaluations
counts the seeds and the documents together (interp.stats_intervals.change_ci, the same function that gives
downstream_groups.csv its `resolved` column and its figure its stars); a claim tested on several tasks is read at
the Bonferroni level of its family where the table holds what that needs, and carries a note where it does not.

The claims come in SECTIONS, one builder each: a new kind of claim is one Section (or one entry of a builder's
declarative table: LAYOUT_CLAIMS, IMPORTANCE_CLAIMS, ACCURACY_CLAIMS, EVAL_VARIANTS). tests/analyses/
test_report.py recomputes every number from its table, independently, and tests/analyses/test_report_readme.py
checks that every finding of the README names a row whose number it quotes. figures/README.md keeps the
per-figure detail; this is the one-page view.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analyses.report_claims import (
    COVERAGE,
    LEVEL,
    MULTIPLE,
    RULE,
    VERDICTS,
    Claim,
    Rule,
    Section,
    depth_claims,
    fmt,
    importance_section,
    slug,
    training_claims,
    verdict,
)
from analyses.report_evals import FULL_SET, PUBLISHED_INTRO, PUBLISHED_TITLE, eval_claims, published_claims
from analyses.report_render import HTML, MARKDOWN, write
from interp._util.config import option

NAME = "report"
OUTPUTS = [MARKDOWN, HTML]


@dataclass
class Config:
    """What `interp report` reads (its --out, where the report goes, is a flag of the command)."""
    tables: str = option("repo:figures", "folder holding the tables (and figures) the report reads ('repo:' = in "
                         "the repository; relative: to the working directory)", metavar="DIR")


SECTIONS: tuple[Section, ...] = (
    Section("training", "Where the MLP budget goes: training comparisons at equal parameters", training_claims),
    Section("depth", "Does rho_mlp rise with depth?", depth_claims),
    Section("evaluations", "The paper's evaluations", eval_claims),
    Section("published", PUBLISHED_TITLE, published_claims, PUBLISHED_INTRO),
    Section("importance", "What predicts the damage of removing a layer", importance_section),
)


def sections(figures_dir: Path) -> list[tuple[Section, list[Claim]]]:
    return [(section, section.build(Path(figures_dir))) for section in SECTIONS]


def claims(figures_dir: Path) -> list[Claim]:
    return [c for _, items in sections(figures_dir) for c in items]


def compute(cfg: Config, figures_dir: Path) -> None:
    render(figures_dir)


def render(figures_dir: Path, out_dir: Path | None = None) -> list[Path]:
    """REPORT.md and REPORT.html from the tables in `figures_dir`, written to `out_dir` (default: beside them)."""
    figures_dir = Path(figures_dir)
    return write(figures_dir, Path(out_dir if out_dir is not None else figures_dir), sections(figures_dir))


__all__ = [
    "COVERAGE",
    "FULL_SET",
    "HTML",
    "LEVEL",
    "MARKDOWN",
    "MULTIPLE",
    "RULE",
    "SECTIONS",
    "VERDICTS",
    "Claim",
    "Config",
    "Rule",
    "Section",
    "claims",
    "fmt",
    "render",
    "sections",
    "slug",
    "verdict",
]
