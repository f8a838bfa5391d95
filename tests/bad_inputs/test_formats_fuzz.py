"""Issue #33, file formats group: property-based fuzzing of the readers of the formats interp accepts from disk.

For each format (a checkpoint's config.json through read_config, train_state.pt through check_train_state /
load_train_state, a safetensors header through safetensors_header, a GGUF tensor table through read_gguf) a valid
file is mutated (truncation, byte flips, missing keys, type swaps, huge numbers, path components, lying offsets
and dims) and the reader must either refuse it with one InputError (the CLI's one line) or accept it, and then
what it accepted must load: never another exception.
"""

from __future__ import annotations

import copy
import json
import os
import struct
import tempfile
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interp._util.errors import InputError


class Blob(bytes):
    """A file's bytes with a short repr (hypothesis prints the fixtures of a failing example)."""

    def __repr__(self) -> str:
        return f"<{len(self)} bytes>"

# FUZZ_EXAMPLES=2000 explores further (random seeds); the default run is derandomized: the same 100 examples
EXAMPLES = os.environ.get("FUZZ_EXAMPLES")
SETTINGS = settings(max_examples=int(EXAMPLES or 100), deadline=None, derandomize=EXAMPLES is None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# values a hostile or careless editor puts where another type belongs
ODD_VALUES = [None, True, False, 0, -1, 2 ** 63, -(2 ** 64), 10 ** 400 // 10 ** 390, 1e308, float("nan"),
              float("inf"), "", "x", "../../etc/passwd", "/etc/passwd", "C:\\evil", "a/../../b", [], [1, 2],
              ["x"], {}, {"a": 1}, 3.5, "8192", [[[]]]]


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a JSON-like document (dict keys and list indexes)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:8]):
            out += _paths(v, (*prefix, i))
    return out


def _mutate_json(doc: Any, data: st.DataObject, n: int = 3) -> Any:
    """doc with 1..n mutations: a key deleted, a value replaced by an odd one, a number made huge or negative,
    a dict/list replaced by its first element or emptied."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, n), label="mutations")):
        paths = _paths(doc)
        if not paths:
            return copy.deepcopy(data.draw(st.sampled_from(ODD_VALUES), label="whole document"))
        path = data.draw(st.sampled_from(paths), label="path")
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        key, old = path[-1], parent[path[-1]]
        action = data.draw(st.sampled_from(["delete", "odd", "huge", "negate", "stringify", "empty"]), label="op")
        if action == "delete":
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif action == "odd":
            parent[key] = copy.deepcopy(data.draw(st.sampled_from(ODD_VALUES), label="value"))
        elif action == "huge":
            parent[key] = data.draw(st.sampled_from([2 ** 64, 10 ** 30, -(2 ** 70), 1e300]), label="huge")
        elif action == "negate" and isinstance(old, int | float) and not isinstance(old, bool):
            parent[key] = -old - 1
        elif action == "stringify":
            parent[key] = json.dumps(old)
        elif action == "empty":
            parent[key] = type(old)() if isinstance(old, dict | list | str) else None
    return doc


def _mutate_bytes(raw: bytes, data: st.DataObject, region: int | None = None) -> bytes:
    """raw truncated, or with bytes flipped within its first `region` bytes (default: anywhere)."""
    region = min(region or len(raw), len(raw))
    if data.draw(st.booleans(), label="truncate"):
        return raw[:data.draw(st.integers(0, max(0, len(raw) - 1)), label="keep")]
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4), label="flips")):
        i = data.draw(st.integers(0, region - 1), label="at")
        out[i] = data.draw(st.integers(0, 255), label="byte")
    return bytes(out)


# ------------------------------------------------------------------------------------------ config.json

@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    from tests.factories import tiny_checkpoint, word_tokenizer_json

    root = tmp_path_factory.mktemp("ckpt")
    tok = word_tokenizer_json(root / "tok" / "tokenizer.json", ["a", "b"])
    path = tiny_checkpoint(root / "good", tokenizer=tok)
    config = json.loads((path / "config.json").read_text())
    config["data"] = {"source": "corpus", "source_hash": "abc", "tokenizer": "bpe", "tokenizer_hash": "def",
                      "tokenizer_path": "tok/tokenizer.json", "n_tokens": {"train": 10, "val": 2}}
    config["train"].update(vocab_size=64, source="wiki", val_fraction=0.05, n_ctx=32)
    (path / "config.json").write_text(json.dumps(config))
    return path


def _read_config_of(folder: Path, text: bytes) -> None:
    from interp.training.checkpoints import read_config

    (folder / "config.json").write_bytes(text)
    try:
        config = read_config(folder)
    except InputError:
        return
    # accepted: the blocks its callers read hold what they expect
    assert isinstance(config["model"], dict)
    for block in ("train", "data"):
        assert config.get(block) is None or isinstance(config[block], dict)
    train = config.get("train") or {}
    assert train.get("tokenizer") is None or isinstance(train["tokenizer"], str)
    assert isinstance(train.get("vocab_size", 1), int)
    float(train.get("val_fraction", 0.05))
    data = config.get("data") or {}
    for key in ("tokenizer_path", "tokenizer_hash", "source_hash"):
        assert data.get(key) is None or isinstance(data[key], str)


@SETTINGS
@given(data=st.data())
def test_config_json_mutations(checkpoint, data):
    doc = json.loads((checkpoint / "config.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        if data.draw(st.booleans(), label="bytes"):
            _read_config_of(Path(tmp), _mutate_bytes(json.dumps(doc).encode(), data))
        else:
            _read_config_of(Path(tmp), json.dumps(_mutate_json(doc, data)).encode())


# ------------------------------------------------------------------------------------------ train_state.pt

def _run():
    """A tiny model, its AdamW after one step, and a train state as the trainer saves it."""
    from interp.training.runtime import rng_state
    from tests.factories import random_tokens, tiny_lm

    model = tiny_lm()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = random_tokens(model.cfg.vocab_size)
    model(tokens).float().mean().backward()
    optimizer.step()
    state = {"step": 1, "tokens": 32, "elapsed_s": 0.5, "train_loss": 4.0, "rng": rng_state(),
             "data_generator": torch.Generator().manual_seed(1).get_state(),
             "model": model.state_dict(), "optimizer": optimizer.state_dict()}
    return model, optimizer, state


@pytest.fixture(scope="module")
def train_state():
    model, optimizer, state = _run()
    return model, optimizer, state


TENSOR_ODDITIES = [torch.zeros(3, 3), torch.zeros(0), torch.zeros(5056, dtype=torch.int64), torch.tensor(1.0),
                   torch.zeros(624, dtype=torch.float32), torch.ones(7, dtype=torch.uint8)]


def _state_paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in list(doc.items())[:40]:
            out += _state_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:4]):
            out += _state_paths(v, (*prefix, i))
    return out


def _mutate_state(state: dict, data: st.DataObject) -> Any:
    state = copy.deepcopy(state)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        paths = _state_paths(state)
        if not paths:
            return copy.deepcopy(data.draw(st.sampled_from(ODD_VALUES), label="whole"))
        path = data.draw(st.sampled_from(paths), label="path")
        parent = state
        for key in path[:-1]:
            parent = parent[key]
        key = path[-1]
        if isinstance(parent, tuple):
            continue
        action = data.draw(st.sampled_from(["delete", "odd", "tensor", "huge"]), label="op")
        if action == "delete":
            if isinstance(parent, dict):
                del parent[key]
            else:
                parent.pop(key)
        elif action == "odd":
            parent[key] = copy.deepcopy(data.draw(st.sampled_from(ODD_VALUES), label="value"))
        elif action == "tensor":
            parent[key] = data.draw(st.sampled_from(TENSOR_ODDITIES), label="tensor").clone()
        else:
            parent[key] = data.draw(st.sampled_from([2 ** 64, -(2 ** 63), 1e300, float("nan")]), label="huge")
    return state


def _restore(model, optimizer, state: dict) -> None:
    """What Trainer._restore does with an accepted state (the non-sharded path)."""
    from interp.training.runtime import rng_state, set_rng_state

    saved = rng_state()
    try:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.Generator().set_state(state["data_generator"])
        set_rng_state(state["rng"])
        int(state["step"]), int(state["tokens"]), float(state["elapsed_s"])
    finally:
        set_rng_state(saved)


@SETTINGS
@given(data=st.data())
def test_train_state_mutations(train_state, data):
    from interp.training.checkpoints import check_train_state

    model, optimizer, state = train_state
    bad = _mutate_state(state, data)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_state.pt"
        try:
            check_train_state(bad, path, model, optimizer)
        except InputError:
            return
    fresh_model, fresh_optimizer, _ = _run()
    _restore(fresh_model, fresh_optimizer, bad)


@settings(max_examples=20, deadline=None, derandomize=True)
@given(data=st.data())
def test_train_state_file_bytes(train_state, data):
    from interp.training.checkpoints import load_train_state

    _, _, state = train_state
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_state.pt"
        torch.save(state, path)
        path.write_bytes(_mutate_bytes(path.read_bytes(), data))
        try:
            load_train_state(tmp)
        except InputError:
            pass


# ------------------------------------------------------------------------------------------ safetensors header

@pytest.fixture(scope="module")
def safetensors_file(tmp_path_factory) -> bytes:
    from safetensors.torch import save_file

    path = tmp_path_factory.mktemp("st") / "w.safetensors"
    g = torch.Generator().manual_seed(0)
    save_file({"a": torch.randn(4, 3, generator=g), "b": torch.randn(5, generator=g).to(torch.bfloat16),
               "c": torch.arange(6, dtype=torch.int64).reshape(2, 3), "d": torch.zeros(0, 2)}, str(path),
              metadata={"format": "pt"})
    return Blob(path.read_bytes())


def _split(raw: bytes) -> tuple[dict, bytes]:
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def _check_safetensors(path: Path) -> None:
    from safetensors import safe_open

    from interp._util.io import complete_safetensors, safetensors_header

    complete_safetensors(path)  # a bool, never an exception
    try:
        header = safetensors_header(path, InputError)
    except InputError:
        return
    with safe_open(str(path), framework="pt") as f:  # accepted: every tensor reads back as declared
        for name, entry in header.items():
            tensor = f.get_tensor(name)
            assert list(tensor.shape) == entry["shape"]


@SETTINGS
@given(data=st.data())
def test_safetensors_header_mutations(safetensors_file, data):
    header, body = _split(safetensors_file)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "w.safetensors"
        how = data.draw(st.sampled_from(["json", "bytes", "offsets"]), label="how")
        if how == "bytes":
            raw = _mutate_bytes(safetensors_file, data, region=8 + len(json.dumps(header)) + 16)
        else:
            if how == "json":
                header = _mutate_json(header, data)
            else:  # plausible lies: shift, swap, shrink offsets; another dtype or shape
                header = copy.deepcopy(header)
                name = data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")), label="t")
                entry = header[name]
                lie = data.draw(st.sampled_from(["shift", "swap", "dtype", "shape"]), label="lie")
                if lie == "shift":
                    d = data.draw(st.integers(-64, 64), label="by")
                    entry["data_offsets"] = [o + d for o in entry["data_offsets"]]
                elif lie == "swap":
                    other = header[data.draw(st.sampled_from(sorted(k for k in header if k != "__metadata__")))]
                    entry["data_offsets"], other["data_offsets"] = other["data_offsets"], entry["data_offsets"]
                elif lie == "dtype":
                    entry["dtype"] = data.draw(st.sampled_from(["F32", "F16", "BF16", "I64", "U8", "F8_E4M3",
                                                                "bf16", "F128"]))
                else:
                    entry["shape"] = data.draw(st.lists(st.integers(-2, 12), max_size=3))
            text = json.dumps(header).encode()
            raw = struct.pack("<Q", len(text)) + text + body
        path.write_bytes(raw)
        _check_safetensors(path)


# ------------------------------------------------------------------------------------------ GGUF tensor table

@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory) -> bytes:
    from tests.bad_inputs.test_bad_inputs_hostile_formats import gguf_tensors, write_gguf

    return Blob(write_gguf(tmp_path_factory.mktemp("gguf") / "m.gguf", gguf_tensors()).read_bytes())


def _header_size(raw: bytes) -> int:
    from interp._util.gguf_file import read_gguf_table

    return read_gguf_table(raw).data_start


def _check_gguf(path: Path) -> None:
    from interp._util.gguf_file import read_gguf

    try:
        table = read_gguf(path)
    except InputError:
        return
    # accepted: gguf's own reader agrees on every tensor, and each lies inside the file
    import gguf

    reader = gguf.GGUFReader(str(path))
    size = path.stat().st_size
    assert [t.name for t in reader.tensors] == [t.name for t in table.tensors]
    for ours, theirs in zip(table.tensors, reader.tensors):
        assert int(theirs.n_bytes) == ours.nbytes
        assert table.data_start + ours.offset + ours.nbytes <= size


@SETTINGS
@given(data=st.data())
def test_gguf_table_mutations(gguf_file, data):
    from tests.bad_inputs.test_bad_inputs_hostile_formats import gguf_layout, gguf_tensors, write_gguf

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.gguf"
        if data.draw(st.booleans(), label="bytes"):
            path.write_bytes(_mutate_bytes(gguf_file, data, region=_header_size(gguf_file)))
        else:
            tensors = gguf_tensors()
            offsets = gguf_layout(tensors)
            tensors = [(n, d, offsets[n]) for n, d, _ in tensors]
            for _ in range(data.draw(st.integers(1, 3), label="lies")):
                i = data.draw(st.integers(0, len(tensors) - 1), label="tensor")
                name, dims, offset = tensors[i]
                lie = data.draw(st.sampled_from(["offset", "dims", "swap", "name", "drop"]), label="lie")
                if lie == "offset":
                    offset = data.draw(st.sampled_from([0, offset + 4, offset + 32, offset - 32, 2 ** 40,
                                                        2 ** 64 - 32]), label="to")
                    offset = max(0, min(offset, 2 ** 64 - 1))
                elif lie == "dims":
                    dims = tuple(data.draw(st.lists(st.sampled_from([1, 2, 8, 16, 32, 2 ** 33]), min_size=1,
                                                    max_size=4), label="dims"))
                elif lie == "swap":
                    dims = tuple(reversed(dims))
                elif lie == "name":
                    name = data.draw(st.sampled_from(["blk.99.attn_q.weight", "blk.x.ffn_up.weight",
                                                      "token_embd.weight", "../../etc/passwd", ""]), label="n")
                else:
                    tensors.pop(i)
                    continue
                tensors[i] = (name, dims, offset)
            try:
                write_gguf(path, tensors)
            except (MemoryError, OverflowError, ValueError):
                return  # a lie too large to write as a file (the data region would be exabytes)
        _check_gguf(path)


def test_gguf_fixture_is_accepted(gguf_file, tmp_path):
    """The unmutated file loads: the fuzz above starts from a valid GGUF."""
    path = tmp_path / "m.gguf"
    path.write_bytes(gguf_file)
    from interp._util.gguf_file import read_gguf

    assert len(read_gguf(path).tensors) == 11
