"""ModelConfig: the shape of a tapered LM (per-layer d_mlp; everything else uniform), validated."""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass

from interp._util.config import reject_unknown_keys
from interp.model.arch import ARCHS, DEFAULT_ARCH
from interp.model.mixers import MIXERS
from interp.model.mixers.registry import parse_mixer_options


@dataclass
class ModelConfig:
    """Shape of a tapered LM. Only d_mlp varies with depth; everything else is uniform (as in the paper).

    `arch` is the block style (interp.model.arch.ARCHS): "llama" (Transformer++, the default, and what every
    config written before the field existed was) or "gpt2". tie_embeddings None means the style's default
    (llama: untied, gpt2: tied); it is resolved on construction, so to_dict always stores a bool.
    """

    vocab_size: int
    d_model: int
    n_layers: int
    n_heads: int
    d_mlp: list[int]  # per-layer MLP intermediate width (SwiGLU in llama, GELU in gpt2)
    n_ctx: int = 256  # also the number of learned positions in gpt2
    mixer: str = "attention"  # key of interp.model.mixers.MIXERS (gpt2: attention only, its own biased one)
    rope_theta: float = 10000.0  # llama only (gpt2 has no RoPE)
    norm_eps: float = 1e-6
    init_std: float = 0.02
    tie_embeddings: bool | None = None
    # Mixer-specific settings (e.g. Titans memory chunk size); fixed per model, never tapered.
    mixer_options: dict = dataclasses.field(default_factory=dict)
    arch: str = DEFAULT_ARCH

    def __post_init__(self) -> None:
        if self.tie_embeddings is None:
            self.tie_embeddings = self.arch == "gpt2"

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
        if not isinstance(self.arch, str) or self.arch not in ARCHS:
            raise ValueError(f"ModelConfig.arch={self.arch!r} is not a block style; choose one of {list(ARCHS)} "
                             "(interp.model.arch)")
        if self.d_model % self.n_heads:
            raise ValueError(f"ModelConfig.d_model={self.d_model} must be divisible by n_heads={self.n_heads}")
        if self.arch == "llama" and self.d_head % 2:
            raise ValueError(f"ModelConfig: d_head = d_model / n_heads = {self.d_head} must be even for RoPE; "
                             "change d_model or n_heads")
        if len(self.d_mlp) != self.n_layers:
            raise ValueError(f"ModelConfig.d_mlp has {len(self.d_mlp)} widths but n_layers={self.n_layers}; "
                             "give one MLP width per layer (e.g. interp.widths.taper_widths)")
        for layer, width in enumerate(self.d_mlp):
            try:
                ok = not isinstance(width, bool) and operator.index(width) >= 0
            except TypeError:
                ok = False
            if not ok:
                raise ValueError(f"ModelConfig.d_mlp[{layer}] must be a non-negative int (0: a layer without an MLP), got {width!r}")
        self.d_mlp = [operator.index(w) for w in self.d_mlp]  # numpy ints -> int, so to_dict is JSON-safe
        self.__post_init__()  # tie_embeddings None (set after construction) -> the block style's default
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"ModelConfig.tie_embeddings must be true or false, got {self.tie_embeddings!r}")
        if not isinstance(self.mixer, str) or self.mixer not in MIXERS:
            raise ValueError(f"ModelConfig.mixer={self.mixer!r} is not registered; choose one of "
                             f"{sorted(MIXERS)} or register it with interp.model.mixers.register_mixer")
        if self.arch == "gpt2" and self.mixer != "attention":
            raise ValueError(f"ModelConfig.mixer={self.mixer!r} does not combine with arch='gpt2': the GPT-2 block "
                             "has its own attention (biases, learned positions, no RoPE); use mixer='attention' "
                             "(--mixer attention) with --arch gpt2, or arch='llama' (--arch llama) for the other mixers")
        numbers = {n: getattr(self, n) for n in ("rope_theta", "norm_eps", "init_std")}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"ModelConfig.{name} must be a number, got {value!r}")
        if self.rope_theta <= 0 or self.norm_eps <= 0 or self.init_std <= 0:
            raise ValueError("ModelConfig.rope_theta, norm_eps and init_std must be > 0, got "
                             f"{self.rope_theta}, {self.norm_eps}, {self.init_std}")
        parse_mixer_options(self)  # keys the mixer declares, of their types, values its options accept
