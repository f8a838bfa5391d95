"""Analytic parameter and FLOP counts of a ModelConfig (equal to numel of the built model; tested).

Both block styles (interp.model.blocks) are linear in each layer's width w, so the budget rule (sum of widths
= n_layers x d_ff) gives a tapered model exactly the parameters and FLOPs of its uniform baseline:
  llama  SwiGLU   3 * d_model * w                       parameters, 2 * 3 * d_model * w forward FLOPs
  gpt2   GELU     2 * d_model * w + w + d_model         parameters, 2 * 2 * d_model * w forward FLOPs
(w = 0, a layer without an MLP: no parameter in either style, the gpt2 output bias included; the budget rule holds.)
"""

from __future__ import annotations

from interp.model.blocks import BLOCK_STYLES
from interp.model.config import ModelConfig

# ---------------------------------------------------------------------------------------------
# Analytic size and cost. Both return the same structure, so a table can put them side by side.

def _layer_table(cfg: ModelConfig, mixer: list[int], mlp: list[int], norms: int, extra: dict[str, list[int]]
                 ) -> list[dict]:
    rows = []
    for layer in range(cfg.n_layers):
        row = {"layer": layer, "mixer": mixer[layer], "mlp": mlp[layer], "norms": norms}
        row["total"] = row["mixer"] + row["mlp"] + norms
        row.update({k: v[layer] for k, v in extra.items()})
        rows.append(row)
    return rows


def param_counts(cfg: ModelConfig) -> dict:
    """Parameters per layer and in total, from the config alone (equals sum(p.numel()) of TaperedLM(cfg)).

    {"per_layer": [{"layer", "mixer", "mlp", "norms", "total"}], "embedding", "position_embedding",
     "unembedding", "final_norm", "total"}; "unembedding" is 0 when embeddings are tied, "position_embedding"
     is 0 without learned positions (llama: RoPE).
    """
    cfg.validate()
    style = BLOCK_STYLES[cfg.arch]
    mixer_cls = style.mixer(cfg)
    per_layer = _layer_table(cfg,
                             mixer=[mixer_cls.n_params(cfg, layer) for layer in range(cfg.n_layers)],
                             mlp=[style.mlp.n_params(cfg.d_model, w) for w in cfg.d_mlp],
                             norms=2 * style.norm.n_params(cfg.d_model), extra={})
    out = {"per_layer": per_layer,
           "embedding": cfg.vocab_size * cfg.d_model,
           "position_embedding": cfg.n_ctx * cfg.d_model if style.learned_positions else 0,
           "unembedding": 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model,
           "final_norm": style.norm.n_params(cfg.d_model)}
    out["total"] = (sum(r["total"] for r in per_layer) + out["embedding"] + out["position_embedding"]
                    + out["unembedding"] + out["final_norm"])
    return out


def flops_per_token(cfg: ModelConfig, seq_len: int, causal: bool = True) -> dict:
    """Forward matmul FLOPs per token (2 per multiply-add), per layer and in total.

    Same structure as param_counts, plus "attention_scores" (per layer and summed: QK^T and
    pattern @ V, already included in "mixer"). Attention cost uses the causal average of (T+1)/2
    attended keys per query (`causal=False`: all T keys, the PaLM/Chinchilla convention).
    Embedding and position lookups, norms and bias adds cost 0 here (no matmul); the unembedding is
    2 * d_model * vocab. MLP FLOPs are linear in d_mlp, so a tapered model and its same-mean uniform
    baseline tie exactly.
    """
    cfg.validate()
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise ValueError(f"flops_per_token: seq_len must be a positive int, got {seq_len!r}")
    style = BLOCK_STYLES[cfg.arch]
    mixer_cls = style.mixer(cfg)
    mixer = [mixer_cls.forward_flops(cfg, layer, seq_len, causal) for layer in range(cfg.n_layers)]
    per_layer = _layer_table(cfg,
                             mixer=[m.dense + m.attention_scores for m in mixer],
                             mlp=[2 * style.mlp.matmul_params(cfg.d_model, w) for w in cfg.d_mlp],
                             norms=0, extra={"attention_scores": [m.attention_scores for m in mixer]})
    out = {"per_layer": per_layer, "embedding": 0, "position_embedding": 0,
           "unembedding": 2 * cfg.d_model * cfg.vocab_size, "final_norm": 0,
           "attention_scores": sum(m.attention_scores for m in mixer)}
    out["total"] = sum(r["total"] for r in per_layer) + out["unembedding"]
    return out


def training_flops_per_token(cfg: ModelConfig, seq_len: int, causal: bool = True) -> int:
    """Forward + backward ~= 3 x forward (backward computes grads w.r.t. inputs and weights); for MFU."""
    return 3 * flops_per_token(cfg, seq_len, causal)["total"]
