"""The family walk through every command (issue #31 item 0): every decoder family TransformerLens 4.3 has an
adapter for, and transformers can build tiny, goes through `interp batch` (one call over all of them), `interp eval`
(one call, the text-perplexity task) and the pretrained ablation (each family), as a save_pretrained directory.
tests/hf/test_families.py checks the probe's numbers against plain HF hooks per family; this checks that every other
entry point takes the same directories. Families whose MLP has no single down projection (mixtures of experts)
run the whole-MLP skips and leave the neuron conditions out, with that reason: NO_NEURON_ABLATION lists them, and
the walk asserts it is exactly the families that do."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from interp.cli import main
from tests.hf.test_families import PROBEABLE, SEQ_LEN, THREE_LAYERS, TOKENS, _saved, _text

pytestmark = [pytest.mark.slow, pytest.mark.integration]

NEURONS = "no single down projection"   # the reason a mixture of experts gives
NO_NEURON_ABLATION = {"AfmoeForCausalLM", "Ernie4_5_MoeForCausalLM", "FlexOlmoForCausalLM", "Glm4MoeForCausalLM",
                      "GptOssForCausalLM", "JetMoeForCausalLM", "LagunaForCausalLM", "MiniMaxM2ForCausalLM",
                      "MixtralForCausalLM", "OlmoeForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"}


@pytest.fixture(scope="module")
def family_dirs(tmp_path_factory) -> tuple[dict[str, Path], Path]:
    root = tmp_path_factory.mktemp("families")
    return {f: _saved(root, f, THREE_LAYERS) for f in PROBEABLE}, _text(root / "text.txt")


def test_batch_takes_every_family_in_one_call(family_dirs, tmp_path):
    dirs, text = family_dirs
    out = tmp_path / "batch.parquet"
    rc = main(["batch", *map(str, dirs.values()), "--out", str(out), "--text", str(text), "--tokens", str(TOKENS),
               "--seq-len", str(SEQ_LEN), "--metrics", "rho_mlp,rho_block", "--no-progress"])
    df = pd.read_parquet(out)
    failed = df[df.get("status", pd.Series("ok", index=df.index)) != "ok"] if "status" in df else df.iloc[:0]
    assert rc == 0 and failed.empty, failed.get("error", failed).to_string()
    layers = df.groupby("model").layer.nunique()
    assert len(layers) == len(dirs) and set(layers) == {3}
    assert df["mean"].notna().all()


def test_eval_takes_every_family_in_one_call(family_dirs, tmp_path):
    dirs, text = family_dirs
    out = tmp_path / "eval.parquet"
    rc = main(["eval", *map(str, dirs.values()), "--text", str(text), "--tasks", "text_ppl", "--out", str(out)])
    df = pd.read_parquet(out)
    bad = df[df["status"] != "ok"]
    assert rc == 0 and bad.empty, bad[["model", "error"]].to_string()
    ppl = df[df["metric"] == "word_perplexity"]
    # five families share their weight files with another one (same shapes, same seed): each is still its own
    # model (its config.json is part of the key; before, five were skipped as "already in the table")
    assert ppl["model"].nunique() == len(dirs) and (ppl["value"] > 1).all()


def test_the_ablation_takes_every_family(family_dirs):
    from interp import ablations as ab

    dirs, text = family_dirs
    whole_mlp_only = set()
    for family, path in dirs.items():
        cfg = ab.AblationConfig(model=str(path), text=str(text), seq_len=SEQ_LEN, score_sequences=2,
                                eval_sequences=2, batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=(1,))
        log: list[str] = []
        rows = ab.run_pretrained_ablation(cfg, log=log.append)
        assert rows["loss"].notna().all() and rows[rows.kind == "skip_mlp"]["delta"].notna().all(), family
        if (rows.kind == "neurons").any():
            assert (rows[rows.kind == "neurons"].n_neurons_removed > 0).all(), family
        else:   # a mixture of experts: the whole-MLP skips run, the neuron conditions are left out, said in one line
            whole_mlp_only.add(family)
            assert any(NEURONS in line and "left out" in line for line in log), (family, log)
    assert whole_mlp_only == NO_NEURON_ABLATION
