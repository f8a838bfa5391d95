"""The report's evaluation claims (analyses/report.py lists their Sections): the paper's evaluations of our seeded
checkpoints (downstream_groups, read by RULE like every other claim), and our evaluations of the pretrained models
on every document beside the published numbers (full_set_evals), read by that analysis's own rule (FULL_SET: the
function analyses.full_set_evals.verdict that writes its table's `verdict` column, applied here to each row's z and
the published number's shots, not copied from the column), stated in its section's intro. A new variant of the
paper's evaluations is one entry of EVAL_VARIANTS; a new published number, one row of interp.evals.published."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from analyses import full_set_evals
from analyses.report_claims import Claim, Rule, _labels, _made_by, _read, _weights, slug
from interp.evals import published

# ---------------------------------------------------------------------------------------------- evaluations

# downstream_groups' variants whose evaluations the paper's claims predict: variant -> (source, claim template,
# the sign an accuracy change should have; a perplexity change the opposite)
EVAL_VARIANTS = {"wider-early": ("paper (evaluations)", "wider-early does better than uniform on {task} ({metric})",
                                 +1)}
RETABULATE = "interp figures --only downstream_groups --recompute --set tabulate_only=true"


def eval_claims(figures: Path) -> list[Claim]:
    """downstream_groups' paired changes vs uniform, read from its verdict columns (change over seeds and
    documents, family-wise interval): the report, the CSV's `resolved` and the figure's star agree by
    construction. Comparisons that are no test (every model answers alike) and training_val are left out."""
    df = _read(figures, "downstream_groups.csv")
    if df is None or "change_fw_low" not in df:
        stale = df is not None
        return [Claim("evals", "paper (evaluations)", "wider-early improves the paper's tasks", "",
                      "downstream_groups.csv", +1, missing="downstream_groups", command=RETABULATE if stale else "",
                      note="the table predates the seeds-and-documents rule: rebuild it from its runs table"
                      if stale else "")]
    runs = _read(figures, "downstream_groups_runs.csv")
    runs = runs if runs is not None else pd.DataFrame()
    trained, evaluated = _made_by(runs), (f"{_labels(runs, 'eval_dtype') or 'dtype not recorded'}, "
                                          f"{_labels(runs, 'eval_hardware') or 'hardware not recorded'}")
    claims = []
    for variant, (source, template, sign) in EVAL_VARIANTS.items():
        rows = df[(df["variant"] == variant) & (df["family"] != "training") & df["testable"].astype(bool)]
        for _, row in rows.iterrows():
            log = row["scale"] == "log ratio"
            shown = (lambda x: 100.0 * math.expm1(x)) if log else float
            family = f"{variant} vs its baseline on the paper's tasks: {row['family']}"
            claim = Claim(f"eval-{variant}-{row['task']}-{row['metric']}", source,
                          template.format(task=row["task"], metric=row["metric"]),
                          (f"{row['metric']} change, % (from the mean log ratio)" if log else
                           f"{row['metric']} difference") + " vs the baseline, paired by seed (interval over seeds "
                          "and documents)", "downstream_groups.csv", -sign if log else sign, "%" if log else "",
                          figure="downstream_groups.png", digits=1 if log else 3, family=family,
                          family_size=int(row["family_size"]), verdict_level=float(row["family_level"]))
            claim.value = shown(float(row["change"]))
            claim.ci = (shown(float(row["change_ci_low"])), shown(float(row["change_ci_high"])))
            if claim.family_size > 1:
                claim.verdict_ci = (shown(float(row["change_fw_low"])), shown(float(row["change_fw_high"])))
            se = float(row["change_doc_stderr"])
            docs = (f"{int(row['n_docs'])} docs, the change's document stderr {se:.3g}"
                    + (" (of the log ratio)" if log else "")) if math.isfinite(se) else f"{int(row['n_docs'])} docs"
            claim.regime = (f"the group ablation's checkpoints, {int(row['n_pairs'])} seed pairs, {docs}; trained "
                            f"{trained}; evaluated {evaluated}")
            claim.note = _eval_note(df, row, se)
            claims.append(claim)
    return claims


def _eval_note(df: pd.DataFrame, row: pd.Series, doc_stderr: float) -> str:
    """What a reader must know to read an evaluation row: a perplexity at chance (its task's accuracy 0 for every
    model) is not informative; a row without a documents' error counts the seeds only."""
    notes = []
    if row["scale"] == "log ratio":
        acc = df[(df["task"] == row["task"]) & df["metric"].isin(["acc", "acc_norm"])]
        base = df[(df["task"] == row["task"]) & (df["metric"] == row["metric"]) & (df["d_mean"] == 0)
                  & (df["n_pairs"] > 0)]
        if not acc.empty and (acc["value_ci_high"].fillna(acc["value_mean"]) == 0).all() and not base.empty:
            ppl = float(base["value_mean"].iloc[0])
            notes.append(f"not informative: every model's {row['task']} accuracy is 0 and the baseline's "
                         f"perplexity is {ppl:.1e} (ln = {math.log(ppl):.1f} nats per word), i.e. chance; on a log "
                         "scale its interval says only that")
    if not math.isfinite(doc_stderr):
        notes.append(f"no documents' error (lm-eval gives no stderr for {row['metric']}): the interval is over "
                     "the seeds only")
    return "; ".join(notes)


# ---------------------------------------------------------------------------------------------- published numbers

def _full_set_verdict(claim: Claim) -> str:
    """full_set_evals' RULE on the claim's row: its z and whether the published setup is 0-shot, as ours is."""
    return full_set_evals.verdict(claim.basis["z"], full_set_evals.comparable(claim.basis["published_shots"]))


FULL_SET = Rule("full_set_evals", f"{full_set_evals.RULE}; not measured: our number is not in the table (its task "
                "has not finished, or is not planned)", ("consistent", "differs", "not comparable", "not measured"),
                _full_set_verdict)
PUBLISHED_TITLE = "Our evaluations beside the published numbers (every document)"
PUBLISHED_INTRO = (
    f"Verdict rule of this section (analyses.full_set_evals.RULE, by the function that writes the `verdict` column "
    f"of {full_set_evals.COMPARISON}), not the one above: {FULL_SET.text}. Each value is ours minus the published "
    "number with our 95% interval around it; the interval is ours alone (the published numbers come without "
    "one), and at 95% each about one row in twenty would read differs by chance alone. A difference says our "
    "evaluation path (weights, prompt, metric, code) and the published one give different numbers: it cannot say "
    "which is right, nor alone why; consistent says no difference this large shows, not that the setups are the "
    "same. Each row's note says what can explain a gap.")
PUBLISHED_MEASURE = "ours minus published, every document, 0-shot lm-eval; 95% CI from lm-eval's stderr"
# what our copy of each model is against the published one (interp.evals.published holds the sources)
VARIANTS = {
    "smollm2-135m": "the published numbers (the card's and the third-party lm-eval run's) are of the same Instruct "
                    "model as ours, so a gap is not Instruct vs base (the base model's scores are other numbers)",
    "gemma3-270m": "the card's numbers are of the pretrained (PT) model, as ours is, so a gap is not Instruct vs "
                   "base",
}


def published_claims(figures: Path) -> list[Claim]:
    """One claim per row of full_set_vs_published.csv: the published number, ours minus it with our interval
    moved by it, the verdict by FULL_SET, and what a difference can and cannot mean."""
    df = _read(figures, full_set_evals.COMPARISON)
    if df is None:
        return [Claim("published", "interp.evals.published", "our evaluations on every document give the published "
                      "numbers", "", full_set_evals.COMPARISON, 0, missing=full_set_evals.NAME, rule=FULL_SET)]
    ours = _read(figures, full_set_evals.TABLE)
    ours = ours if ours is not None else pd.DataFrame(columns=["model", "task", "metric"])
    figure = full_set_evals.FIGURE if (figures / full_set_evals.FIGURE).is_file() else ""
    claims: list[Claim] = []
    for _, row in df.iterrows():
        value = float(row["published"])
        setup = str(row["published_setup"])
        key = slug(f"published-{row['model']}-{row['task']}-{row['metric']}-{setup.split(':')[0].split(',')[0]}")
        while key in {c.id for c in claims}:
            key += "-2"
        claim = Claim(key, str(row["reference"]), f"{row['model']} scores {value:g} on {row['task']} "
                      f"({row['metric']}) as published ({setup})", PUBLISHED_MEASURE, full_set_evals.COMPARISON, 0,
                      figure=figure, digits=3, rule=FULL_SET,
                      basis={"z": float(row["z"]), "published_shots": int(row["published_shots"])})
        claim.value = float(row["delta"])
        claim.ci = (float(row["ci_low"]) - value, float(row["ci_high"]) - value)
        parts = published.DERIVED.get(row["task"], (row["task"],))
        rows = ours[(ours["model"] == row["model"]) & ours["task"].isin(parts) & (ours["metric"] == row["metric"])]
        measured = math.isfinite(float(row["ours"]))
        versions = _labels(rows, "lm_eval_version")
        claim.regime = (f"{int(row['n'])} documents" + (f" ({' + '.join(parts)})" if len(parts) > 1 else "")
                        + f"; {row['ours_setup']}" + (f" (lm-eval {versions} installed)" if versions else "")
                        + f"; {_made_by(rows, figures, full_set_evals.TABLE)}" if measured else
                        f"ours not in {full_set_evals.TABLE} (dtype not recorded, hardware not recorded)")
        claim.note = _published_note(row, parts, claim.verdict)
        claims.append(claim)
    return claims


def _published_note(row: pd.Series, parts: tuple[str, ...], word: str) -> str:
    """What a difference of this row can and cannot mean: the quantization of our copy, Instruct vs base, the
    published setup's prompt, shots and metric; ours as a number; and whether every planned task has finished."""
    notes = []
    if math.isfinite(float(row["ours"])):
        notes.append(f"ours {row['ours']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}] on {int(row['n'])} "
                     f"documents against {row['published']:g}, z = {row['z']:+.2f}")
    if int(row["published_shots"]) > 0:
        notes.append(f"the published number is {int(row['published_shots'])}-shot, ours 0-shot: not the same "
                     "measurement, so no verdict")
    if len(parts) > 1:
        notes.append(f"ours is the plain mean of {' and '.join(parts)} (each set weighs the same, as the published "
                     f"average), its stderr sqrt(sum of the squares) / {len(parts)}")
    notes.append(f"our weights are a 4-bit quantized copy ({_weights(row['model'])}), not the published ones: a "
                 "third party measured 0.5-1.3 points lost from Q8_0 to Q4_K_M on Gemma-2, so a gap of about a "
                 "point can come from quantization alone")
    if row["model"] in VARIANTS:
        notes.append(VARIANTS[row["model"]])
    if str(row["published_setup"]).startswith(published.LIGHTEVAL):
        notes.append("the card scores with lighteval's own prompts (HellaSwag's especially) and acc_norm_nospace "
                     "(divided by the choice's length in characters, the leading space not counted), we with "
                     "lm-eval's prompts and acc_norm (length in bytes, the space counted): the same idea, not the "
                     "same number, so a gap measures prompt and metric as much as weights")
    if row["reference"] == published.GEMMA3_CARD:
        notes.append("the card does not say which accuracy it reports: acc is assumed (interp/evals/published.py)")
    if str(row["complete"]) not in ("True", "1"):    # read back from the CSV as a bool (or 1/0)
        notes.append("partial: not every planned task has finished")
    if str(row.get("verdict", word)) != word:
        notes.append(f"the table's verdict column reads {row['verdict']}, not what its rule gives: recompute it "
                     f"(`interp figures --only {full_set_evals.NAME} --recompute --set evaluate=false`)")
    return "; ".join(notes)
