"""`interp ablate MODEL... --table T` reruns skip a finished model only while it is the same model: a run folder
retrained in place, and a hub branch that moved, are ablated again and their old rows leave the table (issue 50's
stale-row test; with the old keys, a run folder's path and a hub id's name, both reruns skipped and kept the old
rows)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from interp.cli import main
from tests.factories import tiny_checkpoint, tiny_lm, word_tokenizer_json
from tests.hub_server import LoopbackHub, tiny_model_folder

REPO = Path(__file__).resolve().parents[2]
WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
KEYS = ["kind", "group", "fraction", "selection", "seed", "layer"]


def _text(tmp_path: Path) -> Path:
    text = tmp_path / "text.txt"
    text.write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(200)))
    return text


def _flags(tmp_path: Path) -> list[str]:
    return ["--text", str(_text(tmp_path)), "--seq-len", "16", "--score-sequences", "2", "--eval-sequences", "3",
            "--batch-size", "2", "--fractions", "0.5", "--seeds", "0", "--skip-layers", "1", "--out",
            str(tmp_path / "fig")]


def _losses(table: pd.DataFrame, spec: str) -> list[float]:
    rows = table[table["model_spec"] == spec]
    return rows.sort_values(KEYS, kind="stable")["loss"].tolist()


def _model(seed: int):
    return tiny_lm(seed=seed, vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=16, init_std=0.2)


def test_a_run_folder_retrained_in_place_is_ablated_again(tmp_path, private_cache):
    tok = word_tokenizer_json(tmp_path / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    run, other = tmp_path / "runs" / "r", tmp_path / "other"
    tiny_checkpoint(run / "checkpoints" / "step_000010", _model(0), tokenizer=tok)
    tiny_checkpoint(run, _model(0), tokenizer=tok)     # the final model of a run directory
    tiny_checkpoint(other, _model(2), tokenizer=tok)
    table, flags = tmp_path / "t.parquet", _flags(tmp_path)
    assert main(["ablate", str(run), str(other), *flags, "--table", str(table)]) == 0
    before = _losses(pd.read_parquet(table), str(run))
    tiny_checkpoint(run, _model(1), tokenizer=tok)     # retrained: the same folder, other weights
    assert main(["ablate", str(run), str(other), *flags, "--table", str(table)]) == 0
    after = pd.read_parquet(table)
    assert main(["ablate", str(run), *flags]) == 0     # the one-model command on the retrained folder
    fresh = pd.read_csv(tmp_path / "fig" / "pretrained_capacity_ablation.csv")
    assert _losses(after, str(run)) == fresh.sort_values(KEYS, kind="stable")["loss"].tolist() != before
    assert len(after[after["model_spec"] == str(run)]) == len(fresh)    # the old rows are gone


@pytest.mark.slow
def test_a_hub_branch_that_moved_is_ablated_again(tmp_path):
    folders = tmp_path / "folders"
    first = tiny_model_folder("gpt2", folders / "a", seed=0, n_layer=3)
    second = tiny_model_folder("gpt2", folders / "b", seed=1, n_layer=3)
    table, home = tmp_path / "t.parquet", tmp_path / "hf"
    cmd = [sys.executable, "-m", "interp.cli", "ablate", "org/moving", "--table", str(table), *_flags(tmp_path)]
    with LoopbackHub(tmp_path / "served") as hub:
        shas = [hub.add_model("org/moving", {"main": first})["main"]]
        env = hub.child_env(hf_home=home)
        env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", INTERP_CACHE_DIR=str(home / "interp"))
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        before = pd.read_parquet(table)
        shas.append(hub.add_model("org/moving", {"main": second})["main"])   # the branch moves to a new commit
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
    after = pd.read_parquet(table)
    assert shas[0] != shas[1]
    assert set(before["commit"]) == {shas[0]} and set(after["commit"]) == {shas[1]}
    assert "replaced" in run.stderr and len(after) == len(before)
    assert _losses(after, "org/moving") != _losses(before, "org/moving")
