"""The causal rows' passes resumed at the layer they ablate (interp.ablations.layers, resume=True) against the earlier
algorithm (resume=False: a full forward per intervention, the code the table's numbers came from before), on tiny
random models of every block style; the fallback for a model that cannot be run from the middle; the model left as
it was; the progress totals. The definitions themselves are checked against float64 forwards written by hand in
tests/test_causal.py and tests/ablations/test_ablation_numerics.py.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from interp import ablations as ab
from interp.ablations import layers as ab_layers
from interp.hf import layer_modules
from tests.factories import random_tokens, tiny_any_hf, tiny_hf, tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")


MODELS = {
    "tapered": lambda: tiny_lm(init_std=0.2),                                    # ours: HookPoints, pre-norm SwiGLU
    "llama": lambda: tiny_hf("LlamaForCausalLM", initializer_range=0.2),        # rotary tables passed to each layer
    # sandwich norms, sliding windows narrower than the sequence on some layers, a final logit soft-cap
    "gemma3": lambda: tiny_hf("Gemma3ForCausalLM", initializer_range=0.2, sliding_window=4,
                              final_logit_softcapping=5.0,
                              layer_types=["sliding_attention", "full_attention", "sliding_attention"]),
    "gpt2": lambda: tiny_hf("GPT2LMHeadModel", initializer_range=0.2),          # learned positions, tuple outputs
    "neox": lambda: tiny_any_hf("GPTNeoXForCausalLM", initializer_range=0.2),   # parallel residual
    "bloom": lambda: tiny_any_hf("BloomForCausalLM", initializer_range=0.2),    # ALiBi biases passed to each layer
    "opt": lambda: tiny_any_hf("OPTForCausalLM", initializer_range=0.2),        # MLP on flattened tokens
    "mixtral": lambda: tiny_any_hf("MixtralForCausalLM", initializer_range=0.2),  # a mixture of experts
}


@pytest.mark.parametrize("name", list(MODELS))
def test_resumed_passes_equal_full_forwards(name):
    model = MODELS[name]()
    batches = list(random_tokens(64, batch=5, pos=16).split(2))        # uneven batches 2 + 2 + 1
    said: list[str] = []
    resumed = ab.layer_effects(model, batches, log=said.append)
    full = ab.layer_effects(model, batches, resume=False)
    assert resumed.resumed and not full.resumed and not said
    torch.testing.assert_close(resumed.clean, full.clean, atol=0, rtol=0)
    for kind in ab.CAUSAL_KINDS:   # the same arithmetic on the same inputs: equal, not merely close
        torch.testing.assert_close(resumed.ablated[kind], full.ablated[kind], atol=1e-6, rtol=0)
        assert full.deltas(kind).abs().max() > 1e-3, kind   # each intervention changes the loss measurably
    assert full.deltas("skip_block")[1:].abs().max() > 1e-3   # and so do those the resumed passes start later


def test_the_model_is_left_as_it_was_with_its_own_forward_attributes():
    """The replayed layers get their forward back, also one set on the instance (as accelerate's device-map hooks
    do), and every hook is gone: the model computes what it did before."""
    model = tiny_hf("LlamaForCausalLM", initializer_range=0.2)
    tokens = random_tokens(64, batch=2, pos=12)
    layers = layer_modules(model)
    calls = []
    original = layers[0].forward

    def wrapped(*args, **kwargs):   # an instance attribute, as accelerate's add_hook_to_module leaves
        calls.append(1)
        return original(*args, **kwargs)

    layers[0].forward = wrapped
    with torch.no_grad():
        before = model(tokens, use_cache=False).logits
    ab.layer_effects(model, [tokens], kinds=("skip_mlp",))
    assert layers[0].__dict__["forward"] is wrapped
    assert all("forward" not in layer.__dict__ for layer in layers[1:])
    assert all(not layer._forward_hooks and not layer._forward_pre_hooks for layer in layers)
    n = len(calls)
    with torch.no_grad():
        after = model(tokens, use_cache=False).logits
    assert len(calls) == n + 1
    torch.testing.assert_close(after, before, atol=0, rtol=0)
    with pytest.raises(RuntimeError, match="inside"), ab_layers._replaying(layers, [torch.zeros(1)] * 3, 2):
        raise RuntimeError("inside")
    assert layers[0].__dict__["forward"] is wrapped and "forward" not in layers[1].__dict__


def test_a_model_that_cannot_be_run_from_the_middle_gets_full_forwards():
    """A layer that reads what another left in this pass (here: the last block adds a multiple of the number of
    times block 0 ran since it last looked, as a cache shared across layers would) gives a resumed clean pass
    another loss: the check on the first batch sees it, the log says so, and every pass is a full forward."""
    model = tiny_lm(init_std=0.2)
    blocks = layer_modules(model)
    seen = []
    first, last = blocks[0].forward, blocks[-1].forward

    def counting(*args, **kwargs):
        seen.append(1)
        return first(*args, **kwargs)

    def reading(*args, **kwargs):
        out = last(*args, **kwargs) + 0.1 * len(seen)
        seen.clear()
        return out

    blocks[0].forward, blocks[-1].forward = counting, reading
    batches = list(random_tokens(64, batch=4, pos=16).split(2))
    said: list[str] = []
    effects = ab.layer_effects(model, batches, log=said.append)
    assert not effects.resumed
    assert len(said) == 1 and "cannot be run from the middle" in said[0] and "full forwards" in said[0]
    full = ab.layer_effects(model, batches, resume=False)
    for kind in ab.CAUSAL_KINDS:
        torch.testing.assert_close(effects.ablated[kind], full.ablated[kind], atol=0, rtol=0)


class Recorder:
    def __init__(self, total: int):
        self.total, self.seen, self.closed = total, [], False

    def update(self, done: int, *details: str) -> None:
        self.seen.append((done, details))

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize("resume", [True, False])
def test_progress_counts_every_pass_to_the_total(resume):
    model = tiny_lm(init_std=0.2)
    made: list[Recorder] = []

    def factory(total: int) -> Recorder:
        made.append(Recorder(total))
        return made[-1]

    ab.layer_effects(model, list(random_tokens(64, batch=3, pos=16).split(2)), kinds=("skip_mlp", "skip_attn"),
                     progress=factory, resume=resume)
    [rec] = made
    done = [d for d, _ in rec.seen]
    assert rec.total == ab.causal_units(3, 2, 2, resume) and done[-1] == rec.total and rec.closed
    assert done == sorted(done) and len(done) == 2 * (1 + 2 * 3) + (2 if resume else 0)   # + a kept pass per batch
    assert any("skip_attn layer 3/3, batch 2/2" in " ".join(d) for _, d in rec.seen)


def test_pass_counts():
    """SmolLM2 (30 layers, 4 kinds): 121 full forwards before, about 66 forwards' worth resumed."""
    assert ab.causal_pass_count(30, 4, resume=False) == 121
    assert ab.causal_pass_count(30, 4) == pytest.approx(2 + 4 * sum(31 - l for l in range(30)) / 31 + 2 / 31)
    assert 65 < ab.causal_pass_count(30, 4) < 67


@pytest.mark.integration
@pytest.mark.parametrize("name,kinds", [("smollm2-135m", ("skip_mlp", "skip_block"))])
def test_resumed_passes_equal_full_forwards_on_the_pretrained_models(name, kinds):
    """A real model (SmolLM2: 30 layers, rotary tables), eager attention: a subset of the rows (two sequences of 16
    tokens), both ways. Gemma-3's sliding windows, sandwich norms and soft-caps are checked on its tiny random
    family above (its real 262k-vocabulary copy cost 29 s of CI for the same code path)."""
    from interp import hf

    if not hf.REGISTRY[name].installed():
        pytest.skip(hf.REGISTRY[name].pip_command)
    model = hf.load_pretrained(name)
    batches = list(random_tokens(32000, batch=2, pos=16, seed=3).split(1))
    resumed = ab.layer_effects(model, batches, kinds=kinds)
    full = ab.layer_effects(model, batches, kinds=kinds, resume=False)
    assert resumed.resumed
    for kind in kinds:
        torch.testing.assert_close(resumed.ablated[kind], full.ablated[kind], atol=1e-6, rtol=0)
        assert full.deltas(kind).abs().max() > 1e-2, kind
