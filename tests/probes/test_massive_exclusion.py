"""exclude_massive_dims on the opt-in measures: docs/probes.md promises the excluded residual dimensions are
"zeroed in every operand of every measure, the lens and the covariances included". tests/probes/test_probes.py
checks that for the default six and rho_mlp_normed; here every opt-in measure (the geometry ratios, the logit
lens' KL and top-1, erank / participation / CKA with their jackknife sem) is checked through
interp.probes.probe against a float64 computation written here, from activations read with run_with_cache
(TaperedLM) or plain module hooks (HF Llama), with those dims zeroed as documented:

  - geometry: the dims are zeroed in h_l, a_l, z_l, m_l, h_{l+1} before the norms and the cosine;
  - lens: p_l = softmax(W_U final_norm(h_{l+1} with the dims zeroed)), p_L = the model's own, unmodified output
    (it is no operand: the reference forward runs without the probe's hooks);
  - population: cov(m_l), cov(h_l), cov(h_{l+1}) and the cross co-moment of the zeroed streams.

Positions: the default skip_first (position 0 of every sequence is left out). Control: the same probe without
exclusion matches the same computation without zeroing, and differs from the excluded run, so each check can
fail. No interp metric function is used in the reference.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

from interp import probes
from interp.probes import GEOMETRY_METRICS, LENS_METRICS, POPULATION_METRICS
from tests.factories import random_tokens, tiny_hf, tiny_lm, word_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

OPT_IN = (*GEOMETRY_METRICS, *LENS_METRICS, *POPULATION_METRICS)
VOCAB = 64
D_MODEL = 32
MASSIVE = 5                 # a dimension planted with large, token-dependent values
EXCLUDED = [MASSIVE, 20]    # the planted dim and an ordinary one (given to the probe in reverse order)
SEQ_LEN, N_SEQS, BATCH = 16, 4, 2
COUNTED = N_SEQS * (SEQ_LEN - 1)  # skip_first


# --------------------------------------------------------------------------------------------------
# Models, text and tokens
# --------------------------------------------------------------------------------------------------

def token_ids() -> torch.Tensor:
    """[N_SEQS, SEQ_LEN] ids 1..VOCAB-1 (id 0 is the word tokenizer's [UNK])."""
    return 1 + random_tokens(VOCAB - 1, N_SEQS, SEQ_LEN, seed=3)


def text_of(ids: torch.Tensor) -> str:
    """The word-level text whose tokens are exactly `ids` (word_tokenizer maps "w{i}" to i)."""
    return " ".join(f"w{i}" for i in ids.flatten().tolist())


def tapered_model():
    """tiny_lm with a planted massive dim, random ln_final gains and a sharp unembedding (the lens has
    something to measure, and excluding the massive dim changes every measure)."""
    model = tiny_lm(0)
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        model.embed.weight[:, MASSIVE] = 8.0 + 6.0 * torch.randn(VOCAB, generator=gen)
        model.ln_final.weight.copy_(1 + 0.5 * torch.randn(D_MODEL, generator=gen))
        model.unembed.weight.mul_(60)
    return model


def llama_model():
    """A random tiny HF Llama (attn_out derived from resid_mid - resid_pre by the torch backend) with the same
    planted dim, a sharp lm_head and random final-norm gains."""
    model = tiny_hf("LlamaForCausalLM", vocab_size=VOCAB, d_model=D_MODEL)
    gen = torch.Generator().manual_seed(12)
    with torch.no_grad():
        model.model.embed_tokens.weight[:, MASSIVE] = 8.0 + 6.0 * torch.randn(VOCAB, generator=gen)
        model.model.norm.weight.copy_(1 + 0.5 * torch.randn(D_MODEL, generator=gen))
        model.lm_head.weight.mul_(30)
    return model


def run_probe(model, text_file, exclude, backend: str, dtype: str) -> pd.DataFrame:
    return probes.probe(model, text_file, tokenizer=word_tokenizer(VOCAB), tokens=N_SEQS * SEQ_LEN, seq_len=SEQ_LEN,
                        batch_size=BATCH, backend=backend, dtype=dtype, metrics=OPT_IN,
                        exclude_massive_dims=exclude)


# --------------------------------------------------------------------------------------------------
# Activations, read independently of the probes
# --------------------------------------------------------------------------------------------------

def tapered_acts(model, toks: torch.Tensor):
    """(per layer {site: float64 [batch, pos, d]}, float64 logits, float64 final norm) via run_with_cache."""
    with torch.no_grad():
        logits, cache = model.run_with_cache(toks)
    acts = [{s: cache[f"blocks.{l}.hook_{s}"].double() for s in ("resid_pre", "attn_out", "resid_mid", "mlp_out",
                                                                   "resid_post")}
            for l in range(model.cfg.n_layers)]
    weight, eps = model.ln_final.weight.detach().double(), model.ln_final.eps
    final_norm = lambda h: h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight  # noqa: E731
    return acts, logits.double(), final_norm, model.unembed.weight.detach().double()


def llama_acts(model, toks: torch.Tensor):
    """The same from plain forward (pre-)hooks on the Llama's modules; attn_out = resid_mid - resid_pre (the
    block adds the attention output to the stream unchanged)."""
    store: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    first = lambda x: x[0] if isinstance(x, tuple) else x  # noqa: E731
    for l, layer in enumerate(model.model.layers):
        def keep_in(key):
            return lambda m, args, kwargs: store.__setitem__(key, (args[0] if args else kwargs["hidden_states"]).detach())
        handles.append(layer.register_forward_pre_hook(keep_in((l, "resid_pre")), with_kwargs=True))
        handles.append(layer.post_attention_layernorm.register_forward_pre_hook(keep_in((l, "resid_mid")),
                                                                                with_kwargs=True))
        handles.append(layer.mlp.register_forward_hook(lambda m, a, out, l=l: store.__setitem__((l, "mlp_out"), first(out))))
        handles.append(layer.register_forward_hook(lambda m, a, out, l=l: store.__setitem__((l, "resid_post"), first(out))))
    try:
        with torch.no_grad():
            logits = model(toks).logits.double()
    finally:
        for h in handles:
            h.remove()
    acts = []
    for l in range(len(model.model.layers)):
        a = {s: store[(l, s)].double() for s in ("resid_pre", "resid_mid", "mlp_out", "resid_post")}
        a["attn_out"] = a["resid_mid"] - a["resid_pre"]
        acts.append(a)
    norm = model.model.norm
    weight, eps = norm.weight.detach().double(), norm.variance_epsilon
    final_norm = lambda h: h / torch.sqrt(h.pow(2).mean(-1, keepdim=True) + eps) * weight  # noqa: E731
    return acts, logits, final_norm, model.lm_head.weight.detach().double()


# --------------------------------------------------------------------------------------------------
# The measures, float64, from whole activations
# --------------------------------------------------------------------------------------------------

def zeroed(x: torch.Tensor, dims) -> torch.Tensor:
    y = x.clone()
    y[..., list(dims)] = 0.0
    return y


def erank(m: torch.Tensor) -> float:
    """exp of the entropy of the normalised singular values of m centred over tokens (zero ones dropped)."""
    s = torch.linalg.svdvals(m - m.mean(0))
    p = s[s > s.max() * 1e-10] / s.sum()
    return math.exp(-(p * p.log()).sum().item())


def participation(m: torch.Tensor) -> float:
    lam = torch.linalg.svdvals(m - m.mean(0)) ** 2  # the eigenvalues of the (unnormalised) covariance
    return (lam.sum() ** 2 / (lam ** 2).sum()).item()


def cka(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA as HSIC of token x token Gram matrices (not the streamed d x d formula)."""
    n = x.shape[0]
    h = torch.eye(n, dtype=torch.float64) - 1.0 / n
    k, l = h @ x @ x.T @ h, h @ y @ y.T @ h
    return ((k * l).sum() / (k.norm() * l.norm())).item()


def reference(acts, logits, final_norm, unembed, dims) -> dict[tuple[int, str], dict[str, float]]:
    """(layer, metric) -> {"mean", "std" (per-token measures) | "sem" (population: delete-one-sequence
    jackknife, since each of the N_SEQS < 8 sequences is its own group)}, with `dims` zeroed in every operand."""
    out: dict[tuple[int, str], dict[str, float]] = {}
    log_pl = logits.log_softmax(-1)  # p_L: the model's own output, never zeroed
    for layer, raw in enumerate(acts):
        a = {s: zeroed(v, dims) for s, v in raw.items()}
        norm = lambda x: x.norm(dim=-1)  # noqa: E731
        cos = (a["resid_pre"] * a["resid_post"]).sum(-1) / (norm(a["resid_pre"]) * norm(a["resid_post"]))
        lens_logits = final_norm(a["resid_post"]) @ unembed.T
        per_token = {
            "norm_ratio_attn": norm(a["attn_out"]) / norm(a["resid_pre"]),
            "norm_ratio_mlp_mid": norm(a["mlp_out"]) / norm(a["resid_mid"]),
            "resid_growth": norm(a["resid_post"]) / norm(a["resid_pre"]),
            "angular_distance": torch.arccos(cos.clamp(-1, 1)) / math.pi,
            "logit_lens_kl": (log_pl.exp() * (log_pl - lens_logits.log_softmax(-1))).sum(-1),
            "logit_lens_top1": (lens_logits.argmax(-1) == logits.argmax(-1)).double(),
        }
        for metric, v in per_token.items():
            counted = v[:, 1:].flatten()  # skip_first
            out[(layer, metric)] = {"mean": counted.mean().item(), "std": counted.std().item()}

        def population(rows: list[int]) -> dict[str, float]:
            tok = lambda t: t[rows, 1:].reshape(-1, t.shape[-1])  # noqa: E731
            return {"mlp_erank": erank(tok(a["mlp_out"])), "mlp_participation": participation(tok(a["mlp_out"])),
                    "cka_resid": cka(tok(a["resid_pre"]), tok(a["resid_post"]))}

        full = population(list(range(N_SEQS)))
        leave_out = [population([r for r in range(N_SEQS) if r != g]) for g in range(N_SEQS)]
        for metric, value in full.items():
            th = torch.tensor([lo[metric] for lo in leave_out], dtype=torch.float64)
            sem = math.sqrt((N_SEQS - 1) / N_SEQS * ((th - th.mean()) ** 2).sum().item())
            out[(layer, metric)] = {"mean": value, "sem": sem}
    return out


# --------------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------------

def tolerance(metric: str, dtype: str, hf: bool) -> dict[str, float]:
    if metric in POPULATION_METRICS:
        return {"rel": 1e-6 if hf else 1e-8, "abs": 1e-12}
    if metric == "logit_lens_kl" and (dtype == "float32" or hf):  # float32 logsumexp; LlamaRMSNorm in float32
        return {"abs": 2e-5}
    if metric == "angular_distance" and dtype == "float32":  # arccos at cos ~ 1 (the plain run, where the planted
        return {"abs": 5e-5}                                   # dim dominates): d arccos / d cos = 1 / sin
    return {"abs": 1e-6 if dtype == "float32" else 1e-10}


def check_table(df: pd.DataFrame, want: dict, dtype: str, hf: bool, what: str) -> list[str]:
    """Mismatches of every (layer, metric) row with the reference, as readable lines (empty: all match)."""
    bad = []
    for (layer, metric), ref in want.items():
        got = df[(df.layer == layer) & (df.metric == metric)].iloc[0]
        tol = tolerance(metric, dtype, hf)
        for stat, value in ref.items():
            if got[stat] != pytest.approx(value, **tol):
                bad.append(f"{what}: layer {layer} {metric} {stat} = {got[stat]!r}, reference {value!r}")
        if got.n_tokens != COUNTED:
            bad.append(f"{what}: layer {layer} {metric} n_tokens = {got.n_tokens}, expected {COUNTED}")
    return bad


def by_metric(df: pd.DataFrame) -> dict[str, list[float]]:
    return {m: df[df.metric == m].sort_values("layer")["mean"].tolist() for m in OPT_IN}


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("text") / "text.txt"
    path.write_text(text_of(token_ids()), encoding="utf-8")
    return path


CASES = {  # name -> (model factory, activation reader, backend, metric dtype)
    "tapered-torch-float32": (tapered_model, tapered_acts, "torch", "float32"),
    "tapered-hookpoints-float64": (tapered_model, tapered_acts, "hookpoints", "float64"),
    "tapered-nnsight-float64": (tapered_model, tapered_acts, "nnsight", "float64"),
    "tapered-transformer_lens-float64": (tapered_model, tapered_acts, "transformer_lens", "float64"),
    "llama-torch-float64": (llama_model, llama_acts, "torch", "float64"),
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request, text_file):
    """The excluded and the plain run of one model / backend / dtype, and the float64 references."""
    make, read, backend, dtype = CASES[request.param]
    model = make()
    toks = token_ids()
    acts, logits, final_norm, unembed = read(model, toks)
    hf = make is llama_model
    excluded = run_probe(model, text_file, list(reversed(EXCLUDED)), backend, dtype)
    plain = run_probe(model, text_file, None, backend, dtype)
    return {"name": request.param, "dtype": dtype, "hf": hf, "excluded": excluded, "plain": plain,
            "want": reference(acts, logits, final_norm, unembed, EXCLUDED),
            "want_plain": reference(acts, logits, final_norm, unembed, [])}


def test_the_tokens_and_rows_are_the_planned_ones(case):
    """Every row counts the planned tokens and names the excluded dims (that the probe read the reference's
    tokens is shown by the plain control matching)."""
    df = case["excluded"]
    assert set(df.metric) == set(OPT_IN) and len(df) == 3 * len(OPT_IN)
    assert (df.n_tokens == COUNTED).all()
    assert set(df.excluded_dims) == {str(sorted(EXCLUDED))} and set(df.exclude_massive_dims) == {"given"}
    assert df.reference.str.endswith(f"excluding d_model dims {sorted(EXCLUDED)}").all()
    assert not case["plain"].reference.str.contains("excluding").any()
    assert "excluded_dims" not in case["plain"].columns


def test_control_plain_run_matches_the_unzeroed_reference(case):
    """Without exclusion the same reference code reproduces every opt-in measure: the readers and formulas
    here are the probe's definitions, so a mismatch below is the exclusion's."""
    assert check_table(case["plain"], case["want_plain"], case["dtype"], case["hf"], "plain") == []


def test_control_exclusion_changes_every_measure(case):
    """Zeroing the dims moves every (layer, measure) by more than 10x the tolerance of the checks below, so
    an exclusion that did nothing would fail them (top-1, a share of 60 tokens, moves in some layer)."""
    ex, plain = by_metric(case["excluded"]), by_metric(case["plain"])
    for metric in OPT_IN:
        diffs = [abs(a - b) for a, b in zip(ex[metric], plain[metric], strict=True)]
        if metric == "logit_lens_top1":
            assert max(diffs) >= 1 / COUNTED - 1e-12, (case["name"], metric, ex[metric], plain[metric])
            continue
        tol = tolerance(metric, case["dtype"], case["hf"])
        for layer, (d, value) in enumerate(zip(diffs, ex[metric], strict=True)):
            assert d > 10 * max(tol["abs"], tol.get("rel", 0) * abs(value)), (case["name"], metric, layer, d)


@pytest.mark.parametrize("group", ("geometry", "lens", "population"))
def test_excluded_dims_are_zeroed_in_every_operand_of_the_opt_in_measures(case, group):
    metrics = {"geometry": GEOMETRY_METRICS, "lens": LENS_METRICS, "population": POPULATION_METRICS}[group]
    want = {k: v for k, v in case["want"].items() if k[1] in metrics}
    assert check_table(case["excluded"], want, case["dtype"], case["hf"], case["name"]) == []


def test_measured_k_excludes_the_planted_dim_in_the_opt_in_measures_too(text_file):
    """exclude_massive_dims=1 finds the planted dim on a first pass (the lens' reference forward and the
    covariances are unaffected by that pass) and gives the same table as exclude_massive_dims=[MASSIVE]."""
    model = tapered_model()
    measured = run_probe(model, text_file, 1, "torch", "float64")
    given = run_probe(model, text_file, [MASSIVE], "torch", "float64")
    assert set(measured.excluded_dims) == {f"[{MASSIVE}]"} and set(measured.exclude_massive_dims) == {1}
    assert measured["mean"].tolist() == pytest.approx(given["mean"].tolist(), rel=1e-12, abs=1e-12)
    assert measured["sem"].tolist() == pytest.approx(given["sem"].tolist(), rel=1e-12, abs=1e-12, nan_ok=True)
