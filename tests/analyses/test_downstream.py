"""analyses/downstream.py: train_comparison's pair (or any run root) through `interp eval` into downstream.csv, with
each row's provenance, only the runs' final models, and the stored rows of models not evaluated this time kept."""

from __future__ import annotations

import pandas as pd
import pytest

from analyses import downstream as ds
from interp.widths import WidthSpec
from interp.jobs.training import run_experiment
from interp.training.experiments import Experiment, variant
from tests.training.test_experiments import corpus, micro_overrides  # noqa: F401  (module fixture)


def test_compute_evaluates_final_models_with_provenance_and_keeps_other_models(corpus, tmp_path, capsys):  # noqa: F811
    folder, _ = corpus
    exp = Experiment(name="pair", preset="micro", seeds=[0], root=tmp_path / "runs",
                     variants=[variant(WidthSpec()), variant(WidthSpec("cosine", 1.5, 0.5))],
                     overrides={**micro_overrides(folder), "ckpt_interval": 1})    # step checkpoints 1 and 2
    assert not run_experiment(exp).failed
    figures = tmp_path / "figures"
    figures.mkdir()
    stored = pd.DataFrame([{"source": "ours", "model": "smollm2-135m", "kind": "registry", "label": "",
                            "checkpoint": "", "task": "lambada_openai", "metric": "acc", "value": 0.5},
                           {"source": "ours", "model": "old-pair", "kind": "checkpoint", "label": "uniform",
                            "checkpoint": "runs/pair/uniform", "task": "lambada_openai", "metric": "acc",
                            "value": 0.4}])
    stored.to_csv(figures / ds.TABLE, index=False)   # a model evaluated before, not installed here; an old pair
    cfg = ds.Config(models=(), runs=(str(exp.root / exp.name),), tasks="lambada", limit=2,
                    out=str(tmp_path / "eval" / "t.parquet"))
    ds.compute(cfg, figures)
    assert "kept the stored rows of smollm2-135m" in capsys.readouterr().out
    df = pd.read_csv(figures / ds.TABLE)
    ours = df[(df["source"] == "ours") & (df["model"] != "smollm2-135m")]
    assert ours["checkpoint"].nunique() == 2                    # one final model per run, not every step
    assert not ours["checkpoint"].str.contains("step_000001").any(), ours["checkpoint"].tolist()
    assert ours["hardware"].str.contains("cores").all() and ours["git_commit"].notna().all()
    assert ours["setup"].str.fullmatch(r"lm-eval 0\.4\.\d+, 0-shot, interp eval").all()
    assert ours["data_sha256"].str.len().eq(64).all() and ours["model_key"].notna().all()
    assert set(ours["dtype"]) == {"float32"} and set(ours["batch_size"]) == {8}
    # a model with published rows too (the fresh table's): its own evaluated row is still kept
    assert ((df["model"] == "smollm2-135m") & (df["source"] == "ours")).sum() == 1
    assert ((df["model"] == "smollm2-135m") & (df["source"] == "published")).any()
    assert "old-pair" not in set(df["model"])                    # checkpoints: only the runs evaluated now
    assert list(df.columns) == list(ds.COLUMNS)
    assert ds.render(figures)[0].read_bytes()[:4] == b"\x89PNG"
    ds.compute(ds.Config(**{**cfg.__dict__, "keep": False}), figures)   # the eval table resumes: no evaluation
    again = pd.read_csv(figures / ds.TABLE)
    assert "smollm2-135m" not in set(again.loc[again["source"] == "ours", "model"])


def test_the_eval_figure_tables_take_only_columns_the_eval_table_has():
    """analyses/downstream.py and niah.py select their columns from interp eval's table by name."""
    from analyses import niah
    from interp.evals.table import TABLE_COLUMNS

    assert set(niah.COLUMNS) <= set(TABLE_COLUMNS)
    assert set(ds.PROVENANCE) <= set(TABLE_COLUMNS)


def test_checkpoints_inside_the_repo_are_named_relative_to_it():
    from analyses import REPO_ROOT, repo_relative

    assert repo_relative(str(REPO_ROOT / "runs" / "a" / "checkpoints")) == "runs/a/checkpoints"
    assert repo_relative("/elsewhere/run") == "/elsewhere/run" and repo_relative("") == ""
    assert repo_relative("smollm2-135m") == "smollm2-135m"   # a name, whatever the working directory


def test_derived_and_published_rows_are_rebuilt_from_the_table():
    """with_published: ours' ARC average is the plain mean of our ARC-Easy and ARC-Challenge rows (per model and
    metric, only where both parts are there), stale derived and published rows are replaced from published.py."""
    import math

    from interp.evals.published import PUBLISHED

    ours = [{"source": "ours", "model": m, "kind": "registry", "label": "", "checkpoint": "", "task": t,
             "metric": "acc_norm", "value": v, "stderr": s, "n": 200, "setup": "lm-eval 0.4.13, 0-shot, interp eval"}
            for m, t, v, s in (("a", "arc_easy", 0.465, 0.035), ("a", "arc_challenge", 0.28, 0.032),
                               ("b", "arc_easy", 0.5, 0.035))]
    stale = [{"source": "ours", "model": "a", "kind": "registry", "task": "arc_avg", "metric": "acc_norm",
              "value": 0.9}, {"source": "published", "model": "x", "task": "piqa", "metric": "acc", "value": 0.1}]
    df = ds.with_published(pd.DataFrame(ours + stale).reindex(columns=list(ds.COLUMNS)))
    avg = df[(df["source"] == "ours") & (df["task"] == "arc_avg")]
    assert avg["model"].tolist() == ["a"]                          # b lacks ARC-Challenge: no average
    assert avg["value"].iloc[0] == pytest.approx(0.3725) and avg["n"].iloc[0] == 400
    assert avg["stderr"].iloc[0] == pytest.approx(math.hypot(0.035, 0.032) / 2)
    assert avg["setup"].iloc[0].endswith("mean of arc_easy and arc_challenge")
    assert (df["source"] == "published").sum() == len(PUBLISHED) and "x" not in set(df["model"])
    assert list(df.columns) == list(ds.COLUMNS)
