"""The report's section of our full-set evaluations beside the published numbers (analyses.report_evals): on a
synthetic full_set_vs_published.csv written by analyses.full_set_evals.comparison, each row's value and interval
recomputed here from the table (ours minus published, our CI moved by the published number), its verdict by the
rule written out again from ours, published, stderr and shots (not read from the table's verdict column), the new
verdict words counted in the summary and coloured in the HTML, the rule stated in the section's intro, and the
Markdown and the HTML the same; a missing table gives one "not measured" row with its command."""

from __future__ import annotations

import math
import re
import shutil

import pandas as pd
import pytest

from analyses import full_set_evals as fse
from analyses import report, report_render
from interp._util.paths import REPO_ROOT
from tests.analyses.test_full_set_evals import _eval_table
from tests.analyses.test_report_render import parse_html, parse_markdown, same_content

FIGURES = REPO_ROOT / "figures"
WORDS = ("consistent", "differs", "not comparable", "not measured")


def _tables(folder) -> pd.DataFrame:
    """The committed tables but the full-set ones, and synthetic full-set ones: SmolLM2 complete (five tasks
    planned), its HellaSwag far from both published numbers, its ARC average formed from two tasks; Gemma-3 with
    BoolQ unfinished. Returns the comparison table as written."""
    for pattern in ("*.csv", "*.meta.json"):
        for path in FIGURES.glob(pattern):
            if not path.name.startswith("full_set"):
                shutil.copy(path, folder)
    ours = _eval_table([("smollm2-135m", "hellaswag", "acc_norm", 0.470, 0.005, 10042),
                        ("smollm2-135m", "piqa", "acc_norm", 0.660, 0.011, 1838),
                        ("smollm2-135m", "arc_easy", "acc", 0.550, 0.010, 2376),
                        ("smollm2-135m", "arc_easy", "acc_norm", 0.480, 0.010, 2376),
                        ("smollm2-135m", "arc_challenge", "acc_norm", 0.290, 0.013, 1172),
                        ("gemma3-270m", "piqa", "acc", 0.670, 0.011, 1838),
                        ("gemma3-270m", "arc_easy", "acc", 0.600, 0.010, 2376)])
    ours = fse.ours_rows(ours.assign(hardware="AMD EPYC (2 cores)", lm_eval_version="0.4.13"))
    table = fse.comparison(ours, {"smollm2-135m": ["hellaswag", "piqa", "arc_easy", "arc_challenge"],
                                  "gemma3-270m": ["piqa", "arc_easy", "boolq"]})
    ours.to_csv(folder / fse.TABLE, index=False)
    table.to_csv(folder / fse.COMPARISON, index=False)
    return pd.read_csv(folder / fse.COMPARISON)


def _rule(ours: float, published: float, stderr: float, shots: int) -> str:
    """full_set_evals' RULE, written out again from the numbers."""
    if shots > 0:
        return "not comparable"
    if not math.isfinite(ours):
        return "not measured"
    return "consistent" if abs(ours - published) <= 1.959964 * stderr else "differs"


def test_each_published_number_is_a_row_with_its_difference_and_the_full_set_rule(tmp_path):
    table = _tables(tmp_path)
    report.render(tmp_path)
    md = parse_markdown((tmp_path / report.MARKDOWN).read_text())
    page = parse_html((tmp_path / report.HTML).read_text())
    same_content(md, page)
    claims = [c for c in report.claims(tmp_path) if c.rule is report.FULL_SET]
    assert len(claims) == len(table) == 13
    colours = dict(re.findall(r"<tr id='([^']+)' style='background:([^']+)'>", (tmp_path / report.HTML).read_text()))
    notes = {n.split(": ", 1)[0]: n for n in md["notes"]}
    seen = set()
    for c, (_, r) in zip(claims, table.iterrows(), strict=True):
        cells = md["rows"][c.id]
        assert cells[1] == (f"{r.model} scores {r.published:g} on {r.task} ({r.metric}) as published "
                            f"({r.published_setup})")
        want = _rule(r.ours, r.published, r.stderr, r.published_shots)
        assert cells[6] == c.verdict == want and colours[c.id] == report_render.COLORS[want]
        seen.add(want)
        if math.isfinite(r.ours):
            got = [float(x) for x in re.findall(r"[+-]\d+\.\d+", cells[4])]
            delta, low, high = r.ours - r.published, r.ci_low - r.published, r.ci_high - r.published
            assert got == [round(delta, 3), round(low, 3), round(high, 3)], (c.id, cells[4])
            assert f"{int(r.n)} documents" in cells[5] and "float32" in cells[5] and "AMD EPYC" in cells[5]
            assert f"ours {r.ours:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" in notes[c.id]
        else:
            assert cells[4] == "n/a [n/a, n/a]" and "ours not in full_set_evals.csv" in cells[5]
        note = notes[c.id]
        assert "4-bit quantized copy" in note
        assert ("partial: not every planned task has finished" in note) == (r.model == "gemma3-270m")
        assert ("acc_norm_nospace" in note) == ("lighteval" in r.published_setup)
        assert ("Instruct model as ours" in note) == (r.model == "smollm2-135m")
        assert "verdict column reads" not in note
    assert seen == set(WORDS)
    for word in WORDS:
        n = sum(r[6] == word for r in md["rows"].values())
        assert f"{n} {word}" in md["summary"] and n > 0
    assert "differs" in md["rows"]["published-smollm2-135m-hellaswag-acc_norm-third-party-lm-eval"][6]
    arc = table[table.task == "arc_avg"].iloc[0]           # the card's ARC average: the mean of both sets
    assert arc.ours == pytest.approx((0.480 + 0.290) / 2) and arc.n == 2376 + 1172
    assert "3548 documents (arc_easy + arc_challenge)" in \
        md["rows"]["published-smollm2-135m-arc_avg-acc_norm-model-card"][5]
    intro = md["intros"]["published"]
    assert fse.RULE in intro and "Our evaluations beside the published numbers" in md["rule"]


def test_a_stale_verdict_column_is_flagged_not_copied(tmp_path):
    table = _tables(tmp_path)
    table.loc[table["task"] == "hellaswag", "verdict"] = "consistent"
    table.to_csv(tmp_path / fse.COMPARISON, index=False)
    claims = {c.id: c for c in report.claims(tmp_path) if c.rule is report.FULL_SET}
    stale = claims["published-smollm2-135m-hellaswag-acc_norm-model-card"]
    assert stale.verdict == "differs" and "the table's verdict column reads consistent" in stale.note


def test_every_word_of_the_full_set_rule_has_a_colour_and_the_function_gives_only_those():
    assert set(report.FULL_SET.words) == set(WORDS) and set(WORDS) <= set(report_render.COLORS)
    for z, shots in ((0.5, 0), (-3.0, 0), (0.0, 10), (math.nan, 0)):
        claim = report.Claim("x", "s", "c", "m", "t.csv", 0, rule=report.FULL_SET,
                             basis={"z": z, "published_shots": shots})
        assert claim.verdict == fse.verdict(z, shots == 0) in WORDS


@pytest.mark.parametrize("folder", ["empty", "committed"])
def test_a_missing_comparison_table_is_one_row_not_measured_with_its_command(tmp_path, folder):
    if folder == "committed":
        for path in FIGURES.glob("*.csv"):
            if not path.name.startswith("full_set"):
                shutil.copy(path, tmp_path)
    rows = [c for c in report.claims(tmp_path) if c.rule is report.FULL_SET]
    assert len(rows) == 1 and rows[0].verdict == "not measured" and rows[0].missing == fse.NAME
    report.render(tmp_path)
    md = parse_markdown((tmp_path / report.MARKDOWN).read_text())
    same_content(md, parse_html((tmp_path / report.HTML).read_text()))
    assert md["rows"]["published"][4] == "not measured: interp figures --only full_set_evals --recompute"
    assert "0 consistent, 0 differs, 0 not comparable" in md["summary"]
    assert fse.RULE in md["intros"]["published"]
