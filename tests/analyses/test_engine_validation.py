"""analyses/engine_validation.py and its reference (interp.probes.reference): a small subset recomputed (two tiny
families, every backend and load dtype, against the float64 reference), the reference's own checks (it sees a wrong
site; its layer removal moves no layer's attention kind), and the committed table with the docs that quote it."""

from __future__ import annotations

import copy
import dataclasses

import pandas as pd
import pytest
import torch

from analyses import engine_validation as ev
from interp._util.paths import REPO_ROOT

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILIES = ("GPTNeoXForCausalLM", "Gemma2ForCausalLM")   # a parallel block; sandwich norms with soft-capped logits
COMMITTED = REPO_ROOT / "figures" / ev.TABLE
REGENERATE = "regenerate it: `interp figures --only engine_validation --recompute` (HEAVY)"


@pytest.fixture(scope="module")
def subset(tmp_path_factory) -> pd.DataFrame:
    out = tmp_path_factory.mktemp("figures")
    ev.compute(ev.Config(families=FAMILIES, models=()), out)
    assert ev.render(out)[0].read_bytes()[:4] == b"\x89PNG"
    return pd.read_csv(out / ev.TABLE)


def test_the_subset_is_within_tolerance_everywhere(subset):
    """Every family x measure x backend x load dtype has a row; each passes, or is one the probe refuses (its reason
    said); a passing row's differences are within its stated tolerance, and the rows say what produced them."""
    grid = {(f, m, b, d) for f in FAMILIES for m in ev.MEASURES for b in ev.BACKENDS for d in ev.LOAD_DTYPES}
    assert set(zip(subset.family, subset.measure, subset.backend, subset.dtype)) == grid and len(subset) == len(grid)
    refused = subset[subset.status == ev.REFUSED]
    assert set(subset.status) <= {ev.PASS, ev.REFUSED}, subset[subset.status != ev.PASS].to_string()
    assert refused.reason.str.startswith("interp probe --causal refuses it").all()
    passed = subset[subset.status == ev.PASS]
    bound = passed.atol + passed.rtol * passed.max_abs_reference
    assert (passed.max_abs_diff <= bound).all() and (passed.tolerance_ratio <= 1).all()
    assert (passed.median_abs_diff <= passed.max_abs_diff).all()
    for measure in ("rho_mlp", "logit_lens_kl", "delta_loss_skip_block"):   # a float32 load is far closer than bf16
        rows = passed[passed.measure == measure].groupby("dtype").max_abs_diff.max()
        assert rows["float32"] < rows["bfloat16"] / 10, measure
    for column in ("text_sha256", "weights_sha256", "hardware", "versions", "n_tokens"):
        assert passed[column].notna().all() and (passed[column].astype(str) != "").all(), column


def test_a_wrong_site_map_fails_its_rows(tmp_path, monkeypatch):
    """The reference does not read the SiteMap's residual sites: a Gemma-2 map that forgets the post-MLP norm (so
    hook_mlp_out reads the raw MLP output) makes the MLP's rows FAIL, and leaves the block's rows passing."""
    from interp.hf import adapters
    from interp.hf.tiny import save_tiny, tiny_any_hf, word_text, word_tokenizer

    path = save_tiny(tmp_path / "gemma2", "Gemma2ForCausalLM", num_hidden_layers=3)
    right = adapters.site_map_for(tiny_any_hf("Gemma2ForCausalLM", num_hidden_layers=3))
    assert right.post_mlp_norm   # the map under test is right until it is broken here
    monkeypatch.setitem(adapters.SITE_MAPS, "Gemma2ForCausalLM", dataclasses.replace(right, post_mlp_norm=None))
    text = tmp_path / "words.txt"
    text.write_text(word_text(96))
    cfg = ev.Config(backends=("torch",), model_dtypes=("float32",))
    rows = pd.DataFrame(ev.validate(str(path), "Gemma2ForCausalLM", "tiny random", cfg, str(text), 48, 12,
                                    word_tokenizer())).set_index("measure")
    assert (rows.loc[["rho_mlp", "norm_ratio"], "status"] == ev.FAIL).all(), rows[["status", "reason"]]
    assert (rows.loc[["rho_block", "block_influence", "logit_lens_kl", "delta_loss_skip_block"], "status"]
            == ev.PASS).all(), rows[["status", "reason"]]


def test_compare_fails_beyond_the_tolerance_and_on_a_nan():
    tol = ev.Tolerance(1e-3, 0.1, "test")
    assert ev.compare([1.0, 2.0], [1.0, 2.15], tol)["status"] == ev.PASS        # 0.15 <= 1e-3 + 0.215
    failed = ev.compare([1.0, 2.0], [1.0, 2.3], tol)
    assert failed["status"] == ev.FAIL and failed["worst_layer"] == 1 and "layer 1" in failed["reason"]
    assert ev.compare([float("nan"), 2.0], [1.0, 2.0], tol)["status"] == ev.FAIL
    assert ev.compare([1.0], [1.0, 2.0], tol)["status"] == ev.FAIL


def test_layer_dropped_is_the_model_rebuilt_without_the_layer():
    """Gemma-3 picks each layer's mask and RoPE base by its index in config.layer_types: the layer removed with its
    entry equals a model built with one layer fewer (its weights copied), and removing it from the layer list alone
    would not (the later layers would take the wrong attention kind)."""
    from transformers import AutoModelForCausalLM

    from interp.hf.tiny import tiny_any_hf
    from interp.probes.reference import layer_dropped, plain_sequence_losses

    types = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
    model = tiny_any_hf("Gemma3ForCausalLM", num_hidden_layers=4, layer_types=types, sliding_window=3).double()
    config = copy.deepcopy(model.config)
    config.num_hidden_layers, config.layer_types = 3, types[1:]
    rebuilt = AutoModelForCausalLM.from_config(config, attn_implementation="eager").double().eval()
    rebuilt.load_state_dict({_one_down(k): v for k, v in model.state_dict().items()
                             if not k.startswith("model.layers.0.")}, strict=True)
    ids = torch.randint(3, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = plain_sequence_losses(rebuilt, ids)
        with layer_dropped(model, 0):
            got = plain_sequence_losses(model, ids)
            shortened = list(model.config.layer_types)
        stack = model.model.layers
        blocks = list(stack)
        stack._modules.clear()
        stack._modules.update({str(i): block for i, block in enumerate(blocks[1:])})   # the list alone shortened
        naive = plain_sequence_losses(model, ids)
    assert shortened == types[1:] and list(model.config.layer_types) == types   # restored on exit
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert (naive - want).abs().max() > 1e-4


def _one_down(key: str) -> str:
    """model.layers.{i}.x -> model.layers.{i - 1}.x (any other key as it is)."""
    parts = key.split(".")
    if key.startswith("model.layers."):
        parts[2] = str(int(parts[2]) - 1)
    return ".".join(parts)


def test_the_reference_refuses_bad_input():
    from interp.hf.tiny import tiny_any_hf
    from interp.probes.reference import reference_measures

    model = tiny_any_hf("LlamaForCausalLM")
    with pytest.raises(ValueError, match="rho_mlp"):
        reference_measures(model, torch.ones(2, 6, dtype=torch.long), ("rho_mpl",))
    with pytest.raises(ValueError, match="n_sequences, positions"):
        reference_measures(model, torch.ones(6, dtype=torch.long))
    with pytest.raises(ValueError, match="Config.backends"):
        ev.check_config(ev.Config(backends=("torchh",)))
    with pytest.raises(ValueError, match="Config.families"):
        ev.family_list(ev.Config(families=("NoSuchForCausalLM",)))


# ------------------------------------------------------------------------------------------ the committed table

@pytest.fixture(scope="module")
def committed() -> pd.DataFrame:
    assert COMMITTED.is_file(), f"{COMMITTED} is missing: {REGENERATE}"
    return pd.read_csv(COMMITTED)


def test_the_committed_table_covers_every_family_measure_backend_and_dtype(committed):
    """Every family of interp.hf.families (its VARIANTS too) has its rows, each validated one the whole grid; the
    pretrained models are there; a row that is not validated says why."""
    want = [(family, status) for family, status, _ in ev.family_list(ev.Config())]
    have = committed.groupby("family", sort=False)
    missing = [f for f, _ in want if f not in have.groups]
    assert not missing, f"families missing from {COMMITTED.name}: {missing}; {REGENERATE}"
    for family, status in want:
        rows = have.get_group(family)
        if status == "validate":
            grid = {(m, b, d) for m in ev.MEASURES for b in ev.BACKENDS for d in ev.LOAD_DTYPES}
            assert set(zip(rows.measure, rows.backend, rows.dtype)) == grid, f"{family}: {REGENERATE}"
        else:
            assert list(rows.status) == [status], f"{family}: {REGENERATE}"
    for model in ev.Config().models:
        assert model in have.groups and have.get_group(model).kind.eq("pretrained").all(), model
    assert committed.status.isin((ev.PASS, ev.FAIL, ev.ERROR, ev.REFUSED, "not built", "not installed")).all()
    assert committed[committed.status != ev.PASS].reason.notna().all()
    checked = committed[committed.status.isin((ev.PASS, ev.FAIL))]
    bound = checked.atol + checked.rtol * checked.max_abs_reference   # the stated tolerance, per row
    assert ((checked.max_abs_diff <= bound) == (checked.status == ev.PASS)).all()


def test_the_docs_say_what_the_table_and_the_tolerances_say(committed):
    """figures/README.md holds the summary of the committed table (every row that does not pass, named with its
    reason) and docs/probes.md the tolerances and the largest differences, as the analysis renders them."""
    for page, blocks in ev.DOCS_BLOCKS.items():
        text = (REPO_ROOT / page).read_text()
        for block, render in blocks.items():
            assert f"<!-- begin:{block} -->\n{render(committed)}\n<!-- end:{block} -->" in text, (
                f"{page}'s {block} block differs from the committed table: {REGENERATE}, or fill the blocks alone "
                "with analyses.engine_validation.write_docs(pd.read_csv('figures/engine_validation.csv'), REPO_ROOT)")
