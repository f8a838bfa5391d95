"""Issue #33, data group: `interp data tokenize`, `interp data train-tokenizer` and `interp train --source DIR` on
hostile but fair inputs, each through the real CLI (tests/badinput.py). A truncated .jsonl.zst is skipped and
reported as a truncated .jsonl.gz is (item 3); manifest.json is read by one checked reader: missing keys, wrong
types, a deleted shard entry, paths leaving the folder (6); a SIGTERM or a kill -9 of `--workers 2` leaves no
process holding DIR's lock (8); concurrent --task-index runs on one DIR (10); a folder left by --plan-only or by a
run killed before its first shard, and a train-tokenizer killed while moving its files in, run again (11); an
error inside a datatrove task is one line (20); an empty validation split is refused before training (22);
--id-field naming no field says so (29); --out is checked before any input is read.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.badinput import REPO, Case, cases_of, check_case, run_case
from tests.factories import WORDS
from tests.bad_inputs.test_bad_inputs_data_tokenize import BPE, RUN, TOKENIZE, TRAIN, _corpus, _file, _tokenized, _with

TOKENIZE2 = ["data", "tokenize", "c", "--tokenizer", "tok", "--out", "out", "--workers", "2", "--shard-size", "1"]
MANIFEST = ("out", "manifest.json")


def _rows(n: int, seed: int = 0) -> bytes:
    rng = random.Random(seed)
    return "".join(json.dumps({"text": " ".join(rng.choice(WORDS) for _ in range(40)) + " ."}) + "\n"
                   for _ in range(n)).encode()


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1", **extra}


def _interp(tmp: Path, argv: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "interp.cli", *argv], cwd=tmp, env=_env(tmp, **env),
                          capture_output=True, text=True, timeout=900)


def _manifest(tmp: Path) -> dict:
    return json.loads((tmp / "out" / "manifest.json").read_text())


# ---- 33.3: a truncated .jsonl.zst is corrupt, as a truncated .jsonl.gz is: skipped, reported, exit 0

def _truncated_zst(tmp: Path) -> None:
    import zstandard

    whole = zstandard.ZstdCompressor().compress(_rows(3000))
    (tmp / "c" / "b.jsonl.zst").write_bytes(whole[:len(whole) * 4 // 7])   # ~1,700 of 3,000 lines readable


def _zst_skipped(tmp: Path) -> None:
    manifest = _manifest(tmp)
    assert [s["input"] for s in manifest["skipped_inputs"]] == ["b.jsonl.zst"], manifest["skipped_inputs"]
    assert sum(manifest["n_documents"].values()) == 80   # a.jsonl's only: nothing of the truncated file


Case("hostile-data-zst-truncated-tokenize", item="33.3", setup=_with(_truncated_zst), argv=TOKENIZE, rc=0,
     message=r"interp data tokenize: skipped unreadable input .*b\.jsonl\.zst: EOFError: Compressed file ended",
     may_change=("out",), check=_zst_skipped)
Case("hostile-data-zst-truncated-train-tokenizer", item="33.3", setup=_with(_truncated_zst),
     argv=[*BPE, "--sample-bytes", "10M"], rc=0, may_change=("bpe",),
     message=r"interp data train-tokenizer: skipped unreadable input .*b\.jsonl\.zst: EOFError",
     check=lambda tmp: json.loads((tmp / "bpe" / "meta.json").read_text())["sampled"]["skipped_inputs"]
     or pytest.fail("the truncated input is not in meta.json"))


# ---- 33.6: manifest.json is checked, field by field and against itself, before any shard is read

def _edit_manifest(edit):
    def setup(tmp: Path) -> None:
        path = tmp / "out" / "manifest.json"
        doc = json.loads(path.read_text())
        edit(doc)
        path.write_text(json.dumps(doc))
    return setup


def _drop_shard(doc: dict, *, recount: bool = False) -> None:
    gone = doc["shards"].pop()
    if recount:  # a careful editor: n_shards and the totals made to agree
        doc["n_shards"] -= 1
        for key in ("n_tokens", "n_documents"):
            for split in ("train", "val"):
                doc[key][split] -= gone[key][split]


def _set(path: tuple, value):
    def edit(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


_TWO_SHARDS = (_file("c/b.jsonl", _rows(60, seed=1)), _tokenized("--shard-size", "1"))
Case("hostile-data-manifest-missing-key", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"], may_change=RUN,
     setup=_with(_tokenized(), _edit_manifest(lambda d: d.pop("n_tokens"))),
     message=r"out/manifest\.json: n_tokens: manifest\.json has no field 'n_tokens' \(rerun `interp data tokenize")
Case("hostile-data-manifest-wrong-type", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"], may_change=RUN,
     setup=_with(_tokenized(), _edit_manifest(_set(("n_shards",), "1"))),
     message=r"manifest\.json: n_shards: is a str \('1'\), expected int")
Case("hostile-data-manifest-shard-counts-wrong-type", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"],
     may_change=RUN, setup=_with(_tokenized(), _edit_manifest(_set(("shards", 0, "n_tokens", "train"), -5))),
     message=r"manifest\.json: shards\[0\]\.n_tokens: is .*expected \{'train': \.\.\., 'val': \.\.\.\} of counts")
Case("hostile-data-manifest-deleted-shard", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"], may_change=RUN,
     setup=_with(*_TWO_SHARDS, _edit_manifest(_drop_shard)),
     message=r"manifest\.json: shards: lists 1 finished and 0 missing shard\(s\), but n_shards is 2")
Case("hostile-data-manifest-deleted-shard-recounted", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"],
     may_change=RUN, setup=_with(*_TWO_SHARDS, _edit_manifest(lambda d: _drop_shard(d, recount=True))),
     message=r"manifest\.json: content_hash: does not match the shard entries")
Case("hostile-data-manifest-shard-leaves-folder", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"],
     may_change=RUN, setup=_with(_tokenized(), _edit_manifest(_set(("shards", 0, "name"), "../../c"))),
     message=r"manifest\.json: shards\[0\]\.name: is '\.\./\.\./c', which leaves the folder")
Case("hostile-data-manifest-absolute-tokenizer", item="33.6", argv=[*TRAIN, "--val-fraction", "0.2"],
     may_change=RUN, setup=_with(_tokenized(), _edit_manifest(_set(("tokenizer", "file"), "/etc/passwd"))),
     message=r"manifest\.json: tokenizer\.file: is '/etc/passwd', which leaves the folder")


# ---- 33.8: a SIGTERM or a kill -9 of `data tokenize --workers 2` leaves no process behind, nor DIR locked

def _slow_inputs(tmp: Path) -> None:
    """Two inputs that take each worker many seconds (millions of records without a text field)."""
    for name in ("s1", "s2"):
        (tmp / "c" / f"{name}.jsonl.gz").write_bytes(gzip.compress(b'{"x": 1}\n' * 4_000_000, 1))


def _alive_with(marker: str) -> list[int]:
    """pids of live processes whose environment holds `marker` (the run's, its forkserver's and workers')."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
                    if state != "Z":
                        found.append(int(entry.name))
            except OSError:
                continue
    return found


def _stopped_by(sig: int):
    def setup(tmp: Path) -> None:
        _corpus(tmp)
        _slow_inputs(tmp)
        marker = f"INTERP_TEST_RUN={uuid.uuid4().hex}"
        key, value = marker.split("=")
        proc = subprocess.Popen([sys.executable, "-m", "interp.cli", *TOKENIZE2], cwd=tmp,
                                env=_env(tmp, **{key: value}),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 300
            while len(list((tmp / "out" / "shards").glob("s?.jsonl.gz-*"))) < 2:  # both workers on a slow input
                assert proc.poll() is None, f"the run ended early: {proc.stderr.read()}"
                assert time.monotonic() < deadline, "the workers never started"
                time.sleep(0.1)
            time.sleep(0.5)
            proc.send_signal(sig)
            err = proc.communicate(timeout=120)[1]
        finally:
            if proc.poll() is None:
                proc.kill()
        if sig == signal.SIGTERM:
            assert proc.returncode == 143, err
            assert "interp data tokenize: interrupted by SIGTERM" in err, err
            assert "Traceback" not in err, err
        else:
            assert proc.returncode == -signal.SIGKILL, err
        deadline = time.monotonic() + 30
        while (left := _alive_with(marker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not left, f"processes of the stopped run still alive: {left}"
        for name in ("s1", "s2"):  # quick now: the rerun only has to get the lock and finish
            (tmp / "c" / f"{name}.jsonl.gz").write_bytes(gzip.compress(_rows(20, seed=2)))
    return setup


def _complete(tmp: Path) -> None:
    manifest = _manifest(tmp)
    assert manifest["complete"] and manifest["n_shards"] == 3, manifest["missing_shards"]


Case("hostile-data-tokenize-sigterm-workers", item="33.8", setup=_stopped_by(signal.SIGTERM), argv=TOKENIZE2, rc=0,
     subprocess=True, message=r"\[data\] 3 shard\(s\) from 3 input\(s\); this run: \d done already",
     may_change=("out",), check=_complete)
Case("hostile-data-tokenize-kill9-workers", item="33.8", setup=_stopped_by(signal.SIGKILL), argv=TOKENIZE2, rc=0,
     subprocess=True, message=r"\[data\] 3 shard\(s\) from 3 input\(s\); this run: \d done already",
     may_change=("out",), check=_complete)


# ---- 33.10: --task-index runs started together on one DIR all finish; the last writes the complete manifest

def _tasks_at_once(tmp: Path) -> None:
    _corpus(tmp)
    for name in ("b", "d"):
        (tmp / "c" / f"{name}.jsonl").write_bytes(_rows(50, seed=ord(name)))
    argv = [*TOKENIZE, "--shard-size", "1", "--task-count", "3"]
    procs = [subprocess.Popen([sys.executable, "-m", "interp.cli", *argv, "--task-index", str(i)], cwd=tmp,
                              env=_env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    errors = [p.communicate(timeout=900)[1] for p in procs]
    for i, (proc, err) in enumerate(zip(procs, errors, strict=True)):
        assert proc.returncode == 0, f"task {i} of 3: exit {proc.returncode}\n{err}"
    assert _manifest(tmp)["complete"], "the last task to finish did not write the complete manifest"
    assert not list((tmp / "out").rglob(".*.tmp")), "temporaries left"


Case("hostile-data-concurrent-tasks", item="33.10", setup=_tasks_at_once, argv=[*TOKENIZE, "--shard-size", "1"],
     rc=0, message=r"\[data\] 3 shard\(s\) from 3 input\(s\); this run: 3 done already, 0 to tokenize",
     may_change=("out",), check=_complete)


# ---- 33.11: what --plan-only, a kill before the first shard, or a kill while moving files in leaves is ours

def _killed(argv: list[str], fault: str):
    def run(tmp: Path) -> None:
        proc = _interp(tmp, argv, INTERP_FAULT=fault)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
    return run


Case("hostile-data-tokenize-after-plan-only", item="33.11", setup=_with(_tokenized("--plan-only", val=0.05)),
     argv=TOKENIZE, rc=0, message=r"\[data\] 1 shard\(s\) from 1 input\(s\); this run: 0 done already, 1 to tokenize",
     may_change=("out",), check=lambda tmp: _manifest(tmp)["complete"] or pytest.fail("incomplete"))
Case("hostile-data-tokenize-killed-before-first-shard", item="33.11",
     setup=_with(_killed(TOKENIZE, "replace logs/plan-*")), argv=TOKENIZE, rc=0,
     message=r"\[data\] removed 1 temporary file\(s\) a stopped run left in out", may_change=("out",),
     check=lambda tmp: _manifest(tmp)["complete"] or pytest.fail("incomplete"))
Case("hostile-data-train-tokenizer-killed-moving-in", item="33.11",
     setup=_with(_killed(BPE, "replace bpe/tokenizer.json")), argv=BPE, rc=0,
     message=r"\[data\] bpe: removed what a stopped run left \(.*tokenizer\.json.*\); training again",
     may_change=("bpe",), check=lambda tmp: sorted(p.name for p in (tmp / "bpe").iterdir())
     == ["meta.json", "tokenizer.json", "tokenizer_config.json"] or pytest.fail("leftovers"))


# ---- 33.20: an error inside a datatrove task is one line (its traceback goes to the task's log file)

_FULL = {"setup": _with(_file("c/big.jsonl", _rows(2000))), "subprocess": True, "fsize": 48 << 10,
         "may_change": ("out",)}
Case("hostile-data-task-error-one-line", item="33.20", argv=TOKENIZE, **_FULL,
     message=r"^interp data tokenize: .*no room left to write it")
Case("hostile-data-task-error-one-line-workers", item="33.20",
     argv=[*TOKENIZE[:-1], "2", "--shard-size", "1"], **_FULL,
     message=r"^interp data tokenize: .*no room left to write it")


def test_task_error_traceback_with_debug(tmp_path):
    """--debug keeps the way to the traceback: datatrove's, of the task, on stderr."""
    case = next(c for c in cases_of("hostile-data-task-error-one-line") if c.id.endswith("one-line"))
    debug = Case.__new__(Case)
    debug.__dict__.update({**case.__dict__, "argv": [*case.argv, "--debug"]})
    outcome = run_case(debug, tmp_path)
    assert outcome.rc == 2 and "Traceback" in outcome.stderr and "no room left" in outcome.stderr, outcome.stderr
    assert "Traceback" in (next((tmp_path / "out" / "logs").rglob("task_00000.log"))).read_text()


# ---- 33.22: a tokenized folder with an empty validation split is refused before training

Case("hostile-data-train-empty-validation", item="33.22", setup=_with(_tokenized(val=0.005)),
     argv=[*TRAIN, "--val-fraction", "0.005"], may_change=RUN,
     message=r"out: n_tokens\.val: its validation split is empty: val_fraction=0\.005 held out none of its 80 "
             r"documents.*larger --val-fraction")


# ---- 33.29: --id-field naming a field no record has says so

Case("hostile-data-tokenize-id-field-missing", item="33.29", setup=_with(), argv=[*TOKENIZE, "--id-field", "nosuch"],
     message=r"no documents found: 0 input\(s\) unreadable, 80 record\(s\) without the id field 'nosuch'",
     may_change=("out",))
Case("hostile-data-train-tokenizer-id-field-missing", item="33.29", setup=_with(),
     argv=[*BPE, "--id-field", "nosuch"], may_change=("bpe",),
     message=r"--id-field: no training-split document was read from the sources \(80 record\(s\) without the id "
             r"field 'nosuch'")


# ---- every output is checked before the first input is read (as items 24 and 27 ask of the other commands)

def _link_out(name: str):
    def make(tmp: Path) -> None:
        (tmp / "elsewhere").mkdir()
        (tmp / name).symlink_to(tmp / "elsewhere")
    return make


Case("hostile-data-tokenize-out-symlink", item="33.27", setup=_with(_link_out("out")), argv=TOKENIZE,
     message=r"--out out: out is a symbolic link")
Case("hostile-data-tokenize-out-under-file", item="33.27", setup=_with(_file("afile")),  # no source, no tokenizer
     argv=["data", "tokenize", "nope/", "--tokenizer", "nope", "--out", "afile/out"],
     message=r"--out afile/out: afile is a file, not a folder")
Case("hostile-data-train-tokenizer-out-symlink", item="33.27", setup=_with(_link_out("bpe")), argv=BPE,
     message=r"--out bpe: bpe is a symbolic link")
Case("hostile-data-train-tokenizer-out-under-file", item="33.27", setup=_with(_file("afile")),
     argv=["data", "train-tokenizer", "nope/", "--out", "afile/bpe"],
     message=r"--out afile/bpe: afile is a file, not a folder")


@pytest.mark.parametrize("case", cases_of("hostile-data-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
