"""Issue #33, file formats group: files read without checking. A safetensors header that lies (item 12), an HF
folder whose pickled weights carry a payload (16), a GGUF tensor table that lies (15), config.json blocks of the
wrong type (13) and a train_state.pt that is not ours (14): each through the real CLI, one line naming the file
and the field, nothing run, nothing written. Harness: tests/badinput.py."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest

from tests.badinput import Case, cases_of, check_case
from tests.bad_inputs.test_bad_inputs_models import BATCH, CACHE, PROBE, TABLE, _checkpoint, _hf_dir

OURS = "good1"


def _rewrite_header(path: Path, change) -> None:
    """Apply change(header dict) -> header (any JSON) to a safetensors file, keeping its data bytes."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = change(json.loads(raw[8:8 + n]))
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def _first(header: dict) -> str:
    return next(k for k in header if k != "__metadata__")


def _lie(kind: str, where: str = "ours"):
    def change(h):
        name = _first(h)
        if kind == "list":
            return [h[name]]
        if kind == "no-offsets":
            del h[name]["data_offsets"]
        elif kind == "str-offsets":
            h[name]["data_offsets"] = [str(o) for o in h[name]["data_offsets"]]
        elif kind == "dtype":
            h[name]["dtype"] = "F24"
        elif kind == "wrong-dtype":
            h[name]["dtype"] = "F16" if h[name]["dtype"] != "F16" else "F32"
        elif kind == "overlap":
            names = [k for k in h if k != "__metadata__"]
            a, b = h[names[0]], h[names[1]]
            if a["dtype"] == b["dtype"] and a["shape"] == b["shape"]:
                b["data_offsets"] = list(a["data_offsets"])
            else:  # make the second point inside the first: same span length
                span = b["data_offsets"][1] - b["data_offsets"][0]
                b["data_offsets"] = [a["data_offsets"][0], a["data_offsets"][0] + span]
        return h

    def setup(tmp: Path) -> None:
        path = _checkpoint(tmp) / "model.safetensors" if where == "ours" else _hf_dir(tmp) / "model.safetensors"
        _rewrite_header(path, change)
    return setup


LIES = ("list", "no-offsets", "str-offsets", "dtype", "wrong-dtype", "overlap")
MESSAGES = {"list": "not an object", "no-offsets": "data_offsets None", "str-offsets": "data_offsets",
            "dtype": "'F24' is not a safetensors dtype", "wrong-dtype": "the header lies about the data",
            "overlap": "overlap in the data"}
for lie in LIES:
    Case(f"formats-safetensors-{lie}-probe", item="33.12", setup=_lie(lie),
         argv=["probe", "--model", OURS, *PROBE, "--out", "p.parquet"], message=MESSAGES[lie], may_change=CACHE)
    Case(f"formats-safetensors-{lie}-hf-dir-probe", item="33.12", setup=_lie(lie, "hf"),
         argv=["probe", "--model", "hf", *PROBE, "--out", "p.parquet"], message=MESSAGES[lie], may_change=CACHE)
Case("formats-safetensors-lie-export", item="33.12", setup=_lie("overlap"),
     argv=["export", OURS, "--out", "exported"], message=MESSAGES["overlap"], may_change=CACHE)
Case("formats-safetensors-lie-batch-goes-on", item="33.12",
     setup=lambda tmp: (_lie("dtype")(tmp), _checkpoint(tmp, "good2")), rc=1,
     argv=["batch", OURS, "good2", "--out", "w.parquet", *BATCH], message="'F24' is not a safetensors dtype",
     may_change=(*TABLE, *CACHE))



def _good2_evaluated(tmp: Path) -> None:
    import pandas as pd

    df = pd.read_parquet(tmp / "e.parquet")
    assert set(df[df["model"] == "good2"]["status"]) == {"ok"}
    assert list(df[df["model"] == OURS]["status"].unique()) == ["failed"]


Case("formats-safetensors-lie-eval-goes-on", item="33.12",
     setup=lambda tmp: (_lie("overlap")(tmp), _checkpoint(tmp, "good2")), rc=1, check=_good2_evaluated,
     argv=["eval", OURS, "good2", "--tasks", "text_ppl", "--text", "text.txt", "--out", "e.parquet"],
     message=MESSAGES["overlap"], may_change=("e.parquet", "e.parts", "e.parts/*", *CACHE))


def _pickled_payload(tmp: Path) -> None:
    """An HF folder whose pytorch_model.bin pickles os.system: weights_only refuses it; it must never run."""
    import torch

    path = _hf_dir(tmp)
    from safetensors.torch import load_file

    state = load_file(path / "model.safetensors")
    (path / "model.safetensors").unlink()

    class Payload:
        def __reduce__(self):
            return (os.system, (f"touch {tmp / 'PWNED'}",))

    state["payload"] = Payload()
    torch.save(state, path / "pytorch_model.bin")


def _not_run(tmp: Path) -> None:
    assert not (tmp / "PWNED").exists(), "the pickled payload ran"


Case("formats-pickle-payload-probe", item="33.16", setup=_pickled_payload, check=_not_run,
     argv=["probe", "--model", "hf", *PROBE, "--out", "p.parquet"],
     message=r"pytorch_model.bin holds pickled objects .* interp never runs pickled code", may_change=CACHE)


# ------------------------------------------------------------------ item 12: a float checkpoint stored as ints

def _int_dtype(tmp: Path) -> None:
    """Same bytes, same span, dtype I32 in place of F32: the header check passes, the weights are not floats."""
    def change(h):
        name = _first(h)
        h[name]["dtype"] = "I32"
        return h
    _rewrite_header(_checkpoint(tmp) / "model.safetensors", change)


Case("formats-safetensors-int-dtype-probe", item="33.12", setup=_int_dtype,
     argv=["probe", "--model", OURS, *PROBE, "--out", "p.parquet"], message=r"stored as I32, not a float dtype",
     may_change=CACHE)


# ------------------------------------------------------------------ item 13: config.json train / data blocks

def _config(**changes):
    """good1 whose config.json has `changes` applied: key -> value, or "train.tokenizer" -> value."""
    def setup(tmp: Path) -> None:
        path = _checkpoint(tmp) / "config.json"
        config = json.loads(path.read_text())
        for key, value in changes.items():
            block, _, field = key.partition("__")
            if field:
                config[block][field] = value
            else:
                config[block] = value
        path.write_text(json.dumps(config))
    return setup


Case("formats-config-train-list-probe", item="33.13", setup=_config(train=["bpe"]),
     argv=["probe", "--model", OURS, *PROBE, "--out", "p.parquet"],
     message=r"good1/config\.json: train: is a list .*expected dict", may_change=CACHE)
Case("formats-config-train-tokenizer-int-export", item="33.13", setup=_config(train__tokenizer=5),
     argv=["export", OURS, "--out", "exported"], message=r"good1/config\.json: train\.tokenizer: is a int",
     may_change=CACHE)
Case("formats-config-train-vocab-str-probe", item="33.13", setup=_config(train__vocab_size="8192"),
     argv=["probe", "--model", OURS, *PROBE, "--out", "p.parquet"],
     message=r"config\.json: train\.vocab_size: is a str", may_change=CACHE)
Case("formats-config-data-str-export", item="33.13", setup=_config(data="x"),
     argv=["export", OURS, "--out", "exported"], message=r"good1/config\.json: data: is a str .*expected dict",
     may_change=CACHE)
Case("formats-config-data-tokenizer-path-list-probe", item="33.13", setup=_config(data={"tokenizer_path": [1]}),
     argv=["probe", "--model", OURS, *PROBE, "--out", "p.parquet"],
     message=r"config\.json: data\.tokenizer_path: is a list", may_change=CACHE)
Case("formats-config-data-str-eval-goes-on", item="33.13",
     setup=lambda tmp: (_config(data="x")(tmp), _checkpoint(tmp, "good2")), rc=1, check=_good2_evaluated,
     argv=["eval", OURS, "good2", "--tasks", "text_ppl", "--text", "text.txt", "--out", "e.parquet"],
     message=r"config\.json: data: is a str", may_change=("e.parquet", "e.parts", "e.parts/*", *CACHE))


# ------------------------------------------------------------------ item 14: train_state.pt on --resume

def _state(change):
    """The stopped template run at runs/x whose train_state.pt is change(state) (weights_only-loadable)."""
    from tests.bad_inputs.test_bad_inputs_train import OUT, run_dir

    def setup(tmp: Path) -> None:
        import torch

        run_dir("stopped")(tmp)
        path = tmp / OUT / "train_state.pt"
        state = torch.load(path, weights_only=True)
        torch.save(change(state), path)
    return setup


def _without(key):
    return lambda state: {k: v for k, v in state.items() if k != key}


def _other_model(state):
    from tests.factories import tiny_lm

    return {**state, "model": tiny_lm().state_dict()}


def _narrower_tensor(state):
    name = next(n for n in state["model"] if n.endswith("mlp.up_proj.weight") or ".mlp." in n)
    model = dict(state["model"])
    model[name] = model[name][: model[name].shape[0] // 2].clone()
    return {**state, "model": model}


def _other_optimizer(state):
    import torch

    optimizer = state["optimizer"]
    pid = next(iter(optimizer["state"]))
    entry = dict(optimizer["state"][pid])
    entry["exp_avg"] = torch.zeros(3, 3)
    return {**state, "optimizer": {**optimizer, "state": {**optimizer["state"], pid: entry}}}


def _train_cases() -> None:
    from tests.bad_inputs.test_bad_inputs_train import LOCK, MICRO

    resume = [*MICRO, "--resume"]
    may = (LOCK, "cache/*")
    Case("formats-train-state-no-optimizer", item="33.14", setup=_state(_without("optimizer")), argv=resume,
         message=r"runs/x/train_state\.pt: optimizer: train_state\.pt has no field 'optimizer'", may_change=may)
    Case("formats-train-state-no-rng", item="33.14", setup=_state(_without("rng")), argv=resume,
         message=r"runs/x/train_state\.pt: rng: train_state\.pt has no field 'rng'", may_change=may)
    Case("formats-train-state-step-str", item="33.14", setup=_state(lambda s: {**s, "step": "2"}), argv=resume,
         message=r"runs/x/train_state\.pt: step: is a str \('2'\), expected int", may_change=may)
    Case("formats-train-state-other-model", item="33.14", setup=_state(_other_model), argv=resume,
         message=r"train_state\.pt: model: its tensors do not match the model of this run", may_change=may)
    Case("formats-train-state-narrower-tensor", item="33.14", setup=_state(_narrower_tensor), argv=resume,
         message=r"train_state\.pt: model\..*: tensor .* but the model of this run has", may_change=may)
    Case("formats-train-state-other-optimizer", item="33.14", setup=_state(_other_optimizer), argv=resume,
         message=r"train_state\.pt: optimizer\.state\[.*\]\.exp_avg: has shape \(3, 3\)", may_change=may)
    Case("formats-train-state-rng-python-str", item="33.14",
         setup=_state(lambda s: {**s, "rng": {**s["rng"], "python": "abc"}}), argv=resume,
         message=r"train_state\.pt: rng\.python: is a str", may_change=may)


_train_cases()


# ------------------------------------------------------------------ item 15: a GGUF whose tensor table lies

GGUF_F32 = 0


def write_gguf(path: Path, tensors: list[tuple[str, tuple[int, ...], int | None]], *,
               metadata: dict[str, int | str] | None = None) -> Path:
    """A small GGUF (version 3, F32 tensors, alignment 32) written by hand so its table can lie: tensors are
    (name, ggml dims, data offset or None for the next aligned one); the data region holds each tensor's
    values at the offset the table gives (or zeros where tables overlap)."""
    metadata = {"general.architecture": "llama", "llama.block_count": 1, "llama.embedding_length": 8,
                "llama.feed_forward_length": 16, "llama.attention.head_count": 2, "llama.vocab_size": 32,
                **(metadata or {})}

    def string(text: str) -> bytes:
        raw = text.encode()
        return struct.pack("<Q", len(raw)) + raw

    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, value in metadata.items():
        head += string(key) + (struct.pack("<I", 8) + string(value) if isinstance(value, str)
                               else struct.pack("<I", 4) + struct.pack("<I", value))
    table, end, placed = b"", 0, []
    for name, dims, offset in tensors:
        nbytes = 4
        for d in dims:
            nbytes *= d
        offset = -(-end // 32) * 32 if offset is None else offset
        placed.append((offset, nbytes))
        end = max(end, offset + nbytes)
        table += string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        table += struct.pack("<IQ", GGUF_F32, offset)
    header = head + table
    header += b"\0" * (-len(header) % 32)
    data = bytearray(end)
    for i, (offset, nbytes) in enumerate(placed):
        data[offset:offset + nbytes] = bytes([i + 1]) * nbytes
    path.write_bytes(header + bytes(data))
    return path


def gguf_tensors(swap: bool = False) -> list[tuple[str, tuple[int, ...], int | None]]:
    """A one-block llama: E=8, F=16, 2 heads, vocab 32 (ggml dims: (in, out))."""
    up = (16, 8) if swap else (8, 16)
    return [("token_embd.weight", (8, 32), None), ("output_norm.weight", (8,), None),
            ("blk.0.attn_norm.weight", (8,), None), ("blk.0.attn_q.weight", (8, 8), None),
            ("blk.0.attn_k.weight", (8, 8), None), ("blk.0.attn_v.weight", (8, 8), None),
            ("blk.0.attn_output.weight", (8, 8), None), ("blk.0.ffn_norm.weight", (8,), None),
            ("blk.0.ffn_gate.weight", (8, 16), None), ("blk.0.ffn_up.weight", up, None),
            ("blk.0.ffn_down.weight", (16, 8), None)]


def gguf_layout(tensors) -> dict[str, int]:
    """The offset write_gguf gives each tensor when none is given (each aligned to 32 after the previous)."""
    offsets, end = {}, 0
    for name, dims, _ in tensors:
        nbytes = 4
        for d in dims:
            nbytes *= d
        offsets[name] = -(-end // 32) * 32
        end = offsets[name] + nbytes
    return offsets


def _gguf(kind: str):
    def setup(tmp: Path) -> None:
        from tests.bad_inputs.test_bad_inputs_models import _text

        _text(tmp)
        tensors = gguf_tensors(swap=kind == "swapped")
        offsets = gguf_layout(tensors)
        tensors = [(name, dims, offsets[name]) for name, dims, _ in tensors]
        if kind == "overlap":  # attn_k read from attn_q's bytes: a different model, silently
            tensors[4] = ("blk.0.attn_k.weight", (8, 8), offsets["blk.0.attn_q.weight"])
        elif kind == "unaligned":
            tensors[1] = ("output_norm.weight", (8,), offsets["output_norm.weight"] + 4)
        elif kind == "extra-block":
            tensors.append(("blk.7.ffn_norm.weight", (8,), None))
        write_gguf(tmp / "m.gguf", tensors)
    return setup


GGUF_LIES = {"overlap": r"tensors 'blk\.0\.attn_[kq]\.weight' and 'blk\.0\.attn_[kq]\.weight' share bytes",
             "swapped": r"tensor 'blk\.0\.ffn_up\.weight' has dims \[16, 8\] but the model config in the "
                        r"metadata implies \[8, 16\]",
             "unaligned": r"tensor 'output_norm\.weight' starts at data offset 1028, not a multiple",
             "extra-block": r"tensor 'blk\.7\.ffn_norm\.weight' names a block the model does not have"}
for lie, message in GGUF_LIES.items():
    Case(f"formats-gguf-{lie}-probe", item="33.15", setup=_gguf(lie),
         argv=["probe", "--model", "m.gguf", *PROBE, "--out", "p.parquet"],
         message=r"interp probe: .*m\.gguf: corrupt GGUF tensor table: " + message, may_change=CACHE)


@pytest.mark.parametrize("case", cases_of("formats-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
