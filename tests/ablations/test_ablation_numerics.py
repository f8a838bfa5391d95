"""interp.ablations against independent float64 computations, on a tiny random Llama (HF) and a tiny TaperedLM,
both converted to float64 with .double().

The references are written here from the documented definitions (interp/ablations/__init__.py,
interp/ablations/layers.py), never through the code under test:
  loss                 per-sequence mean next-token cross-entropy, logsumexp(z) - z[target], from the logits
  contribution score   s_i = mean over EVERY position of every sequence of |a_i| * ||W_down[:, i]||_2, with
                       a_i = silu(gate_proj(x))_i * up_proj(x)_i recomputed from the MLP's input x
  removing neurons     = the same model with W_down's columns i zeroed in a deep copy
  skipping an MLP      = a deep copy whose MLP at that layer returns zeros through a forward hook written here
  mean_mlp             = a deep copy whose module that adds the MLP term to the stream (the MLP; Gemma's
                       post_feedforward_layernorm) is REPLACED by a module returning the float64 mean of that
                       term over the probe's tokens (positions 1.. under "skip_first", all under "all")

These tests found that sequence_losses cast a float64 model's logits down to float32 and contribution_scores
returned float32 scores for it (errors ~1e-7); both now keep float64 for a float64 model (float32 models are
unchanged), so everything is checked to ~1e-10.
Every ablation test has a control that would fail if the ablation did nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from interp import ablations as ab
from tests.factories import as_loaded, random_tokens, tiny_hf, tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")

TOL64 = 1e-10                 # float64 forwards of the same math in a different order agree to ~1e-14
EFFECT = 1e-3                 # the controls: an ablation must move some logit / loss by more than this


class CharTokenizer:
    def encode(self, text, add_special_tokens=False):
        return [ord(c) % 100 for c in text]


@dataclass
class Case:
    """One float64 model: how to run it, and where its layers' MLPs are."""

    name: str
    model: Any                                  # what the library is given (a LoadedModel or a TaperedLM)
    root: nn.Module                             # the bare module
    layers: Callable[[nn.Module], list]         # root -> its decoder layers
    tokens: torch.Tensor
    widths: list[int]

    def logits(self, root: nn.Module | None = None) -> torch.Tensor:
        root = self.root if root is None else root
        with torch.no_grad():
            out = root(self.tokens)
        return (out.logits if hasattr(out, "logits") else out)

    def copy(self) -> nn.Module:
        return copy.deepcopy(self.root)


def llama_case() -> Case:
    root = tiny_hf("LlamaForCausalLM", 0, vocab_size=100, d_model=32, d_mlp=64, n_layers=3,
                   initializer_range=0.2).double()
    return Case("llama", as_loaded(root, CharTokenizer(), name="tiny-llama"), root, lambda r: list(r.model.layers),
                random_tokens(100, batch=4, pos=12), [64, 64, 64])


def tapered_case() -> Case:
    root = tiny_lm(init_std=0.2).double()        # vocab 64, d_mlp [96, 64, 32], n_ctx 32
    return Case("tapered", root, root, lambda r: list(r.blocks), random_tokens(64, batch=4, pos=16),
                [96, 64, 32])


CASES = {"llama": llama_case, "tapered": tapered_case}


@pytest.fixture(scope="module", params=list(CASES))
def case(request) -> Case:
    c = CASES[request.param]()
    assert next(c.root.parameters()).dtype == torch.float64 and c.logits().dtype == torch.float64
    return c


def ce64(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """Per-sequence mean next-token cross-entropy in float64, written out: logsumexp(z_t) - z_t[token_{t+1}]."""
    z = logits[:, :-1].double()
    nll = torch.logsumexp(z, -1) - z.gather(-1, tokens[:, 1:, None])[..., 0]
    return nll.mean(1)


# ------------------------------------------------------------------------------------------ (a) sequence_losses

def test_next_token_loss_raises_low_precision_logits_and_keeps_float64():
    from interp.model import next_token_loss

    tokens = torch.randint(0, 7, (2, 5))
    logits = torch.randn(2, 5, 7, dtype=torch.float64)
    for dtype, expect in ((torch.bfloat16, torch.float32), (torch.float32, torch.float32),
                          (torch.float64, torch.float64)):
        assert next_token_loss(logits.to(dtype), tokens, reduction="none", fp32=True).dtype == expect


def test_sequence_losses_match_a_float64_cross_entropy(case):
    lg = case.logits()
    losses = ab.sequence_losses(case.model, case.tokens.split(3))     # uneven batches 3 + 1: order kept
    assert losses.dtype == torch.float64 and losses.shape == (case.tokens.shape[0],)
    ref = ce64(lg, case.tokens)
    assert float(ref.std()) > EFFECT                                    # the sequences differ: order is checked
    assert float((losses - ref).abs().max()) <= TOL64     # float64 logits stay float64 (bf16 ones are raised)
    # the reference itself against torch's float64 cross-entropy (the reference is right, not just close)
    torch_ce = F.cross_entropy(lg[:, :-1].flatten(0, 1), case.tokens[:, 1:].flatten(), reduction="none")
    torch.testing.assert_close(ref, torch_ce.view(case.tokens.shape[0], -1).mean(1), atol=1e-13, rtol=0)


# ------------------------------------------------------------------------------------------ (b) contribution scores

@torch.no_grad()
def naive_scores(case: Case) -> list[torch.Tensor]:
    """s_i = mean over every position of every sequence of |a_i| * ||W_down[:, i]||_2, float64, from each MLP's
    input captured by a forward pre-hook on the MLP module (not the down projection the library hooks)."""
    inputs: dict[int, torch.Tensor] = {}
    layers = case.layers(case.root)
    handles = [layer.mlp.register_forward_pre_hook(lambda m, a, l=l: inputs.__setitem__(l, a[0].detach()))
               for l, layer in enumerate(layers)]
    try:
        case.logits()
    finally:
        for h in handles:
            h.remove()
    out = []
    for l, layer in enumerate(layers):
        mlp, x = layer.mlp, inputs[l]
        gate, up = x @ mlp.gate_proj.weight.T, x @ mlp.up_proj.weight.T
        acts = gate * torch.sigmoid(gate) * up                          # silu(g) * u, [batch, pos, d_mlp]
        col_norm = (mlp.down_proj.weight ** 2).sum(0).sqrt()            # ||W_down[:, i]||, W_down [d_model, d_mlp]
        out.append(acts.abs().sum((0, 1)) / acts.shape[0] / acts.shape[1] * col_norm)
    return out


def test_contribution_scores_match_a_float64_computation(case):
    naive = naive_scores(case)
    scores, n = ab.contribution_scores(case.model, case.tokens.split(3))
    assert n == case.tokens.numel()                                     # every position counts
    assert [s.numel() for s in scores] == case.widths
    for l, (got, want) in enumerate(zip(scores, naive)):
        assert want.dtype == torch.float64 and float(want.min()) > 0
        assert got.dtype == torch.float64     # a float64 model's scores keep float64 (float32 models: float32)
        torch.testing.assert_close(got, want, atol=0, rtol=TOL64)
    # control: the scores separate neurons far beyond the tolerance (a constant or permuted score would fail)
    assert all(float(w.max() / w.min()) > 2 for w in naive)


# ------------------------------------------------------------------------------------------ (c) neuron masks, skips

def removal_sets(case: Case) -> dict[int, torch.Tensor]:
    gen = torch.Generator().manual_seed(5)
    return {0: torch.randperm(case.widths[0], generator=gen)[: case.widths[0] // 3],
            2: torch.randperm(case.widths[2], generator=gen)[: case.widths[2] // 2]}


def zero_hook(module, args, output):
    return torch.zeros_like(output)


def test_removing_neurons_equals_zeroed_down_projection_columns(case):
    remove = removal_sets(case)
    ref = case.copy()
    for layer, idx in remove.items():
        ref_down = case.layers(ref)[layer].mlp.down_proj
        assert ref_down.weight.shape[1] == case.widths[layer]              # [d_model, d_mlp]: neuron i = column i
        ref_down.weight.data[:, idx] = 0.0
    clean = case.logits()
    with ab.ablated(case.model, remove=remove):
        masked = case.logits()
        masked_losses = ab.sequence_losses(case.model, case.tokens.split(3))
    expected = case.logits(ref)
    assert float((masked - clean).abs().max()) > EFFECT                   # control: the mask does something
    torch.testing.assert_close(masked, expected, atol=TOL64, rtol=0)
    torch.testing.assert_close(ce64(masked, case.tokens), ce64(expected, case.tokens), atol=TOL64, rtol=0)
    assert float((ce64(masked, case.tokens) - ce64(clean, case.tokens)).abs().max()) > EFFECT
    assert float((masked_losses - ce64(expected, case.tokens)).abs().max()) <= TOL64
    assert torch.equal(case.logits(), clean)                             # hooks gone: the model is as before


def test_removing_nothing_is_exact_and_removing_other_neurons_differs(case):
    """Controls for the mask's indexing: an empty set changes nothing; the complement is another model."""
    clean = case.logits()
    with ab.ablated(case.model, remove={l: torch.tensor([], dtype=torch.long) for l in range(3)}):
        assert torch.equal(case.logits(), clean)
    remove = removal_sets(case)
    ref = case.copy()
    for layer, idx in remove.items():
        ref_down = case.layers(ref)[layer].mlp.down_proj
        keep = torch.ones(case.widths[layer], dtype=torch.bool)
        keep[idx] = False
        ref_down.weight.data[:, keep] = 0.0                               # the OTHER neurons zeroed
    with ab.ablated(case.model, remove=remove):
        masked = case.logits()
    assert float((masked - case.logits(ref)).abs().max()) > EFFECT


@pytest.mark.parametrize("layer", [0, 2])
def test_skipping_an_mlp_equals_a_copy_whose_mlp_output_is_zeroed(case, layer):
    ref = case.copy()
    case.layers(ref)[layer].mlp.register_forward_hook(zero_hook)           # our own hook, on our own copy
    clean = case.logits()
    with ab.ablated(case.model, skip=[layer]):
        skipped = case.logits()
        losses = ab.sequence_losses(case.model, case.tokens.split(3))
    expected = case.logits(ref)
    assert float((skipped - clean).abs().max()) > EFFECT                  # control: the skip does something
    torch.testing.assert_close(skipped, expected, atol=TOL64, rtol=0)
    assert float((losses - ce64(expected, case.tokens)).abs().max()) <= TOL64
    # a second, weight-level route to "the MLP adds nothing" (these MLPs have no biases)
    zeroed = case.copy()
    case.layers(zeroed)[layer].mlp.down_proj.weight.data.zero_()
    torch.testing.assert_close(skipped, case.logits(zeroed), atol=TOL64, rtol=0)
    # removing every neuron of that layer is the same as skipping it
    with ab.ablated(case.model, remove={layer: torch.arange(case.widths[layer])}):
        torch.testing.assert_close(case.logits(), expected, atol=TOL64, rtol=0)


def test_masks_and_skips_combine(case):
    remove = {0: removal_sets(case)[0]}
    ref = case.copy()
    case.layers(ref)[0].mlp.down_proj.weight.data[:, remove[0]] = 0.0
    case.layers(ref)[1].mlp.register_forward_hook(zero_hook)
    with ab.ablated(case.model, remove=remove, skip=[1]):
        both = case.logits()
    with ab.ablated(case.model, remove=remove):
        mask_only = case.logits()
    assert float((both - mask_only).abs().max()) > EFFECT                 # control: the skip adds something
    torch.testing.assert_close(both, case.logits(ref), atol=TOL64, rtol=0)


# ------------------------------------------------------------------------------------------ (d) mean_mlp on HF models

class Constant(nn.Module):
    """Stands in for the module that adds the MLP term: returns `value` at every position."""

    def __init__(self, value: torch.Tensor):
        super().__init__()
        self.register_buffer("value", value.clone())

    def forward(self, x, *args, **kwargs):
        return self.value.expand(*x.shape[:-1], self.value.shape[-1]).to(x.dtype)


def hf_float64(arch: str) -> nn.Module:
    return tiny_hf(arch, 0, vocab_size=64, d_model=32, d_mlp=64, n_layers=3, initializer_range=0.2).double()


MLP_OUT = {"LlamaForCausalLM": "mlp", "Gemma3ForCausalLM": "post_feedforward_layernorm"}


@pytest.mark.parametrize("positions", ["skip_first", "all"])
@pytest.mark.parametrize("arch", list(MLP_OUT))
def test_mean_mlp_on_hf_models_matches_replacing_the_mlp_term_by_its_mean(arch, positions):
    model = hf_float64(arch)
    tokens = random_tokens(64, batch=5, pos=12, seed=4)
    batches = list(tokens.split(2))                                       # 2 + 2 + 1: the sums must stream
    start = 1 if positions == "skip_first" else 0

    # our means: each layer's MLP term (what is added to the stream) captured by our own hooks, float64
    terms: dict[int, torch.Tensor] = {}
    mids: dict[int, torch.Tensor] = {}
    posts: dict[int, torch.Tensor] = {}
    layers = list(model.model.layers)
    handles = [layer.get_submodule(MLP_OUT[arch]).register_forward_hook(
        lambda m, a, out, l=l: terms.__setitem__(l, out.detach())) for l, layer in enumerate(layers)]
    mid_norm = "pre_feedforward_layernorm" if arch == "Gemma3ForCausalLM" else "post_attention_layernorm"
    handles += [layer.get_submodule(mid_norm).register_forward_pre_hook(
        lambda m, a, l=l: mids.__setitem__(l, a[0].detach())) for l, layer in enumerate(layers)]
    handles += [layer.register_forward_hook(
        lambda m, a, out, l=l: posts.__setitem__(l, (out[0] if isinstance(out, tuple) else out).detach()))
        for l, layer in enumerate(layers)]
    with torch.no_grad():
        clean_logits = model(tokens).logits
    for h in handles:
        h.remove()
    for l in range(3):   # the hooked term is exactly what the layer adds after attention: resid_post - resid_mid
        torch.testing.assert_close(posts[l] - mids[l], terms[l], atol=1e-12, rtol=0)
    means = torch.stack([terms[l][:, start:].mean((0, 1)) for l in range(3)])   # [n_layers, d_model]

    effects = ab.layer_effects(model, batches, positions=positions, kinds=("mean_mlp",))
    assert effects.mean_tokens == 5 * (12 - start)
    assert effects.mlp_means.dtype == torch.float64
    torch.testing.assert_close(effects.mlp_means, means, atol=1e-12, rtol=0)
    clean = ce64(clean_logits, tokens)
    assert float((effects.clean - clean).abs().max()) <= TOL64
    for layer in range(3):
        ref = copy.deepcopy(model)
        setattr(ref.model.layers[layer], MLP_OUT[arch], Constant(means[layer]))
        with torch.no_grad():
            expected_logits = ref(tokens).logits
        with ab.layer_ablated(model, "mean_mlp", layer, effects.mlp_means), torch.no_grad():
            got_logits = model(tokens).logits
        torch.testing.assert_close(got_logits, expected_logits, atol=TOL64, rtol=0)
        expected = ce64(expected_logits, tokens)
        assert float((expected - clean).abs().max()) > EFFECT             # control: mean-ablation changes losses
        got = effects.ablated["mean_mlp"][layer]
        assert float((got - expected).abs().max()) <= TOL64, (layer, got - expected)
    # control: the mean is not zero, so mean_mlp is not skip_mlp in disguise
    assert float(means.norm(dim=1).min()) > EFFECT
    with torch.no_grad():
        torch.testing.assert_close(model(tokens).logits, clean_logits, atol=0, rtol=0)   # hooks removed
