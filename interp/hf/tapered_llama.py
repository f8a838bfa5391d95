"""A tapered Transformer++ as a Hugging Face model: Llama with one SwiGLU width per layer.

Self-contained on purpose (imports only torch and transformers, never `interp`): `interp export` copies
this file into the exported folder as the modeling code that config.json's `auto_map` names, so
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` works on any machine with
transformers. Inside the toolkit the same classes are registered with the Auto classes
(interp.hf.export.register_tapered_llama), so our own loaders never execute a folder's copy.

Why Llama: our attention mixer is Llama's attention (RoPE rotate-half, no biases, n_kv_heads = n_heads,
scale 1/sqrt(d_head)), our norms are RMSNorm and our MLP is SwiGLU with Llama's projection names. Only
`intermediate_size` differs: Llama has one, a tapered model has `intermediate_sizes[l]` per layer.
"""

from __future__ import annotations

import copy
import warnings

from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaMLP


class TaperedLlamaConfig(LlamaConfig):
    """LlamaConfig plus `intermediate_sizes`: layer l's SwiGLU width (intermediate_size = their mean)."""

    model_type = "tapered_llama"

    def __init__(self, intermediate_sizes: list[int] | None = None, **kwargs):
        super().__init__(**kwargs)
        sizes = [int(w) for w in (intermediate_sizes or [self.intermediate_size] * self.num_hidden_layers)]
        if len(sizes) != self.num_hidden_layers:
            raise ValueError(f"TaperedLlamaConfig: {len(sizes)} intermediate_sizes for "
                             f"num_hidden_layers={self.num_hidden_layers}; give one width per layer")
        self.intermediate_sizes = sizes


class TaperedLlamaForCausalLM(LlamaForCausalLM):
    """LlamaForCausalLM whose layer l has an MLP of width config.intermediate_sizes[l]."""

    config_class = TaperedLlamaConfig

    def __init__(self, config: TaperedLlamaConfig):
        super().__init__(config)
        for layer, width in zip(self.model.layers, config.intermediate_sizes):
            if width != layer.mlp.intermediate_size:
                with warnings.catch_warnings():   # width 0, a layer without an MLP: torch warns that
                    warnings.filterwarnings("ignore", message="Initializing zero-element tensors")   # init is a no-op
                    layer.mlp = LlamaMLP(_with_width(config, width))
        self.post_init()


def _with_width(config: TaperedLlamaConfig, width: int) -> TaperedLlamaConfig:
    """A shallow copy of config whose intermediate_size is `width` (what LlamaMLP reads)."""
    layer_config = copy.copy(config)
    layer_config.intermediate_size = width
    return layer_config
