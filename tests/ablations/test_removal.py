"""Layer removal (interp.ablations.removal): the removal map's losses and the layer-dependency map against a
forward written out by hand in float64 (our TaperedLM: block by block, the removed block passing its input on),
and the same on a Hugging Face model against its layer list with the layer deleted."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from interp.ablations.removal import removal_effects
from tests.factories import random_tokens, tiny_hf, tiny_lm

pytestmark = pytest.mark.usefixtures("one_thread")


def _by_hand(model, tokens: torch.Tensor, removed: int | None = None):
    """(per-sequence CE, per-layer contribution u_l = h_{l+1} - h_l [b, pos, d]) of a float64 copy."""
    m = copy.deepcopy(model).double()
    x = m.embed(tokens)
    updates = []
    for l, block in enumerate(m.blocks):
        if l == removed:
            updates.append(torch.zeros_like(x))
            continue
        mid = x + block.attn(block.ln1(x))
        new = mid + block.mlp(block.ln2(mid))
        updates.append(new - x)
        x = new
    logits = m.unembed(m.ln_final(x))
    ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
    return ce.view(tokens.shape[0], -1).mean(1), updates


def test_removal_and_dependency_match_a_float64_forward_by_hand():
    model = tiny_lm(init_std=0.2)
    tokens = random_tokens(64, batch=5, pos=16)
    fx = removal_effects(model, list(tokens.split(2)))
    clean, base = _by_hand(model, tokens)
    torch.testing.assert_close(fx.clean, clean, atol=1e-5, rtol=0)
    for s in range(3):
        lost, now = _by_hand(model, tokens, removed=s)
        torch.testing.assert_close(fx.removed[s], lost, atol=1e-5, rtol=0)
        for l in range(3):
            if l <= s:
                assert torch.isnan(fx.dependency[s, l]).all()
                continue
            want = ((now[l] - base[l]).norm(dim=-1) / base[l].norm(dim=-1))[:, 1:].mean(1)
            torch.testing.assert_close(fx.dependency[s, l], want, atol=1e-4, rtol=1e-4)
    assert (fx.dependency[0, 1] > 1e-3).all()  # removing layer 0 changes what layer 1 adds


def test_rows_carry_t_and_bootstrap_intervals():
    model = tiny_lm(init_std=0.2)
    fx = removal_effects(model, list(random_tokens(64, batch=6, pos=12).split(3)))
    rows = fx.removal_rows(n_boot=200)
    assert [r["layer"] for r in rows] == [0, 1, 2]
    for r in rows:
        assert r["delta_loss_ci_low"] <= r["delta_loss"] <= r["delta_loss_ci_high"]
        assert r["delta_ppl_ci_low"] <= r["delta_ppl"] + 1e-9 and r["delta_ppl"] <= r["delta_ppl_ci_high"] + 1e-9
        assert math.isclose(r["delta_ppl"], r["ppl_removed"] - r["ppl_clean"])
    dep = fx.dependency_rows()
    assert [(r["skipped"], r["layer"]) for r in dep] == [(0, 1), (0, 2), (1, 2)]
    assert all(np.isfinite(r["relative_change"]) and r["n_sequences"] == 6 for r in dep)


def test_hf_removal_equals_the_layer_deleted():
    model = tiny_hf("LlamaForCausalLM", initializer_range=0.2)
    tokens = random_tokens(64, batch=4, pos=12)
    fx = removal_effects(model, list(tokens.split(2)))
    for s in range(3):
        m = copy.deepcopy(model).double()
        kept = [b for i, b in enumerate(m.model.layers) if i != s]
        m.model.layers = torch.nn.ModuleList(kept)
        with torch.no_grad():
            logits = m(tokens).logits
        ce = F.cross_entropy(logits[:, :-1].flatten(0, 1), tokens[:, 1:].flatten(), reduction="none")
        torch.testing.assert_close(fx.removed[s], ce.view(4, -1).mean(1), atol=2e-5, rtol=0)


def test_layer_removal_analysis_computes_and_renders(tmp_path):
    """The analysis end to end on one of our checkpoints (a word-level tokenizer over held-out wiki: mostly
    [UNK], enough to run every path): both tables with their provenance, and the figure."""
    import json

    import pandas as pd

    from analyses import layer_removal
    from tests.factories import tiny_checkpoint, word_tokenizer_json

    tok = word_tokenizer_json(tmp_path / "tok.json", ["the", "of", "and", "in", "a", "to"])
    run = tiny_checkpoint(tmp_path / "run", tokenizer=tok)
    (run / "result.json").write_text(json.dumps({"status": "done"}))
    cfg = layer_removal.Config(models=(), run_dirs=(str(run),), seq_len=16, sequences=4, batch_size=2, n_boot=50)
    layer_removal.compute(cfg, tmp_path / "figures")
    removal = pd.read_csv(tmp_path / "figures" / layer_removal.TABLE)
    dependency = pd.read_csv(tmp_path / "figures" / layer_removal.DEPENDENCY_TABLE)
    assert removal["layer"].tolist() == [0, 1, 2] and set(removal["n_tokens"]) == {64}
    assert {"text_sha256", "checkpoint", "dtype", "delta_ppl_ci_low"} <= set(removal.columns)
    assert len(dependency) == 3 and (dependency["skipped"] < dependency["layer"]).all()
    assert (tmp_path / "figures" / "layer_removal.meta.json").is_file()
    [png] = layer_removal.render(tmp_path / "figures")
    assert png.stat().st_size > 10_000
