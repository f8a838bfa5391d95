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
from tests.test_bad_inputs_models import BATCH, CACHE, PROBE, TABLE, _checkpoint, _hf_dir

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


@pytest.mark.parametrize("case", cases_of("formats-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)
