"""Token mixers: the registry (registry.py) and the mixers registered in it.

Importing this package registers every built-in mixer (attention.py: attention, gated_attention,
gated_attention_headwise; memory.py: titans, titans_lmm, hope_attention). The registry module imports
no mixer, so a mixer module depends on the registry and never the other way round.
"""

from interp.model.mixers import attention, memory  # noqa: F401  (registers the built-in mixers)
from interp.model.mixers.registry import MIXERS, MixerFlops, register_mixer

__all__ = ["MIXERS", "MixerFlops", "register_mixer"]
