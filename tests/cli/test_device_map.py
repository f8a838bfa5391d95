"""--device-map and --model-dtype: a model placed by accelerate (here: two of three layers offloaded to disk, what a
CPU machine allows) gives the probe rows, the causal rows and the capacity ablation's deltas of the unplaced model
exactly; --model-dtype bfloat16 loads in bf16 and says so in the rows (auto: what it resolved to). Through the real CLI, in process."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from interp.cli import main
from tests.factories import save_pretrained_dir, tiny_hf, word_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = [f"w{i}" for i in range(5, 60)]
PROBE = ["--text", "text.txt", "--tokens", "128", "--seq-len", "32", "--batch-size", "2"]
DISK = json.dumps({"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
                   "model.layers.1": "disk", "model.layers.2": "disk", "model.norm": "cpu", "lm_head": "cpu"})


@pytest.fixture
def llama(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    save_pretrained_dir(tmp_path / "llama", tiny_hf("LlamaForCausalLM", n_layers=3),
                        word_tokenizer(eos_token="[UNK]"))   # an EOS: lm-eval's rolling perplexity starts from it
    rng = random.Random(0)
    (tmp_path / "text.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(1500)))
    return tmp_path


def test_a_disk_offloaded_model_probes_exactly_as_the_whole_one(llama):
    assert main(["probe", "--model", "llama", *PROBE, "--causal", "--out", "whole.parquet"]) == 0
    assert main(["probe", "--model", "llama", *PROBE, "--causal", "--device-map", DISK, "--out", "placed.parquet"]) == 0
    whole, placed = pd.read_parquet("whole.parquet"), pd.read_parquet("placed.parquet")
    assert {"delta_loss_skip_mlp", "rho_mlp"} <= set(placed["metric"])
    assert placed["mean"].tolist() == whole["mean"].tolist()
    assert set(placed["device_map"]) == {DISK} and "device_map" not in whole.columns
    assert list((llama / "cache" / "offload").iterdir())   # the offloaded layers were read from disk


def test_the_capacity_ablation_under_a_device_map(llama):
    base = ["ablate", "pretrained", "--model", "llama", "--text", "text.txt", "--seq-len", "16", "--score-sequences",
            "4", "--eval-sequences", "4", "--fractions", "0.5", "--seeds", "0"]
    assert main([*base, "--figures-dir", "whole"]) == 0
    assert main([*base, "--device-map", DISK, "--figures-dir", "placed"]) == 0
    whole = pd.read_csv(llama / "whole" / "pretrained_capacity_ablation.csv")
    placed = pd.read_csv(llama / "placed" / "pretrained_capacity_ablation.csv")
    assert placed["delta"].tolist() == whole["delta"].tolist()


def test_model_dtype_loads_in_bf16_and_records_it(llama):
    assert main(["probe", "--model", "llama", *PROBE, "--model-dtype", "bfloat16", "--out", "bf16.parquet"]) == 0
    assert main(["probe", "--model", "llama", *PROBE, "--out", "fp32.parquet"]) == 0
    bf16, fp32 = pd.read_parquet("bf16.parquet"), pd.read_parquet("fp32.parquet")
    assert set(bf16["model_dtype"]) == {"bfloat16"} and "model_dtype" not in fp32.columns
    assert bf16["mean"].tolist() != fp32["mean"].tolist()
    assert bf16["mean"].to_numpy() == pytest.approx(fp32["mean"].to_numpy(), abs=0.05)


def test_the_ablation_loads_in_bf16_and_records_it(llama):
    base = ["ablate", "pretrained", "--model", "llama", "--text", "text.txt", "--seq-len", "16", "--score-sequences",
            "4", "--eval-sequences", "4", "--fractions", "0.5", "--seeds", "0"]
    assert main([*base, "--model-dtype", "bfloat16", "--figures-dir", "bf16"]) == 0
    table = pd.read_csv(llama / "bf16" / "pretrained_capacity_ablation.csv")
    assert set(table["model_dtype"]) == {"bfloat16"}


def test_eval_under_a_device_map_and_in_bf16(llama):
    """lm-eval's HFLM around a disk-offloaded model scores what the whole model scores; --model-dtype bfloat16
    loads in bf16 (the dtype column) and is a pair of its own (another key)."""
    pytest.importorskip("lm_eval")
    base = ["eval", "llama", "--tasks", "text_ppl", "--text", "text.txt", "--limit", "2"]
    assert main([*base, "--out", "whole.parquet"]) == 0
    assert main([*base, "--device-map", DISK, "--out", "placed.parquet"]) == 0
    assert main([*base, "--model-dtype", "bfloat16", "--out", "whole.parquet"]) == 0
    whole, placed = pd.read_parquet("whole.parquet"), pd.read_parquet("placed.parquet")
    fp32 = whole[whole["dtype"] == "float32"].sort_values("metric")
    assert placed.sort_values("metric")["value"].tolist() == pytest.approx(fp32["value"].tolist(), rel=1e-6)
    bf16 = whole[whole["dtype"] == "bfloat16"].sort_values("metric")
    assert len(bf16) == 3 and bf16["value"].tolist() == pytest.approx(fp32["value"].tolist(), rel=0.05)
