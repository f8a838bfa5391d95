"""`interp export RUN --hf OUT`: a Hugging Face folder that loads with trust_remote_code anywhere (fresh
process, empty HF cache), gives our logits, and goes through the toolkit's own HF path without remote code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.factories import random_tokens, tiny_lm, word_tokenizer_json

WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def run_dir(tmp_path, tiny_checkpoint):
    tok = word_tokenizer_json(tmp_path / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    model = tiny_lm(vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=16, init_std=0.2)
    return tiny_checkpoint("run", model, tokenizer=tok), model


def _export(run: Path, out: Path, *extra: str) -> int:
    from interp.cli import main

    return main(["export", str(run), "--hf", str(out), *extra])


def test_export_loads_with_remote_code_in_a_fresh_process(run_dir, tmp_path):
    run, model = run_dir
    assert _export(run, tmp_path / "hf") == 0
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["intermediate_sizes"] == [48, 32, 16] and config["model_type"] == "tapered_llama"
    assert config["auto_map"]["AutoModelForCausalLM"].startswith("modeling_tapered_llama.")
    assert config["interp"]["exported_from"] == str(run.resolve())
    tokens = random_tokens(16, batch=2, pos=16)
    with torch.no_grad():
        ours = model(tokens)
    torch.save({"tokens": tokens, "logits": ours}, tmp_path / "ref.pt")
    code = ("import sys, torch; from transformers import AutoModelForCausalLM, AutoTokenizer; "
            "m = AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval(); "
            "t = AutoTokenizer.from_pretrained(sys.argv[1]); ref = torch.load(sys.argv[2]); "
            "d = (m(ref['tokens']).logits - ref['logits']).abs().max().item(); "
            "print(type(m).__name__, t.eos_token, d)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # no interp on the path: self-contained
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "hf"), str(tmp_path / "ref.pt")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    name, eos, diff = proc.stdout.split()[-3:]
    assert name == "TaperedLlamaForCausalLM" and eos == "<|endoftext|>"
    assert float(diff) < 1e-5  # fp32; RoPE tables are computed in a different order, so not bit-equal


def test_the_toolkit_loads_an_export_without_remote_code(run_dir, tmp_path):
    from interp.hf import resolve_model
    from interp.hf.adapters import unwrap

    run, model = run_dir
    assert _export(run, tmp_path / "hf") == 0
    (tmp_path / "hf" / "modeling_tapered_llama.py").write_text("raise SystemExit('remote code ran')\n")
    ref = resolve_model(tmp_path / "hf")
    assert ref.kind == "hf_dir"
    loaded = ref.load()
    tokens = random_tokens(16, batch=2, pos=16)
    with torch.no_grad():
        torch.testing.assert_close(unwrap(loaded.model)(tokens).logits, model(tokens), atol=1e-5, rtol=1e-5)


def test_probe_cli_on_an_export_matches_the_checkpoint(run_dir, tmp_path):
    import pandas as pd

    from interp.cli import main

    run, _ = run_dir
    assert _export(run, tmp_path / "hf") == 0
    text = tmp_path / "text.txt"
    text.write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(200)))
    tables = {}
    for label, spec, backend in (("ckpt", run, "torch"), ("hf", tmp_path / "hf", "torch"),
                                 ("hf-nnsight", tmp_path / "hf", "nnsight")):
        out = tmp_path / f"{label}.parquet"
        assert main(["probe", "--model", str(spec), "--text", str(text), "--tokens", "64", "--seq-len", "16",
                     "--backend", backend, "--out", str(out)]) == 0
        tables[label] = pd.read_parquet(out).set_index(["layer", "metric"])["mean"]
    pd.testing.assert_series_equal(tables["ckpt"], tables["hf"], atol=1e-5, rtol=1e-4)
    pd.testing.assert_series_equal(tables["hf"], tables["hf-nnsight"], atol=1e-5, rtol=1e-4)


def test_refusals_change_nothing(run_dir, tmp_path, capsys):
    from interp.training.checkpoints import save_checkpoint

    run, _ = run_dir
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("mine")
    assert _export(run, tmp_path / "busy") == 2
    assert "not empty" in capsys.readouterr().err and os.listdir(tmp_path / "busy") == ["keep.txt"]
    assert _export(tmp_path / "busy", tmp_path / "x") == 2
    assert "not one of our checkpoints" in capsys.readouterr().err and not (tmp_path / "x").exists()
    save_checkpoint(tmp_path / "titans", tiny_lm(mixer="gated_attention"), {})
    assert _export(tmp_path / "titans", tmp_path / "y") == 2
    assert "does not export" in capsys.readouterr().err and not (tmp_path / "y").exists()


def test_overwrite_never_replaces_the_run_or_a_folder_that_is_not_an_export(run_dir, tmp_path, capsys):
    """--overwrite replaces an earlier export only: never the run itself, its step checkpoints, or other files."""
    import shutil

    run, _ = run_dir
    copy = tmp_path / "copied"
    shutil.copytree(run, copy)
    before = {f.name: f.read_bytes() for f in copy.iterdir() if f.is_file()}
    for target in (copy, copy / "checkpoints" / "step_000002", copy / "sub"):
        assert _export(copy, target, "--overwrite") == 2
        assert "inside the run being exported" in capsys.readouterr().err
    assert {f.name: f.read_bytes() for f in copy.iterdir() if f.is_file()} == before and not (copy / "sub").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "config.json").write_text('{"model_type": "llama"}')
    assert _export(copy, tmp_path / "busy", "--overwrite") == 2
    assert "replaces only an earlier `interp export` folder" in capsys.readouterr().err
    assert os.listdir(tmp_path / "busy") == ["config.json"]
    assert _export(copy, tmp_path / "hf") == 0 and _export(copy, tmp_path / "hf", "--overwrite") == 0  # re-export


def test_lm_eval_scores_an_export_as_it_scores_the_checkpoint(tmp_path):
    """lm-eval's own HF model class accepts an export, both as `interp eval EXPORT` (HFLM around the model the
    toolkit loads) and as `lm_eval --model hf --model_args pretrained=EXPORT,trust_remote_code=True` would (HFLM
    given the path), and scores it as our own model class scores the checkpoint."""
    pytest.importorskip("lm_eval")
    import pandas as pd

    from interp.cli import main
    from interp.evals.data import DOCS_LIMIT
    from interp.evals.run import lm_evaluate
    from tests.evals.test_evals_fixtures import english_bpe, english_checkpoint

    run = english_checkpoint(tmp_path / "run", english_bpe(tmp_path / "bpe" / "tokenizer.json"))
    assert _export(run, tmp_path / "hf") == 0
    values = {}
    for label, spec in (("ckpt", run), ("hf", tmp_path / "hf")):
        out = tmp_path / f"{label}.parquet"
        assert main(["eval", str(spec), "--tasks", "piqa,lambada", "--limit", "3", "--out", str(out)]) == 0
        df = pd.read_parquet(out)
        assert set(df["status"]) == {"ok"}
        values[label] = df.set_index(["task", "metric"])["value"].sort_index()
    pd.testing.assert_series_equal(values["ckpt"], values["hf"], atol=1e-4, rtol=1e-4)  # fp32, other RoPE order

    from lm_eval.models.huggingface import HFLM

    by_path = HFLM(pretrained=str(tmp_path / "hf"), trust_remote_code=True, batch_size=2, device="cpu")
    got = lm_evaluate(by_path, "piqa", {DOCS_LIMIT: 3}, limit=3, bootstrap_iters=0)["results"]["piqa"]
    assert got["acc,none"] == pytest.approx(values["ckpt"][("piqa", "acc")])
    assert got["acc_norm,none"] == pytest.approx(values["ckpt"][("piqa", "acc_norm")])
