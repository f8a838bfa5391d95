"""interp.hf.resolve (what a model spec is) and interp.hf.adapters.unwrap (the module behind any model object).

Tiny models only (milliseconds): our checkpoints with and without the format marker, save_pretrained
directories (which also hold config.json + model.safetensors), .gguf paths, and every wrapper unwrap accepts."""

from __future__ import annotations

import json

import pytest
import torch

from interp import hf
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp.training import checkpoints
from tests.factories import TWO_LAYERS, as_loaded, tiny_hf, tiny_lm, word_tokenizer

SMALL_HF = dict(d_model=16, d_mlp=32, n_layers=2, n_heads=2, n_kv_heads=1, n_ctx=32)  # vocab 64


def _tapered():
    return tiny_lm(**TWO_LAYERS)


def _tiny_llama():
    return tiny_hf("LlamaForCausalLM", **SMALL_HF)


def test_checkpoint_with_and_without_marker_resolves_as_checkpoint(tmp_path, tiny_checkpoint):
    model = _tapered()
    tiny_checkpoint(tmp_path, model, {"label": "uniform"})
    assert hf.resolve_model(tmp_path).kind == "checkpoint"
    config = json.loads((tmp_path / CONFIG_FILE).read_text())
    del config[checkpoints.FORMAT_KEY]
    (tmp_path / CONFIG_FILE).write_text(json.dumps(config))
    ref = hf.resolve_model(str(tmp_path))
    assert ref.kind == "checkpoint" and ref.checkpoint == str(tmp_path) and ref.label == tmp_path.name
    loaded = ref.load()
    assert type(loaded).__name__ == "TaperedLM" and not loaded.training
    tokens = torch.randint(0, 64, (1, 8))
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens), model(tokens), atol=0, rtol=0)


def test_save_pretrained_dir_resolves_as_hf_dir(tmp_path, save_pretrained_dir):
    save_pretrained_dir(tmp_path, _tiny_llama())
    assert (tmp_path / CONFIG_FILE).is_file() and (tmp_path / WEIGHTS_FILE).is_file()  # same names as ours
    assert not checkpoints.is_checkpoint_dir(tmp_path)
    ref = hf.resolve_model(tmp_path)
    assert ref.kind == "hf_dir" and ref.checkpoint == ""


def test_load_pretrained_refuses_our_checkpoint_with_the_fix(tmp_path, tiny_checkpoint):
    tiny_checkpoint(tmp_path, _tapered())
    with pytest.raises(ValueError, match=r"interp.training.checkpoints.*resolve_model"):
        hf.load_pretrained(str(tmp_path))
    with pytest.raises(ValueError, match="resolve_model"):
        hf.load_tokenizer(str(tmp_path))


def test_gguf_paths_and_bad_specs(tmp_path):
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    assert hf.resolve_model(tmp_path / "m.gguf").kind == "gguf"
    assert hf.resolve_model(tmp_path).kind == "gguf"          # a folder with exactly one .gguf
    (tmp_path / "n.gguf").write_bytes(b"GGUF")
    with pytest.raises(hf.ModelResolutionError, match="exactly one"):
        hf.resolve_model(tmp_path)
    with pytest.raises(FileNotFoundError):
        hf.resolve_model(tmp_path / "missing.gguf")
    with pytest.raises(hf.ModelResolutionError, match="smollm2-135m"):
        hf.resolve_model("no-such-model")
    assert hf.resolve_model("someorg/somemodel").kind == "hub"


def test_registry_name_resolves_without_loading():
    if not hf.REGISTRY["smollm2-135m"].installed():
        pytest.skip(hf.REGISTRY["smollm2-135m"].pip_command)
    ref = hf.resolve_model("smollm2-135m")
    assert ref.kind == "registry" and ref.path is None and ref.label == "smollm2-135m"


# ------------------------------------------------------------------------------------------ unwrap


def test_unwrap_every_wrapper_to_the_same_module():
    model = _tiny_llama()
    loaded = as_loaded(model)
    assert hf.unwrap(model) is model and hf.unwrap(loaded) is model
    ours = _tapered()
    assert hf.unwrap(ours) is ours
    assert hf.site_map_for(ours).mlp_down == "down_proj" and hf.site_map_for(loaded) is hf.site_map_for(model)
    with pytest.raises(TypeError, match="LoadedModel"):
        hf.unwrap("smollm2-135m")


def test_unwrap_nnsight_and_bridge(tiny_loaded):
    nn_model = hf.to_nnsight(tiny_loaded)
    assert hf.unwrap(nn_model) is tiny_loaded.model
    bridge = hf.to_transformer_bridge(tiny_loaded)
    inner = hf.unwrap(bridge)
    assert type(inner).__name__ == "LlamaForCausalLM" and inner is not tiny_loaded.model  # a deep copy
    assert hf.layer_modules(bridge)[0] is inner.model.layers[0]


@pytest.fixture()
def tiny_loaded(tmp_path, save_pretrained_dir):
    """A LoadedModel of a tiny Llama with a real tokenizer (the bridge and nnsight need one)."""
    tokenizer = word_tokenizer(bos_token="[UNK]", eos_token="[UNK]")
    return hf.load_pretrained(str(save_pretrained_dir(tmp_path, _tiny_llama(), tokenizer)))


def test_adapter_projections_for_gpt2_and_ours():
    gpt2 = tiny_hf("GPT2LMHeadModel", **{**SMALL_HF, "d_mlp": None})  # n_inner: GPT-2's default 4 * d_model
    downs = hf.mlp_down_modules(gpt2)
    assert [type(d).__name__ for d in downs] == ["Conv1D", "Conv1D"] and downs[1] is gpt2.transformer.h[1].mlp.c_proj
    assert hf.site_map_for(gpt2).mlp_in == ("c_fc",)
    ours = _tapered()
    assert [d.in_features for d in hf.mlp_down_modules(ours)] == [48, 16]
    assert hf.layer_modules(ours)[1] is ours.blocks[1] and hf.mlp_modules(ours)[0] is ours.blocks[0].mlp
