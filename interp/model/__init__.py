"""The tapered decoder: its config, the two block styles, the model (TransformerLens HookPoints), analytic
counts, token mixers, and the layers a weight file's names hold (checked against a config before building).

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'ReturnType': 'decoder',
    'MIXERS': 'mixers',
    'register_mixer': 'mixers',
    'MixerFlops': 'mixers',
    'ModelConfig': 'config',
    'RMSNorm': 'blocks',
    'SwiGLU': 'blocks',
    'LayerNorm': 'blocks',
    'GeluMLP': 'blocks',
    'GPT2Attention': 'blocks',
    'Block': 'blocks',
    'BLOCK_STYLES': 'blocks',
    'ARCHS': 'arch',
    'TaperedLM': 'decoder',
    'next_token_loss': 'loss',
    'param_counts': 'counts',
    'flops_per_token': 'counts',
    'training_flops_per_token': 'counts',
    'layer_stacks': 'weights',
    'check_layer_count': 'weights',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
