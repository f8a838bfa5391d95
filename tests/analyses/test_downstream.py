"""analyses/downstream.py: train_comparison's pair (or any run root) through `interp eval` into downstream.csv, with
each row's provenance, only the runs' final models, and the stored rows of models not evaluated this time kept."""

from __future__ import annotations

import pandas as pd

from analyses import downstream as ds
from interp.schedules import WidthSpec
from interp.training.experiments import Experiment, run_experiment, variant
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
