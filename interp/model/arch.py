"""The block styles a TaperedLM is built in (ModelConfig.arch). Torch-free, so TrainConfig can offer them as
choices of `interp train --arch` without importing the model. The blocks themselves are interp.model.blocks."""

from __future__ import annotations

DEFAULT_ARCH = "llama"  # what every config written before `arch` existed was built as
ARCHS: dict[str, str] = {
    "llama": "Transformer++ (the paper's): pre-RMSNorm, RoPE, SwiGLU MLP, no biases, untied embeddings",
    "gpt2": "GPT-2: pre-LayerNorm with biases, learned absolute positions, GELU (tanh) MLP, biases on every "
            "projection, tied embeddings; attention only",
}
