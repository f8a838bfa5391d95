"""Architecture comparison (analyses/architectures.py): arms, budget, tables from run directories, figure, smoke run.

Tables are checked against fake run directories whose perplexities are chosen here, so the paired
changes are recomputed by hand; the smoke run trains the `micro` preset for 2 steps on random tokens.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

import analyses
from analyses import architectures as arch
from interp._util.paths import CONFIG_FILE, RESULT_FILE
from interp.cli import build_parser
from interp.cli.ablate import run_architectures
from interp.cli.experiment import config_from_args
from interp.data import TokenData
from interp.model import param_counts
from interp.training import TrainConfig

VOCAB = 8192


def random_tokens(vocab_size: int, n_tokens: int = 20_000, seed: int = 0) -> TokenData:
    """Random token stream: the smoke run tests plumbing, not learning, and needs no corpus or tokenizer."""
    rng = np.random.default_rng(seed)
    return TokenData(train=rng.integers(0, vocab_size, n_tokens).astype(np.uint16),
                     val=rng.integers(0, vocab_size, n_tokens // 4).astype(np.uint16),
                     meta={"source": "random", "vocab_size": vocab_size}, vocab_size=vocab_size)


# ---------------------------------------------------------------------------------------------- arms

def test_eight_arms_with_equal_params_within_each_mixer(tmp_path):
    exp = arch.experiment(arch.Config(root=str(tmp_path)))
    assert exp.name == "architectures-tiny" and exp.equal_params_within == ("mixer",)
    arms = [arch.split_arm(v.name) for v in exp.variants]
    assert arms == [(m, w) for m in arch.MIXERS for w in ("uniform", "cosine-1.5-0.5")]
    configs = exp.configs()
    assert len(configs) == 16 and [seed for _, seed, _ in configs] == [0] * 8 + [1] * 8  # seed-major
    # the run directories of the per-mixer layout: <root>/architectures-tiny/<mixer>/<width>/seed<k>
    assert configs[3][2].out_dir == str(tmp_path / "architectures-tiny" / "gated_attention" / "cosine-1.5-0.5"
                                        / "seed0")
    totals = {}
    for mixer in arch.MIXERS:
        mine = [(v, cfg) for v, _, cfg in configs if arch.split_arm(v.name)[0] == mixer]
        assert {cfg.mixer for _, cfg in mine} == {mixer}
        counts = {param_counts(cfg.model_config(VOCAB))["total"] for _, cfg in mine}
        assert len(counts) == 1, f"{mixer}: variants differ in params {counts}"
        totals[mixer] = counts.pop()
        widths = {arch.split_arm(v.name)[1]: cfg.width.widths(cfg.n_layers, cfg.d_ff) for v, cfg in mine}
        assert widths["uniform"] == [1024] * 6
        tapered = widths["cosine-1.5-0.5"]
        assert tapered[0] == 1536 and tapered[-1] == 512 and sum(tapered) == 6 * 1024
        assert tapered == sorted(tapered, reverse=True)
    # the mixer really differs between experiments: memory mixers carry extra parameters
    assert totals["attention"] < totals["gated_attention"] < totals["titans"] < totals["hope_attention"]


def test_cpu_budget_is_the_same_for_every_mixer_and_only_for_cpu_presets(tmp_path):
    cfgs = [cfg for _, _, cfg in arch.experiment(arch.Config(root=str(tmp_path))).configs()]
    budget = arch.CPU_BUDGETS["tiny"]
    for cfg in cfgs:
        assert (cfg.steps, cfg.n_ctx, cfg.batch_size, cfg.warmup_steps, cfg.threads) == (
            budget["steps"], budget["n_ctx"], 8, budget["warmup_steps"], budget["threads"])
    assert len({json.dumps({k: v for k, v in c.to_dict().items() if k not in ("mixer", "width", "seed", "out_dir")},
                           sort_keys=True) for c in cfgs}) == 1
    explicit = arch.experiment(arch.Config(root=str(tmp_path), steps=7, overrides={"n_ctx": 64}))
    assert {(c.steps, c.n_ctx) for _, _, c in explicit.configs()} == {(7, 64)}
    paper = arch.experiment(arch.Config(preset="760m", root=str(tmp_path), mixers=("attention",)))
    cfg = paper.configs()[0][2]
    assert (cfg.steps, cfg.n_ctx) == (95367, 4096)  # the preset's own: no CPU budget at paper scale


def test_bad_configs_name_the_field(tmp_path):
    with pytest.raises(ValueError, match="mixer"):
        arch.experiment(arch.Config(root=str(tmp_path), overrides={"mixer": "titans"}))
    with pytest.raises(ValueError, match="Config.mixers"):
        arch.experiment(arch.Config(root=str(tmp_path), mixers=("attention", "mamba")))
    with pytest.raises(ValueError, match="Config.only"):
        arch.experiment(arch.Config(root=str(tmp_path), only=("wider-early",)))
    with pytest.raises(ValueError, match="not in Config.mixers"):
        arch.experiment(arch.Config(root=str(tmp_path), mixers=("attention",), mixer_options={"titans": {"a": 1}}))


def test_mixer_options_go_to_the_train_config(tmp_path):
    cfg = arch.Config(root=str(tmp_path), mixers=("titans",), mixer_options={"titans": {"chunk_size": 64}})
    train_cfg = arch.experiment(cfg).configs()[0][2]
    assert train_cfg.mixer_options == {"chunk_size": 64}
    assert train_cfg.model_config(64).mixer_options == {"chunk_size": 64}


def test_preset_budget_uses_the_presets_own_settings_in_its_own_directory(tmp_path):
    cfg = arch.Config(root=str(tmp_path), mixers=("attention",), budget="preset")
    exp = arch.experiment(cfg)
    train_cfg = exp.configs()[0][2]
    preset = TrainConfig.from_preset("tiny")
    assert (train_cfg.steps, train_cfg.n_ctx, train_cfg.warmup_steps) == (preset.steps, preset.n_ctx,
                                                                          preset.warmup_steps)
    assert exp.dir.name == "architectures-tiny-full"  # never mixed with the CPU-budget runs
    assert arch.default_name(arch.Config()) == "architectures-tiny"
    with pytest.raises(ValueError, match="Config.budget"):
        arch.experiment(arch.Config(root=str(tmp_path), budget="gpu"))
    args = build_parser().parse_args(["ablate", "architectures", "--budget", "preset", "--mixers", "attention"])
    assert config_from_args(arch, args, "t").budget == "preset"


def test_estimate_minutes_by_hand(tmp_path):
    cfg = arch.Config(root=str(tmp_path), mixers=("attention", "titans"), seeds=1)
    speeds = {"attention": 1000.0, "titans": 100.0}
    train, evals = 60 * 8 * 128, 8 * 8 * 128 / 3  # steps x batch x n_ctx; one final eval, forward = 1/3
    expected = 2 * ((train + evals) / 1000.0 + (train + evals) / 100.0) / 60.0  # 2 widths per mixer
    assert arch.estimate_minutes(cfg, speeds) == pytest.approx(expected)
    with pytest.raises(ValueError, match="titans"):
        arch.estimate_minutes(cfg, {"attention": 1.0})


# ------------------------------------------------------------------------- tables from run directories

def fake_runs(exp, ppl: dict[tuple[str, str, int], float], params: dict[str, int]) -> None:
    """Finished run directories with chosen perplexities (config.json = the exact TrainConfig, so not stale)."""
    for v, seed, cfg in exp.configs():
        mixer, width = arch.split_arm(v.name)
        run_dir = exp.run_dir(v, seed)
        run_dir.mkdir(parents=True)
        (run_dir / CONFIG_FILE).write_text(json.dumps({"train": cfg.to_dict(), "label": v.label}))
        p = ppl[(mixer, width, seed)]
        (run_dir / RESULT_FILE).write_text(json.dumps({
            "status": "done", "step": cfg.steps, "tokens": cfg.steps * cfg.batch_size * cfg.n_ctx,
            "val_ppl": p, "val_loss": math.log(p), "params": params[mixer], "label": v.label,
            "tokens_per_s": 100.0 + seed}))


def test_tables_and_figure_from_fake_runs(tmp_path, monkeypatch):
    cfg = arch.Config(root=str(tmp_path / "runs"))
    exp = arch.experiment(cfg)
    rng = np.random.default_rng(0)
    ppl = {(m, v, s): float(rng.uniform(200, 400)) for m in arch.MIXERS for v in ("uniform", "cosine-1.5-0.5")
           for s in (0, 1)}
    params = {m: 10_000_000 + i for i, m in enumerate(arch.MIXERS)}
    fake_runs(exp, ppl, params)
    monkeypatch.setitem(arch.PAPER_760M_WIKI_PPL, "titans", (20.0, 19.0))  # exercise the paper's markers
    figures = tmp_path / "figures"
    report, summary = arch.compute(cfg, figures, train=False)
    assert report is None and len(summary) == 8
    assert list(summary["mixer"]) == [m for m in arch.MIXERS for _ in range(2)]
    for m in arch.MIXERS:
        rows = summary[summary["mixer"] == m].set_index("variant")
        rel = [100 * (ppl[(m, "cosine-1.5-0.5", s)] / ppl[(m, "uniform", s)] - 1) for s in (0, 1)]
        assert rows.loc["cosine-1.5-0.5", "rel_val_ppl_pct_mean"] == pytest.approx(np.mean(rel))
        assert rows.loc["cosine-1.5-0.5", "rel_val_ppl_pct_ci_low"] < np.mean(rel)  # 2 seeds: a CI exists
        assert rows.loc["uniform", "val_ppl_mean"] == pytest.approx(np.mean([ppl[(m, "uniform", s)] for s in (0, 1)]))
        assert rows["params"].tolist() == [params[m]] * 2 and rows["tokens_per_s_median"].tolist() == [100.5] * 2
    titans = summary[summary["mixer"] == "titans"].set_index("variant")
    assert titans.loc["cosine-1.5-0.5", "paper_rel_wiki_ppl_pct"] == pytest.approx(-5.0)
    assert summary[summary["mixer"] == "attention"]["paper_wiki_ppl"].isna().all()
    paths = arch.render(figures)
    assert paths == [figures / arch.FIGURE] and paths[0].stat().st_size > 20_000
    assert set(arch.OUTPUTS) <= {p.name for p in figures.iterdir()}
    meta = json.loads((figures / "architectures.meta.json").read_text())
    assert meta["config"]["mixers"] == list(arch.MIXERS) and meta["rows"] == 8
    runs = analyses.read_table(figures, arch.RUNS_TABLE, arch.NAME)  # the per-mixer layout of the runs table
    assert list(runs.columns[:3]) == ["mixer", "experiment", "variant"]
    assert (runs["experiment"] == runs["mixer"]).all() and set(runs["variant"]) == {"uniform", "cosine-1.5-0.5"}
    assert list(runs["mixer"]) == [m for m in arch.MIXERS for _ in range(4)]


def test_module_follows_the_analysis_contract():
    analyses.check_module(arch)
    assert arch.HEAVY and all(o in arch.OUTPUTS for o in (arch.TABLE, arch.RUNS_TABLE, arch.FIGURE))


def test_cli_arguments_and_dry_run(tmp_path, capsys):
    args = build_parser().parse_args(["ablate", "architectures", "--mixers", "attention,titans", "--seeds", "3",
                                      "--steps", "5", "--root", str(tmp_path), "--dry-run"])
    cfg = config_from_args(arch, args, "test")
    assert (cfg.mixers, cfg.seeds, cfg.steps) == (("attention", "titans"), 3, 5)
    assert run_architectures(args, "test") == 0
    out = capsys.readouterr().out
    assert "architectures-tiny: 12 runs (4 variants x 3 seeds)" in out and "estimated training time" in out
    assert out.count("attention/uniform ") == 3 and out.count("titans/cosine-1.5-0.5 ") == 3


# ------------------------------------------------------------------------------------------ smoke run

def test_smoke_compute_micro_two_mixers(tmp_path):
    cfg = arch.Config(preset="micro", seeds=1, mixers=("attention", "hope_attention"), root=str(tmp_path / "runs"),
                      overrides=dict(steps=2, warmup_steps=1, eval_batches=1, threads=1, log_interval=1,
                                     progress=False))
    data = random_tokens(384)
    report, summary = arch.compute(cfg, tmp_path / "figures", data=data)
    assert report.exit_code == 0 and [r.status for r in report.runs] == ["done"] * 4
    assert len(summary) == 4 and (summary["n_seeds"] == 1).all()
    runs = analyses.read_table(tmp_path / "figures", arch.RUNS_TABLE, arch.NAME)
    assert (runs["status"] == "done").all() and set(runs["mixer"]) == {"attention", "hope_attention"}
    assert np.isfinite(runs["val_ppl"]).all() and set(runs["steps"]) == {2}
    assert arch.render(tmp_path / "figures")[0].is_file()
    again, _ = arch.compute(cfg, tmp_path / "figures", data=data)  # rerun: everything is skipped
    assert all(r.status == "skipped" for r in again.runs)


def test_bench_mixers_quick_reports_equal_params_and_a_ratio_per_mixer():
    from benchmarks import bench_mixers

    text = bench_mixers.main(["--quick", "--threads", "1", "--mixers", "attention,gated_attention", "--blocks", "1"])
    rows = [line for line in text.splitlines() if line.startswith(("| attention |", "| gated_attention |"))]
    assert len(rows) == 2 and all(row.rstrip().endswith("| yes |") for row in rows)
    assert "ratio tapered/uniform" in text and "--quick" in text


def test_figure_title_names_where_the_runs_trained():
    from interp.plots.architectures import _hardware

    one = pd.DataFrame({"mixer": ["attention", "titans"], "device": ["cuda", "cuda"], "dtype": ["bfloat16"] * 2})
    assert _hardware(one) == " (cuda, bfloat16)"
    mixed = one.assign(device=["cuda", "cpu"])
    assert _hardware(mixed) == " (bfloat16; cpu: titans; cuda: attention)"
    assert _hardware(one.drop(columns="device")) == ""  # tables written before the column existed
