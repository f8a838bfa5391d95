"""Every per-token probe metric on Hugging Face models (Llama, GPT-2, Gemma3), checked against an independent
float64 computation from forward hooks written here.

tests/probes/test_probes.py checks every metric against an independent computation on our TaperedLM only;
tests/hf/test_hf_dirs.py checks only rho_mlp on HF models; the other five default metrics and rho_mlp_normed are
checked on HF only in an integration test on SmolLM2 (Llama), and Gemma3's sandwich norms (mlp_out = the
post_feedforward_layernorm output, attn_out = the post_attention_layernorm output) had no independent check.

Here tiny random-weight models are built from configs offline (3 layers, d_model 32, d_mlp 64, vocab 100; every
norm gain and bias perturbed away from its init, so that a norm's output points elsewhere than its input and a
wrong site gives a different number), `interp.probes.probe` runs on each with a word-level tokenizer, and the
table's mean, std and n_tokens of every metric of every layer are compared with a float64 reference computed
from the model's own modules, named per architecture below (NOT through interp's SiteMap, hooks or metric
functions). The definitions are docs/probes.md's:

    h_l = decoder layer l's input, a_l = what attention adds to the stream, z_l = h_l + a_l = the input of the
    MLP's input norm, m_l = what the MLP adds to the stream (Gemma3: the post-feedforward-norm output),
    h_{l+1} = the layer's output, n_l = the MLP's input (its input norm's output).
    rho_mlp = cos(m, h)   rho_mlp_mid = cos(m, z)   rho_block = cos(h_{l+1} - h, h)   rho_attn = cos(a, h)
    norm_ratio = |m| / |h|   block_influence = 1 - cos(h, h_{l+1})   rho_mlp_normed = cos(m, n)   (opt-in)
    norm_ratio_attn = |a|/|h|  norm_ratio_mlp_mid = |m|/|z|  resid_growth = |h_{l+1}|/|h|
    angular_distance = arccos(cos(h, h_{l+1})) / pi                                                 (opt-in)

Per layer: mean over the counted tokens (every position but the first of each sequence by default; all with
positions="all") of the per-token value; std is the sample std (ddof=1). The reference runs the whole text as
one batch (the probe streams it in batches of 4 and 2 sequences), so the batching and the running moments are
checked as well.

Tolerances: with the model in float64 and probe(dtype="float64") both sides are float64 from the same
weights; they differ only by summation order (~1e-16 relative per operation; observed max 2e-16), so the
tolerance is 1e-12. With the model in float32 and the probe's default dtype ("float32") the operands carry
float32 rounding (~6e-8 relative per operation, amplified by the 3 layers and by the cancellation in
h_{l+1} - h_l where the update is small; observed max 1.8e-7, on Gemma3's std): 1e-5 absolute. Both sit far
below what a wrong site moves (test_the_reference_tells_the_sites_apart).
Backends: "torch" and "nnsight", the two that take a bare HF model ("transformer_lens" needs an
interp.hf.LoadedModel converted to a TransformerBridge; not covered here). ~10 s in all."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from interp.probes import GEOMETRY_METRICS, METRIC_NAMES, probe
from interp.stats import t_quantile
from tests.factories import tiny_hf, word_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny inputs: one thread is fastest on a shared machine

ARCHS = ("LlamaForCausalLM", "GPT2LMHeadModel", "Gemma3ForCausalLM")
VOCAB, N_LAYERS, SEQ_LEN, N_SEQS, BATCH = 100, 3, 16, 6, 4
TOKENS = N_SEQS * SEQ_LEN  # 6 sequences: probe batches of 4 and 2

# Module names per architecture, read off each transformers decoder layer's forward() (transformers 5):
#   layers:   the decoder layers (input = h_l, output = h_{l+1})
#   attn:     the attention module itself
#   attn_out: the module whose output (first element) is what attention adds to the stream
#   mlp_norm: the MLP's input norm (input = z_l, output = n_l = the MLP's input)
#   mlp:      the MLP itself
#   mlp_out:  the module whose output is what the MLP adds to the stream
MODULES = {
    "LlamaForCausalLM": dict(layers="model.layers", attn="self_attn", attn_out="self_attn",
                             mlp_norm="post_attention_layernorm", mlp="mlp", mlp_out="mlp"),
    "GPT2LMHeadModel": dict(layers="transformer.h", attn="attn", attn_out="attn", mlp_norm="ln_2", mlp="mlp",
                            mlp_out="mlp"),
    "Gemma3ForCausalLM": dict(layers="model.layers", attn="self_attn", attn_out="post_attention_layernorm",
                              mlp_norm="pre_feedforward_layernorm", mlp="mlp", mlp_out="post_feedforward_layernorm"),
}
NORMED = (*METRIC_NAMES, "rho_mlp_normed")  # the default six plus the opt-in reference="normed" one
F64_TOL = 1e-12
F32_TOL = 1e-5


# ------------------------------------------------------------------------------------------ models and text

def _perturb_norms(model: torch.nn.Module, seed: int) -> None:
    """Move every norm's gain (and bias) off its init (Llama 1, GPT-2 1 and 0, Gemma3 0 as in 1 + w): a norm with
    a unit gain keeps its input's direction, so without this a wrong site (e.g. Gemma3's raw MLP output instead
    of the post-feedforward-norm output) would give the same cosines."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 2)[-2]
            if "norm" in leaf or leaf.startswith("ln_"):
                p.add_(0.5 * torch.randn(p.shape, generator=gen, dtype=p.dtype))


@pytest.fixture(scope="module", params=ARCHS)
def arch_model(request):
    """(arch, a tiny random float32 model of it in eval mode: 3 layers, d_model 32, d_mlp 64, 4 heads)."""
    arch = request.param
    model = tiny_hf(arch, seed=0, vocab_size=VOCAB, d_model=32, d_mlp=64, n_layers=N_LAYERS, n_heads=4,
                    n_kv_heads=2, n_ctx=64)
    _perturb_norms(model, seed=1)
    assert type(model).__name__ == arch
    return arch, model


@pytest.fixture(scope="module")
def text_ids():
    """Random word ids (a text of N_SEQS * SEQ_LEN + 7 words): the probe reads the first TOKENS of them."""
    gen = torch.Generator().manual_seed(2)
    return torch.randint(1, VOCAB, (TOKENS + 7,), generator=gen)


@pytest.fixture(scope="module")
def tokenizer():
    return word_tokenizer(VOCAB)


@pytest.fixture(scope="module")
def text_file(tmp_path_factory, text_ids, tokenizer):
    path = tmp_path_factory.mktemp("text") / "words.txt"
    text = " ".join(f"w{i}" for i in text_ids.tolist())
    path.write_text(text, encoding="utf-8")
    assert tokenizer.encode(text, add_special_tokens=False) == text_ids.tolist()  # words <-> ids, one to one
    return path


# ------------------------------------------------------------------------------------------ the reference

def _output(o):
    return o[0] if isinstance(o, tuple | list) else o


def reference_sites(model: torch.nn.Module, arch: str, seqs: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Per layer, the float64 activations h, a, z, n, m, h_next ([seq, pos, d]) of `model` (already float64) on
    `seqs`, read by plain forward hooks on the modules MODULES names, each checked against the others and
    against output_hidden_states."""
    names = MODULES[arch]
    layers = model.get_submodule(names["layers"])
    acts: dict[tuple[int, str], torch.Tensor] = {}

    def put(l, site, x):
        assert (l, site) not in acts, f"layer {l} {site} captured twice"
        acts[(l, site)] = x.detach().clone()

    handles = []
    for l, layer in enumerate(layers):
        handles += [
            layer.register_forward_pre_hook(
                lambda m, a, k, l=l: put(l, "h", a[0] if a else k["hidden_states"]), with_kwargs=True),
            layer.get_submodule(names["attn"]).register_forward_hook(
                lambda m, a, o, l=l: put(l, "attn_raw", _output(o))),
            layer.get_submodule(names["attn_out"]).register_forward_hook(lambda m, a, o, l=l: put(l, "a", _output(o))),
            layer.get_submodule(names["mlp_norm"]).register_forward_pre_hook(lambda m, a, l=l: put(l, "z", a[0])),
            layer.get_submodule(names["mlp_norm"]).register_forward_hook(lambda m, a, o, l=l: put(l, "n", o)),
            layer.get_submodule(names["mlp"]).register_forward_pre_hook(lambda m, a, l=l: put(l, "mlp_input", a[0])),
            layer.get_submodule(names["mlp"]).register_forward_hook(lambda m, a, o, l=l: put(l, "mlp_raw", o)),
            layer.get_submodule(names["mlp_out"]).register_forward_hook(lambda m, a, o, l=l: put(l, "m", _output(o))),
            layer.register_forward_hook(lambda m, a, o, l=l: put(l, "h_next", _output(o))),
        ]
    try:
        with torch.no_grad():
            hidden = model(seqs, output_hidden_states=True).hidden_states
    finally:
        for handle in handles:
            handle.remove()
    out = []
    exact = dict(rtol=0, atol=1e-12)
    for l in range(len(layers)):
        s = {k: acts[(l, k)] for k in ("h", "attn_raw", "a", "z", "n", "mlp_input", "mlp_raw", "m", "h_next")}
        assert all(v.dtype == torch.float64 and v.shape == (*seqs.shape, s["h"].shape[-1]) for v in s.values())
        torch.testing.assert_close(s["h"], hidden[l], **exact)        # hidden_states[l] is layer l's input
        if l + 1 < len(layers):                                     # (the last entry has the final norm applied)
            torch.testing.assert_close(s["h_next"], hidden[l + 1], **exact)
        torch.testing.assert_close(s["h"] + s["a"], s["z"], **exact)       # a: what attention adds
        torch.testing.assert_close(s["z"] + s["m"], s["h_next"], **exact)  # m: what the MLP adds
        torch.testing.assert_close(s["n"], s["mlp_input"], **exact)        # n: what the MLP reads
        out.append(s)
    return out


def _cos(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y).sum(-1) / (x.norm(dim=-1) * y.norm(dim=-1))


def _ratio(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x.norm(dim=-1) / y.norm(dim=-1)


PER_TOKEN = {  # docs/probes.md, "Definitions"
    "rho_mlp": lambda s: _cos(s["m"], s["h"]),
    "rho_mlp_mid": lambda s: _cos(s["m"], s["z"]),
    "rho_block": lambda s: _cos(s["h_next"] - s["h"], s["h"]),
    "rho_attn": lambda s: _cos(s["a"], s["h"]),
    "norm_ratio": lambda s: _ratio(s["m"], s["h"]),
    "block_influence": lambda s: 1 - _cos(s["h"], s["h_next"]),
    "rho_mlp_normed": lambda s: _cos(s["m"], s["n"]),
    "norm_ratio_attn": lambda s: _ratio(s["a"], s["h"]),
    "norm_ratio_mlp_mid": lambda s: _ratio(s["m"], s["z"]),
    "resid_growth": lambda s: _ratio(s["h_next"], s["h"]),
    "angular_distance": lambda s: torch.arccos(_cos(s["h"], s["h_next"]).clamp(-1, 1)) / math.pi,
}
assert set(PER_TOKEN) == {*NORMED, *GEOMETRY_METRICS}


def reference_table(model: torch.nn.Module, arch: str, text_ids: torch.Tensor, metrics, positions: str = "skip_first"):
    """{(layer, metric): (mean, std, n, sem)} in float64 over the first TOKENS ids as N_SEQS sequences of SEQ_LEN.
    sem: the CI's, sequences as the units: with equal tokens per sequence the cluster-robust (CR1) sem is the
    std of the N_SEQS sequence means over sqrt(N_SEQS)."""
    model = copy.deepcopy(model).double().eval()
    seqs = text_ids[:TOKENS].reshape(N_SEQS, SEQ_LEN)
    first = 1 if positions == "skip_first" else 0
    table = {}
    for l, s in enumerate(reference_sites(model, arch, seqs)):
        for metric in metrics:
            per_seq = PER_TOKEN[metric](s)[:, first:]
            v = per_seq.reshape(-1)
            assert torch.isfinite(v).all()
            sem = per_seq.mean(1).std(correction=1).item() / math.sqrt(N_SEQS)
            table[(l, metric)] = (v.mean().item(), v.std(correction=1).item(), v.numel(), sem)
    return table


def probe_table(df) -> dict[tuple[int, str], tuple[float, float, int, float]]:
    half = t_quantile(0.975, N_SEQS - 1)
    assert (df["n_sequences"] == N_SEQS).all()
    assert ((df["ci_high"] - df["mean"]) - half * df["sem"]).abs().max() < 1e-12      # t(S - 1) over sequences
    assert ((df["mean"] - df["ci_low"]) - half * df["sem"]).abs().max() < 1e-12
    return {(int(r.layer), r.metric): (r.mean, r.std, int(r.n_tokens), r.sem) for r in df.itertuples()}


def _check(got: dict, want: dict, tol: float, arch: str, metrics) -> None:
    assert sorted(got) == sorted(want), (arch, sorted(set(got) ^ set(want)))
    bad = []
    for key, (mean, std, n, sem) in want.items():
        g_mean, g_std, g_n, g_sem = got[key]
        if g_n != n or abs(g_mean - mean) > tol or abs(g_std - std) > tol or abs(g_sem - sem) > tol:
            bad.append(f"{key}: probe mean {g_mean!r} std {g_std!r} sem {g_sem!r} n {g_n}; "
                       f"reference mean {mean!r} std {std!r} sem {sem!r} n {n}")
    assert not bad, f"{arch}: {len(bad)} of {len(want)} (layer, metric) rows differ:\n" + "\n".join(bad)


def _probe(model, text_file, tokenizer, **options):
    return probe(model, text=text_file, tokenizer=tokenizer, tokens=TOKENS, seq_len=SEQ_LEN, batch_size=BATCH,
                 **options)


# ------------------------------------------------------------------------------------------ the tests

@pytest.mark.parametrize("backend, positions", [("torch", "skip_first"), ("nnsight", "skip_first"), ("torch", "all")])
def test_default_metrics_and_rho_mlp_normed_match_float64_hooks(arch_model, text_file, text_ids, tokenizer,
                                                                 backend, positions):
    """The default six and rho_mlp_normed (reference="normed"), every layer, model and metric math in float64."""
    arch, model = arch_model
    model64 = copy.deepcopy(model).double()
    df = _probe(model64, text_file, tokenizer, backend=backend, positions=positions, dtype="float64",
                reference="normed")
    assert set(df["dtype"]) == {"float64"} and set(df["backend"]) == {backend} and set(df["positions"]) == {positions}
    assert list(dict.fromkeys(df["metric"])) == list(NORMED)
    n = N_SEQS * (SEQ_LEN - 1 if positions == "skip_first" else SEQ_LEN)
    assert (df["n_tokens"] == n).all() and (df["n_nonfinite"] == 0).all()
    _check(probe_table(df), reference_table(model, arch, text_ids, NORMED, positions), F64_TOL, arch, NORMED)


def test_geometry_metrics_match_float64_hooks(arch_model, text_file, text_ids, tokenizer):
    """The opt-in per-token geometry ratios (metrics=GEOMETRY_METRICS), torch backend, float64."""
    arch, model = arch_model
    df = _probe(copy.deepcopy(model).double(), text_file, tokenizer, dtype="float64", metrics=GEOMETRY_METRICS)
    _check(probe_table(df), reference_table(model, arch, text_ids, GEOMETRY_METRICS), F64_TOL, arch,
           GEOMETRY_METRICS)


def test_default_settings_on_a_float32_model(arch_model, text_file, text_ids, tokenizer):
    """probe's defaults (metric math in float32, the default six, skip_first) on the float32 model itself,
    against the float64 reference of the same weights: only float32 rounding apart."""
    arch, model = arch_model
    df = _probe(model, text_file, tokenizer)
    assert set(df["dtype"]) == {"float32"} and list(dict.fromkeys(df["metric"])) == list(METRIC_NAMES)
    assert next(model.parameters()).dtype == torch.float32  # the probe left the model as it was
    _check(probe_table(df), reference_table(model, arch, text_ids, METRIC_NAMES), F32_TOL, arch, METRIC_NAMES)


def _moments(v: torch.Tensor) -> torch.Tensor:
    """(mean, std) over the counted tokens (skip_first) of per-token values [seq, pos]: what the table holds."""
    v = v[:, 1:].reshape(-1)
    return torch.stack([v.mean(), v.std()])


def test_the_reference_tells_the_sites_apart(arch_model, text_ids):
    """The check has teeth: on these weights each plausible wrong site moves a table's mean or std by over
    100 x F32_TOL in every layer -- the MLP norm's input z instead of its output n (rho_mlp_normed), resid_pre
    instead of resid_mid (rho_mlp_mid), and on Gemma3 the raw MLP output instead of the post-feedforward norm's
    output (rho_mlp, norm_ratio) and the raw attention output instead of the post-attention norm's (rho_attn)."""
    arch, model = arch_model
    seqs = text_ids[:TOKENS].reshape(N_SEQS, SEQ_LEN)
    sites = reference_sites(copy.deepcopy(model).double().eval(), arch, seqs)

    def apart(right: torch.Tensor, wrong: torch.Tensor) -> bool:
        return bool((_moments(right) - _moments(wrong)).abs().max() > 100 * F32_TOL)

    for l, s in enumerate(sites):
        assert apart(_cos(s["m"], s["n"]), _cos(s["m"], s["z"])), (arch, l, "rho_mlp_normed: n vs z")
        assert apart(_cos(s["m"], s["z"]), _cos(s["m"], s["h"])), (arch, l, "rho_mlp_mid: z vs h")
        if arch == "Gemma3ForCausalLM":
            assert apart(_cos(s["m"], s["h"]), _cos(s["mlp_raw"], s["h"])), (arch, l, "rho_mlp: raw MLP output")
            assert apart(_ratio(s["m"], s["h"]), _ratio(s["mlp_raw"], s["h"])), (arch, l, "norm_ratio: raw MLP")
            assert apart(_cos(s["a"], s["h"]), _cos(s["attn_raw"], s["h"])), (arch, l, "rho_attn: raw attention")
        else:  # Llama, GPT-2: the MLP's and attention's outputs are added to the stream unchanged
            torch.testing.assert_close(s["mlp_raw"], s["m"], rtol=0, atol=0)
            torch.testing.assert_close(s["attn_raw"], s["a"], rtol=0, atol=0)
