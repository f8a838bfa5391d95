"""Causal ablations: removing MLP neurons and whole MLPs, measured by held-out loss.

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'GROUPS': 'config',
    'SELECTIONS': 'config',
    'DTYPE_NAMES': 'config',
    'AblationConfig': 'config',
    'KINDS': 'capacity',
    'DTYPES': 'capacity',
    'COLUMNS': 'capacity',
    '_DOWN_NAMES': 'capacity',
    'MlpSite': 'capacity',
    '_root': 'capacity',
    '_mlp_modules': 'capacity',
    '_down_module': 'capacity',
    'mlp_sites': 'capacity',
    'layer_groups': 'capacity',
    'down_column_norms': 'capacity',
    '_forward_logits': 'capacity',
    '_autocast': 'capacity',
    '_device': 'capacity',
    'contribution_scores': 'capacity',
    'n_to_remove': 'capacity',
    'select_neurons': 'capacity',
    '_layer_generator': 'capacity',
    'Condition': 'capacity',
    'build_conditions': 'capacity',
    'removals': 'capacity',
    '_mask_hook': 'capacity',
    '_zero_hook': 'capacity',
    'ablated': 'capacity',
    'sequence_losses': 'capacity',
    'paired_delta': 'capacity',
    '_Sequences': 'capacity',
    'split_sequences': 'capacity',
    '_load_sequences': 'capacity',
    '_row': 'capacity',
    'run_pretrained_ablation': 'capacity',
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = [n for n in _EXPORTS if not n.startswith("_")]
