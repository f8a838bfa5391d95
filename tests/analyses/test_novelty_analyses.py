"""Novelty figures (paper section 4): the correlation helpers against hand computations, the plot on
synthetic tables, and both analyses' compute/render plumbing (probe() stubbed, or a tiny checkpoint)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from analyses import novelty_pretrained, novelty_tapered
from interp.plots import novelty as plots_novelty
from interp.plots.novelty import (
    depth_correlations,
    pearson_r,
    plot_novelty,
    rankdata,
    spearman_r,
)
from tests.factories import tiny_lm

# --------------------------------------------------------------------------------------------------
# Correlations
# --------------------------------------------------------------------------------------------------

def test_pearson_and_spearman_match_hand_computations():
    # dx = [-1.5, -.5, .5, 1.5], dy = [-3, -1, 0, 4]: sum dx*dy = 11, sum dx^2 = 5, sum dy^2 = 26
    assert pearson_r([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(11 / math.sqrt(5 * 26), abs=1e-12)
    assert spearman_r([1, 2, 3, 4], [2, 4, 5, 9]) == pytest.approx(1.0)  # monotone, not linear
    # ties take their average rank: y ranks [1, 2.5, 2.5, 4] vs x ranks [4, 3, 2, 1] -> -4.5 / sqrt(5 * 4.5)
    assert rankdata([1, 2, 2, 3]).tolist() == [1, 2.5, 2.5, 4]
    assert spearman_r([4, 3, 2, 1], [1, 2, 2, 3]) == pytest.approx(-4.5 / math.sqrt(22.5), abs=1e-12)
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.normal(size=30)
    assert pearson_r(x, y) == pytest.approx(np.corrcoef(x, y)[0, 1], abs=1e-12)
    assert math.isnan(pearson_r([1, 2, 3], [5, 5, 5])) and math.isnan(pearson_r([1], [2]))
    with pytest.raises(ValueError, match="differ in length"):
        pearson_r([1, 2], [1, 2, 3])


def synthetic_table(models=(("deep", 12), ("shallow", 6)), variant: str | None = None) -> pd.DataFrame:
    """Probe-like rows: rho_mlp rises linearly with depth, rho_block dips then rises (U shape)."""
    rows = []
    for name, n_layers in models:
        for layer in range(n_layers):
            depth = layer / (n_layers - 1)
            for metric, mean in (("rho_mlp", -0.05 + 0.3 * depth), ("rho_block", (depth - 0.3) ** 2 - 0.05)):
                rows.append({"model": name, "label": name, "layer": layer, "n_layers": n_layers, "depth": depth,
                             "metric": metric, "mean": mean, "ci_low": mean - 0.01, "ci_high": mean + 0.01,
                             "n_tokens": 1000, "d_mlp": int(1536 - 1024 * depth)})
    df = pd.DataFrame(rows)
    return df.assign(variant=variant) if variant else df


def test_depth_correlations_per_series_variant_and_metric():
    df = pd.concat([synthetic_table(variant="default"), synthetic_table(models=(("deep", 12),),
                                                                        variant="no_massive_dims")])
    corr = depth_correlations(df, "model").set_index(["model", "variant", "metric"])
    assert len(corr) == 2 * 2 + 2
    deep = corr.loc[("deep", "default", "rho_mlp")]
    assert deep.pearson_r == pytest.approx(1.0) and deep.spearman_r == pytest.approx(1.0)
    assert deep.n_layers == 12 and deep.argmin_layer == 0 and deep.argmax_layer == 11
    u = corr.loc[("shallow", "default", "rho_block")]
    means = [(l / 5 - 0.3) ** 2 - 0.05 for l in range(6)]
    assert u.pearson_r == pytest.approx(np.corrcoef(range(6), means)[0, 1])
    assert u.argmin_layer == int(np.argmin(means)) == 1  # (0.2 - 0.3)^2 ties (0.4 - 0.3)^2: first wins
    assert u.mean_first_half == pytest.approx(np.mean(means[:3]))


# --------------------------------------------------------------------------------------------------
# The figure
# --------------------------------------------------------------------------------------------------

def legend_texts(fig: Figure) -> list[str]:
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


def test_plot_novelty_two_rows_two_columns_with_r_in_the_legend(tmp_path):
    df = pd.concat([synthetic_table(variant="default"),
                    synthetic_table(models=(("deep", 12),), variant="no_massive_dims").assign(excluded_dims="[3, 9]")])
    fig = plot_novelty(df, series="model", title="synthetic")
    assert len(fig.axes) == 4
    texts = legend_texts(fig)
    assert len(texts) == 2 * 3  # per row: deep, shallow, deep [no_massive_dims]
    assert any(t.startswith("deep\nPearson r = +1.00, Spearman = +1.00") for t in texts)
    assert any(t.startswith("deep [no_massive_dims: dims 3, 9]\nPearson") for t in texts)
    styles = {line.get_linestyle() for line in fig.axes[0].get_lines() if line.get_marker() == "o"}
    assert styles == {"-", "--"}
    assert {l.get_color() for l in fig.axes[0].get_lines() if l.get_marker() == "o"} == {"#1f77b4", "#8c564b"}
    zero_lines = [l for l in fig.axes[0].get_lines() if list(l.get_ydata()) == [0, 0]]
    assert zero_lines, "y = 0 is not marked"
    assert fig.axes[1].get_xlim()[1] == pytest.approx(1.03)  # right column: normalised depth
    assert "1,000 tokens" in fig._suptitle.get_text()
    from interp.plots import save_figure

    assert save_figure(fig, tmp_path / "n.png").stat().st_size > 10_000


def test_plot_novelty_width_axis_and_errors():
    df = synthetic_table(models=(("uniform", 6), ("cosine 1.5->0.5", 6)))
    fig = plot_novelty(df, series="label", width_column="d_mlp")
    assert len(fig.axes) == 4 + 2  # a twin (width) axis beside each per-layer panel
    twin = fig.axes[-1]
    assert "d_mlp" in twin.get_ylabel() and twin.get_ylim()[1] == pytest.approx(1536 * 1.15)
    colors = {line.get_color() for line in fig.axes[0].get_lines() if line.get_marker() == "o"}
    assert colors == {"#555555", "#d62728"}  # the figure-wide uniform and cosine colours
    with pytest.raises(ValueError, match="lacks column"):
        plot_novelty(df.drop(columns=["ci_low"]), series="label")
    with pytest.raises(ValueError, match="none of metrics"):
        plot_novelty(df, metrics=("rho_attn",), series="label")


# --------------------------------------------------------------------------------------------------
# Analyses: compute/render plumbing
# --------------------------------------------------------------------------------------------------

def stub_probe(calls: list):
    """Stand-in for interp.probes.probe: records its arguments, returns a synthetic table."""
    def probe(model, config=None, **kwargs):
        calls.append((model, {**(config.to_dict() if config is not None else {}), **kwargs}))
        n = 6 if "tiny" in str(model) else 10
        df = synthetic_table(models=((str(model), n),)).drop(columns=["label", "d_mlp"])
        df.attrs["timing"] = {"positions": 64, "probe_s": 0.1}
        return df
    return probe


def test_novelty_pretrained_compute_and_render(tmp_path, monkeypatch, capsys):
    from interp import hf as pretrained

    infos = [pretrained.ModelInfo(name, installed, "A", 2, 8, 16, None, False, "x", "", f"pip install {name}")
             for name, installed in (("m-installed", True), ("m-absent", False))]
    monkeypatch.setattr(pretrained, "available_models", lambda: infos)
    calls: list = []
    monkeypatch.setattr("interp.probes.probe", stub_probe(calls))
    cfg = novelty_pretrained.Config()
    cfg.probe = dataclasses.replace(cfg.probe, tokens=64, seq_len=32)
    novelty_pretrained.compute(cfg, tmp_path)
    out = capsys.readouterr().out
    assert "skip m-absent: not installed; `pip install m-absent`" in out and "pearson_r" in out
    assert [(m, kw.get("exclude_massive_dims")) for m, kw in calls] == [("m-installed", None), ("m-installed", 3)]
    assert all(kw["backend"] == "torch" and kw["reference"] == "normed" and kw["tokens"] == 64 for _, kw in calls)
    df = pd.read_csv(tmp_path / novelty_pretrained.TABLE)
    assert set(df.variant) == {"default", "no_massive_dims"}
    meta = json.loads((tmp_path / "novelty_pretrained.meta.json").read_text())
    assert meta["config"]["massive_k"] == 3
    [png] = novelty_pretrained.render(tmp_path)
    assert png.name == novelty_pretrained.FIGURE and png.stat().st_size > 10_000
    with pytest.raises(ValueError, match="unknown variant 'nope'"):
        novelty_pretrained.compute(novelty_pretrained.Config(variants=("default", "nope")), tmp_path)
    with pytest.raises(ValueError, match="not registry names"):
        novelty_pretrained.compute(novelty_pretrained.Config(models=("gpt2",)), tmp_path)


def test_novelty_tapered_default_run_dirs_are_train_comparisons():
    from analyses import train_comparison

    want = [str(p) for p in train_comparison.run_dirs(train_comparison.Config())]
    assert list(novelty_tapered.Config().run_dirs) == want


@pytest.fixture
def tiny_run(tiny_checkpoint):
    """make(name, label, d_mlp, status="done"): a checkpoint dir like a finished training run (our 8k wiki BPE,
    cached; the width label; result.json)."""
    def make(name: str, label: str, d_mlp: list[int], status: str = "done"):
        model = tiny_lm(vocab_size=8192, d_model=16, n_heads=2, d_mlp=d_mlp, n_ctx=32)
        path = tiny_checkpoint(name, model, {"train": {"tokenizer": "bpe", "vocab_size": 8192, "source": "wiki"},
                                             "label": label})
        (path / "result.json").write_text(json.dumps({"status": status}))
        return path
    return make


def test_novelty_tapered_compute_on_tiny_checkpoints(tmp_path, tiny_run, capsys):
    """Real probes (hookpoints backend, the runs' own BPE, held-out wiki) on two tiny runs; a missing and an
    unfinished run are skipped naming the command that trains them."""
    runs = [tiny_run("u", "uniform", [32, 32, 32]),
            tiny_run("c", "cosine 1.5->0.5", [48, 32, 16]),
            tiny_run("half", "uniform", [32, 32, 32], status="running"),
            tmp_path / "missing"]
    probe = dataclasses.replace(novelty_tapered.Config().probe, tokens=64, seq_len=32, batch_size=2)
    cfg = novelty_tapered.Config(run_dirs=tuple(map(str, runs)), probe=probe)
    figures = tmp_path / "figures"
    novelty_tapered.compute(cfg, figures)
    out = capsys.readouterr().out
    assert out.count("interp figures --only train_comparison --recompute` trains it") == 2
    assert "training not finished (status running)" in out and "no checkpoint" in out
    df = pd.read_csv(figures / novelty_tapered.TABLE)
    assert set(df.label) == {"uniform", "cosine 1.5->0.5"} and set(df.backend) == {"hookpoints"}
    assert {"rho_mlp", "rho_block", "rho_mlp_normed"} <= set(df.metric)
    assert df[df.label == "cosine 1.5->0.5"].groupby("layer").d_mlp.first().tolist() == [48, 32, 16]
    assert (df.n_tokens == 2 * 31).all() and set(df.text_source) == {"wiki:val"}
    [png] = novelty_tapered.render(figures)
    assert png.stat().st_size > 10_000


def test_novelty_tapered_without_runs_writes_nothing(tmp_path, capsys):
    novelty_tapered.compute(novelty_tapered.Config(run_dirs=(str(tmp_path / "none"),)), tmp_path)
    assert "no finished run" in capsys.readouterr().out
    assert not (tmp_path / novelty_tapered.TABLE).exists()
    with pytest.raises(FileNotFoundError, match="interp figures --only novelty_tapered --recompute"):
        novelty_tapered.render(tmp_path)


def test_module_contract():
    import analyses

    for module in (novelty_pretrained, novelty_tapered):
        analyses.check_module(module)
        assert plots_novelty.PAPER_NOTE  # quoted in every figure's title
