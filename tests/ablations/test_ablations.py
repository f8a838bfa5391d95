"""interp.ablations (neuron masks, MLP skips, scores, paired deltas), its figure and its analysis module.

Unit tests use a tiny random Llama (3 layers, hidden 32, intermediate 64, vocab 100) built with
tests.factories.tiny_hf and wrapped as a LoadedModel; every numeric check is against an independent
computation (edited weight copies, activations recomputed from the weights by hand).
"""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from interp import ablations as ab
from interp.hf import LoadedModel
from tests.factories import (
    as_loaded,
    random_tokens,
    tiny_hf,
    tiny_lm,
    word_tokenizer_json,
)

N_LAYERS, D_MODEL, D_MLP, VOCAB = 3, 32, 64, 100


class CharTokenizer:
    """Stand-in for an HF tokenizer: one id per character."""

    def encode(self, text, add_special_tokens=False):
        return [ord(c) % VOCAB for c in text]


def tiny_loaded_hf(arch: str, name: str, seed: int = 0) -> LoadedModel:
    """A tiny random `arch` (4 heads, 2 KV heads, n_ctx 64) with large init (ablations visibly matter)."""
    model = tiny_hf(arch, seed, vocab_size=VOCAB, d_model=D_MODEL, d_mlp=D_MLP, n_layers=N_LAYERS,
                    initializer_range=0.2)
    return as_loaded(model, CharTokenizer(), name=name)


def tiny_llama(seed: int = 0) -> LoadedModel:
    return tiny_loaded_hf("LlamaForCausalLM", "tiny-llama", seed)


@pytest.fixture(scope="module")
def tiny():
    return tiny_llama()


@pytest.fixture(scope="module")
def tokens():
    return random_tokens(VOCAB, batch=3, pos=12)


def logits(loaded, toks):
    with torch.no_grad():
        return loaded.model(toks).logits


def mlp_inputs(loaded, layers, toks) -> dict[int, torch.Tensor]:
    """Each layer's MLP input [batch, pos, d_model] in one forward, from pre-hooks removed afterwards."""
    inputs = {}
    handles = [layer.mlp.register_forward_pre_hook(lambda m, a, l=l: inputs.__setitem__(l, a[0].detach()))
               for l, layer in enumerate(layers)]
    try:
        logits(loaded, toks)
    finally:
        for h in handles:
            h.remove()
    return inputs


# ------------------------------------------------------------------------------------------ masks and skips

def test_sites_groups_and_conditions():
    sites = ab.mlp_sites(tiny_llama())
    assert [s.layer for s in sites] == [0, 1, 2] and all(s.width == D_MLP for s in sites)
    assert ab.layer_groups(30) == {"early": list(range(10)), "middle": list(range(10, 20)),
                                   "late": list(range(20, 30))}
    assert [len(v) for v in ab.layer_groups(31).values()] == [10, 11, 10]
    conds = ab.build_conditions(30)
    assert len(conds) == 1 + 3 * 3 * (1 + 3) + 30 == 67
    assert conds[0].kind == "baseline" and len(set(conds)) == len(conds)
    with pytest.raises(ValueError, match="fraction"):
        ab.build_conditions(3, fractions=(1.5,))
    with pytest.raises(ValueError, match="skip_layers"):
        ab.build_conditions(3, skip_layers=[3])


def test_masking_nothing_changes_nothing_exactly(tiny, tokens):
    before = logits(tiny, tokens)
    with ab.ablated(tiny, remove={l: torch.tensor([], dtype=torch.long) for l in range(N_LAYERS)}):
        during = logits(tiny, tokens)
    assert torch.equal(before, during)


def test_masking_every_neuron_equals_skipping_the_mlp(tiny, tokens):
    with ab.ablated(tiny, remove={1: torch.arange(D_MLP)}):
        masked = logits(tiny, tokens)
    with ab.ablated(tiny, skip=[1]):
        skipped = logits(tiny, tokens)
    assert not torch.allclose(masked, logits(tiny, tokens), atol=1e-3)  # the ablation does something
    torch.testing.assert_close(masked, skipped, atol=1e-6, rtol=0)


def test_skip_equals_a_copy_without_that_mlp(tiny, tokens):
    ref = copy.deepcopy(tiny.model)
    ref.model.layers[2].mlp.down_proj.weight.data.zero_()   # independent route to "adds nothing"
    with ab.ablated(tiny, skip=[2]):
        skipped = logits(tiny, tokens)
    with torch.no_grad():
        torch.testing.assert_close(skipped, ref(tokens).logits, atol=1e-6, rtol=0)


def test_mask_equals_zeroed_down_proj_columns_in_a_copy(tiny, tokens):
    gen = torch.Generator().manual_seed(3)
    remove = {0: torch.randperm(D_MLP, generator=gen)[:20], 2: torch.randperm(D_MLP, generator=gen)[:40]}
    ref = copy.deepcopy(tiny.model)
    for layer, idx in remove.items():
        ref.model.layers[layer].mlp.down_proj.weight.data[:, idx] = 0.0
    with ab.ablated(tiny, remove=remove):
        masked = logits(tiny, tokens)
    with torch.no_grad():
        expected = ref(tokens).logits
    assert not torch.allclose(masked, logits(tiny, tokens), atol=1e-3)
    torch.testing.assert_close(masked, expected, atol=1e-5, rtol=0)


def test_hooks_are_removed_after_each_condition_and_on_error(tiny, tokens):
    before = logits(tiny, tokens)
    sites = ab.mlp_sites(tiny)
    with ab.ablated(tiny, remove={0: torch.arange(10)}, skip=[1]):
        assert len(sites[0].down._forward_pre_hooks) == 1 and len(sites[1].mlp._forward_hooks) == 1
    with pytest.raises(RuntimeError, match="boom"):
        with ab.ablated(tiny, remove={2: torch.arange(5)}):
            raise RuntimeError("boom")
    assert all(not s.down._forward_pre_hooks and not s.mlp._forward_hooks for s in sites)
    assert torch.equal(logits(tiny, tokens), before)


def test_tapered_lm_is_supported_with_per_layer_widths():
    model = tiny_lm(vocab_size=50, n_ctx=16, init_std=0.2)  # d_mlp [96, 64, 32]
    assert [s.width for s in ab.mlp_sites(model)] == [96, 64, 32]
    toks = torch.randint(0, 50, (2, 8))
    with torch.no_grad(), ab.ablated(model, remove={2: torch.arange(32)}):
        masked = model(toks)
    with torch.no_grad(), ab.ablated(model, skip=[2]):
        skipped = model(toks)
    torch.testing.assert_close(masked, skipped, atol=1e-6, rtol=0)


# ------------------------------------------------------------------------------------------ scores and selection

def test_contribution_scores_match_a_naive_computation(tiny, tokens):
    inputs = mlp_inputs(tiny, tiny.model.model.layers, tokens)
    scores, n = ab.contribution_scores(tiny, tokens.split(2))   # two batches: the sums must stream
    assert n == tokens.numel()
    for l, layer in enumerate(tiny.model.model.layers):
        mlp = layer.mlp
        x = inputs[l]                                           # [batch, pos, d_model] MLP input
        acts = F.silu(x @ mlp.gate_proj.weight.T) * (x @ mlp.up_proj.weight.T)
        naive = acts.abs().mean((0, 1)) * torch.sqrt((mlp.down_proj.weight ** 2).sum(0))
        torch.testing.assert_close(scores[l], naive, atol=1e-6, rtol=1e-5)
    assert all(not l.mlp.down_proj._forward_pre_hooks for l in tiny.model.model.layers)


def test_lowest_selection_picks_the_lowest_scores():
    scores = torch.tensor([5.0, 1.0, 3.0, 0.5, 4.0, 2.0, 6.0, 0.0])
    assert ab.select_neurons(scores, 0.5, "lowest").tolist() == [1, 3, 5, 7]
    assert ab.select_neurons(scores, 0.0, "lowest").numel() == 0
    assert ab.n_to_remove(1536, 0.1) == 154 and ab.n_to_remove(64, 1.0) == 64
    with pytest.raises(ValueError, match="selection"):
        ab.select_neurons(scores, 0.5, "highest")


def test_random_selection_is_seeded_nested_and_per_layer():
    scores = torch.zeros(1536)
    groups = {"early": [0, 1]}
    pick = lambda seed, frac: ab.removals(ab.Condition("neurons", "early", frac, "random", seed), [scores] * 2, groups)
    a, b, c = pick(0, 0.25), pick(0, 0.25), pick(1, 0.25)
    assert all(torch.equal(a[l], b[l]) for l in (0, 1))
    assert not torch.equal(a[0], c[0]) and not torch.equal(a[0], a[1])
    assert len(a[0]) == 384 and len(set(a[0].tolist())) == 384
    assert set(pick(0, 0.10)[0].tolist()) <= set(a[0].tolist())   # nested in the fraction


# ------------------------------------------------------------------------------------------ statistics

@pytest.mark.parametrize("df, expected", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (15, 2.1314),
                                          (30, 2.0423), (5000, 1.9604)])
def test_t_quantile_matches_tables(df, expected):
    from interp.stats import t_quantile

    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-4)  # two-sided 95%


def test_paired_delta_is_mean_and_t_interval_of_differences():
    base = torch.tensor([3.0, 2.5, 4.0, 3.5], dtype=torch.float64)
    cond = base + torch.tensor([0.1, 0.3, 0.2, 0.2], dtype=torch.float64)
    mean, lo, hi = ab.paired_delta(cond, base)
    d = [0.1, 0.3, 0.2, 0.2]
    sd = math.sqrt(sum((x - 0.2) ** 2 for x in d) / 3)
    assert mean == pytest.approx(0.2)
    assert hi - mean == pytest.approx(3.18245 * sd / 2, rel=1e-5) and mean - lo == pytest.approx(hi - mean)
    assert math.isnan(ab.paired_delta(cond[:1], base[:1])[1])


def test_sequence_losses_match_cross_entropy_and_bf16_is_close(tiny, tokens):
    losses = ab.sequence_losses(tiny, tokens.split(2))
    lg = logits(tiny, tokens)
    for i in range(tokens.shape[0]):
        assert float(losses[i]) == pytest.approx(float(F.cross_entropy(lg[i, :-1], tokens[i, 1:])), rel=1e-6)
    bf16 = ab.sequence_losses(tiny, tokens.split(2), torch.bfloat16)
    assert torch.allclose(bf16, losses, rtol=0.02)


# ------------------------------------------------------------------------------------------ the experiment

@pytest.fixture(scope="module")
def tiny_table(tmp_path_factory):
    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text("The quick brown fox jumps over the lazy dog. " * 20)
    cfg = ab.AblationConfig(model="tiny-llama", text=str(text), seq_len=16, score_sequences=4, eval_sequences=4,
                            batch_size=2, fractions=(0.25, 0.5), seeds=(0, 1))
    return ab.run_pretrained_ablation(cfg, loaded=tiny_llama(), log=None)


def test_run_builds_the_tidy_table(tiny_table):
    df = tiny_table
    assert list(df.columns) == list(ab.COLUMNS)
    assert len(df) == 1 + 3 * 2 * (1 + 2) + N_LAYERS
    base = df[df["kind"] == "baseline"].iloc[0]
    assert base["delta"] == 0.0 and base["n_neurons_removed"] == 0
    assert (df["n_tokens"] == 4 * 15).all() and (df["score_tokens"] == 4 * 16).all()
    neurons = df[df["kind"] == "neurons"]
    assert set(neurons["n_neurons_removed"]) == {16, 32}            # one layer per third, 25% / 50% of 64
    assert (neurons["layers"].isin(["0-0", "1-1", "2-2"])).all()
    assert (df["loss"] - base["loss"] - df["delta"]).abs().max() < 1e-9
    assert ((df["delta_ci_low"] <= df["delta"]) & (df["delta"] <= df["delta_ci_high"])).iloc[1:].all()
    assert df["text_sha256"].nunique() == 1 and df["versions"].str.contains("torch=").all()
    assert set(df["model"]) == {"tiny-llama"}  # cfg.model: the name the caller gave the model it passed in


def test_a_subset_of_groups_still_means_the_thirds(tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("abcdefghij" * 20)
    cfg = ab.AblationConfig(text=str(text), seq_len=8, score_sequences=2, eval_sequences=2, fractions=(0.5,),
                            groups=("late",), selections=("lowest",), skip_layers=())
    df = ab.run_pretrained_ablation(cfg, loaded=tiny_llama(), log=None)
    assert df["label"].tolist() == ["baseline", "late lowest 0.5"] and df["layers"].iloc[1] == "2-2"
    assert set(df["model"]) == {"tiny-llama"}  # a LoadedModel passed in, cfg.model left at its default: its own name
    bare = ab.run_pretrained_ablation(cfg, loaded=tiny_llama().model, tokenizer=tiny_llama().tokenizer, log=None)
    assert set(bare["model"]) == {"LlamaForCausalLM"}  # a bare HF module: its class, never the default's "smollm2"


def test_plot_and_analysis_render(tiny_table, tmp_path):
    from analyses import pretrained_ablation as pa
    from analyses import write_table
    from interp.plots.ablation import plot_capacity_ablation

    fig = plot_capacity_ablation(tiny_table)
    assert len(fig.axes) == 2
    write_table(tiny_table, tmp_path, pa.TABLE, pa.Config(), pa.NAME)
    (png,) = pa.render(tmp_path)
    assert png.name == pa.FIGURE and png.stat().st_size > 10_000
    summary = pa.summarize(tiny_table)
    assert list(summary.index) == ["early", "middle", "late"]
    assert {"lowest 0.25", "random 0.5", "skip_mlp mean"} <= set(summary.columns)
    assert "late costs less" in pa.verdict(summary)
    with pytest.raises(ValueError, match="delta"):
        plot_capacity_ablation(tiny_table.drop(columns=["delta"]))


def test_config_from_args():
    from analyses import pretrained_ablation as pa
    from interp.cli import build_parser
    from interp.cli.ablate import pretrained_config

    def parse(*argv: str):
        return pretrained_config(build_parser().parse_args(["ablate", "pretrained", *argv]))

    cfg = parse("--fractions", "0.2,0.4", "--seeds", "7", "--skip-layers", "none", "--groups", "late",
                "--dtype", "bfloat16")
    assert cfg.fractions == (0.2, 0.4) and cfg.seeds == (7,) and cfg.skip_layers == () and cfg.groups == ("late",)
    assert parse() == pa.Config()
    with pytest.raises(SystemExit):
        parse("--groups", "top")


# ------------------------------------------------------------------------------------------ real model

@pytest.mark.integration
def test_smollm2_skipping_layer0_mlp_costs_loss():
    from interp.hf import load_pretrained

    cfg = ab.AblationConfig(seq_len=64, score_sequences=1, eval_sequences=2, batch_size=2, groups=(),
                            skip_layers=(0,))
    df = ab.run_pretrained_ablation(cfg, loaded=load_pretrained("smollm2-135m", attn_implementation="sdpa"),
                                    log=None)
    assert list(df["kind"]) == ["baseline", "skip_mlp"]
    base, skip = df.iloc[0], df.iloc[1]
    assert 1.0 < base["loss"] < 5.0
    assert skip["delta"] > 0.1 and skip["loss"] > base["loss"]


# ------------------------------------------------------------------------------------------ other architectures


def test_gpt2_conv1d_down_projection_masks_scores_and_skips(tokens):
    """GPT-2's down projection is c_proj, a Conv1D with weight [in = d_mlp, out = d_model]: neuron i is ROW i."""
    tiny = tiny_loaded_hf("GPT2LMHeadModel", "tiny-gpt2")
    sites = ab.mlp_sites(tiny)
    assert all(type(s.down).__name__ == "Conv1D" and s.width == D_MLP for s in sites)
    remove = {1: torch.arange(0, D_MLP, 3)}
    ref = copy.deepcopy(tiny.model)
    ref.transformer.h[1].mlp.c_proj.weight.data[remove[1], :] = 0.0
    with ab.ablated(tiny, remove=remove):
        masked = logits(tiny, tokens)
    assert not torch.allclose(masked, logits(tiny, tokens), atol=1e-3)
    torch.testing.assert_close(masked, logits(LoadedModel(ref, None, "", "", "", tiny.sites), tokens),
                               atol=1e-5, rtol=0)
    # skipping: the MLP adds nothing (c_proj's bias included)
    ref = copy.deepcopy(tiny.model)
    ref.transformer.h[2].mlp.c_proj.weight.data.zero_()
    ref.transformer.h[2].mlp.c_proj.bias.data.zero_()
    with ab.ablated(tiny, skip=[2]):
        skipped = logits(tiny, tokens)
    torch.testing.assert_close(skipped, logits(LoadedModel(ref, None, "", "", "", tiny.sites), tokens),
                               atol=1e-6, rtol=0)
    # scores: |act(c_fc(x))| averaged over tokens times the norm of c_proj's row i
    inputs = mlp_inputs(tiny, tiny.model.transformer.h, tokens)
    scores, _ = ab.contribution_scores(tiny, tokens.split(2))
    for l, layer in enumerate(tiny.model.transformer.h):
        with torch.no_grad():
            acts = layer.mlp.act(layer.mlp.c_fc(inputs[l]))
        naive = acts.abs().mean((0, 1)) * layer.mlp.c_proj.weight.norm(dim=1)
        torch.testing.assert_close(scores[l], naive, atol=1e-6, rtol=1e-5)


def checkpoint_argv(tmp_path: Path, tiny_checkpoint) -> tuple[list[str], Path]:
    """A TaperedLM checkpoint with a word tokenizer, and the `interp ablate pretrained` argv that ablates it
    (tables into tmp_path/fig); returns (argv, text file)."""
    words = "the quick brown fox jumps over lazy dog and runs far away".split()
    tok_file = word_tokenizer_json(tmp_path / "tokenizer.json", words, specials=("[UNK]", "<|endoftext|>"))
    model = tiny_lm(vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=16, init_std=0.2)
    tiny_checkpoint(tmp_path / "run", model, tokenizer=tok_file)
    text = tmp_path / "text.txt"
    text.write_text(" ".join(words[i % 7] + " " + words[(i * 5) % 12] for i in range(200)))
    argv = ["ablate", "pretrained", "--model", str(tmp_path / "run"), "--text", str(text), "--seq-len", "16",
            "--score-sequences", "2", "--eval-sequences", "3", "--batch-size", "2", "--fractions", "0.5",
            "--seeds", "0", "--skip-layers", "1", "--figures-dir", str(tmp_path / "fig")]
    return argv, text


def test_our_checkpoint_through_the_cli(tmp_path, tiny_checkpoint):
    """`interp ablate pretrained --model CKPT`: a TaperedLM with the tokenizer its config.json names."""
    import pandas as pd

    from interp.cli import main

    argv, text = checkpoint_argv(tmp_path, tiny_checkpoint)
    assert main([*argv, "--device", "cpu"]) == 0
    df = pd.read_csv(tmp_path / "fig" / "pretrained_capacity_ablation.csv")
    assert set(df.loc[df["kind"] == "neurons", "n_neurons_removed"]) == {24, 16, 8}   # half of each third's layer
    from interp.hf import resolve_model

    ref = resolve_model(tmp_path / "run")
    cfg = ab.AblationConfig(model=str(tmp_path / "run"), text=str(text), seq_len=16, score_sequences=2,
                            eval_sequences=3, batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=(1,))
    direct = ab.run_pretrained_ablation(cfg, loaded=ref.load(), tokenizer=ref.load_tokenizer(), log=None)
    assert df["loss"].tolist() == pytest.approx(direct["loss"].tolist(), abs=1e-12)
    assert df["label"].tolist() == direct["label"].tolist()
    assert set(df["device"]) == {"cpu"} and df["hardware"].nunique() == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: the device exists")
def test_a_missing_gpu_fails_before_any_model_loads(tmp_path, tiny_checkpoint, monkeypatch, capsys):
    from interp.cli import main
    from interp.training import checkpoints

    argv, _ = checkpoint_argv(tmp_path, tiny_checkpoint)

    def no_loading(*args, **kwargs):
        raise AssertionError("a model was loaded before the device was checked")

    monkeypatch.setattr(checkpoints, "load_checkpoint", no_loading)
    assert main([*argv, "--device", "cuda"]) == 2
    assert "device: 'cuda' asked for, but torch sees no CUDA device" in capsys.readouterr().err
    assert not (tmp_path / "fig").exists()
    with pytest.raises(ValueError, match="device='gpu': write cpu, cuda or cuda:N"):
        ab.AblationConfig(device="gpu").validate()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run on a lent device machine)")
def test_ablation_on_gpu_matches_cpu(tmp_path, tiny_checkpoint):
    import pandas as pd

    from interp.cli import main

    argv, _ = checkpoint_argv(tmp_path, tiny_checkpoint)
    tables = {}
    for device in ("cpu", "cuda"):
        assert main([*argv, "--device", device, "--figures-dir", str(tmp_path / device)]) == 0
        tables[device] = pd.read_csv(tmp_path / device / "pretrained_capacity_ablation.csv")
    assert set(tables["cuda"]["device"]) == {"cuda:0"}
    assert tables["cuda"]["hardware"].iloc[0] == torch.cuda.get_device_name(0)
    assert tables["cuda"]["loss"].tolist() == pytest.approx(tables["cpu"]["loss"].tolist(), abs=1e-4)
    assert tables["cuda"]["n_neurons_removed"].tolist() == tables["cpu"]["n_neurons_removed"].tolist()
