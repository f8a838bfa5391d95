"""Issue #33, data group (item 6): property-based fuzzing of manifest.json, the tokenized folder's index.

A valid folder is written once; each example mutates its manifest.json (truncated text, keys deleted, values
swapped for other types, huge or negative numbers, shard and tokenizer paths like "../x" or "/etc/passwd", a shard
entry deleted) and interp.data.shards.read_manifest must either refuse it with one InputError or return a
Manifest, which load_token_dir then loads or refuses with one clean error (the CLI's one line): never a KeyError,
TypeError or any other exception, and never a folder that trains on less data than it holds.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp._util.errors import InputError
from interp.data.shards import MANIFEST_FILE, load_token_dir, read_manifest

ODD = [None, True, False, 0, -1, 1, 2 ** 63, 10 ** 30, -(2 ** 70), 1e308, float("nan"), float("inf"), "", "x",
       "../x", "../../etc/passwd", "/etc/passwd", "a/../../b", "shards/../..", ".", [], ["x"], [1, 2], {}, {"a": 1},
       3.5, "8192", {"train": 1, "val": 2}]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """A tokenized folder of two shards (two JSONL inputs, one shard each)."""
    from interp.data import TokenizeConfig, tokenize_corpus
    from tests.factories import WORDS, word_tokenizer_json

    root = tmp_path_factory.mktemp("manifest")
    tok = word_tokenizer_json(root / "tok" / "tokenizer.json", [*WORDS, "."]).parent
    (root / "c").mkdir()
    for n, name in enumerate(("a", "b")):
        rows = [{"text": " ".join(WORDS[(i * 7 + k + n) % len(WORDS)] for k in range(30)) + " ."} for i in range(60)]
        (root / "c" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    tokenize_corpus(TokenizeConfig(sources=(str(root / "c"),), tokenizer=str(tok), out=str(root / "out"),
                                   val_fraction=0.2, workers=1, shard_size=1))
    return root / "out"


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += _paths(v, (*prefix, i))
    return out


def _mutated(doc: dict, data: st.DataObject) -> str:
    """The manifest's text after 1-3 mutations (or cut short)."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = _paths(doc) if isinstance(doc, dict | list) else []
        if not paths:
            break
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        op = data.draw(st.sampled_from(["delete", "odd", "huge", "path"]), label="op")
        if op == "delete":
            del parent[key]
        elif op == "odd":
            parent[key] = copy.deepcopy(data.draw(st.sampled_from(ODD), label="value"))
        elif op == "huge":
            parent[key] = data.draw(st.sampled_from([2 ** 64, 10 ** 30, -(2 ** 70), 1e300, -1]), label="number")
        else:
            parent[key] = data.draw(st.sampled_from(["../x", "/etc/passwd", "../../out", "x/../../y"]),
                                    label="path component")
    text = json.dumps(doc)
    if data.draw(st.booleans(), label="truncate"):
        text = text[:data.draw(st.integers(0, len(text)), label="cut")]
    return text


@settings(max_examples=100, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_mutated_manifest_is_refused_or_loads(folder, tmp_path_factory, data):
    original = json.loads((folder / MANIFEST_FILE).read_text())
    work = tmp_path_factory.mktemp("case") / "out"
    shutil.copytree(folder, work, symlinks=True)
    text = _mutated(original, data)
    (work / MANIFEST_FILE).write_text(text)
    try:
        manifest = read_manifest(work)
    except InputError as err:
        assert str(err).startswith(str(work / MANIFEST_FILE)), err
        return
    # accepted: everything the loader uses is as the valid folder has it, or its shards refuse it cleanly
    try:
        loaded = load_token_dir(work)
    except (InputError, FileNotFoundError) as err:
        assert str(work) in str(err), err
        return
    assert manifest.n_shards == len(manifest.shards) == 2
    assert loaded.meta["n_tokens"] == original["n_tokens"]
    assert len(loaded.train) == original["n_tokens"]["train"] and len(loaded.val) == original["n_tokens"]["val"]


def test_every_field_the_loader_uses_is_checked(folder, tmp_path):
    """Deleting any single key the loader reads is one InputError naming that key."""
    original = json.loads((folder / MANIFEST_FILE).read_text())
    for path in [("n_tokens",), ("shards",), ("tokenizer", "hash"), ("tokenizer", "file"), ("settings", "dtype"),
                 ("settings", "val_fraction"), ("shards", 0, "sha256"), ("shards", 1, "n_tokens"), ("content_hash",)]:
        doc = copy.deepcopy(original)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
        work = tmp_path / "_".join(map(str, path))
        shutil.copytree(folder, work)
        (work / MANIFEST_FILE).write_text(json.dumps(doc))
        with pytest.raises(InputError, match=r"has no field"):
            read_manifest(work)
