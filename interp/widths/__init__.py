"""Per-layer MLP widths: every width family, budget-exact in integers, and the widths file a measured profile
gives. numpy, stdlib and interp._util only (the CLI and the plots import it: it must stay instant to import).

    schedules.py  tapers (uniform, linear, cosine, sigmoid), layer groups and profiles, layouts without some MLPs,
                  measured profiles; WidthSpec, which resolves every family (what TrainConfig stores)
    shapes.py     the symmetric shapes (middle-heavy, x-shaped)
    core.py       the argument checks and the budget-exact rounding every family shares
    derived.py    a taper derived from a measured per-layer profile: table -> importance -> widths file
                  (`interp taper derive`, then `interp train --width-file`)

Names are exported lazily (interp._util.lazy): importing the package imports no submodule."""

from interp._util.lazy import lazy_exports

_EXPORTS = {
    'SCHEDULES': 'schedules',
    'MEASURED': 'schedules',
    'MEASURED_FIELDS': 'schedules',
    'PROFILES': 'schedules',
    'LAYOUTS': 'schedules',
    'ratios': 'schedules',
    'taper_widths': 'schedules',
    'group_sizes': 'schedules',
    'group_widths': 'schedules',
    'profile_widths': 'schedules',
    'absent_layers': 'schedules',
    'layout_widths': 'schedules',
    'resample': 'schedules',
    'decreasing_fit': 'schedules',
    'smoothed': 'schedules',
    'measured_ratios': 'schedules',
    'measured_widths': 'schedules',
    'WidthSpec': 'schedules',
    'SHAPES': 'shapes',
    'check_shape_ratios': 'shapes',
    'shape_ratios': 'shapes',
    'shape_widths': 'shapes',
    'WIDTHS_FORMAT': 'derived',
    'TRANSFORMS': 'derived',
    'MEASURED_ON': 'derived',
    'FLAT_SPREAD': 'derived',
    'DeriveConfig': 'derived',
    'read_profile': 'derived',
    'importance': 'derived',
    'derive': 'derived',
    'flat_warning': 'derived',
    'save_widths': 'derived',
    'load_width_spec': 'derived',
    'format_widths': 'derived',
}

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
