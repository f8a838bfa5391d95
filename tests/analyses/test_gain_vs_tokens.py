"""analyses/gain_vs_tokens end to end on the micro shape: wsd runs with cooldown branches for both block styles,
the own-schedule check pair, the per-length paired tables, the figure, and tables rebuilt without training."""

import dataclasses
import math

import pandas as pd
import pytest

from analyses import gain_vs_tokens as gvt
from interp.training import cooldown


def micro_config(env, root) -> gvt.Config:
    return gvt.Config(preset="micro", seeds=2, lengths=(8, 12, 16), n_layers=3, d_model=32, n_heads=2, d_ff=64,
                      source=str(env[0]), eval_batches=2, eval_interval=4, check_steps=8, root=str(root),
                      arms=("wider-late",), jobs=1)  # in-process: the at-once path is tests/training/test_workers.py's


def test_compute_tables_and_render(env, tmp_path):
    cfg = micro_config(env, tmp_path / "runs")
    figures = tmp_path / "figures"
    figures.mkdir()
    summary = gvt.compute(cfg, figures, data=env[2])
    # 2 block styles x 3 lengths x 3 variants (uniform, the taper, the wider-late arm) from the wsd runs, plus
    # the check pair (llama, cosine, 8 steps: uniform and the taper only)
    wsd = summary[summary["lr_schedule"] == "wsd"]
    assert sorted(set(wsd["arch"])) == ["gpt2", "llama"] and sorted(set(wsd["steps"])) == [8, 12, 16]
    assert len(wsd) == 18 and (wsd["n_pairs"] == 2).all()
    assert list(wsd["variant"].iloc[:3]) == ["uniform", "cosine-1.5-0.5", "wider-late"]
    check = summary[summary["lr_schedule"] == "cosine"]
    assert list(check["steps"]) == [8, 8] and list(check["arch"]) == ["llama", "llama"]
    assert (summary.loc[summary["variant"] == "uniform", "rel_val_ppl_pct_mean"] == 0).all()
    runs = pd.read_csv(figures / gvt.RUNS_TABLE)
    assert set(runs["kind"]) == {"run", "cooldown"} and runs["cpu"].notna().all()
    assert (runs["dtype"] == "float32").all()
    # a row of the table is the branch's own result file, and the paired change is computed from those rows
    exp = gvt.experiment(cfg, "llama")
    v = exp.variants[1]
    branch = cooldown.branch_result(exp.run_dir(v, 1), 8)
    row = runs[(runs["arch"] == "llama") & (runs["variant"] == v.name) & (runs["seed"] == 1) & (runs["steps"] == 8)]
    assert row["val_ppl"].item() == pytest.approx(branch["val_ppl"], rel=1e-12)
    at8 = runs[(runs["arch"] == "llama") & (runs["steps"] == 8) & (runs["lr_schedule"] == "wsd")]
    wide = at8.pivot_table(index="seed", columns="variant", values="val_ppl")
    expected = (100 * (wide[v.name] / wide["uniform"] - 1)).mean()
    got = wsd[(wsd["arch"] == "llama") & (wsd["steps"] == 8) & (wsd["variant"] == v.name)]
    assert got["rel_val_ppl_pct_mean"].item() == pytest.approx(expected, rel=1e-9)
    trend = pd.read_csv(figures / gvt.TREND_TABLE).set_index(["arch", "variant"])
    assert sorted(trend.index) == [(a, n) for a in ("gpt2", "llama") for n in ("cosine-1.5-0.5", "wider-late")]
    trend = trend.xs(v.name, level="variant")
    llama = wsd[(wsd["arch"] == "llama") & (wsd["variant"] == v.name)]
    assert trend.loc["llama", "n_seeds"] == 2
    # the slope, recomputed by hand: per seed, the closed-form least-squares slope over log2(tokens), averaged
    lw = runs[(runs["arch"] == "llama") & (runs["lr_schedule"] == "wsd")]
    slopes = []
    for seed in (0, 1):
        g = lw[lw["seed"] == seed].pivot_table(index="tokens", columns="variant", values="val_ppl")
        y = 100 * (g[v.name] / g["uniform"] - 1)
        x = [math.log2(t) for t in g.index]
        mx, my = sum(x) / len(x), float(y.mean())
        slopes.append(sum((a - mx) * (b - my) for a, b in zip(x, y)) / sum((a - mx) ** 2 for a in x))
    assert trend.loc["llama", "slope_pct_per_doubling_mean"] == pytest.approx(sum(slopes) / 2, rel=1e-9)
    first, last = llama.sort_values("tokens")["rel_val_ppl_pct_mean"].iloc[[0, -1]]
    assert trend.loc["llama", "last_minus_first_pct_mean"] == pytest.approx(last - first, rel=1e-9, abs=1e-9)
    curves = pd.read_csv(figures / gvt.CURVES_TABLE)
    assert set(curves["kind"]) == {"train", "eval"} and curves["loss"].notna().all()
    (png,) = gvt.render(figures)
    assert png.name == "gain_vs_tokens.png" and png.stat().st_size > 10_000
    # rerun without training: the same tables from the run directories
    again = gvt.compute(cfg, figures, data=env[2], train=False)
    pd.testing.assert_frame_equal(again, summary)
    # runs whose directories are elsewhere (gitignored, trained in another session) keep their stored rows: the
    # same tables from an empty root, and nothing without the stored tables (keep=False)
    elsewhere = dataclasses.replace(cfg, root=str(tmp_path / "empty"))
    kept = gvt.compute(elsewhere, figures, train=False)
    pd.testing.assert_frame_equal(kept, summary)
    assert len(pd.read_csv(figures / gvt.CURVES_TABLE)) == len(curves)
    with pytest.raises(FileNotFoundError, match="no gain-vs-tokens runs"):
        gvt.compute(dataclasses.replace(elsewhere, keep=False), figures, train=False)
    # a run trained here replaces its stored rows; the stored rows of other runs stay
    one_arch = dataclasses.replace(cfg, archs=("llama",))
    runs_before = pd.read_csv(figures / gvt.RUNS_TABLE)
    (tmp_path / "runs" / "gain-vs-tokens-gpt2").rename(tmp_path / "gpt2-elsewhere")
    pd.testing.assert_frame_equal(gvt.compute(one_arch, figures, train=False), summary)
    pd.testing.assert_frame_equal(pd.read_csv(figures / gvt.RUNS_TABLE), runs_before)


def test_a_stored_table_without_its_key_columns_is_refused_before_any_training(tmp_path, monkeypatch):
    from interp.jobs import training

    pd.DataFrame({"arch": ["llama"], "val_ppl": [1.0]}).to_csv(tmp_path / gvt.RUNS_TABLE, index=False)
    monkeypatch.setattr(training, "train_experiment", lambda *a, **k: pytest.fail("trained before the check"))
    with pytest.raises(ValueError, match=r"gain_vs_tokens_runs.csv: field lr_schedule missing.*keep=false"):
        gvt.compute(gvt.Config(root=str(tmp_path / "none")), tmp_path)


def test_arms_are_the_group_ablation_profiles(tmp_path):
    exp = gvt.experiment(gvt.Config(root=str(tmp_path)), "llama")
    assert [v.name for v in exp.variants] == ["uniform", "cosine-1.5-0.5", "wider-early", "wider-late"]
    widths = {v.name: cfg.model_config(8192).d_mlp for v, seed, cfg in exp.configs() if seed == 0}
    assert widths["wider-late"] == [256, 256, 512, 512, 768, 768] and sum(widths["wider-early"]) == 6 * 512
    assert [v.name for v in gvt.experiment(gvt.Config(arms=(), root=str(tmp_path)), "gpt2").variants] == [
        "uniform", "cosine-1.5-0.5"]
    with pytest.raises(ValueError, match="gain_vs_tokens.Config.arms"):
        gvt.experiment(gvt.Config(arms=("wider-sideways",), root=str(tmp_path)), "llama")


def test_unknown_arch_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown block styles"):
        gvt.compute(gvt.Config(archs=("mamba",), root=str(tmp_path)), tmp_path, train=False)
