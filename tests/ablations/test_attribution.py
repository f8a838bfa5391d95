"""First-order estimates of the causal rows (interp.ablations.attribution) against an independent computation: the
derivative of the loss along the straight path from the clean activation to the ablated one, d/de L(a + e (a' - a))
at e = 0, by central finite differences of float64 forwards whose hooks are written here (module paths by hand, the
mean written out), never through the code under test. That derivative is exactly what attribution patching
estimates the change with (g . (a' - a) summed over positions), so the two agree to the finite difference's error.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from interp import ablations as ab
from tests.factories import random_tokens, tiny_hf, tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")

EPS = 1e-3                  # a float64 model: the step of the finite differences
EPS_FLOAT32_INSIDE = 2e-2   # a model that casts to float32 inside (RMSNorm, eager softmax): a step above its rounding
FLOAT32_INSIDE = ("llama", "gemma3")

# per model: (its layers, the module whose output the MLP adds, the one attention adds) by hand
PATHS = {
    "tapered": ("blocks", "mlp", "attn"),
    "llama": ("model.layers", "mlp", "self_attn"),
    "gemma3": ("model.layers", "post_feedforward_layernorm", "post_attention_layernorm"),
    "gpt2": ("transformer.h", "mlp", "attn"),
}


def _model(name: str) -> torch.nn.Module:
    if name == "tapered":
        return tiny_lm(init_std=0.2).double()
    arch = {"llama": "LlamaForCausalLM", "gemma3": "Gemma3ForCausalLM", "gpt2": "GPT2LMHeadModel"}[name]
    return tiny_hf(arch, initializer_range=0.2).double()


def _losses(model, tokens) -> torch.Tensor:
    with torch.no_grad():
        out = model(tokens)
    logits = out.logits if hasattr(out, "logits") else out
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    return ce.view(tokens.shape[0], -1).mean(1)


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def _along(model, module, kind: str, e: float, target=None):
    """A hook moving `module`'s output e of the way to the ablated value: 0 (skip), `target` (mean), the layer's
    input (block)."""
    def hook(mod, args, kwargs, output):
        out = _first(output)
        goal = {"zero": torch.zeros_like(out), "mean": None if target is None else target.expand_as(out),
                "block": args[0] if args else kwargs.get("hidden_states")}[kind]
        moved = out + e * (goal - out)
        return (moved, *output[1:]) if isinstance(output, tuple) else moved
    return module.register_forward_hook(hook, with_kwargs=True)


def _central(model, tokens, module, kind, eps: float, target=None) -> torch.Tensor:
    values = []
    for e in (eps, -eps):
        handle = _along(model, module, kind, e, target)
        try:
            values.append(_losses(model, tokens))
        finally:
            handle.remove()
    return (values[0] - values[1]) / (2 * eps)


def _derivative(model, tokens, module, kind, target=None, eps: float = EPS) -> torch.Tensor:
    """Richardson's extrapolation of two central differences (error ~ eps^4): Llama's and Gemma's norms and eager
    softmax compute in float32 even in a float64 model, so their differences need a step large enough to rise
    above float32 rounding (EPS_FLOAT32_INSIDE)."""
    return (4 * _central(model, tokens, module, kind, eps / 2, target)
            - _central(model, tokens, module, kind, eps, target)) / 3


@pytest.mark.parametrize("name", list(PATHS))
def test_estimates_are_the_derivative_along_the_intervention(name):
    model = _model(name)
    tokens = random_tokens(64, batch=3, pos=12)
    effects = ab.attribution_effects(model, list(tokens.split(2)))
    layers_path, mlp_path, attn_path = PATHS[name]
    layers = model.get_submodule(layers_path)
    # the means of what each MLP adds, over positions 1.. of every sequence (positions="skip_first"), by hand
    outs: dict[int, torch.Tensor] = {}
    handles = [layer.get_submodule(mlp_path).register_forward_hook(
        lambda m, a, o, l=l: outs.__setitem__(l, _first(o).detach())) for l, layer in enumerate(layers)]
    try:
        clean = _losses(model, tokens)
    finally:
        for h in handles:
            h.remove()
    means = torch.stack([outs[l][:, 1:].mean((0, 1)) for l in range(len(layers))])
    torch.testing.assert_close(effects.clean, clean, atol=1e-12, rtol=0)
    torch.testing.assert_close(effects.mlp_means, means, atol=1e-12, rtol=0)
    assert effects.method == "attribution" and effects.metric("skip_mlp") == "delta_loss_skip_mlp_attribution"
    slopes = {kind: [] for kind in ab.CAUSAL_KINDS}
    for l, layer in enumerate(layers):
        eps, atol = (EPS_FLOAT32_INSIDE, 3e-5) if name in FLOAT32_INSIDE else (EPS, 1e-9)
        expected = {"skip_mlp": _derivative(model, tokens, layer.get_submodule(mlp_path), "zero", eps=eps),
                    "mean_mlp": _derivative(model, tokens, layer.get_submodule(mlp_path), "mean", means[l], eps),
                    "skip_attn": _derivative(model, tokens, layer.get_submodule(attn_path), "zero", eps=eps),
                    "skip_block": _derivative(model, tokens, layer, "block", eps=eps)}
        for kind, value in expected.items():
            torch.testing.assert_close(effects.deltas(kind)[l], value, atol=atol, rtol=0,
                                       msg=lambda m, kind=kind, l=l: f"{kind} layer {l}: {m}")
            slopes[kind].append(float(value.abs().max()))
    assert all(max(v) > 1e-3 for v in slopes.values()), slopes   # the control: there are slopes to estimate


def test_estimates_are_close_to_the_exact_rows_for_small_effects():
    """A model with small weights is nearly linear in each removed term: the estimate is close to the exact row
    (and ranks the layers alike); with large weights it need not be (analyses/attribution_vs_exact measures it)."""
    model = tiny_lm(init_std=0.02)
    batches = list(random_tokens(64, batch=4, pos=16).split(2))
    exact, estimate = ab.layer_effects(model, batches), ab.attribution_effects(model, batches)
    for kind in ("skip_mlp", "mean_mlp"):
        e, a = exact.deltas(kind).mean(1), estimate.deltas(kind).mean(1)
        assert (a - e).abs().max() < 0.15 * e.abs().max(), kind


def test_attribution_rows_in_the_table(tmp_path):
    """causal_method="attribution": rows of their own metric names, their own ci_method, the correlations too."""
    from interp import causal as ct
    from tests.factories import word_tokenizer

    model = tiny_hf("LlamaForCausalLM", initializer_range=0.2)
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"w{(i * 7) % 63 + 1}" for i in range(300)))
    df = ct.probe(model, text=text, tokenizer=word_tokenizer(64), tokens=48, seq_len=12, batch_size=2,
                  causal=True, causal_method="attribution", metrics=("rho_mlp",))
    causal = df[df["metric"].str.startswith("delta_loss")]
    assert set(causal["metric"]) == set(ab.ATTRIBUTION_METRICS.values())
    assert set(causal["ci_method"]) == {ct.CAUSAL_CI_ATTRIBUTION}
    assert causal["reference"].str.startswith("first-order estimate").all()
    effects, profiles = ct.causal_data(df)
    assert effects.method == "attribution" and effects.n_sequences == 4
    table = ct.correlations(effects, profiles, n_boot=20)
    assert set(table["causal"]) == set(ab.ATTRIBUTION_METRICS.values()) and len(table) == 4


def test_attribution_vs_exact_compares_and_renders(tmp_path):
    """analyses.attribution_vs_exact on a tiny model: the Spearman and errors recomputed here from the two tables
    with scipy and pandas; the figure drawn from the written tables."""
    from scipy.stats import pearsonr, spearmanr

    from analyses import attribution_vs_exact as ave
    from interp import causal as ct
    from tests.factories import word_tokenizer

    model = tiny_hf("LlamaForCausalLM", initializer_range=0.2)
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"w{(i * 7) % 63 + 1}" for i in range(300)))
    common = dict(text=text, tokenizer=word_tokenizer(64), tokens=48, seq_len=12, batch_size=2, causal=True,
                  metrics=("rho_mlp",))
    exact = ct.probe(model, causal_method="exact", **common)
    estimate = ct.probe(model, causal_method="attribution", **common)
    summary, layers = ave.compare(exact, estimate, worst=2, n_boot=50)
    assert len(summary) == 4 and len(layers) == 4 * 3 and set(summary["n_sequences"]) == {4}
    for _, row in summary.iterrows():
        e = exact[exact.metric == row["exact_metric"]].sort_values("layer")["mean"].to_numpy()
        a = estimate[estimate.metric == row["estimate_metric"]].sort_values("layer")["mean"].to_numpy()
        assert row["spearman_rho"] == pytest.approx(spearmanr(e, a).statistic, abs=1e-12)
        assert row["pearson_r"] == pytest.approx(pearsonr(e, a).statistic, abs=1e-9)
        assert row["median_abs_error"] == pytest.approx(float(np.median(np.abs(a - e))), abs=1e-12)
        assert row["worst_layers"].split()[0] == str(int(np.argmax(np.abs(a - e))))
        assert row["ci_low"] <= row["ci_high"]
    assert {"text_sha256", "hardware", "versions", "exact_seconds", "estimate_seconds"} <= set(summary.columns)
    with pytest.raises(ValueError, match="an exact and an attribution table"):
        ave.compare(estimate, exact)
    ave.write_table(summary, tmp_path, ave.TABLE, ave.Config(), ave.NAME)
    ave.write_table(layers, tmp_path, ave.LAYERS_TABLE, ave.Config(), ave.NAME)
    [png] = ave.render(tmp_path)
    assert png.name == ave.FIGURE and png.stat().st_size > 10_000


def test_batches_are_cut_into_chunks_of_whole_sequences_under_the_logits_budget(monkeypatch):
    """A large vocabulary's logits (Gemma-3: 262k x 512 per sequence) are bounded by running a batch in chunks of
    whole sequences: the same estimates, sequence by sequence."""
    from interp.ablations import attribution

    model = tiny_lm(init_std=0.2)
    batches = list(random_tokens(64, batch=5, pos=16).split(4))
    whole = ab.attribution_effects(model, batches)
    monkeypatch.setattr(attribution, "MAX_LOGITS", 64 * 16 * 2)   # two sequences per chunk
    assert [int(c.shape[0]) for c in attribution.chunks(model, batches)] == [2, 2, 1]
    cut = ab.attribution_effects(model, batches)
    torch.testing.assert_close(cut.clean, whole.clean, atol=1e-6, rtol=0)
    for kind in ab.CAUSAL_KINDS:
        torch.testing.assert_close(cut.ablated[kind], whole.ablated[kind], atol=1e-6, rtol=0)
    torch.testing.assert_close(cut.mlp_means, whole.mlp_means, atol=1e-9, rtol=0)


def test_the_readme_block_is_the_committed_table():
    """figures/README.md's attribution_vs_exact block is summary_markdown of the committed summary table."""
    import pandas as pd

    from analyses import attribution_vs_exact as ave
    from interp._util.paths import FIGURES_DIR

    summary = pd.read_csv(FIGURES_DIR / ave.TABLE)
    text = (FIGURES_DIR / "README.md").read_text()
    block = f"<!-- begin:{ave.README_BLOCK} -->\n{ave.summary_markdown(summary)}\n<!-- end:{ave.README_BLOCK} -->"
    assert block in text, "regenerate: interp figures --only attribution_vs_exact --recompute (HEAVY)"
    assert set(summary["kind"]) == {"skip_mlp", "mean_mlp", "skip_attn", "skip_block"}
    assert set(summary["model"]) == {"smollm2-135m", "gemma3-270m"}


def test_what_the_docs_say_of_the_fast_mode_is_the_committed_table():
    """The prose of figures/README.md and docs/probes.md quotes attribution_vs_exact's tables: the worst layers'
    exact and estimated deltas, the sign agreement, the best rho, how many intervals exclude zero, the seconds."""
    import pandas as pd

    from analyses import attribution_vs_exact as ave
    from interp._util.paths import FIGURES_DIR, REPO_ROOT

    summary = pd.read_csv(FIGURES_DIR / ave.TABLE)
    layers = pd.read_csv(FIGURES_DIR / ave.LAYERS_TABLE).set_index(["model", "kind", "layer"])
    readme = " ".join((FIGURES_DIR / "README.md").read_text().split())
    docs = " ".join((REPO_ROOT / "docs" / "probes.md").read_text().split())
    first = layers.loc[("smollm2-135m", "skip_mlp", 0)]
    quoted = f"SmolLM2's first MLP: {first['exact_mean']:+.1f} nats exact, {first['estimate_mean']:+.2f} estimated"
    assert quoted in readme and quoted in docs
    attn = layers.loc[("gemma3-270m", "skip_attn", 1)]
    assert f"second attention: {attn['exact_mean']:+.1f} exact, {attn['estimate_mean']:+.1f} estimated" in readme
    smol = summary[summary["model"] == "smollm2-135m"]
    signs = f"{smol['sign_agreement'].min():.0%}-{smol['sign_agreement'].max():.0%}".replace("%-", "-")
    assert f"signs agree on {signs} of SmolLM2's layers" in readme
    assert f"signs agree with the exact rows' on {signs} of SmolLM2's layers" in docs
    best = summary.loc[summary["spearman_rho"].idxmax()]
    assert f"{best['spearman_rho']:+.2f} at best" in readme and f"{best['spearman_rho']:+.2f} at best" in docs
    assert f"excluding zero for {int((summary['ci_low'] > 0).sum())} of the {len(summary)} rows" in readme
    for model, name in (("smollm2-135m", "SmolLM2"), ("gemma3-270m", "Gemma-3")):
        row = summary[summary["model"] == model].iloc[0]
        assert f"{name} {row['exact_seconds']:,.0f} s against {row['estimate_seconds']:.0f} s" in readme
