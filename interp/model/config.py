"""ModelConfig: the shape of a tapered LM (per-layer d_mlp; everything else uniform), validated."""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

from interp._util.config import reject_unknown_keys
from interp.model.mixers import MIXERS
from interp.model.mixers.registry import parse_mixer_options


@dataclass
class ModelConfig:
    """Shape of a tapered LM. Only d_mlp varies with depth; everything else is uniform (as in the paper)."""

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_mlp: list[int]  # per-layer SwiGLU intermediate width
    n_ctx: int = 256
    mixer: str = "attention"  # key of interp.model.mixers.MIXERS
    rope_theta: float = 10000.0
    norm_eps: float = 1e-6
    init_std: float = 0.02
    tie_embeddings: bool = False
    # Mixer-specific settings (e.g. Titans memory chunk size); fixed per model, never tapered.
    mixer_options: dict = dataclasses.field(default_factory=dict)

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> ModelConfig:
        """Inverse of to_dict; rejects unknown keys (a typo would otherwise silently use a default)."""
        reject_unknown_keys(cls, d)
        cfg = cls(**{**d, "d_mlp": list(d.get("d_mlp", []))})
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Raise ValueError naming the bad field and the fix; called by TaperedLM before building.

        Also normalises d_mlp to a list of Python ints (numpy ints from a schedule would break JSON).
        """
        for name in ("vocab_size", "d_model", "n_layers", "n_heads", "n_ctx"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"ModelConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.d_head % 2:
            raise ValueError(f"ModelConfig: d_head = d_model / n_heads = {self.d_head} must be even for RoPE; "
                             "change d_model or n_heads")
        if len(self.d_mlp) != self.n_layers:
            raise ValueError(f"ModelConfig.d_mlp has {len(self.d_mlp)} widths but n_layers={self.n_layers}; "
                             "give one SwiGLU width per layer (e.g. interp.schedules.taper_widths)")
        for layer, width in enumerate(self.d_mlp):
            try:
                ok = not isinstance(width, bool) and operator.index(width) > 0
            except TypeError:
                ok = False
            if not ok:
                raise ValueError(f"ModelConfig.d_mlp[{layer}] must be a positive int, got {width!r}")
        self.d_mlp = [operator.index(w) for w in self.d_mlp]  # numpy ints -> int, so to_dict is JSON-safe
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"ModelConfig.tie_embeddings must be true or false, got {self.tie_embeddings!r}")
        if not isinstance(self.mixer, str) or self.mixer not in MIXERS:
            raise ValueError(f"ModelConfig.mixer={self.mixer!r} is not registered; choose one of "
                             f"{sorted(MIXERS)} or register it with interp.model.mixers.register_mixer")
        numbers = {n: getattr(self, n) for n in ("rope_theta", "norm_eps", "init_std")}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"ModelConfig.{name} must be a number, got {value!r}")
        if self.rope_theta <= 0 or self.norm_eps <= 0 or self.init_std <= 0:
            raise ValueError("ModelConfig.rope_theta, norm_eps and init_std must be > 0, got "
                             f"{self.rope_theta}, {self.norm_eps}, {self.init_std}")
        parse_mixer_options(self)  # keys the mixer declares, of their types, values its options accept
