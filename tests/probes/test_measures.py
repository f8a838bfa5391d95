"""The opt-in per-layer measures (geometry, logit lens, population statistics): each against a naive float64
computation on cached activations of a tiny model, on every backend; their CIs, merging, memory, and the
entry points (Python API, `interp probe`, `interp batch`). The SmolLM2 test extends the three-backend
agreement of tests/probes/test_probes.py to them.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp import hf as pretrained
from interp import probes
from interp.probes import GEOMETRY_METRICS, LENS_METRICS, METRIC_NAMES, POPULATION_METRICS, NoveltyAccumulator
from interp.probes.accumulator import SEQUENCE_CI
from interp.probes.lens import LogitLens
from interp.probes.population import PopulationStats
from interp.stats import RunningCovariance, t_quantile
from tests.factories import random_tokens, save_pretrained_dir, tiny_hf, tiny_lm, word_tokenizer

NEW = (*GEOMETRY_METRICS, *LENS_METRICS, *POPULATION_METRICS)
VOCAB = 64

pytestmark = pytest.mark.usefixtures("one_thread")


def lens_model(seed: int = 0):
    """tiny_lm with non-trivial final-norm gains and a sharp unembedding, so the lens has something to measure."""
    model = tiny_lm(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        model.ln_final.weight.copy_(1 + 0.5 * torch.randn(model.cfg.d_model, generator=gen))
        model.unembed.weight.mul_(60)
    return model


def tokens(batch: int = 4, pos: int = 16, seed: int = 1) -> torch.Tensor:
    return random_tokens(VOCAB, batch, pos, seed)


# --------------------------------------------------------------------------------------------------
# The naive float64 computations, from whole cached activations
# --------------------------------------------------------------------------------------------------

def cached(model, toks: torch.Tensor) -> tuple[list[dict[str, torch.Tensor]], torch.Tensor]:
    """(per layer {site: [batch, pos, d] float64}, the model's logits) from run_with_cache."""
    with torch.no_grad():
        logits, cache = model.run_with_cache(toks)
    acts = [{s: cache[f"blocks.{l}.hook_{s}"].double() for s in probes.SITES} for l in range(model.cfg.n_layers)]
    return acts, logits.double()


def naive_geometry(a: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    norm = lambda x: x.norm(dim=-1)  # noqa: E731
    cos = F.cosine_similarity(a["resid_pre"], a["resid_post"], dim=-1)
    return {"norm_ratio_attn": norm(a["attn_out"]) / norm(a["resid_pre"]),
            "norm_ratio_mlp_mid": norm(a["mlp_out"]) / norm(a["resid_mid"]),
            "resid_growth": norm(a["resid_post"]) / norm(a["resid_pre"]),
            "angular_distance": torch.arccos(cos.clamp(-1, 1)) / math.pi}


def naive_lens(h: torch.Tensor, logits: torch.Tensor, norm_weight: torch.Tensor, unembed: torch.Tensor,
               eps: float) -> dict[str, torch.Tensor]:
    """KL(p_L || p_l) and top-1 agreement, with p_l from a float64 RMSNorm and the full [tokens, vocab] logits."""
    lens_logits = (F.rms_norm(h, (h.shape[-1],), eps=eps) * norm_weight.double()) @ unembed.double().T
    log_p_final, log_p_lens = logits.log_softmax(-1), lens_logits.log_softmax(-1)
    kl = (log_p_final.exp() * (log_p_final - log_p_lens)).sum(-1)
    return {"logit_lens_kl": kl, "logit_lens_top1": (lens_logits.argmax(-1) == logits.argmax(-1)).double()}


def erank_svd(m: torch.Tensor) -> float:
    s = torch.linalg.svdvals(m - m.mean(0))
    p = s[s > s.max() * 1e-12] / s.sum()
    return math.exp(-(p * p.log()).sum().item())


def participation_svd(m: torch.Tensor) -> float:
    lam = torch.linalg.svdvals(m - m.mean(0)) ** 2
    return (lam.sum() ** 2 / (lam ** 2).sum()).item()


def cka_gram(x: torch.Tensor, y: torch.Tensor) -> float:
    """Linear CKA through token x token Gram matrices (HSIC with the centring matrix), independent of the
    streamed d x d formula."""
    n = x.shape[0]
    h = torch.eye(n, dtype=torch.float64) - 1.0 / n
    k, l = h @ x @ x.T @ h, h @ y @ y.T @ h
    return ((k * l).sum() / (k.norm() * l.norm())).item()


def naive_population(acts: list[dict[str, torch.Tensor]], rows: list[int], skip_first: bool = True) -> dict:
    """metric -> per-layer value over the counted tokens of sequences `rows`."""
    start = 1 if skip_first else 0
    tok = lambda t: t[rows, start:].reshape(-1, t.shape[-1])  # noqa: E731
    return {"mlp_erank": [erank_svd(tok(a["mlp_out"])) for a in acts],
            "mlp_participation": [participation_svd(tok(a["mlp_out"])) for a in acts],
            "cka_resid": [cka_gram(tok(a["resid_pre"]), tok(a["resid_post"])) for a in acts]}


def row(df: pd.DataFrame, layer: int, metric: str) -> pd.Series:
    return df[(df.layer == layer) & (df.metric == metric)].iloc[0]


# --------------------------------------------------------------------------------------------------
# Tiny TaperedLM: every backend vs the naive computation
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny():
    model, toks = lens_model(), tokens()
    acts, logits = cached(model, toks)
    return model, toks, acts, logits


@pytest.mark.parametrize("backend", probes.BACKENDS)
def test_every_new_measure_matches_the_naive_float64_computation(tiny, backend):
    model, toks, acts, logits = tiny
    df = probes.probe_model(model, [toks[:2], toks[2:]], backend=backend, metrics=NEW)
    assert set(df.metric) == set(NEW) and len(df) == 3 * len(NEW)
    population = naive_population(acts, rows=[0, 1, 2, 3])
    for layer, a in enumerate(acts):
        per_token = {**naive_geometry(a), **naive_lens(a["resid_post"], logits, model.ln_final.weight,
                                                       model.unembed.weight, model.ln_final.eps)}
        for metric, values in per_token.items():
            want, got = values[:, 1:].flatten(), row(df, layer, metric)
            tol = 2e-5 if metric == "logit_lens_kl" else 1e-6  # float32 logsumexp of O(10) logits
            assert got["mean"] == pytest.approx(want.mean().item(), abs=tol), (backend, layer, metric)
            assert got["std"] == pytest.approx(want.std().item(), abs=tol), (backend, layer, metric)
            assert got.n_tokens == 4 * 15 and got.ci_low <= got["mean"] <= got.ci_high
        for metric, values in population.items():
            got = row(df, layer, metric)
            assert got["mean"] == pytest.approx(values[layer], rel=1e-6), (backend, layer, metric)
            assert got.n_tokens == 4 * 15 and math.isnan(got["std"]) and math.isnan(got.q50)
    kl = df[df.metric == "logit_lens_kl"].sort_values("layer")["mean"].tolist()
    assert abs(kl[-1]) < 1e-5 and kl[0] > 0.05  # the last layer's lens IS the model's output
    assert row(df, 2, "logit_lens_top1")["mean"] == 1.0
    assert row(df, 1, "logit_lens_kl").reference == (
        "KL(p_L || p_l) nats, p_l = softmax(unembed(ln_final(h))) of h = blocks.1.hook_resid_post, "
        "p_L = the model's output")
    hooks_left = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    assert hooks_left == 0, "a backend left hooks on the model"


def test_float64_lens_is_exact_and_padding_is_masked(tiny):
    model, toks, acts, logits = tiny
    pad = torch.ones_like(toks)
    pad[3, 9:] = 0  # right padding: later positions of sequence 3 do not count
    df = probes.probe_model(model, [{"input_ids": toks, "attention_mask": pad}], backend="torch", dtype="float64",
                            metrics=("logit_lens_kl", "logit_lens_top1", "mlp_erank", "cka_resid"))
    counted = lambda v: torch.cat([v[:3, 1:].flatten(), v[3, 1:9]])  # noqa: E731
    for layer, a in enumerate(acts):
        lens = naive_lens(a["resid_post"], logits, model.ln_final.weight, model.unembed.weight, model.ln_final.eps)
        assert row(df, layer, "logit_lens_kl")["mean"] == pytest.approx(
            counted(lens["logit_lens_kl"]).mean().item(), abs=1e-10)
        tok = lambda t: torch.cat([t[:3, 1:].reshape(-1, t.shape[-1]), t[3, 1:9]])  # noqa: E731
        assert row(df, layer, "mlp_erank")["mean"] == pytest.approx(erank_svd(tok(a["mlp_out"])), rel=1e-9)
        assert row(df, layer, "cka_resid")["mean"] == pytest.approx(
            cka_gram(tok(a["resid_pre"]), tok(a["resid_post"])), rel=1e-9)
        assert row(df, layer, "cka_resid").n_tokens == 3 * 15 + 8


def test_population_ci_is_a_jackknife_over_sequence_groups(tiny):
    """Sequence s is in group s mod G; the sem is the delete-a-group jackknife over the non-empty groups."""
    model, toks, acts, _ = tiny
    df = probes.probe_model(model, [toks[:3], toks[3:]], backend="hookpoints", metrics=POPULATION_METRICS,
                            jackknife_groups=2)
    full = naive_population(acts, [0, 1, 2, 3])
    leave_out = [naive_population(acts, [1, 3]), naive_population(acts, [0, 2])]  # without group 0, group 1
    for metric in POPULATION_METRICS:
        for layer in range(3):
            th = torch.tensor([lo[metric][layer] for lo in leave_out], dtype=torch.float64)
            sem = math.sqrt(1 / 2 * ((th - th.mean()) ** 2).sum().item())
            got = row(df, layer, metric)
            assert got["mean"] == pytest.approx(full[metric][layer], rel=1e-9)
            assert got["sem"] == pytest.approx(sem, rel=1e-6, abs=1e-12), (metric, layer)
            assert got.ci_high - got["mean"] == pytest.approx(t_quantile(0.975, 1) * sem, rel=1e-6, abs=1e-12)
            assert got.ci_method == "jackknife: 2 groups of whole sequences, t(1)"
    per_token = probes.probe_model(model, [toks], metrics=("rho_mlp", "mlp_erank"), jackknife_groups=1)
    assert per_token[per_token.metric == "mlp_erank"]["sem"].isna().all()  # one group: no CI, and it says so
    assert set(per_token.ci_method) == {SEQUENCE_CI,
                                        "none: fewer than 2 jackknife groups of sequences (NaN CI)"}


def test_default_table_is_unchanged():
    model, toks = tiny_lm(), tokens()
    df = probes.probe_model(model, [toks], backend="torch")
    assert tuple(dict.fromkeys(df.metric)) == METRIC_NAMES and not set(NEW) & set(METRIC_NAMES)
    assert set(df.ci_method) == {SEQUENCE_CI}  # every row says how its CI was made


def test_merged_shards_equal_one_pass(tiny):
    model, toks, _, _ = tiny
    whole = probes.accumulate(model, [toks], backend="hookpoints", metrics=NEW)
    parts = [probes.accumulate(model, [toks[i:i + 1]], backend="hookpoints", metrics=NEW) for i in range(4)]
    merged = NoveltyAccumulator(3, NEW, lens=whole.lens).load_state_dict(parts[0].state_dict())
    for p in parts[1:]:
        merged.merge(p)
    for a, b in zip(whole.summary(), merged.summary(), strict=True):
        assert (a["metric"], a["n_tokens"]) == (b["metric"], b["n_tokens"])
        assert a["mean"] == pytest.approx(b["mean"], rel=1e-9, abs=1e-9), a["metric"]
        if a["metric"] in POPULATION_METRICS:  # shard k's sequence lands in group 0: other groups than one pass
            assert merged.population.n_sequences == 4


def test_state_does_not_grow_with_tokens_and_activations_are_dropped():
    """Memory: population state is G x d x d per layer whatever the token count; no activation outlives its layer."""
    def state_bytes(acc: NoveltyAccumulator) -> int:
        total = 0

        def walk(x):
            nonlocal total
            if torch.is_tensor(x):
                total += x.numel() * x.element_size()
            elif isinstance(x, dict):
                for v in x.values():
                    walk(v)
            elif isinstance(x, list):
                for v in x:
                    walk(v)
        walk(acc.state_dict())
        return total

    model = lens_model()
    sizes = []
    for n in (2, 4):  # 8 and 16 sequences: every jackknife group is allocated in both
        acc = probes.accumulate(model, [tokens(seed=s) for s in range(n)], backend="torch", metrics=NEW)
        assert not acc._live and acc.peak_live_tensors <= 5
        assert acc.lens._ref is None  # the per-batch reference is dropped with the batch
        sizes.append(state_bytes(acc))
    assert sizes[0] == sizes[1]


def test_running_covariance_merges_exactly_and_skips_nonfinite_rows():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(50, 6, generator=gen, dtype=torch.float64) * 3 + 100  # a large mean: the centring matters
    y = x @ torch.randn(6, 6, generator=gen, dtype=torch.float64) + torch.randn(50, 6, generator=gen, dtype=torch.float64)
    whole, parts = RunningCovariance(2, cross=True), RunningCovariance(2, cross=True)
    whole.update(x, y, channel=1)
    for sl in (slice(0, 7), slice(7, 30), slice(30, 50)):
        part = RunningCovariance(2, cross=True)
        part.update(x[sl], y[sl], channel=1)
        parts.merge(RunningCovariance.from_state_dict(part.state_dict()))
    want = (x - x.mean(0)).T @ (y - y.mean(0)) / 49
    torch.testing.assert_close(whole.covariance(1), want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(parts.covariance(1), want, rtol=1e-12, atol=1e-12)
    assert whole.covariance(0).isnan().all()  # an empty channel
    auto = RunningCovariance()
    bad = x.clone()
    bad[3, 2] = float("nan")
    auto.update(bad)
    keep = torch.ones(50, dtype=torch.bool)
    keep[3] = False
    torch.testing.assert_close(auto.covariance(0), torch.cov(x[keep].T), rtol=1e-12, atol=1e-12)
    assert auto.n_nonfinite.item() == 1 and auto.count.item() == 49
    with pytest.raises(ValueError, match="x \\[n, d\\] and y"):
        RunningCovariance(cross=True).update(x)


def test_lens_metrics_need_a_lens_and_population_stats_check_their_names():
    with pytest.raises(ValueError, match="lens=interp.probes.lens.LogitLens.for_model"):
        NoveltyAccumulator(2, ("logit_lens_kl",))
    with pytest.raises(ValueError, match="population metrics"):
        PopulationStats(2, ("rho_mlp",))
    with pytest.raises(ValueError, match="choose a non-empty subset"):
        probes.ProbeConfig(metrics=("logit_lens",)).validate()


# --------------------------------------------------------------------------------------------------
# A tiny HF Llama: module-hook sites (attn_out derived), lm_head / model.norm from the SiteMap
# --------------------------------------------------------------------------------------------------

def capture(module, kind: str, store: dict, key) -> torch.utils.hooks.RemovableHandle:
    """A hook keeping the module's first input ("in") or its (first) output ("out") in store[key]."""
    first = lambda x: x[0] if isinstance(x, tuple) else x  # noqa: E731
    if kind == "in":
        return module.register_forward_pre_hook(
            lambda m, args, kwargs: store.__setitem__(key, args[0] if args else kwargs["hidden_states"]), with_kwargs=True)
    return module.register_forward_hook(lambda m, args, out: store.__setitem__(key, first(out)))


def logits_with(model, toks: torch.Tensor, handles: list) -> torch.Tensor:
    """The model's float64 logits from one forward; the hooks `handles` are removed afterwards."""
    try:
        with torch.no_grad():
            return model(toks).logits.double()
    finally:
        for h in handles:
            h.remove()


def hf_naive(model, toks):
    """Per layer {site: float64 activation} of a Llama from hooks written here (module names, not the SiteMap)."""
    acts: dict[tuple[int, str], torch.Tensor] = {}
    where = lambda layer: {"resid_pre": (layer, "in"), "resid_mid": (layer.post_attention_layernorm, "in"),  # noqa: E731
                           "mlp_out": (layer.mlp, "out"), "resid_post": (layer, "out")}
    layers = model.model.layers
    logits = logits_with(model, toks, [capture(module, kind, acts, (l, site)) for l, layer in enumerate(layers)
                                       for site, (module, kind) in where(layer).items()])
    out = []
    for l in range(len(layers)):
        a = {s: acts[(l, s)].double() for s in ("resid_pre", "resid_mid", "mlp_out", "resid_post")}
        a["attn_out"] = a["resid_mid"] - a["resid_pre"]
        out.append(a)
    return out, logits


@pytest.fixture(scope="module")
def hf_llama_dir(tmp_path_factory):
    """A save_pretrained tiny Llama (a real tokenizer: the bridge needs one) with a sharp lm_head and
    non-trivial final-norm gains."""
    model = tiny_hf("LlamaForCausalLM", vocab_size=VOCAB)
    with torch.no_grad():
        model.lm_head.weight.mul_(30)
        model.model.norm.weight.copy_(1 + 0.5 * torch.randn(32, generator=torch.Generator().manual_seed(3)))
    tokenizer = word_tokenizer(VOCAB, bos_token="[UNK]", eos_token="[UNK]")
    return save_pretrained_dir(tmp_path_factory.mktemp("llama"), model, tokenizer)


@pytest.mark.parametrize("backend", ("torch", "transformer_lens", "nnsight"))
def test_hf_llama_new_measures_match_plain_hooks(backend, hf_llama_dir):
    loaded = pretrained.load_pretrained(str(hf_llama_dir))
    model, toks = loaded.model, tokens()
    acts, logits = hf_naive(model, toks)
    df = probes.probe_model(loaded, [toks[:2], toks[2:]], backend=backend, metrics=NEW, dtype="float64")
    population = naive_population(acts, [0, 1, 2, 3])
    norm = model.model.norm
    for layer, a in enumerate(acts):
        lens_logits = norm(a["resid_post"].float()).double() @ model.lm_head.weight.double().T
        log_pl, log_lens = logits.log_softmax(-1), lens_logits.log_softmax(-1)
        per_token = {**naive_geometry(a),
                     "logit_lens_kl": (log_pl.exp() * (log_pl - log_lens)).sum(-1),
                     "logit_lens_top1": (lens_logits.argmax(-1) == logits.argmax(-1)).double()}
        for metric, values in per_token.items():
            tol = 1e-5 if metric == "logit_lens_kl" else 1e-6  # LlamaRMSNorm computes in float32
            assert row(df, layer, metric)["mean"] == pytest.approx(values[:, 1:].mean().item(), abs=tol), (backend, metric)
        for metric, values in population.items():
            assert row(df, layer, metric)["mean"] == pytest.approx(values[layer], rel=1e-5), (backend, layer, metric)
    assert "lm_head(model.norm(h))" in row(df, 0, "logit_lens_top1").reference


def naive_final_norm(arch: str, norm, h: torch.Tensor) -> torch.Tensor:
    """The final norm written out in float64: GPT-2's LayerNorm, Gemma's RMSNorm with (1 + weight)."""
    if arch == "GPT2LMHeadModel":
        return F.layer_norm(h, (h.shape[-1],), norm.weight.double(), norm.bias.double(), eps=norm.eps)
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + norm.eps) * (1 + norm.weight.double())


@pytest.mark.parametrize("arch", ("GPT2LMHeadModel", "Gemma2ForCausalLM", "Gemma3ForCausalLM"))
def test_logit_lens_on_other_architectures_matches_full_vocab_math(arch):
    """LayerNorm with a bias (GPT-2), (1 + w) RMSNorm (Gemma) and Gemma-2's logit softcap, which is part of
    p_L (the model's output) and not of the lens: its last layer's KL is then not 0, and must still match."""
    model = tiny_hf(arch, vocab_size=VOCAB)
    with torch.no_grad():
        model.lm_head.weight.mul_(30)
    layers, norm = ((model.transformer.h, model.transformer.ln_f) if arch == "GPT2LMHeadModel"
                    else (model.model.layers, model.model.norm))
    outs: dict[int, torch.Tensor] = {}
    toks = tokens()
    logits = logits_with(model, toks, [capture(layer, "out", outs, l) for l, layer in enumerate(layers)])
    df = probes.probe_model(model, [toks], backend="torch", metrics=LENS_METRICS, dtype="float64")
    for l in range(len(layers)):
        lens = naive_final_norm(arch, norm, outs[l].double()) @ model.lm_head.weight.double().T
        log_pl, log_lens = logits.log_softmax(-1), lens.log_softmax(-1)
        kl = (log_pl.exp() * (log_pl - log_lens)).sum(-1)[:, 1:]
        top1 = (lens.argmax(-1) == logits.argmax(-1))[:, 1:].double()
        assert row(df, l, "logit_lens_kl")["mean"] == pytest.approx(kl.mean().item(), abs=1e-5), (arch, l)
        assert row(df, l, "logit_lens_top1")["mean"] == pytest.approx(top1.mean().item(), abs=1e-12), (arch, l)
    last = row(df, len(layers) - 1, "logit_lens_kl")["mean"]
    assert (last > 1e-3) if arch == "Gemma2ForCausalLM" else (abs(last) < 1e-6), (arch, last)


# --------------------------------------------------------------------------------------------------
# Entry points: `interp probe`, `interp batch`
# --------------------------------------------------------------------------------------------------

class CharTokenizer:
    bos_token_id = 1

    def encode(self, text, add_special_tokens=False):
        return [2 + ord(c) % (VOCAB - 2) for c in text]


@pytest.mark.parametrize("command", ("probe", "batch"))
def test_cli_reaches_the_new_measures(command, tmp_path, tiny_checkpoint, monkeypatch):
    from interp.cli import main

    run_dir = tiny_checkpoint("runs/tiny", model=lens_model(), config={"data": {}})
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 3, encoding="utf-8")
    monkeypatch.setattr("interp.data.get_tokenizer", lambda name: CharTokenizer())
    out = tmp_path / "out.parquet"
    chosen = "rho_mlp,angular_distance,logit_lens_kl,logit_lens_top1,mlp_erank,cka_resid"
    common = ["--text", str(text), "--tokens", "64", "--seq-len", "16", "--batch-size", "2", "--tokenizer", "chars",
              "--metrics", chosen, "--out", str(out)]
    argv = ["probe", "--model", str(run_dir), *common] if command == "probe" else ["batch", str(run_dir), *common,
                                                                                   "--no-progress"]
    assert main(argv) == 0
    df = pd.read_parquet(out)
    assert set(df.metric) == set(chosen.split(",")) and set(df.layer) == {0, 1, 2}
    assert df[df.metric == "mlp_erank"].ci_method.str.startswith("jackknife: 4 groups").all()
    assert (df[df.metric == "cka_resid"]["mean"].between(0, 1)).all()


# --------------------------------------------------------------------------------------------------
# Integration: SmolLM2, the three backends agree on every new measure
# --------------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_smollm2_backends_agree_on_the_new_measures():
    smol = pretrained.load_pretrained("smollm2-135m")
    text, _ = probes.load_text(None)
    batches = probes.token_batches(probes.encode_text(smol.tokenizer, text[:20_000]), 256, 128, batch_size=2)
    tables = {b: probes.probe_model(smol, batches, backend=b, metrics=NEW) for b in ("torch", "transformer_lens", "nnsight")}
    ref = tables["torch"].set_index(["layer", "metric"])["mean"]
    assert len(ref) == 30 * len(NEW)
    for backend in ("transformer_lens", "nnsight"):
        other = tables[backend].set_index(["layer", "metric"])["mean"]
        for key, value in ref.items():
            tol = dict(rel=1e-5, abs=1e-4) if key[1] == "logit_lens_kl" else dict(abs=1e-5)
            assert other[key] == pytest.approx(value, **tol), (backend, key)
    lens = tables["torch"][tables["torch"].metric == "logit_lens_kl"].sort_values("layer")["mean"].tolist()
    assert abs(lens[-1]) < 1e-3 and lens[0] > 1.0  # SmolLM2's last layer lens is its own output
