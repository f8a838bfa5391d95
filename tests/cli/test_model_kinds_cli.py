"""Every model kind through every entry point (tests/hf/test_hf_dirs.py covers save_pretrained directories and
our checkpoints): a registry name and the same model as a .gguf file give identical numbers through
`interp probe`, `interp batch` (which takes the registry name as well) and `interp ablate pretrained`; a hub id fails offline with one clear line.
A GPT-2-style checkpoint (ModelConfig.arch="gpt2") goes through `interp train --arch gpt2`, `interp probe`
(every backend, --causal), `interp ablate pretrained`, `interp batch` and `interp export` like a Transformer++ one.

The SmolLM2 tests load SmolLM2-135M (integration): ~1 min with the dequantized cache built; the gpt2 ones
build tiny models (seconds)."""

from __future__ import annotations

import importlib.util

import pandas as pd
import pytest
import torch

from interp import hf
from interp.ablations import CAUSAL_METRICS
from interp.cli import main
from tests.factories import (
    random_tokens,
    tiny_config,
    tiny_lm,
    word_tokenizer_json,
    write_corpus,
)

smollm2 = pytest.mark.skipif(not hf.REGISTRY["smollm2-135m"].installed(),
                             reason="needs " + hf.REGISTRY["smollm2-135m"].pip_command)

NAME = "smollm2-135m"
PROBE = ["--tokens", "256", "--seq-len", "64", "--batch-size", "2"]
NUMBERS = ["layer", "metric", "mean", "std", "n_tokens"]


@pytest.fixture(scope="module")
def gguf() -> str:
    path = hf.REGISTRY[NAME].locate()
    assert hf.resolve_model(path).kind == "gguf" and hf.resolve_model(NAME).kind == "registry"
    return str(path)


def _numbers(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["metric", "layer"])[NUMBERS].reset_index(drop=True)


@pytest.mark.integration
@smollm2
def test_probe_registry_name_and_gguf_file_agree(gguf, tmp_path):
    tables = {}
    for spec in (NAME, gguf):
        out = tmp_path / f"{len(tables)}.parquet"
        assert main(["probe", "--model", spec, *PROBE, "--out", str(out)]) == 0
        tables[spec] = pd.read_parquet(out)
    assert tables[NAME]["model"].iloc[0] == NAME
    pd.testing.assert_frame_equal(_numbers(tables[NAME]), _numbers(tables[gguf]), check_exact=True)


@pytest.mark.integration
@smollm2
@pytest.mark.parametrize("kind", ["gguf", "registry"])
def test_batch_takes_a_gguf_file_or_registry_name_and_matches_probe(kind, gguf, tmp_path):
    out = tmp_path / "batch.parquet"
    assert main(["batch", gguf if kind == "gguf" else NAME, *PROBE, "--out", str(out), "--no-progress"]) == 0
    rows = pd.read_parquet(out)
    assert set(rows["kind"]) == {"gguf"} and set(rows["status"]) == {"ok"}
    if kind == "registry":
        assert set(rows["label"]) == {NAME}
    assert main(["probe", "--model", gguf, *PROBE, "--out", str(tmp_path / "p.parquet")]) == 0
    pd.testing.assert_frame_equal(_numbers(rows), _numbers(pd.read_parquet(tmp_path / "p.parquet")),
                                  check_exact=True)


@pytest.mark.integration
@smollm2
def test_ablate_registry_name_and_gguf_file_agree(gguf, tmp_path):
    tables = []
    for i, spec in enumerate((NAME, gguf)):
        figures = tmp_path / str(i)
        argv = ["ablate", "pretrained", "--model", spec, "--seq-len", "32", "--score-sequences", "2",
                "--eval-sequences", "4", "--batch-size", "2", "--fractions", "0.5", "--seeds", "0",
                "--groups", "late", "--skip-layers", "0", "--dtype", "float32", "--figures-dir", str(figures)]
        assert main(argv) == 0
        tables.append(pd.read_csv(figures / "pretrained_capacity_ablation.csv"))
    cols = ["label", "loss", "delta", "n_neurons_removed"]
    pd.testing.assert_frame_equal(tables[0][cols], tables[1][cols], check_exact=True)


@pytest.mark.integration
@smollm2
@pytest.mark.parametrize("argv", [["probe", "--model", "no-such-org/no-such-model", *PROBE],
                                  ["ablate", "pretrained", "--model", "no-such-org/no-such-model"]])
def test_hub_id_offline_is_one_clear_error(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    try:
        code = main([*argv, *(["--figures-dir", str(tmp_path)] if argv[0] == "ablate" else [])])
    except SystemExit as err:
        code = err.code if isinstance(err.code, int) else 2
        message = str(err)
    else:
        message = capsys.readouterr().err
    message = message or capsys.readouterr().err
    assert code == 2
    assert "no-such-org/no-such-model" in message and "offline" in message


@pytest.mark.integration
@smollm2
@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed")
def test_flash_attention_without_flash_attn_is_one_clear_error(capsys, tmp_path):
    """The audit's command: a raw ImportError from transformers before; one line naming the field and the fix now."""
    argv = ["ablate", "pretrained", "--model", NAME, "--attn-implementation", "flash_attention_2", "--seq-len", "32",
            "--score-sequences", "2", "--eval-sequences", "2", "--batch-size", "2", "--fractions", "0.5", "--seeds",
            "0", "--groups", "late", "--skip-layers", "0", "--figures-dir", str(tmp_path / "figures")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ImportError" not in err
    line = [x for x in err.splitlines() if x.startswith("interp ablate pretrained:")]
    assert len(line) == 1 and "attn_implementation: 'flash_attention_2' cannot be used" in line[0]
    assert "use sdpa or eager" in line[0] and "flash-attn" in line[0]


# ------------------------------------------------------------------------------------------ a GPT-2-style checkpoint

GPT2_WIDTHS = [48, 32, 16]
WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory):
    """(checkpoint dir, its TaperedLM, a text file): a tiny gpt2-style model with a word-level tokenizer."""
    from tests.factories import tiny_checkpoint

    root = tmp_path_factory.mktemp("gpt2")
    tok = word_tokenizer_json(root / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    model = tiny_lm(cfg=tiny_config(vocab_size=16, d_model=16, n_heads=2, d_mlp=GPT2_WIDTHS, n_ctx=16,
                                    init_std=0.2, arch="gpt2"))
    text = root / "text.txt"
    text.write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(300)))
    return tiny_checkpoint(root / "run", model, tokenizer=tok), model, text


def _probe(spec, text, out, *extra) -> pd.DataFrame:
    assert main(["probe", "--model", str(spec), "--text", str(text), "--tokens", "64", "--seq-len", "16",
                 "--out", str(out), *extra]) == 0
    return pd.read_parquet(out)


def test_gpt2_checkpoint_probes_agree_in_every_backend_and_causal_rows(gpt2_run, tmp_path):
    run, _, text = gpt2_run
    tables = {b: _probe(run, text, tmp_path / f"{b}.parquet", "--backend", b).set_index(["layer", "metric"])["mean"]
              for b in ("torch", "hookpoints", "transformer_lens", "nnsight")}
    assert len(tables["torch"]) == 3 * 6
    for backend, table in tables.items():
        pd.testing.assert_series_equal(table, tables["torch"], atol=1e-6, rtol=0, obj=backend)
    causal = _probe(run, text, tmp_path / "causal.parquet", "--causal")
    assert set(CAUSAL_METRICS.values()) <= set(causal.metric)
    assert causal[causal.metric == "delta_loss_skip_mlp"]["mean"].abs().gt(0).all()


def test_gpt2_checkpoint_through_ablate_and_batch(gpt2_run, tmp_path):
    run, _, text = gpt2_run
    figures = tmp_path / "figures"
    argv = ["ablate", "pretrained", "--model", str(run), "--text", str(text), "--seq-len", "16",
            "--score-sequences", "2", "--eval-sequences", "4", "--batch-size", "2", "--fractions", "0.5",
            "--seeds", "0", "--groups", "late", "--skip-layers", "0", "--figures-dir", str(figures)]
    assert main(argv) == 0
    table = pd.read_csv(figures / "pretrained_capacity_ablation.csv")
    removed = table[table.n_neurons_removed > 0]
    assert len(removed) and set(removed.n_neurons_removed) == {GPT2_WIDTHS[-1] // 2}  # half of the last layer
    assert table.loss.notna().all()
    out = tmp_path / "batch.parquet"
    assert main(["batch", str(run), "--text", str(text), "--tokens", "64", "--seq-len", "16", "--out", str(out),
                 "--no-progress"]) == 0
    rows = pd.read_parquet(out)
    assert set(rows["status"]) == {"ok"} and set(rows["kind"]) == {"checkpoint"}
    probe = _probe(run, text, tmp_path / "p.parquet")
    pd.testing.assert_frame_equal(_numbers(rows), _numbers(probe), check_exact=True)


def test_gpt2_checkpoint_exports_and_the_export_probes_the_same(gpt2_run, tmp_path):
    import json

    run, model, text = gpt2_run
    assert main(["export", str(run), "--hf", str(tmp_path / "hf")]) == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["model_type"] == "tapered_gpt2" and config["intermediate_sizes"] == GPT2_WIDTHS
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_tapered_gpt2.TaperedGPT2LMHeadModel"
    assert hf.resolve_model(tmp_path / "hf").kind == "hf_dir"  # no --trust-remote-code: our own class loads it
    ours = _probe(run, text, tmp_path / "ours.parquet").set_index(["layer", "metric"])["mean"]
    for backend in ("torch", "nnsight"):
        exported = _probe(tmp_path / "hf", text, tmp_path / f"hf-{backend}.parquet", "--backend", backend)
        pd.testing.assert_series_equal(exported.set_index(["layer", "metric"])["mean"], ours, atol=1e-5, rtol=1e-4)
    loaded = hf.unwrap(hf.resolve_model(tmp_path / "hf").load().model)
    tokens = random_tokens(16, batch=2, pos=16)
    with torch.no_grad():
        torch.testing.assert_close(loaded(tokens).logits, model(tokens), atol=1e-5, rtol=1e-5)


def test_train_arch_gpt2_cli_and_a_mixer_it_cannot_take(tmp_path, private_cache, capsys):
    import json

    from interp.model import ModelConfig, param_counts

    corpus = write_corpus(tmp_path / "corpus", n_docs=20, sentences=30)
    common = ["train", "--preset", "micro", "--arch", "gpt2", "--source", str(corpus), "--threads", "1",
              "--set", "val_fraction=0.25", "--steps", "3", "--set", "eval_interval=3", "--set", "warmup_steps=1",
              "--no-progress"]
    assert main([*common, "--out", str(tmp_path / "run")]) == 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    model_cfg = ModelConfig.from_dict(config["model"])
    assert config["train"]["arch"] == model_cfg.arch == "gpt2" and model_cfg.tie_embeddings is True
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "done" and result["params"] == param_counts(model_cfg)["total"]
    assert main([*common, "--mixer", "titans", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "arch='gpt2'" in err[0] and "--mixer attention" in err[0]
    assert not (tmp_path / "bad").exists() or not any((tmp_path / "bad").iterdir())
