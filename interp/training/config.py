"""What a training run is: TrainConfig (one field per option, each with its help), the lr schedule, and
which fields may change on resume. Torch-free, so `interp train --help` builds its flags from it at once.

Presets (named TrainConfig overrides) live in interp.training.presets; the Trainer in interp.training.trainer.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interp._util.config import flag_name, option, reject_unknown_keys
from interp._util.dtypes import AUTO, TORCH_NAMES, dtype_names
from interp.model.arch import ARCHS, DEFAULT_ARCH
from interp.training.presets import PRESETS
from interp.widths import WidthSpec

# The precisions a run (and the training benchmarks) can compute in, -> torch dtype names. "auto" picks
# bf16 where the hardware has native bf16 units (interp.training.step.bf16_is_native), else fp32.
DTYPES = dtype_names("fp32", "bf16", AUTO)
TORCH_DTYPE_NAMES = {name: TORCH_NAMES[name] for name in DTYPES if name != AUTO}  # {"fp32": "float32", ...}
WIDTH_FIELDS = tuple(f.name for f in dataclasses.fields(WidthSpec))
# How ranks share the model under torchrun (interp.training.parallel); one process trains the plain model.
PARALLEL = ("ddp", "fsdp")
# lr schedules (lr_at): cosine decay to one horizon, or warmup-stable-decay, whose stable phase does not depend
# on the horizon, so cooldown branches off one run give every shorter length (interp.training.cooldown).
LR_SCHEDULES = ("cosine", "wsd")
# `interp train --help` lists the flags under these headings, in this order (each field's `section`); the command
# adds its own flags to them (--preset and --set to model, the WidthSpec flags to width, --out's field is output's).
SECTIONS = {
    "model": "what is trained: a preset, and the model's shape",
    "width": "the MLP width over depth (interp.widths.WidthSpec)",
    "data": "the corpus and the tokenizer",
    "optimisation": "how long and how hard: steps, batch, AdamW, precision, seed",
    "schedule": "the learning rate over the steps (warm-up, cosine or warmup-stable-decay, cooldown branches)",
    "parallel": "how the run executes: torchrun ranks, CPU threads, memory, compilation",
    "checkpointing": "saving and resuming",
    "output": "the run directory and what the run reports: evaluation, log.jsonl, progress",
}
MAX_STEPS_ENV = "INTERP_MAX_STEPS"   # caps every run's steps (a quick pass over the README tour); unset: no cap
COOLDOWN_FRACTION = 0.2   # the default (Hagele et al.); a run whose schedule is not wsd stores this one
# Fields that change how a run is executed or reported, never its weights: they may differ on resume.
RUNTIME_FIELDS = ("out_dir", "resume", "threads", "eval_interval", "ckpt_interval", "keep_step_checkpoints",
                  "log_interval", "peak_flops", "notes", "preset", "progress")


def _pair(text: str) -> tuple[float, float]:
    values = tuple(float(v) for v in text.split(","))
    if len(values) != 2:
        raise ValueError(f"--betas {text!r}: give two numbers, e.g. 0.9,0.95")
    return values


def _absolute_path(value: Any, names: tuple[str, ...]) -> Any:
    """`value` as an absolute path when it is an existing relative path and not one of `names`; else as given."""
    if not isinstance(value, str) or value in names or not value:
        return value
    path = Path(value).expanduser()
    return str(path.resolve()) if not path.is_absolute() and path.exists() else value


@dataclass
class TrainConfig:
    """Everything that defines a training run. Defaults = the `tiny` preset's shape.

    Every field is a flag of `interp train` (interp._util.config.add_arguments) unless marked cli=False;
    `width` is set by the --schedule/--start/--end/--profile/--multiple group (interp.widths.WidthSpec)."""

    # model shape (d_ff is the baseline mean SwiGLU width; `width` distributes it over depth)
    d_model: int = option(256, "residual stream width", section="model")
    n_layers: int = option(6, "decoder blocks", section="model")
    n_heads: int = option(4, "attention heads", section="model")
    d_ff: int = option(1024, "baseline (mean) SwiGLU width; the width schedule distributes it over depth",
                       section="model")
    n_ctx: int = option(256, "training sequence length", section="model")
    width: WidthSpec = option(help="MLP width over depth", default_factory=WidthSpec, cli=False)
    mixer: str = option("attention", "token mixer: attention | gated_attention | ... (interp.model.mixers)",
                        section="model")
    arch: str = option(DEFAULT_ARCH, "block style: llama (Transformer++) | gpt2 (LayerNorm, learned positions, GELU "
                       "MLP, biases, tied embeddings; attention only); interp.model.arch", choices=tuple(ARCHS),
                       section="model")
    # ModelConfig.mixer_options (memory sizes); never tapered
    mixer_options: dict = option(help="ModelConfig.mixer_options (e.g. memory sizes), via --set",
                                 default_factory=dict, cli=False)
    # data (interp.data.prepare_tokens); the model uses the tokenizer's actual vocabulary size
    source: str = option("wiki", "wiki, shakespeare, english, a text file or folder, or a folder from "
                                 "`interp data tokenize`", section="data")
    tokenizer: str = option("bpe", "bpe (trained on the source's train split), smollm2, gpt2, a registry model's name "
                            "(its tokenizer: smollm2-135m, gemma3-270m), or a tokenizer path", section="data")
    vocab_size: int = option(8192, "vocabulary of a trained BPE", section="data")
    val_fraction: float = option(0.05, "fraction of documents held out for validation", section="data")
    # optimisation
    steps: int = option(300, "optimizer steps (below the warm-up, a warm-up not given is shortened to fit)",
                        section="optimisation")
    batch_size: int = option(8, "sequences per optimizer step, over all ranks and micro-batches",
                             section="optimisation")
    grad_accum: int = option(1, "micro-batches per optimizer step", section="optimisation")
    lr: float = option(2e-3, "peak learning rate", section="optimisation")
    # the lr schedule (lr_at)
    min_lr: float = option(2e-4, "learning rate at the last step (the end of the decay)", section="schedule")
    warmup_steps: int = option(30, "linear warm-up steps", section="schedule")
    lr_schedule: str = option("cosine", "cosine: decay from lr to min_lr over the whole run; wsd: warmup-stable-"
                              "decay, lr held after the warm-up and a 1-sqrt cooldown to min_lr over the last "
                              "cooldown_fraction of the steps (Hagele et al. 2024)", choices=LR_SCHEDULES,
                              section="schedule")
    cooldown_fraction: float = option(COOLDOWN_FRACTION, "wsd: fraction of a run's steps (and of each branch's) "
                                      "spent cooling down (ignored by other schedules, and not stored)",
                                      section="schedule")
    cooldowns: tuple[int, ...] = option((), "wsd: shorter lengths, in steps, each trained as a cooldown branched "
                                        "off this run's stable phase and evaluated (cooldowns/step_N/; "
                                        "interp.training.cooldown): one run gives every length", metavar="S1,S2",
                                        section="schedule")
    weight_decay: float = option(0.1, "AdamW weight decay (matrices only)", section="optimisation")
    grad_clip: float = option(1.0, "gradient-norm clip; 0 disables clipping", section="optimisation")
    betas: tuple[float, float] = option((0.9, 0.95), "AdamW betas", parse=_pair, metavar="B1,B2",
                                        section="optimisation")
    # evaluation, checkpoints, logging
    eval_interval: int = option(100, "steps between validation passes", section="output")
    eval_batches: int = option(8, "validation batches per pass (fixed windows)", section="output")
    ckpt_interval: int = option(100, "steps between checkpoints", section="checkpointing")
    keep_step_checkpoints: bool = option(False, "also keep checkpoints/step_NNNNNN/ at every ckpt_interval",
                                         section="checkpointing")
    log_interval: int = option(10, "steps between log.jsonl lines", section="output")
    progress: bool = option(True, "rank 0 shows progress on stderr: a tqdm bar on a terminal, else (nohup, Slurm, a "
                            "pipe) a line every tenth of the steps or 30 s, with the ETA", section="output")
    # run
    seed: int = option(0, "seed of the initialisation and of the data stream", section="optimisation")
    dtype: str = option("auto", "fp32 | bf16 (autocast) | auto (bf16 where native: bf16_is_native)",
                        choices=DTYPES, section="optimisation")
    out_dir: str = option("runs/default", "run directory, e.g. runs/cosine-1.5-0.5", flag="--out", section="output")
    threads: int = option(0, "torch CPU threads per rank; 0 = all cores / local ranks", section="parallel")
    # execution at scale (interp.training.parallel, docs/scale.md); each is part of the run: kept on resume
    parallel: str = option("ddp", "ddp | fsdp: how torchrun ranks share the model (fsdp: FSDP2 fully_shard per "
                           "block + root, bf16 params with fp32 reduce when dtype is bf16, sharded DCP train "
                           "states); one process trains the plain model either way", choices=PARALLEL,
                           section="parallel")
    activation_checkpointing: bool = option(False, "recompute each decoder block's activations in backward "
                                            "(torch.utils.checkpoint, non-reentrant): less memory, ~1 more forward",
                                            section="parallel")
    compile: bool = option(False, "torch.compile each decoder block's forward (embedding, final norm, unembedding "
                           "and loss stay eager); evaluation runs eager", section="parallel")
    fused_adamw: bool = option(False, "AdamW fused=True (one kernel per step) where the device supports it (CUDA, "
                               "CPU in torch 2.13); faster, but it rounds differently: off by default",
                               section="optimisation")
    resume: bool = option(False, "continue the run in --out from its train_state.pt", section="checkpointing")
    peak_flops: float | None = option(None, "per-device peak FLOP/s; when set, MFU is logged", section="output")
    preset: str | None = option(None, "the preset this config came from (TrainConfig.from_preset)", cli=False)
    notes: str = option("", "free text stored with the run", cli=False)

    def __post_init__(self) -> None:
        if isinstance(self.width, dict):
            self.width = WidthSpec.from_dict(self.width)
        self.betas = tuple(self.betas)
        self.cooldowns = tuple(self.cooldowns)

    def to_dict(self) -> dict:
        """The stored form (config.json, run comparisons). A source or tokenizer typed as a path relative to the
        working directory is stored absolute, so probe, eval and export read the run's source (its BPE) and
        tokenizer from any directory; names (wiki, bpe, ...) stay names, and messages keep what was typed."""
        from interp.data.documents import CORPORA
        from interp.data.tokenizers import BUILTIN_TOKENIZERS

        d = dataclasses.asdict(self)
        d["source"] = _absolute_path(self.source, CORPORA)
        d["tokenizer"] = _absolute_path(self.tokenizer, BUILTIN_TOKENIZERS)
        d["width"], d["betas"], d["cooldowns"] = self.width.to_dict(), list(self.betas), list(self.cooldowns)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        """Inverse of to_dict; unknown keys are an error (a typo must not silently use a default)."""
        reject_unknown_keys(cls, d)
        return cls(**d)

    def with_overrides(self, **overrides) -> TrainConfig:
        """A copy with fields replaced; WidthSpec fields (schedule, start, end, profile, multiple, k) go to
        `width`, and giving a profile implies schedule="profile"."""
        width_kw = {k: overrides.pop(k) for k in WIDTH_FIELDS if k in overrides}
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise ValueError(f"TrainConfig: unknown fields {unknown}; see interp.training.TrainConfig")
        if width_kw:
            spec = {**self.width.to_dict(), **width_kw}
            if width_kw.get("profile") and "schedule" not in width_kw:
                spec["schedule"] = "profile"
            if spec["schedule"] != "profile":
                spec["profile"] = None
            overrides["width"] = WidthSpec.from_dict(spec)
        return dataclasses.replace(self, **overrides)

    @classmethod
    def from_preset(cls, name: str, **overrides) -> TrainConfig:
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)} "
                             "(interp/training/presets.py)")
        return cls().with_overrides(**{**PRESETS[name], "preset": name, **overrides})

    def validate(self) -> None:
        """Raise ValueError naming the field, its flag and the fix. Torch-free and cheap (no data, no model), so
        callers run it before anything expensive; it also resolves the widths, so a schedule the shape cannot
        take (--multiple 7 on the tiny preset, --start 3 --end 0.1) fails here. interp.training.trainer
        .check_model checks the model itself (the mixer and its options) on the meta device."""
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "n_ctx", "vocab_size", "steps", "batch_size",
                     "grad_accum", "eval_interval", "eval_batches", "ckpt_interval", "log_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{_field(name, value)} must be a positive int")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"TrainConfig.batch_size={self.batch_size} must be divisible by "
                             f"grad_accum={self.grad_accum} (batch_size counts sequences per optimizer step)")
        if self.dtype not in DTYPES:
            raise ValueError(f"TrainConfig.dtype={self.dtype!r}; choose one of {DTYPES}")
        if self.parallel not in PARALLEL:
            raise ValueError(f"{_field('parallel', self.parallel)}: choose one of {list(PARALLEL)}")
        for name in ("activation_checkpointing", "compile", "fused_adamw"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{_field(name, getattr(self, name))} must be true or false")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"TrainConfig: need 0 <= min_lr ({self.min_lr}) <= lr ({self.lr})")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"TrainConfig.warmup_steps={self.warmup_steps} must be in [0, steps={self.steps}]")
        self._validate_schedule()
        for name, what in (("weight_decay", "0 = none"), ("grad_clip", "0 disables clipping"),
                           ("threads", "0 = all cores / local ranks")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"{_field(name, value)} must be >= 0 ({what})")
        if isinstance(self.val_fraction, bool) or not isinstance(self.val_fraction, (int, float)) or not (
                0 < self.val_fraction < 1):
            raise ValueError(f"{_field('val_fraction', self.val_fraction)} must be in (0, 1), e.g. 0.05: the "
                             "held-out documents are what val_loss is measured on")
        if len(self.betas) != 2 or not all(isinstance(b, (int, float)) and 0 <= b < 1 for b in self.betas):
            raise ValueError(f"{_field('betas', list(self.betas))} must be two numbers in [0, 1), e.g. 0.9,0.95")
        if self.peak_flops is not None and not self.peak_flops > 0:
            raise ValueError(f"{_field('peak_flops', self.peak_flops)} must be > 0 (the device's peak FLOP/s)")
        try:
            self.width.widths(self.n_layers, self.d_ff)
        except ValueError as err:
            raise ValueError(f"TrainConfig.width ({self.width.label}; --schedule/--start/--end/--profile/--multiple) "
                             f"with n_layers={self.n_layers}, d_ff={self.d_ff}: {err}") from err

    def _validate_schedule(self) -> None:
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"{_field('lr_schedule', self.lr_schedule)}: choose one of {list(LR_SCHEDULES)}")
        frac = self.cooldown_fraction
        if isinstance(frac, bool) or not isinstance(frac, (int, float)) or not 0 < frac <= 1:
            raise ValueError(f"{_field('cooldown_fraction', frac)} must be in (0, 1], e.g. 0.2")
        if self.lr_schedule == "wsd" and decay_start(self.steps, self) < self.warmup_steps:
            raise ValueError(f"{_field('cooldown_fraction', frac)}: the cooldown of a {self.steps}-step run would "
                             f"start inside the {self.warmup_steps}-step warm-up; lower it or --warmup-steps")
        if not self.cooldowns:
            return
        if self.lr_schedule != "wsd":
            raise ValueError(f"{_field('cooldowns', list(self.cooldowns))} needs --lr-schedule wsd: only a "
                             "warmup-stable-decay run has a stable phase to branch cooldowns off")
        if self.parallel == "fsdp":
            raise ValueError(f"{_field('cooldowns', list(self.cooldowns))} is not supported with --parallel fsdp "
                             "(the branch snapshots the full model and optimizer state); use ddp, or train each "
                             "length as its own run")
        for length in self.cooldowns:
            if isinstance(length, bool) or not isinstance(length, int) or not 0 < length < self.steps:
                raise ValueError(f"{_field('cooldowns', list(self.cooldowns))}: each length must be an int in "
                                 f"(0, steps={self.steps}); the run's own end is its longest length")
            if decay_start(length, self) < self.warmup_steps:
                raise ValueError(f"{_field('cooldowns', list(self.cooldowns))}: the {length}-step branch would "
                                 f"start cooling down inside the {self.warmup_steps}-step warm-up; drop it or "
                                 "shorten --warmup-steps")
        if len(set(self.cooldowns)) != len(self.cooldowns):
            raise ValueError(f"{_field('cooldowns', list(self.cooldowns))}: a length is listed twice")

    def model_config(self, vocab_size: int):
        """The interp.model.ModelConfig this config trains, for a tokenizer with `vocab_size` ids."""
        from interp.model.config import (
            ModelConfig,  # imports the mixer registry (torch): not at module level
        )

        return ModelConfig(vocab_size=vocab_size, d_model=self.d_model, n_layers=self.n_layers,
                           n_heads=self.n_heads, d_mlp=self.width.widths(self.n_layers, self.d_ff),
                           n_ctx=self.n_ctx, mixer=self.mixer, mixer_options=dict(self.mixer_options),
                           arch=self.arch)


def _field(name: str, value: object) -> str:
    """A field and its value as the library and the command line name them: TrainConfig.threads=-2 (--threads)."""
    field = next(f for f in dataclasses.fields(TrainConfig) if f.name == name)
    flag = f" ({flag_name(field)})" if field.metadata.get("cli", True) else ""
    return f"TrainConfig.{name}={value!r}{flag}"


def decay_start(steps: int, cfg: TrainConfig) -> int:
    """wsd: the first step of the cooldown of a `steps`-step run (at least one step cools down)."""
    return steps - max(1, round(cfg.cooldown_fraction * steps))


def max_steps() -> int | None:
    """The INTERP_MAX_STEPS cap on every run's steps (None when unset): how a quick pass runs the README's tour
    and the experiments as written, each run shortened and saying so."""
    raw = os.environ.get(MAX_STEPS_ENV, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"environment variable {MAX_STEPS_ENV}={raw!r}: give a positive step count "
                         f"(e.g. {MAX_STEPS_ENV}=3), or unset it for the configured steps")
    return int(raw)


def fit_to_steps(cfg: TrainConfig, given: Iterable[str] = ()) -> tuple[TrainConfig, list[str]]:
    """The one rule, for `interp train` and every experiment, when --steps is shorter than the schedule: the
    run is fitted and says so, rather than refused (a quick `--steps 25` of a preset with a 25-step warm-up).
    INTERP_MAX_STEPS (max_steps) first caps the steps, as if --steps had been given that value; a capped run's
    warm-up is fitted even when given (an experiment's own warm-up of 10 steps, say): the cap overrides both.

    wsd cooldown branches not shorter than the run are dropped (the run's own end is its longest length). Then a
    warm-up the user did not set (`given`: the fields set explicitly, not by the preset) longer than the run
    allows is shortened to the longest that fits: the whole run (cosine), or up to the first cooldown step (wsd:
    of the run, or of its shortest branch). A warm-up given explicitly is left alone: validate() names the clash.
    Returns the fitted config and one line per change, for the caller to print; values validate() refuses anyway
    (a negative step count, a cooldown_fraction of 2) are left to it."""
    notes: list[str] = []
    cap = max_steps()
    capped = cap is not None and _is_int(cfg.steps) and cfg.steps > cap
    if capped:
        notes.append(f"steps capped from {cfg.steps} to {cap} by {MAX_STEPS_ENV}={cap}: a quick run, not the "
                     f"configured one (its result records steps={cap})")
        cfg = dataclasses.replace(cfg, steps=cap)
    steps, warmup, frac = cfg.steps, cfg.warmup_steps, cfg.cooldown_fraction
    if not (_is_int(steps) and steps > 0 and _is_int(warmup) and warmup >= 0 and cfg.lr_schedule in LR_SCHEDULES
            and isinstance(frac, int | float) and not isinstance(frac, bool) and 0 < frac <= 1):
        return cfg, notes
    wsd = cfg.lr_schedule == "wsd"
    if not wsd and frac != COOLDOWN_FRACTION:   # it does nothing without wsd: neither stored nor compared on resume
        cfg = dataclasses.replace(cfg, cooldown_fraction=COOLDOWN_FRACTION)
        notes.append(f"--cooldown-fraction {frac} ignored: only --lr-schedule wsd cools down (this run's schedule is "
                     f"{cfg.lr_schedule}), so the run stores the default, {COOLDOWN_FRACTION}")
    too_long = [n for n in cfg.cooldowns if _is_int(n) and n >= steps] if wsd else []
    if too_long:
        kept = tuple(n for n in cfg.cooldowns if n not in too_long)
        cfg = dataclasses.replace(cfg, cooldowns=kept)
        notes.append(f"--cooldowns {_csv(too_long)} dropped: a cooldown branch must be shorter than the {steps}-step "
                     f"run ({f'kept {_csv(kept)}' if kept else 'no branches left'})")
    if wsd:
        lengths = [steps, *(n for n in cfg.cooldowns if _is_int(n) and 0 < n < steps)]
        length = min(lengths, key=lambda n: decay_start(n, cfg))
        limit = decay_start(length, cfg)
        why = (f"the {length}-step {'run' if length == steps else 'cooldown branch'} starts cooling down at step "
               f"{limit}")
    else:
        limit, why = steps, f"the run has {steps} steps"
    if warmup > limit and ("warmup_steps" not in set(given) or capped):
        cfg = dataclasses.replace(cfg, warmup_steps=limit)
        notes.append(f"warm-up shortened from {warmup} to {limit} steps: {why} (--warmup-steps sets it)")
    return cfg, notes


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _csv(values: Iterable[int]) -> str:
    return ",".join(str(v) for v in values)


def lr_at(step: int, cfg: TrainConfig, steps: int | None = None) -> float:
    """Linear warm-up to cfg.lr over warmup_steps, then the decay reaching min_lr at the last step of a run of
    `steps` steps (default cfg.steps; a cooldown branch passes its own length): cosine over the rest of the run,
    or (wsd) lr held until decay_start, then min_lr + (lr - min_lr)(1 - sqrt(progress)), the 1-sqrt cooldown that
    Hagele et al. 2024 found best. Before decay_start a wsd lr does not depend on `steps`."""
    steps = cfg.steps if steps is None else steps
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.lr_schedule == "wsd":
        start = decay_start(steps, cfg)
        if step < start:
            return cfg.lr
        progress = min(1.0, (step - start + 1) / (steps - start))
        return cfg.min_lr + (cfg.lr - cfg.min_lr) * (1.0 - math.sqrt(progress))
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, steps - 1 - cfg.warmup_steps))
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * progress))


def config_diff(stored: dict, cfg: TrainConfig) -> list[str]:
    """Fields (other than RUNTIME_FIELDS) whose stored value differs from cfg: 'name: stored -> new'. A field
    the stored config lacks (written before the field existed) counts as its default, which is what that run
    did: adding an option keeps older run directories resumable."""
    new = _effective(json.loads(json.dumps(cfg.to_dict())))  # tuples -> lists, as stored
    # a field the stored config lacks was added later: that run was trained with its default (e.g. arch "llama")
    defaults = json.loads(json.dumps(TrainConfig().to_dict()))
    stored = _effective({**{k: v for k, v in defaults.items() if k not in stored}, **stored})
    keys = (set(stored) | set(new)) - set(RUNTIME_FIELDS)
    return [f"{k}: {stored.get(k)!r} -> {new.get(k)!r}" for k in sorted(keys) if stored.get(k) != new.get(k)]


def _effective(d: dict) -> dict:
    """A stored config as it trains: cooldown_fraction does nothing unless lr_schedule is wsd, so a run that stored
    another one (before fit_to_steps dropped it) compares equal to one with the default, and resumes."""
    if d.get("lr_schedule") != "wsd" and "cooldown_fraction" in d:
        return {**d, "cooldown_fraction": COOLDOWN_FRACTION}
    return d


def parse_train_overrides(items: list[str], where: str) -> dict:
    """`--set FIELD=JSON` items for a TrainConfig, parsed and type-checked against its fields (and the WidthSpec
    fields it accepts: schedule, start, end, ...): a bad value is refused with the field and the expected type."""
    import typing

    from interp._util.config import parse_set_overrides

    return parse_set_overrides(items, where, TrainConfig, extra_fields=typing.get_type_hints(WidthSpec))
