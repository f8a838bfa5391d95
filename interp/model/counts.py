"""Analytic parameter and FLOP counts of a ModelConfig (equal to numel of the built model; tested)."""

from __future__ import annotations

from interp.model.config import ModelConfig
from interp.model.decoder import SwiGLU
from interp.model.mixers import MIXERS

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

    {"per_layer": [{"layer", "mixer", "mlp", "norms", "total"}], "embedding", "unembedding",
     "final_norm", "total"}; "unembedding" is 0 when embeddings are tied.
    """
    cfg.validate()
    mixer_cls = MIXERS[cfg.mixer]
    per_layer = _layer_table(cfg,
                             mixer=[mixer_cls.n_params(cfg, layer) for layer in range(cfg.n_layers)],
                             mlp=[SwiGLU.n_params(cfg.d_model, w) for w in cfg.d_mlp],
                             norms=2 * cfg.d_model, extra={})
    out = {"per_layer": per_layer,
           "embedding": cfg.vocab_size * cfg.d_model,
           "unembedding": 0 if cfg.tie_embeddings else cfg.vocab_size * cfg.d_model,
           "final_norm": cfg.d_model}
    out["total"] = sum(r["total"] for r in per_layer) + out["embedding"] + out["unembedding"] + out["final_norm"]
    return out


def flops_per_token(cfg: ModelConfig, seq_len: int, causal: bool = True) -> dict:
    """Forward matmul FLOPs per token (2 per multiply-add), per layer and in total.

    Same structure as param_counts, plus "attention_scores" (per layer and summed: QK^T and
    pattern @ V, already included in "mixer"). Attention cost uses the causal average of (T+1)/2
    attended keys per query (`causal=False`: all T keys, the PaLM/Chinchilla convention).
    Embedding lookup and norms cost 0 here (no matmul); the unembedding is 2 * d_model * vocab.
    MLP FLOPs are linear in d_mlp, so a tapered model and its same-mean uniform baseline tie exactly.
    """
    cfg.validate()
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len <= 0:
        raise ValueError(f"flops_per_token: seq_len must be a positive int, got {seq_len!r}")
    mixer_cls = MIXERS[cfg.mixer]
    mixer = [mixer_cls.forward_flops(cfg, layer, seq_len, causal) for layer in range(cfg.n_layers)]
    per_layer = _layer_table(cfg,
                             mixer=[m.dense + m.attention_scores for m in mixer],
                             mlp=[2 * SwiGLU.n_params(cfg.d_model, w) for w in cfg.d_mlp],
                             norms=0, extra={"attention_scores": [m.attention_scores for m in mixer]})
    out = {"per_layer": per_layer, "embedding": 0, "unembedding": 2 * cfg.d_model * cfg.vocab_size,
           "final_norm": 0, "attention_scores": sum(m.attention_scores for m in mixer)}
    out["total"] = sum(r["total"] for r in per_layer) + out["unembedding"]
    return out


def training_flops_per_token(cfg: ModelConfig, seq_len: int, causal: bool = True) -> int:
    """Forward + backward ~= 3 x forward (backward computes grads w.r.t. inputs and weights); for MFU."""
    return 3 * flops_per_token(cfg, seq_len, causal)["total"]

