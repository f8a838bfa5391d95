"""analyses/full_set_evals: our full-set numbers beside the published ones, one verdict rule (RULE)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from analyses import full_set_evals as fse
from interp.evals.published import PUBLISHED


def _eval_table(rows: list[tuple[str, str, str, float, float, int]]) -> pd.DataFrame:
    """An interp eval table's columns, as merge_only returns them, for whole-set rows."""
    return pd.DataFrame([{"model": m, "task": t, "metric": k, "value": v, "stderr": s, "n": n, "n_docs": n,
                          "num_fewshot": 0, "status": "ok", "limit": float("nan"), "dtype": "float32"}
                         for m, t, k, v, s, n in rows])


def test_plan_entries_parse_and_a_bad_one_names_the_form():
    assert fse.parse_plan(("smollm2-135m:piqa,boolq", "org/name@rev:arc_easy")) == [
        ("smollm2-135m", ["piqa", "boolq"]), ("org/name@rev", ["arc_easy"])]
    with pytest.raises(ValueError, match=r"'piqa'.*MODEL:TASK"):
        fse.parse_plan(("piqa",))


def test_ours_keeps_whole_set_rows_and_forms_the_95_interval():
    table = _eval_table([("m", "piqa", "acc", 0.6, 0.01, 1838), ("m", "piqa", "acc_norm", 0.62, 0.011, 1838)])
    limited = table.iloc[:1].assign(limit=200.0)
    ours = fse.ours_rows(pd.concat([table, limited], ignore_index=True))
    assert len(ours) == 2                                        # a --limit row is not a full-set row
    row = ours[ours["metric"] == "acc"].iloc[0]
    assert row["ci_low"] == pytest.approx(0.6 - 1.959964 * 0.01) and row["ci_high"] == pytest.approx(0.619600, 1e-5)


def test_the_card_average_of_arc_is_the_mean_of_both_sets():
    ours = fse.ours_rows(_eval_table([("m", "arc_easy", "acc_norm", 0.45, 0.010, 2376),
                                      ("m", "arc_challenge", "acc_norm", 0.30, 0.013, 1172)]))
    value, stderr, n = fse.our_number(ours, "m", "arc_avg", "acc_norm")
    assert value == pytest.approx(0.375) and n == 3548
    assert stderr == pytest.approx(math.sqrt(0.010 ** 2 + 0.013 ** 2) / 2)
    assert fse.our_number(ours, "m", "arc_avg", "acc") is None


def test_verdicts_follow_the_rule_and_few_shot_numbers_are_not_compared():
    assert fse.verdict(1.9, True) == "consistent" and fse.verdict(-2.1, True) == "differs"
    assert fse.verdict(0.0, False) == "not comparable" and fse.verdict(math.nan, True) == "not measured"


def test_comparison_rows_cover_every_published_number_of_a_planned_model():
    gemma = [p for p in PUBLISHED if p.model == "gemma3-270m"]
    rows = [("gemma3-270m", p.task, p.metric, p.value + 0.03, 0.01, 1000) for p in gemma if p.task == "piqa"]
    table = fse.comparison(fse.ours_rows(_eval_table(rows)), {"gemma3-270m": ["piqa", "boolq"]})
    assert len(table) == len(gemma) and set(table["model"]) == {"gemma3-270m"}
    piqa = table[table["task"] == "piqa"].iloc[0]
    assert piqa["z"] == pytest.approx(3.0) and piqa["verdict"] == "differs" and not piqa["complete"]
    assert set(table.loc[table["task"] == "boolq", "verdict"]) == {"not measured"}
    few_shot = table[table["published_shots"] > 0]
    assert len(few_shot) and set(few_shot["verdict"]) == {"not comparable"}


def test_the_readme_block_is_the_committed_tables():
    """figures/README.md quotes the full-set tables between markers: exactly what comparison_markdown makes of the
    committed CSVs (rerun the block after `interp figures --only full_set_evals --recompute`)."""
    from interp._util.paths import REPO_ROOT

    figures = REPO_ROOT / "figures"
    text = (figures / "README.md").read_text(encoding="utf-8")
    block = text.split("<!-- begin:full_set -->\n", 1)[1].split("\n<!-- end:full_set -->", 1)[0]
    expected = fse.comparison_markdown(pd.read_csv(figures / fse.TABLE), pd.read_csv(figures / fse.COMPARISON))
    assert block == expected
