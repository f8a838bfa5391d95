"""Checkpoint save/load/validate: round trips, crash safety, and errors that name the file and field."""

import functools
import json
import os
import re

import pytest
import torch

from interp._util.paths import CONFIG_FILE, TRAIN_STATE_FILE, WEIGHTS_FILE
from interp.training import checkpoints
from interp.training.checkpoints import (
    CheckpointError,
    check_train_state,
    is_checkpoint_dir,
    load_checkpoint,
    load_train_state,
    read_config,
    save_checkpoint,
    save_train_state,
    validate_checkpoint,
)
from tests.factories import TWO_LAYERS, tiny_lm

make_model = functools.partial(tiny_lm, **TWO_LAYERS)  # vocab 64, d_mlp [48, 16]


def assert_same_weights(a: torch.nn.Module, b: torch.nn.Module) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for name in sa:
        assert torch.equal(sa[name], sb[name]), name


@pytest.mark.parametrize("tied", [False, True])
def test_round_trip(tmp_path, tied):
    model = make_model(tie_embeddings=tied)
    save_checkpoint(tmp_path, model, {"label": "cosine 1.5->0.5", "step": 3})
    assert is_checkpoint_dir(tmp_path)
    loaded, config = load_checkpoint(tmp_path)
    assert_same_weights(model, loaded)
    assert config["label"] == "cosine 1.5->0.5" and config["step"] == 3
    assert config["model"] == model.cfg.to_dict()
    assert loaded.cfg.d_mlp == [48, 16]
    if tied:
        assert loaded.unembed.weight is loaded.embed.weight
    tokens = torch.randint(0, 64, (2, 8))
    torch.testing.assert_close(loaded(tokens), model(tokens), rtol=0, atol=0)
    assert not list(tmp_path.glob(".*.tmp")), "temporary files left behind"


def test_is_checkpoint_dir(tmp_path):
    assert not is_checkpoint_dir(tmp_path)
    (tmp_path / CONFIG_FILE).write_text("{}")
    assert not is_checkpoint_dir(tmp_path)  # weights missing


def test_crash_between_replaces_leaves_a_loadable_checkpoint(tmp_path, monkeypatch):
    old, new = make_model(seed=0), make_model(seed=1)
    save_checkpoint(tmp_path, old, {"version": "old"})
    real_replace, calls = os.replace, []

    def flaky_replace(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise OSError("simulated crash")
        return real_replace(src, dst)

    monkeypatch.setattr("interp._util.io.os.replace", flaky_replace)
    with pytest.raises(OSError, match="simulated crash"):
        save_checkpoint(tmp_path, new, {"version": "new"})
    monkeypatch.undo()
    loaded, config = load_checkpoint(tmp_path)  # still loads
    assert config["version"] == "old"
    assert_same_weights(loaded, new)  # the weights file was replaced whole, never torn
    assert not list(tmp_path.glob(".*.tmp"))


def test_crash_while_writing_keeps_previous_checkpoint(tmp_path, monkeypatch):
    old = make_model(seed=0)
    save_checkpoint(tmp_path, old, {"version": "old"})

    def dying_save(model, path):
        with open(path, "wb") as f:
            f.write(b"partial")
        raise KeyboardInterrupt  # e.g. a second Ctrl-C mid-write

    monkeypatch.setattr(checkpoints, "save_model", dying_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(tmp_path, make_model(seed=1), {"version": "new"})
    loaded, config = load_checkpoint(tmp_path)
    assert config["version"] == "old"
    assert_same_weights(loaded, old)
    assert not list(tmp_path.glob(".*.tmp"))


def test_save_rejects_inconsistent_model_field(tmp_path):
    with pytest.raises(ValueError, match="config\\['model'\\]"):
        save_checkpoint(tmp_path, make_model(), {"model": {"d_model": 3}})


@pytest.fixture
def saved(tmp_path, tiny_checkpoint):
    return tiny_checkpoint(tmp_path, make_model())


def test_missing_files_are_named(saved):
    (saved / WEIGHTS_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=WEIGHTS_FILE):
        validate_checkpoint(saved)
    (saved / CONFIG_FILE).unlink()
    with pytest.raises(FileNotFoundError, match=CONFIG_FILE):
        validate_checkpoint(saved)


def test_unparsable_json_is_named(saved):
    (saved / CONFIG_FILE).write_text('{"model": ')
    with pytest.raises(CheckpointError, match=f"{CONFIG_FILE}: not valid JSON"):
        validate_checkpoint(saved)


def test_missing_model_field_is_named(saved):
    (saved / CONFIG_FILE).write_text(json.dumps({"label": "uniform"}))
    with pytest.raises(CheckpointError, match="missing field 'model'"):
        validate_checkpoint(saved)


def test_invalid_model_config_is_named(saved):
    config = json.loads((saved / CONFIG_FILE).read_text())
    del config["model"]["d_model"]
    (saved / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="field 'model' is not a valid ModelConfig"):
        validate_checkpoint(saved)


def test_width_mismatch_names_tensor_and_field(saved):
    config = json.loads((saved / CONFIG_FILE).read_text())
    config["model"]["d_mlp"] = [48, 32]  # weights were saved with layer 1 at width 16
    (saved / CONFIG_FILE).write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"blocks\.1\.mlp\..*model\.d_mlp\[1\]"):
        validate_checkpoint(saved)


def test_other_model_is_rejected(saved):
    config = json.loads((saved / CONFIG_FILE).read_text())
    config["model"]["n_layers"], config["model"]["d_mlp"] = 3, [48, 16, 16]
    (saved / CONFIG_FILE).write_text(json.dumps(config))
    # the layer count is read from the weight names before the model is built (issue #47 item 11)
    with pytest.raises(CheckpointError, match=r"model\.n_layers: claims 3 layers but the weights hold 2 \(blocks\.N\)"):
        validate_checkpoint(saved)


@pytest.mark.parametrize("keep", [4, 100, -10])
def test_truncated_weights_are_detected(saved, keep):
    data = (saved / WEIGHTS_FILE).read_bytes()
    (saved / WEIGHTS_FILE).write_bytes(data[:keep] if keep > 0 else data[:keep])
    with pytest.raises(CheckpointError, match="truncated"):
        validate_checkpoint(saved)
    with pytest.raises(CheckpointError, match=WEIGHTS_FILE):
        load_checkpoint(saved)


def _train_state(model=None, optimizer=None) -> dict:
    """A train state as Trainer._save writes it (non-sharded)."""
    from interp.training.runtime import rng_state

    model = model if model is not None else make_model()
    optimizer = optimizer if optimizer is not None else torch.optim.AdamW(model.parameters(), lr=1e-3)
    return {"step": 7, "tokens": 1024, "elapsed_s": 1.5, "train_loss": 3.0, "rng": rng_state(),
            "data_generator": torch.Generator().manual_seed(0).get_state(), "model": model.state_dict(),
            "optimizer": optimizer.state_dict()}


def test_train_state_round_trip(tmp_path):
    state = _train_state()
    save_train_state(tmp_path, state)
    loaded = load_train_state(tmp_path)
    assert loaded["step"] == 7 and loaded["rng"]["python"] == state["rng"]["python"]
    assert torch.equal(loaded["rng"]["torch"], state["rng"]["torch"])
    assert all(torch.equal(loaded["model"][k], v) for k, v in state["model"].items())


@pytest.mark.parametrize("change, field", [
    (lambda s: s.pop("optimizer"), "optimizer"),
    (lambda s: s.update(step="7"), "step"),
    (lambda s: s.update(tokens=-1), "tokens"),
    (lambda s: s["rng"].update(python="x"), "rng.python"),
    (lambda s: s["rng"]["numpy"].pop("keys"), "rng.numpy.keys"),
    (lambda s: s.update(data_generator=torch.zeros(3)), "data_generator"),
    (lambda s: s.update(sharded="../../elsewhere"), "sharded"),
    (lambda s: s.update(model={"w": "not a tensor"}), "model"),
])
def test_train_state_fields_are_checked(tmp_path, change, field):
    """A train_state.pt whose keys or types are not the trainer's: one CheckpointError naming the field."""
    state = _train_state()
    change(state)
    save_train_state(tmp_path, state)
    with pytest.raises(CheckpointError, match=rf"{TRAIN_STATE_FILE}: {re.escape(field)}: "):
        load_train_state(tmp_path)


def test_train_state_checked_against_the_model(tmp_path):
    """Another model's tensors, or moments shaped for another model, name the tensor (before load_state_dict)."""
    model = make_model()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    path = tmp_path / TRAIN_STATE_FILE
    other = tiny_lm()  # the default tiny model: other widths
    with pytest.raises(CheckpointError, match=r"model: its tensors do not match"):
        check_train_state(_train_state(other), path, model, optimizer)
    model(torch.randint(0, 64, (1, 8))).float().mean().backward()
    optimizer.step()
    state = _train_state(model, optimizer)
    check_train_state(state, path, model, optimizer)  # the run's own state passes
    pid = next(iter(state["optimizer"]["state"]))
    state["optimizer"]["state"][pid]["exp_avg"] = torch.zeros(2, 2)
    with pytest.raises(CheckpointError, match=rf"optimizer\.state\[{pid}\]\.exp_avg: has shape \(2, 2\)"):
        check_train_state(state, path, model, optimizer)
    state = _train_state(model, optimizer)
    state["optimizer"]["param_groups"][0]["lr"] = "fast"
    with pytest.raises(CheckpointError, match=r"optimizer\.param_groups\[0\]\.lr"):
        check_train_state(state, path, model, optimizer)


@pytest.mark.parametrize("change, field", [
    (lambda c: c.update(train=["bpe"]), "train"),
    (lambda c: c.update(data="x"), "data"),
    (lambda c: c["train"].update(tokenizer=5), "train.tokenizer"),
    (lambda c: c["train"].update(vocab_size="8192"), "train.vocab_size"),
    (lambda c: c["train"].update(val_fraction=2.0), "train.val_fraction"),
    (lambda c: c.update(data={"tokenizer_path": ["a"]}), "data.tokenizer_path"),
    (lambda c: c.update(model=[1]), "model"),
    (lambda c: c.update(step=-3), "step"),
])
def test_config_blocks_are_checked(tmp_path, change, field):
    """config.json's model/train/data blocks of the wrong type: one CheckpointError naming the file and field."""
    save_checkpoint(tmp_path, make_model(), {"train": {"tokenizer": "bpe", "vocab_size": 64}})
    path = tmp_path / CONFIG_FILE
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=rf"{CONFIG_FILE}: {re.escape(field)}: "):
        read_config(tmp_path)


def test_safetensors_header_refuses_gaps_and_trailing_bytes(tmp_path):
    """The safetensors library refuses a gap between tensors or bytes after the last: so does our reader."""
    from interp._util.io import complete_safetensors, safetensors_header

    save_checkpoint(tmp_path, make_model(), {})
    weights = tmp_path / WEIGHTS_FILE
    assert complete_safetensors(weights)
    weights.write_bytes(weights.read_bytes() + b"\0" * 8)
    with pytest.raises(CheckpointError, match="bytes after the last tensor's data"):
        safetensors_header(weights, CheckpointError)
    assert not complete_safetensors(weights)


def test_train_state_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match=TRAIN_STATE_FILE):
        load_train_state(tmp_path)
    save_train_state(tmp_path, {"step": 1, "w": torch.zeros(1000)})
    path = tmp_path / TRAIN_STATE_FILE
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match=f"{TRAIN_STATE_FILE}: cannot be read"):
        load_train_state(tmp_path)


def test_config_carries_the_format_marker_and_old_checkpoints_still_load(tmp_path):
    model = make_model()
    save_checkpoint(tmp_path, model, {"label": "uniform", checkpoints.FORMAT_KEY: "interp.checkpoint/0"})
    config = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert next(iter(config)) == checkpoints.FORMAT_KEY and config[checkpoints.FORMAT_KEY] == checkpoints.FORMAT
    assert checkpoints.is_interp_config(config)
    del config[checkpoints.FORMAT_KEY]              # as written before the marker existed
    (tmp_path / CONFIG_FILE).write_text(json.dumps(config))
    assert checkpoints.is_interp_config(config) and is_checkpoint_dir(tmp_path)
    loaded, _ = load_checkpoint(tmp_path)
    assert_same_weights(model, loaded)
