"""Train a tapered LM: one config dataclass, one Trainer(cfg).run(), single process or torchrun DDP.

The loop, in the order a step runs (nanoGPT-style, small enough to read in one sitting):
  lr from warm-up + cosine -> sample the GLOBAL batch with the run's data generator -> each rank
  takes its rows of each micro-batch -> forward/backward (bf16 autocast optional; DDP all-reduces
  on the last micro-batch only) -> clip -> AdamW step -> log / eval / checkpoint -> stop on a signal.

Why sample the global batch on every rank: the data stream then depends only on the seed and the
step, not on the number of ranks or micro-batches, so a 2-rank run equals a 1-rank run with the
same global batch (up to float reduction order) and resume is exact (only the generator state and
the step need restoring). Evaluation reads fixed windows and never touches the training generator.

Run directory layout: docs/ARCHITECTURE.md, "Run directories". config.json = {"train": TrainConfig,
"model": ModelConfig, "widths", "label", "data", "params", "flops_per_token", "provenance"}.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import random
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from interp._util.config import reject_unknown_keys
from interp._util.paths import CONFIG_FILE, LOG_FILE, RESULT_FILE, TRAIN_STATE_FILE
from interp._util.provenance import provenance
from interp.data import TokenData, prepare_tokens
from interp.model import (
    ModelConfig,
    TaperedLM,
    flops_per_token,
    param_counts,
    training_flops_per_token,
)
from interp.schedules import WidthSpec
from interp.training import checkpoints
from interp.training.presets import PRESETS

DTYPES = ("fp32", "bf16", "auto")
WIDTH_FIELDS = tuple(f.name for f in dataclasses.fields(WidthSpec))
# Fields that change how a run is executed or reported, never its weights: they may differ on resume.
RUNTIME_FIELDS = ("out_dir", "resume", "threads", "eval_interval", "ckpt_interval", "keep_step_checkpoints",
                  "log_interval", "peak_flops", "notes", "preset", "progress")


@dataclass
class TrainConfig:
    """Everything that defines a training run. Defaults = the `tiny` preset's shape."""

    # model shape (d_ff is the baseline mean SwiGLU width; `width` distributes it over depth)
    d_model: int = 256
    n_layers: int = 6
    n_heads: int = 4
    d_ff: int = 1024
    n_ctx: int = 256                      # training sequence length
    width: WidthSpec = field(default_factory=WidthSpec)
    mixer: str = "attention"
    mixer_options: dict = field(default_factory=dict)  # ModelConfig.mixer_options (memory sizes); never tapered
    # data (interp.data.prepare_tokens); the model uses the tokenizer's actual vocabulary size
    source: str = "wiki"
    tokenizer: str = "bpe"
    vocab_size: int = 8192
    val_fraction: float = 0.05
    # optimisation
    steps: int = 300
    batch_size: int = 8                   # sequences per optimizer step, over all ranks and micro-batches
    grad_accum: int = 1
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup_steps: int = 30
    weight_decay: float = 0.1
    grad_clip: float = 1.0                # 0 disables clipping
    betas: tuple[float, float] = (0.9, 0.95)
    # evaluation, checkpoints, logging
    eval_interval: int = 100
    eval_batches: int = 8
    ckpt_interval: int = 100
    keep_step_checkpoints: bool = False   # also keep checkpoints/step_NNNNNN/ at every ckpt_interval
    log_interval: int = 10
    progress: bool = True                 # tqdm bar (only on a tty, only on rank 0)
    # run
    seed: int = 0
    dtype: str = "auto"                   # "fp32" | "bf16" (autocast) | "auto" (bf16 where native: bf16_is_native)
    out_dir: str = "runs/default"
    threads: int = 0                      # torch CPU threads per rank; 0 = all cores / local ranks
    resume: bool = False
    peak_flops: float | None = None       # per-device peak FLOP/s; when set, MFU is logged
    preset: str | None = None
    notes: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.width, dict):
            self.width = WidthSpec.from_dict(self.width)
        self.betas = tuple(self.betas)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["width"], d["betas"] = self.width.to_dict(), list(self.betas)
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
            raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)} (interp/presets.py)")
        return cls().with_overrides(**{**PRESETS[name], "preset": name, **overrides})

    def validate(self) -> None:
        """Raise ValueError naming the field and the fix."""
        for name in ("d_model", "n_layers", "n_heads", "d_ff", "n_ctx", "vocab_size", "steps", "batch_size",
                     "grad_accum", "eval_interval", "eval_batches", "ckpt_interval", "log_interval"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"TrainConfig.{name} must be a positive int, got {value!r}")
        if self.batch_size % self.grad_accum:
            raise ValueError(f"TrainConfig.batch_size={self.batch_size} must be divisible by "
                             f"grad_accum={self.grad_accum} (batch_size counts sequences per optimizer step)")
        if self.dtype not in DTYPES:
            raise ValueError(f"TrainConfig.dtype={self.dtype!r}; choose one of {DTYPES}")
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"TrainConfig: need 0 <= min_lr ({self.min_lr}) <= lr ({self.lr})")
        if not 0 <= self.warmup_steps <= self.steps:
            raise ValueError(f"TrainConfig.warmup_steps={self.warmup_steps} must be in [0, steps={self.steps}]")
        if self.weight_decay < 0 or self.grad_clip < 0 or self.threads < 0:
            raise ValueError("TrainConfig.weight_decay, grad_clip and threads must be >= 0")

    def model_config(self, vocab_size: int) -> ModelConfig:
        """The model this config trains, for a tokenizer with `vocab_size` ids."""
        return ModelConfig(vocab_size=vocab_size, d_model=self.d_model, n_layers=self.n_layers,
                           n_heads=self.n_heads, d_mlp=self.width.widths(self.n_layers, self.d_ff),
                           n_ctx=self.n_ctx, mixer=self.mixer, mixer_options=dict(self.mixer_options))


def bf16_is_native(device: torch.device) -> bool:
    """Whether bf16 autocast runs on native bf16 units here: a bf16-capable GPU, or a CPU with AVX512-BF16
    or AMX. benchmarks/RESULTS.md (bench_train c): on such a CPU bf16 trained the tiny preset 1.65x faster
    than fp32 with validation loss within 0.6%, so `dtype="auto"` picks it; elsewhere fp32."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text().split()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def lr_at(step: int, cfg: TrainConfig) -> float:
    """Linear warm-up to cfg.lr over warmup_steps, then cosine decay reaching min_lr at the last step."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = min(1.0, (step - cfg.warmup_steps) / max(1, cfg.steps - 1 - cfg.warmup_steps))
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1.0 + math.cos(math.pi * progress))


def config_diff(stored: dict, cfg: TrainConfig) -> list[str]:
    """Fields (other than RUNTIME_FIELDS) whose stored value differs from cfg: 'name: stored -> new'."""
    new = json.loads(json.dumps(cfg.to_dict()))  # tuples -> lists, as stored
    keys = (set(stored) | set(new)) - set(RUNTIME_FIELDS)
    return [f"{k}: {stored.get(k)!r} -> {new.get(k)!r}" for k in sorted(keys) if stored.get(k) != new.get(k)]


# ------------------------------------------------------------------------------------------ plumbing

@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    local_world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def init_distributed() -> tuple[DistInfo, bool]:
    """Join the torchrun process group when WORLD_SIZE > 1 (gloo on CPU, nccl on GPU); (info, we_created_it)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return DistInfo(), False
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    created = not dist.is_initialized()
    if created:
        if torch.cuda.is_available():
            torch.cuda.set_device(local_rank)
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return DistInfo(dist.get_rank(), world, local_rank, int(os.environ.get("LOCAL_WORLD_SIZE", world))), created


class StopFlag:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, saves, and exits. A second SIGINT aborts."""

    def __init__(self) -> None:
        self.signal: str | None = None
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        if self.signal is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.signal = signal.Signals(signum).name

    def __enter__(self) -> StopFlag:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def rng_state() -> dict:
    """All global RNG states as tensors/plain values (so train_state.pt loads with weights_only=True)."""
    key, keys, pos, has_gauss, cached = np.random.get_state()
    return {"torch": torch.get_rng_state(), "python": random.getstate(),
            "numpy": {"key": key, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []}


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    n = state["numpy"]
    np.random.set_state((n["key"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def param_hash(model: torch.nn.Module) -> str:
    """sha256 of every parameter's bytes in name order: equal hashes = bit-identical weights."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(p.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices (linear and embedding weights) only, not on norm gains."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


# ------------------------------------------------------------------------------------------- trainer

class Trainer:
    """`Trainer(cfg).run()` trains (or resumes, or returns a finished run's result) and returns result.json.

    `data` may be passed in (tests, notebooks); by default it comes from interp.data.prepare_tokens.
    """

    def __init__(self, cfg: TrainConfig, data: TokenData | None = None):
        cfg.validate()
        self.cfg, self.out, self._data = cfg, Path(cfg.out_dir), data

    # -- run directory ---------------------------------------------------------------------------
    def _check_existing(self) -> dict | None:
        """Stored result if this exact run already finished; errors for a mismatch or an unasked resume."""
        stored = read_json(self.out / CONFIG_FILE)
        result = read_json(self.out / RESULT_FILE)
        has_state = (self.out / TRAIN_STATE_FILE).is_file()
        if stored is None or not (has_state or result):
            return None  # nothing (or only a config from a run that died before its first save)
        diff = config_diff(stored.get("train", {}), self.cfg)
        if diff:
            raise ValueError(f"{self.out / CONFIG_FILE} was written by a different run config; differing fields: "
                             f"{'; '.join(diff)}. Use another --out, or pass the same settings to resume")
        if result and result.get("status") == "done":
            return result
        if not self.cfg.resume:
            raise ValueError(f"{self.out} holds an unfinished run (status {result and result.get('status')!r}); "
                             "pass --resume (TrainConfig.resume=True) to continue it, or choose another --out")
        return None

    def _run_config(self, data: TokenData, model_cfg: ModelConfig) -> dict:
        return {"train": self.cfg.to_dict(), "model": model_cfg.to_dict(), "widths": model_cfg.d_mlp,
                "label": self.cfg.width.label, "data": data.meta, "params": param_counts(model_cfg),
                "flops_per_token": flops_per_token(model_cfg, self.cfg.n_ctx), "provenance": provenance()}

    def _log(self, record: dict) -> None:
        if self.dist.main:
            with open(self.out / LOG_FILE, "a") as f:
                f.write(json.dumps(record) + "\n")

    def _truncate_log(self, step: int) -> None:
        """On resume drop log lines written after the checkpoint we resume from (they are redone), and a
        half-written last line if the process was killed mid-write."""
        path = self.out / LOG_FILE
        if not (self.dist.main and path.is_file()):
            return
        keep = []
        for line in path.read_text().splitlines():
            try:
                if json.loads(line).get("step", 0) <= step:
                    keep.append(line + "\n")
            except json.JSONDecodeError:
                continue
        checkpoints.atomic_write(self.out, {LOG_FILE: lambda p: p.write_text("".join(keep))})

    # -- distributed helpers ---------------------------------------------------------------------
    def _shard(self, batch: torch.Tensor) -> torch.Tensor:
        """This rank's rows of a global batch (equal contiguous slices)."""
        n = batch.shape[0] // self.dist.world
        return batch[self.dist.rank * n:(self.dist.rank + 1) * n]

    def _all_sum(self, values: list[float]) -> list[float]:
        if self.dist.world == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.comm_device)
        dist.all_reduce(t)
        return t.tolist()

    # -- the pieces of a step ----------------------------------------------------------------------
    def _autocast(self):
        if self.dtype == torch.bfloat16:
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _loss_sum(self, model: torch.nn.Module, batch: torch.Tensor) -> torch.Tensor:
        """Summed next-token cross-entropy of windows [b, n_ctx + 1]: inputs batch[:, :-1], targets batch[:, 1:]."""
        batch = batch.to(self.device, non_blocking=True)
        with self._autocast():
            logits = model(batch[:, :-1])  # [b, n_ctx, vocab]
        return F.cross_entropy(logits.flatten(0, 1).float(), batch[:, 1:].flatten(), reduction="sum")

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Mean validation loss and perplexity over the fixed first eval_batches windows of the val split."""
        self.raw.eval()
        total, count = 0.0, 0.0
        micro = self.cfg.batch_size // self.cfg.grad_accum
        for batch in self.data.eval_batches(micro, self.cfg.n_ctx, self.cfg.eval_batches):
            rows = batch.shape[0] - batch.shape[0] % self.dist.world  # equal shards (last batch may be short)
            if rows:
                shard = self._shard(batch[:rows])
                total += self._loss_sum(self.raw, shard).item()
                count += shard[:, 1:].numel()
        self.raw.train()
        total, count = self._all_sum([total, count])
        val_loss = total / max(count, 1.0)
        return {"val_loss": val_loss, "val_ppl": math.exp(min(val_loss, 700.0))}

    def _train_step(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One optimizer step on the global batch; returns (mean loss over this rank's rows, grad norm), unsynced."""
        cfg = self.cfg
        for group in self.optimizer.param_groups:
            group["lr"] = lr_at(step, cfg)
        batch = self.data.sample_batch("train", cfg.batch_size, cfg.n_ctx, self.generator)  # [B, n_ctx+1]
        micro_batches = batch.split(cfg.batch_size // cfg.grad_accum)
        loss_total = torch.zeros((), device=self.device)
        for i, micro in enumerate(micro_batches):
            shard = self._shard(micro)
            last = i == len(micro_batches) - 1
            sync = contextlib.nullcontext() if last or self.dist.world == 1 else self.model.no_sync()
            with sync:
                # mean over this micro-batch's targets, / grad_accum: the step's gradient is the batch mean
                loss = self._loss_sum(self.model, shard) / shard[:, 1:].numel()
                (loss / cfg.grad_accum).backward()
            loss_total += loss.detach() / cfg.grad_accum
        grad_norm = (torch.nn.utils.clip_grad_norm_(self.raw.parameters(), cfg.grad_clip)
                     if cfg.grad_clip > 0 else torch.zeros(()))
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss_total, grad_norm

    # -- checkpoints -----------------------------------------------------------------------------
    def _save(self, step: int, tokens: int, elapsed: float) -> None:
        if not self.dist.main:
            return
        checkpoints.save_checkpoint(self.out, self.raw, self.run_config)
        checkpoints.save_train_state(self.out, {
            "model": self.raw.state_dict(), "optimizer": self.optimizer.state_dict(), "step": step,
            "tokens": tokens, "elapsed_s": elapsed, "rng": rng_state(),
            "data_generator": self.generator.get_state()})
        if self.cfg.keep_step_checkpoints:
            step_dir = self.out / "checkpoints" / f"step_{step:06d}"
            checkpoints.save_checkpoint(step_dir, self.raw, {**self.run_config, "step": step, "tokens": tokens})

    def _restore(self) -> tuple[int, int, float]:
        state = checkpoints.load_train_state(self.out, map_location="cpu")
        self.raw.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["data_generator"])
        set_rng_state(state["rng"])
        return state["step"], state["tokens"], state["elapsed_s"]

    # -- setup and loop ----------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.cfg
        if torch.cuda.is_available():
            self.device = torch.device("cuda", self.dist.local_rank)
        else:
            self.device = torch.device("cpu")
            torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // self.dist.local_world))
        self.comm_device = self.device  # gloo reduces CPU tensors, nccl CUDA tensors
        use_bf16 = cfg.dtype == "bf16" or (cfg.dtype == "auto" and bf16_is_native(self.device))
        self.dtype = torch.bfloat16 if use_bf16 else torch.float32
        global_micro = cfg.batch_size // cfg.grad_accum
        if global_micro % self.dist.world:
            raise ValueError(f"TrainConfig: batch_size / grad_accum = {global_micro} sequences per micro-batch "
                             f"must be divisible by the number of ranks ({self.dist.world})")
        self.data = (self._data if self._data is not None
                     else prepare_tokens(cfg.source, cfg.tokenizer, cfg.vocab_size, cfg.val_fraction))
        self.model_cfg = cfg.model_config(self.data.vocab_size)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)  # same init on every rank (DDP also broadcasts rank 0's weights)
        self.raw = TaperedLM(self.model_cfg).to(self.device)
        self.model = (DistributedDataParallel(self.raw, device_ids=[self.dist.local_rank]
                                              if self.device.type == "cuda" else None)
                      if self.dist.world > 1 else self.raw)
        self.optimizer = make_optimizer(self.raw, cfg)
        self.generator = torch.Generator().manual_seed(cfg.seed + 1)  # the data stream; CPU like the memmaps
        self.run_config = self._run_config(self.data, self.model_cfg)
        self.train_flops = training_flops_per_token(self.model_cfg, cfg.n_ctx)

    def run(self, stop_at: int | None = None) -> dict:
        """Train to cfg.steps (or stop after step `stop_at`, saving a resumable state) and return the result."""
        self.dist, created_group = init_distributed()
        try:
            finished = self._check_existing()
            if finished is not None:
                return finished
            self._setup()
            with StopFlag() as flag:
                return self._loop(flag, stop_at)
        finally:
            if created_group and dist.is_initialized():
                dist.destroy_process_group()

    def _loop(self, flag: StopFlag, stop_at: int | None) -> dict:
        cfg, out = self.cfg, self.out
        step, tokens, elapsed_before = 0, 0, 0.0
        if cfg.resume and (out / TRAIN_STATE_FILE).is_file():
            step, tokens, elapsed_before = self._restore()
            stored = read_json(out / CONFIG_FILE) or {}
            changed = [k for k in ("source_hash", "tokenizer_hash", "n_tokens")
                       if stored.get("data", {}).get(k) != self.data.meta.get(k)]
            if changed:
                raise ValueError(f"{out / CONFIG_FILE}: field data.{changed[0]} differs from the data this resume "
                                 "would train on (the corpus or tokenizer changed); resume with the original "
                                 "data, or start a new run in another --out")
            self.run_config = {**stored, "resumed": [*stored.get("resumed", []),
                                                     {"step": step, "provenance": provenance()}]}
            self._truncate_log(step)
        elif self.dist.main:
            out.mkdir(parents=True, exist_ok=True)
            (out / LOG_FILE).unlink(missing_ok=True)
            checkpoints.write_json_atomic(out / CONFIG_FILE, self.run_config)

        from tqdm.auto import (
            tqdm,  # imported here: keeps `import interp.training` light
        )
        bar = tqdm(total=cfg.steps, initial=step, unit="step", dynamic_ncols=True,
                   disable=not (cfg.progress and self.dist.main and sys.stderr.isatty()))
        tokens_per_step = cfg.batch_size * cfg.n_ctx
        t_start = time.perf_counter()
        interval_start, interval_tokens, session_tokens = t_start, 0, 0
        evaluated = None
        status, reason, metrics, train_loss = "done", None, {}, float("nan")
        while step < cfg.steps:
            loss, grad_norm = self._train_step(step)
            step, tokens = step + 1, tokens + tokens_per_step
            interval_tokens += tokens_per_step
            session_tokens += tokens_per_step
            bar.update(1)
            busy = False
            if step % cfg.log_interval == 0 or step == cfg.steps:
                train_loss = self._all_sum([loss.item()])[0] / self.dist.world
                seconds = time.perf_counter() - interval_start
                tps = interval_tokens / max(seconds, 1e-9)
                record = {"kind": "train", "step": step, "tokens": tokens, "loss": train_loss,
                          "lr": lr_at(step - 1, cfg), "grad_norm": float(grad_norm), "tokens_per_s": tps,
                          "flops_per_s": tps * self.train_flops,
                          "elapsed_s": elapsed_before + time.perf_counter() - t_start}
                if cfg.peak_flops:
                    record["mfu"] = record["flops_per_s"] / (cfg.peak_flops * self.dist.world)
                self._log(record)
                bar.set_postfix(loss=f"{train_loss:.3f}", tok_s=f"{tps:,.0f}")
                interval_start, interval_tokens = time.perf_counter(), 0
            if step % cfg.eval_interval == 0 or step == cfg.steps:
                metrics, evaluated, busy = self.evaluate(), step, True
                self._log({"kind": "eval", "step": step, "tokens": tokens, **metrics})
            stop = step < cfg.steps and (self._all_sum([float(flag.signal is not None)])[0] > 0 or step == stop_at)
            if step % cfg.ckpt_interval == 0 or step == cfg.steps or stop:
                self._save(step, tokens, elapsed_before + time.perf_counter() - t_start)
                busy = True
            if busy:
                interval_start, interval_tokens = time.perf_counter(), 0
            if stop:
                status, reason = "interrupted", flag.signal or f"stop_at={stop_at}"
                break
        bar.close()
        return self._finish(status, reason, step, tokens, train_loss, metrics if evaluated == step else {},
                            elapsed_before + time.perf_counter() - t_start,
                            session_tokens / max(time.perf_counter() - t_start, 1e-9))

    def _finish(self, status: str, reason: str | None, step: int, tokens: int, train_loss: float,
                metrics: dict, elapsed: float, tokens_per_s: float) -> dict:
        result = {"status": status, "step": step, "tokens": tokens, "train_loss": train_loss,
                  "val_loss": metrics.get("val_loss"), "val_ppl": metrics.get("val_ppl"),
                  "params": param_counts(self.model_cfg)["total"], "label": self.cfg.width.label,
                  "widths": self.model_cfg.d_mlp, "elapsed_s": elapsed, "tokens_per_s": tokens_per_s,
                  "flops_per_s": tokens_per_s * self.train_flops, "world_size": self.dist.world,
                  "device": self.device.type, "dtype": str(self.dtype).removeprefix("torch.")}
        if self.cfg.peak_flops:
            result["mfu"] = result["flops_per_s"] / (self.cfg.peak_flops * self.dist.world)
        if reason:
            result["reason"] = reason
        if self.dist.world > 1:  # proof that the ranks hold the same weights
            hashes = [None] * self.dist.world
            dist.all_gather_object(hashes, param_hash(self.raw))
            result["rank_param_sha256"] = hashes
        if self.dist.main:
            checkpoints.write_json_atomic(self.out / RESULT_FILE, result)
        return result


def train(cfg: TrainConfig, stop_at: int | None = None) -> dict:
    """Shorthand for Trainer(cfg).run(stop_at)."""
    return Trainer(cfg).run(stop_at)


__all__ = ["TrainConfig", "Trainer", "train", "lr_at", "config_diff", "make_optimizer", "param_hash"]
