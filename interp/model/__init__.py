"""The tapered decoder: its config, the model (TransformerLens HookPoints), analytic counts, token mixers.

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'ReturnType': 'decoder',
    '_RETURN_TYPES': 'decoder',
    'MIXERS': 'mixers',
    'register_mixer': 'mixers',
    'MixerFlops': 'mixers',
    'ModelConfig': 'config',
    'RMSNorm': 'decoder',
    'SwiGLU': 'decoder',
    'Block': 'decoder',
    'TaperedLM': 'decoder',
    'next_token_loss': 'loss',
    '_layer_table': 'counts',
    'param_counts': 'counts',
    'flops_per_token': 'counts',
    'training_flops_per_token': 'counts',
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [n for n in _EXPORTS if not n.startswith("_")]
