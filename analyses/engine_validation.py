"""Cross-engine validation (issue #49): every per-layer measure, through each of our three backends, against an
independent float64 computation from plain Hugging Face hooks, on every decoder family we probe.

Families: interp.hf.families' partition of TransformerLens 4.3's adapter table, the one list the family tests read:
each CHECKED family (and its interp.hf.tiny.VARIANTS) as a tiny random model (3 layers, d_model 32, seed 0, its
constant-initialised parameters varied: interp.hf.tiny.save_tiny) over `tiny_tokens` positions of random words in
sequences of `tiny_seq_len`; the pretrained `models` (SmolLM2-135M-Instruct and Gemma-3-270m, dequantized from
their GGUF files) over `tokens` positions of the held-out wiki split in sequences of `seq_len`. Each is probed once
per backend (torch hooks, nnsight, TransformerLens's bridge) and load dtype (--model-dtype float32 and bfloat16),
as `interp probe --model PATH --backend B --model-dtype D --causal` does, the probe's metric math at its float32
default. A family refused by the adapter table or not built here is one row with the reason; a family that
becomes CHECKED is validated at the next recompute, with no list to edit here.

Measures: rho_mlp, rho_block, block_influence, norm_ratio and logit_lens_kl (interp.probes.probe), and
delta_loss_skip_block (interp.causal's row: interp.ablations' block-identity hook on the model object the backend
probed; where the probe refuses the causal rows for a backend, the bridge's today, a refused row with its reason).
The reference: interp.probes.reference.reference_measures on the float32 weights cast to float64, over the very
token ids the probe ran (captured from it). A bf16 row is measured against the same float64 reference of the
float32 weights: its difference is what a bf16 load costs (weights and activations rounded to 8 significant
bits), within a stated budget, not an error of an engine.

Table figures/engine_validation.csv, one row per family x measure x backend x load dtype: max and median over
layers of |backend - reference|, the layer of the max, the largest |reference|, the tolerance (atol + rtol
|reference| per layer, TOLERANCES), the largest |difference| / tolerance, and status pass | FAIL | error |
refused with the reason. Written into the repository's figures/, it also fills its blocks of docs/probes.md and
figures/README.md (write_docs; tests/analyses/test_engine_validation.py checks they match).

    interp figures --only engine_validation --recompute     # HEAVY: 52 min on 2 loaded cores (figures/README.md)
    interp figures --only engine_validation --recompute --set 'models=[]' --set 'families=["LlamaForCausalLM"]'
"""

from __future__ import annotations

import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from analyses import outputs, read_table, repo_relative, write_table
from interp._util.config import option
from interp._util.errors import one_line
from interp._util.paths import FIGURES_DIR, REPO_ROOT

NAME = "engine_validation"
HEAVY = True  # the pretrained models through 3 backends x 2 dtypes with skip-block rows, and their float64 reference
TABLE = "engine_validation.csv"
FIGURE = "engine_validation.png"
OUTPUTS = outputs(TABLE, FIGURE)

PROBE_MEASURES = ("rho_mlp", "rho_block", "block_influence", "norm_ratio", "logit_lens_kl")
MEASURES = (*PROBE_MEASURES, "delta_loss_skip_block")
BACKENDS = ("torch", "nnsight", "transformer_lens")
LOAD_DTYPES = ("float32", "bfloat16")
PASS, FAIL, ERROR, REFUSED = "pass", "FAIL", "error", "refused"


@dataclass(frozen=True)
class Tolerance:
    """|backend - reference| <= atol + rtol |reference| at every layer; `why` is what the bound rests on."""

    atol: float
    rtol: float
    why: str


# float32 loads: bounds from the arithmetic. Unit roundoff u = 6e-8; a cosine or a norm over d_model <= 1,000
# accumulates ~sqrt(d) u ~ 2e-6 of rounding per layer's operands, so 1e-5 leaves a margin of 5.
_FP32 = "float32 rounding: ~sqrt(d_model) x 6e-8 in a cosine or a ratio"
# bfloat16 loads: a stated budget, not a bound (u = 3.9e-3 on every weight and activation compounds over the layers):
# what a bf16 load may cost before its numbers should not be read as the float32 model's, about twice the worst cost
# measured on SmolLM2 and Gemma-3 (figures/engine_validation.csv).
_BF16 = "a budget: ~2x the worst cost of a bf16 load measured"
TOLERANCES: dict[str, dict[str, Tolerance]] = {
    "float32": {
        "rho_mlp": Tolerance(1e-5, 0.0, _FP32), "rho_block": Tolerance(1e-5, 0.0, _FP32),
        "block_influence": Tolerance(1e-5, 0.0, _FP32), "norm_ratio": Tolerance(0.0, 1e-5, _FP32),
        "logit_lens_kl": Tolerance(1e-4, 0.0, "set before measuring, x10 the 1e-5 nats of rounding first assumed; "
                                              "the streamed KL's float32 cancellation exceeds it on the real models "
                                              "(below)"),
        "delta_loss_skip_block": Tolerance(1e-4, 0.0, "two float32 losses of O(10) nats: ~1e-6 each"),
    },
    "bfloat16": {
        "rho_mlp": Tolerance(0.05, 0.0, _BF16), "rho_block": Tolerance(0.05, 0.0, _BF16),
        "block_influence": Tolerance(0.02, 0.05, _BF16), "norm_ratio": Tolerance(0.0, 0.1, _BF16),
        "logit_lens_kl": Tolerance(0.05, 0.05, _BF16), "delta_loss_skip_block": Tolerance(0.05, 0.1, _BF16),
    },
}


@dataclass
class Config:
    families: tuple[str, ...] | None = option(None, "tiny random families to validate (HF class names of "
                                              "interp.hf.families.CHECKED, or names of interp.hf.tiny.VARIANTS); "
                                              "None: every family interp.hf.families lists; []: none")
    models: tuple[str, ...] = option(("smollm2-135m", "gemma3-270m"), "pretrained registry models (real weights); "
                                     "one not installed is a row saying so")
    backends: tuple[str, ...] = option(BACKENDS, "probe backends to validate")
    model_dtypes: tuple[str, ...] = option(LOAD_DTYPES, "load dtypes (--model-dtype) to validate")
    tiny_layers: int = option(3, "layers of each tiny random model")
    tiny_tokens: int = option(48, "positions probed per tiny model")
    tiny_seq_len: int = option(12, "positions per sequence, tiny models")
    tokens: int = option(256, "positions probed per pretrained model")
    seq_len: int = option(128, "positions per sequence, pretrained models")
    batch_size: int = option(4, "sequences per forward")
    text: str | None = option(None, "the pretrained models' text (a file or corpus name); None: held-out wiki")


def check_config(cfg: Config) -> None:
    """ValueError naming the field before any model loads."""
    from interp.probes.names import BACKENDS as KNOWN

    for name, values, allowed in (("backends", cfg.backends, KNOWN), ("model_dtypes", cfg.model_dtypes, LOAD_DTYPES)):
        bad = [v for v in values if v not in allowed]
        if bad or not values:
            raise ValueError(f"{NAME}.Config.{name}={list(values)}: choose a non-empty subset of {list(allowed)}")
    for name in ("tiny_layers", "tiny_tokens", "tiny_seq_len", "tokens", "seq_len", "batch_size"):
        if getattr(cfg, name) < 1:
            raise ValueError(f"{NAME}.Config.{name}={getattr(cfg, name)}: must be >= 1")
    family_list(cfg)   # a family not in the list, before the first model
    registry_models(cfg)


# ------------------------------------------------------------------------------------------ one model

def _rows_of(seen: dict[str, Any], skip_block: bool):
    """extra_rows for interp.probes.probe: keeps the probe's token batches in `seen` (the reference runs on them)
    and, with skip_block, joins the delta_loss_skip_block rows (interp.causal's format, from interp.ablations'
    block-identity hook) of the model object the backend probed."""
    def extra(df: pd.DataFrame, model: Any, batches: list, cfg: Any, **_: Any) -> pd.DataFrame:  # progress=...
        from interp.ablations.layers import layer_effects
        from interp.causal import causal_frame

        seen["batches"] = [b.clone() for b in batches]
        if not skip_block:
            return df
        effects = layer_effects(model, batches, cfg.positions, ("skip_block",))
        return pd.concat([df, causal_frame(effects, df)], ignore_index=True)
    return extra


def _probe(spec: str, text: str | None, tokens: int, seq_len: int, cfg: Config, backend: str, dtype: str,
           tokenizer: Any, seen: dict[str, Any]) -> tuple[pd.DataFrame, str]:
    """(the probe table with its skip-block rows, "") as `interp probe --causal` would compute them; when the probe
    refuses the causal rows for this backend, (the table without them, the refusal in one line)."""
    from interp._util.errors import InputError
    from interp.probes import probe

    def run(causal: bool) -> pd.DataFrame:
        return probe(spec, text, tokens=tokens, seq_len=seq_len, batch_size=cfg.batch_size, backend=backend,
                     metrics=PROBE_MEASURES, model_dtype=dtype, tokenizer=tokenizer, causal=causal, causal_tokens=0,
                     extra_rows=_rows_of(seen, skip_block=causal))
    try:
        return run(True), ""
    except InputError as err:   # e.g. the causal rows with backend=transformer_lens: the probe rows alone
        return run(False), f"interp probe --causal refuses it: {one_line(err)}"


def _provenance(df: pd.DataFrame) -> dict[str, Any]:
    """The columns every row of one probe carries: what produced it."""
    first = df.iloc[0]
    return {c: first[c] for c in ("text_source", "text_sha256", "weights_sha256", "n_tokens", "seq_len", "hardware",
                                  "versions") if c in df.columns}


def compare(got: list[float], want: list[float], tol: Tolerance) -> dict[str, Any]:
    """The comparison columns of one (measure, backend, dtype): max / median |difference| over layers, the layer of
    the max, the largest |reference|, the largest |difference| / tolerance, and pass or FAIL."""
    if len(got) != len(want):
        return {"status": FAIL, "reason": f"{len(got)} layers in the probe table, {len(want)} in the reference"}
    diffs = [math.inf if math.isnan(g) != math.isnan(w) else 0.0 if math.isnan(g) else abs(g - w)
             for g, w in zip(got, want)]
    bounds = [tol.atol + tol.rtol * abs(w) if not math.isnan(w) else 0.0 for w in want]
    ratios = [d / b if b > 0 else (0.0 if d == 0 else math.inf) for d, b in zip(diffs, bounds)]
    worst = max(range(len(ratios)), key=ratios.__getitem__)
    return {"max_abs_diff": max(diffs), "median_abs_diff": float(pd.Series(diffs).median()),
            "worst_layer": worst, "max_abs_reference": max(abs(w) for w in want), "tolerance_ratio": ratios[worst],
            "status": PASS if ratios[worst] <= 1 else FAIL,
            "reason": "" if ratios[worst] <= 1 else (f"layer {worst}: |difference| {diffs[worst]:.3g} > tolerance "
                                                     f"{bounds[worst]:.3g} (reference {want[worst]:.4g})")}


def validate(spec: str, family: str, kind: str, cfg: Config, text: str | None, tokens: int, seq_len: int,
             tokenizer: Any = None) -> list[dict[str, Any]]:
    """The rows of one model (a path or registry name): each backend x load dtype probed, the float64 reference
    computed once on the probe's tokens, every measure compared."""
    import torch

    from interp.hf import resolve_model
    from interp.probes.reference import reference_measures

    seen: dict[str, Any] = {}
    runs: dict[tuple[str, str], tuple[pd.DataFrame, str] | str] = {}
    for dtype in cfg.model_dtypes:
        for backend in cfg.backends:
            start = time.perf_counter()
            try:
                df, refused = _probe(spec, text, tokens, seq_len, cfg, backend, dtype, tokenizer, seen)
            except Exception as err:  # noqa: BLE001 - a backend that cannot run a family is a row saying why
                runs[(dtype, backend)] = f"{type(err).__name__}: {one_line(err)}"
                continue
            df.attrs["seconds"] = time.perf_counter() - start
            loaded = df.attrs.get("load", {}).get("model_dtype", dtype)
            ids = torch.cat(seen["batches"])
            if "ids" not in seen:
                seen["ids"] = ids
            if loaded != dtype:
                runs[(dtype, backend)] = f"the probe loaded the model in {loaded}, not {dtype}"
            elif not torch.equal(ids, seen["ids"]):
                runs[(dtype, backend)] = "the probe ran other tokens than the first run (the reference's)"
            else:
                runs[(dtype, backend)] = (df, refused)
            print(f"[{NAME}] {family} {dtype} {backend}: {df.attrs['seconds']:.1f}s", flush=True)
    reference: dict[str, list[float]] | str
    if "ids" not in seen:
        reference = "no backend ran, so there are no tokens to compute the reference on"
    else:
        start = time.perf_counter()
        try:
            model = resolve_model(spec).load_placed("cpu", "float32", None)
            reference = reference_measures(model, seen["ids"], MEASURES)
            del model
        except Exception as err:  # noqa: BLE001 - a reference that cannot run is every row's reason
            reference = f"reference: {type(err).__name__}: {one_line(err)}"
        print(f"[{NAME}] {family} float64 reference: {time.perf_counter() - start:.1f}s", flush=True)
    rows = []
    for (dtype, backend), run in runs.items():
        base = {"family": family, "kind": kind, "model": repo_relative(spec) if kind == "pretrained" else family,
                "backend": backend, "dtype": dtype}
        if isinstance(run, str) or isinstance(reference, str):
            reason = run if isinstance(run, str) else reference
            rows += [{**base, "measure": m, "status": ERROR, "reason": reason} for m in MEASURES]
            continue
        df, refused = run
        wide = df.pivot_table(index="layer", columns="metric", values="mean", dropna=False)
        common = {"n_layers": len(wide), "metric_dtype": "float32", "reference_dtype": "float64",
                  "probe_s": round(df.attrs["seconds"], 2), **_provenance(df)}
        for measure in MEASURES:
            tol = TOLERANCES[dtype][measure]
            if measure not in wide.columns:
                rows.append({**base, "measure": measure, "status": REFUSED if refused else ERROR,
                             "reason": refused or "the probe table has no rows of it", **common})
                continue
            rows.append({**base, "measure": measure, **compare(wide[measure].tolist(), reference[measure], tol),
                         "atol": tol.atol, "rtol": tol.rtol, **common})
    return rows


# ------------------------------------------------------------------------------------------ the table

def _unsupported(family: str, kind: str, status: str, reason: str) -> dict[str, Any]:
    return {"family": family, "kind": kind, "model": family, "measure": "all", "backend": "all", "dtype": "all",
            "status": status, "reason": reason}


def family_list(cfg: Config) -> list[tuple[str, str, str]]:
    """(family, status, reason) in table order: cfg.families, else interp.hf.families' partition of TransformerLens's
    table (CHECKED validated, each followed by its VARIANTS; NOT_PROBEABLE refused; NOT_BUILDABLE not built)."""
    from interp.hf import families
    from interp.hf.tiny import VARIANTS

    if cfg.families is not None:
        known = {*families.CHECKED, *VARIANTS}
        unknown = [f for f in cfg.families if f not in known]
        if unknown:
            raise ValueError(f"{NAME}.Config.families: {unknown} are not validated families; choose from "
                             "interp.hf.families.CHECKED or interp.hf.tiny.VARIANTS")
        return [(f, "validate", "") for f in cfg.families]
    variants = [(name, arch) for name, (arch, _) in VARIANTS.items()]
    checked = [(f, "validate", "") for arch in families.CHECKED
               for f in (arch, *(name for name, of in variants if of == arch))]
    return (checked + [(f, "refused", why) for f, why in families.NOT_PROBEABLE.items()]
            + [(f, "not built", why) for f, why in families.NOT_BUILDABLE.items()])


def tiny_rows(cfg: Config) -> list[dict[str, Any]]:
    """Every tiny family's rows: the validated ones through every backend and dtype, the others one row each."""
    from interp._util.io import write_text_atomic
    from interp.hf.tiny import save_tiny, word_text, word_tokenizer

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="engine-validation-") as work:
        text = Path(work) / "words.txt"
        write_text_atomic(text, word_text(cfg.tiny_tokens * 2))
        tokenizer = word_tokenizer()
        for family, status, reason in family_list(cfg):
            if status != "validate":
                rows.append(_unsupported(family, "tiny random", status, reason))
                continue
            try:
                path = save_tiny(Path(work) / family, family, num_hidden_layers=cfg.tiny_layers)
            except Exception as err:  # noqa: BLE001 - a listed family the builder cannot make is a row saying why
                rows.append(_unsupported(family, "tiny random", ERROR, f"build: {type(err).__name__}: {one_line(err)}"))
                continue
            rows += validate(str(path), family, "tiny random", cfg, str(text), cfg.tiny_tokens, cfg.tiny_seq_len,
                             tokenizer)
    return rows


def registry_models(cfg: Config) -> dict[str, Any]:
    """{name: its interp.hf.ModelInfo} of cfg.models; ValueError naming an unknown one."""
    from interp.hf import available_models

    infos = {m.name: m for m in available_models()}
    unknown = [m for m in cfg.models if m not in infos]
    if unknown:
        raise ValueError(f"{NAME}.Config.models: {unknown} are not registry names; known: {sorted(infos)}")
    return {name: infos[name] for name in cfg.models}


def pretrained_rows(cfg: Config) -> list[dict[str, Any]]:
    """Each pretrained model's rows (one not installed: one row with the command that installs it)."""
    rows: list[dict[str, Any]] = []
    for name, info in registry_models(cfg).items():
        if not info.installed:
            rows.append(_unsupported(name, "pretrained", "not installed", f"`{info.pip_command}`"))
            continue
        rows += validate(name, name, "pretrained", cfg, cfg.text, cfg.tokens, cfg.seq_len)
    return rows


COLUMNS = ("family", "kind", "model", "measure", "backend", "dtype", "max_abs_diff", "median_abs_diff", "worst_layer",
           "max_abs_reference", "atol", "rtol", "tolerance_ratio", "status", "reason", "n_layers", "n_tokens",
           "seq_len", "metric_dtype", "reference_dtype", "text_source", "text_sha256", "weights_sha256", "probe_s",
           "hardware", "versions")


def compute(cfg: Config, figures_dir: Path) -> None:
    check_config(cfg)
    table = pd.DataFrame(tiny_rows(cfg) + pretrained_rows(cfg))
    table = table.reindex(columns=list(COLUMNS))
    write_table(table, figures_dir, TABLE, cfg, NAME)
    if Path(figures_dir).resolve() == Path(FIGURES_DIR).resolve():   # the committed table: its docs follow
        for path in write_docs(table, REPO_ROOT):
            print(f"[{NAME}] filled {path.relative_to(REPO_ROOT)} from the table", flush=True)
    print(summary_markdown(table), flush=True)


def render(figures_dir: Path) -> list[Path]:
    from interp.plots import save_figure
    from interp.plots.validation import plot_engine_validation

    df = read_table(figures_dir, TABLE, NAME)
    return [save_figure(plot_engine_validation(df), Path(figures_dir) / FIGURE)]


# ------------------------------------------------------------------------------------------ what the docs quote

DOCS_BLOCKS = {  # page -> {block: the function of the table that renders it}
    Path("docs") / "probes.md": {"engine_validation_tolerances": lambda df: tolerance_markdown(),
                                 "engine_validation_worst": lambda df: worst_markdown(df)},
    Path("figures") / "README.md": {"engine_validation": lambda df: summary_markdown(df)},
}


def write_docs(table: pd.DataFrame, repo: Path) -> list[Path]:
    """Fill the pages' <!-- begin:BLOCK --> ... <!-- end:BLOCK --> blocks (DOCS_BLOCKS) from `table`; compute()
    does it when it writes the repository's figures/ (interp.data.report.fill_block)."""
    from interp.data.report import fill_block

    for page, blocks in DOCS_BLOCKS.items():
        for block, render in blocks.items():
            fill_block(repo / page, block, render(table))
    return [repo / page for page in DOCS_BLOCKS]

def tolerance_markdown() -> str:
    """The tolerance table docs/probes.md holds (tested equal there): per measure and load dtype, atol and rtol of
    |backend - reference| <= atol + rtol |reference|, and why each holds."""
    lines = ["| measure | float32 load: atol, rtol | why | bfloat16 load: atol, rtol | why |", "|---|---|---|---|---|"]
    for measure in MEASURES:
        cells = [f"{TOLERANCES[d][measure].atol:g}, {TOLERANCES[d][measure].rtol:g} | {TOLERANCES[d][measure].why}"
                 for d in LOAD_DTYPES]
        lines.append(f"| `{measure}` | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def worst_markdown(df: pd.DataFrame) -> str:
    """Per measure and load dtype, the largest |difference| over every layer, backend and family (the tiny ones
    together, each pretrained model alone) and its largest share of the tolerance: what docs/probes.md quotes."""
    rows = df[df["status"].isin((PASS, FAIL))]
    groups = [("tiny random", rows["kind"] == "tiny random")] + [
        (model, rows["family"] == model) for model in dict.fromkeys(rows.loc[rows["kind"] == "pretrained", "family"])]
    lines = ["| measure | load dtype | " + " | ".join(name for name, _ in groups) + " |",
             "|---|---|" + "---|" * len(groups)]
    for measure in MEASURES:
        for dtype in LOAD_DTYPES:
            cells = []
            for _, chosen in groups:
                part = rows[chosen & (rows["measure"] == measure) & (rows["dtype"] == dtype)]
                cells.append("" if part.empty else
                             f"{part['max_abs_diff'].max():.1e} ({part['tolerance_ratio'].max():.2g}x)")
            lines.append(f"| `{measure}` | {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def summary_markdown(df: pd.DataFrame) -> str:
    """The summary figures/README.md holds (tested equal there against the committed table): per kind and load
    dtype, how many rows pass, FAIL, err or are refused, the largest |difference| / tolerance; every row that does not
    pass, grouped by its reason; then the families not validated."""
    rows = df[df["measure"] != "all"]
    lines = [("| models | load dtype | families | rows | pass | FAIL | error | refused | largest \\|difference\\| / "
              "tolerance |"), "|---|---|---|---|---|---|---|---|---|"]
    for (kind, dtype), part in rows.groupby(["kind", "dtype"], sort=False):
        n = part["status"].value_counts()
        lines.append(f"| {kind} | {dtype} | {part['family'].nunique()} | {len(part)} | {n.get(PASS, 0)} | "
                     f"{n.get(FAIL, 0)} | {n.get(ERROR, 0)} | {n.get(REFUSED, 0)} | "
                     f"{part['tolerance_ratio'].max():.2g} |")
    lines += ["", "Rows that do not pass:" + (" none." if (rows["status"] == PASS).all() else "")]
    for (status, reason), part in rows[rows["status"] != PASS].groupby(["status", "reason"], sort=False):
        where = sorted({f"{r.family} {r.backend} {r.dtype}" for r in part.itertuples()})
        shown = "; ".join(where) if len(where) <= 6 else f"{len(where)} (family, backend, dtype), e.g. {where[0]}"
        lines.append(f"- {status}, {', '.join(dict.fromkeys(part['measure']))}: {shown}: {reason}")
    other = df[df["measure"] == "all"]
    if len(other):
        lines += ["", "Not validated (one row each, with the reason): " + "; ".join(
            f"{status} {len(part)}" + (f" ({', '.join(part['family'])})" if len(part) <= 20 else "")
            for status, part in other.groupby("status", sort=False)) + "."]
    return "\n".join(lines)
