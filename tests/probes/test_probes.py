"""Novelty probes: metric math, streaming, backends and the text/token contract.

Fast tests use a tiny TaperedLM and are checked against an independent float64 computation from
run_with_cache; integration tests load SmolLM2 once and compare the torch, transformer_lens and
nnsight backends with each other and with a naive full-activation computation.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp import hf as pretrained
from interp._util.errors import InputError
from interp import probes
from interp.model import TaperedLM
from interp.probes import METRIC_NAMES, NoveltyAccumulator
from interp.training import checkpoints
from tests.factories import random_tokens, tiny_lm, word_tokenizer_json

VOCAB = 64
SITE_HOOKS = {s: f"hook_{s}" for s in probes.SITES}


tiny_tokens = functools.partial(random_tokens, VOCAB)  # [2, 16], seed 1; tiny_lm() has vocab 64


def naive_metrics(acts: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-token metrics of one layer from full activations, in float64 with F.cosine_similarity."""
    a = {k: v.double() for k, v in acts.items()}
    cos = lambda x, y: F.cosine_similarity(x, y, dim=-1)  # noqa: E731
    return {"rho_mlp": cos(a["mlp_out"], a["resid_pre"]),
            "rho_mlp_mid": cos(a["mlp_out"], a["resid_mid"]),
            "rho_block": cos(a["resid_post"] - a["resid_pre"], a["resid_pre"]),
            "rho_attn": cos(a["attn_out"], a["resid_pre"]),
            "norm_ratio": a["mlp_out"].norm(dim=-1) / a["resid_pre"].norm(dim=-1),
            "block_influence": 1 - cos(a["resid_pre"], a["resid_post"])}


def table_means(df: pd.DataFrame) -> dict[tuple[int, str], float]:
    return {(int(r.layer), r.metric): r.mean for r in df.itertuples()}


# --------------------------------------------------------------------------------------------------
# Accumulator on synthetic activations
# --------------------------------------------------------------------------------------------------

def synthetic_layer(gen: torch.Generator, shape=(3, 10, 8)) -> dict[str, torch.Tensor]:
    pre = torch.randn(shape, generator=gen)
    attn = torch.randn(shape, generator=gen) * 0.5
    mid = pre + attn
    mlp = torch.randn(shape, generator=gen) * 0.5 + 0.3 * mid
    return {"resid_pre": pre, "attn_out": attn, "resid_mid": mid, "mlp_out": mlp, "resid_post": mid + mlp}


@pytest.mark.parametrize("derive", [False, True])
def test_accumulator_matches_naive_per_token_math(derive):
    gen = torch.Generator().manual_seed(0)
    acc = NoveltyAccumulator(2, derive_attn_out=derive)
    batches = [[synthetic_layer(gen) for _ in range(2)] for _ in range(3)]
    mask = torch.ones(3, 10, dtype=torch.bool)
    mask[:, 0] = False
    for layers in batches:
        acc.begin_batch(mask)
        for layer, acts in enumerate(layers):
            for site in probes.SITES:
                if not (derive and site == "attn_out"):  # derived backends never see attn_out
                    acc.feed(layer, site, acts[site])
        acc.end_batch()
    df = pd.DataFrame(acc.summary())
    for layer in range(2):
        naive = {m: torch.cat([naive_metrics(b[layer])[m][mask] for b in batches]) for m in METRIC_NAMES}
        for m, values in naive.items():
            row = df[(df.layer == layer) & (df.metric == m)].iloc[0]
            assert row["mean"] == pytest.approx(values.mean().item(), abs=1e-6), m
            assert row["std"] == pytest.approx(values.std().item(), abs=1e-6), m
            assert row["n_tokens"] == 3 * 3 * 9
            hist = acc.hists[m]
            width = (hist.edges[1:] - hist.edges[:-1])[hist.edges[1:] > values.median()][0].item()
            assert abs(row["q50"] - values.quantile(0.5).item()) <= width + 1e-9, m


def test_activations_are_dropped_as_soon_as_possible_and_state_does_not_grow():
    """Memory: at most a few activations of ONE layer alive; statistics state independent of tokens."""
    def state_bytes(acc: NoveltyAccumulator) -> int:
        total = 0
        for part in ("moments", "hists"):
            for st in acc.state_dict()[part].values():
                total += sum(v.numel() * v.element_size() for v in st.values() if torch.is_tensor(v))
        return total

    gen = torch.Generator().manual_seed(0)
    sizes = []
    for n_batches in (1, 6):
        acc = NoveltyAccumulator(4, derive_attn_out=True)
        for _ in range(n_batches):
            acc.begin_batch()
            for layer in range(4):
                acts = synthetic_layer(gen)
                for site in ("resid_pre", "resid_mid", "mlp_out", "resid_post"):
                    acc.feed(layer, site, acts[site])
                assert not acc._live, "a finished layer must hold no activations"
            acc.end_batch()
        sizes.append(state_bytes(acc))
        assert acc.peak_live_tensors <= 4  # pre, mid, derived attn_out / block_out, the arriving one
    assert sizes[0] == sizes[1]


def test_nonfinite_tokens_are_counted_and_left_out_of_the_mean():
    gen = torch.Generator().manual_seed(0)
    acts = synthetic_layer(gen)
    acts["mlp_out"] = acts["mlp_out"].clone()
    acts["mlp_out"][0, 3, 2] = float("nan")
    acts["mlp_out"][1, 5, 0] = float("inf")
    acts["resid_post"] = acts["resid_mid"] + acts["mlp_out"]
    acc = NoveltyAccumulator(1, metrics=("rho_mlp", "rho_block"))
    acc.begin_batch()
    for site in probes.SITES:
        acc.feed(0, site, acts[site])
    acc.end_batch()
    rows = {r["metric"]: r for r in acc.summary()}
    naive = naive_metrics(acts)["rho_mlp"].flatten()
    finite = naive[torch.isfinite(naive)]
    assert rows["rho_mlp"]["n_nonfinite"] == 2 and rows["rho_mlp"]["n_tokens"] == 28
    assert math.isfinite(rows["rho_mlp"]["mean"])
    assert rows["rho_mlp"]["mean"] == pytest.approx(finite.mean().item(), abs=1e-6)
    assert rows["rho_block"]["n_nonfinite"] == 2  # resid_post inherits the NaN/inf


def test_missing_site_and_double_feed_are_errors():
    gen = torch.Generator().manual_seed(0)
    acts = synthetic_layer(gen)
    acc = NoveltyAccumulator(2, metrics=("rho_mlp",))
    acc.begin_batch()
    acc.feed(0, "resid_pre", acts["resid_pre"])
    acc.feed(0, "mlp_out", acts["mlp_out"])
    with pytest.raises(RuntimeError, match="layer 1"):
        acc.end_batch()
    acc.begin_batch()
    acc.add_values(0, "rho_mlp", torch.zeros(3, 10))
    with pytest.raises(RuntimeError, match="twice"):
        acc.add_values(0, "rho_mlp", torch.zeros(3, 10))
    with pytest.raises(ValueError, match="metrics"):
        NoveltyAccumulator(2, metrics=("rho_nope",))


def test_merged_shards_equal_one_pass():
    model, toks = tiny_lm(), [tiny_tokens(seed=s) for s in range(3)]
    whole = probes.accumulate(model, toks, backend="hookpoints")
    parts = [probes.accumulate(model, [t], backend="hookpoints") for t in toks]
    merged = NoveltyAccumulator(3).load_state_dict(parts[0].state_dict())
    for p in parts[1:]:
        merged.merge(p)
    for a, b in zip(whole.summary(), merged.summary()):
        assert a["n_tokens"] == b["n_tokens"]
        assert a["mean"] == pytest.approx(b["mean"], abs=1e-12)
        assert a["q50"] == pytest.approx(b["q50"], abs=1e-12)


# --------------------------------------------------------------------------------------------------
# Tokens and positions
# --------------------------------------------------------------------------------------------------

def test_token_batches_contract():
    ids = list(range(100, 150))
    batches = probes.token_batches(ids, tokens=40, seq_len=16, batch_size=1)  # 40 -> 2 sequences of 16
    assert [b.tolist() for b in batches] == [[ids[:16]], [ids[16:32]]]
    with_bos = torch.cat(probes.token_batches(ids, tokens=48, seq_len=16, batch_size=2, bos_id=7))
    assert with_bos.shape == (3, 16)
    assert with_bos[:, 0].tolist() == [7, 7, 7] and with_bos[1, 1:].tolist() == ids[15:30]
    with pytest.raises(ValueError, match="has 50 tokens.*needs 64.*at most 48"):
        probes.token_batches(ids, tokens=64, seq_len=16, batch_size=2)
    with pytest.raises(ValueError, match="less than one sequence"):
        probes.token_batches(ids, tokens=8, seq_len=16, batch_size=2)


def test_position_mask():
    toks = torch.zeros(2, 5, dtype=torch.long)
    assert probes.position_mask(toks).sum() == 8 and not probes.position_mask(toks)[:, 0].any()
    assert probes.position_mask(toks, "all").all()
    pad = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    assert probes.position_mask(toks, "skip_first", pad).sum().item() == 2 + 4
    with pytest.raises(ValueError, match="positions"):
        probes.position_mask(toks, "middle")


# --------------------------------------------------------------------------------------------------
# Tiny TaperedLM: every backend vs an independent computation from run_with_cache
# --------------------------------------------------------------------------------------------------

def cached_naive_table(model: TaperedLM, toks: torch.Tensor, skip_first: bool = True) -> dict:
    names = [f"blocks.{l}.{h}" for l in range(model.cfg.n_layers) for h in SITE_HOOKS.values()]
    with torch.no_grad():
        _, cache = model.run_with_cache(toks, names_filter=lambda n: n in names)
    out = {}
    for layer in range(model.cfg.n_layers):
        acts = {s: cache[f"blocks.{layer}.{h}"] for s, h in SITE_HOOKS.items()}
        torch.testing.assert_close(acts["resid_mid"] + acts["mlp_out"], acts["resid_post"])
        for m, v in naive_metrics(acts).items():
            out[(layer, m)] = (v[:, 1:] if skip_first else v).flatten()
    return out


@pytest.mark.parametrize("backend", probes.BACKENDS)
def test_tapered_lm_backends_match_run_with_cache(backend):
    model, toks = tiny_lm(), tiny_tokens()
    df = probes.probe_model(model, [toks[:1], toks[1:]], backend=backend)
    naive = cached_naive_table(model, toks)
    assert len(df) == 3 * len(METRIC_NAMES)
    for row in df.itertuples():
        want = naive[(row.layer, row.metric)]
        assert row.mean == pytest.approx(want.mean().item(), abs=1e-6), (row.layer, row.metric)
        assert row.std == pytest.approx(want.std().item(), abs=1e-6)
        assert row.n_tokens == 2 * 15 and row.n_nonfinite == 0
        assert row.ci_low < row.mean < row.ci_high
    hooks_left = sum(len(hp._forward_hooks) + len(hp._forward_pre_hooks) for hp in model.hook_dict.values())
    assert hooks_left == 0, "a backend left hooks on the model"


def test_float64_metric_math_and_padding_mask():
    model, toks = tiny_lm(), tiny_tokens()
    pad = torch.ones_like(toks)
    pad[1, 10:] = 0  # right padding: later positions of row 1 do not count
    df = probes.probe_model(model, [{"input_ids": toks, "attention_mask": pad}], backend="hookpoints",
                            dtype="float64", metrics=("rho_block",))
    naive = cached_naive_table(model, toks)
    for row in df.itertuples():
        per_token = naive[(row.layer, "rho_block")].reshape(2, 15)
        want = torch.cat([per_token[0], per_token[1, :9]])
        assert row.n_tokens == 15 + 9
        assert row.mean == pytest.approx(want.mean().item(), abs=1e-12)
    assert set(df.dtype) == {"float64"}


def test_positions_all_counts_first_token():
    model, toks = tiny_lm(), tiny_tokens()
    df = probes.probe_model(model, [toks], backend="torch", positions="all", metrics=("rho_mlp",))
    naive = cached_naive_table(model, toks, skip_first=False)
    assert (df.n_tokens == 32).all()
    assert df.iloc[0]["mean"] == pytest.approx(naive[(0, "rho_mlp")].mean().item(), abs=1e-6)


def test_unknown_architecture_error_names_it_and_the_fix():
    class WeirdLM(torch.nn.Module):
        def forward(self, x):
            return x

    with pytest.raises(ValueError, match="WeirdLM.*register_site_map"):
        probes.probe_model(WeirdLM(), [tiny_tokens()], backend="torch")
    with pytest.raises(ValueError, match="backend"):
        probes.probe_model(tiny_lm(), [tiny_tokens()], backend="jax")


# --------------------------------------------------------------------------------------------------
# Analysis options: reference="normed" (rho_mlp_normed) and exclude_massive_dims
# --------------------------------------------------------------------------------------------------

def tiny_model_with_gains(seed: int = 0, massive_dim: int | None = None) -> TaperedLM:
    """tiny_lm() with random ln2 gains (so 'incl. gain' matters) and optionally one planted massive dimension."""
    model = tiny_lm(seed)
    gen = torch.Generator().manual_seed(seed + 10)
    with torch.no_grad():
        for block in model.blocks:
            block.ln2.weight.copy_(torch.rand(block.ln2.weight.shape, generator=gen) * 2 + 0.1)
        if massive_dim is not None:
            model.embed.weight[:, massive_dim] += 40.0  # every token's stream carries a huge constant there
    return model


def naive_layer_acts(model: TaperedLM, toks: torch.Tensor) -> list[dict[str, torch.Tensor]]:
    """resid_pre/mid/post and mlp_out from run_with_cache; mlp_in recomputed as ln2(resid_mid) here."""
    with torch.no_grad():
        _, cache = model.run_with_cache(toks)
        acts = []
        for l, block in enumerate(model.blocks):
            a = {s: cache[f"blocks.{l}.hook_{s}"] for s in probes.SITES}
            a["mlp_in"] = block.ln2(a["resid_mid"])
            acts.append(a)
    return acts


@pytest.mark.parametrize("backend", probes.BACKENDS)
def test_reference_normed_adds_rho_mlp_normed_against_ln2_output(backend):
    model, toks = tiny_model_with_gains(), tiny_tokens()
    df = probes.probe_model(model, [toks], backend=backend, metrics=("rho_mlp",), reference="normed")
    assert set(df.metric) == {"rho_mlp", "rho_mlp_normed"} and set(df.reference_mode) == {"normed"}
    for l, a in enumerate(naive_layer_acts(model, toks)):
        want = F.cosine_similarity(a["mlp_out"].double(), a["mlp_in"].double(), dim=-1)[:, 1:]
        row = df[(df.layer == l) & (df.metric == "rho_mlp_normed")].iloc[0]
        assert row["mean"] == pytest.approx(want.mean().item(), abs=1e-6), (backend, l)
        assert row.reference == f"cos(blocks.{l}.hook_mlp_out, blocks.{l}.mlp.hook_in)"
        raw = df[(df.layer == l) & (df.metric == "rho_mlp")].iloc[0]["mean"]
        assert abs(raw - row["mean"]) > 1e-4  # the gain and the attention update make them differ
    assert "mlp_in=blocks.{l}.mlp input" in df.hook_sites.iloc[0]
    hooks_left = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    assert hooks_left == 0, "a backend left hooks on the model"


def test_default_table_is_unchanged_by_the_options():
    model, toks = tiny_lm(), tiny_tokens()
    df = probes.probe_model(model, [toks], backend="torch")
    assert set(df.metric) == set(METRIC_NAMES) and "rho_mlp_normed" not in METRIC_NAMES
    assert not {"reference_mode", "excluded_dims", "exclude_massive_dims"} & set(df.columns)
    assert "mlp_in" not in df.hook_sites.iloc[0]
    with pytest.raises(ValueError, match="reference='cooked'"):
        probes.probe_model(model, [toks], reference="cooked")
    for bad in (0, -2, [3, -1], "7", True):
        with pytest.raises(ValueError, match="exclude"):
            probes.probe_model(model, [toks], exclude_massive_dims=bad)
    with pytest.raises(ValueError, match="out of range for d_model=32"):
        probes.probe_model(model, [toks], exclude_massive_dims=[40])


@pytest.mark.parametrize("backend", probes.BACKENDS)
def test_given_excluded_dims_are_zeroed_in_every_operand(backend):
    model, toks = tiny_model_with_gains(), tiny_tokens()
    before = probes.probe_model(model, [toks], backend="hookpoints", metrics=("rho_mlp",))
    df = probes.probe_model(model, [toks], backend=backend, exclude_massive_dims=[7, 3], reference="normed")
    keep = [d for d in range(32) if d not in (3, 7)]
    for l, a in enumerate(naive_layer_acts(model, toks)):
        kept = {s: v[..., keep] for s, v in a.items()}
        want = {**naive_metrics(kept), "rho_mlp_normed": F.cosine_similarity(
            kept["mlp_out"].double(), kept["mlp_in"].double(), dim=-1)}
        for metric, values in want.items():
            row = df[(df.layer == l) & (df.metric == metric)].iloc[0]
            assert row["mean"] == pytest.approx(values[:, 1:].mean().item(), abs=1e-6), (backend, l, metric)
            assert row.reference.endswith("excluding d_model dims [3, 7]")
    assert set(df.excluded_dims) == {"[3, 7]"} and set(df.exclude_massive_dims) == {"given"}
    after = probes.probe_model(model, [toks], backend="hookpoints", metrics=("rho_mlp",))
    pd.testing.assert_series_equal(before["mean"], after["mean"])  # zeroing never touched the model's tensors


def test_exclude_massive_dims_k_finds_a_planted_dimension_on_a_first_pass():
    model, toks = tiny_model_with_gains(massive_dim=5), tiny_tokens()
    batches = [toks[:1], toks[1:]]
    scale = probes.residual_abs_mean(model, batches)
    acts = naive_layer_acts(model, toks)
    want = torch.stack([a["resid_pre"][:, 1:].abs().double().mean((0, 1)) for a in acts])  # [layer, d_model]
    torch.testing.assert_close(scale, want, rtol=1e-6, atol=1e-9)
    assert probes.massive_dims(model, batches, k=1) == [5]
    measured = probes.probe_model(model, iter(batches), backend="torch", exclude_massive_dims=1)  # an iterator: read twice
    given = probes.probe_model(model, batches, backend="torch", exclude_massive_dims=[5])
    plain = probes.probe_model(model, batches, backend="torch")
    assert set(measured.excluded_dims) == {"[5]"} and set(measured.exclude_massive_dims) == {1}
    assert float(measured.excluded_dims_mean_abs.iloc[0].strip("[]")) > 10 * measured.median_dim_mean_abs.iloc[0]
    assert measured["mean"].tolist() == pytest.approx(given["mean"].tolist(), abs=1e-7)
    # the planted constant dominates the raw stream: block_influence ~ 0 with it, clearly not without it
    bi = lambda d: d[d.metric == "block_influence"]["mean"].to_numpy()  # noqa: E731
    assert (bi(plain) < bi(measured)).all()


# --------------------------------------------------------------------------------------------------
# probe(): checkpoint dirs, text contract, table, save, CLI
# --------------------------------------------------------------------------------------------------

class CharTokenizer:
    """Stand-in HF-style tokenizer: one id per character (mod the tiny vocab)."""

    bos_token_id = 1

    def encode(self, text, add_special_tokens=False):
        assert add_special_tokens is False
        return [2 + ord(c) % (VOCAB - 2) for c in text]


@pytest.fixture
def tiny_run(tmp_path, tiny_checkpoint):
    run_dir = tiny_checkpoint("runs/tiny", config={"data": {}})
    text = tmp_path / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 3, encoding="utf-8")  # 135 chars
    return run_dir, text


def test_probe_on_checkpoint_dir_builds_the_tidy_table(tiny_run, tmp_path):
    run_dir, text = tiny_run
    df = probes.probe(str(run_dir), text=text, tokens=70, seq_len=16, batch_size=3, tokenizer=CharTokenizer(),
                      prepend_bos=True)
    assert set(df.metric) == set(METRIC_NAMES) and sorted(df.layer.unique()) == [0, 1, 2]
    first = df.iloc[0]
    assert (first.model, first.checkpoint, first.backend, first.n_layers) == ("tiny", str(run_dir), "torch", 3)
    assert df.depth.max() == 1.0 and df.depth.min() == 0.0
    assert (df.n_tokens == 4 * 15).all() and (df.n_sequences == 4).all()  # 70 // 16 = 4 sequences, BOS skipped
    assert first.text_source == str(text) and len(first.text_sha256) == 64 and first.prepend_bos
    ref = df[(df.layer == 2) & (df.metric == "rho_mlp")].reference.item()
    assert ref == "cos(blocks.2.hook_mlp_out, blocks.2.hook_resid_pre)"
    assert "torch=" in first.versions and first.mlp_out_site == "blocks.{l}.hook_mlp_out"
    expected = ["model", "checkpoint", "layer", "n_layers", "depth", "metric", "mean", "std", "sem", "sem_tokens",
                "ci_low", "ci_high", "ci_method", "q05", "q25", "q50", "q75", "q95", "n_tokens", "n_sequences",
                "n_nonfinite", "reference"]
    assert list(df.columns[:len(expected)]) == expected

    paths = probes.save_table(df, tmp_path / "out" / "t.parquet", csv=True)
    back = pd.read_parquet(paths[0])
    pd.testing.assert_frame_equal(back, df.reset_index(drop=True))
    assert pd.read_csv(paths[1]).shape == df.shape


def test_probe_rows_name_the_device_and_the_hardware(tiny_run):
    from interp._util.provenance import cpu_info

    run_dir, text = tiny_run
    df = probes.probe(str(run_dir), text=text, tokens=32, seq_len=16, tokenizer=CharTokenizer(), device="cpu")
    assert (df.device == "cpu").all() and df.hardware.nunique() == 1
    assert df.hardware.iloc[0].startswith(f"{cpu_info()['cpu']} ({cpu_info()['cores']} cores")
    assert list(df.columns[-3:]) == ["device", "hardware", "versions"]


def test_probe_rows_name_the_weights_and_the_tokenizer(tiny_run):
    """A checkpoint is identified by its weights' sha256 (a rerun at the same path with other weights no longer
    matches), and a tokenizer other than the model's own is named."""
    import hashlib

    run_dir, text = tiny_run
    df = probes.probe(str(run_dir), text=text, tokens=32, seq_len=16, tokenizer=CharTokenizer())
    expected = hashlib.sha256((run_dir / "model.safetensors").read_bytes()).hexdigest()
    assert set(df["weights_sha256"]) == {expected}
    assert set(df["tokenizer"]) == {"<CharTokenizer>"}
    passed_in = probes.probe(checkpoints.load_checkpoint(run_dir)[0], text=text, tokens=32, seq_len=16, tokenizer=CharTokenizer())
    assert set(passed_in["weights_sha256"]) == {""}        # an object's weights have no file to name


@pytest.mark.integration
@pytest.mark.skipif(not pretrained.REGISTRY["smollm2-135m"].installed(), reason="needs SmolLM2's package")
def test_a_folder_holding_one_gguf_probes_and_names_the_files_weights(tmp_path):
    """The folder, the .gguf file and the registry name are one model: one weights_sha256 (hashed after loading,
    so a folder is never read as a file)."""
    gguf = pretrained.REGISTRY["smollm2-135m"].locate()
    (tmp_path / "ggdir").mkdir()
    (tmp_path / "ggdir" / gguf.name).symlink_to(gguf)
    hashes = {spec: set(probes.probe(spec, tokens=32, seq_len=16, metrics=("rho_mlp",))["weights_sha256"])
              for spec in ("smollm2-135m", str(gguf), str(tmp_path / "ggdir"))}
    assert len({h for v in hashes.values() for h in v}) == 1 and all(len(next(iter(v))) == 64 for v in hashes.values())


def test_a_run_without_its_final_model_is_refused_with_the_reason(tiny_run, tmp_path):
    import shutil

    run_dir, text = tiny_run
    copy = tmp_path / "unfinished"
    shutil.copytree(run_dir, copy)
    (copy / "model.safetensors").unlink()
    with pytest.raises(Exception) as err:
        probes.probe(str(copy), text=text, tokens=32, seq_len=16, tokenizer=CharTokenizer())
    assert not isinstance(err.value, IsADirectoryError) and "model.safetensors" in str(err.value)


def test_model_device_reads_the_weights_of_a_module_or_its_model_attribute():
    from types import SimpleNamespace

    from interp._util.devices import model_device

    meta = torch.nn.Linear(2, 2, device="meta")  # a device other than cpu, without a GPU
    assert model_device(meta) == torch.device("meta")
    assert model_device(SimpleNamespace(model=meta, tokenizer=None)) == torch.device("meta")  # a LoadedModel's shape
    assert model_device(torch.nn.ReLU()) == torch.device("cpu")  # no weights: cpu
    assert model_device(object()) == torch.device("cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the device exists")
def test_probe_on_a_missing_gpu_fails_before_any_model_loads(tiny_run, monkeypatch):
    run_dir, text = tiny_run

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the device was checked")

    monkeypatch.setattr(checkpoints, "load_checkpoint", no_loading)
    with pytest.raises(InputError, match="device: 'cuda' asked for, but torch sees no CUDA device.*--device cpu"):
        probes.probe(str(run_dir), text=text, tokens=32, seq_len=16, tokenizer=CharTokenizer(), device="cuda")
    from interp.cli import main

    out = run_dir.parent / "batch.parquet"  # the batch refuses once, before any checkpoint, and writes nothing
    assert main(["batch", str(run_dir), "--out", str(out), "--device", "cuda:1"]) != 0 and not out.exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent device machine)")
def test_probe_on_gpu_matches_cpu(tiny_run):
    run_dir, text = tiny_run
    kw = dict(text=text, tokens=64, seq_len=16, tokenizer=CharTokenizer(), dtype="float64")
    cpu, gpu = (probes.probe(str(run_dir), device=d, **kw) for d in ("cpu", "cuda"))
    assert (gpu.device == "cuda:0").all() and gpu.hardware.iloc[0] == torch.cuda.get_device_name(0)
    np.testing.assert_allclose(gpu["mean"], cpu["mean"], rtol=1e-4, atol=1e-5)


def test_too_little_text_fails_before_any_model_loads(tiny_run, monkeypatch):
    run_dir, text = tiny_run

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the text length was checked")

    monkeypatch.setattr(checkpoints, "load_checkpoint", no_loading)
    monkeypatch.setattr(pretrained, "load_pretrained", no_loading)
    with pytest.raises(ValueError, match="has 135 tokens.*needs 160"):
        probes.probe(str(run_dir), text=text, tokens=160, seq_len=16, tokenizer=CharTokenizer())
    with pytest.raises(ValueError, match="train.tokenizer"):  # no tokenizer recorded, none given
        probes.probe(str(run_dir), text=text, tokens=32, seq_len=16)
    with pytest.raises(FileNotFoundError, match="no such file"):
        probes.probe(str(run_dir), text=text.with_name("missing.txt"))


def test_checkpoint_tokenizer_is_rebuilt_from_config_and_hash_checked(tmp_path, tiny_checkpoint):
    """A checkpoint's own tokenizer (config.json train.tokenizer) tokenizes the text; a hash mismatch is an error."""
    from interp import data

    words = "the quick brown fox jumps over lazy dog .".split()
    tok_file = word_tokenizer_json(tmp_path / "tokenizer.json", words)  # <|endoftext|> = 0, [UNK] = 1
    tok_hash = data.get_tokenizer(str(tok_file)).hash
    run_dir = tiny_checkpoint("run", config={"data": {"tokenizer_hash": tok_hash}}, tokenizer=tok_file)
    text = tmp_path / "t.txt"
    text.write_text("the quick brown fox jumps over the lazy dog . " * 4, encoding="utf-8")  # 40 words
    df = probes.probe(str(run_dir), text=text, tokens=32, seq_len=16, batch_size=2, prepend_bos=True,
                      metrics=("rho_mlp",))
    assert (df.n_tokens == 2 * 15).all()  # BOS = the tokenizer's separator <|endoftext|>
    tiny_checkpoint(run_dir, config={"data": {"tokenizer_hash": "0" * 16}}, tokenizer=tok_file)
    with pytest.raises(ValueError, match="tokenizer_hash"):
        probes.probe(str(run_dir), text=text, tokens=32, seq_len=16)


def test_cli_probe_writes_table_and_prints_summary(tiny_run, tmp_path, capsys, monkeypatch):
    from interp.cli import build_parser
    from interp.cli import probe as cli_probe

    run_dir, text = tiny_run
    monkeypatch.setattr("interp.data.get_tokenizer", lambda name: CharTokenizer())
    out = tmp_path / "res" / "x.parquet"
    args = build_parser().parse_args(["probe", "--model", str(run_dir), "--text", str(text), "--tokens", "32",
                                      "--seq-len", "16", "--batch-size", "2", "--backend", "hookpoints",
                                      "--tokenizer", "chars", "--out", str(out), "--csv"])
    assert cli_probe.probe_config(args).backend == "hookpoints"
    assert args.func(args) == 0
    printed = capsys.readouterr().out
    assert "rho_mlp" in printed and "rho_block" in printed and printed.count("\n") >= 3 + 3
    assert out.exists() and out.with_suffix(".csv").exists()
    assert set(pd.read_parquet(out).backend) == {"hookpoints"}
    with pytest.raises(SystemExit) as exit_info:  # --backend's choices come from ProbeConfig
        build_parser().parse_args(["probe", "--model", str(run_dir), "--backend", "jax"])
    assert exit_info.value.code == 2 and "choose from" in capsys.readouterr().err
    from interp.cli import main  # the error contract (one line, exit 2) is main's, not each command's

    assert main(["probe", "--model", str(run_dir), "--text", str(text), "--metrics", "rho_x", "--tokenizer",
                 "chars", "--out", str(out)]) == 2 and "rho_x" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# Integration: SmolLM2
# --------------------------------------------------------------------------------------------------

INTEGRATION_TOKENS, INTEGRATION_SEQ = 256, 128


@pytest.fixture(scope="module")
def smol():
    return pretrained.load_pretrained("smollm2-135m")


@pytest.fixture(scope="module")
def smol_batches(smol):
    text, _ = probes.load_text(None)
    ids = probes.encode_text(smol.tokenizer, text[:20_000])
    return probes.token_batches(ids, INTEGRATION_TOKENS, INTEGRATION_SEQ, batch_size=2)


@pytest.fixture(scope="module")
def smol_tables(smol, smol_batches):
    return {b: probes.probe_model(smol, smol_batches, backend=b) for b in ("torch", "transformer_lens", "nnsight")}


@pytest.mark.integration
def test_smollm2_backends_agree(smol_tables):
    ref = table_means(smol_tables["torch"])
    assert len(ref) == 30 * len(METRIC_NAMES)
    for backend in ("transformer_lens", "nnsight"):
        other = table_means(smol_tables[backend])
        for key, value in ref.items():
            assert other[key] == pytest.approx(value, abs=1e-5), (backend, key)
    gemma_free = smol_tables["torch"].iloc[0]
    assert gemma_free.mlp_out_site.startswith("mlp output")
    assert "post_attention_layernorm input" in gemma_free.hook_sites


@pytest.mark.integration
def test_smollm2_streaming_equals_naive_full_activations(smol, smol_batches, smol_tables):
    """Capture whole activations with hooks written here (module names, not the SiteMap) and compare."""
    layers = smol.model.model.layers
    values: dict[tuple[int, str], list[torch.Tensor]] = {}
    for batch in smol_batches:
        acts: dict[tuple[int, str], torch.Tensor] = {}
        handles = []
        for l, layer in enumerate(layers):
            handles += [
                layer.register_forward_pre_hook(lambda m, a, k, l=l: acts.__setitem__((l, "resid_pre"), a[0] if a else k["hidden_states"]), with_kwargs=True),
                layer.post_attention_layernorm.register_forward_pre_hook(lambda m, a, l=l: acts.__setitem__((l, "resid_mid"), a[0])),
                layer.mlp.register_forward_hook(lambda m, a, o, l=l: acts.__setitem__((l, "mlp_out"), o)),
                layer.register_forward_hook(lambda m, a, o, l=l: acts.__setitem__((l, "resid_post"), o[0] if isinstance(o, tuple) else o)),
            ]
        try:
            with torch.no_grad():
                smol.model(batch)
        finally:
            for h in handles:
                h.remove()
        for l in range(len(layers)):
            a = {s: acts[(l, s)] for s in ("resid_pre", "resid_mid", "mlp_out", "resid_post")}
            torch.testing.assert_close(a["resid_mid"] + a["mlp_out"], a["resid_post"], rtol=0, atol=1e-5)
            a["attn_out"] = a["resid_mid"] - a["resid_pre"]
            for m, v in naive_metrics(a).items():
                values.setdefault((l, m), []).append(v[:, 1:].flatten())
    streamed = table_means(smol_tables["torch"])
    for key, chunks in values.items():
        assert streamed[key] == pytest.approx(torch.cat(chunks).mean().item(), abs=1e-5), key


@pytest.mark.integration
def test_smollm2_rho_mlp_normed_backends_agree_with_post_attention_layernorm_output(smol, smol_batches):
    """On Llama the MLP reads post_attention_layernorm(resid_mid); every backend must find that input."""
    tables = {b: probes.probe_model(smol, smol_batches[:1], backend=b, metrics=("rho_mlp_normed",))
              for b in ("torch", "transformer_lens", "nnsight")}
    layers = smol.model.model.layers
    acts: dict[tuple[int, str], torch.Tensor] = {}
    handles = [h for l, layer in enumerate(layers) for h in (
        layer.post_attention_layernorm.register_forward_hook(lambda m, a, o, l=l: acts.__setitem__((l, "in"), o)),
        layer.mlp.register_forward_hook(lambda m, a, o, l=l: acts.__setitem__((l, "out"), o)))]
    try:
        with torch.no_grad():
            smol.model(smol_batches[0])
    finally:
        for h in handles:
            h.remove()
    for backend, df in tables.items():
        got = table_means(df)
        for l in range(len(layers)):
            want = F.cosine_similarity(acts[(l, "out")].double(), acts[(l, "in")].double(), dim=-1)[:, 1:].mean()
            assert got[(l, "rho_mlp_normed")] == pytest.approx(want.item(), abs=1e-5), (backend, l)


@pytest.mark.integration
def test_smollm2_too_little_text_fails_before_loading(monkeypatch, tmp_path):
    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded before the text length was checked")

    monkeypatch.setattr(pretrained, "load_pretrained", no_loading)
    short = tmp_path / "short.txt"
    short.write_text("Only a few words here.", encoding="utf-8")
    with pytest.raises(ValueError, match="the text has \\d+ tokens"):
        probes.probe("smollm2-135m", text=short, tokens=256, seq_len=128)


@pytest.mark.integration
def test_gemma3_mlp_out_is_the_post_feedforward_norm_output_in_every_backend():
    """Gemma3's sandwich norms: the SiteMap's mlp_out (post_feedforward_layernorm output) must equal
    TransformerLens's hook_mlp_out, and the derived attn_out its hook_attn_out."""
    if not pretrained.REGISTRY["gemma3-270m"].installed():
        pytest.skip("gemma3-270m is not installed: " + pretrained.REGISTRY["gemma3-270m"].pip_command)
    lm = pretrained.load_pretrained("gemma3-270m")
    text, _ = probes.load_text(None)
    batches = probes.token_batches(probes.encode_text(lm.tokenizer, text[:5_000]), 128, 64, batch_size=2)
    tables = {b: probes.probe_model(lm, batches, backend=b) for b in ("torch", "transformer_lens")}
    ref, other = table_means(tables["torch"]), table_means(tables["transformer_lens"])
    assert len(ref) == 18 * len(METRIC_NAMES)
    for key, value in ref.items():
        assert other[key] == pytest.approx(value, abs=1e-5), key
    assert tables["torch"].iloc[0].mlp_out_site.startswith("post_feedforward_layernorm output")


# --------------------------------------------------------------------------------------------------
# ProbeConfig: one declaration of every probe option
# --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("field, value, message", [
    ("backend", "jax", r"backend='jax': choose one of \('torch', 'transformer_lens', 'nnsight', 'hookpoints'\)"),
    ("positions", "middle", r"positions='middle': choose one of \('skip_first', 'all'\)"),
    ("dtype", "float16", r"dtype='float16': choose one of \('float32', 'float64'\)"),
    ("reference", "cooked", r"reference='cooked': choose one of \('raw', 'normed'\)"),
    ("metrics", ("rho_mlp", "rho_x"), r"metrics=\['rho_mlp', 'rho_x'\]: choose a non-empty subset of \['rho_mlp'"),
    ("metrics", (), "non-empty subset"),
    ("exclude_massive_dims", 0, "exclude_massive_dims=0: give k >= 1"),
    ("exclude_massive_dims", (3, -1), "indices must be >= 0"),
    ("exclude_massive_dims", "3", "expected a list of d_model indices"),
    ("tokens", 1, "tokens=1 is less than one sequence"),
    ("batch_size", 0, "batch_size >= 1"),
    ("tokenizer", CharTokenizer(), "tokenizer=.*a name for interp.data.get_tokenizer"),
    ("device", "gpu", "device='gpu': write cpu, cuda or cuda:N"),
    ("device", "cuda:x", "device='cuda:x': write cpu, cuda or cuda:N"),
])
def test_probe_config_validation_names_the_field_and_the_allowed_values(field, value, message):
    cfg = probes.ProbeConfig(**{field: value})
    with pytest.raises(ValueError, match=message):
        cfg.validate()
    if field != "tokenizer":  # probe() takes a tokenizer object as given; ProbeConfig holds names only
        with pytest.raises(ValueError, match=message):  # before any text or model is touched
            probes.probe(tiny_lm(), **{field: value})


def test_probe_config_dict_round_trip_and_unknown_keys():
    cfg = probes.ProbeConfig(tokens=64, seq_len=32, metrics=["rho_mlp"], exclude_massive_dims=[17, 3],
                             reference="normed")
    assert cfg.metrics == ("rho_mlp",) and cfg.exclude_massive_dims == (17, 3)  # lists normalised to tuples
    d = cfg.to_dict()
    assert d["metrics"] == ["rho_mlp"] and d["exclude_massive_dims"] == [17, 3]
    assert probes.ProbeConfig.from_dict(json.loads(json.dumps(d))) == cfg
    with pytest.raises(ValueError, match=r"unknown keys \['tokenz'\].*known keys are"):
        probes.ProbeConfig.from_dict({**d, "tokenz": 3})
    with pytest.raises(TypeError, match=r"unknown probe options \['tokenz'\]"):
        probes.probe(tiny_lm(), tokenz=3)
    assert probes.ProbeConfig().validate() == probes.ProbeConfig()  # the defaults are valid


def test_parse_exclude_dims():
    from interp.probes.config import parse_exclude_dims

    assert parse_exclude_dims("3") == 3 and parse_exclude_dims("17,247") == [17, 247]
    assert parse_exclude_dims("17,") == [17] and parse_exclude_dims(" 5 , 6 ") == [5, 6]
    for bad in ("", "x", "3,-1", "1.5"):
        with pytest.raises(ValueError, match="--exclude-massive-dims"):
            parse_exclude_dims(bad)


def test_probe_takes_a_config_or_keywords_with_the_same_result(tiny_run):
    run_dir, text = tiny_run
    options = dict(tokens=32, seq_len=16, batch_size=2, metrics=("rho_mlp", "rho_block"), reference="normed")
    by_keywords = probes.probe(str(run_dir), text=text, tokenizer=CharTokenizer(), **options)
    cfg = probes.ProbeConfig(text=str(text), **options)
    by_config = probes.probe(str(run_dir), config=cfg, tokenizer=CharTokenizer())
    # keywords replace the config's fields: here a config with other tokens, overridden back
    overridden = probes.probe(str(run_dir), text=text, config=dataclasses.replace(cfg, tokens=64, text=None),
                              tokens=32, tokenizer=CharTokenizer())
    for df in (by_config, overridden):
        pd.testing.assert_frame_equal(df.drop(columns="versions"), by_keywords.drop(columns="versions"))
    assert set(by_keywords.metric) == {"rho_mlp", "rho_block", "rho_mlp_normed"}


def probe_flags(command: str) -> set[str]:
    """The option strings of one subcommand whose destination is a ProbeConfig field."""
    from interp.cli import build_parser
    from interp.probes.config import ProbeConfig

    fields = {f.name for f in dataclasses.fields(ProbeConfig)}
    sub = next(a for a in build_parser()._actions if getattr(a, "choices", None) and command in a.choices)
    return {s for a in sub.choices[command]._actions if a.dest in fields for s in a.option_strings}


def test_probe_and_batch_flags_are_generated_from_probe_config(monkeypatch):
    from interp.cli import build_parser
    from interp.cli.batch import config_from_args
    from interp.cli.probe import probe_config
    from interp.probes import config

    expected = {"--text", "--tokens", "--seq-len", "--batch-size", "--backend", "--positions", "--prepend-bos",
                "--no-prepend-bos", "--dtype", "--metrics", "--reference", "--exclude-massive-dims", "--eps",
                "--tokenizer", "--device", "--causal", "--no-causal", "--causal-tokens",
                "--causal-method", "--model-dtype", "--device-map"}
    assert probe_flags("probe") == probe_flags("batch") == expected
    # defaults: probe's are ProbeConfig's, batch's its own tokens / seq_len; both parse every flag the same way
    assert probe_config(build_parser().parse_args(["probe"])) == config.ProbeConfig()
    batch_cfg = config_from_args(build_parser().parse_args(["batch", "x"]))
    assert batch_cfg.probe == config.ProbeConfig(tokens=2048)   # seq_len: fitted to the models (256 at most)
    flags = ["--reference", "normed", "--exclude-massive-dims", "17,3", "--metrics", "rho_mlp,rho_block",
             "--prepend-bos", "--tokens", "64"]
    from_probe = probe_config(build_parser().parse_args(["probe", *flags]))
    from_batch = config_from_args(build_parser().parse_args(["batch", "x", *flags])).probe
    assert from_probe == from_batch == config.ProbeConfig(
        tokens=64, reference="normed", exclude_massive_dims=(17, 3), metrics=("rho_mlp", "rho_block"),
        prepend_bos=True)

    # a field added to ProbeConfig becomes a flag of both commands at once
    @dataclasses.dataclass
    class Extended(config.ProbeConfig):
        shiny_new: int = config.option(7, "a new probe option")

    monkeypatch.setattr(config, "ProbeConfig", Extended)
    assert probe_flags("probe") == probe_flags("batch") == expected | {"--shiny-new"}
