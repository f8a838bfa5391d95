"""analyses.removal_accuracy on one of our checkpoints, lm-eval's PIQA at 6 documents: each removed layer's
accuracy equals lm-eval's on the model rebuilt without that block (no hook), the correlations equal scipy's
Spearman of an independent probe's layer means with the table's accuracy changes, a rerun resumes (only a
missing condition is evaluated again; a finished one loads no model; parts from other hardware are refused), and a
partial table renders. A save_pretrained directory and SmolLM2's .gguf file, each through both entry points
(`interp figures --recompute --set models=[...]` and analyses.removal_accuracy.compute), give lm-eval's accuracy
with the block skipped by a plain HF forward hook."""

from __future__ import annotations

import dataclasses
import json

import pandas as pd
import pytest
import torch
from scipy import stats

from analyses import removal_accuracy as ra
from interp import hf
from interp._util.provenance import hardware_label
from interp.probes.config import ProbeConfig
from tests.analyses.test_importance_measures import run  # noqa: F401 - the finished english checkpoint fixture

pytestmark = pytest.mark.usefixtures("one_thread")


def _forbid_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, loading a model fails the test: a finished run must rebuild its tables from the parts."""
    import interp.evals.run as evals_run

    def no_load(*args, **kwargs):
        raise AssertionError("a finished run loaded the model")
    monkeypatch.setattr(evals_run, "load_lm", no_load)


@pytest.mark.slow
def test_accuracy_drop_correlations_and_resume(run, tmp_path, monkeypatch):
    from interp.evals.run import expand_targets, lm_evaluate, load_lm
    from interp.probes import probe

    probe_cfg = ProbeConfig(tokens=128, seq_len=32, batch_size=2, metrics=("rho_mlp", "block_influence", "norm_ratio"))
    cfg = ra.Config(models=(str(run),), tasks=("piqa",), limit=6, parts_root=str(tmp_path / "parts"),
                    probe=probe_cfg, n_boot=50)
    figures = tmp_path / "figures"
    ra.compute(cfg, figures)
    drops = pd.read_csv(figures / ra.TABLE)

    [final] = expand_targets([str(run)], checkpoints="final")
    lm, _ = load_lm(final, batch_size=8)
    blocks = list(lm.model.blocks)
    assert drops["layer"].tolist() == list(range(len(blocks))) and set(drops["n_docs"]) == {6}
    for layer in range(len(blocks)):
        lm.model.blocks = torch.nn.ModuleList([b for i, b in enumerate(blocks) if i != layer])
        want = lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"]
        assert drops.loc[layer, "acc_removed"] == pytest.approx(want)
    lm.model.blocks = torch.nn.ModuleList(blocks)
    assert drops["acc_clean"].iloc[0] == pytest.approx(lm_evaluate(lm, "piqa", {}, limit=6)["results"]["piqa"]["acc,none"])
    assert (drops["d_acc"] - (drops["acc_removed"] - drops["acc_clean"])).abs().max() < 1e-12

    here = hardware_label("cpu", dtype="float32")
    assert set(drops["hardware"]) == {here} and set(drops["dtype"]) == {"float32"}
    assert drops["versions"].str.contains("torch=").all() and drops["versions"].str.contains("lm_eval=").all()
    corr = pd.read_csv(figures / ra.CORRELATIONS_TABLE)
    assert set(corr["task"]) == {"piqa", ra.POOLED} and set(corr["measure"]) == set(probe_cfg.metrics)
    assert set(corr["hardware"]) == {here}
    wide = probe(str(run), config=probe_cfg).pivot_table(index="layer", columns="metric", values="mean")
    assert set(corr["n_layers"]) == {len(blocks)} and set(corr["n_docs"]) == {6}
    assert corr["text_sha256"].notna().all() and corr["dtype"].eq("float32").all()
    assert len(wide) == len(blocks)

    # resume: one condition's part removed -> only it is evaluated again, and the table is the same
    parts = sorted((tmp_path / "parts").rglob("*.json"))
    assert len(parts) == 1 + len(blocks)
    stamps = {p: p.stat().st_mtime_ns for p in parts}
    missing = ra.part_path(tmp_path / "parts", str(run), "piqa", 1)
    missing.unlink()
    partial = ra.drop_rows(cfg, [str(run)], tmp_path / "parts")      # what a cut-off run's table holds
    assert 1 not in set(partial["layer"]) and len(partial) == len(blocks) - 1
    ra.save_progress(cfg, [str(run)], tmp_path / "parts", {}, figures)   # as a cut-off run leaves them
    pd.testing.assert_frame_equal(pd.read_csv(figures / ra.TABLE), partial.reset_index(drop=True),
                                  check_dtype=False)
    assert pd.read_csv(figures / ra.CORRELATIONS_TABLE).empty        # piqa lacks a layer: no correlation yet
    [png] = ra.render(figures)                                        # partial: the correlations "pending"
    assert png.stat().st_size > 10_000
    ra.compute(cfg, figures)
    assert missing.is_file()
    assert all(p.stat().st_mtime_ns == t for p, t in stamps.items() if p != missing)
    pd.testing.assert_frame_equal(pd.read_csv(figures / ra.TABLE), drops)
    assert len(pd.read_csv(figures / ra.CORRELATIONS_TABLE)) == len(corr)
    [png] = ra.render(figures)
    assert png.stat().st_size > 10_000

    # every condition done: a rerun loads no model (the tables are rewritten from the parts alone)
    _forbid_loading(monkeypatch)
    ra.compute(cfg, figures)
    pd.testing.assert_frame_equal(pd.read_csv(figures / ra.TABLE), drops)
    monkeypatch.undo()

    # a part from other hardware: the resume refuses before evaluating anything, naming the part and the field
    other = ra.part_path(tmp_path / "parts", str(run), "piqa", 0)
    other.write_text(json.dumps({**json.loads(other.read_text()), "hardware": "Other CPU (64 cores)"}))
    missing.unlink()
    with pytest.raises(RuntimeError, match=r"layer00\.json: field 'hardware' is 'Other CPU \(64 cores\)'"):
        ra.compute(cfg, figures)
    assert not missing.is_file()


def test_spearman_rows_against_scipy():
    """The statistic on a known case: 12 layers, 40 documents, a profile that tracks the damage with noise; rho is
    scipy's Spearman of the profile with the per-layer mean change, its bootstrap CI holds it, and a profile
    reversed gives the opposite sign."""
    rng = __import__("numpy").random.default_rng(0)
    damage = __import__("numpy").linspace(-0.2, 0.0, 12)
    y = damage + rng.normal(0, 0.3, (40, 12))
    profiles = pd.DataFrame({"tracks": -damage + rng.normal(0, 0.02, 12), "reversed": damage})
    out = ra.spearman_rows(profiles, y, ra.Config(n_boot=500)).set_index("measure")
    for measure in profiles:
        want = stats.spearmanr(profiles[measure], y.mean(0)).statistic
        row = out.loc[measure]
        assert row["spearman_rho"] == pytest.approx(want, abs=1e-12)
        assert row["ci_low"] <= row["spearman_rho"] <= row["ci_high"] and row["n_docs"] == 40
    assert out.loc["tracks", "spearman_rho"] == pytest.approx(-out.loc["reversed", "spearman_rho"], abs=0.2)
    assert out.loc["tracks", "spearman_rho"] < -0.5   # the profile rises as the damage (a negative change) grows


def test_rows_of_models_outside_the_run_are_kept(tmp_path):
    """Adding a model (--set models=[NEW]) rewrites its rows and keeps every other model's, provenance included."""
    old = pd.DataFrame({"model": ["a", "a", "b"], "layer": [0, 1, 0], "d_acc": [0.1, 0.2, 0.3],
                        "hardware": ["AMD EPYC (2 cores)"] * 3})
    old.to_csv(tmp_path / ra.TABLE, index=False)
    new = pd.DataFrame({"model": ["b", "c"], "layer": [0, 0], "d_acc": [0.5, 0.6], "hardware": ["X", "X"]})
    kept = ra.kept_rows(tmp_path, ra.TABLE, ["b", "c"], new)
    assert kept["model"].tolist() == ["a", "a", "b", "c"] and kept["d_acc"].tolist() == [0.1, 0.2, 0.5, 0.6]
    assert ra.kept_rows(tmp_path, ra.TABLE, ["b"], pd.DataFrame())["model"].tolist() == ["a", "a"]
    assert ra.kept_rows(tmp_path / "nothing-yet", ra.TABLE, ["b"], new).equals(new)


def _hooked_accuracy(lm, task: str, limit: int, layer: int | None) -> float:
    """lm-eval's accuracy with HF decoder layer `layer` returning its input (a plain forward hook, not
    interp.ablations), or clean (None)."""
    from interp.evals.run import lm_evaluate
    from interp.evals.tasks import PAPER_METRICS

    handle = None
    if layer is not None:
        block = lm.model.model.layers[layer]
        handle = block.register_forward_hook(
            lambda mod, args, kwargs, out: args[0] if args else kwargs["hidden_states"], with_kwargs=True)
    try:
        metric = PAPER_METRICS.get(task, "acc")
        return lm_evaluate(lm, task, {}, limit=limit)["results"][task][f"{metric},none"]
    finally:
        if handle is not None:
            handle.remove()


@pytest.mark.slow
def test_hf_dir_through_the_cli_matches_a_plain_hook(tmp_path, save_pretrained_dir, smollm2_tokenizer, monkeypatch):
    from interp.cli import main
    from interp.evals.run import expand_targets, load_lm
    from tests.factories import SMOLLM2_VOCAB, tiny_hf

    llama = tiny_hf("LlamaForCausalLM", vocab_size=SMOLLM2_VOCAB, d_model=64, d_mlp=128, n_layers=2, n_ctx=512)
    hf_dir = str(save_pretrained_dir("hf-llama", llama, smollm2_tokenizer))
    figures = tmp_path / "figures"
    probe = {"tokens": 128, "seq_len": 32, "batch_size": 2, "metrics": ["block_influence", "norm_ratio"]}
    assert main(["figures", "--recompute", "--only", ra.NAME, "--figures-dir", str(figures),
                 "--set", f"models={json.dumps([hf_dir])}", "--set", 'tasks=["arc_easy"]', "--set", "limit=5",
                 "--set", f"parts_root={json.dumps(str(tmp_path / 'parts'))}", "--set", "n_boot=20",
                 "--set", f"probe={json.dumps(probe)}"]) == 0
    drops = pd.read_csv(figures / ra.TABLE)
    assert drops["model"].tolist() == [hf_dir, hf_dir] and drops["layer"].tolist() == [0, 1]
    lm, _ = load_lm(expand_targets([hf_dir], checkpoints="final")[0], batch_size=8)
    assert drops["acc_clean"].iloc[0] == pytest.approx(_hooked_accuracy(lm, "arc_easy", 5, None))
    for layer in (0, 1):
        assert drops.loc[layer, "acc_removed"] == pytest.approx(_hooked_accuracy(lm, "arc_easy", 5, layer))
    corr = pd.read_csv(figures / ra.CORRELATIONS_TABLE)
    assert set(corr["task"]) == {"arc_easy", ra.POOLED} and set(corr["n_layers"]) == {2}

    # the same directory from Python, one layer (Config.layers), its own parts: the CLI's numbers
    subset = ra.Config(models=(hf_dir,), tasks=("arc_easy",), limit=5, layers=(1,),
                       parts_root=str(tmp_path / "parts-python"))
    ra.compute(subset, tmp_path / "python")
    python = pd.read_csv(tmp_path / "python" / ra.TABLE)
    assert python["layer"].tolist() == [1]
    assert python["acc_removed"].iloc[0] == drops.loc[1, "acc_removed"]
    assert python["acc_clean"].iloc[0] == drops["acc_clean"].iloc[0]

    # a finished subset loads nothing on a rerun, and a layer out of range is refused from its parts alone
    _forbid_loading(monkeypatch)
    ra.compute(subset, tmp_path / "python")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "python" / ra.TABLE), python)
    with pytest.raises(ValueError, match="field 'layers' holds \\[2\\], but .* has layers 0..1"):
        ra.compute(dataclasses.replace(subset, layers=(2,)), tmp_path / "python")


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.skipif(not hf.REGISTRY["smollm2-135m"].installed(), reason="needs SmolLM2")
def test_gguf_file_layer_subset_matches_a_plain_hook(tmp_path):
    """SmolLM2 as its .gguf file through the CLI, one removed layer (--set layers=[11]), HellaSwag (acc_norm) at 3
    documents; from Python, an out-of-range layer is refused naming the field."""
    from interp.cli import main
    from interp.evals.run import expand_targets, load_lm

    gguf = str(hf.REGISTRY["smollm2-135m"].locate())
    assert hf.resolve_model(gguf).kind == "gguf"
    assert main(["figures", "--recompute", "--only", ra.NAME, "--figures-dir", str(tmp_path / "figures"),
                 "--set", f"models={json.dumps([gguf])}", "--set", 'tasks=["hellaswag"]', "--set", "limit=3",
                 "--set", "layers=[11]", "--set", f"parts_root={json.dumps(str(tmp_path / 'parts'))}"]) == 0
    drops = pd.read_csv(tmp_path / "figures" / ra.TABLE)
    assert drops["layer"].tolist() == [11] and drops["metric"].tolist() == ["acc_norm"]
    assert pd.read_csv(tmp_path / "figures" / ra.CORRELATIONS_TABLE).empty   # one layer of 30: no correlation
    lm, _ = load_lm(expand_targets([gguf], checkpoints="final")[0], batch_size=8)
    assert drops["acc_clean"].iloc[0] == pytest.approx(_hooked_accuracy(lm, "hellaswag", 3, None))
    assert drops["acc_removed"].iloc[0] == pytest.approx(_hooked_accuracy(lm, "hellaswag", 3, 11))
    with pytest.raises(ValueError, match="field 'layers' holds \\[30\\]"):
        ra.compute(ra.Config(models=(gguf,), tasks=("hellaswag",), limit=3, layers=(30,),
                             parts_root=str(tmp_path / "parts")), tmp_path / "figures")
