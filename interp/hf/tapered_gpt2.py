"""A tapered GPT-2 as a Hugging Face model: GPT2LMHeadModel with one MLP width per layer.

Self-contained on purpose (imports only transformers, never `interp`): `interp export` copies this file into
the exported folder as the modeling code that config.json's `auto_map` names, so
`AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)` works on any machine with
transformers. Inside the toolkit the same classes are registered with the Auto classes
(interp.hf.export.register_tapered_llama), so our own loaders never execute a folder's copy.

Why GPT-2: our gpt2 block style (interp.model.blocks) is GPT-2's block (pre-LayerNorm with biases, learned
absolute positions, biased attention scaled by 1/sqrt(d_head), GELU-tanh MLP c_fc -> c_proj, tied
embeddings). Only `n_inner` differs: GPT-2 has one, a tapered model has `intermediate_sizes[l]` per layer.
"""

from __future__ import annotations

from transformers import GPT2Config, GPT2LMHeadModel
from transformers.models.gpt2.modeling_gpt2 import GPT2MLP


class TaperedGPT2Config(GPT2Config):
    """GPT2Config plus `intermediate_sizes`: layer l's MLP width (n_inner = their mean)."""

    model_type = "tapered_gpt2"

    def __init__(self, intermediate_sizes: list[int] | None = None, **kwargs):
        super().__init__(**kwargs)
        default = self.n_inner if self.n_inner is not None else 4 * self.n_embd
        sizes = [int(w) for w in (intermediate_sizes or [default] * self.n_layer)]
        if len(sizes) != self.n_layer:
            raise ValueError(f"TaperedGPT2Config: {len(sizes)} intermediate_sizes for n_layer={self.n_layer}; "
                             "give one width per layer")
        self.intermediate_sizes = sizes


class TaperedGPT2MLP(GPT2MLP):
    """GPT2MLP that also takes width 0, a layer without an MLP (interp.model.blocks): GPT-2's Conv1D cannot
    multiply an empty activation, so that layer's output is its output bias (zero in an export) directly."""

    def forward(self, hidden_states):
        if self.c_fc.nf == 0:
            return hidden_states.new_zeros(hidden_states.shape) + self.c_proj.bias
        return super().forward(hidden_states)


class TaperedGPT2LMHeadModel(GPT2LMHeadModel):
    """GPT2LMHeadModel whose layer l has an MLP of width config.intermediate_sizes[l]."""

    config_class = TaperedGPT2Config

    def __init__(self, config: TaperedGPT2Config):
        super().__init__(config)
        for block, width in zip(self.transformer.h, config.intermediate_sizes):
            if width != block.mlp.c_fc.nf:
                block.mlp = TaperedGPT2MLP(width, config)
        self.post_init()
