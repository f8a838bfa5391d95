"""SiteMap: where the TransformerLens residual sites are in one architecture, as dotted module paths. Its own
module so that the adapter table (interp.hf.adapters) and the maps derived from TransformerLens's adapters
(interp.hf.tl_adapters) both build on it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# where a config states the context, first match wins (GPT-2: n_positions; our export: max_position_embeddings);
# torch-free here, so a config can be read (interp.hf.sources) before anything loads
CONTEXT_FIELDS = ("max_position_embeddings", "n_positions", "n_ctx")


@dataclass(frozen=True)
class SiteMap:
    """Dotted module paths that locate the TransformerLens residual sites on one architecture.

    With h = the decoder layer's input (`hook_resid_pre`), a sequential layer (pre-norm, sandwich or post-norm) is
        z = h + [post_attn_norm](attn(...))          -> hook_resid_mid = INPUT of `mlp_input_norm` (of `mlp` if None)
        out = z + [post_mlp_norm](mlp([norm](z)))    -> hook_mlp_out   = OUTPUT of `post_mlp_norm` if set, else of `mlp`
                                                     -> hook_resid_post = OUTPUT of the decoder layer
    and a parallel one (`parallel`: GPT-NeoX, GPT-J, Phi) is out = h + attn(ln1(h)) + mlp(norm(h)), whose
    hook_resid_mid := h + attention output is derived (no module sees it; docs/probes.md "Block styles").
    Inside the MLP, `mlp_in` are the projections that read its (normalised) input, one row per neuron (a fused
    gate-up, `mlp_in_fused`: rows [gate; up], neuron i at rows i and d_mlp + i), and `mlp_down` is the projection
    whose INPUT is the neurons (its i-th input channel is neuron i; None for a mixture of experts).
    Blocks that compute a residual term inline name the module that produces it: `mlp_out` (Bloom's and MPT's MLP
    add the residual themselves, so the term is their down projection's output; OPT and XGLM have no MLP module,
    `mlp` = "" = the layer itself, and the term is fc2's output) and `attn_out` (Bloom's attention adds the
    residual: its `dense`). OPT's layer runs its MLP on the tokens flattened to [batch * pos, d]: readers view a
    2-D site tensor as [batch, pos, d] (`unflatten_tokens`).
    """

    layers: str                 # from the model root, e.g. "model.layers"
    mlp: str                    # relative to a layer
    attn: str                   # relative to a layer
    mlp_input_norm: str | None  # relative to a layer; sequential: its input is hook_resid_mid (None: the MLP's is)
    post_mlp_norm: str | None   # relative to a layer; its output is what the MLP adds to the stream
    post_attn_norm: str | None  # relative to a layer; its output is what attention adds to the stream
    final_norm: str             # from the model root
    notes: str = ""
    mlp_in: tuple[str, ...] = ("gate_proj", "up_proj")  # relative to the MLP; weights [d_mlp, d_model] (Linear)
    mlp_down: str | None = "down_proj"                  # relative to the MLP; its input = the neurons
    unembed: str = "lm_head"                            # from the model root; final_norm's output -> logits
    parallel: bool = False      # attention and MLP both read h; their outputs are added together
    mlp_in_fused: bool = False  # mlp_in is one fused [gate; up] projection (Phi-3's gate_up_proj)
    mlp_out: str | None = None  # relative to a layer; its output is the raw MLP term where `mlp`'s is not
    attn_out: str | None = None  # relative to a layer; its output is the raw attention term where `attn`'s is not

    def __post_init__(self) -> None:
        if not self.mlp and not (self.mlp_in and self.mlp_out):
            raise ValueError("SiteMap(mlp=''): a layer that holds its MLP's projections itself needs mlp_in (the "
                             "projections that read the MLP's input) and mlp_out (the one whose output is its term)")

    def within_mlp(self, path: str) -> str:
        """A path relative to the MLP (mlp_in, mlp_down) as a path relative to the layer."""
        return f"{self.mlp}.{path}" if self.mlp else path

    @property
    def mlp_term_module(self) -> str:
        """Layer-relative module whose OUTPUT is the raw MLP term (before a post-MLP norm): what skip_mlp zeroes."""
        return self.mlp_out or self.mlp

    @property
    def mlp_out_module(self) -> str:
        """Layer-relative module whose OUTPUT equals `hook_mlp_out` (the term added to the stream)."""
        return self.post_mlp_norm or self.mlp_term_module

    @property
    def attn_out_module(self) -> str:
        """Layer-relative module whose OUTPUT[0] (or output) equals `hook_attn_out`."""
        return self.post_attn_norm or self.attn_out or self.attn

    @property
    def mlp_read_module(self) -> str:
        """Layer-relative module whose INPUT is what the MLP reads (its normalised input: `hook_mlp_in`): the MLP,
        or, where the layer itself holds the MLP's projections (OPT, XGLM), the first of them."""
        return self.mlp or self.within_mlp(self.mlp_in[0])

    @property
    def resid_mid_module(self) -> str | None:
        """Layer-relative module whose INPUT is `hook_resid_mid`; None for a parallel block (derived there)."""
        return None if self.parallel else self.mlp_input_norm or self.mlp_read_module

    @property
    def style(self) -> str:
        """The block style: "parallel", "post_norm" (OLMo-2), "sandwich" (Gemma-2/3) or "pre_norm"."""
        if self.parallel:
            return "parallel"
        if self.mlp_input_norm is None:
            return "post_norm"
        return "sandwich" if self.post_mlp_norm else "pre_norm"

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
