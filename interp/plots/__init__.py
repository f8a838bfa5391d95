"""One function per figure: a tidy table in, a matplotlib Figure out (never a model).

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'DPI': 'style',
    'STYLE': 'style',
    'COLORS': 'style',
    'SCHEDULE_COLUMNS': 'style',
    'LOSS_COLUMNS': 'style',
    'color_for': 'style',
    'save_figure': 'style',
    'plot_schedules': 'schedules',
    'NOVELTY_COLUMNS': 'novelty',
    'CMAP': 'training',
    'novelty_grid': 'training',
    'plot_novelty_over_training': 'training',
    'smooth': 'training',
    'final_val_ppl': 'training',
    'plot_loss_curves': 'training',
    'DEFAULT_VARIANT': 'novelty',
    'VARIANT_STYLES': 'novelty',
    'METRIC_TITLES': 'novelty',
    'SERIES_COLORS': 'novelty',
    'PAPER_NOTE': 'novelty',
    'pearson_r': 'novelty',
    'rankdata': 'novelty',
    'spearman_r': 'novelty',
    'depth_correlations': 'novelty',
    'series_color': 'novelty',
    'plot_novelty': 'novelty',
    'GROUP_COLUMNS': 'experiments',
    'SWEEP_COLUMNS': 'experiments',
    'plot_group_ablation': 'experiments',
    'annotate_ours_vs_paper': 'experiments',
    'sweep_grid': 'experiments',
    'plot_schedule_sweep': 'experiments',
    'ARCH_COLUMNS': 'architectures',
    'BASELINE': 'architectures',
    'OFFSET': 'architectures',
    'plot_architectures': 'architectures',
    'ABLATION_COLUMNS': 'ablation',
    'GROUP_ORDER': 'ablation',
    'SYMLOG_RATIO': 'ablation',
    'group_color': 'ablation',
    'random_summary': 'ablation',
    'plot_capacity_ablation': 'ablation',
    'CAUSAL_TITLES': 'causal',
    'plot_novelty_vs_causal': 'causal',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
