"""`interp experiment NAME` (issue 36): one command per experiment, generated from analyses.EXPERIMENTS; the older
commands (`interp sweep`, `interp ablate groups|rivals|architectures`, `interp eval-experiment`) as aliases of the
same code; `--out` everywhere with the older names (--figures-dir, --hf) reaching the same destination; and
`interp ablate MODEL`, which writes to ./results/ unless told otherwise, never into the repository's figures/.
Through interp.cli.main, in process; nothing is trained."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path

import pandas as pd
import pytest

import analyses
from interp._util.paths import FIGURES_DIR
from interp.cli import build_parser, main
from tests.factories import save_pretrained_dir, tiny_hf, word_tokenizer

TRAINING = [n for n in analyses.EXPERIMENTS if n != "eval"]
# (old argv, new argv): the permanent aliases (interp.cli's docstring)
ALIASES = [(["sweep"], ["experiment", "sweep"]), (["ablate", "groups"], ["experiment", "groups"]),
           (["ablate", "rivals"], ["experiment", "rivals"]),
           (["ablate", "architectures"], ["experiment", "architectures"]),
           (["eval-experiment"], ["experiment", "eval"])]


@pytest.fixture
def no_training(monkeypatch):
    """Any training, evaluation or analysis compute fails the test."""
    import interp.jobs.training as training

    def refuse(*args, **kwargs):
        raise AssertionError("a dry run trained or computed something")

    monkeypatch.setattr(training, "run_experiment", refuse)
    monkeypatch.setattr(training, "train_experiment", refuse)
    for name in analyses.EXPERIMENTS:
        monkeypatch.setattr(analyses.experiment_analysis(name), "compute", refuse)


def _flat(text: str) -> str:
    return " ".join(text.split())


def dry_run_argv(name: str, tmp: Path) -> list[str]:
    if name == "eval":  # --figures-dir: the folder's name in both `interp experiment eval` and `eval-experiment`
        return [str(tmp / "runs" / "none"), "--eval-table", str(tmp / "eval.parquet"),
                "--figures-dir", str(tmp / "fig"), "--dry-run"]
    return ["--seeds", "1", "--root", str(tmp / "runs"), "--out", str(tmp / "fig"), "--dry-run"]


# ------------------------------------------------------------------------------------------------ the command

def test_help_lists_every_experiment_with_its_line(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["experiment", "--help"])
    assert stop.value.code == 0
    out = _flat(capsys.readouterr().out)
    assert set(analyses.EXPERIMENTS) == {"groups", "sweep", "rivals", "architectures", "gain-vs-tokens",
                                         "derived-taper", "eval"}
    for name, (analysis, about) in analyses.EXPERIMENTS.items():
        assert f"{name} {_flat(about)}" in out, name
        assert analyses.experiment_analysis(name).NAME == analysis and analysis in analyses.ANALYSES
    with pytest.raises(ValueError, match="unknown experiment 'nope'; experiments"):
        analyses.experiment_analysis("nope")


@pytest.mark.parametrize("name", list(analyses.EXPERIMENTS))
def test_dry_run_prints_a_plan_and_trains_nothing(name, tmp_path, capsys, no_training):
    assert main(["experiment", name, *dry_run_argv(name, tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"tables and figure: {tmp_path / 'fig'}" in out
    if name == "eval":
        assert f"eval {tmp_path / 'runs' / 'none'}: 0 finished run(s)" in out and "nothing to evaluate" in out
    else:
        assert "runs (" in out and "to train" in out and str(tmp_path / "runs") in out
    assert not (tmp_path / "fig").exists() and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", TRAINING)
def test_every_training_experiment_takes_the_shared_options(name):
    module = analyses.experiment_analysis(name)
    args = build_parser().parse_args(["experiment", name, "--seeds", "2", "--dry-run", "--no-train", "--out", "o"])
    assert (args.seeds, args.dry_run, args.no_train, args.out, args.set) == (2, True, True, Path("o"), [])
    from interp.cli.experiment import config_from_args

    if hasattr(module.Config(), "jobs"):
        args = build_parser().parse_args(["experiment", name, "--jobs", "2"])
        assert config_from_args(module, args, "x").jobs == 2
    # --set: TrainConfig fields where the Config carries overrides, else a field of the Config itself
    field, value = ("grad_accum", 2) if hasattr(module.Config(), "overrides") else ("seeds", 4)
    cfg = config_from_args(module, build_parser().parse_args(["experiment", name, "--set", f"{field}={value}"]), "x")
    assert (cfg.overrides[field] if hasattr(cfg, "overrides") else getattr(cfg, field)) == value


def test_bad_shared_options_are_one_line(tmp_path, capsys, no_training):
    assert main(["experiment", "groups", "--seeds", "0", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == ("interp experiment groups: --seeds must be >= 1 (seeds 0..N-1 per "
                                               "variant: an experiment needs at least one variant and one seed), got 0")
    assert main(["experiment", "gain-vs-tokens", "--set", "bogus=1", "--dry-run"]) == 2
    assert "interp experiment gain-vs-tokens: --set bogus: no such field" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------------ the aliases

@pytest.mark.parametrize("old, new", ALIASES, ids=lambda argv: " ".join(argv))
def test_old_commands_dispatch_to_the_same_code(old, new, tmp_path, capsys, no_training):
    name = new[1]
    parser = build_parser()
    old_args = parser.parse_args([*old, *dry_run_argv(name, tmp_path)])
    new_args = parser.parse_args([*new, *dry_run_argv(name, tmp_path)])
    assert old_args.func.func is new_args.func.func      # functools.partial of the same runner
    assert old_args.func.args == new_args.func.args      # the same experiment
    assert {k: v for k, v in vars(old_args).items() if k not in ("func", "command", "kind", "experiment")} == \
           {k: v for k, v in vars(new_args).items() if k not in ("func", "command", "kind", "experiment")}
    assert main([*old, *dry_run_argv(name, tmp_path)]) == 0
    printed_old = capsys.readouterr().out
    assert main([*new, *dry_run_argv(name, tmp_path)]) == 0
    assert printed_old == capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([*old, "--help"])
    assert f"Alias of `interp experiment {name}`" in _flat(capsys.readouterr().out)


def test_errors_of_an_alias_name_the_command_typed(capsys, no_training):
    assert main(["ablate", "rivals", "--seeds", "0", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("interp ablate rivals: --seeds must be >= 1")
    assert main(["sweep", "--jobs", "0", "--dry-run"]) == 2
    assert capsys.readouterr().err.startswith("interp sweep: --jobs must be >= 1")


def test_eval_experiment_keeps_its_older_flag_names(tmp_path):
    """`interp eval-experiment`: --out was the eval table and --figures-dir the folder; it keeps them, a permanent
    alias (`interp experiment eval`: --eval-table and --out)."""
    from interp.cli.experiment import eval_config

    parser = build_parser()
    old = parser.parse_args(["eval-experiment", "R", "--out", "t.parquet", "--figures-dir", "F"])
    new = parser.parse_args(["experiment", "eval", "R", "--eval-table", "t.parquet", "--out", "F"])
    assert (old.eval_table, old.out) == (new.eval_table, new.out) == ("t.parquet", Path("F"))
    assert eval_config(old, "x") == eval_config(new, "x")
    assert eval_config(new, "x").out == "t.parquet" and eval_config(new, "x").runs == "R"
    assert parser.parse_args(["experiment", "eval", "--figures-dir", "F"]).out == Path("F")
    default = parser.parse_args(["experiment", "eval"])
    assert default.out == Path("results") and eval_config(default, "x").runs == analyses.get(
        "downstream_groups").Config().runs


# ------------------------------------------------------------------------------------------------ --out

OUT_COMMANDS = [
    (["experiment", "groups"], "--figures-dir"), (["sweep"], "--figures-dir"), (["ablate", "groups"], "--figures-dir"),
    (["ablate", "architectures"], "--figures-dir"), (["ablate", "rivals"], "--figures-dir"),
    (["experiment", "eval"], "--figures-dir"), (["ablate", "some-model"], "--figures-dir"),
    (["ablate", "pretrained"], "--figures-dir"), (["figures"], "--figures-dir"), (["export", "run"], "--hf"),
]


@pytest.mark.parametrize("argv, old_flag", OUT_COMMANDS, ids=lambda a: " ".join(a) if isinstance(a, list) else a)
def test_out_and_its_older_name_reach_the_same_destination(argv, old_flag):
    parser = build_parser()
    by_out, by_old = parser.parse_args([*argv, "--out", "D"]), parser.parse_args([*argv, old_flag, "D"])
    assert by_out.out == by_old.out == Path("D")
    assert (by_out.out_flag, by_old.out_flag) == ("--out", old_flag)
    with pytest.raises(SystemExit):
        parser.parse_args([*argv, "--help"])


@pytest.mark.parametrize("flag", ["--out", "--figures-dir"])
def test_an_unwritable_out_is_refused_naming_the_flag_given(flag, tmp_path, capsys, no_training):
    (tmp_path / "file").write_text("x")
    argv = ["experiment", "sweep", "--no-train", "--root", str(tmp_path / "R"), flag, str(tmp_path / "file" / "f")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{flag} {tmp_path / 'file' / 'f'}: {tmp_path / 'file'} is a file, not a folder" in err
    assert not (tmp_path / "R").exists()


def test_export_takes_out_or_hf(tmp_path, capsys):
    for flag in ("--out", "--hf"):
        assert main(["export", str(tmp_path / "no-run"), flag, str(tmp_path / "hf")]) == 2
        assert "no-run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["export", "run"])   # --out is required


# ------------------------------------------------------------------------------------------------ ablate MODEL

@pytest.fixture
def hf_model(tmp_path, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    save_pretrained_dir(tmp_path / "mine", tiny_hf("LlamaForCausalLM", n_layers=3), word_tokenizer())
    rng = random.Random(0)
    (tmp_path / "text.txt").write_text(" ".join(rng.choice([f"w{i}" for i in range(5, 60)]) for _ in range(1500)))
    return tmp_path


SMALL = ["--text", "text.txt", "--seq-len", "16", "--score-sequences", "4", "--eval-sequences", "4", "--fractions",
         "0.5", "--seeds", "0", "--groups", "late", "--skip-layers", "0", "--threads", "1"]


def _committed() -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(FIGURES_DIR.glob("pretrained_capacity_ablation*"))}


@pytest.mark.parametrize("argv", [["ablate", "mine"], ["ablate", "pretrained", "--model", "mine"]],
                         ids=["ablate MODEL", "ablate pretrained --model"])
def test_ablate_model_writes_to_results_of_the_working_directory(argv, hf_model, monkeypatch, capsys):
    monkeypatch.chdir(hf_model)
    before = _committed()
    assert main([*argv, *SMALL]) == 0
    table = pd.read_csv(hf_model / "results" / "pretrained_capacity_ablation.csv")
    assert set(table["kind"]) >= {"baseline", "skip_mlp"}
    assert (hf_model / "results" / "pretrained_capacity_ablation.png").is_file()
    assert f"wrote {Path('results') / 'pretrained_capacity_ablation.csv'}" in capsys.readouterr().out
    assert _committed() == before                     # the repository's figures are untouched


def test_ablate_model_out_and_figures_dir(hf_model, monkeypatch):
    monkeypatch.chdir(hf_model)
    assert main(["ablate", "mine", *SMALL, "--out", "a"]) == 0
    assert main(["ablate", "mine", *SMALL, "--figures-dir", "b"]) == 0
    a, b = (pd.read_csv(hf_model / d / "pretrained_capacity_ablation.csv") for d in ("a", "b"))
    assert a["delta"].tolist() == b["delta"].tolist()
    assert not (hf_model / "results").exists()


def test_ablate_parses_a_model_or_a_kind():
    parser = build_parser()
    args = parser.parse_args(["ablate", "runs/cosine", "--seq-len", "32"])
    assert (args.model, args.seq_len, args.out, args.command) == (["runs/cosine"], 32, Path("results"), "ablate")
    assert parser.parse_args(["ablate", "pretrained"]).model is None            # the Config's default model
    assert parser.parse_args(["ablate", "groups"]).command == "ablate groups"
    with pytest.raises(SystemExit):
        parser.parse_args(["ablate"])
    with pytest.raises(SystemExit):
        parser.parse_args(["ablate", "--seq-len", "32", "runs/cosine"])         # MODEL comes first


def test_ablate_model_errors_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["ablate", "mine", "--seq-len", "1"]) == 2
    assert capsys.readouterr().err.startswith("interp ablate: seq_len=1: must be a positive integer")
    (tmp_path / "results").write_text("x")
    assert main(["ablate", "mine"]) == 2
    assert "--out results: results is a file, not a folder" in capsys.readouterr().err
