"""analyses registry, the schedule and training-comparison analyses, and `interp figures`."""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import sys
import types
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analyses
from analyses import schedules as schedules_analysis
from analyses import train_comparison
from interp.cli import main

# ------------------------------------------------------------------------------------------ registry

@pytest.mark.parametrize("name", analyses.ANALYSES)
def test_registry_modules_follow_the_contract(name):
    module = analyses.get(name)
    assert module.NAME == name == module.__name__.rsplit(".", 1)[1]
    assert dataclasses.is_dataclass(module.Config)
    module.Config()  # quick defaults must construct without arguments
    assert callable(module.compute) and callable(module.render)
    assert analyses.tables(module), "render() must have a stored table to read"
    assert any(o.endswith(".png") for o in module.OUTPUTS)


def test_registry_names_are_unique_and_unknown_is_an_error():
    assert len(set(analyses.ANALYSES)) == len(analyses.ANALYSES)
    with pytest.raises(ValueError, match="schedules"):
        analyses.get("no-such-analysis")


def test_check_module_names_missing_attributes():
    bad = types.ModuleType("analyses.bad")
    bad.NAME = "bad"
    with pytest.raises(TypeError, match="OUTPUTS"):
        analyses.check_module(bad)


# ------------------------------------------------------------------------------------------ schedules

def test_schedule_table_matches_interp_schedules():
    from interp.widths import ratios, taper_widths

    cfg = schedules_analysis.Config(n_layers=12, d_ff=256)
    df = schedules_analysis.schedule_table(cfg)
    assert set(df["kind"]) == {"schedule", "profile"}
    assert len(df) == 12 * (len(cfg.schedules) + len(cfg.profiles))
    cos = df[df["name"] == "cosine 1.5->0.5"].sort_values("layer")
    assert cos["width"].tolist() == taper_widths(12, 256, "cosine", 1.5, 0.5, 16)
    # independent formula for the un-rounded cosine, not the module under test
    t = np.arange(12) / 11
    np.testing.assert_allclose(cos["ratio_unrounded"], 0.5 + 0.5 * (1 + np.cos(np.pi * t)))
    np.testing.assert_allclose(ratios(12, "cosine"), cos["ratio_unrounded"])
    assert (df.groupby(["kind", "name"])["width"].sum() == 12 * 256).all()
    early = df[df["name"] == "wider-early"].sort_values("layer")
    assert early["group"].tolist() == [0] * 4 + [1] * 4 + [2] * 4


def test_cli_recompute_schedules_writes_png_and_csv(tmp_path, capsys):
    rc = main(["figures", "--only", "schedules", "--recompute", "--figures-dir", str(tmp_path)])
    assert rc == 0
    for out in schedules_analysis.OUTPUTS:
        assert (tmp_path / out).is_file(), out
    assert (tmp_path / "schedules.png").read_bytes()[:4] == b"\x89PNG"
    meta = json.loads((tmp_path / "schedules.meta.json").read_text())
    assert meta["config"]["n_layers"] == 24 and "git_commit" in meta["provenance"]
    # a plain render re-draws from the stored table
    (tmp_path / "schedules.png").unlink()
    assert main(["figures", "--only", "schedules", "--figures-dir", str(tmp_path)]) == 0
    assert (tmp_path / "schedules.png").is_file()


def test_git_commit_counts_an_untracked_file_as_dirty(tmp_path, monkeypatch):
    """A result made by a module not yet committed is not reproducible from the commit alone: '+dirty'."""
    import subprocess

    from interp._util import provenance

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path, check=True,
                       capture_output=True)

    git("init", "-q")
    (tmp_path / ".gitignore").write_text("runs/\n")
    git("add", ".gitignore")
    git("commit", "-qm", "first")
    monkeypatch.setattr(provenance, "REPO_ROOT", tmp_path)
    states = []
    for make in (lambda: (tmp_path / "runs").mkdir() or (tmp_path / "runs" / "log.jsonl").write_text(""), lambda: (tmp_path / "new_analysis.py").write_text("")):
        make()   # an ignored folder stays clean; an untracked module does not
        provenance.git_commit.cache_clear()
        states.append(provenance.git_commit().endswith("+dirty"))
    provenance.git_commit.cache_clear()
    assert states == [False, True]


# ------------------------------------------------------------------------------------ train comparison

def write_run(run_dir: Path, label: str, params: int, final: float, steps: int = 30) -> None:
    """A finished run directory per the contract in docs/ARCHITECTURE.md."""
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"label": label, "steps": steps}))
    lines = []
    for step in range(1, steps + 1):
        lines.append({"kind": "train", "step": step, "tokens": step * 2048, "loss": final + 4.0 / step,
                      "lr": 1e-3, "tokens_per_s": 3000.0, "elapsed_s": step * 0.7})
        if step % 10 == 0:
            v = final + 4.0 / step
            lines.append({"kind": "eval", "step": step, "tokens": step * 2048, "val_loss": v, "val_ppl": math.exp(v)})
    (run_dir / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (run_dir / "result.json").write_text(json.dumps(
        {"status": "done", "step": steps, "tokens": steps * 2048, "val_loss": final,
         "val_ppl": math.exp(final), "params": params, "label": label}))


def test_read_run_tidies_a_run_directory(tmp_path):
    write_run(tmp_path / "u", "uniform", 1000, 5.0)
    df = train_comparison.read_run(tmp_path / "u")
    assert list(df.columns) == train_comparison.COLUMNS + train_comparison.RUN_COLUMNS
    assert df["kind"].value_counts().to_dict() == {"train": 30, "eval": 3, "result": 1}
    assert (df["label"] == "uniform").all() and (df["params"] == 1000).all() and (df["run"] == "u").all()
    result = df[df["kind"] == "result"].iloc[0]
    assert result["val_ppl"] == pytest.approx(math.exp(5.0)) and result["tokens"] == 30 * 2048


def test_read_run_names_the_missing_file(tmp_path):
    (tmp_path / "r").mkdir()
    with pytest.raises(FileNotFoundError, match="result.json"):
        train_comparison.read_run(tmp_path / "r")


def test_render_train_comparison_from_synthetic_runs(tmp_path):
    write_run(tmp_path / "runs" / "u", "uniform", 1000, 5.0)
    write_run(tmp_path / "runs" / "c", "cosine 1.5->0.5", 1000, 4.9)
    df = pd.concat([train_comparison.read_run(tmp_path / "runs" / r) for r in ("u", "c")], ignore_index=True)
    train_comparison.check_equal_params(df)
    figs = tmp_path / "figures"
    analyses.write_table(df, figs, train_comparison.TABLE, train_comparison.Config(), train_comparison.NAME)
    paths = train_comparison.render(figs)
    assert paths == [figs / "train_comparison.png"] and paths[0].stat().st_size > 10_000


def test_unequal_parameter_counts_are_refused(tmp_path):
    write_run(tmp_path / "u", "uniform", 1000, 5.0)
    write_run(tmp_path / "c", "cosine 1.5->0.5", 1016, 4.9)
    df = pd.concat([train_comparison.read_run(tmp_path / r) for r in ("u", "c")])
    with pytest.raises(ValueError, match="parameter count"):
        train_comparison.check_equal_params(df)


def test_run_dirs_differ_per_variant_and_encode_seed_and_steps(tmp_path):
    cfg = train_comparison.Config(out_root=str(tmp_path), steps=7, seed=3)
    dirs = train_comparison.run_dirs(cfg)
    assert len(set(dirs)) == len(cfg.variants) == 2
    assert all(d.parent == tmp_path and "seed3" in d.name and "steps7" in d.name for d in dirs)


def test_train_runs_pass_the_same_seed_steps_and_data(tmp_path, monkeypatch):
    """compute() end to end with a stand-in for the training processes that writes run directories."""
    from interp.jobs import runs as workers

    calls = []

    def fake_train(configs, jobs, data=None, on_start=None, on_end=None):
        calls.append((list(configs), jobs))
        for c in configs:
            write_run(Path(c.out_dir), c.width.label, 4242, 5.0 if c.width.label == "uniform" else 4.9)
        return [workers.Outcome({"status": "done"}, 0.0) for _ in configs]

    monkeypatch.setattr(workers, "train_in_processes", fake_train)
    cfg = train_comparison.Config(out_root=str(tmp_path / "runs"), steps=30, seed=5)
    train_comparison.compute(cfg, tmp_path / "figures")
    (configs, jobs), = calls
    assert jobs == 2 and [c.preset for c in configs] == ["tiny", "tiny"]
    assert all(c.seed == 5 and c.steps == 30 and c.dtype == "fp32" and c.threads == 1 for c in configs)
    assert [c.width.label for c in configs] == ["uniform", "cosine 1.5->0.5"]
    assert all(c.resume for c in configs)  # an interrupted `make figures` continues
    df = pd.read_csv(tmp_path / "figures" / train_comparison.TABLE)
    assert set(df["label"]) == {"uniform", "cosine 1.5->0.5"} and set(df["params"]) == {4242}


def test_real_train_configs_differ_only_in_width_and_match_in_params(tmp_path):
    """Against the real interp.training: the overrides are valid fields and the two models are equal-sized."""
    from interp.model import param_counts

    cfg = train_comparison.Config(out_root=str(tmp_path), steps=40, seed=2)
    configs = train_comparison.train_configs(cfg)
    a, b = (c.to_dict() for c in configs)
    assert {k for k in a if a[k] != b[k]} == {"width", "out_dir"}
    assert a["steps"] == 40 and a["seed"] == 2 and a["preset"] == "tiny"
    models = [c.model_config(vocab_size=8192) for c in configs]
    assert models[0].d_mlp != models[1].d_mlp and sum(models[0].d_mlp) == sum(models[1].d_mlp)
    assert param_counts(models[0])["total"] == param_counts(models[1])["total"]


# ------------------------------------------------------------------------------------------ the CLI

def fake_analysis(name: str, fail: bool, log: list) -> types.ModuleType:
    """A registry entry whose compute fails on demand, to check isolation between analyses."""
    module = types.ModuleType(f"analyses.{name}")

    @dataclasses.dataclass
    class Config:
        value: int = 1

    def compute(cfg, figures_dir):
        log.append(name)
        module.last_config = cfg
        if fail:
            raise RuntimeError(f"{name} exploded")
        Path(figures_dir).mkdir(parents=True, exist_ok=True)
        (Path(figures_dir) / f"{name}.csv").write_text("x\n1\n")

    def render(figures_dir):
        out = Path(figures_dir) / f"{name}.png"
        out.write_bytes(b"png")
        return [out]

    module.NAME, module.OUTPUTS, module.Config = name, [f"{name}.csv", f"{name}.png"], Config
    module.compute, module.render = compute, render
    return module


@pytest.fixture
def fake_registry(monkeypatch):
    log: list[str] = []
    for name, fail in (("fake_broken", True), ("fake_ok", False)):
        monkeypatch.setitem(sys.modules, f"analyses.{name}", fake_analysis(name, fail, log))
    monkeypatch.setattr(analyses, "ANALYSES", ["fake_broken", "fake_ok"])
    return log


def test_a_failing_analysis_does_not_stop_the_others(tmp_path, fake_registry, capsys):
    rc = main(["figures", "--recompute", "--figures-dir", str(tmp_path)])
    assert rc == 1
    assert fake_registry == ["fake_broken", "fake_ok"]
    assert (tmp_path / "fake_ok.png").is_file()
    err = capsys.readouterr().err
    assert "FAILED fake_broken" in err and "exploded" in err


def test_render_skips_missing_tables_and_names_the_command(tmp_path, fake_registry, capsys):
    rc = main(["figures", "--figures-dir", str(tmp_path)])
    assert rc == 0 and fake_registry == []  # nothing computed, nothing failed
    err = capsys.readouterr().err
    assert "skip fake_ok" in err and "interp figures --only fake_ok --recompute" in err


def test_only_and_list(tmp_path, fake_registry, capsys):
    assert main(["figures", "--only", "fake_ok", "--recompute", "--figures-dir", str(tmp_path)]) == 0
    assert fake_registry == ["fake_ok"]
    assert main(["figures", "--list"]) == 0
    out = capsys.readouterr().out
    assert "fake_ok: fake_ok.csv, fake_ok.png" in out and "fake_broken:" in out
    assert main(["figures", "--only", "nope"]) == 2
    assert "nope" in capsys.readouterr().err


def test_set_reaches_the_analysis_config_only_with_recompute_and_one_analysis(tmp_path, fake_registry, capsys):
    figures = ["figures", "--figures-dir", str(tmp_path)]
    assert main([*figures, "--only", "fake_ok", "--recompute", "--set", "value=3"]) == 0
    assert fake_registry == ["fake_ok"] and sys.modules["analyses.fake_ok"].last_config.value == 3
    for argv, message in ((["--only", "fake_ok", "--set", "value=3"], "give it with --recompute and exactly one"),
                          (["--recompute", "--set", "value=3"], "give it with --recompute and exactly one"),
                          (["--only", "fake_ok", "--recompute", "--set", "nope=1"], "nope: no such field"),
                          (["--only", "fake_ok", "--recompute", "--set", 'value="x"'], "expects int")):
        assert main([*figures, *argv]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("interp figures: ") and message in err, err
    assert fake_registry == ["fake_ok"]  # none of the refused calls computed anything


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def test_layering_analyses_never_import_the_cli_and_only_the_cli_imports_analyses():
    """analyses/ = config + compute + render; interp/cli/ is the one layer above it."""
    root = Path(analyses.__file__).resolve().parent.parent
    for path in sorted((root / "analyses").glob("*.py")):
        cli = sorted(m for m in _imported_modules(path) if m == "interp.cli" or m.startswith("interp.cli."))
        assert not cli, f"{path.name} imports {cli}: command-line code belongs in interp/cli/"
    for path in sorted((root / "interp").rglob("*.py")):
        if "cli" in path.relative_to(root / "interp").parts:
            continue
        up = sorted(m for m in _imported_modules(path) if m == "analyses" or m.startswith("analyses."))
        assert not up, f"{path.relative_to(root)} imports {up}: only interp/cli/ may import analyses"
