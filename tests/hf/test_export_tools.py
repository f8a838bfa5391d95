"""An `interp export` folder in the outside interpretability tools, for both block styles (llama, gpt2) with one MLP
width per layer (a width-0 layer, no MLP, included): TransformerLens 4.x through the adapters interp declares under
its "transformer_lens.architectures" entry point (interp/hf/tl_export.py) gives our logits and, at every layer, our
hooks' blocks.{l}.hook_resid_pre / hook_mlp_out; `interp.probes.probe(EXPORT, backend="transformer_lens")` equals
the probe of the checkpoint; nnsight's LanguageModel traces the export and saves our MLP outputs. Tiny models
(vocab 16, d_model 16): ~20 s in all, most of it the one fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from interp.cli import main
from tests.factories import random_tokens, tiny_checkpoint, tiny_config, tiny_lm, word_tokenizer_json

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[2]
WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
STYLES = ("llama", "gpt2")
WIDTHS = [48, 32, 0, 16]
ARCHITECTURE = {"llama": "TaperedLlamaForCausalLM", "gpt2": "TaperedGPT2LMHeadModel"}
ATOL = 1e-5   # float32; HF computes RoPE tables in another order than ours, so not bit-equal


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, tuple[object, Path, Path]]:
    """style -> (our TaperedLM, its checkpoint dir, its `interp export` folder), plus "text": a text file."""
    root = tmp_path_factory.mktemp("export_tools")
    tok = word_tokenizer_json(root / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    made: dict = {}
    for style in STYLES:
        model = tiny_lm(cfg=tiny_config(vocab_size=16, d_model=16, n_heads=2, d_mlp=WIDTHS, n_ctx=16, init_std=0.2,
                                        arch=style))
        run = tiny_checkpoint(root / f"run_{style}", model, tokenizer=tok)
        assert main(["export", str(run), "--hf", str(root / f"hf_{style}")]) == 0
        made[style] = (model, run, root / f"hf_{style}")
    made["text"] = root / "text.txt"
    made["text"].write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(200)))
    return made


def _ours(model, tokens: torch.Tensor, names: list[str]) -> tuple[torch.Tensor, dict]:
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens, names_filter=lambda n: n in names)
    return logits, {n: cache[n] for n in names}


def test_the_entry_point_names_the_adapters():
    from importlib.metadata import entry_points

    from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory

    import interp.hf.tl_export as tl_export

    declared = {ep.name: ep for ep in entry_points(group=tl_export.ENTRY_POINT_GROUP)}
    assert set(ARCHITECTURE.values()) <= set(declared), (
        f"{sorted(declared)}: reinstall interp (pip install --no-deps -e .) so its entry points are in the package "
        "metadata; a stale interp.egg-info/ in the working directory shadows it (`make clean` removes it)")
    for name, adapter in tl_export.ADAPTERS.items():
        assert declared[name].load() is adapter
        ArchitectureAdapterFactory.discover_entry_points()
        assert ArchitectureAdapterFactory._adapters[name] is adapter


@pytest.mark.parametrize("style", STYLES)
def test_transformer_bridge_on_an_export_has_our_logits_and_hooks(style, exports):
    import interp.hf.tl_export  # noqa: F401 - the tapered classes and architectures (the documented snippet)
    from transformer_lens.model_bridge import TransformerBridge

    model, _, export = exports[style]
    bridge = TransformerBridge.boot_transformers(str(export), device="cpu")
    assert type(bridge.adapter).__name__ == f"Tapered{'Llama' if style == 'llama' else 'GPT2'}ArchitectureAdapter"
    assert bridge.cfg.d_mlp_per_layer == WIDTHS and bridge.cfg.d_mlp == max(WIDTHS)
    tokens = random_tokens(16, batch=2, pos=12)
    names = [f"blocks.{layer}.{hook}" for layer in range(len(WIDTHS)) for hook in ("hook_resid_pre", "hook_mlp_out")]
    ours, cache = _ours(model, tokens, names)
    with torch.no_grad():
        logits, theirs = bridge.run_with_cache(tokens, names_filter=lambda n: n in names)
    torch.testing.assert_close(logits, ours, atol=ATOL, rtol=ATOL)
    for name in names:
        torch.testing.assert_close(theirs[name], cache[name], atol=ATOL, rtol=ATOL, msg=name)
    assert not cache["blocks.2.hook_mlp_out"].any() and not theirs["blocks.2.hook_mlp_out"].any()   # width 0
    for layer, width in enumerate(WIDTHS):   # per-layer weights are exact (the stacked bridge.W_in is not)
        assert tuple(bridge.blocks[layer].mlp.W_in.shape) == (16, width)


@pytest.mark.parametrize("style", STYLES)
def test_the_transformer_lens_probe_of_an_export_is_the_checkpoints(style, exports):
    from interp.probes import probe

    _, run, export = exports[style]
    tables = [probe(str(spec), text=exports["text"], tokens=48, seq_len=12, batch_size=2,
                    backend="transformer_lens").set_index(["layer", "metric"])["mean"].sort_index()
              for spec in (run, export)]
    assert len(tables[0]) and tables[0].notna().any()
    import pandas as pd

    pd.testing.assert_series_equal(tables[0], tables[1], atol=ATOL, rtol=1e-4)


@pytest.mark.parametrize("style", STYLES)
def test_nnsight_language_model_on_an_export_saves_our_mlp_outputs(style, exports):
    """nnsight 0.8.1 under transformers 5.24 cannot guess the tokenizer of ANY local folder on its lazy (meta) load,
    so the snippet dispatches at once (or passes tokenizer=EXPORT)."""
    import nnsight

    from interp.hf.export import register_tapered_llama

    register_tapered_llama()   # the installed classes: the folder's own code is never run
    model, _, export = exports[style]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", nnsight.NNsightDeprecationWarning)  # LanguageModel -> TransformersModel
        lm = nnsight.LanguageModel(str(export), dispatch=True)
    assert type(lm._module).__module__ == f"interp.hf.tapered_{style}"
    tokens = random_tokens(16, batch=2, pos=12)
    names = [f"blocks.{layer}.hook_mlp_out" for layer in range(len(WIDTHS))]
    _, cache = _ours(model, tokens, names)
    layers = lm.model.layers if style == "llama" else lm.transformer.h
    saved = []
    with torch.no_grad(), lm.trace(tokens):
        for layer in range(len(WIDTHS)):
            saved.append(layers[layer].mlp.output.save())
    for name, out in zip(names, saved, strict=True):
        torch.testing.assert_close(out, cache[name], atol=ATOL, rtol=ATOL, msg=name)


def test_a_fresh_process_boots_an_export_through_the_entry_point_alone(exports):
    """No interp import before TransformerLens reads its entry points (`import interp` imports neither
    transformer_lens nor interp.hf.tl_export): the discovery imports our adapters without an override warning,
    and from then on boot_transformers(EXPORT) works for both styles."""
    code = """if True:
        import json, sys, warnings
        import interp, interp.hf, interp.probes
        assert "transformer_lens" not in sys.modules and "interp.hf.tl_export" not in sys.modules
        from transformer_lens.factories.architecture_adapter_factory import ArchitectureAdapterFactory
        from transformer_lens.model_bridge import TransformerBridge
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ArchitectureAdapterFactory.discover_entry_points()
        out = {"warnings": [str(w.message) for w in caught]}
        for path in sys.argv[1:]:
            bridge = TransformerBridge.boot_transformers(path, device="cpu")
            out[path] = [type(bridge.adapter).__name__, bridge.cfg.d_mlp_per_layer]
        print(json.dumps(out))
    """
    exports_ = [str(exports[style][2]) for style in STYLES]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-c", code, *exports_], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not [w for w in out["warnings"] if "Tapered" in w], out["warnings"]
    for style, path in zip(STYLES, exports_, strict=True):
        assert out[path] == [f"Tapered{'Llama' if style == 'llama' else 'GPT2'}ArchitectureAdapter", WIDTHS]
