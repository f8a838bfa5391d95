"""Multi-run experiments: variant sets, resumable runner, failure isolation, collect, t-statistics, figures.

Training tests use the `micro` preset (2-3 layers, d_model 32) for 2 steps on a synthetic corpus with a
tiny BPE in a temporary INTERP_CACHE_DIR (the pattern of tests/training/test_train.py), so each run takes a
fraction of a second; nothing here trains the 8k BPE or the tiny model.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analyses
from analyses import group_ablation, schedule_sweep
from interp._util.paths import RESULT_FILE
from interp.cli import build_parser, main
from interp.cli.experiment import config_from_args
from interp.model import param_counts
from interp.widths import WidthSpec
from interp.stats import mean_ci, t_cdf, t_quantile
from interp.training import TrainConfig, Trainer
from interp.training.experiments import (
    Experiment,
    Variant,
    check_equal_params,
    group_variants,
    sweep_variants,
    variant,
)
from interp.jobs.runs import describe
from interp.jobs.training import run_experiment
from interp.training.results import ERROR_FILE, RUN_COLUMNS, collect, experiment_runs, summarize
from interp.training.presets import PRESETS
from tests.factories import write_corpus

WORDS = "the cat dog sat ran on over a big small red old house tree river and with then she saw".split()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, module_cache):
    """(corpus folder, TokenData) with a private INTERP_CACHE_DIR for the module."""
    from interp.data import prepare_tokens

    folder = write_corpus(tmp_path_factory.mktemp("experiments") / "corpus", n_docs=24, sentences=40, words=WORDS,
                          sentence_len=8)
    data = prepare_tokens(str(folder), "bpe", PRESETS["micro"]["vocab_size"], val_fraction=0.25)
    return folder, data


def micro_overrides(folder: Path) -> dict:
    return dict(source=str(folder), val_fraction=0.25, steps=2, warmup_steps=1, eval_batches=1, threads=1,
                log_interval=1, progress=False)


def two_by_two(folder: Path, root: Path, **overrides) -> Experiment:
    """2 variants (uniform, cosine 1.5->0.5 on 2 layers: widths 64/64 and 96/32) x 2 seeds."""
    return Experiment(name="exp", preset="micro", seeds=[0, 1], root=root,
                      variants=[variant(WidthSpec()), variant(WidthSpec("cosine", 1.5, 0.5))],
                      overrides={**micro_overrides(folder), **overrides})


def forbid_training(monkeypatch):
    def fail(self, *args, **kwargs):
        raise AssertionError(f"Trainer.run called for {self.cfg.out_dir}, which had finished")
    monkeypatch.setattr(Trainer, "run", fail)


# ------------------------------------------------------------------------------------------ variants

def test_sweep_has_16_variants_and_every_set_has_equal_params():
    sweep = sweep_variants()
    assert len(sweep) == 16 and len({v.name for v in sweep}) == 16 and sweep[0].name == "uniform"
    assert {v.width.schedule for v in sweep[1:]} == {"linear", "cosine", "sigmoid"}
    assert all(v.width.start + v.width.end == pytest.approx(2.0) for v in sweep[1:])
    assert [v.name for v in group_variants()] == ["uniform", "wider-early", "wider-middle", "wider-late"]
    for preset in ("tiny", "440m"):
        for variants in (sweep, group_variants()):
            cfgs = [TrainConfig.from_preset(preset, width=v.width) for v in variants]
            totals = {param_counts(c.model_config(c.vocab_size))["total"] for c in cfgs}
            assert len(totals) == 1 and check_equal_params(cfgs) == totals.pop()
            assert len({tuple(c.model_config(c.vocab_size).d_mlp) for c in cfgs}) == len(variants)


def test_unequal_params_are_refused():
    cfgs = [TrainConfig.from_preset("tiny"),
            TrainConfig.from_preset("tiny", d_ff=1040, schedule="cosine", start=1.5, end=0.5)]
    with pytest.raises(ValueError, match="differ in parameter count"):
        check_equal_params(cfgs)


def test_experiment_layout_order_and_bad_input(tmp_path):
    exp = two_by_two(Path("corpus"), tmp_path)
    runs = exp.configs()
    assert [(v.name, s) for v, s, _ in runs] == [("uniform", 0), ("cosine-1.5-0.5", 0),
                                                 ("uniform", 1), ("cosine-1.5-0.5", 1)]  # seed-major
    assert runs[1][2].out_dir == str(tmp_path / "exp" / "cosine-1.5-0.5" / "seed0")
    assert all(cfg.resume and cfg.steps == 2 and cfg.preset == "micro" for _, _, cfg in runs)
    with pytest.raises(ValueError, match="may not set \\['seed'\\]"):
        Experiment("e", "micro", group_variants(), [0], overrides={"seed": 3})
    with pytest.raises(ValueError, match="may not set \\['schedule'\\]"):
        Experiment("e", "micro", group_variants(), [0], overrides={"schedule": "cosine"})
    coarse = Experiment("e", "tiny", sweep_variants(), [0], overrides={"multiple": 128}).configs()
    assert all(c.width.multiple == 128 and all(w % 128 == 0 for w in c.model_config(8192).d_mlp)
               for _, _, c in coarse)
    assert coarse[9][2].width.label == sweep_variants()[9].label  # still its own variant
    with pytest.raises(ValueError, match="unique"):
        Experiment("e", "micro", group_variants(), [0, 0])


def test_a_variant_is_a_name_plus_any_overrides(tmp_path):
    """Variants may set any TrainConfig field (here lr, or mixer + width under nested names); the experiment
    may not share a field a variant sets, and equal parameters are checked within `equal_params_within`."""
    lr = [Variant("lr-1e-2", {"lr": 1e-2}), Variant("lr-3e-3", {"lr": 3e-3, "min_lr": 3e-4})]
    exp = Experiment("lr", "micro", lr, [0], root=tmp_path, overrides={"steps": 5, "warmup_steps": 1})
    cfgs = {v.name: cfg for v, _, cfg in exp.configs()}
    assert (cfgs["lr-1e-2"].lr, cfgs["lr-3e-3"].lr, cfgs["lr-3e-3"].min_lr) == (1e-2, 3e-3, 3e-4)
    assert cfgs["lr-1e-2"].width == WidthSpec() and lr[0].label == "lr-1e-2"  # no width: the preset's uniform
    with pytest.raises(ValueError, match="may not set \\['lr'\\]"):
        Experiment("lr", "micro", lr, [0], overrides={"lr": 1.0})
    arms = [variant(w, mixer=m) for m in ("attention", "gated_attention") for w in (WidthSpec(), WidthSpec("cosine", 1.5, 0.5))]
    arms = [Variant(f"{v.overrides['mixer']}/{v.name}", v.overrides) for v in arms]
    mixed = Experiment("arms", "micro", arms, [0, 1], root=tmp_path, overrides={"multiple": 8})
    with pytest.raises(ValueError, match="differ in parameter count"):  # attention vs gated attention
        check_equal_params(cfg for _, _, cfg in mixed.configs())
    mixed.equal_params_within = ("mixer",)
    runs = mixed.configs()
    assert [(v.name, s) for v, s, _ in runs][:4] == [("attention/uniform", 0), ("attention/cosine-1.5-0.5", 0),
                                                     ("gated_attention/uniform", 0),
                                                     ("gated_attention/cosine-1.5-0.5", 0)]
    assert runs[3][2].out_dir == str(tmp_path / "arms" / "gated_attention" / "cosine-1.5-0.5" / "seed0")
    assert runs[3][2].mixer == "gated_attention" and runs[3][2].width == WidthSpec("cosine", 1.5, 0.5, multiple=8)
    assert check_equal_params((cfg for _, _, cfg in runs), ("mixer",)) is None  # two groups, two counts
    plan = describe(mixed)
    assert "arms: 8 runs (4 variants x 2 seeds)" in plan and "params each" not in plan and plan.count("to train") == 8
    with pytest.raises(ValueError, match="relative directory names"):
        Experiment("bad", "micro", [Variant("../up", {})], [0])
    with pytest.raises(ValueError, match="relative directory names"):
        Experiment("bad", "micro", [Variant("a/seed3", {})], [0])


def test_nested_variants_train_collect_and_tabulate(corpus, tmp_path):
    folder, data = corpus
    arms = [Variant(f"{m}/{v.name}", {**v.overrides, "mixer": m})
            for m in ("attention", "gated_attention") for v in (variant(WidthSpec()), variant(WidthSpec("cosine", 1.5, 0.5)))]
    exp = Experiment("arms", "micro", arms, [0], root=tmp_path, overrides=micro_overrides(folder),
                     equal_params_within=("mixer",))
    report = run_experiment(exp, data=data, log=None)
    assert [r.status for r in report.runs] == ["done"] * 4 and report.params is None and "params each" not in report.summary()
    runs = experiment_runs(exp)
    assert list(runs["variant"]) == [v.name for v in arms] and set(runs["experiment"]) == {"arms"}
    assert runs.groupby(runs["variant"].str.split("/").str[0])["params"].nunique().eq(1).all()
    assert runs["params"].nunique() == 2


# ------------------------------------------------------------------------------------------ running

def test_runs_collect_and_a_rerun_skips_every_finished_run(corpus, tmp_path, monkeypatch):
    folder, data = corpus
    exp = two_by_two(folder, tmp_path)
    report = run_experiment(exp, data=data, log=None)
    assert [r.status for r in report.runs] == ["done"] * 4 and report.exit_code == 0
    df = collect(tmp_path)
    assert list(df.columns) == RUN_COLUMNS and len(df) == 4 and set(df["status"]) == {"done"}
    assert df["params"].nunique() == 1 and df["params"].iloc[0] == report.params
    import hashlib

    for run_dir, weights in zip(df["run_dir"], df["weights_sha256"]):   # the final weights, hashed independently
        assert weights == hashlib.sha256((Path(run_dir) / "model.safetensors").read_bytes()).hexdigest()
    assert sorted(df["widths"].unique()) == ["64/64", "96/32"]
    assert set(df["steps"]) == {2} and set(df["tokens"]) == {2 * 8 * 32} and set(df["preset"]) == {"micro"}
    assert set(df["tokenizer_hash"]) == {data.meta["tokenizer_hash"]} and set(df["source"]) == {str(folder)}
    assert df["versions"].str.contains("torch=").all() and (df["val_ppl"] > 1).all()
    np.testing.assert_allclose(df["val_ppl"], np.exp(df["val_loss"]), rtol=1e-9)
    # two seeds give two different models of the same variant
    assert df.groupby("variant")["val_loss"].nunique().eq(2).all()

    forbid_training(monkeypatch)
    again = run_experiment(exp, data=data, log=None)
    assert [r.status for r in again.runs] == ["skipped"] * 4 and again.exit_code == 0
    assert collect(tmp_path).drop(columns="elapsed_s").equals(df.drop(columns="elapsed_s"))


def test_a_failing_run_is_reported_and_the_others_finish(corpus, tmp_path, monkeypatch):
    folder, data = corpus
    exp = two_by_two(folder, tmp_path)
    broken = str(exp.run_dir(exp.variants[1], 0))
    original = Trainer.run

    def flaky(self, *args, **kwargs):
        if self.cfg.out_dir == broken:
            raise RuntimeError("simulated out-of-memory")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "run", flaky)
    report = run_experiment(exp, data=data, log=None)
    assert [r.status for r in report.runs] == ["done", "failed", "done", "done"]
    assert report.exit_code == 1 and "simulated out-of-memory" in report.summary()
    traceback_text = (Path(broken) / ERROR_FILE).read_text()
    assert "Traceback" in traceback_text and "RuntimeError: simulated out-of-memory" in traceback_text
    df = collect(tmp_path).set_index("run_dir")
    assert df.loc[broken, "status"] == "failed" and "simulated" in df.loc[broken, "error"]
    assert (df.drop(index=broken)["status"] == "done").all()

    monkeypatch.setattr(Trainer, "run", original)  # the cause is fixed: the rerun trains only that run
    again = run_experiment(exp, data=data, log=None)
    assert [r.status for r in again.runs] == ["skipped", "done", "skipped", "skipped"] and again.exit_code == 0
    assert not (Path(broken) / ERROR_FILE).exists() and set(collect(tmp_path)["status"]) == {"done"}


def test_interrupt_stops_the_experiment_and_resume_continues(corpus, tmp_path, monkeypatch):
    folder, data = corpus
    exp = two_by_two(folder, tmp_path, steps=4)
    original = Trainer.run
    monkeypatch.setattr(Trainer, "run", lambda self: original(self, stop_at=2))  # like a SIGINT after step 2
    report = run_experiment(exp, data=data, log=None)
    assert [r.status for r in report.runs] == ["interrupted", "pending", "pending", "pending"]
    assert report.exit_code == 130
    first = exp.run_dir(exp.variants[0], 0)
    assert json.loads((first / RESULT_FILE).read_text())["step"] == 2
    assert collect(tmp_path)["status"].tolist() == ["interrupted"]
    monkeypatch.setattr(Trainer, "run", original)
    again = run_experiment(exp, data=data, log=None)
    assert again.exit_code == 0 and json.loads((first / RESULT_FILE).read_text())["step"] == 4


def test_a_stop_signal_raises_after_the_report_and_writes_no_table(corpus, tmp_path, monkeypatch):
    """Issue #33 items 7 and 30: a SIGTERM that the Trainer turned into "interrupted" is the whole command's stop:
    run_experiment prints its report (the run stated as interrupted and resumable) and raises Interrupted (exit
    143), so the analysis that called it writes no table from the interrupted run."""
    import signal

    from interp._util import children

    folder, data = corpus
    monkeypatch.setattr(children, "_STOP", [])      # this process's stop record, restored after the test
    exp = two_by_two(folder, tmp_path, steps=4)
    original = Trainer.run

    def sigterm_after_step_2(self):
        children.request_stop(signal.SIGTERM)       # what the Trainer's StopFlag does on SIGTERM
        return original(self, stop_at=2)

    monkeypatch.setattr(Trainer, "run", sigterm_after_step_2)
    said: list[str] = []
    with pytest.raises(children.Interrupted) as stop:
        run_experiment(exp, data=data, log=said.append)
    assert stop.value.signum == signal.SIGTERM and children.exit_status(stop.value) == 143
    summary = said[-1]
    assert "1 interrupted" in summary and "3 pending" in summary, summary
    assert "interrupted uniform seed0 (stop_at=2): resumable" in summary
    assert json.loads((exp.run_dir(exp.variants[0], 0) / RESULT_FILE).read_text())["status"] == "interrupted"


def test_abandoned_and_locked_runs_are_stated_as_what_they_are(corpus, tmp_path, monkeypatch):
    """Items 9 and 30: a run folder whose lock a live process holds is "running elsewhere": neither trained nor
    written to (no error.txt), not failed; a saved state with no result and no holder is "abandoned" (a killed
    runner's), resumed and said so; a finished-then-torn one likewise."""
    from interp._util.io import exclusive_lock
    from interp._util.paths import TRAIN_STATE_FILE
    from interp._util.paths import RUN_LOCK_FILE as RUN_LOCK
    from interp._util.states import RUNNING
    from interp.jobs.runs import lock_holder, run_state
    from interp.training.run_dir import LOCK_FILE

    assert RUN_LOCK == LOCK_FILE
    folder, data = corpus
    exp = two_by_two(folder, tmp_path)
    exp.seeds = [0]
    assert run_experiment(exp, data=data, log=None).exit_code == 0
    first, second = (exp.run_dir(v, 0) for v in exp.variants)
    (first / RESULT_FILE).unlink()                  # killed after its last save: an abandoned run
    assert lock_holder(first) is None and run_state(first).startswith("abandoned: train_state.pt but")
    assert (first / TRAIN_STATE_FILE).is_file()
    (second / RESULT_FILE).unlink()
    said: list[str] = []
    with exclusive_lock(second / RUN_LOCK, "test holder"):   # another process trains the second run
        assert lock_holder(second) == str(__import__("os").getpid())
        assert "running elsewhere" in describe(exp) and "to resume" in describe(exp)
        report = run_experiment(exp, data=data, log=said.append)
    assert [r.status for r in report.runs] == ["done", RUNNING] and report.exit_code == 1
    assert not (second / ERROR_FILE).exists() and not (second / RESULT_FILE).exists()
    text = "\n".join(said)
    assert "uniform seed0: training -> " in text and "(abandoned: train_state.pt but no finished result.json" in text
    assert f"cosine-1.5-0.5 seed0: running elsewhere: pid {__import__('os').getpid()} holds" in text
    assert "FAILED" not in text and "another live process holds" in report.summary()


def test_changed_config_is_failed_not_reused_and_marked_stale(corpus, tmp_path):
    folder, data = corpus
    exp = two_by_two(folder, tmp_path)
    run_experiment(exp, data=data, log=None)
    longer = two_by_two(folder, tmp_path, steps=3)
    report = run_experiment(longer, data=data, log=None)
    assert {r.status for r in report.runs} == {"failed"} and "steps: 2 -> 3" in report.failed[0].error
    assert set(experiment_runs(longer)["status"]) == {"stale"}
    assert set(experiment_runs(exp)["status"]) == {"done"}


# ------------------------------------------------------------------------------------------ statistics

def test_t_quantile_matches_a_printed_t_table():
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 9: 2.262, 10: 2.228, 20: 2.086, 30: 2.042,
             120: 1.980}
    for df, t in table.items():
        assert t_quantile(0.975, df) == pytest.approx(t, abs=5e-4)
    assert t_quantile(0.995, 2) == pytest.approx(9.925, abs=5e-4)
    assert t_quantile(0.025, 2) == pytest.approx(-4.303, abs=5e-4)
    assert t_cdf(0.0, 3) == pytest.approx(0.5)
    assert t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy: 1/2 + atan(1)/pi
    assert t_quantile(0.975, 10_000) == pytest.approx(1.95996, abs=1e-3)  # -> normal
    with pytest.raises(ValueError, match="p must be in"):
        t_quantile(1.0, 3)


def test_mean_ci_and_paired_differences_by_hand():
    ppl = {"uniform": [20.0, 22.0, 21.0], "wider-early": [19.0, 21.5, 19.6]}
    rows = [{"variant": v, "label": v, "seed": s, "status": "done", "params": 100, "val_ppl": p,
             "val_loss": math.log(p), "schedule": "profile", "start": 1.0, "end": 1.0, "widths": "x",
             "steps": 5, "tokens": 10} for v, ps in ppl.items() for s, p in enumerate(ps)]
    rows.append({**rows[0], "status": "failed", "val_ppl": 1e9, "val_loss": 99.0})  # ignored
    summary = summarize(pd.DataFrame(rows), order=["uniform", "wider-early"]).set_index("variant")
    # by hand: diffs -1.0, -0.5, -1.4; mean -0.9667; sd 0.45092; t(0.975, 2) = 4.302653
    d = [-1.0, -0.5, -1.4]
    mean = sum(d) / 3
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / 2)
    half = 4.302653 * sd / math.sqrt(3)
    row = summary.loc["wider-early"]
    assert row["d_val_ppl_mean"] == pytest.approx(-0.966667, abs=1e-6)
    assert (row["d_val_ppl_ci_low"], row["d_val_ppl_ci_high"]) == (pytest.approx(mean - half, abs=1e-5),
                                                                   pytest.approx(mean + half, abs=1e-5))
    # pairing removes the spread the variants share: the paired CI is far narrower than the unpaired one
    assert row["d_val_ppl_ci_high"] - row["d_val_ppl_ci_low"] < 0.5 * (row["val_ppl_ci_high"] - row["val_ppl_ci_low"])
    assert row["val_ppl_mean"] == pytest.approx(20.033333, abs=1e-6)
    rel = [100 * (a / b - 1) for a, b in zip(ppl["wider-early"], ppl["uniform"])]
    assert row["rel_val_ppl_pct_mean"] == pytest.approx(sum(rel) / 3)
    base = summary.loc["uniform"]
    assert base["n_seeds"] == 3 and base["d_val_ppl_mean"] == 0 and base["d_val_ppl_ci_high"] == 0
    assert math.isnan(mean_ci([1.0])[1]) and mean_ci([1.0])[0] == 1.0
    rows[3]["params"] = 101
    with pytest.raises(ValueError, match="parameter count"):
        summarize(pd.DataFrame(rows))


# ------------------------------------------------------------------------------------------ figures, CLI

def synthetic_summary(variants, paper: dict[str, float]) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for v in variants:
        ppl = [100 + rng.normal(0, 2) for _ in range(3)]
        rows += [{"variant": v.name, "label": v.label, "seed": s, "status": "done", "params": 10,
                  "val_ppl": p, "val_loss": math.log(p), "schedule": v.width.schedule, "start": v.width.start,
                  "end": v.width.end, "widths": "1/2", "steps": 5, "tokens": 10} for s, p in enumerate(ppl)]
    runs = pd.DataFrame(rows)
    return group_ablation.with_paper(summarize(runs, order=[v.name for v in variants]), paper), runs


@pytest.mark.parametrize("module, variants", [(group_ablation, group_variants()), (schedule_sweep, sweep_variants())])
def test_render_from_a_synthetic_table(tmp_path, module, variants):
    summary, runs = synthetic_summary(variants, module.PAPER_VAL_PPL)
    analyses.write_table(summary, tmp_path, module.TABLE, module.Config(), module.NAME)
    analyses.write_table(runs, tmp_path, module.RUNS_TABLE, module.Config(), module.NAME)
    (png,) = module.render(tmp_path)
    assert png == tmp_path / module.FIGURE and png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000
    assert set(module.OUTPUTS) >= {module.TABLE, module.RUNS_TABLE, module.FIGURE}


def test_paper_numbers_are_keyed_by_variant_names():
    assert set(schedule_sweep.PAPER_VAL_PPL) == {v.name for v in sweep_variants()}
    assert schedule_sweep.PAPER_VAL_PPL["cosine-1.5-0.5"] == 14.44
    assert schedule_sweep.PAPER_VAL_PPL["sigmoid-1.75-0.25"] == 17.12
    assert set(group_ablation.PAPER_VAL_PPL) == {v.name for v in group_variants()}


def test_cli_parses_into_the_analysis_config():
    args = build_parser().parse_args(["ablate", "groups", "--preset", "tiny", "--seeds", "3", "--steps", "40",
                                      "--only", "uniform,wider-late", "--dtype", "bf16", "--set", "grad_accum=2"])
    cfg = config_from_args(group_ablation, args, "interp ablate groups")
    assert (cfg.preset, cfg.seeds, cfg.steps, cfg.only, cfg.dtype, cfg.overrides) == (
        "tiny", 3, 40, ("uniform", "wider-late"), "bf16", {"grad_accum": 2})
    exp = group_ablation.experiment(cfg)
    assert exp.name == "groups-tiny" and [v.name for v in exp.variants] == ["uniform", "wider-late"]
    assert exp.seeds == [0, 1, 2] and exp.overrides == {"grad_accum": 2, "dtype": "bf16", "steps": 40}
    sweep = config_from_args(schedule_sweep, build_parser().parse_args(["sweep"]), "interp sweep")
    assert sweep.seeds == 3 and len(schedule_sweep.experiment(sweep).variants) == 16
    # every training study defaults to fp32 (the same numbers on either CPU kind) and takes the precision once
    assert schedule_sweep.experiment(sweep).overrides["dtype"] == "fp32"
    assert group_ablation.experiment(group_ablation.Config()).overrides["dtype"] == "fp32"
    disagree = config_from_args(group_ablation, build_parser().parse_args(
        ["ablate", "groups", "--set", "dtype=bf16"]), "interp ablate groups")
    with pytest.raises(ValueError, match="disagree"):
        group_ablation.experiment(disagree)
    with pytest.raises(ValueError, match="unknown variant"):
        group_ablation.experiment(group_ablation.Config(only=("wider-sideways",)))


def test_cli_end_to_end_groups_then_rerun(corpus, tmp_path, capsys, monkeypatch):
    folder, _ = corpus
    sets = [f"--set={k}={json.dumps(v)}" for k, v in {**micro_overrides(folder), "n_layers": 3}.items()]
    argv = ["ablate", "groups", "--preset", "micro", "--seeds", "2", "--root", str(tmp_path / "runs"),
            "--figures-dir", str(tmp_path / "figures"), *sets]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "8 runs" in out and "8 done" in out and "wider-early" in out and "16.28" in out
    summary = pd.read_csv(tmp_path / "figures" / group_ablation.TABLE)
    assert summary["variant"].tolist() == ["uniform", "wider-early", "wider-middle", "wider-late"]
    assert (summary["n_seeds"] == 2).all() and summary["params"].nunique() == 1
    assert (tmp_path / "figures" / group_ablation.FIGURE).is_file()
    runs = pd.read_csv(tmp_path / "figures" / group_ablation.RUNS_TABLE)
    assert len(runs) == 8 and runs["widths"].nunique() == 4
    forbid_training(monkeypatch)
    assert main(argv) == 0 and "8 skipped" in capsys.readouterr().out
    # --no-train on a root without runs: header-only tables, a message, exit 0
    empty = ["ablate", "groups", "--no-train", "--root", str(tmp_path / "none"), "--figures-dir", str(tmp_path / "f")]
    assert main(empty) == 0 and "no finished runs" in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "f" / group_ablation.TABLE).empty


def test_records_let_an_experiment_continue_on_a_machine_without_its_runs(corpus, tmp_path, capsys, monkeypatch):
    """runs/ is never committed; the records (config.json + result.json per finished run, beside the tables)
    are: on a fresh machine a recorded run is skipped, its row read from the record, and only new runs train."""
    import shutil

    folder, _ = corpus
    sets = [f"--set={k}={json.dumps(v)}" for k, v in {**micro_overrides(folder), "n_layers": 3}.items()]
    root, figures = tmp_path / "runs", tmp_path / "figures"
    argv = ["ablate", "groups", "--preset", "micro", "--only", "uniform,wider-late", "--root", str(root),
            "--figures-dir", str(figures), *sets]
    assert main([*argv, "--seeds", "1"]) == 0
    records = figures / group_ablation.RECORDS_DIR / "groups-micro"
    names = [f"{v}/seed0/{f}" for v in ("uniform", "wider-late") for f in ("config.json", "result.json")]
    assert sorted(str(p.relative_to(records)) for p in records.rglob("*") if p.is_file()) == sorted(names)
    before = pd.read_csv(figures / group_ablation.RUNS_TABLE)
    shutil.rmtree(root)  # a fresh clone: the weights are gone, the committed records are not
    capsys.readouterr()

    assert main([*argv, "--seeds", "1", "--dry-run"]) == 0
    assert capsys.readouterr().out.count(" recorded ") == 2
    forbid_training(monkeypatch)
    assert main([*argv, "--seeds", "1"]) == 0
    out = capsys.readouterr().out
    assert "2 skipped" in out and out.count("recorded in") == 2
    after = pd.read_csv(figures / group_ablation.RUNS_TABLE)
    assert after.drop(columns="run_dir").equals(before.drop(columns="run_dir"))
    assert after["run_dir"].str.startswith(str(records)).all() and after["hardware"].notna().all()

    monkeypatch.undo()  # one more seed: only its two runs train, the recorded seed 0 is kept
    assert main([*argv, "--seeds", "2"]) == 0
    assert "2 skipped, 2 done" in capsys.readouterr().out
    assert len(list(records.rglob("result.json"))) == 4
    summary = pd.read_csv(figures / group_ablation.TABLE)
    assert (summary["n_seeds"] == 2).all() and (summary["n_pairs"] == 2).all()

    # a record of another config is never taken for this one: other steps, everything to train
    assert main([*argv, "--seeds", "1", "--steps", "3", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert out.count(" to train ") == 2 and "recorded" not in out
