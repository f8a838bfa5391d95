"""interp.model.weights: the layers a weight file's names hold, and the check that a config claims no more (issue #47
item 11), on names alone (what a safetensors header gives without reading a tensor)."""

from __future__ import annotations

import pytest

from interp._util.errors import InputError
from interp.model.weights import check_layer_count, layer_stacks


def test_layer_stacks_counts_each_numbered_list_by_its_first_number():
    names = ["model.embed_tokens.weight", "model.layers.0.mlp.experts.7.w", "model.layers.11.self_attn.q.weight",
             "vision.encoder.layers.3.w", "lm_head.weight", "blocks.2.attn.q_proj.weight", "h.0"]
    assert layer_stacks(names) == {"model.layers": 12, "vision.encoder.layers": 4, "blocks": 3, "h": 1}
    assert layer_stacks([]) == {}


def test_a_claim_above_the_longest_list_is_one_error_naming_the_file_and_field(tmp_path):
    names = ["model.layers.0.w", "model.layers.1.w", "vision.layers.4.w"]
    check_layer_count(names, 5, path=tmp_path / "config.json", field="n", fix="f")   # the longest list reaches 5
    with pytest.raises(InputError) as err:
        check_layer_count(names, 100_000, path=tmp_path / "config.json", field="num_hidden_layers", fix="fix it")
    assert str(err.value) == (f"{tmp_path / 'config.json'}: num_hidden_layers: claims 100000 layers but the weights "
                              "hold 5 (vision.layers.N); the model is not built (fix it)")


def test_a_named_stack_counts_alone_and_the_error_class_is_the_callers(tmp_path):
    class Mine(InputError):
        pass

    names = ["blocks.0.w", "blocks.1.w", "other.7.w"]
    check_layer_count(names, 2, path="c.json", field="model.n_layers", fix="f", stack="blocks")
    with pytest.raises(Mine, match=r"model.n_layers: claims 3 layers but the weights hold 2 \(blocks.N\)"):
        check_layer_count(names, 3, path="c.json", field="model.n_layers", fix="f", stack="blocks", error=Mine)
    with pytest.raises(InputError, match=r"claims 1 layers but the weights hold 0 \(a numbered module list\)"):
        check_layer_count(["wte.weight"], 1, path="c.json", field="n_layer", fix="f")


def test_fewer_layers_claimed_are_left_to_the_loaders():
    """Extra numbered weights (a multi-token-prediction layer, a vision tower) are no reason to refuse."""
    check_layer_count([f"model.layers.{i}.w" for i in range(62)], 61, path="c.json", field="n", fix="f")
