"""An unset --seq-len fits the model: probe uses min(512, the model's context), batch min(256, the shortest context
among its models), decided once before any load and said on stderr; a given --seq-len beyond a model's context is
refused before any weights are read (batch: naming the models, not one failed row per checkpoint)."""

from __future__ import annotations

import random

import pandas as pd
import pytest

from interp.cli import main
from interp.probes import run as probe_run
from tests.factories import save_pretrained_dir, tiny_hf, word_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")
WORDS = [f"w{i}" for i in range(5, 60)]


@pytest.fixture
def models(tmp_path, monkeypatch):
    """HF dirs short (context 64) and long (context 128), and a text file, in the current directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INTERP_CACHE_DIR", str(tmp_path / "cache"))
    save_pretrained_dir(tmp_path / "models" / "short", tiny_hf("LlamaForCausalLM", n_ctx=64), word_tokenizer())
    save_pretrained_dir(tmp_path / "models" / "long", tiny_hf("LlamaForCausalLM", n_ctx=128, seed=1),
                        word_tokenizer())
    rng = random.Random(0)
    (tmp_path / "text.txt").write_text(" ".join(rng.choice(WORDS) for _ in range(3000)))
    return tmp_path


def test_probe_fits_an_unset_seq_len_to_the_model(models, capsys):
    assert main(["probe", "--model", "models/short", "--text", "text.txt", "--tokens", "256", "--metrics",
                 "rho_mlp", "--out", "short.parquet"]) == 0
    assert set(pd.read_parquet("short.parquet")["seq_len"]) == {64}
    assert "seq_len 64: the model's context" in capsys.readouterr().err
    # given, it is kept, and one beyond the context is refused before the weights load
    assert main(["probe", "--model", "models/short", "--text", "text.txt", "--tokens", "256", "--seq-len", "128",
                 "--out", "n.parquet"]) == 2
    assert "exceed the context" in capsys.readouterr().err


def test_batch_fits_once_to_the_shortest_context_before_any_load(models, capsys, monkeypatch):
    assert main(["batch", "models", "--text", "text.txt", "--tokens", "128", "--metrics", "rho_mlp",
                 "--no-progress", "--out", "b.parquet"]) == 0
    table = pd.read_parquet("b.parquet")
    assert set(table["status"]) == {"ok"} and set(table["seq_len"]) == {64} and table["path"].nunique() == 2
    assert "seq_len 64: the shortest context among the models" in capsys.readouterr().err

    def no_load(*args, **kwargs):
        raise AssertionError("a model was probed although --seq-len cannot fit")

    monkeypatch.setattr(probe_run, "probe", no_load)
    assert main(["batch", "models", "--text", "text.txt", "--tokens", "256", "--seq-len", "128",
                 "--no-progress", "--out", "c.parquet"]) == 2
    err = capsys.readouterr().err
    assert "--seq-len" in err and "short" in err and "(64 positions)" in err and "long" not in err.split("fix")[0]
