"""Loading a Hugging Face model goes wrong in one clear line, never a traceback, a 200-name list or a minute of
retries: a TransformerLens bridge over an architecture it has no adapter for (our `interp export` folders have one
now, interp.hf.tl_export: `interp probe --backend transformer_lens` on them works), an
attention implementation that cannot be used (flash_attention_2 without flash-attn; any but sdpa/eager on one of
our checkpoints), a hub id missing from the local cache (fails at once, while a cached one loads), and sequences
longer than the model's context (interp.hf.context_length / check_fits). Tiny models only: ~20 s in all."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from interp import hf
from interp._util.errors import InputError
from interp.cli import main
from tests.factories import (
    as_loaded,
    random_tokens,
    save_pretrained_dir,
    tiny_checkpoint,
    tiny_config,
    tiny_hf,
    tiny_hf_config,
    tiny_lm,
    word_tokenizer,
    word_tokenizer_json,
)

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[2]
WORDS = "the quick brown fox jumps over lazy dog and runs far away".split()
N_CTX = 32
STYLES = ("llama", "gpt2")


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, tuple[Path, Path, Path]]:
    """style -> (checkpoint dir, its `interp export` folder, a text file): tiny runs of both exportable block
    styles with per-layer MLP widths and a context of N_CTX positions."""
    root = tmp_path_factory.mktemp("exports")
    tok = word_tokenizer_json(root / "tokenizer.json", WORDS, specials=("[UNK]", "<|endoftext|>"))
    text = root / "text.txt"
    text.write_text(" ".join(WORDS[i % 7] + " " + WORDS[(i * 5) % 12] for i in range(300)))
    made = {}
    for style in STYLES:
        model = tiny_lm(cfg=tiny_config(vocab_size=16, d_model=16, n_heads=2, d_mlp=[48, 32, 16], n_ctx=N_CTX,
                                        init_std=0.2, arch=style))
        run = tiny_checkpoint(root / f"run_{style}", model, tokenizer=tok)
        assert main(["export", str(run), "--hf", str(root / f"hf_{style}")]) == 0
        made[style] = (run, root / f"hf_{style}", text)
    return made


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("Loading weights")]
    assert len(lines) == 1 and "Traceback" not in err, err[-3000:]
    return lines[0]


# ------------------------------------------------------------------------------------------ TransformerLens bridge

@pytest.mark.parametrize("style", STYLES)
def test_transformer_lens_on_an_export_probes_as_on_its_checkpoint(style, exports, tmp_path, capsys):
    """Once refused (TL had no adapter for per-layer MLP widths); interp.hf.tl_export's adapters make the export's
    `--backend transformer_lens` probe the checkpoint's (tests/hf/test_export_tools.py: hooks, nnsight)."""
    import pandas as pd

    run, export, text = exports[style]
    tables = {}
    for spec in (run, export):
        out = tmp_path / f"{spec.name}.parquet"
        assert main(["probe", "--model", str(spec), "--text", str(text), "--tokens", "64", "--seq-len", "16",
                     "--backend", "transformer_lens", "--out", str(out)]) == 0
        tables[spec] = pd.read_parquet(out).set_index(["layer", "metric"])["mean"]
    assert "Traceback" not in capsys.readouterr().err
    pd.testing.assert_series_equal(tables[run], tables[export], atol=1e-5, rtol=1e-4)


def test_any_architecture_without_an_adapter_is_one_short_error():
    model = tiny_hf("LlamaForCausalLM")
    loaded = as_loaded(model, word_tokenizer(bos_token="[UNK]", eos_token="[UNK]"), name="novel")
    model.__class__ = type("NovelForCausalLM", (type(model),), {})  # a class and model_type TL does not know
    model.config.model_type = "novel"
    with pytest.raises(InputError) as err:
        hf.to_transformer_bridge(loaded)
    assert "TransformerLens has no adapter for NovelForCausalLM" in str(err.value)
    assert "--backend torch or nnsight" in str(err.value) and len(str(err.value)) < 200


# ------------------------------------------------------------------------------------------ attn_implementation

no_flash_attn = pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None,
                                   reason="flash-attn is installed: flash_attention_2 may load")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    return save_pretrained_dir(tmp_path_factory.mktemp("llama"), tiny_hf("LlamaForCausalLM"), word_tokenizer())


@no_flash_attn
@pytest.mark.parametrize("impl", ["flash_attention_2", "flash_attention_3"])
def test_flash_attention_without_its_package_names_the_field_and_the_fix(impl, llama_dir):
    with pytest.raises(InputError, match=rf"^attn_implementation: '{impl}' cannot be used: .*installed.*"
                                         r"\(use sdpa or eager; flash_attention_2 needs the flash-attn package"):
        hf.load_pretrained(str(llama_dir), attn_implementation=impl)


def test_an_attention_the_architecture_lacks_names_the_field(exports):
    with pytest.raises(InputError, match=r"attn_implementation: 'flex_attention' cannot be used: "
                                         r"TaperedGPT2LMHeadModel does not support .*\(use sdpa or eager"):
        hf.load_pretrained(str(exports["gpt2"][1]), attn_implementation="flex_attention")


@no_flash_attn
def test_ablate_cli_with_flash_attention_is_one_line(exports, llama_dir, tmp_path, capsys):
    text = exports["llama"][2]
    argv = ["ablate", "pretrained", "--model", str(llama_dir), "--text", str(text), "--seq-len", "16",
            "--score-sequences", "2", "--eval-sequences", "2", "--batch-size", "2", "--fractions", "0.5",
            "--seeds", "0", "--groups", "late", "--skip-layers", "0", "--attn-implementation", "flash_attention_2",
            "--figures-dir", str(tmp_path)]
    assert main(argv) == 2
    line = _one_line_error(capsys)
    assert "attn_implementation: 'flash_attention_2' cannot be used" in line and "use sdpa or eager" in line
    assert not list(tmp_path.iterdir())


def test_a_checkpoint_refuses_an_attention_it_cannot_honour(exports):
    run = exports["llama"][0]
    ref = hf.resolve_model(run)
    with pytest.raises(InputError, match=r"attn_implementation: 'flash_attention_2' applies to Hugging Face models "
                                         r"only.*\(use sdpa"):
        ref.load(attn_implementation="flash_attention_2")
    for impl in (None, "sdpa", "eager"):  # what our attention computes anyway: accepted, the same model
        model = ref.load(attn_implementation=impl)
        assert type(model).__name__ == "TaperedLM" and not model.training


# ------------------------------------------------------------------------------------------ hub ids: the local cache

_HUB_SCRIPT = textwrap.dedent("""
    import json, sys, time
    import torch
    t0 = time.perf_counter()
    from interp import hf
    from interp.cli import main
    out = {"import_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    loaded = hf.load_pretrained("tiny-org/tiny-llama")
    out["cached_s"] = time.perf_counter() - t0
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        out["logits"] = loaded.model(ids).logits[0, -1, :4].tolist()
    out["vocab_w5"] = loaded.tokenizer.get_vocab()["w5"]
    for what, call in (("model", hf.load_pretrained), ("tokenizer", hf.load_tokenizer)):
        t0 = time.perf_counter()
        try:
            call("nosuch-org/nosuch-model")
        except (OSError, ValueError) as err:
            out[f"missing_{what}"] = str(err)
        out[f"missing_{what}_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    out["cli_rc"] = main(["probe", "--model", "nosuch-org/nosuch-model", "--text", sys.argv[1], "--tokens", "64",
                          "--seq-len", "16", "--out", sys.argv[2]])
    out["cli_s"] = time.perf_counter() - t0
    print("RESULT" + json.dumps(out))
""")


def _fake_hub_cache(hub: Path, repo_id: str, files: Path) -> None:
    """The layout huggingface_hub downloads into: models--org--name/{refs/main, snapshots/<commit>/files}."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for f in files.iterdir():
        (snapshot / f.name).write_bytes(f.read_bytes())


def test_hub_ids_use_the_local_cache_and_a_missing_one_fails_at_once(tmp_path, exports):
    """Without HF_HUB_OFFLINE and with an unreachable hub, a missing hub id used to retry for ~50 s before its
    error (11 "Retrying in Ns" lines); now the one request that finds the hub unreachable falls back to the cache
    (saying so): a cached hub model loads, and a missing one fails at once with one line naming the network."""
    model = tiny_hf("LlamaForCausalLM")
    save_pretrained_dir(tmp_path / "saved", model, word_tokenizer())
    _fake_hub_cache(tmp_path / "hub", "tiny-org/tiny-llama", tmp_path / "saved")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME")}
    env.update(HF_HOME=str(tmp_path / "hf_home"), HF_HUB_CACHE=str(tmp_path / "hub"),
               HF_ENDPOINT="http://127.0.0.1:9",  # nothing listens: a request is refused (and retried), never sent out
               PYTHONPATH=str(REPO), INTERP_CACHE_DIR=str(tmp_path / "interp_cache"), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _HUB_SCRIPT, str(exports["llama"][2]), str(tmp_path / "p.parquet")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.split("RESULT")[-1])
    assert "Retrying" not in proc.stderr, proc.stderr[-2000:]
    # the cached hub model is the saved one
    with torch.no_grad():
        expected = model(torch.tensor([[1, 2, 3, 4]])).logits[0, -1, :4].tolist()
    assert out["logits"] == pytest.approx(expected, abs=1e-6) and out["vocab_w5"] == 5
    # no wall-clock bound (a busy machine exceeds any): the ~50 s retry storm shows as its "Retrying" lines, above
    for what in ("model", "tokenizer"):
        message = out[f"missing_{what}"]
        assert "'nosuch-org/nosuch-model' at revision 'main' could not be fetched: ConnectError" in message
        assert "check the network" in message and "HF_HUB_OFFLINE=1" in message
    assert "the hub is unreachable" in proc.stderr and "using the cached commit 0123456789ab" in proc.stderr
    assert out["cli_rc"] == 2, out
    assert "interp probe: hub model 'nosuch-org/nosuch-model' at revision 'main' could not be fetched" in proc.stderr
    assert not (tmp_path / "p.parquet").exists()


# ------------------------------------------------------------------------------------------ context length

@pytest.mark.parametrize("arch, field", [("GPT2LMHeadModel", "n_positions"),
                                         ("LlamaForCausalLM", "max_position_embeddings"),
                                         ("Gemma3ForCausalLM", "max_position_embeddings")])
def test_context_length_of_tiny_hf_configs_and_models(arch, field):
    config = tiny_hf_config(arch, n_ctx=48)
    assert hf.context_length(config) == 48
    assert json.loads(config.to_json_string())[field] == 48       # read from the field config.json stores
    model = tiny_hf(arch, n_ctx=48)
    loaded = as_loaded(model, name=f"tiny-{arch}")
    for obj in (config, model, loaded):
        assert hf.context_length(obj) == 48
        hf.check_fits(obj, 48)                                    # exactly the context fits
        hf.check_fits(obj, 1)
    with pytest.raises(InputError) as err:
        hf.check_fits(loaded, 49)
    assert str(err.value) == (f"seq_len: 49 tokens per sequence exceed the context of model 'tiny-{arch}': 48 "
                              f"positions (config {field}) (use seq_len <= 48)")
    with pytest.raises(ValueError, match=r"^tokens: 100 tokens .* 48 positions .*\(use tokens <= 48\)"):
        hf.check_fits(model, 100, field="tokens")


def test_context_length_of_a_multimodal_gemma3_config_is_its_language_model():
    from transformers import Gemma3Config

    text = tiny_hf_config("Gemma3ForCausalLM", n_ctx=40)
    assert hf.context_length(Gemma3Config(text_config=text.to_dict())) == 40


def test_context_length_unknown_is_none_and_anything_fits():
    from transformers import PretrainedConfig

    config = PretrainedConfig()
    assert hf.context_length(config) is None
    hf.check_fits(config, 10**9)
    for bad in (0, -3, 2.5, "64", True):
        with pytest.raises(InputError, match=r"^seq_len: .* is not a positive number of tokens"):
            hf.check_fits(config, bad)


def test_context_length_of_our_taperedlm():
    model = tiny_lm(cfg=tiny_config(n_ctx=24))
    assert hf.context_length(model) == 24
    with pytest.raises(InputError, match=r"context of model 'TaperedLM': 24 positions \(ModelConfig.n_ctx\)"):
        hf.check_fits(model, 25)


@pytest.mark.parametrize("style", STYLES)
def test_check_fits_on_a_loaded_export(style, exports):
    """What check_fits guards: the GPT-2 export crashes inside its position embedding beyond its context, and the
    Llama export runs on positions it was never trained on without a word."""
    loaded = hf.load_pretrained(str(exports[style][1]))
    assert isinstance(loaded, hf.LoadedModel) and hf.context_length(loaded) == N_CTX
    hf.check_fits(loaded, N_CTX)
    with pytest.raises(InputError, match=rf"^seq_len: 64 tokens per sequence exceed the context of model "
                                         rf"'{exports[style][1]}': {N_CTX} positions .*\(use seq_len <= {N_CTX}\)"):
        hf.check_fits(loaded, 64)
    tokens = random_tokens(16, batch=1, pos=2 * N_CTX)
    with torch.no_grad():
        if style == "gpt2":
            with pytest.raises(IndexError):
                loaded.model(tokens)
        else:
            assert loaded.model(tokens).logits.shape == (1, 2 * N_CTX, 16)
