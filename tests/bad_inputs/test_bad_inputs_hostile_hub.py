"""A careless or hostile hub (issue #47, items 1-4, 6, 14, 16), through the real CLI in child processes: nothing a
server says is trusted, nothing waits forever, every network failure falls back to the cache.

Servers: one loopback hub (tests/hub_server.py, the real huggingface_hub client talks to it) started on first use
and shared by the cases, each case with its own repo names and its own HF_HOME; StalledServers that accept and never
answer, or trickle a byte every half second; a closed port (127.0.0.1:9) for an unreachable hub. Cases whose cache
is needed build it as huggingface_hub lays it out (snapshots/<commit>/, refs/<name>), so no case depends on another.
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
from pathlib import Path

import pandas as pd
import pytest

from tests.bad_inputs.test_bad_inputs_models import PROBE, _text
from tests.badinput import Case, cases_of, check_case
from tests.hub_server import StalledServer, shared_hub, tiny_model_folder

ONLINE = {"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "", "HF_DATASETS_OFFLINE": "", "HF_HUB_ETAG_TIMEOUT": "3",
          "HF_HUB_DOWNLOAD_TIMEOUT": "5", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_XET": "1",
          "HF_HUB_DISABLE_PROGRESS_BARS": "1", "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1", "INTERP_HUB_TIMEOUT": "2"}
CLOSED = "http://127.0.0.1:9"   # nothing listens: every request is refused at once
OUT = ("t.parquet", "t.parts", "t.parts/*", "hf", "hf/*", "cache", "cache/*", "e.parquet", "e.parts", "e.parts/*")
ROWS = ["--no-progress", "--out", "t.parquet"]


_hub = shared_hub   # started on first use


@functools.lru_cache(maxsize=None)
def _stalled(mode: str) -> StalledServer:
    server = StalledServer(mode)
    atexit.register(server.stop)
    return server


def _env(endpoint: str | None = None):
    """env(tmp) of a case: online, its own HF_HOME, the loopback hub (or `endpoint`) as HF_ENDPOINT."""
    def env(tmp: Path) -> dict[str, str]:
        return {**ONLINE, "HF_HOME": str(tmp / "hf"), "HF_ENDPOINT": endpoint or _hub().url}
    return env


def _folder(tmp: Path, name: str, seed: int, n_layer: int = 2) -> Path:
    return tiny_model_folder("gpt2", tmp / "served" / name, seed=seed, n_layer=n_layer)


def _weights_sha256(folder: Path) -> str:
    from interp.hf.sources.hf_dir import HfDirSource
    from interp.jobs.keys import weights_sha256

    return weights_sha256(HfDirSource(str(folder), folder))


# ------------------------------------------------------------------ 1: a branch that moves between plan and download

def _moving(tmp: Path, repo: str) -> None:
    """`repo`: main is A; once the refs were listed (the plan), main moves to B (the hub's answer changes). A case
    run again re-points main to A first (each case has its repo; the hub is shared)."""
    _text(tmp)
    hub = _hub()
    a, b = _folder(tmp, "a", 1), _folder(tmp, "b", 2)
    (tmp / "plan.txt").write_text(hub.add_model(repo, {"main": a})["main"])
    hub.after(f"/api/models/{repo}/refs", lambda: hub.add_model(repo, {"main": b}))


def _check_moving(tmp: Path, table: str) -> None:
    planned = (tmp / "plan.txt").read_text()
    rows = pd.read_parquet(tmp / table)
    assert set(rows["status"]) == {"ok"}, rows[["status", "error"]].drop_duplicates()
    assert set(rows["commit"]) == {planned} and set(rows["revision"]) == {"main"}
    snapshots = next((tmp / "hf" / "hub").glob("models--org--moving-*")) / "snapshots"
    assert [p.name for p in snapshots.iterdir()] == [planned]   # only the planned commit was downloaded
    if "weights_sha256" in rows:
        assert set(rows["weights_sha256"]) == {_weights_sha256(tmp / "served" / "a")}
        assert _weights_sha256(tmp / "served" / "a") != _weights_sha256(tmp / "served" / "b")


Case("hostile-hub-branch-moves-batch", item="47.1", setup=lambda tmp: _moving(tmp, "org/moving-batch"),
     env=_env(), subprocess=True, rc=0, argv=["batch", "org/moving-batch", *PROBE, *ROWS], message=r"1 analysed",
     may_change=OUT, check=lambda tmp: _check_moving(tmp, "t.parquet"))
Case("hostile-hub-branch-moves-eval", item="47.1", setup=lambda tmp: _moving(tmp, "org/moving-eval"),
     env=_env(), subprocess=True, rc=0, argv=["eval", "org/moving-eval", "--tasks", "wiki_heldout", "--limit", "2",
                                             "--out", "e.parquet"], message=r"\[eval\] 1 pair\(s\) evaluated",
     may_change=OUT, check=lambda tmp: _check_moving(tmp, "e.parquet"))


# ------------------------------------------------------------------ 2 and 3: unreachable or stalled, with a cache

def _cached(tmp: Path) -> None:
    """An HF cache holding org/cached at step0 (laid out as huggingface_hub does), and no hub to ask."""
    _text(tmp)
    folder = _folder(tmp, "step0", 3)
    commit = hashlib.sha1(b"step0").hexdigest()
    repo = tmp / "hf" / "hub" / "models--org--cached"
    shutil.copytree(folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "step0").write_text(commit)


for _name, _endpoint, _state in (("unreachable", lambda: CLOSED, "unreachable"),
                                 ("stalled", lambda: _stalled("silent").url, "stalled")):
    Case(f"hostile-hub-{_name}-batch-uses-the-cache", item="47.2" if _name == "unreachable" else "47.3",
         setup=_cached, env=lambda tmp, e=_endpoint: _env(e())(tmp), subprocess=True, rc=0,
         argv=["batch", "org/cached", "--revisions", "step0", *PROBE, *ROWS],
         message=rf"\[hub\] the refs of org/cached: the hub is {_state} .*using the cached copy", may_change=OUT)
    Case(f"hostile-hub-{_name}-eval-uses-the-cache", item="47.2" if _name == "unreachable" else "47.3",
         setup=_cached, env=lambda tmp, e=_endpoint: _env(e())(tmp), subprocess=True, rc=0,
         argv=["eval", "org/cached@step0", "--tasks", "wiki_heldout", "--limit", "2", "--out", "e.parquet"],
         message=rf"the hub is {_state} .*using the cached commit", may_change=OUT)


# ------------------------------------------------------------------ 3: a hub that never answers, nothing cached

for _mode in ("silent", "trickle"):
    Case(f"hostile-hub-{_mode}-hub-probe", item="47.3", setup=_text, subprocess=True,
         env=lambda tmp, m=_mode: _env(_stalled(m).url)(tmp), argv=["probe", "--model", "org/nothing", *PROBE,
                                                                    "--out", "t.parquet"],
         message=r"INTERP_HUB_TIMEOUT: the hub at 127\.0\.0\.1:\d+ did not answer the model info of org/nothing@main "
                 r"within 2 s", may_change=OUT)
Case("hostile-hub-silent-hub-batch-revisions", item="47.3", setup=_text, subprocess=True,
     env=lambda tmp: _env(_stalled("silent").url)(tmp), argv=["batch", "org/nothing", "--revisions", "all", *PROBE,
                                                             *ROWS],
     message=r"INTERP_HUB_TIMEOUT: the hub at .* did not answer the refs of org/nothing within 2 s", may_change=OUT)
Case("hostile-hub-trickle-hub-text", item="47.3", setup=_text, subprocess=True,
     env=lambda tmp: _env(_stalled("trickle").url)(tmp),
     argv=["probe", "--model", "org/nothing", "--text", "hf:org/texts", *PROBE[2:], "--out", "t.parquet"],
     message=r"INTERP_HUB_TIMEOUT: the hub at .* did not answer the dataset info of org/texts within 2 s",
     may_change=OUT)
Case("hostile-hub-timeout-not-a-number", item="47.3", setup=_text, subprocess=True,
     env=lambda tmp: {**_env(CLOSED)(tmp), "INTERP_HUB_TIMEOUT": "soon"},
     argv=["probe", "--model", "org/nothing", *PROBE, "--out", "t.parquet"],
     message=r"INTERP_HUB_TIMEOUT: 'soon' is not a number of seconds", may_change=OUT)


# ------------------------------------------------------------------ 4: a branch name that is a path

def _evil(tmp: Path) -> None:
    """org/evil: main, and a branch the hub lists as ../../../../victim.txt (from refs/ up to tmp/victim.txt), and
    one whose commit is not a commit id."""
    _text(tmp)
    (tmp / "victim.txt").write_text("a user's file\n")
    hub = _hub()
    if ("model", "org/evil") not in hub.repos:
        hub.add_model("org/evil", {"main": _folder(tmp, "main", 4), "../../../../victim.txt": _folder(tmp, "other", 5)})
        hub.add_ref("org/evil", "step1", "../../../../victim.txt")


def _only_main(table: Path) -> None:
    assert set(pd.read_parquet(table)["revision"]) == {"main"}


Case("hostile-hub-branch-name-is-a-path", item="47.4", setup=_evil, env=_env(), subprocess=True, rc=0,
     argv=["batch", "org/evil", "--revisions", "all", *PROBE, *ROWS],
     message=r"ignored 2 ref\(s\) the hub listed that are not revision names with commit ids: "
             r"'\.\./\.\./\.\./\.\./victim\.txt'", may_change=OUT,
     check=lambda tmp: _only_main(tmp / "t.parquet"))
Case("hostile-hub-revision-is-a-path", item="47.4", setup=_text,
     argv=["probe", "--model", "org/tiny", "--revision", "../../../../victim.txt", *PROBE, "--out", "t.parquet"],
     message=r"--revision: '\.\./\.\./\.\./\.\./victim\.txt' is not a revision name")
Case("hostile-hub-revisions-list-a-path", item="47.4", setup=_text,
     argv=["batch", "org/tiny", "--revisions", "main,/etc/passwd", *PROBE, *ROWS],
     message=r"--revisions: '/etc/passwd' is not a revision name")


# ------------------------------------------------------------------ a hub id is a name, never a path (ablate's keys)

ABLATE = ["--text", "text.txt", "--seq-len", "16", "--score-sequences", "2", "--eval-sequences", "3",
          "--batch-size", "2", "--fractions", "0.5", "--seeds", "0", "--skip-layers", "1", "--out", "fig"]


def _two_models(tmp: Path) -> None:
    _text(tmp)
    hub = _hub()
    for seed, name in enumerate(("org/abl-a", "org/abl-b")):
        if ("model", name) not in hub.repos:
            hub.add_model(name, {"main": _folder(tmp, name.split("/")[1], 6 + seed, n_layer=3)})   # 3 groups


def _both_ablated(tmp: Path) -> None:
    table = pd.read_parquet(tmp / "a.parquet")
    assert set(table["model_spec"]) == {"org/abl-a", "org/abl-b"} and set(table["status"]) == {"ok"}
    assert not [p for p in (tmp / "a.parts").iterdir() if p.is_dir() and not p.name.startswith(".")]


Case("hostile-hub-ablate-hub-ids", item="new", setup=_two_models, env=_env(), subprocess=True, rc=0,
     argv=["ablate", "org/abl-a", "org/abl-b", *ABLATE, "--table", "a.parquet"], message=r"2 analysed|wrote",
     may_change=(*OUT, "a.parquet", "a.parts", "a.parts/*", "fig", "fig/*"), check=_both_ablated)


# ------------------------------------------------------------------ 6, 14, 16: specs and flags

Case("hostile-hub-huge-range", item="47.6", setup=_text,
     argv=["batch", "org/tiny", "--revisions", "step0..step999999999999:1", *PROBE, *ROWS],
     message=r"--revisions: 'step0\.\.step999999999999:1' names 1,000,000,000,000 revisions, more than the 100,000")
Case("hostile-hub-padded-range", item="47.14", setup=_text,
     argv=["batch", "org/tiny", "--revisions", "step_000000..step_000128:64", *PROBE, *ROWS],
     message=r"--revisions: hub model 'org/tiny' has no revision step_000000, step_000064, step_000128 in the local")
Case("hostile-hub-eval-names-its-flag", item="47.16", setup=_text,
     argv=["eval", "org/tiny", "--revision", "nosuch", "--tasks", "wiki_heldout", "--out", "e.parquet"],
     message=r"interp eval: --revision: hub model 'org/tiny' has no revision nosuch")
Case("hostile-hub-revision-pattern-not-a-regex", item="52", setup=_text,
     argv=["batch", "org/tiny", "--revisions", "all", "--revision-pattern", r"ckpt-(?P<step>\d+", *PROBE, *ROWS],
     message=r"interp batch: --revision-pattern: 'ckpt-\(\?P<step>\\d\+' is not a regular expression \(missing \)")


@pytest.mark.parametrize("case", cases_of("hostile-hub-"), ids=lambda c: c.id)
def test_case(case: Case, tmp_path: Path) -> None:
    check_case(case, tmp_path)
