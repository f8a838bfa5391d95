"""The measured taper: profile -> budget-exact widths (interp.widths.measured_widths), the widths file
(interp.widths.derived) and `interp taper derive`."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interp.widths import WidthSpec, decreasing_fit, measured_ratios, measured_widths, resample

profiles = st.lists(st.floats(-1, 3, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(profile=profiles, n_layers=st.integers(2, 40), units=st.integers(4, 64), multiple=st.sampled_from([1, 16, 64]),
       exponent=st.floats(0, 3), monotone=st.booleans(), smooth=st.integers(0, 4))
def test_measured_widths_keep_the_budget(profile, n_layers, units, multiple, exponent, monotone, smooth):
    d_ff = units * multiple
    widths = measured_widths(profile, n_layers, d_ff, multiple, exponent, monotone, smooth=smooth)
    assert len(widths) == n_layers and sum(widths) == n_layers * d_ff
    assert all(w % multiple == 0 and w >= multiple for w in widths)
    if monotone:
        assert all(a >= b for a, b in zip(widths, widths[1:])), widths


def test_params_and_flops_equal_uniform():
    from interp.model import ModelConfig
    from interp.model.counts import flops_per_token, param_counts

    widths = measured_widths([3.0, 1.0, 0.5, 0.2, 0.1], 8, 256, 16, monotone=True)
    shape = dict(vocab_size=100, d_model=64, n_layers=8, n_heads=4)
    tapered, uniform = ModelConfig(d_mlp=widths, **shape), ModelConfig(d_mlp=[256] * 8, **shape)
    assert widths != [256] * 8
    assert param_counts(tapered)["total"] == param_counts(uniform)["total"]
    assert flops_per_token(tapered, 64)["total"] == flops_per_token(uniform, 64)["total"]


def test_ratios_follow_the_profile():
    r = measured_ratios([4.0, 2.0, 1.0, 1.0], 4, exponent=1.0, min_ratio=0.1)
    np.testing.assert_allclose(r, np.array([4, 2, 1, 1]) / 2.0)
    np.testing.assert_allclose(measured_ratios([4.0, 2.0, 1.0, 1.0], 4, exponent=0.0), 1.0)  # exponent 0: uniform
    r = measured_ratios([1.0, 0.0, 0.0, 0.0], 4, min_ratio=0.25)  # zero importance: lifted to the floor
    assert r.min() == pytest.approx(0.25) and r.mean() == pytest.approx(1.0)


def test_resample_over_normalised_depth():
    np.testing.assert_allclose(resample([0.0, 1.0], 5), [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(resample([0.0, 1.0, 4.0], 3), [0, 1, 4])
    assert measured_widths([1.0, 0.5], 6, 128, 16) == measured_widths(resample([1.0, 0.5], 30), 6, 128, 16)


def test_decreasing_fit_is_the_isotonic_regression():
    np.testing.assert_allclose(decreasing_fit([1, 3, 2, 0.5, 0.7]), [2, 2, 2, 0.6, 0.6])
    v = np.array([5.0, 4.0, 1.0])
    np.testing.assert_allclose(decreasing_fit(v), v)


def test_width_spec_serialises_only_when_measured():
    assert WidthSpec().to_dict() == {"schedule": "uniform", "start": 1.0, "end": 1.0, "profile": None,
                                     "multiple": 16, "k": 10.0}  # unchanged config.json for existing runs
    spec = WidthSpec("measured", measure=(1.0, 0.5, 0.2), monotone=True, origin="rho_mlp of x, table sha256 ab")
    assert WidthSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    assert spec.label == "measured monotone (rho_mlp of x, table sha256 ab)"
    with pytest.raises(ValueError, match="only used with schedule='measured'"):
        WidthSpec("cosine", 1.5, 0.5, measure=(1.0,))
    with pytest.raises(ValueError, match="exponent"):
        WidthSpec("measured", measure=(1.0, 2.0), exponent=-1)


def _table(path, values, model="m", **extra):
    rows = [{"model": model, "layer": i, "metric": "rho_mlp", "mean": v, **extra} for i, v in enumerate(values)]
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_taper_derive_cli_writes_a_widths_file_that_train_reads(tmp_path, capsys):
    from interp.cli import main
    from interp.widths import load_width_spec

    table = _table(tmp_path / "t.parquet", [0.1, 0.2, 0.4, 0.8])
    out = tmp_path / "w.json"
    assert main(["taper", "derive", "--from", str(table), "--measure", "rho_mlp", "--transform", "one_minus",
                 "--monotone", "--layers", "6", "--d-ff", "256", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert sum(doc["widths"]) == 6 * 256 and doc["widths"] == sorted(doc["widths"], reverse=True)
    assert doc["table_sha256"] in doc["label"] or doc["table_sha256"][:12] in doc["label"]
    spec = load_width_spec(out)
    assert spec.widths(6, 256) == doc["widths"] and spec.measure == pytest.approx((0.9, 0.8, 0.6, 0.2))
    assert "widths (6 layers, mean 256)" in capsys.readouterr().out


def test_derived_widths_record_the_text_and_warn_when_flat(tmp_path, capsys):
    """The widths file says what text and revision the profile was measured on; a flat result warns and says
    why (a rising importance forced monotone is the README's old pitfall)."""
    from interp.cli import main

    table = _table(tmp_path / "t.parquet", [0.1, 0.2, 0.4, 0.8], text_source="hf:Salesforce/wikitext@abc",
                   text_sha256="f" * 64, revision="step1000", commit="c" * 40)
    out = tmp_path / "w.json"
    base = ["taper", "derive", "--from", str(table), "--layers", "6", "--d-ff", "256", "--out", str(out)]
    assert main([*base, "--transform", "one_minus", "--monotone"]) == 0
    doc = json.loads(out.read_text())
    assert doc["text_source"] == "hf:Salesforce/wikitext@abc" and doc["revision"] == "step1000"
    assert doc["commit"] == "c" * 40 and "warning" not in doc
    assert "warning" not in capsys.readouterr().err
    assert main([*base, "--monotone"]) == 0       # importance = rho rises with depth: the isotonic fit is flat
    doc = json.loads(out.read_text())
    assert max(doc["widths"]) - min(doc["widths"]) < 0.05 * 256
    err = capsys.readouterr().err
    assert "nearly flat" in err and "--monotone forced" in err and doc["warning"] in err
    assert main([*base, "--exponent", "0"]) == 0
    assert "--exponent 0 means uniform" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--measure", "nope"], r"no rows of metric 'nope'; available: \['rho_mlp'\]"),
    (["--model", "other"], r"no rows of model 'other'"),
    (["--where", "variant"], r"is not COL=VALUE"),
    (["--transform", "log"], r"invalid choice"),
])
def test_taper_derive_refuses_bad_input(tmp_path, capsys, argv, message):
    import re

    from interp.cli import main

    table = _table(tmp_path / "t.parquet", [0.1, 0.2, 0.4])
    try:
        code = main(["taper", "derive", "--from", str(table), *argv])
    except SystemExit as stop:  # argparse
        code = stop.code
    assert code == 2 and re.search(message, capsys.readouterr().err)


def test_missing_or_foreign_files_name_the_file_and_the_flag(tmp_path, capsys):
    from interp.cli import main

    (tmp_path / "blob.parquet").write_bytes(bytes(range(200, 256)) * 4)
    for table, message in (("nosuch.parquet", "--from: no such probe table"),
                           ("blob.parquet", "--from: cannot be read as a parquet table")):
        assert main(["taper", "derive", "--from", str(tmp_path / table)]) == 2
        assert f"{tmp_path / table}: {message}" in capsys.readouterr().err
    assert main(["train", "--preset", "micro", "--width-file", str(tmp_path / "blob.parquet"),
                 "--out", str(tmp_path / "run")]) != 0
    assert "blob.parquet: --width-file: not a widths file (not a JSON text file" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_several_rows_per_layer_name_the_columns(tmp_path, capsys):
    from interp.cli import main

    a = pd.read_parquet(_table(tmp_path / "a.parquet", [0.1, 0.2], variant="default"))
    b = a.assign(variant="no_massive_dims", mean=a["mean"] + 1)
    pd.concat([a, b]).to_parquet(tmp_path / "t.parquet")
    assert main(["taper", "derive", "--from", str(tmp_path / "t.parquet")]) == 2
    assert "differing in ['variant']" in capsys.readouterr().err
    assert main(["taper", "derive", "--from", str(tmp_path / "t.parquet"), "--where", "variant=default",
                 "--layers", "2", "--d-ff", "64"]) == 0


def test_interp_train_width_file(tmp_path, capsys):
    from interp.cli import build_parser, main
    from interp.cli.train import config_from_args

    table = _table(tmp_path / "t.parquet", [3.0, 2.0, 1.0, 0.5])
    assert main(["taper", "derive", "--from", str(table), "--out", str(tmp_path / "w.json")]) == 0
    args = build_parser().parse_args(["train", "--preset", "tiny", "--width-file", str(tmp_path / "w.json"),
                                      "--out", str(tmp_path / "run")])
    cfg = config_from_args(args)
    assert cfg.width.schedule == "measured" and cfg.width.measure == (3.0, 2.0, 1.0, 0.5)
    widths = cfg.model_config(vocab_size=100).d_mlp
    assert sum(widths) == 6 * 1024 and widths[0] > widths[-1]
    assert main(["train", "--preset", "tiny", "--width-file", str(tmp_path / "w.json"), "--schedule", "cosine",
                 "--out", str(tmp_path / "r2")]) == 2
    assert "--width-file sets the widths" in capsys.readouterr().err and not (tmp_path / "r2").exists()


def test_derived_taper_render_and_specs(tmp_path):
    """The analysis's derivation and figure on synthetic tables (its training is the experiment runner's)."""
    from analyses import derived_taper as dt
    from analyses import write_table

    cfg = dt.Config()
    rows = pd.DataFrame({"layer": [2, 0, 1], "delta": [0.1, 0.9, 0.3]})
    spec = dt._spec_from_rows(rows, cfg, "test profile")
    assert spec.measure == (0.9, 0.3, 0.1) and spec.monotone and "test profile" in spec.label
    widths = spec.widths(6, 1024)
    summary = pd.DataFrame([{"variant": v, "label": v, "n_seeds": 2, "params": 10_000_000,
                             "widths": "/".join(map(str, w)), "val_ppl_mean": p, "val_ppl_ci_low": p - 5,
                             "val_ppl_ci_high": p + 5, "rel_val_ppl_pct_mean": r, "rel_val_ppl_pct_ci_low": r - 1,
                             "rel_val_ppl_pct_ci_high": r + 1}
                            for v, w, p, r in (("uniform", [1024] * 6, 400, 0), ("derived-tiny", widths, 390, -2.5))])
    runs = pd.DataFrame([{"variant": v, "seed": s, "val_ppl": p + s, "status": "done"}
                         for v, p in (("uniform", 400), ("derived-tiny", 390)) for s in (0, 1)])
    profile = rows.assign(profile="tiny uniform seed0", model="m", delta_ci_low=rows["delta"] - 0.05,
                          delta_ci_high=rows["delta"] + 0.05)
    for df, name in ((summary, dt.TABLE), (runs, dt.RUNS_TABLE), (profile, dt.PROFILE_TABLE)):
        write_table(df, tmp_path, name, cfg, dt.NAME)
    (png,) = dt.render(tmp_path)
    assert png.name == "derived_taper.png" and png.stat().st_size > 10_000
