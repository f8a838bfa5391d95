"""`interp ablate MODEL MODEL ... --jobs N`: the capacity ablation of several models as a job of interp.jobs, one
resumable table; two local processes give the table of one, a rerun skips finished models, a broken model is a
failed row and exit status 1."""

from __future__ import annotations

import shutil

import pandas as pd

from interp.cli import main
from tests.factories import tiny_checkpoint, tiny_lm, word_tokenizer_json

WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
VALUES = ["model_spec", "kind", "group", "fraction", "selection", "seed", "layer", "loss", "delta", "status"]


def _zoo(tmp_path, n: int) -> tuple[list[str], list[str]]:
    tok = word_tokenizer_json(tmp_path / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    models = []
    for i in range(n):
        model = tiny_lm(seed=i, vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=16, init_std=0.2)
        models.append(str(tiny_checkpoint(tmp_path / f"ck{i}", model, tokenizer=tok)))
    text = tmp_path / "text.txt"
    text.write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(200)))
    flags = ["--text", str(text), "--seq-len", "16", "--score-sequences", "2", "--eval-sequences", "3",
             "--batch-size", "2", "--fractions", "0.5", "--seeds", "0", "--skip-layers", "1", "--out",
             str(tmp_path / "fig")]
    return models, flags


def _values(df: pd.DataFrame) -> pd.DataFrame:
    return df[VALUES].reset_index(drop=True)


def test_several_models_in_two_processes_equal_one(tmp_path, private_cache, capfd):
    models, flags = _zoo(tmp_path, 3)
    one, two = tmp_path / "one.parquet", tmp_path / "two.parquet"
    assert main(["ablate", *models, *flags, "--table", str(one)]) == 0
    assert main(["ablate", *models, *flags, "--table", str(two), "--jobs", "2"]) == 0
    a, b = pd.read_parquet(one), pd.read_parquet(two)
    pd.testing.assert_frame_equal(_values(a), _values(b))
    assert list(dict.fromkeys(a["model_spec"])) == sorted(models) and set(a["status"]) == {"ok"}
    # each model's rows are those of the one-model command
    assert main(["ablate", models[1], *flags]) == 0
    single = pd.read_csv(tmp_path / "fig" / "pretrained_capacity_ablation.csv")
    keys = ["kind", "group", "fraction", "selection", "seed", "layer"]
    mine = a[a["model_spec"] == models[1]].sort_values(keys, kind="stable")["loss"].tolist()
    assert mine == single.sort_values(keys, kind="stable")["loss"].tolist()
    capfd.readouterr()
    assert main(["ablate", *models, *flags, "--table", str(two), "--jobs", "2"]) == 0
    assert capfd.readouterr().err.count(": skipped;") == 3


def test_a_broken_model_is_a_failed_row(tmp_path, private_cache):
    models, flags = _zoo(tmp_path, 2)
    shutil.copytree(models[1], tmp_path / "bad")
    (tmp_path / "bad" / "model.safetensors").write_bytes(b"x")
    table = tmp_path / "t.parquet"
    assert main(["ablate", models[0], str(tmp_path / "bad"), *flags, "--table", str(table)]) == 1
    df = pd.read_parquet(table)
    assert df[df["status"] == "failed"]["model_spec"].tolist() == [str(tmp_path / "bad")]
    assert main(["jobs", "status", str(table)]) == 1
