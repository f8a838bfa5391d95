"""analyses.downstream_groups: the paper's evaluations on an experiment's checkpoints, summarised per variant over
seeds and paired with the baseline by seed; the statistics checked by hand, then end to end on micro runs."""

from __future__ import annotations

import math
import shutil

import pandas as pd
import pytest

from analyses import downstream_groups as dg
from interp.jobs.training import run_experiment
from interp.training.experiments import Experiment, variant
from interp.widths import WidthSpec
from tests.training.test_experiments import corpus, micro_overrides  # noqa: F401  (module fixture)

T_975_2 = 4.303   # Student t, 0.975 quantile, 2 degrees of freedom (printed tables)


def _rows(values: dict[str, list[float]], stderr: float, task="piqa", metric="acc") -> pd.DataFrame:
    return pd.DataFrame([{"variant": v, "label": v, "seed": s, "task": task, "metric": metric, "value": x,
                          "stderr": stderr, "n": 200} for v, xs in values.items() for s, x in enumerate(xs)])


def test_summary_pairs_by_seed_with_a_t_interval_and_the_documents_stderr():
    rows = _rows({"uniform": [0.50, 0.52, 0.51], "wider-early": [0.56, 0.59, 0.57]}, stderr=0.01)
    s = dg.summarize(rows, "uniform").set_index("variant")
    d = [0.06, 0.07, 0.06]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    assert s.loc["wider-early", "d_mean"] == pytest.approx(mean)
    assert s.loc["wider-early", "d_ci_high"] - mean == pytest.approx(T_975_2 * sd / math.sqrt(3), rel=1e-3)
    assert s.loc["wider-early", "d_doc_stderr"] == pytest.approx(math.sqrt(6 * 0.01 ** 2) / 3)
    assert s.loc["wider-early", "resolved"] and not s.loc["uniform", "resolved"]
    assert s.loc["uniform", "d_mean"] == 0 and math.isnan(s.loc["wider-early", "rel_pct_mean"])  # accuracy: no %
    # the same seed differences, but documents so noisy that 200 of them cannot tell: unresolved
    noisy = dg.summarize(_rows({"uniform": [0.50, 0.52, 0.51], "wider-early": [0.56, 0.59, 0.57]}, stderr=0.06),
                         "uniform").set_index("variant")
    assert noisy.loc["wider-early", "d_ci_low"] > 0 and not noisy.loc["wider-early", "resolved"]


def test_perplexities_get_a_paired_percentage_and_unpaired_seeds_are_left_out():
    rows = _rows({"uniform": [400.0, 410.0, 420.0], "wider-late": [440.0, 451.0]}, stderr=math.nan,
                 task="training_val", metric="val_ppl")
    s = dg.summarize(rows, "uniform").set_index("variant")
    assert s.loc["wider-late", "n_pairs"] == 2 and s.loc["wider-late", "n_seeds"] == 2
    assert s.loc["wider-late", "rel_pct_mean"] == pytest.approx(100 * (440 / 400 + 451 / 410 - 2) / 2)
    assert math.isnan(s.loc["wider-late", "d_doc_stderr"])   # no stderr (as lm-eval for perplexities)
    assert s.loc["uniform", "value_mean"] == pytest.approx(410.0)


def test_compute_evaluates_every_run_with_weights_then_renders(corpus, tmp_path, capsys):  # noqa: F811
    folder, _ = corpus
    exp = Experiment(name="groups-micro", preset="micro", seeds=[0, 1], root=tmp_path / "runs",
                     variants=[variant(WidthSpec()), variant(WidthSpec("cosine", 1.5, 0.5))],
                     overrides=micro_overrides(folder))
    assert not run_experiment(exp).failed
    gone = exp.run_dir(exp.variants[1], 1) / "model.safetensors"
    gone.unlink()                                                   # a run known only from its record
    cfg = dg.Config(runs=str(exp.root / exp.name), baseline="uniform", tasks="piqa,lambada", limit=2, threads=1,
                    out=str(tmp_path / "eval" / "t.parquet"))
    figures = tmp_path / "figures"
    dg.compute(cfg, figures)
    out = capsys.readouterr().out
    assert "skip cosine-1.5-0.5 seed 1: no weights" in out
    # PIQA's requests do not fit micro's 32-token context: that pair fails with the reason, the others go on
    assert out.count("/ piqa failed: piqa: a request with") == 3
    rows = pd.read_csv(figures / dg.RUNS_TABLE)
    assert set(zip(rows["task"], rows["metric"])) == {("lambada_openai", "acc"), ("lambada_openai", "perplexity"),
                                                       ("training_val", "val_ppl")}
    assert len(rows) == 3 * 3 and set(rows["n"].dropna()) == {2}
    assert rows["hardware"].str.contains("cores").all()
    evaluated = rows[rows["task"] != dg.TRAINING_VAL]
    assert set(evaluated["eval_dtype"]) == {"float32"} and set(evaluated["dtype"]) == {"float32"}  # eval, training
    val = rows[rows["task"] == "training_val"].set_index(["variant", "seed"])["value"]
    result = pd.read_json(exp.run_dir(exp.variants[0], 0) / "result.json", typ="series")
    assert val[("uniform", 0)] == pytest.approx(result["val_ppl"])
    summary = pd.read_csv(figures / dg.TABLE)
    cos = summary[(summary["variant"] == "cosine-1.5-0.5") & (summary["metric"] == "perplexity")].iloc[0]
    assert cos["n_seeds"] == 1 and cos["n_pairs"] == 1 and cos["seeds"] == "0"
    assert (figures / "downstream_groups.meta.json").is_file()
    assert dg.render(figures)[0].read_bytes()[:4] == b"\x89PNG"
    # the CLI entry point: the same table (the eval table resumes: nothing is evaluated again)
    from interp.cli import main

    argv = ["eval-experiment", cfg.runs, "--tasks", "piqa,lambada", "--limit", "2", "--threads", "1",
            "--out", cfg.out, "--figures-dir", str(tmp_path / "cli")]
    assert main(argv) == 0
    assert "cosine-1.5-0.5" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "cli" / dg.TABLE), summary)
    shutil.rmtree(exp.root)
    with pytest.raises(FileNotFoundError, match="no finished run with weights"):
        dg.compute(cfg, figures)
    assert main(argv) == 2 and "no finished run with weights" in capsys.readouterr().err


def test_device_is_checked_before_the_runs_are_listed(tmp_path, capsys):
    """`interp eval-experiment --device` (the option of interp eval): a typo, or a GPU this machine lacks, fails
    first, with the device's message, not "no finished run"."""
    import torch

    from interp.cli import main

    argv = ["eval-experiment", str(tmp_path / "none"), "--figures-dir", str(tmp_path / "fig")]
    assert main([*argv, "--device", "gpu"]) == 2
    assert "device='gpu': write cpu, cuda or cuda:N" in capsys.readouterr().err
    if not torch.cuda.is_available():
        assert main([*argv, "--device", "cuda"]) == 2
        assert "torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "fig").exists()


def test_nested_arms_pair_with_their_own_baseline():
    """architectures' "<mixer>/<width>": each arm's tapered model against that arm's uniform, never another's."""
    rows = _rows({"attention/uniform": [0.50, 0.52], "attention/cosine-1.5-0.5": [0.51, 0.54],
                  "titans/uniform": [0.60, 0.61], "titans/cosine-1.5-0.5": [0.62, 0.62]}, stderr=0.01)
    order = dg.variant_order(sorted(set(rows["variant"])), "uniform")
    assert order == ["attention/uniform", "attention/cosine-1.5-0.5", "titans/uniform", "titans/cosine-1.5-0.5"]
    s = dg.summarize(rows, "uniform", order).set_index("variant")
    assert list(s.index) == order
    assert s.loc["attention/cosine-1.5-0.5", "d_mean"] == pytest.approx(0.015)
    assert s.loc["titans/cosine-1.5-0.5", "d_mean"] == pytest.approx(0.015)   # vs titans/uniform (0.605), not 0.51
    assert s.loc["titans/uniform", "d_mean"] == 0 and not s.loc["titans/uniform", "resolved"]
    assert dg.baseline_of("wider-early", "uniform") == "uniform"


def _eval_architectures(corpus, tmp_path, mixers: tuple[str, ...], tasks: str, out) -> list[str]:
    """Train a micro architecture comparison of `mixers` under tmp_path and evaluate it with `interp
    eval-experiment` into `out`; the argv it ran."""
    from analyses import architectures as arch
    from interp.cli import main

    folder, _ = corpus
    cfg = arch.Config(preset="micro", seeds=1, mixers=mixers, root=str(tmp_path / "runs"),
                      overrides=micro_overrides(folder))
    exp = arch.experiment(cfg)
    assert not run_experiment(exp).failed
    argv = ["eval-experiment", str(exp.root / exp.name), "--tasks", tasks, "--limit", "2", "--threads", "1",
            "--out", str(tmp_path / "eval.parquet"), "--figures-dir", str(out)]
    assert main(argv) == 0
    return argv


def test_an_architectures_root_through_the_cli(corpus, tmp_path, capsys):  # noqa: F811
    """A root of nested arms (interp ablate architectures' layout) evaluated end to end from the shell."""
    out = tmp_path / "figures"
    argv = _eval_architectures(corpus, tmp_path, ("attention", "gated_attention"), "lambada", out)
    printed = capsys.readouterr().out
    assert "gated_attention/cosine-1.5-0.5" in printed and "vs gated_attention/uniform" in printed
    summary = pd.read_csv(out / dg.TABLE)
    assert list(dict.fromkeys(summary["variant"])) == ["attention/uniform", "attention/cosine-1.5-0.5",
                                                       "gated_attention/uniform", "gated_attention/cosine-1.5-0.5"]
    assert (summary["n_pairs"] == 1).all()
    assert summary["label"].str.startswith(("attention: ", "gated_attention: ")).all()
    assert (out / dg.FIGURE).is_file()
    # the registered analysis of the same root: its own file names, the same numbers (the eval table resumes)
    from analyses import downstream_architectures as da

    cfg = da.Config(runs=argv[1], tasks="lambada", limit=2, threads=1, out=str(tmp_path / "eval.parquet"))
    da.compute(cfg, tmp_path / "registered")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "registered" / da.TABLE), summary)
    assert da.render(tmp_path / "registered")[0].name == "downstream_architectures.png"
    assert (tmp_path / "registered" / "downstream_architectures_runs.meta.json").is_file()


def test_memory_mixers_go_through_the_evaluation(corpus, tmp_path, capsys):  # noqa: F811
    """Hope-attention and Titans checkpoints through lm-eval's loglikelihood and rolling paths (interp's model
    class), the way downstream_architectures evaluates them: finite numbers for every run, each paired with its
    own mixer's uniform model."""
    out = tmp_path / "figures"
    _eval_architectures(corpus, tmp_path, ("hope_attention", "titans"), "lambada,wiki_heldout", out)
    capsys.readouterr()
    rows = pd.read_csv(out / dg.RUNS_TABLE)
    assert set(rows["variant"]) == {"hope_attention/uniform", "hope_attention/cosine-1.5-0.5", "titans/uniform",
                                    "titans/cosine-1.5-0.5"}
    evaluated = rows[rows["task"] != "training_val"]
    assert set(evaluated["task"]) == {"lambada_openai", "wiki_heldout"}
    assert evaluated["value"].notna().all()
    assert (evaluated.loc[evaluated["metric"].str.contains("perplexity"), "value"] > 1).all()
    summary = pd.read_csv(out / dg.TABLE).set_index("variant")
    assert (summary.loc[["hope_attention/uniform", "titans/uniform"], "d_mean"] == 0).all()
