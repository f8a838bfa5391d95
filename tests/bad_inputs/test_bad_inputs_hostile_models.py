"""Hostile models, placements and hub texts (issue #47 items 10, 11, 12, 17), through the real CLI: each one line
naming the file or the flag, the field and the fix, before any weight is read, and no process that aborts at exit.

  10  --device-map values and keys: a value that is no device ("banana", null, "meta"), a GPU this machine lacks (99,
      "cuda:7": the error names the places there are), a key naming no module, a map leaving weights unplaced;
  11  a config claiming far more layers than its weights hold (our checkpoints' model.n_layers, an HF folder's
      num_hidden_layers, a hub model's n_layer), refused from the safetensors header before the model is built;
  12  `--text hf:DATASET:...:COLUMN` with a missing column: the error, and never SIGABRT at exit (status 134: a
      parquet scan left unfinished; the split served here has 50 row groups, which made about 1 run in 5 abort);
  17  a checkpoint whose config.json has train.source null: refused by the checked config reader in probe and eval.

Models are tiny (tests.bad_inputs.test_bad_inputs_models' helpers); hub cases talk to one loopback hub
(tests/hub_server.py), started on first use and shared, each case with its own HF_HOME.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.bad_inputs.test_bad_inputs_models import PROBE, _checkpoint, _edit_json, _hf_dir, _text
from tests.badinput import REPO, Case, Outcome, cases_of, check_case, problems
from tests.hub_server import OFFLINE_VARS, shared_hub, tiny_dataset_folder, tiny_model_folder

OUT = ["--out", "p.parquet"]
CACHE = ("cache", "cache/*")
HUB_OUT = ("hf", "hf/*", *CACHE)
EVAL_OUT = ("e.parquet", "e.parts", "e.parts/*", *CACHE)
ITEM = "47"


# ------------------------------------------------------------------------------------------ the loopback hub

_hub = shared_hub   # started on first use


def _online(tmp: Path) -> dict[str, str]:
    """env(tmp) of a hub case: online, the loopback hub's settings, its own HF_HOME inside the scratch folder."""
    return {**dict.fromkeys(OFFLINE_VARS, ""), **_hub().env(), "HF_HOME": str(tmp / "hf")}


def _row_groups(tmp: Path) -> None:
    """org/rowgroups: a wikitext-like split of 5,000 rows in 50 row groups (the scan an early stop leaves
    unfinished), served by the loopback hub; and one of our checkpoints with its text."""
    import pyarrow.parquet as pq

    _checkpoint(tmp)
    folder = tiny_dataset_folder(tmp.parent / f"{tmp.name}.rowgroups",
                                 texts=[f"line {i}: " + "w1 w2 w3 " * 30 for i in range(5000)])
    for file in folder.rglob("*.parquet"):
        pq.write_table(pq.read_table(file), file, row_group_size=100)
    _hub().add_dataset("org/rowgroups", {"main": folder})


def _deep_hub_model(tmp: Path) -> None:
    """org/deep: a GPT-2 of 2 layers whose config.json says n_layer 1000, served by the loopback hub."""
    _text(tmp)
    folder = tiny_model_folder("gpt2", tmp.parent / f"{tmp.name}.deep", seed=0)
    _edit_json(folder / "config.json", n_layer=1000)
    _hub().add_model("org/deep", {"main": folder})


# ------------------------------------------------------------------------------------------ 10: --device-map

def _hf(tmp: Path) -> None:
    _hf_dir(tmp)


def _no_gpu_7(tmp: Path) -> None:
    from interp._util.devices import cuda_device_count

    if cuda_device_count() > 7:
        pytest.skip("this machine has a cuda:7")
    _hf_dir(tmp)


def _device_map(name: str, device_map: str, message: str, setup=_hf, command: str = "probe") -> None:
    argv = ([command, "--model", "hf", *PROBE, *OUT] if command == "probe" else
            ["eval", "hf", "--tasks", "wiki_heldout", "--limit", "2", "--out", "e.parquet"])
    Case(f"hostile-models-device-map-{name}", item=ITEM, setup=setup, argv=[*argv, "--device-map", device_map],
         message=message, may_change=EVAL_OUT)


FIX = r"\(give each module of --device-map one of cpu, disk, cuda:N or a GPU index N\)"
_device_map("not-a-device", '{"": "banana"}', r"^interp probe: device_map: '' \(the whole model\) -> 'banana' is "
            rf"not a device {FIX}$")
_device_map("null", '{"model": null, "lm_head": "cpu"}',
            rf"^interp probe: device_map: 'model' -> None is not a device {FIX}$")
_device_map("meta", '{"": "meta"}', r"^interp probe: device_map: '' \(the whole model\) -> 'meta' holds no weights, "
            "so a module placed there cannot compute")
_device_map("meta-in-eval", '{"": "meta"}', r"^interp eval: device_map: '' \(the whole model\) -> 'meta' holds no",
            command="eval")
_device_map("negative-index", '{"": -1}', r"device_map: '' \(the whole model\) -> -1 is not a GPU index")
_device_map("gpu-index-not-here", '{"": 99}', r"^interp probe: device_map: '' \(the whole model\) -> 99: this "
            r"machine has no such device; the places here are cpu.* \(place each module of --device-map on one of")
_device_map("cuda-7-not-here", '{"model": "cpu", "lm_head": "cuda:7"}', r"^interp probe: device_map: 'lm_head' -> "
            r"'cuda:7': this machine has no such device; the places here are cpu", setup=_no_gpu_7)
_device_map("a-device-is-not-a-map", "cuda:7", r"^interp probe: device_map: 'cuda:7' is not a device map .*to run "
            r"the whole model on one device use --device, or --device-map '\{\"\": \"cuda:7\"\}'")
_device_map("unknown-module", '{"nosuch": "cpu", "": "cpu"}', r"^interp probe: .*hf: device_map: 'nosuch' names no "
            r"module of LlamaForCausalLM \(key --device-map by its module names \(model, lm_head, and their")
_device_map("leaves-weights-unplaced", '{"model.layers.0": "disk"}', r"^interp probe: .*hf: device_map: places no "
            r"module holding model.embed_tokens.weight \(nor 11 more weights\) \(add its module to --device-map")

# ------------------------------------------------------------------------------------------ 11: layers claimed


def _deep_checkpoint(tmp: Path) -> None:
    """good1 (3 layers) whose config.json claims 1000 (d_mlp given for each, so the config itself is valid)."""
    path = _checkpoint(tmp)
    config = json.loads((path / "config.json").read_text())
    config["model"].update(n_layers=1000, d_mlp=[64] * 1000)
    (path / "config.json").write_text(json.dumps(config))


LAYERS_FIX = r"set it \(and model.d_mlp\) to the weights' layers, or restore config.json from a copy"
Case("hostile-models-checkpoint-claims-more-layers", item=ITEM, setup=_deep_checkpoint,
     argv=["probe", "--model", "good1", *PROBE, *OUT], may_change=CACHE,
     message=rf"^interp probe: good1/config.json: model.n_layers: claims 1000 layers but the weights hold 3 "
             rf"\(blocks.N\); the model is not built \({LAYERS_FIX}\)$")
Case("hostile-models-batch-checkpoint-claims-more-layers", item=ITEM, setup=_deep_checkpoint, rc=1,
     argv=["batch", "good1", "--out", "w.parquet", *PROBE, "--no-progress"],
     message=r"good1: CheckpointError: .*model.n_layers: claims 1000 layers but the weights hold 3",
     may_change=("w.parquet", "w.parts", "w.parts/*", *CACHE))
Case("hostile-models-hf-dir-claims-more-layers", item=ITEM, setup=lambda tmp: _hf_dir(tmp, num_hidden_layers=1000),
     argv=["probe", "--model", "hf", *PROBE, *OUT], may_change=CACHE,
     message=r"^interp probe: .*hf/config.json: num_hidden_layers: claims 1000 layers but the weights hold 2 "
             r"\(model.layers.N\); the model is not built \(set num_hidden_layers to the number of layers the weights "
             r"hold, or re-save the model\)$")
Case("hostile-models-hub-model-claims-more-layers", item=ITEM, setup=_deep_hub_model, env=_online, subprocess=True,
     argv=["probe", "--model", "org/deep", *PROBE, *OUT], may_change=HUB_OUT,
     message=r"^interp probe: .*/config.json: n_layer: claims 1000 layers but the weights hold 2 \(transformer.h.N\)")

# ------------------------------------------------------------------------------------------ 12: a hub text's column

MISSING_COLUMN = Case(
    "hostile-models-hub-text-missing-column", item=ITEM, setup=_row_groups, env=_online, subprocess=True,
    argv=["probe", "--model", "good1", "--text", "hf:org/rowgroups:wikitext-2-raw-v1:test:nosuch", *PROBE[2:], *OUT],
    message=r"^interp probe: --text: dataset 'org/rowgroups' has no column 'nosuch' \(it has text\) \(name the column: "
            r"hf:org/rowgroups:wikitext-2-raw-v1:test:COLUMN\)$", may_change=HUB_OUT)

# ------------------------------------------------------------------------------------------ 17: train.source null


def _source_null(tmp: Path) -> None:
    """good1 whose config.json says train.source null, with the "bpe" tokenizer that is rebuilt from it."""
    path = _checkpoint(tmp)
    config = json.loads((path / "config.json").read_text())
    config["train"].update(source=None, tokenizer="bpe")
    (path / "config.json").write_text(json.dumps(config))


SOURCE_NULL = (r"good1/config.json: train.source: is a null \(None\), expected str \(restore config.json from a copy, "
               r"or re-save the checkpoint\)")
Case("hostile-models-probe-train-source-null", item=ITEM, setup=_source_null,
     argv=["probe", "--model", "good1", *PROBE, *OUT], message=rf"^interp probe: {SOURCE_NULL}$", may_change=CACHE)
Case("hostile-models-eval-train-source-null", item=ITEM, setup=_source_null, rc=1,
     argv=["eval", "good1", "--tasks", "wiki_heldout", "--limit", "2", "--out", "e.parquet"],
     message=rf"^  good1 / wiki_heldout: cannot load the model: {SOURCE_NULL}$", may_change=EVAL_OUT)


@pytest.mark.parametrize("case", cases_of("hostile-models-"), ids=lambda c: c.id)
def test_case(case: Case, tmp_path: Path) -> None:
    check_case(case, tmp_path)


# ------------------------------------------------------------------------------------------ what a case does not show

@pytest.mark.slow
def test_a_missing_hub_text_column_never_aborts_at_exit(tmp_path):
    """Item 12's exit, 10 times (two at a time): each run exits 2 with the one line, none aborts (134 / -SIGABRT).
    With the scan started and abandoned, about 1 run in 5 aborted here, so 10 clean runs are luck with p = 0.8^10 =
    11% (16 runs, p < 3%, cost 48 s of a CI run near its 30-min limit; rerun with more by hand when in doubt)."""
    case = MISSING_COLUMN
    _row_groups(tmp_path)
    env = {**os.environ, "INTERP_CACHE_DIR": str(tmp_path / "cache"), **_online(tmp_path), "PYTHONPATH": str(REPO)}

    def run(_: int) -> Outcome:
        proc = subprocess.run([sys.executable, "-m", "interp.cli", *case.argv], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=case.timeout)
        return Outcome(proc.returncode, proc.stdout, proc.stderr, [])

    with ThreadPoolExecutor(2) as pool:
        runs = list(pool.map(run, range(10)))
    bad = [(run.rc, problems(case, run), run.stderr[-500:]) for run in runs if problems(case, run)]
    assert not bad, f"{len(bad)} of 10 runs went wrong: {bad[:3]}"
