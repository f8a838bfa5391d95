"""Builders of the tiny things tests run on: TaperedLMs, random HF models, tokenizers, checkpoint and
save_pretrained directories, a synthetic corpus and a private cache.

Plain functions (no pytest), so module-scoped fixtures, helpers and torchrun worker scripts can call them;
tests/conftest.py exposes the ones that write files as factory fixtures rooted at tmp_path. Every builder is
seeded and takes overrides, so a test states only what differs from the defaults.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from interp.hf.tiny import tiny_any_config, tiny_any_hf, word_level, word_tokenizer  # noqa: F401 - re-exported
from interp.model import ModelConfig, TaperedLM

SMOLLM2_VOCAB = 49152                # SmolLM2's tokenizer (interp.hf.load_tokenizer("smollm2-135m"))


# ------------------------------------------------------------------------------------------ TaperedLM

def tiny_config(**overrides: Any) -> ModelConfig:
    """vocab 64, d_model 32, 4 heads, d_mlp [96, 64, 32], n_ctx 32; n_layers follows d_mlp unless given."""
    kwargs: dict[str, Any] = dict(vocab_size=64, d_model=32, n_heads=4, d_mlp=[96, 64, 32], n_ctx=32)
    kwargs.update(overrides)
    kwargs["d_mlp"] = list(kwargs["d_mlp"])
    kwargs.setdefault("n_layers", len(kwargs["d_mlp"]))
    return ModelConfig(**kwargs)


# The smallest shape the tests use (2 layers, d_model 16, n_ctx 8): tiny_lm(**TWO_LAYERS).
TWO_LAYERS: dict[str, Any] = dict(d_model=16, n_heads=2, d_mlp=[48, 16], n_ctx=8)


def tiny_lm(seed: int = 0, cfg: ModelConfig | None = None, *, train: bool = False, **overrides: Any) -> TaperedLM:
    """A TaperedLM initialised under torch.manual_seed(seed), of `cfg` or tiny_config(**overrides); eval
    mode unless train=True."""
    if cfg is not None and overrides:
        raise TypeError("tiny_lm: pass either cfg or config overrides, not both")
    torch.manual_seed(seed)
    model = TaperedLM(cfg if cfg is not None else tiny_config(**overrides))
    return model.train(train)


def random_tokens(vocab_size: int, batch: int = 2, pos: int = 16, seed: int = 1) -> torch.Tensor:
    """[batch, pos] token ids drawn from their own generator (the global RNG is left alone)."""
    return torch.randint(0, vocab_size, (batch, pos), generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------ Hugging Face models

_HF_CONFIGS = {  # architecture -> its transformers config class
    "LlamaForCausalLM": "LlamaConfig", "MistralForCausalLM": "MistralConfig", "Qwen2ForCausalLM": "Qwen2Config",
    "Qwen3ForCausalLM": "Qwen3Config", "Gemma2ForCausalLM": "Gemma2Config",
    "Gemma3ForCausalLM": "Gemma3TextConfig", "GPT2LMHeadModel": "GPT2Config",
}
_EXPLICIT_HEAD_DIM = ("Qwen3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM")  # defaults are 128 / 256


def tiny_hf_config(arch: str, *, vocab_size: int = 64, d_model: int = 32, d_mlp: int | None = 64,
                   n_layers: int = 3, n_heads: int = 4, n_kv_heads: int = 2, n_ctx: int = 64, **extra: Any):
    """The transformers config of a tiny `arch` model, in one vocabulary for every architecture
    (GPT-2 has no grouped KV heads; d_mlp=None keeps its default 4 * d_model); `extra` goes to the config."""
    import transformers

    if arch not in _HF_CONFIGS:
        raise ValueError(f"tiny_hf_config: no tiny config for {arch!r}; add it to _HF_CONFIGS ({sorted(_HF_CONFIGS)})")
    cls = getattr(transformers, _HF_CONFIGS[arch])
    if arch == "GPT2LMHeadModel":
        return cls(vocab_size=vocab_size, n_embd=d_model, n_inner=d_mlp, n_layer=n_layers, n_head=n_heads,
                   n_positions=n_ctx, **extra)
    if arch in _EXPLICIT_HEAD_DIM:
        extra.setdefault("head_dim", d_model // n_heads)
    return cls(vocab_size=vocab_size, hidden_size=d_model, intermediate_size=d_mlp, num_hidden_layers=n_layers,
               num_attention_heads=n_heads, num_key_value_heads=n_kv_heads, max_position_embeddings=n_ctx, **extra)


def tiny_hf(arch: str = "LlamaForCausalLM", seed: int = 0, *, attn_implementation: str = "eager",
            **config: Any) -> nn.Module:
    """A random tiny HF causal LM of `arch` (tiny_hf_config(arch, **config)), seeded, in eval mode."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_hf_config(arch, **config),
                                             attn_implementation=attn_implementation).eval()
    assert type(model).__name__ == arch, (type(model).__name__, arch)
    return model


# tiny_any_config / tiny_any_hf (every architecture transformers can build, tiny) and word_tokenizer live in the
# package (interp.hf.tiny), where analyses/engine_validation.py builds the same models without the tests.


def as_loaded(model: nn.Module, tokenizer: Any = None, name: str = "tiny", source: str = "test"):
    """Wrap an in-memory HF model as the LoadedModel that load_pretrained would return."""
    from interp.hf import LoadedModel, site_map_for

    return LoadedModel(model=model, tokenizer=tokenizer, name=name, source=source,
                       architecture=type(model).__name__, sites=site_map_for(model))


# ------------------------------------------------------------------------------------------ tokenizers

def word_tokenizer_json(path: Path, words: Sequence[str],
                        specials: Sequence[str] = ("<|endoftext|>", "[UNK]")) -> Path:
    """A tokenizer.json (what a checkpoint's train.tokenizer may name): `specials` first, then `words`."""
    vocab = {w: i for i, w in enumerate([*specials, *words])}
    path.parent.mkdir(parents=True, exist_ok=True)
    word_level(vocab).save(str(path))
    return path


# ------------------------------------------------------------------------------------------ directories

def tiny_checkpoint(path: Path, model: TaperedLM | None = None, config: dict | None = None, *,
                    tokenizer: str | Path | None = None) -> Path:
    """One of our checkpoint dirs (save_checkpoint) of `model` (default tiny_lm()); `tokenizer` (a name or
    tokenizer.json) goes into the config's train block, so resolve_model(path).load_tokenizer() rebuilds it."""
    from interp.training.checkpoints import save_checkpoint

    config = dict(config or {})
    if tokenizer is not None:
        config = {"train": {"tokenizer": str(tokenizer), **config.pop("train", {})}, **config}
    save_checkpoint(path, model if model is not None else tiny_lm(), config)
    return path


def save_pretrained_dir(path: Path, model: nn.Module, tokenizer: Any = None) -> Path:
    """A Hugging Face directory as `save_pretrained` writes it: the model, and the tokenizer beside it."""
    model.save_pretrained(path)
    if tokenizer is not None:
        tokenizer.save_pretrained(path)
    return path


# ------------------------------------------------------------------------------------------ corpus and cache

WORDS = ("the cat dog bird sat ran flew on over under a an big small red green old house tree river "
         "and with then because she he they saw found").split()


def write_corpus(folder: Path, n_docs: int, sentences: int, words: Sequence[str] = WORDS,
                 sentence_len: int | tuple[int, int] = (4, 10), seed: int = 0) -> Path:
    """`n_docs` text files of `sentences` random sentences each (deterministic for a seed)."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    lo, hi = (sentence_len, sentence_len) if isinstance(sentence_len, int) else sentence_len
    for i in range(n_docs):
        text = " ".join(" ".join(rng.choice(words) for _ in range(rng.randint(lo, hi) if lo != hi else lo))
                        .capitalize() + "." for _ in range(sentences))
        (folder / f"doc{i:02d}.txt").write_text(text)
    return folder


@contextlib.contextmanager
def private_cache(path: Path) -> Iterator[Path]:
    """Point INTERP_CACHE_DIR at `path` for the duration (tokenizers and token files go there)."""
    old = os.environ.get("INTERP_CACHE_DIR")
    os.environ["INTERP_CACHE_DIR"] = str(path)
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("INTERP_CACHE_DIR", None)
        else:
            os.environ["INTERP_CACHE_DIR"] = old
