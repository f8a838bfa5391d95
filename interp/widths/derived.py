"""A taper derived from a measured per-layer profile: table -> importance -> widths file -> training.

    interp probe --model smollm2-135m --out results/smollm2.parquet          # measure
    interp taper derive --from results/smollm2.parquet --measure rho_mlp --transform one_minus \\
        --monotone --layers 6 --d-ff 1024 --out widths/smollm2-novelty.json       # derive
    interp train --preset tiny --width-file widths/smollm2-novelty.json --out runs/derived   # train

The widths file holds a WidthSpec(schedule="measured") (the profile itself, the knobs, and an `origin`
naming the measure, the model and the table's hash), so config.json of the trained run says where its
widths came from; the widths are recomputed for the training shape (a profile measured at another depth
is resampled over normalised depth) by interp.widths.schedules.measured_widths, budget-exact as every schedule.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from interp._util.config import option
from interp._util.errors import InputError
from interp._util.io import PathLike, read_json, write_json_atomic
from interp.widths.schedules import MEASURED, WidthSpec

WIDTHS_FORMAT = "interp.widths/1"
TRANSFORMS = ("value", "one_minus", "negate")  # importance = value | 1 - value | -value
MEASURED_ON = ("text_source", "text_sha256", "n_tokens", "seq_len", "checkpoint", "revision", "commit")
FLAT_SPREAD = 0.05   # widths whose (max - min) / d_ff is below this are called flat: the run would be ~uniform


@dataclass
class DeriveConfig:
    """`interp taper derive`: which column of which table, how it becomes widths, for which shape."""

    table: str = option("", "probe table (.parquet or .csv) with layer / metric / mean columns", flag="--from")
    measure: str = option("rho_mlp", "the metric whose per-layer mean is the importance profile")
    model: str = option("", "the model's rows to use when the table holds several (its `model` column)")
    where: str = option("", "more row filters, COL=VALUE[,COL=VALUE...] (e.g. variant=default)")
    transform: str = option("value", "importance = value | 1 - value (one_minus: e.g. rho, where high "
                            "means 'writes what is already there') | -value", choices=TRANSFORMS)
    exponent: float = option(1.0, "widths follow importance ** exponent (0 = uniform, 1 = proportional)")
    monotone: bool = option(False, "force the profile non-increasing with depth (isotonic fit)")
    smooth: int = option(0, "moving average over this many layers before the fit (0 = none)")
    min_ratio: float = option(0.25, "narrowest layer as a multiple of d_ff")
    layers: int = option(6, "n_layers of the model to train (the profile is resampled to it)")
    d_ff: int = option(1024, "baseline (mean) SwiGLU width: the widths sum to layers * d_ff")
    multiple: int = option(16, "widths are multiples of this")
    out: str = option("", "the widths file to write (.json); default: print only")


def _filters(where: str) -> dict[str, str]:
    pairs = [p.strip() for p in where.split(",") if p.strip()]
    bad = [p for p in pairs if "=" not in p]
    if bad:
        raise InputError(f"{bad[0]!r} is not COL=VALUE", field="--where", fix="e.g. --where variant=default")
    return dict(p.split("=", 1) for p in pairs)


def read_profile(table: PathLike, measure: str, model: str = "", where: str = "") -> tuple[list[float], dict]:
    """Per-layer means of `measure` from a probe table, in layer order, and what identifies them."""
    import pandas as pd

    path = Path(table)
    if path.suffix not in (".parquet", ".csv"):
        raise InputError("expected a .parquet or .csv probe table", path=path, field="--from")
    if not path.is_file():
        raise InputError("no such probe table", path=path, field="--from",
                         fix="write one with `interp probe ... --out FILE` (or interp batch / ablate pretrained)")
    try:
        df = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    except (OSError, ValueError) as err:   # a truncated or foreign file
        raise InputError(f"cannot be read as a {path.suffix[1:]} table ({type(err).__name__}: {err})", path=path,
                         field="--from",
                         fix="give a table written by interp probe / batch / ablate pretrained") from None
    missing = {"layer", "metric", "mean"} - set(df.columns)
    if missing:
        raise InputError(f"has no column(s) {sorted(missing)}; give a table written by interp probe / batch",
                         path=path)
    if measure not in set(df["metric"]):
        raise InputError(f"no rows of metric {measure!r}; available: {sorted(set(df['metric']))}",
                         path=path, field="--measure")
    rows = df[df["metric"] == measure]
    models = sorted(set(rows["model"].astype(str))) if "model" in rows.columns else []
    if model:
        rows = rows[rows["model"].astype(str) == model]
        if rows.empty:
            raise InputError(f"no rows of model {model!r}; available: {models}", path=path, field="--model")
    elif len(models) > 1:
        raise InputError(f"holds {len(models)} models {models}; choose one", path=path, field="--model")
    for column, value in _filters(where).items():
        if column not in rows.columns:
            raise InputError(f"no column {column!r}", path=path, field="--where")
        rows = rows[rows[column].astype(str) == value]
    if rows.empty:
        raise InputError(f"no {measure!r} rows are left after --where {where}", path=path, field="--where")
    if rows["layer"].duplicated().any():
        first = rows[rows["layer"] == rows["layer"].iloc[0]]
        differ = [c for c in first.columns if c not in ("mean", "std", "sem", "sem_tokens", "ci_low", "ci_high")
                  and not c.startswith("q") and first[c].astype(str).nunique() > 1]
        raise InputError(f"several {measure!r} rows per layer, differing in {differ}; choose one with "
                         f"--where COL=VALUE", path=path, field="--where")
    layers = pd.to_numeric(rows["layer"], errors="coerce")
    if layers.isna().any() or not (layers == layers.round()).all():
        bad = rows["layer"][layers.isna() | (layers != layers.round())].iloc[0]
        raise InputError(f"layer {str(bad)!r} is not an integer layer index", path=path, field="layer",
                         fix="give a table written by interp probe / batch, whose layers are 0 .. L-1")
    layers = layers.astype(int)
    if sorted(layers) != list(range(len(layers))):
        raise InputError(f"the {measure!r} rows have layers {sorted(layers.tolist())}, not 0 .. {len(layers) - 1} "
                         "each once (a gap, a negative or a repeated layer)", path=path, field="layer",
                         fix="give the whole profile of one model, every layer once")
    rows = rows.assign(layer=layers).sort_values("layer")   # numeric order: 0, 1, 2, ..., 10, not 0, 1, 10, 2
    raw = rows["mean"]
    means = raw if raw.dtype.kind in "iuf" else pd.to_numeric(raw, errors="coerce")
    if raw.dtype.kind == "b" or means.dtype.kind not in "iuf" or (means.isna() & raw.notna()).any():
        bad = raw[(means.isna() & raw.notna()) if means.dtype.kind in "iuf" else raw.notna()]
        raise InputError(f"mean {str(bad.iloc[0]) if len(bad) else '?'!r} is not a number", path=path,
                         field="mean", fix="give a table written by interp probe / batch")
    values = [float(v) for v in means]
    if not np.isfinite(values).all():
        raise InputError(f"the {measure!r} means hold NaN or inf; remeasure or choose another metric", path=path,
                         field="mean")
    info = {"table": str(path), "table_sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "measure": measure,
            "model": model or (models[0] if models else ""), "where": where, "layers_measured": len(values)}
    for column in MEASURED_ON:   # what the profile was measured on (a hub text, a revision), where the table says
        if column in rows.columns and rows[column].astype(str).nunique() == 1 and str(rows[column].iloc[0]) != "nan":
            info[column] = str(rows[column].iloc[0])
    return values, info


def importance(values: list[float], transform: str) -> list[float]:
    if transform not in TRANSFORMS:
        raise InputError(f"transform {transform!r} is unknown; choose one of {TRANSFORMS}", field="--transform")
    v = np.asarray(values, dtype=float)
    return (v if transform == "value" else 1.0 - v if transform == "one_minus" else -v).tolist()


def derive(cfg: DeriveConfig) -> dict:
    """The widths file's content for `cfg` (nothing written)."""
    values, info = read_profile(cfg.table, cfg.measure, cfg.model, cfg.where)
    source = f"{cfg.measure}{'' if cfg.transform == 'value' else ' ' + cfg.transform} of {info['model'] or '?'}, " \
             f"table sha256 {info['table_sha256'][:12]}"
    spec = WidthSpec(MEASURED, measure=tuple(importance(values, cfg.transform)), exponent=cfg.exponent,
                     monotone=cfg.monotone, smooth=cfg.smooth, min_ratio=cfg.min_ratio, multiple=cfg.multiple,
                     origin=source)
    widths = spec.widths(cfg.layers, cfg.d_ff)
    doc = {"format": WIDTHS_FORMAT, "width": spec.to_dict(), "label": spec.label, "layers": cfg.layers,
           "d_ff": cfg.d_ff, "widths": widths, "profile": values, **info,
           "settings": {"transform": cfg.transform}}
    warning = flat_warning(cfg, spec, widths)
    return {**doc, "warning": warning} if warning else doc


def flat_warning(cfg: DeriveConfig, spec: WidthSpec, widths: list[int]) -> str:
    """Why the derived widths are (nearly) uniform, or "" when they taper: training them would rerun the
    uniform baseline under another name."""
    spread = (max(widths) - min(widths)) / cfg.d_ff
    if spread >= FLAT_SPREAD:
        return ""
    head = f"the derived widths are nearly flat (max - min = {spread:.1%} of d_ff): "
    if cfg.exponent == 0:
        return head + "--exponent 0 means uniform widths"
    if cfg.monotone:
        free = WidthSpec(MEASURED, measure=spec.measure, exponent=cfg.exponent, monotone=False, smooth=cfg.smooth,
                         min_ratio=cfg.min_ratio, multiple=cfg.multiple).widths(cfg.layers, cfg.d_ff)
        if (max(free) - min(free)) / cfg.d_ff >= FLAT_SPREAD:
            imp = spec.measure
            return head + (f"--monotone forced a non-increasing profile on an importance that does not fall with "
                           f"depth ({cfg.measure} {cfg.transform}: {imp[0]:.3g} at the first layer, {imp[-1]:.3g} "
                           f"at the last), and the isotonic fit of a rising profile is flat; drop --monotone, "
                           f"change --transform, or choose a measure that falls with depth")
    lo, hi = min(spec.measure), max(spec.measure)
    return head + (f"the importance varies little across layers ({lo:.3g} .. {hi:.3g}); raise --exponent to "
                   f"sharpen it, or choose another --measure")


def save_widths(doc: dict, out: PathLike) -> Path:
    out = Path(out)
    if out.suffix != ".json":
        raise InputError("a widths file is JSON; name it *.json", path=out, field="--out")
    write_json_atomic(out, doc)
    return out


def load_width_spec(path: PathLike) -> WidthSpec:
    """The WidthSpec of a widths file written by `interp taper derive` (for `interp train --width-file`)."""
    path = Path(path)
    try:
        doc = read_json(path)
    except FileNotFoundError:
        raise InputError("no such widths file", path=path, field="--width-file",
                         fix="write one with `interp taper derive ... --out FILE`") from None
    except ValueError as err:   # not JSON, or not text at all
        raise InputError(f"not a widths file ({str(err).removeprefix(f'{path}: ')})", path=path,
                         field="--width-file", fix="write one with `interp taper derive ... --out FILE`") from None
    if not isinstance(doc, dict) or doc.get("format") != WIDTHS_FORMAT or not isinstance(doc.get("width"), dict):
        raise InputError(f"not a widths file (expected format {WIDTHS_FORMAT!r} and a `width` object)",
                         path=path, field="--width-file", fix="write one with `interp taper derive ... --out FILE`")
    try:
        return WidthSpec.from_dict(doc["width"])
    except (TypeError, ValueError) as err:
        raise InputError(f"width: {err}", path=path, field="--width-file") from None


def format_widths(doc: dict) -> str:
    ratios = [w / doc["d_ff"] for w in doc["widths"]]
    return (f"{doc['label']}\n  widths ({doc['layers']} layers, mean {doc['d_ff']}): {doc['widths']}\n"
            f"  ratios: {json.dumps([round(r, 3) for r in ratios])}")
