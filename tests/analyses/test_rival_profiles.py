"""The rival width profiles (issue 14 section 4): the symmetric shapes (interp.widths.shapes), the "rivals"
variant set and `interp ablate rivals` (analyses/rival_profiles.py).

The shape curve is recomputed here with `math` from the documented formula, independently of
interp.widths.shapes.shape_ratios; feasibility is predicted from the rules and every infeasible draw must
raise ValueError. The end-to-end test trains 5 variants x 2 seeds of the `micro` preset (4 layers) for 2 steps
on a synthetic corpus, as tests/training/test_experiments.py does for the group ablation.
"""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from analyses import rival_profiles
from interp.cli import build_parser, main
from interp.cli.experiment import config_from_args
from interp.model import flops_per_token, param_counts
from interp.widths import (
    SCHEDULES,
    SHAPES,
    WidthSpec,
    shape_ratios,
    shape_widths,
    taper_widths,
)
from interp.training import TrainConfig
from interp.training.experiments import VARIANT_SETS, check_equal_params, rival_variants
from interp.training.presets import PRESETS
from tests.factories import write_corpus

D_FFS = (256, 512, 1024, 1536, 2048, 2752, 3584, 4096)
MULTIPLES = (8, 16, 64, 128)
EDGES = (0.25, 0.375, 0.5, 0.625, 0.75)       # middle-heavy edges; the centre is 2 - edge (x-shaped: mirrored)
FAST = settings(max_examples=300, deadline=None)
NAMES = ["uniform", "cosine-1.5-0.5", "cosine-0.5-1.5", "middle-heavy-0.5-1.5-0.5", "x-shaped-1.5-0.5-1.5"]


def curve(n: int, start: float, end: float) -> list[float]:
    """The documented shape with `math`: each half a cosine taper start -> end over ceil(n/2) layers, the
    centre layer shared when n is odd, then scaled to mean (start + end) / 2."""
    half = (n + 1) // 2
    r = [start + (end - start) * (1 - math.cos(math.pi * min(l, n - 1 - l) / (half - 1))) / 2 for l in range(n)]
    return [v * n * (start + end) / 2 / sum(r) for v in r]


def unimodal(w: list[int], wide_centre: bool) -> bool:
    """Towards the centre non-decreasing (middle-heavy) or non-increasing (x-shaped) from both edges."""
    first, second = w[: (len(w) + 1) // 2], w[len(w) // 2:][::-1]
    ok = (lambda a, b: a <= b) if wide_centre else (lambda a, b: a >= b)
    return all(ok(a, b) for half in (first, second) for a, b in itertools.pairwise(half))


# --------------------------------------------------------------------------- the shapes

@FAST
@given(n=st.integers(3, 64), d_ff=st.sampled_from(D_FFS), multiple=st.sampled_from(MULTIPLES),
       edge=st.sampled_from(EDGES), shape=st.sampled_from(SHAPES))
@example(n=58, d_ff=256, multiple=128, edge=0.25, shape="x-shaped")   # narrowest layer exactly half a multiple
def test_shape_properties(n, d_ff, multiple, edge, shape):
    start, end = (edge, 2 - edge) if shape == "middle-heavy" else (2 - edge, edge)
    ideal = [r * d_ff for r in curve(n, start, end)]
    feasible = (n * d_ff) % multiple == 0 and min(ideal) / multiple >= 0.5 - 1e-9    # half a multiple, float-tolerant
    if not feasible:
        with pytest.raises(ValueError):
            shape_widths(n, d_ff, shape, start, end, multiple)
        return
    w = shape_widths(n, d_ff, shape, start, end, multiple)
    assert len(w) == n and all(isinstance(v, int) and v > 0 and v % multiple == 0 for v in w)
    assert sum(w) == n * d_ff                                           # the budget, exactly
    assert unimodal(w, wide_centre=shape == "middle-heavy")
    asym = [l for l in range(n) if w[l] != w[n - 1 - l]]
    if n % 2 or (n * d_ff // multiple) % 2 == 0:                        # symmetry is possible: it holds
        assert not asym
    else:                                                               # one pair, one multiple apart
        assert len(asym) == 2 and abs(w[asym[0]] - w[asym[1]]) == multiple
    if min(ideal) >= multiple:                   # largest remainder: within one multiple (the odd centre: two)
        centre = n // 2 if n % 2 else None
        for l, (v, x) in enumerate(zip(w, ideal)):
            assert abs(v - x) <= (2 if l == centre else 1) * multiple + 1e-9, (l, w, ideal)


@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 24, 31])
def test_shape_ratios_follow_the_formula_and_keep_the_mean(n):
    for shape, (start, end) in (("middle-heavy", (0.5, 1.5)), ("x-shaped", (1.625, 0.375))):
        r = shape_ratios(n, shape, start, end)
        np.testing.assert_allclose(r, curve(n, start, end), rtol=1e-12)
        assert r.mean() == pytest.approx((start + end) / 2, abs=1e-12)
        np.testing.assert_array_equal(r, r[::-1])
        if n % 2 == 0:                                                  # even: the edges and centre are exact
            assert r[0] == pytest.approx(start) and r[n // 2] == pytest.approx(end)


def test_tiny_and_paper_shapes_pinned():
    """The integers the experiment trains (saved configs and parameter counts depend on them staying put)."""
    assert shape_widths(6, 1024, "middle-heavy", 0.5, 1.5) == [512, 1024, 1536, 1536, 1024, 512]
    assert shape_widths(6, 1024, "x-shaped", 1.5, 0.5) == [1536, 1024, 512, 512, 1024, 1536]
    assert shape_widths(4, 64, "middle-heavy", 0.5, 1.5) == [32, 96, 96, 32]          # micro at 4 layers
    assert shape_widths(7, 1024, "middle-heavy", 0.5, 1.5) == [544, 832, 1376, 1664, 1376, 832, 544]
    w = shape_widths(24, 3584, "x-shaped", 1.5, 0.5, 128)                             # 440m, GPU granularity
    assert w == w[::-1] and sum(w) == 24 * 3584 and (w[0], w[11]) == (5376, 1792)


def test_reverse_taper_is_accepted_and_budget_exact():
    """OpenELM/DeLighT's growing profile needs no new shape: cosine 0.5->1.5, the paper's taper mirrored."""
    spec = WidthSpec("cosine", 0.5, 1.5)
    for n, d_ff, multiple in ((6, 1024, 16), (24, 3584, 128), (30, 1536, 16), (4, 64, 16)):
        w = WidthSpec("cosine", 0.5, 1.5, multiple=multiple).widths(n, d_ff)
        assert sum(w) == n * d_ff and w == sorted(w) and all(v % multiple == 0 for v in w)
        assert w == taper_widths(n, d_ff, "cosine", 1.5, 0.5, multiple)[::-1]
    assert spec.label == "cosine 0.5->1.5"


@pytest.mark.parametrize("call, match", [
    (lambda: shape_widths(6, 1024, "middle-heavy", 1.5, 0.5), r"needs start < end .*'x-shaped'"),
    (lambda: shape_widths(6, 1024, "x-shaped", 0.5, 1.5), r"needs start > end .*'middle-heavy'"),
    (lambda: shape_widths(6, 1024, "x-shaped", 1.0, 1.0), r"start == end .*schedule='uniform'"),
    (lambda: shape_widths(6, 1024, "middle-heavy", 0.25, 1.5), r"use end = 2 - start = 1.75\) average 0.875"),
    (lambda: shape_widths(2, 1024, "middle-heavy", 0.5, 1.5), r"n_layers must be >= 3.*two edge layers"),
    (lambda: shape_widths(6, 1024, "middle-heavy", 0.01, 1.99, 64), r"start=0.01 .*rounds to 0 at multiple=64"),
    (lambda: shape_widths(6, 1024, "x-shaped", 1.99, 0.01, 64), r"end=0.01 .*rounds to 0 at multiple=64"),
    (lambda: shape_widths(6, 1001, "x-shaped", 1.5, 0.5), r"not divisible by multiple=16"),
    (lambda: shape_widths(6, 1024, "middle-heavy", -0.5, 2.5), r"start must be a positive"),
    (lambda: shape_widths(6, 1024, "diamond", 0.5, 1.5), r"'diamond' is not a symmetric shape"),
    (lambda: WidthSpec("middle-heavy", 1.5, 0.5), r"WidthSpec: .*needs start < end"),
    (lambda: WidthSpec("x-shaped", float("nan"), 0.5), r"WidthSpec.start must be a positive, finite"),
    (lambda: WidthSpec("hourglass", 1.5, 0.5), r"WidthSpec.schedule='hourglass' is unknown; .*middle-heavy, x-shaped"),
])
def test_bad_shapes_name_the_argument_and_the_fix(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# --------------------------------------------------------------------------- WidthSpec and configs

def test_widthspec_labels_round_trip_and_old_specs_are_unchanged():
    for spec, label in ((WidthSpec("middle-heavy", 0.5, 1.5), "middle-heavy 0.5->1.5->0.5"),
                        (WidthSpec("x-shaped", 1.625, 0.375, multiple=128), "x-shaped 1.625->0.375->1.625")):
        assert spec.label == label
        d = json.loads(json.dumps(spec.to_dict()))
        assert set(d) == {"schedule", "start", "end", "profile", "multiple", "k"}
        assert WidthSpec.from_dict(d) == spec
        assert TrainConfig.from_dict(json.loads(json.dumps(TrainConfig(width=spec).to_dict()))).width == spec
    # what older run directories stored stays byte-identical (config_diff compares it to resume a run)
    assert json.dumps(WidthSpec("cosine", 1.5, 0.5).to_dict()) == (
        '{"schedule": "cosine", "start": 1.5, "end": 0.5, "profile": null, "multiple": 16, "k": 10.0}')
    assert json.dumps(WidthSpec("profile", profile="wider-middle").to_dict()) == (
        '{"schedule": "profile", "start": 1.0, "end": 1.0, "profile": "wider-middle", "multiple": 16, "k": 10.0}')
    assert WidthSpec("cosine", 1.5, 0.5).label == "cosine 1.5->0.5" and WidthSpec().label == "uniform"
    assert SCHEDULES == ("uniform", "linear", "cosine", "sigmoid") and SHAPES == ("middle-heavy", "x-shaped")
    # the --schedule/--start/--end route of a TrainConfig reaches the shapes too
    cfg = TrainConfig.from_preset("tiny", schedule="middle-heavy", start=0.5, end=1.5)
    assert cfg.width == WidthSpec("middle-heavy", 0.5, 1.5)
    assert cfg.model_config(cfg.vocab_size).d_mlp == [512, 1024, 1536, 1536, 1024, 512]


@pytest.mark.parametrize("preset", ["tiny", "440m"])
def test_rivals_have_equal_params_and_flops(preset):
    variants = rival_variants()
    cfgs = [TrainConfig.from_preset(preset, width=v.width) for v in variants]
    models = [c.model_config(c.vocab_size) for c in cfgs]
    assert len({tuple(m.d_mlp) for m in models}) == 5
    totals = {param_counts(m)["total"] for m in models}
    assert len(totals) == 1 and check_equal_params(cfgs) == totals.pop()
    n_ctx = cfgs[0].n_ctx
    assert len({flops_per_token(m, n_ctx)["total"] for m in models}) == 1
    # independently: a SwiGLU MLP of width w has 3 * d_model * w weights, so equal sums mean equal counts
    assert {3 * cfgs[0].d_model * sum(m.d_mlp) for m in models} == {3 * cfgs[0].d_model * cfgs[0].n_layers
                                                                   * cfgs[0].d_ff}


def test_the_variant_set():
    variants = VARIANT_SETS["rivals"]()
    assert [v.name for v in variants] == NAMES
    widths = [v.width for v in variants]
    assert [w.label for w in widths] == ["uniform", "cosine 1.5->0.5", "cosine 0.5->1.5",
                                         "middle-heavy 0.5->1.5->0.5", "x-shaped 1.5->0.5->1.5"]
    tiny = [w.widths(6, 1024) for w in widths[1:]]
    assert {(min(w), max(w)) for w in tiny} == {(512, 1536)}                    # the same range for every rival
    assert all(w.start + w.end == 2 for w in widths[1:])


def test_cli_parses_into_the_config_with_fp32_by_default():
    args = build_parser().parse_args(["ablate", "rivals", "--steps", "40", "--only", "uniform,x-shaped-1.5-0.5-1.5"])
    cfg = config_from_args(rival_profiles, args, "interp ablate rivals")
    assert (cfg.preset, cfg.seeds, cfg.steps, cfg.dtype) == ("tiny", 5, 40, "fp32")
    exp = rival_profiles.experiment(cfg)
    assert exp.name == "rivals-tiny" and [v.name for v in exp.variants] == ["uniform", "x-shaped-1.5-0.5-1.5"]
    assert exp.seeds == [0, 1, 2, 3, 4] and exp.overrides == {"dtype": "fp32", "steps": 40}
    assert all(c.dtype == "fp32" for _, _, c in exp.configs())
    bf16 = config_from_args(rival_profiles, build_parser().parse_args(["ablate", "rivals", "--dtype", "bf16"]), "x")
    assert rival_profiles.experiment(bf16).overrides["dtype"] == "bf16"
    with pytest.raises(ValueError, match="disagree"):
        rival_profiles.experiment(rival_profiles.Config(overrides={"dtype": "bf16"}))


def test_render_from_a_synthetic_table(tmp_path):
    """The tables' columns as compute writes them (summarize + paired_vs), a PNG out, the vs-cosine change
    checked against a by-hand paired mean."""
    import analyses
    from analyses.group_ablation import paired_vs
    from interp.training.results import summarize

    rng = np.random.default_rng(0)
    rows = [{"variant": v.name, "label": v.label, "seed": s, "status": "done", "params": 10, "val_ppl": p,
             "val_loss": math.log(p), "schedule": v.width.schedule, "start": v.width.start, "end": v.width.end,
             "widths": "/".join(map(str, v.width.widths(6, 1024))), "steps": 5, "tokens": 10}
            for v in rival_variants() for s, p in enumerate(300 + rng.normal(0, 5, 3))]
    runs = pd.DataFrame(rows)
    summary = paired_vs(summarize(runs, order=NAMES), runs, rival_profiles.COSINE, "vs_cosine", NAMES)
    by = runs.pivot(index="seed", columns="variant", values="val_ppl")
    expected = (100 * (by["x-shaped-1.5-0.5-1.5"] / by["cosine-1.5-0.5"] - 1)).mean()
    got = summary.set_index("variant").loc["x-shaped-1.5-0.5-1.5", "rel_val_ppl_pct_mean_vs_cosine"]
    assert got == pytest.approx(expected, rel=1e-12)
    analyses.write_table(summary, tmp_path, rival_profiles.TABLE, rival_profiles.Config(), rival_profiles.NAME)
    analyses.write_table(runs, tmp_path, rival_profiles.RUNS_TABLE, rival_profiles.Config(), rival_profiles.NAME)
    (png,) = rival_profiles.render(tmp_path)
    assert png == tmp_path / rival_profiles.FIGURE and png.read_bytes()[:4] == b"\x89PNG"
    assert png.stat().st_size > 20_000 and set(rival_profiles.OUTPUTS) >= {rival_profiles.TABLE, png.name}


# --------------------------------------------------------------------------- end to end

@pytest.fixture(scope="module")
def corpus(tmp_path_factory, module_cache):
    words = ["the", "cat", "dog", "sat", "ran", "on", "over", "a", "big", "small", "red", "old", "house", "tree", "river", "and", "with", "then", "she", "saw"]
    return write_corpus(tmp_path_factory.mktemp("rivals") / "corpus", n_docs=24, sentences=40, words=words,
                        sentence_len=8)


@pytest.mark.slow  # 10 training runs: ~60 s on the loaded 2-core machine (the group ablation's twin: ~50 s)
def test_cli_end_to_end_micro(corpus, tmp_path, capsys):
    sets = {"source": str(corpus), "val_fraction": 0.25, "warmup_steps": 1, "eval_batches": 1, "threads": 1,
            "log_interval": 1, "progress": False, "n_layers": 4}
    fig = tmp_path / "figures"
    argv = ["ablate", "rivals", "--preset", "micro", "--seeds", "2", "--steps", "2", "--root", str(tmp_path / "runs"),
            "--figures-dir", str(fig), *[f"--set={k}={json.dumps(v)}" for k, v in sets.items()]]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "10 runs" in out and "10 done" in out and "x-shaped-1.5-0.5-1.5" in out
    summary = pd.read_csv(fig / rival_profiles.TABLE)
    assert summary["variant"].tolist() == NAMES and (summary["n_seeds"] == 2).all()
    assert summary["params"].nunique() == 1
    for suffix in ("", "_vs_cosine"):
        for stat in ("mean", "ci_low", "ci_high"):
            assert f"rel_val_ppl_pct_{stat}{suffix}" in summary and f"d_val_loss_{stat}{suffix}" in summary
    for stat in ("mean", "ci_low", "ci_high"):
        assert f"val_ppl_{stat}" in summary
    base = summary.set_index("variant")
    assert base.loc["uniform", "rel_val_ppl_pct_mean"] == 0 and base.loc["cosine-1.5-0.5", "n_pairs_vs_cosine"] == 2
    assert base.loc["cosine-1.5-0.5", "rel_val_ppl_pct_mean_vs_cosine"] == 0
    assert np.isfinite(base.loc["x-shaped-1.5-0.5-1.5", "rel_val_ppl_pct_ci_low_vs_cosine"])
    assert base.loc["middle-heavy-0.5-1.5-0.5", "widths"] == "32/96/96/32"
    runs = pd.read_csv(fig / rival_profiles.RUNS_TABLE)
    assert len(runs) == 10 and set(runs["status"]) == {"done"} and runs["widths"].nunique() == 5
    assert sorted(runs.groupby("variant")["seed"].apply(sorted).tolist()) == [[0, 1]] * 5
    assert set(runs["dtype"]) == {"float32"} and set(runs["device"]) == {"cpu"} and runs["hardware"].notna().all()
    meta = json.loads((fig / "rival_profiles.meta.json").read_text())
    assert meta["config"]["dtype"] == "fp32" and meta["provenance"]["hardware"]
    png = fig / rival_profiles.FIGURE
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 20_000
    png.unlink()  # render alone redraws it from the stored tables
    assert rival_profiles.render(fig) == [png] and png.is_file()


def test_micro_preset_is_too_shallow_for_the_shapes():
    """micro has 2 layers: a symmetric shape needs an edge on each side of a centre, so the plan is refused."""
    with pytest.raises(ValueError, match=r"middle-heavy.*n_layers must be >= 3"):
        rival_profiles.experiment(rival_profiles.Config(preset="micro")).configs()
    assert PRESETS["micro"]["n_layers"] == 2
