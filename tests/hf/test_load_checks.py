"""What interp.hf.load checks before a weight is read (issue #47 items 10, 11): a device map's places (devices of this
machine) and keys (the model's modules, built on the meta device), and a folder's declared layer count against the
layers its safetensors headers hold, for every causal LM transformers builds (so LAYER_COUNT_FIELDS cannot go stale)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from interp._util.devices import cuda_device_count, parse_device_map, resolve_device_map
from interp._util.errors import InputError
from interp.hf.load import LAYER_COUNT_FIELDS, _check_layer_count, check_device_map_modules
from tests import factories

pytestmark = pytest.mark.usefixtures("one_thread")


# ------------------------------------------------------------------------------------------ device maps

@pytest.mark.parametrize("spec, message", [
    ('{"": "banana"}', r"'' \(the whole model\) -> 'banana' is not a device"),
    ('{"model": null}', r"'model' -> None is not a device"),
    ('{"model": true}', r"'model' -> True is not a device"),
    ('{"model": 1.5}', r"'model' -> 1.5 is not a device"),
    ('{"model": -1}', r"'model' -> -1 is not a GPU index"),
    ('{"": "meta"}', r"'' \(the whole model\) -> 'meta' holds no weights, so a module placed there cannot compute"),
    ('{"": "cuda:x"}', r"'' \(the whole model\) -> 'cuda:x' is not a device"),
    ("null", r"'null' is not a device map"),
    ("{}", r"'\{\}' is not a device map"),
    ("99", r"'99' is not a device map .*use --device, or --device-map '\{\"\": 99\}'"),
    ("meta", r"'meta' is not a device map \(use auto, balanced, balanced_low_0, sequential, or a JSON object[^;]*\)$"),
])
def test_a_device_map_value_that_is_no_place_is_refused_without_torch(spec, message):
    with pytest.raises(InputError, match=rf"^device_map: {message}"):
        parse_device_map(spec)


def test_places_strategies_and_dicts_pass_the_syntax_check():
    good = {"model.embed_tokens": "cpu", "model.layers.0": "disk", "model.layers.1": "cuda:1", "lm_head": 0,
            "model.norm": "cuda"}
    assert parse_device_map(good) is good
    assert parse_device_map('{"": "cpu"}') == {"": "cpu"}
    assert [parse_device_map(s) for s in ("auto", "balanced", "balanced_low_0", "sequential", None)] == [
        "auto", "balanced", "balanced_low_0", "sequential", None]


def test_a_gpu_this_machine_lacks_names_the_places_there_are():
    count = cuda_device_count()
    for place in (count, f"cuda:{count}", 99):
        with pytest.raises(InputError, match=rf"-> {place!r}: this machine has no such device; the places here are "
                                             rf"cpu.*disk"):
            resolve_device_map({"model": "cpu", "lm_head": place})
    assert resolve_device_map({"": "cpu", "x": "disk"}) == {"": "cpu", "x": "disk"}
    assert resolve_device_map("auto") == "auto"   # accelerate places on what it finds


@pytest.fixture
def llama_dir(tmp_path) -> str:
    return str(factories.save_pretrained_dir(tmp_path / "llama", factories.tiny_hf("LlamaForCausalLM", n_layers=2)))


def test_device_map_keys_are_checked_against_the_models_modules(llama_dir):
    whole = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
             "model.norm": "cpu", "lm_head": "cpu"}
    check_device_map_modules(whole, llama_dir)
    check_device_map_modules({"model.layers.1": "disk", "": "cpu"}, llama_dir)   # "" places the rest
    check_device_map_modules("auto", llama_dir)
    with pytest.raises(InputError, match=r"device_map: 'model.layers.7' names no module of LlamaForCausalLM \(nor do 1 "
                                         r"more keys\) \(key --device-map by its module names \(model, lm_head"):
        check_device_map_modules({**whole, "model.layers.7": "cpu", "nosuch": "cpu"}, llama_dir)
    with pytest.raises(InputError, match=r"device_map: places no module holding lm_head.weight \(add its module"):
        check_device_map_modules({k: v for k, v in whole.items() if k != "lm_head"}, llama_dir)


# ------------------------------------------------------------------------------------------ declared layers

def _causal_lms() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values()))


def _meta_model(arch: str):
    """(config, model on the meta device) of `arch`: its tiny config, else its default one; None if neither builds."""
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = next(t for t, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if name == arch)
    for config_of in (lambda: factories.tiny_any_config(arch), lambda: CONFIG_MAPPING[model_type]()):
        try:
            config = config_of()
            with torch.device("meta"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return config, AutoModelForCausalLM.from_config(config)
        except Exception:  # noqa: BLE001 - a family whose config needs more than sizes: the other config, or none
            continue
    return None


@pytest.mark.slow
def test_every_causal_lm_holds_the_layers_its_config_declares():
    """No false alarm: the state_dict names of every causal LM transformers builds (what save_pretrained writes) hold
    the layers its config declares, read through LAYER_COUNT_FIELDS; and each entry of that table is needed."""
    checked, needed = 0, set()
    for arch in _causal_lms():
        built = _meta_model(arch)
        if built is None:
            continue
        config, model = built
        names = list(model.state_dict())
        _check_layer_count("dir", config, names)
        checked += 1
        text = config.get_text_config()
        if text.model_type in LAYER_COUNT_FIELDS:
            with pytest.raises(InputError):   # num_hidden_layers would have been a false alarm
                _check_layer_count("dir", _Plain(text), names)
            needed.add(text.model_type)
    assert checked > 150
    assert needed == set(LAYER_COUNT_FIELDS)


class _Plain:
    """A config read as num_hidden_layers alone: what _check_layer_count would do without LAYER_COUNT_FIELDS."""

    attribute_map: dict[str, str] = {}
    model_type = "plain"

    def __init__(self, config):
        self.num_hidden_layers = config.num_hidden_layers

    def get_text_config(self) -> _Plain:
        return self


@pytest.mark.parametrize("config, names, field", [
    (lambda: factories.tiny_hf_config("GPT2LMHeadModel", n_layers=2), ["transformer.h.0.w", "transformer.h.1.w"],
     "n_layer"),
    (lambda: factories.tiny_hf_config("LlamaForCausalLM", n_layers=2), ["model.layers.0.w", "model.layers.1.w"],
     "num_hidden_layers"),
])
def test_a_folder_declaring_more_layers_names_its_own_field(config, names, field):
    config = config()
    _check_layer_count("dir", config, names)
    with pytest.raises(InputError, match=rf"^{Path('dir') / 'config.json'}: {field}: claims 2 layers but the weights "
                                         r"hold 1 \((transformer.h|model.layers).N\); the model is not built"):
        _check_layer_count("dir", config, names[:1])


def test_a_multimodal_config_names_its_text_configs_field():
    from transformers import Gemma3Config

    config = Gemma3Config()   # text_config: 26 layers; the vision tower is not the decoder
    with pytest.raises(InputError, match=r"text_config.num_hidden_layers: claims 26 layers but the weights hold 1"):
        _check_layer_count("dir", config, ["model.language_model.layers.0.mlp.up_proj.weight"])
