"""Causal importance of each layer (interp.ablations.layers, interp.causal) and its place in
the probe table: deltas against a float64 forward written out by hand, the join with the correlational rows,
`interp probe --causal` and `interp batch --causal`, and the bootstrap Spearman against a naive computation."""

from __future__ import annotations

import copy
import math
import random

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from interp import ablations as ab
from interp import causal as ct   # the causal rows, joined one layer above probes and ablations
from interp import probes
from interp._util.errors import InputError
from interp.cli import main
from interp.stats import bootstrap_spearman
from tests.factories import random_tokens, tiny_hf, tiny_lm, word_tokenizer, word_tokenizer_json

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
PROBE = ["--tokens", "64", "--seq-len", "16", "--batch-size", "2"]


def _by_hand(model, tokens: torch.Tensor, layer: int | None = None, kind: str = "",
             mean: torch.Tensor | None = None) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(per-sequence mean CE, every layer's MLP output) of a float64 copy of a TaperedLM, the forward written
    out block by block, with layer `layer`'s MLP zeroed / set to `mean`, its attention zeroed, or the whole block
    removed (its input passed on unchanged)."""
    m = copy.deepcopy(model).double()
    x = m.embed(tokens)
    mlp_outs = []
    for l, block in enumerate(m.blocks):
        if l == layer and kind == "skip_block":
            mlp_outs.append(block.mlp(block.ln2(x + block.attn(block.ln1(x)))))  # the clean MLP output (unused)
            continue
        a = block.attn(block.ln1(x))
        if l == layer and kind == "skip_attn":
            a = torch.zeros_like(a)
        mid = x + a
        f = block.mlp(block.ln2(mid))
        if l == layer and kind == "skip_mlp":
            f = torch.zeros_like(f)
        if l == layer and kind == "mean_mlp":
            f = mean.expand_as(f)
        mlp_outs.append(f)
        x = mid + f
    logits = m.unembed(m.ln_final(x))
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    return ce.view(tokens.shape[0], -1).mean(1), mlp_outs


@pytest.mark.parametrize("positions", ["skip_first", "all"])
def test_deltas_match_a_float64_forward_by_hand(positions):
    model = tiny_lm(init_std=0.2)
    tokens = random_tokens(64, batch=5, pos=16)
    effects = ab.layer_effects(model, list(tokens.split(2)), positions=positions)
    clean, mlp_outs = _by_hand(model, tokens)
    start = 1 if positions == "skip_first" else 0
    means = [f[:, start:].mean((0, 1)) for f in mlp_outs]
    assert effects.mean_tokens == 5 * (16 - start) and effects.predicted == 15 and effects.n_sequences == 5
    torch.testing.assert_close(effects.mlp_means, torch.stack(means), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(effects.clean, clean, atol=1e-5, rtol=0)
    for kind in ab.CAUSAL_KINDS:
        for layer in range(3):
            ablated, _ = _by_hand(model, tokens, layer, kind, means[layer])
            torch.testing.assert_close(effects.deltas(kind)[layer], ablated - clean, atol=2e-5, rtol=0)
    assert effects.deltas("skip_mlp").abs().max() > 1e-3  # the ablations do something measurable


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Gemma3ForCausalLM", "GPT2LMHeadModel"])
def test_hf_skips_match_zeroed_weights_in_float64(arch):
    """Skipping through the adapter table's modules = zeroing the down / attention-output projection."""
    model = tiny_hf(arch, initializer_range=0.2)
    tokens = random_tokens(64, batch=4, pos=12)
    effects = ab.layer_effects(model, list(tokens.split(2)))
    down, attn_out = {"GPT2LMHeadModel": ("mlp.c_proj", "attn.c_proj")}.get(arch, ("mlp.down_proj", "self_attn.o_proj"))
    layers = "transformer.h" if arch == "GPT2LMHeadModel" else "model.layers"

    def losses(zero: str | None = None, layer: int = 0) -> torch.Tensor:
        m = copy.deepcopy(model).double()
        if zero is not None:
            proj = m.get_submodule(f"{layers}.{layer}.{zero}")
            for p in proj.parameters():
                p.data.zero_()
        with torch.no_grad():
            logits = m(tokens).logits
        ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
        return ce.view(tokens.shape[0], -1).mean(1)

    def without_layer(layer: int) -> torch.Tensor:
        """Plain HF, float64: the layer deleted from the ModuleList (HF's own layer-drop), no hook anywhere."""
        m = copy.deepcopy(model).double()
        stack = m.get_submodule(layers)
        kept = [block for i, block in enumerate(stack) if i != layer]
        stack._modules.clear()
        for i, block in enumerate(kept):
            stack.add_module(str(i), block)
        with torch.no_grad():
            logits = m(tokens).logits
        ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
        return ce.view(tokens.shape[0], -1).mean(1)

    clean = losses()
    torch.testing.assert_close(effects.clean, clean, atol=1e-5, rtol=0)
    for kind, proj in (("skip_mlp", down), ("skip_attn", attn_out)):
        for layer in range(3):
            torch.testing.assert_close(effects.deltas(kind)[layer], losses(proj, layer) - clean, atol=2e-5, rtol=0)
    for layer in range(3):  # the block removed = the model rebuilt without that layer
        torch.testing.assert_close(effects.deltas("skip_block")[layer], without_layer(layer) - clean, atol=2e-5,
                                   rtol=0)


def test_hooks_are_removed_and_kinds_are_checked():
    model = tiny_lm()
    tokens = random_tokens(64)
    before = model(tokens)
    ab.layer_effects(model, [tokens])
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)
    with pytest.raises(ValueError, match="skip_mlp"):
        ab.layer_effects(model, [tokens], kinds=("skip_everything",))
    with pytest.raises(ValueError, match="means="), ab.layer_ablated(model, "mean_mlp", 0):
        pass
    with pytest.raises(RuntimeError), ab.layer_ablated(model, "skip_attn", 1):
        raise RuntimeError("inside")
    torch.testing.assert_close(model(tokens), before, atol=0, rtol=0)


# ------------------------------------------------------------------------------------------ the table


@pytest.fixture
def checkpoint(tmp_path, tiny_checkpoint):
    """(checkpoint dir with a word-level tokenizer, a text file long enough for 64 tokens)."""
    tok = word_tokenizer_json(tmp_path / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    model = tiny_lm(vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=16, init_std=0.2)
    run = tiny_checkpoint(tmp_path / "run", model, tokenizer=tok)
    text = tmp_path / "text.txt"
    rng = random.Random(0)
    text.write_text(" ".join(rng.choice(WORDS) for _ in range(400)))
    return run, text


def test_population_metrics_beside_causal_rows_get_rows_but_no_sequence_profile(checkpoint):
    """erank / participation / CKA have no per-sequence value: the causal pass profiles the per-token metrics only
    (it used to fail with KeyError: 'mlp_erank')."""
    run, text = checkpoint
    metrics = ("rho_mlp", "mlp_erank", "mlp_participation", "cka_resid")
    df = ct.probe(str(run), text=text, tokens=64, seq_len=16, batch_size=2, causal=True, metrics=metrics)
    assert set(metrics) <= set(df["metric"]) and set(ab.CAUSAL_METRICS.values()) <= set(df["metric"])
    _, profiles = ct.causal_data(df)
    assert list(profiles) == ["rho_mlp"]
    only = ct.probe(str(run), text=text, tokens=64, seq_len=16, batch_size=2, causal=True, metrics=("cka_resid",))
    assert ct.causal_data(only)[1] == {} and ct.correlations(*ct.causal_data(only), n_boot=10).empty


def test_causal_rows_join_the_correlational_rows(checkpoint):
    run, text = checkpoint
    df = ct.probe(str(run), text=text, tokens=64, seq_len=16, batch_size=2, causal=True)
    metrics = list(dict.fromkeys(df["metric"]))
    assert metrics == [*probes.METRIC_NAMES, *ab.CAUSAL_METRICS.values()]
    causal = df[df["metric"].isin(ab.CAUSAL_METRICS.values())]
    corr = df[~df.index.isin(causal.index)]
    assert len(causal) == 4 * 3 and list(causal.columns[:len(probes.TABLE_COLUMNS)]) == list(probes.TABLE_COLUMNS)
    settings = [c for c in corr.columns if corr[c].notna().all() and corr[c].nunique() == 1
                and c not in ("reference", "hook_sites", "ci_method", "n_sequences")]
    assert {"model", "checkpoint", "text_sha256", "positions", "seq_len", "backend", "versions"} <= set(settings)
    for column in settings:  # everything that says which run it is, equal on both kinds of rows
        assert (causal[column] == corr[column].iloc[0]).all(), column
    assert set(causal["n_tokens"]) == {4 * 15} and set(causal["n_sequences"]) == {4} == set(corr["n_sequences"])
    assert set(causal["ci_method"]) == {ct.CAUSAL_CI} != set(corr["ci_method"])  # each says how its CI was made
    assert causal["reference"].str.contains("mean over the 60 probe tokens").any()
    assert (causal["ci_low"] <= causal["mean"]).all() and (causal["mean"] <= causal["ci_high"]).all()
    wide = ct.joined(df)
    assert len(wide) == 3 and list(wide["layer"]) == [0, 1, 2] and not wide[metrics].isna().any().any()
    assert set(ct.JOIN_KEYS) <= set(wide.columns)
    # the per-sequence data behind the bootstrap: its means are the table's means
    effects, profiles = ct.causal_data(df)
    for metric, values in profiles.items():
        assert values.shape == (3, 4)
        np.testing.assert_allclose(values.mean(1), corr[corr.metric == metric].sort_values("layer")["mean"], atol=1e-6)
    np.testing.assert_allclose(effects.deltas("skip_mlp").mean(1).numpy(),
                               causal[causal.metric == "delta_loss_skip_mlp"]["mean"], atol=1e-12)
    table = ct.correlations(effects, profiles, n_boot=50)
    assert len(table) == len(profiles) * len(ab.CAUSAL_KINDS)
    assert table["spearman_rho"].between(-1, 1).all() and set(table["n_sequences"]) == {4}
    # the same rows, each with what produced it (what novelty_vs_causal and importance_measures write)
    stamped = ct.correlation_table(df, n_boot=50)
    pd.testing.assert_frame_equal(stamped[list(table.columns)], table)
    for column in ("model", "text_sha256", "n_tokens", "dtype", "hardware"):
        assert (stamped[column] == df[column].iloc[0]).all(), column
    assert set(stamped["checkpoint"]) == {str(df["checkpoint"].iloc[0])} and set(stamped["dtype"]) == {"float32"}
    bare = corr.copy()
    bare.attrs = {}
    with pytest.raises(ValueError, match=r"interp\.causal\.probe\(\.\.\., causal=True\)"):
        ct.causal_data(bare)


def test_probes_alone_refuse_causal_naming_interp_causal(checkpoint, tmp_path):
    """interp.probes cannot import interp.ablations (which imports probes): causal=True through probes alone is
    refused before any load, naming interp.causal; interp.causal.probe reads causal from the keyword over config."""
    run, text = checkpoint
    with pytest.raises(InputError, match=r"causal=True: .*interp\.causal\.probe .*`interp probe --causal`"):
        probes.probe(str(tmp_path / "no-such-model"), text=text, causal=True)   # no file is read
    with pytest.raises(InputError, match=r"interp\.causal\.run_batch .*`interp batch --causal`"):
        probes.BatchRunner(probes.BatchConfig.build(paths=[str(run)], text=str(text), out=str(tmp_path / "b.parquet"),
                                                    causal=True))
    plain = ct.probe(str(run), text=text, config=probes.ProbeConfig(causal=True), causal=False, tokens=64, seq_len=16,
                     batch_size=2, metrics=("rho_mlp",))
    assert not plain["metric"].str.startswith("delta_loss").any() and "causal" not in plain.attrs


def test_hf_directory_with_the_nnsight_backend(tmp_path, save_pretrained_dir):
    """A save_pretrained directory (Gemma3: sandwich norms) through the adapter table, another backend."""
    path = save_pretrained_dir(tmp_path / "gemma", tiny_hf("Gemma3ForCausalLM"),
                               word_tokenizer(64, bos_token="[UNK]", eos_token="[UNK]"))
    text = tmp_path / "t.txt"
    text.write_text(" ".join(f"w{(i * 7) % 63 + 1}" for i in range(200)))
    df = ct.probe(str(path), text=text, tokens=48, seq_len=12, batch_size=2, causal=True, backend="nnsight",
                      metrics=("rho_mlp",))
    causal = df[df.metric.str.startswith("delta_loss")]
    assert len(causal) == 4 * 3 and set(causal["backend"]) == {"nnsight"}
    assert causal["hook_sites"].str.contains("post_feedforward_layernorm").any()


def test_cli_probe_causal_on_a_checkpoint(checkpoint, tmp_path, capsys):
    run, text = checkpoint
    out = tmp_path / "p.parquet"
    assert main(["probe", "--model", str(run), "--text", str(text), *PROBE, "--causal", "--out", str(out)]) == 0
    df = pd.read_parquet(out)
    assert set(ab.CAUSAL_METRICS.values()) <= set(df["metric"])
    direct = ct.probe(str(run), text=text, tokens=64, seq_len=16, batch_size=2, causal=True)
    pd.testing.assert_series_equal(df["mean"], direct["mean"], check_exact=False, atol=1e-12)
    effects, profiles = ct.causal_data(df)   # parquet keeps the per-sequence data
    assert effects.n_layers == 3 and effects.n_sequences == 4 and set(profiles) == set(probes.METRIC_NAMES)
    assert main(["probe", "--model", str(run), "--text", str(text), *PROBE, "--out", str(out)]) == 0
    assert not pd.read_parquet(out)["metric"].str.startswith("delta_loss").any()  # opt-in


def test_cli_batch_causal_and_the_settings_key(checkpoint, tmp_path):
    run, text = checkpoint
    out = tmp_path / "b.parquet"
    common = [str(run), "--text", str(text), *PROBE, "--no-progress", "--out", str(out)]
    assert main(["batch", *common]) == 0
    plain = pd.read_parquet(out)
    assert main(["batch", *common, "--causal"]) == 0   # another setting: probed again, into the same table
    rows = pd.read_parquet(out)
    assert rows["settings_hash"].nunique() == 2 and set(rows["status"]) == {"ok"}
    causal = rows[rows.metric.str.startswith("delta_loss")]
    assert len(causal) == 4 * 3 and causal["settings_hash"].nunique() == 1
    # causal=False is not in the settings: tables written before the field keep their keys
    cfg = probes.BatchConfig.build(paths=[str(run)], text=str(text))
    assert "causal" not in cfg.settings("x")
    assert plain["settings_hash"].iloc[0] in set(rows["settings_hash"])


# ------------------------------------------------------------------------------------------ bootstrap Spearman


def _naive_spearman(a: list[float], b: list[float]) -> float:
    def ranks(v: list[float]) -> list[float]:
        return [sum(w < x for w in v) + (sum(w == x for w in v) + 1) / 2 for x in v]
    ra, rb = ranks(a), ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((p - ma) * (q - mb) for p, q in zip(ra, rb))
    var = math.sqrt(sum((p - ma) ** 2 for p in ra) * sum((q - mb) ** 2 for q in rb))
    return cov / var if var else math.nan


def _naive_percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q / 100 * (len(s) - 1)
    lo = math.floor(pos)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (pos - lo)


def test_bootstrap_spearman_matches_a_naive_computation():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5)) + np.arange(5)          # 7 sequences, 5 layers: x rises with depth
    y = rng.normal(size=(7, 5)) - 0.5 * np.arange(5)
    y[:, 2] = y[:, 1]                                    # a tie in some draws
    rho, low, high = bootstrap_spearman(x, y, n_boot=300, confidence=0.9, seed=11)

    def col_means(m: np.ndarray, rows) -> list[float]:
        return [sum(m[r][j] for r in rows) / len(rows) for j in range(m.shape[1])]

    assert rho == pytest.approx(_naive_spearman(col_means(x, range(7)), col_means(y, range(7))), abs=1e-12)
    idx = np.random.default_rng(11).integers(0, 7, (300, 7))
    draws = [_naive_spearman(col_means(x, list(i)), col_means(y, list(i))) for i in idx]
    draws = [d for d in draws if not math.isnan(d)]
    assert low == pytest.approx(_naive_percentile(draws, 5), abs=1e-12)
    assert high == pytest.approx(_naive_percentile(draws, 95), abs=1e-12)
    assert -1 <= low <= high <= 1


def test_bootstrap_spearman_edges():
    x = np.arange(4.0)[None, :]
    assert bootstrap_spearman(x, -x)[0] == pytest.approx(-1.0)
    assert all(math.isnan(v) for v in bootstrap_spearman(x, -x)[1:])        # one sequence: no interval
    with pytest.raises(ValueError, match="n_units, n_points"):
        bootstrap_spearman(np.zeros((3, 4)), np.zeros((3, 5)))
    same = np.tile(np.arange(4.0), (5, 1))
    assert bootstrap_spearman(same, same, n_boot=20) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(1.0))


# ------------------------------------------------------------------------------------------ analysis and figure


def test_novelty_vs_causal_compute_and_render(checkpoint, tmp_path, capsys):
    import json

    from analyses import novelty_vs_causal as nvc
    from interp.probes.config import ProbeConfig

    run, text = checkpoint
    (run / "result.json").write_text(json.dumps({"status": "done"}))
    small = ProbeConfig(text=str(text), tokens=64, seq_len=16, batch_size=2, backend="hookpoints")  # causal: compute's
    cfg = nvc.Config(models=(), run_dirs=(str(run), str(tmp_path / "not-trained")), tiny_probe=small, n_boot=50)
    figures = tmp_path / "fig"
    nvc.compute(cfg, figures)
    assert "skip" in capsys.readouterr().out   # the missing run is named, the rest measured
    summary = pd.read_csv(figures / nvc.TABLE)
    layers = pd.read_csv(figures / nvc.LAYERS_TABLE)
    assert set(summary["label"]) == {"run"} and len(summary) == len(probes.METRIC_NAMES) * len(ab.CAUSAL_KINDS)
    assert set(ab.CAUSAL_METRICS.values()) <= set(layers["metric"]) and set(layers["d_mlp"]) == {48, 32, 16}
    assert (figures / "novelty_vs_causal.meta.json").is_file()
    [png] = nvc.render(figures)
    assert png.name == nvc.FIGURE and png.stat().st_size > 10_000


def test_plot_names_a_missing_metric():
    from interp.plots import plot_novelty_vs_causal

    layers = pd.DataFrame({"label": "m", "layer": [0, 1], "depth": [0.0, 1.0], "metric": "rho_mlp", "mean": [0.1, 0.2],
                           "ci_low": [0.0, 0.1], "ci_high": [0.2, 0.3]})
    corr = pd.DataFrame({"label": ["m"], "measure": ["rho_mlp"], "causal": ["delta_loss_skip_mlp"],
                         "spearman_rho": [0.5], "ci_low": [0.1], "ci_high": [0.9]})
    with pytest.raises(ValueError, match="delta_loss_skip_mlp"):
        plot_novelty_vs_causal(layers, corr)
    both = pd.concat([layers, layers.assign(metric="delta_loss_skip_mlp", mean=[1.0, 0.01])], ignore_index=True)
    fig = plot_novelty_vs_causal(both, corr)
    assert "+0.50 [+0.10, +0.90]" in fig.axes[0].get_title()


@pytest.mark.integration
def test_registry_name_and_gguf_file_give_the_same_causal_rows():
    from interp import hf

    if not hf.REGISTRY["smollm2-135m"].installed():
        pytest.skip(hf.REGISTRY["smollm2-135m"].pip_command)
    tables = [ct.probe(spec, tokens=64, seq_len=32, batch_size=2, metrics=("rho_mlp",), causal=True)
              for spec in ("smollm2-135m", str(hf.REGISTRY["smollm2-135m"].locate()))]
    rows = [t[t.metric.str.startswith("delta_loss")].reset_index(drop=True) for t in tables]
    assert len(rows[0]) == 4 * 30 and rows[0]["mean"].abs().max() > 0
    pd.testing.assert_series_equal(rows[0]["mean"], rows[1]["mean"], check_exact=True)
