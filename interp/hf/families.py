"""The decoder families of TransformerLens 4.3's adapter table, as tests/hf/test_families.py checks them.

Three constants partition interp.hf.tl_architectures() (tested): CHECKED, built tiny with random weights and checked
against plain float64 Hugging Face hooks (probe with the torch and nnsight backends, skip_block against the model
rebuilt without the layer; the fast tier also runs the causal rows, the ablation, eval and batch on some of them,
from local folders and a loopback hub); NOT_PROBEABLE, built but refused by the adapter table (site_map_for), with
the reason its error gives; NOT_BUILDABLE, that the tiny builder cannot make here, with why. The slow walk asserts
the two lists of left-out families are exactly the ones that fail, so none can go stale.

Why in the package: the family tests and the analyses that validate the engines on every family read one list.
What the README and docs/probes.md say about the families is rendered from here (readme_sentence, docs_block),
tested to be what they say, and written by `python scripts/family_list.py`. Import-light: no torch, no
transformers.
"""

from __future__ import annotations

from pathlib import Path

# built tiny, their probes equal plain float64 hooks (tests/hf/test_families.py)
CHECKED: tuple[str, ...] = (
    "AfmoeForCausalLM", "ApertusForCausalLM", "ArceeForCausalLM", "BitNetForCausalLM", "BloomForCausalLM",
    "CodeGenForCausalLM", "Cohere2ForCausalLM", "CohereForCausalLM", "Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM",
    "Exaone4ForCausalLM", "FalconForCausalLM", "FlexOlmoForCausalLM", "GPT2LMHeadModel", "GPTBigCodeForCausalLM",
    "GPTJForCausalLM", "GPTNeoXForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "GemmaForCausalLM",
    "Glm4ForCausalLM", "Glm4MoeForCausalLM", "GlmForCausalLM", "GptOssForCausalLM", "HunYuanDenseV1ForCausalLM",
    "Jais2ForCausalLM", "JetMoeForCausalLM", "LagunaForCausalLM", "LlamaForCausalLM", "MiniMaxM2ForCausalLM",
    "Ministral3ForCausalLM", "MistralForCausalLM", "MixtralForCausalLM", "ModernBertDecoderForCausalLM",
    "MptForCausalLM", "NanoChatForCausalLM", "NemotronForCausalLM", "OPTForCausalLM", "Olmo2ForCausalLM",
    "Olmo3ForCausalLM", "OlmoForCausalLM", "OlmoeForCausalLM", "Phi3ForCausalLM", "PhiForCausalLM",
    "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM", "SeedOssForCausalLM",
    "SmolLM3ForCausalLM", "StableLmForCausalLM", "Starcoder2ForCausalLM", "VaultGemmaForCausalLM", "XGLMForCausalLM",
)

_NO_CLASS = "transformers 5.24 has no causal LM of this name (remote code, TL-native, or not a decoder-only text LM)"
_TINY = "its tiny config needs sizes the generic builder does not set"
# the tiny builder (interp.hf.tiny, through tests/factories.py) cannot make these here
NOT_BUILDABLE: dict[str, str] = {
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
# built, but their blocks are no SiteMap: site_map_for refuses them with this reason (a part of its error)
NOT_PROBEABLE: dict[str, str] = {
    "BertLMHeadModel": "the norm follows the residual add (post-LN",
    **dict.fromkeys(("DeepseekV4ForCausalLM", "OlmoHybridForCausalLM", "RwkvForCausalLM"),
                    "a block whose residual terms are not module outputs"),
    **dict.fromkeys(("GraniteForCausalLM", "GraniteMoeForCausalLM"),
                    "each sublayer's output is scaled inline before the residual add"),
    **dict.fromkeys(("FalconMambaForCausalLM", "MambaForCausalLM", "NemotronHForCausalLM"), "state-space"),
    **dict.fromkeys(("FalconH1ForCausalLM", "Lfm2ForCausalLM"), "a hybrid model, some layers mix with"),
    **dict.fromkeys(("HrmTextForCausalLM", "OpenAIGPTLMHeadModel"),
                    "has no single decoder stack with a final norm and unembedding"),
}

BLOCK = "families"  # docs/probes.md's <!-- begin:families --> ... <!-- end:families -->
DOCS_PAGE = Path("docs") / "probes.md"
README = Path("README.md")
_WIDTH = 116


def _wrapped(text: str) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, _WIDTH, break_on_hyphens=False, break_long_words=False))


def readme_sentence() -> str:
    """README's sentence on the families (between its <!-- begin:families --> markers), with the counts."""
    total = len(CHECKED) + len(NOT_PROBEABLE) + len(NOT_BUILDABLE)
    return _wrapped(
        f"Of the {total} model classes in TransformerLens 4.3's adapter table, {len(CHECKED)} decoder families are "
        "built tiny with random weights: their probes (torch and nnsight backends) and skip_block rows equal plain "
        "float64 Hugging Face hooks, and `interp batch`, `interp eval` and `interp ablate` take each of them "
        "(`tests/hf/test_families.py`, `tests/cli/test_families_walk.py`); for Bloom, OPT and Mixtral every causal "
        "row and the ablation are checked against plain hooks too, from local folders and through a loopback hub. "
        f"{len(NOT_PROBEABLE)} are refused with the reason (post-LN BERT, scaled residuals, state-space, recurrent "
        f"and hybrid layers) and {len(NOT_BUILDABLE)} are not built here (no decoder-only causal LM in transformers, "
        "or sizes the tiny builder does not reach), so unchecked. The lists: `docs/probes.md`, \"Families\".")


def docs_block() -> str:
    """docs/probes.md's list of the families, checked, refused and not built, each with its reason."""
    refused: dict[str, list[str]] = {}
    for family, why in NOT_PROBEABLE.items():
        refused.setdefault(why, []).append(family)
    unbuilt: dict[str, list[str]] = {}
    for family, why in NOT_BUILDABLE.items():
        unbuilt.setdefault(why, []).append(family)
    lines = [_wrapped(f"**Checked ({len(CHECKED)})**, built tiny and equal to plain float64 hooks: "
                      + ", ".join(CHECKED) + "."), "",
             _wrapped(f"**Refused ({len(NOT_PROBEABLE)})**: `site_map_for` raises with the reason and a "
                      "`register_site_map` call to start from, with the model's own module paths."), "",
             "| reason (from the error) | families |", "|---|---|",
             *(f"| {why}... | {', '.join(sorted(names))} |" for why, names in refused.items()), "",
             _wrapped(f"**Not built here ({len(NOT_BUILDABLE)})**, so unchecked:"), "",
             "| why | families |", "|---|---|",
             *(f"| {why} | {', '.join(sorted(names))} |" for why, names in unbuilt.items())]
    return "\n".join(lines)


def write_docs(repo: Path) -> list[Path]:
    """Fill docs/probes.md's and README.md's families blocks under `repo` (interp.data.report.fill_block)."""
    from interp.data.report import fill_block

    fill_block(repo / DOCS_PAGE, BLOCK, docs_block())
    fill_block(repo / README, BLOCK, readme_sentence())
    return [repo / DOCS_PAGE, repo / README]
