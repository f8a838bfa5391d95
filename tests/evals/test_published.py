"""interp.evals.published, the one place that holds published numbers: each row names its source and its setup
consistently, the derived ARC average is computed as the SmolLM2 card computes it, and what figures/README.md's
downstream section quotes is generated from figures/downstream.csv and matches published.py (no model, no eval)."""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from analyses import REPO_ROOT
from analyses import downstream as ds
from interp.evals.published import DERIVED, PUBLISHED, derived_number, published_rows

DOWNSTREAM = REPO_ROOT / "figures" / ds.TABLE


def test_every_row_has_a_source_a_setup_and_its_shots():
    assert len({(p.model, p.task, p.metric, p.reference) for p in PUBLISHED}) == len(PUBLISHED)
    for p in PUBLISHED:
        assert p.reference.startswith("https://") and 0.0 < p.value < 1.0 and p.metric in ("acc", "acc_norm")
        shots = re.search(r"(\d+)-shot", p.setup)
        assert shots is not None and int(shots.group(1)) == p.shots, p
    card = [p for p in PUBLISHED if p.model == "smollm2-135m" and "model card" in p.setup]
    assert card and all("acc_norm_nospace" in p.setup and p.metric == "acc_norm" for p in card)
    assert {p.task for p in PUBLISHED} - set(DERIVED) <= set(ds.ACCURACY_TASKS)


def test_derived_number_is_the_plain_mean_of_independent_sets():
    value, stderr, n = derived_number([(0.465, 0.03, 200), (0.280, 0.04, 100)])
    assert value == pytest.approx((0.465 + 0.280) / 2) and n == 300
    assert stderr == pytest.approx(math.hypot(0.03, 0.04) / 2)
    with pytest.raises(ValueError, match="no parts"):
        derived_number([])


def test_downstream_table_holds_published_py_and_ours_arc_average():
    table = pd.read_csv(DOWNSTREAM)
    published = table[table["source"] == "published"].reset_index(drop=True)
    want = pd.DataFrame(published_rows())
    cols = ["model", "task", "metric", "value", "setup", "reference"]
    pd.testing.assert_frame_equal(published[cols], want[cols], check_dtype=False)
    ours = table[(table["source"] == "ours") & (table["model"] == "smollm2-135m") & (table["metric"] == "acc_norm")]
    by_task = ours.set_index("task")["value"]
    # the check: ours 0.3725 against the card's 0.373, the mean of ARC-Easy and ARC-Challenge acc_norm
    assert by_task["arc_avg"] == pytest.approx((by_task["arc_easy"] + by_task["arc_challenge"]) / 2, abs=1e-12)
    assert by_task["arc_avg"] == pytest.approx(0.3725, abs=1e-12)


def test_readme_downstream_section_is_generated_from_the_table():
    readme = (REPO_ROOT / "figures" / "README.md").read_text()
    section = readme[readme.index("## downstream.png"):readme.index("## downstream_groups.png")]
    assert ds.comparison_markdown(pd.read_csv(DOWNSTREAM)) in section
    assert "base model" not in section    # the third-party lm-eval run was of the Instruct model


def test_docs_call_0035_one_standard_error():
    for path in ("docs/evals.md", "figures/README.md", "analyses/downstream.py"):
        text = " ".join((REPO_ROOT / path).read_text().split())
        for hit in re.finditer(r"0\.035 (near|for|at)", text):
            window = text[max(0, hit.start() - 160):hit.end() + 160]
            assert "standard error" in window and "1.96" in window, (path, window)
