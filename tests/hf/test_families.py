"""Every decoder family TransformerLens 4.3 has an adapter for, as a tiny random save_pretrained directory: the
SiteMap derived from TL's adapter (interp.hf.tl_adapters), the probe through a path (torch and nnsight backends)
against plain float64 HF hooks, the causal rows, the neuron ablation and `interp batch`.

The reference is independent of the SiteMap's norms: what layer l's MLP adds to the stream is the layer's output
minus its output with that MLP zeroed (the same input h_l), which holds for every block style (pre-norm, sandwich,
post-norm, parallel); attention's is the rest, resid_post - h_l - mlp.

NOT_BUILDABLE and NOT_PROBEABLE say why each other family is left out; the walk asserts they are exactly the
families that fail, so neither list can go stale.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from interp.hf import get_submodule, layer_modules, site_map_for
from interp.hf.tl_adapters import tl_architectures
from tests import factories

SEQ_LEN, TOKENS = 12, 48  # 4 sequences
METRICS = ("rho_mlp", "rho_attn", "rho_block")
TOL = 1e-6
THREE_LAYERS = {"num_hidden_layers": 3}  # the ablation's layer thirds need one layer each

_NO_CLASS = "transformers 5.24 has no causal LM of this name (remote code, TL-native, or not a decoder-only text LM)"
_TINY = "its tiny config needs sizes the generic builder does not set"
NOT_BUILDABLE = {
    **dict.fromkeys((
        "ASTForAudioClassification", "AudioFlamingo3ForConditionalGeneration", "BD3LM", "BaiChuanForCausalLM",
        "BaichuanForCausalLM", "BartForConditionalGeneration", "BertForMaskedLM", "BlenderbotForConditionalGeneration",
        "BloomModel", "DeiTForImageClassification", "DeiTModel", "DreamModel", "Emu3ForConditionalGeneration",
        "ExaoneForCausalLM", "Florence2ForConditionalGeneration", "GPT2LMHeadCustomModel", "Gemma1ForCausalLM",
        "GiddForDiffusionLM", "Glm4vForConditionalGeneration", "GlmAsrForConditionalGeneration", "HubertForCTC",
        "HubertModel", "HyenaDNAForCausalLM", "Idefics3ForConditionalGeneration", "InternLM2ForCausalLM",
        "JetMoEForCausalLM", "LEDForConditionalGeneration", "LLaDA2MoeModelLM", "LLaDAModelLM",
        "Llama4ForConditionalGeneration", "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration",
        "LlavaOnevisionForConditionalGeneration", "LongT5ForConditionalGeneration", "M2M100ForConditionalGeneration",
        "MBartForConditionalGeneration", "MPTForCausalLM", "MT5ForConditionalGeneration", "MarianMTModel",
        "MinGPTForCausalLM", "Mistral3ForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
        "MusicFlamingoForConditionalGeneration", "NanoGPTForCausalLM", "NeelSoluOldForCausalLM", "NeoForCausalLM",
        "NeoXForCausalLM", "OpenELMForCausalLM", "OuroForCausalLM", "PegasusForConditionalGeneration",
        "PhiMoEForCausalLM", "Qwen2AudioForConditionalGeneration", "Qwen2_5_VLForConditionalGeneration",
        "Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration", "QwenForCausalLM", "RWKV7ForCausalLM", "RavenForCausalLM",
        "RobertaForMaskedLM", "SwitchTransformersForConditionalGeneration", "T5ForConditionalGeneration",
        "T5Gemma2ForConditionalGeneration", "T5GemmaForConditionalGeneration", "T5WithLMHeadModel",
        "TransformerLensNative", "TransformerLensPretrain", "ViTForImageClassification", "ViTModel",
        "Wav2Vec2ForCTC", "Wav2Vec2ForPreTraining", "Wav2Vec2Model"), _NO_CLASS),
    **dict.fromkeys(("Gemma3ForConditionalGeneration", "Gemma4ForConditionalGeneration",
                     "Gemma4UnifiedForConditionalGeneration"),
                    "multimodal: the vision tower's default config is billions of parameters"),
    "Gemma3nForConditionalGeneration": "multimodal: needs the timm package",
    **dict.fromkeys(("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "Glm4MoeLiteForCausalLM",
                     "GlmMoeDsaForCausalLM", "YoutuForCausalLM"), f"multi-head latent attention: {_TINY} (LoRA ranks)"),
    **dict.fromkeys(("BambaForCausalLM", "Mamba2ForCausalLM", "GraniteMoeHybridForCausalLM", "Zamba2ForCausalLM"),
                    f"state-space layers: {_TINY} (mamba heads, layer types)"),
    **dict.fromkeys(("JambaForCausalLM", "Qwen3NextForCausalLM", "RecurrentGemmaForCausalLM"),
                    "hybrid linear-attention cache fails a plain forward at these sizes"),
    **dict.fromkeys(("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM", "Llama4ForCausalLM"),
                    f"{_TINY} (nested text config left at billions of parameters)"),
    "GPTNeoForCausalLM": f"{_TINY} (attention_types per layer)",
    "Gemma4ForCausalLM": f"{_TINY} (per-layer head_dim)",
    "Lfm2MoeForCausalLM": f"{_TINY} (layer types)",
}
# built, but their blocks are no SiteMap: site_map_for refuses them with (a part of) this reason
NOT_PROBEABLE = {
    **dict.fromkeys(("BertLMHeadModel", "XGLMForCausalLM"), "not one module of the layer"),
    **dict.fromkeys(("BloomForCausalLM", "DeepseekV4ForCausalLM", "OPTForCausalLM", "OlmoHybridForCausalLM",
                     "RwkvForCausalLM"), "residual terms are not module outputs"),
    **dict.fromkeys(("GraniteForCausalLM", "GraniteMoeForCausalLM"), "scaled inline"),
    **dict.fromkeys(("FalconMambaForCausalLM", "MambaForCausalLM", "NemotronHForCausalLM"), "state-space"),
    **dict.fromkeys(("FalconH1ForCausalLM", "Lfm2ForCausalLM"), "hybrid model"),
    **dict.fromkeys(("HrmTextForCausalLM", "OpenAIGPTLMHeadModel"), "no single decoder stack"),
    "MptForCausalLM": "adds the residual stream itself",  # TL maps it as a plain MLP: what TL gets wrong for us
}
PROBEABLE = [a for a in tl_architectures() if a not in NOT_BUILDABLE and a not in NOT_PROBEABLE]
# the issue's families, one per block style (GPT-NeoX both ways), in the fast tier
ISSUE = {"GPTNeoXForCausalLM": ({}, "parallel"),
         "GPTNeoXForCausalLM-sequential": ({"use_parallel_residual": False}, "pre_norm"),
         "Olmo2ForCausalLM": ({}, "post_norm"), "PhiForCausalLM": ({}, "parallel"),
         "Phi3ForCausalLM": ({}, "pre_norm"), "GPTJForCausalLM": ({}, "parallel"),
         "Gemma2ForCausalLM": ({}, "sandwich")}

pytestmark = pytest.mark.usefixtures("one_thread")


def _arch(family: str) -> str:
    return family.split("-")[0]


def _saved(root: Path, family: str, extra: dict | None = None) -> Path:
    """A save_pretrained directory of a tiny `family` model with a word tokenizer over its vocabulary."""
    model = factories.tiny_any_hf(_arch(family), **(extra or {}))
    tokenizer = factories.word_tokenizer(64, bos_token="w1", eos_token="w2", pad_token="[UNK]")
    return factories.save_pretrained_dir(root / family, model, tokenizer)


def _text(path: Path) -> Path:
    """Words of the tiny vocabulary, 8 per probed token: room for a tokenizer class that splits them (Qwen2's)."""
    rng = random.Random(0)
    path.write_text(" ".join(f"w{rng.randrange(3, 64)}" for _ in range(TOKENS * 8)))
    return path


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def _zeroed(_module, _args, out):
    """A forward hook: the module returns zeros (an MoE's (hidden, router scores): zero hidden)."""
    return (torch.zeros_like(out[0]), *out[1:]) if isinstance(out, tuple) else torch.zeros_like(out)


@torch.no_grad()
def reference(path: Path, text: Path) -> dict[str, list[float]]:
    """Per layer, each metric's mean over the probe's tokens (position 0 left out) in float64, from plain hooks on
    the decoder layers: mlp = out - out(this layer's MLP zeroed); attn = out - h - mlp."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float64, attn_implementation="eager",
                                                 experts_implementation="eager").eval()  # grouped_mm has no float64
    ids = AutoTokenizer.from_pretrained(path).encode(text.read_text(), add_special_tokens=False)
    seqs = torch.tensor(ids[:TOKENS]).reshape(TOKENS // SEQ_LEN, SEQ_LEN)
    layers = layer_modules(model)
    mlps = [get_submodule(layer, site_map_for(model).mlp) for layer in layers]
    pre, post = {}, {}
    handles = [h for l, layer in enumerate(layers) for h in (
        layer.register_forward_pre_hook(lambda _m, a, k, l=l: pre.__setitem__(l, a[0] if a else k["hidden_states"]),
                                        with_kwargs=True),
        layer.register_forward_hook(lambda _m, _a, o, l=l: post.__setitem__(l, _first(o).clone())))]
    try:
        model(seqs)
        clean_pre, clean_post = dict(pre), dict(post)
        skipped = {}
        for l, mlp in enumerate(mlps):
            zero = mlp.register_forward_hook(_zeroed)
            try:
                model(seqs)
            finally:
                zero.remove()
            skipped[l] = post[l]
    finally:
        for h in handles:
            h.remove()
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for l in range(len(layers)):
        h, o = clean_pre[l], clean_post[l]
        mlp = o - skipped[l]
        attn = o - h - mlp
        for name, a in (("rho_mlp", mlp), ("rho_attn", attn), ("rho_block", o - h)):
            out[name].append(F.cosine_similarity(a, h, dim=-1)[:, 1:].mean().item())
    return out


def check_probe(path: Path, text: Path) -> None:
    """The probe through the path, torch and nnsight backends, equals the float64 reference to TOL."""
    from interp.probes import probe

    want = reference(path, text)
    for backend in ("torch", "nnsight"):
        df = probe(str(path), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4, backend=backend,
                   metrics=METRICS, dtype="float64")
        got = df.pivot(index="layer", columns="metric", values="mean")
        for metric in METRICS:
            assert got[metric].tolist() == pytest.approx(want[metric], abs=TOL), (backend, metric)


# ------------------------------------------------------------------------------------------ the issue's families

@pytest.mark.parametrize("family", list(ISSUE))
def test_issue_family_probes_like_plain_hooks(family, tmp_path):
    extra, style = ISSUE[family]
    path = _saved(tmp_path, family, extra)
    assert site_map_for(factories.tiny_any_hf(_arch(family), **extra)).style == style
    check_probe(path, _text(tmp_path / "text.txt"))


@pytest.mark.parametrize("family", ["GPTNeoXForCausalLM", "Olmo2ForCausalLM", "PhiForCausalLM", "Phi3ForCausalLM"])
def test_issue_family_causal_rows_and_neuron_ablation(family, tmp_path):
    from interp import ablations as ab
    from interp.causal import probe

    path, text = _saved(tmp_path, family, THREE_LAYERS), _text(tmp_path / "text.txt")
    df = probe(str(path), text=str(text), tokens=TOKENS, seq_len=SEQ_LEN, batch_size=4, metrics=("rho_mlp",),
               causal=True)
    causal = df[df.metric.str.startswith("delta_loss_")]
    assert set(causal.metric) == {"delta_loss_skip_mlp", "delta_loss_mean_mlp", "delta_loss_skip_attn",
                                  "delta_loss_skip_block"}
    assert causal["mean"].notna().all() and len(causal) == 4 * 3
    cfg = ab.AblationConfig(model=str(path), text=str(text), seq_len=SEQ_LEN, score_sequences=2, eval_sequences=2,
                            batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=(1,))
    rows = ab.run_pretrained_ablation(cfg, log=None)
    neurons = rows[rows.kind == "neurons"]
    assert len(neurons) and (neurons.n_neurons_removed > 0).all() and rows["loss"].notna().all()


def test_gemma2_asks_for_eager_attention_when_sdpa_is_requested(capsys):
    from interp.hf.attention import attention_for

    config = factories.tiny_any_config("Gemma2ForCausalLM")
    assert attention_for(config, "sdpa") == "eager" and "Gemma2ForCausalLM has no sdpa" in capsys.readouterr().err
    assert attention_for(factories.tiny_any_config("LlamaForCausalLM"), "sdpa") == "sdpa"
    assert attention_for(config, "eager") == "eager"


def test_gemma2_ablation_runs_under_the_default_sdpa(tmp_path):
    from interp import ablations as ab

    path, text = _saved(tmp_path, "Gemma2ForCausalLM", THREE_LAYERS), _text(tmp_path / "text.txt")
    cfg = ab.AblationConfig(model=str(path), text=str(text), seq_len=SEQ_LEN, score_sequences=2, eval_sequences=2,
                            batch_size=2, fractions=(0.5,), seeds=(0,), skip_layers=())
    assert ab.run_pretrained_ablation(cfg, log=None)["loss"].notna().all()


def test_fused_gate_up_and_experts_say_so():
    phi3 = site_map_for(factories.tiny_any_hf("Phi3ForCausalLM"))
    assert phi3.mlp_in == ("gate_up_proj",) and phi3.mlp_in_fused and phi3.mlp_down == "down_proj"
    mixtral = factories.tiny_any_hf("MixtralForCausalLM")
    assert site_map_for(mixtral).mlp_down is None
    from interp.hf import mlp_down_modules

    with pytest.raises(ValueError, match="no single down projection"):
        mlp_down_modules(mixtral)


def test_batch_cli_over_three_families(tmp_path):
    import pandas as pd

    from interp.cli import main

    dirs = [_saved(tmp_path, f) for f in ("GPTNeoXForCausalLM", "Olmo2ForCausalLM", "PhiForCausalLM")]
    out = tmp_path / "batch.parquet"
    assert main(["batch", *map(str, dirs), "--out", str(out), "--text", str(_text(tmp_path / "text.txt")),
                 "--tokens", str(TOKENS), "--seq-len", str(SEQ_LEN)]) == 0
    df = pd.read_parquet(out)
    assert df.groupby("model").layer.nunique().tolist() == [2, 2, 2]


# ------------------------------------------------------------------------------------------ every TL family

@pytest.mark.slow
def test_the_lists_of_left_out_families_are_exactly_what_fails():
    not_built, refused = {}, {}
    for arch in tl_architectures():
        try:
            model = factories.tiny_any_hf(arch)
            with torch.no_grad():
                model(torch.randint(3, 64, (1, 6)))
        except Exception as err:  # noqa: BLE001 - any failure to build counts; the dict says why
            not_built[arch] = f"{type(err).__name__}: {err}"
            continue
        try:
            site_map_for(model)
        except ValueError as err:
            refused[arch] = str(err)
    assert sorted(not_built) == sorted(NOT_BUILDABLE)
    assert sorted(refused) == sorted(NOT_PROBEABLE)
    for arch, reason in NOT_PROBEABLE.items():
        assert reason in refused[arch] and "register_site_map" in refused[arch], (arch, refused[arch])


@pytest.mark.slow
@pytest.mark.parametrize("family", [a for a in PROBEABLE if a not in ISSUE])
def test_every_tl_family_probes_like_plain_hooks(family, tmp_path):
    check_probe(_saved(tmp_path, family), _text(tmp_path / "text.txt"))


def _layer_dropped(model, layer: int):
    """A float64 copy of `model` with decoder layer `layer` deleted from its layer list (plain HF layer-drop, no
    hook): the independent reference of skip_block."""
    import copy

    from interp.hf import root_and_sites

    m = copy.deepcopy(model)
    root, sites = root_and_sites(m)
    stack = root.get_submodule(sites.layers)
    kept = [block for i, block in enumerate(stack) if i != layer]
    stack._modules.clear()
    for i, block in enumerate(kept):
        stack.add_module(str(i), block)
    return m


@pytest.mark.slow
@pytest.mark.parametrize("family", PROBEABLE)
def test_every_tl_family_skip_block_equals_the_layer_dropped(family):
    """delta_loss_skip_block (the block's hook returns its input) = the loss of the model rebuilt without that
    layer, in float64, for every family the adapter table knows (issue #34)."""
    from interp.ablations import layer_effects
    from interp.ablations.loss import sequence_losses

    model = factories.tiny_any_hf(_arch(family), **THREE_LAYERS)
    if model._can_set_experts_implementation():
        model.set_experts_implementation("eager")  # grouped_mm has no float64
    model = model.double().eval()
    seqs = list(torch.randint(3, 64, (4, SEQ_LEN), generator=torch.Generator().manual_seed(0)).split(2))
    effects = layer_effects(model, seqs, kinds=("skip_block",))
    for layer in range(3):
        dropped = sequence_losses(_layer_dropped(model, layer), seqs)
        torch.testing.assert_close(effects.ablated["skip_block"][layer], dropped, atol=1e-6, rtol=0)
    assert (effects.deltas("skip_block").abs().max(1).values > 1e-6).all()  # every removal changes the loss
