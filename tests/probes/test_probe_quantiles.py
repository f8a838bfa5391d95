"""The probe table's quantile columns q05, q25, q50, q75, q95, end to end: interp.probes.probe on a tiny float64
TaperedLM and a tiny float64 Llama (HF), against numpy.quantile of per-token values computed here.

The per-token values are independent of the probe's backends: for the TaperedLM from a forward written out block
by block (x -> + attn(ln1(x)) -> + mlp(ln2(.))), for the Llama from forward hooks written here on the decoder
layers, their self_attn and mlp. They follow the documented positions (docs/probes.md: position 0 of each
sequence excluded by default; positions="all" counts it) and definitions (interp/probes/metrics.py).

How the table estimates quantiles (docs/probes.md "quantiles q05..q95 (to one bin width)"; interp.stats.
RunningHistogram): per layer, counts over fixed bin edges; quantile q is read in the first bin whose cumulative
count reaches q * N, by linear interpolation inside that bin. That bin holds the ceil(q * N)-th smallest value,
which is exactly numpy.quantile(v, q, method="inverted_cdf"); so the documented accuracy is
    |q_table - numpy.quantile(v, q, method="inverted_cdf")| <= width of the bin holding the latter,
and against numpy's default (linear) method, which interpolates between the order statistics at q * (N - 1),
one more local spacing of adjacent order statistics. The bins (from the code, asserted below so a change is
noticed): cosines 201 equal bins on [-1, 1] (width 0.00995), block_influence 201 on [0, 2], norm_ratio 600
geometric bins on [1e-3, 1e3] (each 10^0.01 = 1.023 x its left edge, i.e. width ~2.3% of the value).
N is chosen odd with q * N at least 0.25 from an integer for every q, so floating-point rounding of q * N
cannot move the target to a neighbouring order statistic.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from interp import probes
from interp.probes.metrics import METRICS
from tests.factories import tiny_hf, tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")

QS = (0.05, 0.25, 0.5, 0.75, 0.95)
COLUMNS = ("q05", "q25", "q50", "q75", "q95")
CHECKED = ("rho_mlp", "rho_mlp_mid", "rho_block", "rho_attn", "norm_ratio", "block_influence")
N_LAYERS = 3

# What the code bins each metric into (asserted against METRICS[m].histogram: the tolerance is derived from it)
LINEAR = {"rho_mlp": (-1.0, 1.0), "rho_mlp_mid": (-1.0, 1.0), "rho_block": (-1.0, 1.0), "rho_attn": (-1.0, 1.0),
          "block_influence": (0.0, 2.0)}


class CharTokenizer:
    def __init__(self, vocab: int):
        self.vocab = vocab

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % self.vocab for c in text]


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz .,;ABCDEFGHIJ0123456789") for _ in range(2000))
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text(text, encoding="utf-8")
    return path, text


def sequences(text: str, tokenizer: CharTokenizer, n_seqs: int, seq_len: int) -> torch.Tensor:
    """The documented token contract: the text tokenized as one string, cut into consecutive sequences."""
    ids = tokenizer.encode(text)
    return torch.tensor(ids[: n_seqs * seq_len], dtype=torch.long).view(n_seqs, seq_len)


def cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))


def per_token(sites: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """[batch, pos] float64 values of the checked metrics (interp/probes/metrics.py definitions)."""
    h, a, z, m, post = (sites[k].double() for k in ("resid_pre", "attn_out", "resid_mid", "mlp_out", "resid_post"))
    return {"rho_mlp": cos(m, h), "rho_mlp_mid": cos(m, z), "rho_block": cos(post - h, h), "rho_attn": cos(a, h),
            "norm_ratio": m.norm(dim=-1) / h.norm(dim=-1), "block_influence": 1 - cos(h, post)}


@torch.no_grad()
def tapered_sites(model, tokens: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Every layer's residual sites of a llama-style TaperedLM, from a forward written out here."""
    x = model.embed(tokens)
    out = []
    for block in model.blocks:
        a = block.attn(block.ln1(x))
        mid = x + a
        m = block.mlp(block.ln2(mid))
        post = mid + m
        out.append({"resid_pre": x, "attn_out": a, "resid_mid": mid, "mlp_out": m, "resid_post": post})
        x = post
    return out


@torch.no_grad()
def llama_sites(model, tokens: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """Every layer's residual sites of an HF Llama, from hooks written here: the decoder layer's input and
    output, its self_attn output[0] and its mlp output; resid_mid = resid_pre + attn_out (Llama adds both
    terms unchanged), and resid_post must equal resid_mid + mlp_out."""
    out = [dict() for _ in model.model.layers]
    handles = []
    for l, layer in enumerate(model.model.layers):
        def pre(module, args, kwargs, l=l):
            out[l]["resid_pre"] = (args[0] if args else kwargs["hidden_states"]).detach()
        handles.append(layer.register_forward_pre_hook(pre, with_kwargs=True))
        handles.append(layer.register_forward_hook(
            lambda m, a, o, l=l: out[l].__setitem__("resid_post", (o[0] if isinstance(o, tuple) else o).detach())))
        handles.append(layer.self_attn.register_forward_hook(
            lambda m, a, o, l=l: out[l].__setitem__("attn_out", o[0].detach())))
        handles.append(layer.mlp.register_forward_hook(lambda m, a, o, l=l: out[l].__setitem__("mlp_out", o.detach())))
    try:
        model(tokens)
    finally:
        for h in handles:
            h.remove()
    for sites in out:
        sites["resid_mid"] = sites["resid_pre"] + sites["attn_out"]
        torch.testing.assert_close(sites["resid_mid"] + sites["mlp_out"], sites["resid_post"], atol=1e-12, rtol=0)
    return out


# name -> (model builder, tokenizer vocab, n_seqs, seq_len, positions, site function)
# N = counted tokens per layer: tapered 15 x 31 = 465 (position 0 skipped), llama 15 x 13 = 195 (all positions)
SETUPS = {
    "tapered": (lambda: tiny_lm(init_std=0.2).double(), 64, 15, 32, "skip_first", tapered_sites),
    "llama": (lambda: tiny_hf("LlamaForCausalLM", 0, vocab_size=100, d_model=32, d_mlp=64, n_layers=N_LAYERS,
                              initializer_range=0.2).double(), 100, 15, 13, "all", llama_sites),
}


@pytest.fixture(scope="module", params=list(SETUPS))
def probed(request, text_file):
    """(setup name, the probe table, {(layer, metric): float64 values of the counted tokens}, N, the first
    counted position, {(layer, metric): the values at position 0})."""
    build, vocab, n_seqs, seq_len, positions, sites_of = SETUPS[request.param]
    path, text = text_file
    model, tok = build(), CharTokenizer(vocab)
    df = probes.probe(model, text=path, tokens=n_seqs * seq_len, seq_len=seq_len, batch_size=4,  # 4+4+4+3
                      dtype="float64", positions=positions, metrics=CHECKED, tokenizer=tok)
    start = 1 if positions == "skip_first" else 0
    tokens = sequences(text, tok, n_seqs, seq_len)
    values, first = {}, {}
    for layer, sites in enumerate(sites_of(model, tokens)):
        for metric, v in per_token(sites).items():
            values[(layer, metric)] = v[:, start:].flatten().numpy()
            first[(layer, metric)] = v[:, 0].numpy()      # position 0 (left out under skip_first)
    n = n_seqs * (seq_len - start)
    for q in QS:   # q * N well away from an integer: inverted_cdf's order statistic is unambiguous
        assert 0.2 < (q * n) % 1 < 0.8, (q, n)
    return request.param, df, values, n, start, first


def edges_of(metric: str) -> np.ndarray:
    edges = METRICS[metric].histogram(1).edges.numpy()
    if metric in LINEAR:
        lo, hi = LINEAR[metric]
        np.testing.assert_allclose(edges, np.linspace(lo, hi, 202), atol=1e-15)
    else:
        assert metric == "norm_ratio"
        np.testing.assert_allclose(edges, np.logspace(-3, 3, 601), rtol=1e-12)
    return edges


def rows(df):
    for metric in CHECKED:
        for layer in range(N_LAYERS):
            yield metric, layer, df[(df.metric == metric) & (df.layer == layer)].iloc[0]


def bin_width_at(edges: np.ndarray, x: float) -> float:
    i = int(np.clip(np.searchsorted(edges, x, side="right") - 1, 0, len(edges) - 2))
    return float(edges[i + 1] - edges[i])


def test_table_counts_the_documented_tokens(probed):
    name, df, values, n, _, _ = probed
    assert set(df.dtype) == {"float64"} and list(probes.QUANTILE_COLUMNS) == list(COLUMNS)
    for metric, layer, row in rows(df):
        v = values[(layer, metric)]
        assert row.n_tokens == n == v.size and row.n_nonfinite == 0
        assert row["mean"] == pytest.approx(float(v.mean()), abs=1e-12), (name, metric, layer)


def test_quantiles_are_within_one_bin_of_numpy(probed):
    name, df, values, n, _, _ = probed
    for metric, layer, row in rows(df):
        v, edges = values[(layer, metric)], edges_of(metric)
        assert edges[0] < v.min() and v.max() < edges[-1], (metric, layer)   # no value clamped to the range
        s = np.sort(v)
        for q, col in zip(QS, COLUMNS):
            got = float(row[col])
            target = float(np.quantile(v, q, method="inverted_cdf"))        # the ceil(q N)-th smallest value
            width = bin_width_at(edges, target)
            assert abs(got - target) <= width + 1e-12, (name, metric, layer, col, got, target, width)
            # numpy's default (linear) method sits between order statistics adjacent to that one
            j = math.ceil(q * n) - 1
            spacing = float(s[min(j + 1, n - 1)] - s[max(j - 1, 0)])
            linear = float(np.quantile(v, q))
            assert abs(got - linear) <= width + spacing + 1e-12, (name, metric, layer, col, got, linear)
        # control: the tolerance is far below the spread, so a swapped or shifted column would fail
        assert float(np.quantile(v, 0.25) - np.quantile(v, 0.05)) > 3 * bin_width_at(edges, float(np.quantile(v, 0.05)))
        assert float(np.quantile(v, 0.95) - np.quantile(v, 0.75)) > 3 * bin_width_at(edges, float(np.quantile(v, 0.95)))


def histogram_quantile(v: np.ndarray, edges: np.ndarray, q: float) -> float:
    """The documented rule, in numpy: the first bin whose cumulative count reaches q * N, linear inside it
    (bins [e_i, e_{i+1}), the last one closed, as np.histogram bins)."""
    counts, _ = np.histogram(v, bins=edges)
    cum = np.cumsum(counts)
    target = q * v.size
    b = int(np.argmax(cum >= target))
    below = cum[b] - counts[b]
    return float(edges[b] + (target - below) / counts[b] * (edges[b + 1] - edges[b]))


def test_quantiles_follow_the_documented_interpolation_exactly(probed):
    """Tighter than one bin: the table's value is the in-bin linear interpolation of the documented rule, to
    float rounding, over exactly the documented tokens; control: with position 0 counted too (skip_first
    setups) the same rule gives other values, so the check sees which tokens were counted."""
    name, df, values, n, start, first = probed
    moved = 0
    for metric, layer, row in rows(df):
        v, edges = values[(layer, metric)], edges_of(metric)
        for q, col in zip(QS, COLUMNS):
            want = histogram_quantile(v, edges, q)
            assert float(row[col]) == pytest.approx(want, abs=1e-9), (name, metric, layer, col)
        if start == 1:
            full = np.concatenate([v, first[(layer, metric)]])
            moved += sum(abs(histogram_quantile(full, edges, q) - float(row[c])) > 1e-6 for q, c in zip(QS, COLUMNS))
    if start == 1:
        assert moved > 0
