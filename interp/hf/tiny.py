"""Tiny random models of any decoder family transformers has, by class name, with a word tokenizer and text.

Why in the package: the family tests (tests/hf/test_families.py, through tests/factories.py) and the cross-engine
validation table (analyses/engine_validation.py, which `interp figures` runs without the tests) build the same
models from the same list (interp.hf.families), so the builder lives here, once. A family is an HF causal-LM class
name, or a name in VARIANTS (a class with a config change that gives it another block style).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from torch import nn

# Every architecture transformers can build from a config (tiny_any_hf): these sizes, under whatever name its config
# class uses (attribute_map: GPT-2's n_embd, ...); a field the class lacks is left at its default.
ANY_SIZES: dict[str, Any] = dict(
    vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, head_dim=8, rotary_dim=4, pad_token_id=0, bos_token_id=1,
    eos_token_id=2, num_experts=4, num_local_experts=4, n_routed_experts=4, num_experts_per_tok=2,
    moe_intermediate_size=16, shared_expert_intermediate_size=16, ffn_hidden_size=64, n_inner=64,
    intermediate_size_mlp=64)
TINY_ANY_MAX_PARAMS = 2_000_000  # a config some size did not reach (a nested default) is refused, not allocated
WORD_VOCAB = 64                  # word_tokenizer's default: w1 .. w63 and [UNK]; ANY_SIZES' vocab_size

# name -> (HF class, config change): a family that is another block style of a class in TL's table
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "GPTNeoXForCausalLM-sequential": ("GPTNeoXForCausalLM", {"use_parallel_residual": False}),
}


def tiny_any_config(arch: str, **extra: Any):
    """The transformers config of a tiny `arch` (any causal LM transformers has, by class name): ANY_SIZES for
    the fields its config class has, then `extra`. ValueError when transformers has no such causal LM."""
    from transformers import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    model_type = next((t for t, name in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items() if name == arch), None)
    if model_type not in CONFIG_MAPPING:
        raise ValueError(f"transformers has no causal LM class {arch!r}")
    cls = CONFIG_MAPPING[model_type]
    default = cls()
    sizes = {k: v for k, v in {**ANY_SIZES, **extra}.items() if hasattr(default, k)}
    read_only = [k for k in sizes if isinstance(getattr(cls, k, None), property) and getattr(cls, k).fset is None]
    return cls(**{k: v for k, v in sizes.items() if k not in read_only})  # Falcon's head_dim is computed


def tiny_any_hf(arch: str, seed: int = 0, *, attn_implementation: str = "eager", **extra: Any) -> nn.Module:
    """A random tiny causal LM of any architecture transformers has (tiny_any_config), seeded, in eval mode."""
    from transformers import AutoModelForCausalLM

    config = tiny_any_config(arch, **extra)
    with torch.device("meta"):  # count first: a default left at full size would take gigabytes
        n_params = sum(p.numel() for p in AutoModelForCausalLM.from_config(config).parameters())
    if n_params > TINY_ANY_MAX_PARAMS:
        raise ValueError(f"{arch}: {n_params:,} parameters at the tiny sizes (a default ANY_SIZES does not reach)")
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation).eval()
    if type(model).__name__ != arch:
        raise ValueError(f"{arch!r} builds as {type(model).__name__}")
    return model


def word_level(vocab: dict[str, int]):
    """A whitespace-split word-level tokenizers.Tokenizer with "[UNK]" for unknown words."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return tok


def word_tokenizer(vocab_size: int = WORD_VOCAB, **special_tokens: str):
    """An HF fast tokenizer over the words w1 .. w{vocab_size-1} ("[UNK]" = 0); special_tokens such as
    bos_token="[UNK]" are passed on (the bridge and nnsight need a BOS/EOS)."""
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{f"w{i}": i for i in range(1, vocab_size)}}
    return PreTrainedTokenizerFast(tokenizer_object=word_level(vocab), unk_token="[UNK]", **special_tokens)


def word_text(n_words: int, seed: int = 0, vocab_size: int = WORD_VOCAB) -> str:
    """`n_words` random words of word_tokenizer's vocabulary (w3 .. w{vocab_size-1}: no BOS/EOS), seeded."""
    rng = random.Random(seed)
    return " ".join(f"w{rng.randrange(3, vocab_size)}" for _ in range(n_words))


# ------------------------------------------------------------------------------------------ families

def family_arch(family: str) -> tuple[str, dict[str, Any]]:
    """(HF class, config change) of a family name: a VARIANTS name, else the class itself."""
    arch, extra = VARIANTS.get(family, (family, {}))
    return arch, dict(extra)


@torch.no_grad()
def vary_constants(model: nn.Module, scale: float = 0.1, seed: int = 0) -> nn.Module:
    """`model` with every parameter that transformers initialises to one value (norm gains 1 or Gemma's 0, biases
    0) drawn around it (+ scale x N(0, 1)): a uniform gain only rescales each token, so a site read on the wrong
    side of a norm would leave every cosine unchanged; with varied gains it does not."""
    generator = torch.Generator().manual_seed(seed)
    for p in model.parameters():
        if p.numel() > 1 and bool((p == p.flatten()[0]).all()):
            p.add_(scale * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return model


def save_tiny(folder: Path, family: str, seed: int = 0, **sizes: Any) -> Path:
    """A save_pretrained directory of `family`'s tiny model (its constant-initialised parameters varied:
    vary_constants) with word_tokenizer beside it (BOS w1, EOS w2, pad [UNK]), at `folder`: what `interp probe` /
    `interp batch` take as a model path."""
    arch, extra = family_arch(family)
    model = vary_constants(tiny_any_hf(arch, seed, **extra, **sizes), seed=seed)
    model.save_pretrained(folder)
    word_tokenizer(bos_token="w1", eos_token="w2", pad_token="[UNK]").save_pretrained(folder)
    return Path(folder)
