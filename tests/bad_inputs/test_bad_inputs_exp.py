"""Bad inputs of the experiment commands (`interp sweep`, `interp ablate groups|architectures|pretrained`) and of
the model's mixer options (issue #11 items 4, 6, 9, 11, 12): each case runs the real CLI (tests/badinput.py).

Experiment cases pass an absolute --root and --figures-dir inside the scratch folder (a relative --root resolves
against the working directory since issue #33 item 23; the default --root is the repository's runs/, and the
default --figures-dir the repository's figures/).
"""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.badinput import REPO, Case, cases_of, check_case

ROOT, FIG = "{tmp}/R", "{tmp}/fig"
OUT = ("--root", ROOT, "--figures-dir", FIG)
# micro has 2 layers; the group ablation needs one per third
GROUPS = ["ablate", "groups", "--preset", "micro", "--set", "n_layers=3", "--seeds", "1", "--steps", "1", *OUT]
SWEEP = ["sweep", "--preset", "micro", "--seeds", "1", "--steps", "1", "--only", "uniform", *OUT]
ARCH = ["ablate", "architectures", "--preset", "micro", "--seeds", "1", "--steps", "1", "--only", "uniform", *OUT]
TRAIN = ["train", "--preset", "micro", "--steps", "4", "--source", "{tmp}/corpus", "--val-fraction", "0.25",
         "--out", "{tmp}/runs/x"]
EXPERIMENTS = {"groups": GROUPS, "sweep": SWEEP, "architectures": ARCH}
COMMANDS = {**EXPERIMENTS, "train": TRAIN}


def corpus(tmp: Path) -> None:
    from tests.factories import write_corpus

    write_corpus(tmp / "corpus", n_docs=24, sentences=40, sentence_len=8)


for name, argv in EXPERIMENTS.items():  # --jobs: runs trained at once (the jobs layer's local tasks)
    Case(f"exp-jobs-zero-{name}", item="new", argv=[*argv, "--jobs", "0"],
         message=r"--jobs must be >= 1 \(runs trained at once\), got 0")


# --- item 6: mixer options are checked against the mixer's declared options -----------------------------------
for name, argv in EXPERIMENTS.items():
    Case(f"exp-mixer-options-attention-{name}", item="6", argv=[*argv, "--set", 'mixer_options={"bogus": 1}'],
         message=r"interp .*mixer_options has keys \['bogus'\], but mixer 'attention' takes no options")
Case("exp-mixer-options-attention-train", item="6", argv=[*TRAIN, "--set", 'mixer_options={"bogus": 1}'],
     setup=corpus, may_change=("cache/",),
     message=r"interp train: .*mixer_options has keys \['bogus'\], but mixer 'attention' takes no options")
Case("exp-mixer-options-titans-unknown-key", item="6",
     argv=[*ARCH, "--mixers", "titans", "--mixer-options", '{"titans": {"chunk_sise": 8}}'],
     message=r"unknown keys \['chunk_sise'\] for mixer 'titans'; valid keys are \['chunk_size'")
Case("exp-mixer-options-titans-negative-chunk", item="6",
     argv=[*ARCH, "--mixers", "titans", "--mixer-options", '{"titans": {"chunk_size": -4}}'],
     message=r"mixer_options\['chunk_size'\] must be a positive int, got -4 \(mixer 'titans'\)")
Case("exp-mixer-options-titans-wrong-type", item="6",
     argv=[*ARCH, "--mixers", "titans", "--set", 'mixer_options={"expansion": "4"}'],
     message=r"mixer 'titans': ModelConfig.mixer_options\['expansion'\]=\"4\": expects float, got str")
Case("exp-mixer-options-titans-momentum-int", item="6",
     argv=[*ARCH, "--mixers", "titans", "--set", 'mixer_options={"momentum": 1}'],
     message=r"mixer_options\['momentum'\]=1: expects bool")
Case("exp-mixer-options-hope-chunk-sizes-int", item="6",
     argv=[*ARCH, "--mixers", "hope_attention", "--set", 'mixer_options={"chunk_sizes": 7}'],
     message=r"mixer 'hope_attention': .*\['chunk_sizes'\]=7: expects tuple\[int, \.\.\.\]")
Case("exp-mixer-options-hope-chunk-sizes-item", item="6",
     argv=[*ARCH, "--mixers", "hope_attention", "--set", 'mixer_options={"chunk_sizes": [16, "x"]}'],
     message=r"\['chunk_sizes'\]\[1\]=\"x\": expects int, got str")
Case("exp-mixer-options-hope-negative-lr", item="6",
     argv=[*ARCH, "--mixers", "hope_attention", "--set", 'mixer_options={"lr_max": -1}'],
     message=r"lr_max >= 0.*\(mixer 'hope_attention'\)")
Case("exp-mixer-options-not-an-object", item="6", argv=[*ARCH, "--mixers", "titans", "--set", "mixer_options=[1]"],
     message=r"--set mixer_options=\[1\]: expects dict, got list")
Case("exp-mixer-options-per-mixer-not-json", item="new", argv=[*ARCH, "--mixer-options", '{"titans": '],
     message=r"argument --mixer-options: .* is not valid JSON")
Case("exp-mixer-options-per-mixer-not-object", item="new",
     argv=[*ARCH, "--mixers", "titans", "--mixer-options", '{"titans": 5}'],
     message=r"entries for \['titans'\] must be JSON objects")
Case("exp-mixer-options-train-titans", item="6",
     argv=[*TRAIN, "--mixer", "titans", "--set", 'mixer_options={"chunk_size": 0}'], setup=corpus,
     may_change=("cache/",), message=r"interp train: .*mixer_options\['chunk_size'\] must be a positive int")

# --- item 6: typed --set, through every entry point (the last session's fix, proved here) ---------------------
BAD_SETS = {"betas-unclosed": ("betas=[0.9", r"--set betas='\[0.9' is not valid JSON.*expects tuple\[float, float\]"),
            "width-int": ("width=3", r"--set width=3: expects WidthSpec, got int"),
            "lr-string": ('lr="0.1"', r'--set lr="0.1": expects float, got str'),
            "unknown-field": ("lr_max=1", r"--set lr_max: no such field"),
            "no-equals": ("steps", r"--set 'steps' must look like FIELD=VALUE")}
for name, argv in COMMANDS.items():
    for what, (item, message) in BAD_SETS.items():
        Case(f"exp-set-{what}-{name}", item="6", argv=[*argv, "--set", item],
             message=rf"interp {'ablate ' if name in ('groups', 'architectures') else ''}{name}: {message}")

# --- item 9: names are single path components; outputs stay under the root -----------------------------------
for name, argv in EXPERIMENTS.items():
    for what, value in {"dotdot": "../escaped", "absolute": "/tmp/interp-evil", "nested": "a/b", "dot": ".",
                        "empty": ""}.items():
        Case(f"exp-name-{what}-{name}", item="9", argv=[*argv, "--name", value],
             message=r"argument --name: value=.* must be a single directory name")
Case("exp-set-out-dir-groups", item="9", argv=[*GROUPS, "--set", 'out_dir="/tmp/interp-evil"'],
     message=r"Experiment.overrides may not set \['out_dir'\]")
Case("exp-root-is-a-file", item="9", argv=GROUPS, setup=lambda tmp: (tmp / "R").write_text("x"),
     message=r"--root .*R/groups-micro: .*R is a file, not a folder")
Case("exp-figures-dir-is-a-file", item="7", argv=SWEEP, setup=lambda tmp: (tmp / "fig").write_text("x"),
     message=r"--figures-dir .*fig: .*fig is a file, not a folder")


# --- item 4: one runner per experiment directory --------------------------------------------------------------
HELD = ExitStack()  # locks held by this (pytest) process for a case; released after each test


def hold_lock(tmp: Path) -> None:
    from interp._util.io import exclusive_lock
    from interp.jobs.runs import EXPERIMENT_LOCK as LOCK_FILE

    HELD.enter_context(exclusive_lock(tmp / "R" / "groups-micro" / LOCK_FILE, "test holder"))


Case("exp-lock-second-runner", item="4", argv=GROUPS, setup=hold_lock, subprocess=True,
     message=r"interp ablate groups: experiment .*groups-micro .* is in use by another process \(pid \d+")


# --- items 11/12: one clear line, exit 2 ----------------------------------------------------------------------
for name, argv in EXPERIMENTS.items():
    command = f"interp {'ablate ' if name != 'sweep' else ''}{name}"
    Case(f"exp-unknown-preset-{name}", item="11", argv=[*argv, "--preset", "nosuch"],
         message=rf"{command}: unknown preset 'nosuch'; choose one of")
    Case(f"exp-unknown-variant-{name}", item="11", argv=[*argv, "--only", "wider-sideways"],
         message=rf"{command}: .*only=\['wider-sideways'\]: unknown variant")
    Case(f"exp-seeds-zero-{name}", item="11", argv=[*argv, "--seeds", "0"], message=rf"{command}: --seeds must be >= 1")
    Case(f"exp-seeds-not-int-{name}", item="11", argv=[*argv, "--seeds", "two"], message=r"argument --seeds: invalid int")
    Case(f"exp-steps-zero-{name}", item="11", argv=[*argv, "--steps", "0"],
         message=rf"{command}: .*steps=0 .*must be a positive int")
    Case(f"exp-unknown-mixer-set-{name}", item="11", argv=[*argv, "--set", 'mixer="bogus"'],
         message=rf"{command}: .*(mixer='bogus' is not registered|may not set 'mixer')")
Case("exp-unknown-mixer-architectures", item="11", argv=[*ARCH, "--mixers", "bogus"],
     message=r"interp ablate architectures: Config.mixers=\['bogus'\]: need distinct registered mixers")
Case("exp-infeasible-multiple-groups", item="11", argv=[*GROUPS, "--set", "multiple=7"],
     message=r"interp ablate groups: .*not divisible by multiple=7")
Case("exp-missing-source-sweep", item="11", argv=[*SWEEP, "--set", 'source="{tmp}/nonexistent"'],
     may_change=("R/sweep-micro/.experiment.lock",), message=r"interp sweep: .*nonexistent.*no such file",
     check=lambda tmp: not list((tmp / "R").rglob("error.txt")) or pytest.fail("a run failed instead"))
Case("exp-set-seed-groups", item="new", argv=[*GROUPS, "--set", "seed=3"],
     message=r"interp ablate groups: Experiment.overrides may not set \['seed'\]")



def run_dir_with(**files: str):
    """setup writing files into R/groups-micro/uniform/seed0/ (name -> text; error_txt -> error.txt)."""
    def setup(tmp: Path) -> None:
        run = tmp / "R" / "groups-micro" / "uniform" / "seed0"
        run.mkdir(parents=True)
        for name, text in files.items():
            (run / name.replace("_", ".")).write_bytes(text.encode("utf-8", "surrogateescape"))
    return setup


Case("exp-result-not-an-object", item="12", argv=GROUPS, setup=run_dir_with(result_json="[1]"),
     may_change=("R/groups-micro/.experiment.lock",),
     message=r"interp ablate groups: .*seed0/result.json: expected a JSON object, got list")
Case("exp-result-field-not-a-number", item="12", argv=[*GROUPS, "--no-train"],
     setup=run_dir_with(result_json='{"status": "done", "val_ppl": "abc"}', config_json="{}"),
     message=r"seed0/result.json: fields \{'val_ppl': 'abc'\} must be numbers")
Case("exp-config-train-not-an-object", item="12", argv=[*GROUPS, "--no-train"],
     setup=run_dir_with(config_json='{"train": 5}'), message=r"seed0/config.json: 'train' must be a JSON object")
Case("exp-error-txt-not-utf8", item="12", argv=[*GROUPS, "--no-train"], rc=0, may_change=("fig/",),
     setup=run_dir_with(error_txt="Traceback\nValueError: \udcff\udcfe broken\n"),
     message=r"\[interp ablate groups\] no finished runs under .*groups-micro yet")



def stored_table_and_a_foreign_run(tmp: Path) -> None:
    """fig/ holds a sweep table; the sweep's only run directory was written by another config."""
    corpus(tmp)
    (tmp / "fig").mkdir()
    (tmp / "fig" / "schedule_sweep.csv").write_text("variant,val_ppl_mean\nuniform,16.28\n")
    run_dir_with(config_json='{"train": {"steps": 99}}', result_json='{"status": "done"}')(tmp)
    (tmp / "R" / "groups-micro").rename(tmp / "R" / "sweep-micro")


Case("exp-all-runs-failed-keeps-the-table", item="new", rc=1,
     argv=[*SWEEP, "--set", 'source="{tmp}/corpus"', "--set", "val_fraction=0.25"],
     setup=stored_table_and_a_foreign_run, may_change=("cache/", "R/sweep-micro/.experiment.lock", "R/*/*/*/error.txt", "R/*/*/*/.lock",
                                                       "R/sweep-micro/.jobs.parts/"),   # the jobs layer's plan
     message=r"\[interp sweep\] no finished runs under .*sweep-micro yet: nothing to tabulate")


def checkpoint(tmp: Path) -> None:
    """A 3-layer TaperedLM checkpoint with a word-level tokenizer, and a text of its words."""
    from tests.factories import WORDS, tiny_checkpoint, word_tokenizer_json

    tokenizer = word_tokenizer_json(tmp / "tokenizer.json", WORDS)
    tiny_checkpoint(tmp / "model", tokenizer=tokenizer)
    (tmp / "text.txt").write_text(" ".join(WORDS[i % len(WORDS)] for i in range(7 * 1000)))


PRETRAINED = ["ablate", "pretrained", "--model", "{tmp}/model", "--text", "{tmp}/text.txt", "--seq-len", "16",
              "--score-sequences", "2", "--eval-sequences", "2", "--fractions", "0.5", "--seeds", "0",
              "--figures-dir", FIG]
for what, (extra, message) in {
        "threads-negative": (["--threads", "-2"], r"threads=-2: must be an integer >= 1"),
        "confidence": (["--confidence", "2"], r"confidence=2.0: must be in \(0, 1\)"),
        "confidence-nan": (["--confidence", "nan"], r"confidence=nan: must be in \(0, 1\)"),
        "fraction-nan": (["--fractions", "nan"], r"fraction=nan: must be in \[0, 1\]"),
        "nothing-to-ablate": (["--groups", ",", "--skip-layers", "none"], r"nothing to ablate"),
        "random-without-seeds": (["--seeds", ","], r"seeds is empty but selections include 'random'"),
        "attn-implementation": (["--attn-implementation", "bogus"], r"argument --attn-implementation: invalid"),
        "text-too-short": (["--eval-sequences", "5000"], r"the text has 7000 tokens, but .* lower eval_sequences "
                                                         r"to at most 435"),
        "skip-layer-out-of-range": (["--skip-layers", "7"], r"skip_layers: layer 7 is out of range"),
        "device-typo": (["--device", "gpu"], r"device='gpu': write cpu, cuda or cuda:N"),
        "missing-model": (["--model", "{tmp}/nonexistent"], r"nonexistent: no such file or directory"),
        "figures-dir-is-a-file": (["--figures-dir", "{tmp}/text.txt"], r"--figures-dir .*text.txt is a file"),
}.items():
    Case(f"exp-pretrained-{what}", item="12" if "threads" in what else "new" if "device" in what else "11", argv=[*PRETRAINED, *extra],
         setup=checkpoint, message=rf"interp ablate pretrained: .*{message}" if "argument" not in message
         else message)


def checkpoint_with_bogus_options(tmp: Path) -> None:
    """checkpoint(), its stored model config given a mixer option that attention does not take."""
    import json

    checkpoint(tmp)
    config = json.loads((tmp / "model" / "config.json").read_text())
    config["model"]["mixer_options"] = {"bogus": 1}
    (tmp / "model" / "config.json").write_text(json.dumps(config))


Case("exp-pretrained-stored-bogus-mixer-options", item="6", argv=PRETRAINED, setup=checkpoint_with_bogus_options,
     message=r"interp ablate pretrained: .*model/config.json: .*mixer 'attention' takes no options")


@pytest.fixture(autouse=True)
def _release_locks():
    yield
    HELD.close()


@pytest.mark.parametrize("case", cases_of("exp-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


# --- not a refusal: outputs that were silently wrong or noisy -----------------------------------------------

def test_pretrained_summary_of_a_group_without_skips_is_nan_and_quiet(tmp_path):
    """--groups early --skip-layers 2: early has no skipped MLP, so its skip columns are NaN, with no
    "Mean of empty slice" RuntimeWarning (it came from the figure's per-group median)."""
    checkpoint(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in PRETRAINED]
    env = {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONWARNINGS": "error::RuntimeWarning", "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", "interp.cli", *argv, "--groups", "early", "--skip-layers", "2"],
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RuntimeWarning" not in proc.stderr and "Mean of empty slice" not in proc.stderr
    early = next(line for line in proc.stdout.splitlines() if line.startswith("early"))
    assert early.split()[-2:] == ["NaN", "NaN"]


def test_pretrained_summary_of_skips_only_keeps_them():
    """A table of MLP skips only (no neuron rows, so no group spans) summarises its skips in one row."""
    import pandas as pd

    from analyses.pretrained_ablation import summarize

    df = pd.DataFrame({"kind": ["baseline", "skip_mlp", "skip_mlp"], "group": [None] * 3, "layers": [None] * 3,
                       "fraction": [None] * 3, "selection": [None] * 3, "seed": [None] * 3, "layer": [None, 0, 5],
                       "delta": [0.0, 1.0, 3.0], "delta_ci_low": [0.0, 0.5, 2.5], "delta_ci_high": [0.0, 1.5, 3.5]})
    summary = summarize(df)
    assert list(summary.index) == ["all skipped"] and summary.loc["all skipped", "skip_mlp mean"] == 2.0


def test_experiment_refuses_an_unsafe_name_from_python(tmp_path):
    from interp.training.experiments import Experiment, Variant

    for name in ("../x", "/etc/evil", "a/b", "..", ""):
        with pytest.raises(ValueError, match="single directory name"):
            Experiment(name=name, preset="micro", variants=[Variant("uniform")], seeds=[0], root=tmp_path)
