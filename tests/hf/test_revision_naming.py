"""Revision naming (issue #52): the step (and tokens) a checkpoint's revision name carries.

Built-in schemes (interp.hf.hub.NAMING_SCHEMES), the two added here beside Pythia / OLMo / ours: SmolLM2's
intermediate checkpoints (`step-240000`, no tokens in the name) and the FineWeb ablation models (`step-001000-2BT`,
2B tokens). Any other series: `--revision-pattern REGEX` with groups step and/or tokens, checked up front (one line
naming the flag, what is wrong and an example), tried before the table, ordering `all` and filling every hub
target's step / tokens. The last tests list a series' refs from the loopback hub (tests/hub_server.py; no weights,
nothing downloaded) through interp.jobs.targets and `interp batch --dry-run`. Fast: no model is built.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from interp._util.errors import InputError
from interp.hf import hub
from tests.hub_server import LoopbackHub, patch_clients

NAN = float("nan")
CUSTOM = r"ckpt-(?P<step>\d+)-tok(?P<tokens>\d+(?:\.\d+)?[KMBT])"


def same(got: tuple[float, float], want: tuple[float, float]) -> bool:
    return all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(got, want))


# ------------------------------------------------------------------ the table

@pytest.mark.parametrize("name, want", [
    # SmolLM2-{135M,360M,1.7B}-intermediate-checkpoints: the model cards' own examples, and two seen in public code
    ("step-240000", (240000, NAN)), ("step-160000", (160000, NAN)), ("step-125000", (125000, NAN)),
    ("step-1200000", (1200000, NAN)), ("step-1440000", (1440000, NAN)),
    # HuggingFaceFW/ablation-model-*: "The naming convention is `step-001000-2BT`" (2BT: 2 billion tokens)
    ("step-001000-2BT", (1000, 2e9)), ("step-167000-350BT", (167000, 3.5e11)), ("step-000500-500MT", (500, 5e8)),
    # the schemes that were there keep their meaning
    ("step143000", (143000, NAN)), ("step1000-tokens4B", (1000, 4e9)),
    ("stage1-step140000-tokens294B", (140000, 2.94e11)), ("step_000128", (128, NAN)),
    # near misses read nothing
    ("main", (NAN, NAN)), ("step-001000-2B", (NAN, NAN)), ("step-", (NAN, NAN)), ("step-12a", (NAN, NAN)),
    ("stage1-step-40000", (NAN, NAN)),
])
def test_built_in_schemes(name, want):
    assert same(hub.step_of(name), want), hub.step_of(name)


def test_the_table_names_the_two_new_schemes():
    schemes = dict(hub.NAMING_SCHEMES)
    assert schemes["smollm2"].match("step-240000") and not schemes["smollm2"].match("step-001000-2BT")
    assert schemes["fineweb"].match("step-001000-2BT")["tokens"] == "2B"


@pytest.mark.parametrize("text, want", [("294B", 2.94e11), ("2B", 2e9), ("1.5T", 1.5e12), ("512K", 512e3),
                                        ("100M", 1e8), ("4096", 4096.0), ("2b", 2e9), ("0.4B", 4e8)])
def test_tokens_of_reads_a_number_and_its_unit(text, want):
    assert hub.tokens_of(text) == pytest.approx(want)


@pytest.mark.parametrize("text", ["", "B", "2X", "2BT", "1e9", "-2B", "2 B", "²"])
def test_tokens_of_refuses_anything_else(text):
    with pytest.raises(ValueError, match="not a token count"):
        hub.tokens_of(text)


# ------------------------------------------------------------------ --revision-pattern

def test_a_pattern_reads_step_and_tokens_before_the_table():
    assert same(hub.step_of("ckpt-1000-tok2B", CUSTOM), (1000, 2e9))
    assert same(hub.step_of("ckpt-00050-tok0.1B", CUSTOM), (50, 1e8))
    assert same(hub.step_of("ckpt-1000-tok2B"), (NAN, NAN))                  # no scheme knows it without the pattern
    assert same(hub.step_of("step1000", CUSTOM), (1000, NAN))                # no match: the table still answers
    assert same(hub.step_of("main", CUSTOM), (NAN, NAN))
    assert same(hub.step_of("xckpt-1000-tok2B", CUSTOM), (NAN, NAN))         # the whole name must match
    # a pattern wins over the table where both match
    assert same(hub.step_of("step1000", r"step(?P<tokens>\d+)"), (NAN, 1000))
    # step only, tokens only, a compiled pattern, an anchored one, a group that did not take part
    assert same(hub.step_of("run/iter_0042", r"run/iter_(?P<step>\d+)"), (42, NAN))
    assert same(hub.step_of("seen-300B", r"seen-(?P<tokens>\d+[KMBT])"), (NAN, 3e11))
    assert same(hub.step_of("ckpt-7-tok1K", re.compile(CUSTOM)), (7, 1e3))
    assert same(hub.step_of("s7", r"^s(?P<step>\d+)(?:-(?P<tokens>\d+[MB]))?$"), (7, NAN))


def test_a_good_pattern_compiles_once_checked():
    compiled = hub.compile_revision_pattern(CUSTOM)
    assert set(compiled.groupindex) == {"step", "tokens"}
    assert hub.compile_revision_pattern(r"(?P<step>\d+)").pattern == r"(?P<step>\d+)"
    assert hub.compile_revision_pattern(r"v(\d+)-(?P<tokens>\d+B)")   # an unnamed group is fine


EXAMPLE = re.escape(r"e.g. --revision-pattern 'ckpt-(?P<step>\d+)-(?P<tokens>\d+[KMBT])' for ckpt-1000-2B)")


@pytest.mark.parametrize("pattern, what", [
    (r"ckpt-(?P<step>\d+", r"'ckpt-\(\?P<step>\\d\+' is not a regular expression \(missing \), unterminated subpattern"),
    ("ckpt-[", r"'ckpt-\[' is not a regular expression \(unterminated character set"),
    (r"ckpt-\d+", r"'ckpt-\\d\+' has no group \(\?P<step>\.\.\.\) or \(\?P<tokens>\.\.\.\), so it reads nothing"),
    (r"(?P<stage>\d+)-(?P<step>\d+)", r"has the unknown group name\(s\) stage: only step and tokens are read"),
    (r"(?P<Step>\d+)-(?P<tok>\d+)", r"has the unknown group name\(s\) Step, tok: only step and tokens"),
    ("", r"'' is empty: a regex with a group"),
])
def test_each_bad_pattern_is_one_line_naming_the_flag_what_and_the_fix(pattern, what):
    with pytest.raises(InputError) as caught:
        hub.compile_revision_pattern(pattern)
    message = str(caught.value)
    assert message.startswith("--revision-pattern: ") and "\n" not in message
    assert re.search(what, message), message
    assert re.search(EXAMPLE, message), message
    with pytest.raises(InputError, match="--revision-pattern: "):   # step_of checks it too
        hub.step_of("step1000", pattern)


def test_a_group_that_matched_no_number_is_one_line():
    with pytest.raises(InputError, match=r"--revision-pattern: its group step matched 'a1' in the revision 'ra1', "
                                         r"not a whole number \(match digits only"):
        hub.step_of("ra1", r"r(?P<step>.+)")
    with pytest.raises(InputError, match=r"--revision-pattern: its group tokens matched 'lots' in the revision "
                                         r"'t-lots', not a number with an optional K/M/B/T unit"):
        hub.step_of("t-lots", r"t-(?P<tokens>\w+)")


def test_a_bad_pattern_fails_before_any_path_or_request(tmp_path):
    from interp.jobs.targets import expand_paths

    with pytest.raises(InputError, match="--revision-pattern: '\\(' is not a regular expression"):
        expand_paths([str(tmp_path / "no-such-thing")], revisions="all", revision_pattern="(")
    with pytest.raises(InputError, match="--revision-pattern: '\\(' is not a regular expression"):
        hub.revisions("org/never-asked", "all", pattern="(")   # offline and uncached: it would fail otherwise


def test_a_pattern_without_a_hub_id_is_refused(tmp_path):
    from interp.jobs.targets import expand_paths

    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))   # an HF dir, as classified
    with pytest.raises(InputError, match="--revision-pattern: applies to hub models only"):
        expand_paths([str(tmp_path / "hf")], revision_pattern=CUSTOM)


def test_the_batch_config_checks_it():
    from interp.probes.batch import BatchConfig

    with pytest.raises(InputError, match="--revision-pattern: .* has no group"):
        BatchConfig(paths=["org/x"], revisions="all", revision_pattern="ckpt").validate()
    assert BatchConfig.from_dict(BatchConfig(revision_pattern=CUSTOM).to_dict()).revision_pattern == CUSTOM


# ------------------------------------------------------------------ a series on the loopback hub

SERIES = {"ckpt-1000-tok2B": 1000, "ckpt-200-tok0.4B": 200, "ckpt-50-tok100M": 50}
FINEWEB = {"step-002000-4BT": 2000, "step-001000-2BT": 1000, "step-000500-1BT": 500}


@pytest.fixture
def series_hub(tmp_path, monkeypatch):
    """org/custom (SERIES) and org/fineweb-like (FINEWEB) served with one small file per revision (no weights:
    listing refs is all a plan asks), `main` an alias of the last; the in-process clients pointed at it."""
    def folder(name: str) -> Path:
        path = tmp_path / "folders" / name
        path.mkdir(parents=True)
        (path / "config.json").write_text(json.dumps({"revision": name}))
        return path

    with LoopbackHub(tmp_path / "hub") as server:
        server.add_model("org/custom", {name: folder(name) for name in SERIES})
        server.add_model("org/fineweb-like", {name: folder(name) for name in FINEWEB})
        patch_clients(server, tmp_path / "hf", monkeypatch)
        yield server


def test_hub_targets_take_steps_and_tokens_from_the_pattern(series_hub):
    from interp.jobs.targets import expand_paths, hub_targets

    targets = hub_targets("org/custom", revisions="all", revision_pattern=CUSTOM)
    assert [t.revision for t in targets] == ["ckpt-50-tok100M", "ckpt-200-tok0.4B", "ckpt-1000-tok2B", "main"]
    assert [t.step for t in targets][:3] == [50, 200, 1000] and math.isnan(targets[-1].step)
    assert [t.tokens for t in targets][:3] == [1e8, 4e8, 2e9] and math.isnan(targets[-1].tokens)
    assert all(t.kind == "hub" and hub.is_commit(t.commit) for t in targets)
    # without it, nothing is read and `all` is in name order
    plain = hub_targets("org/custom", revisions="all")
    assert [t.revision for t in plain] == sorted([*SERIES, "main"]) and all(math.isnan(t.step) for t in plain)
    # a list keeps its order and still gets the steps; expand_paths passes the pattern down
    listed = expand_paths(["org/custom"], revisions="ckpt-200-tok0.4B,ckpt-50-tok100M", revision_pattern=CUSTOM)
    assert [(t.step, t.tokens) for t in listed] == [(200, 4e8), (50, 1e8)]
    # the FineWeb scheme needs no pattern
    fineweb = hub_targets("org/fineweb-like", revisions="all")
    assert [(t.revision, t.step, t.tokens) for t in fineweb][:3] == [
        ("step-000500-1BT", 500, 1e9), ("step-001000-2BT", 1000, 2e9), ("step-002000-4BT", 2000, 4e9)]


def test_batch_dry_run_takes_the_flag(series_hub, capsys):
    from interp.cli import main

    assert main(["batch", "org/custom", "--revisions", "all", "--revision-pattern", CUSTOM, "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [re.search(r"@(\S+)", line)[1] for line in lines] == [
        "ckpt-50-tok100M", "ckpt-200-tok0.4B", "ckpt-1000-tok2B", "main"]
    assert [re.search(r"step=(\d+)", line)[1] for line in lines[:3]] == ["50", "200", "1000"]
    assert main(["batch", "org/custom", "--revisions", "all", "--revision-pattern", "ckpt-(", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("interp batch: --revision-pattern: 'ckpt-(' is not a regular")
