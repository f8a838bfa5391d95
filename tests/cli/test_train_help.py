"""A newcomer's first ten minutes with `interp train` (issue 36): --help in sections (model, width, data,
optimisation, schedule, parallel, checkpointing, output), and one rule for a --steps shorter than the schedule:
the warm-up is shortened and a line on stderr says so, in `interp train` and in experiments alike
(interp.training.config.fit_to_steps), and the README's wsd line runs at the tour's 25 steps."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from interp._util.paths import CONFIG_FILE, RESULT_FILE
from interp.cli import build_parser, main
from interp.cli.train import config_from_args
from interp.training.config import SECTIONS, TrainConfig, fit_to_steps
from interp.training.cooldown import COOLDOWN_DIR
from interp.training.experiments import Experiment, Variant
from tests.badinput import Case, cases_of, check_case

HEADING = re.compile(r"^(\S[^:]*):$")
OUTSIDE_SECTIONS = {"-h", "--help"}  # argparse's help (interp.cli puts its --debug under "output")
README_WSD = ["train", "--preset", "tiny", "--lr-schedule", "wsd", "--cooldowns", "100,150"]  # README.md's line


def train_help(capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(["train", "--help"])
    assert stop.value.code == 0
    return capsys.readouterr().out


def sections(text: str) -> dict[str, list[str]]:
    """{heading: the flags listed under it} of a --help text."""
    found: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if HEADING.match(line):
            current = HEADING.match(line).group(1)
            found[current] = []
        elif current and line.startswith("  -"):  # an item: "  --a A, --b A   help" (help after 2+ spaces)
            invocation = re.split(r"\s{2,}", line.strip())[0]
            found[current] += [part.split()[0] for part in invocation.split(", ")]
    return found


def train_flags() -> set[str]:
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    return {s for action in train._actions for s in action.option_strings}


def test_help_lists_the_eight_sections_in_order(capsys):
    headings = list(sections(train_help(capsys)))
    assert list(SECTIONS) == ["model", "width", "data", "optimisation", "schedule", "parallel", "checkpointing",
                              "output"]
    assert headings == ["options", *SECTIONS]


def test_every_train_flag_is_under_exactly_one_section(capsys):
    listed = sections(train_help(capsys))
    assert set(listed.pop("options")) <= OUTSIDE_SECTIONS
    flags = train_flags() - OUTSIDE_SECTIONS
    where = {flag: [title for title, items in listed.items() if flag in items] for flag in flags}
    assert {flag: titles for flag, titles in where.items() if len(titles) != 1} == {}
    assert set().union(*listed.values()) == flags
    assert (where["--preset"], where["--steps"], where["--warmup-steps"], where["--schedule"], where["--out"]) == (
        ["model"], ["optimisation"], ["schedule"], ["width"], ["output"])


def test_every_train_config_flag_has_a_section():
    from interp._util.config import cli_fields

    assert {f.name: f.metadata["section"] for f in cli_fields(TrainConfig)
            if f.metadata.get("section") not in SECTIONS} == {}


# ------------------------------------------------------------------------------------------ --steps below the warm-up

def test_a_preset_warm_up_longer_than_the_run_is_shortened_and_said(capsys):
    cfg = config_from_args(build_parser().parse_args(["train", "--preset", "tiny", "--steps", "10", "--out", "r"]))
    assert (cfg.steps, cfg.warmup_steps) == (10, 10)
    assert capsys.readouterr().err.splitlines() == [
        "interp train: warm-up shortened from 25 to 10 steps: the run has 10 steps (--warmup-steps sets it)"]
    cfg.validate()


def test_a_warm_up_given_explicitly_is_left_to_validate():
    args = build_parser().parse_args(["train", "--preset", "tiny", "--steps", "10", "--warmup-steps", "20",
                                      "--out", "r"])
    cfg = config_from_args(args)
    assert cfg.warmup_steps == 20
    with pytest.raises(ValueError, match=r"warmup_steps=20 must be in \[0, steps=10\]"):
        cfg.validate()


def test_experiments_fit_with_the_same_rule_and_words(capsys):
    exp = Experiment("fit", "tiny", [Variant("uniform")], [0], overrides={"steps": 10})
    (_, _, cfg), = exp.configs()
    assert cfg.warmup_steps == 10
    cli = config_from_args(build_parser().parse_args(["train", "--preset", "tiny", "--steps", "10", "--out", "r"]))
    said = capsys.readouterr().err
    assert exp.plan()[1] == [said.removeprefix("interp train: ").strip()]
    assert cli.warmup_steps == cfg.warmup_steps
    explicit = Experiment("fit", "tiny", [Variant("uniform")], [0], overrides={"steps": 10, "warmup_steps": 20})
    with pytest.raises(ValueError, match="warmup_steps=20"):
        explicit.configs()


@pytest.mark.parametrize("overrides, expected, n_notes", [
    # wsd: the warm-up must end where the cooldown starts (25 steps cool down from step 20)
    (dict(steps=25, lr_schedule="wsd"), dict(warmup_steps=20), 1),
    # a branch as long as the run, or longer, is dropped; the shortest branch left bounds the warm-up
    (dict(steps=40, lr_schedule="wsd", cooldowns=(20, 40, 100)), dict(warmup_steps=16, cooldowns=(20,)), 2),
    (dict(steps=300), dict(warmup_steps=25), 0),  # fits already: nothing changes
])
def test_fit_to_steps(overrides, expected, n_notes):
    cfg, notes = fit_to_steps(TrainConfig.from_preset("tiny", **overrides), given=overrides)
    assert {k: getattr(cfg, k) for k in expected} == expected
    assert len(notes) == n_notes
    cfg.validate()


# ------------------------------------------------------------------------------------------ through the real CLI

def shrink(env, out: Path) -> list[str]:
    """The tiny preset at micro size on the test corpus (its schedule, 25-step warm-up included, kept)."""
    return ["--source", str(env[0]), "--vocab-size", "384", "--val-fraction", "0.25", "--d-model", "32",
            "--n-layers", "2", "--n-heads", "2", "--d-ff", "64", "--n-ctx", "32", "--eval-batches", "2",
            "--dtype", "fp32", "--threads", "1", "--out", str(out)]


@pytest.mark.parametrize("schedule", ["cosine", "wsd"])
def test_steps_below_the_warm_up_trains(env, tmp_path, capsys, schedule):
    out = tmp_path / schedule
    assert main(["train", "--preset", "tiny", "--lr-schedule", schedule, "--steps", "12", *shrink(env, out)]) == 0
    captured = capsys.readouterr()
    new = {"cosine": 12, "wsd": 10}[schedule]  # wsd: 12 steps cool down from step 12 - round(0.2 * 12) = 10
    assert f"interp train: warm-up shortened from 25 to {new} steps" in captured.err
    train = json.loads((out / CONFIG_FILE).read_text())["train"]
    assert (train["steps"], train["warmup_steps"]) == (12, new)
    assert json.loads((out / RESULT_FILE).read_text())["status"] == "done"


def test_readme_wsd_line_runs_at_the_tours_25_steps(env, tmp_path, capsys):
    """README: `interp train --preset tiny --lr-schedule wsd --cooldowns 100,150 --out runs/wsd`, with the tour's
    --steps 25: both branches are longer than the run (dropped, said) and the warm-up ends where its cooldown starts."""
    out = tmp_path / "wsd"
    assert main([*README_WSD, "--steps", "25", *shrink(env, out)]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines()[:2] == [
        "interp train: --cooldowns 100,150 dropped: a cooldown branch must be shorter than the 25-step run "
        "(no branches left)",
        "interp train: warm-up shortened from 25 to 20 steps: the 25-step run starts cooling down at step 20 "
        "(--warmup-steps sets it)"]
    result = json.loads((out / RESULT_FILE).read_text())
    assert (result["status"], result["step"]) == ("done", 25)
    assert not (out / COOLDOWN_DIR).exists()
    assert captured.out.strip().splitlines()[-1].startswith("[train] done: 25/25 steps, val_loss ")


# ------------------------------------------------------------------------------- INTERP_MAX_STEPS, the tour's cap

def test_max_steps_caps_train_experiments_and_the_python_api(env, tmp_path, capsys, monkeypatch):
    """INTERP_MAX_STEPS=N caps every run at N steps as if --steps N were given (the warm-up fitted by the same rule),
    in `interp train`, in an experiment's plan and in Trainer(cfg) from Python, each saying so; unset, nothing
    changes; a bad value names the variable."""
    from interp.training import Trainer

    monkeypatch.setenv("INTERP_MAX_STEPS", "4")
    cli = config_from_args(build_parser().parse_args(["train", "--preset", "tiny", "--out", "r"]))
    assert (cli.steps, cli.warmup_steps) == (4, 4)
    said = capsys.readouterr().err.splitlines()
    assert said[0] == ("interp train: steps capped from 250 to 4 by INTERP_MAX_STEPS=4: a quick run, not the "
                       "configured one (its result records steps=4)")
    assert said[1].startswith("interp train: warm-up shortened from 25 to 4 steps")
    (_, _, planned), = Experiment("cap", "tiny", [Variant("uniform")], [0]).configs()
    assert (planned.steps, planned.warmup_steps) == (4, 4)
    own = Experiment("cap", "tiny", [Variant("uniform")], [0], overrides={"warmup_steps": 10})  # architectures'
    (_, _, planned), = own.configs()                          # a warm-up the experiment gives is fitted under the cap
    assert (planned.steps, planned.warmup_steps) == (4, 4)
    assert fit_to_steps(TrainConfig.from_preset("tiny", steps=3))[0].steps == 3     # under the cap: as given

    out = tmp_path / "python"
    cfg = config_from_args(build_parser().parse_args(["train", "--preset", "tiny", *shrink(env, out)]))
    monkeypatch.setenv("INTERP_MAX_STEPS", "3")   # the Python API: a config built with 4 steps, run under a cap of 3
    capsys.readouterr()
    result = Trainer(cfg).run()
    assert (result["status"], result["step"]) == ("done", 3)
    assert json.loads((out / CONFIG_FILE).read_text())["train"]["steps"] == 3
    assert "steps capped from 4 to 3 by INTERP_MAX_STEPS=3" in capsys.readouterr().err

    monkeypatch.delenv("INTERP_MAX_STEPS")
    assert config_from_args(build_parser().parse_args(["train", "--preset", "tiny", "--out", "r"])).steps == 250
    monkeypatch.setenv("INTERP_MAX_STEPS", "ten")
    with pytest.raises(SystemExit, match=r"INTERP_MAX_STEPS='ten': give a positive step count"):
        config_from_args(build_parser().parse_args(["train", "--preset", "tiny", "--out", "r"]))


Case("train-max-steps-bad", item="new", argv=["train", "--preset", "micro", "--out", "runs/x"], subprocess=True,
     env={"INTERP_MAX_STEPS": "ten"},
     message=r"^interp train: environment variable INTERP_MAX_STEPS='ten': give a positive step count")
Case("train-max-steps-zero-experiment", item="new", argv=["experiment", "groups", "--preset", "micro", "--dry-run",
                                                          "--out", "figs"], subprocess=True,
     env={"INTERP_MAX_STEPS": "0"}, message=r"environment variable INTERP_MAX_STEPS='0': give a positive step count")


@pytest.mark.parametrize("case", cases_of("train-max-steps"), ids=lambda c: c.id)
def test_bad_max_steps(case, tmp_path):
    check_case(case, tmp_path)
