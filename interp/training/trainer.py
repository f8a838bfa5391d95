"""Train a tapered LM: `Trainer(cfg).run()`, single process or torchrun (DDP or FSDP2).

`Trainer(cfg)` builds everything a run needs (process group, device, data, model, optimizer, data
stream, and the saved state of an interrupted run when resuming); `run()` is then the loop, in the
order a step runs (nanoGPT-style, small enough to read in one sitting):
  sample the GLOBAL batch with the run's data generator -> train_step: lr from warm-up + cosine, each
  rank takes its rows of each micro-batch, forward/backward (bf16 autocast optional; DDP / FSDP synchronise
  gradients on the last micro-batch only), clip, AdamW step -> log / eval / checkpoint -> stop on a signal.

Why sample the global batch on every rank: the data stream then depends only on the seed and the
step, not on the number of ranks or micro-batches, so a 2-rank run equals a 1-rank run with the
same global batch (up to float reduction order) and resume is exact (only the generator state and
the step need restoring). Evaluation reads fixed windows and never touches the training generator.

The step itself is `train_step(model, optimizer, micro_batches, ...)` (interp.training.step), which the
benchmarks' bare loop calls too, so "Trainer vs bare loop" measures exactly the loop around it. How the
model runs (DDP / FSDP, activation checkpointing, compile) is interp.training.parallel; the sharded train
states of FSDP runs are interp.training.sharded.

The run directory (its lock, what a run finds there, every file it writes) is interp.training.run_dir; its
layout: docs/ARCHITECTURE.md, "Run directories". config.json = {"train": TrainConfig, "model": ModelConfig,
"widths", "label", "data", "params", "flops_per_token", "provenance"}.
"""

from __future__ import annotations

import gc
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as tdist
from jaxtyping import Int
from torch import Tensor

from interp._util import cpu_kernels
from interp._util.dist import Distributed
from interp._util.errors import InputError
from interp._util.paths import CONFIG_FILE, TRAIN_STATE_FILE
from interp._util.progress import progress
from interp._util.provenance import provenance
from interp.data import TokenData, prepare_tokens
from interp.model import TaperedLM, flops_per_token, param_counts, training_flops_per_token
from interp.training import checkpoints, cooldown, parallel, sharded
from interp.training.config import TrainConfig, fit_to_steps, lr_at, max_steps
from interp.training.run_dir import RunDir
from interp.training.runtime import StopFlag, param_hash, rng_state, set_rng_state
from interp.training.step import bf16_is_native, compute_dtype, lm_loss_sum, make_optimizer, train_step


def check_model(cfg: TrainConfig) -> None:
    """Build the model `cfg` describes on the meta device (no memory, no data), so an unknown --mixer, bad
    mixer options or a shape the model cannot take fail before the tokenizer and token files are built.
    It uses cfg.vocab_size; the run uses the tokenizer's actual vocabulary, which no shape check depends on."""
    with torch.device("meta"):
        TaperedLM(cfg.model_config(cfg.vocab_size))


def _kernel_mode(config: dict) -> str:
    """The CPU kernel mode a run config's provenance records (runs saved before it was recorded: native)."""
    hw = (config.get("provenance") or {}).get("hardware") or {}
    kernels = hw.get("cpu_kernels") if isinstance(hw, dict) else None
    return kernels.get("mode", cpu_kernels.NATIVE) if isinstance(kernels, dict) else cpu_kernels.NATIVE


# ------------------------------------------------------------------------------------------- trainer

class Trainer:
    """`Trainer(cfg).run()` trains (or resumes, or returns a finished run's result) and returns result.json.

    Everything is built here, before run(), cheapest checks first: the config (TrainConfig.validate) and the
    model on the meta device (check_model), then the run directory (interp.training.run_dir), locked so a second
    process on the same --out fails at once: a directory holding this exact finished run only loads its result
    (`self.finished`; nothing else is built, so a rerun costs nothing); a resume reads train_state.pt here. Only
    then the data, model, optimizer and data stream. `data` may be passed in (tests, notebooks); by default it
    comes from interp.data.prepare_tokens. Raises ValueError (InputError) or OSError (LockHeld) naming the
    file, the field and the fix: for a directory written by another config, an unasked resume, unreadable
    run files. The lock is released when run() returns (or by close()).
    """

    def __init__(self, cfg: TrainConfig, data: TokenData | None = None):
        if max_steps() is not None:   # INTERP_MAX_STEPS: the Python API is capped as `interp train` is, saying so
            cfg, notes = fit_to_steps(cfg)
            for note in notes:
                print(f"interp: {note}", file=sys.stderr, flush=True)
        cfg.validate()
        check_model(cfg)
        self.cfg, self.out = cfg, Path(cfg.out_dir)
        self.dist = Distributed.from_env()  # joins torchrun's process group when WORLD_SIZE > 1
        self.device = torch.device("cuda", self.dist.local_rank) if torch.cuda.is_available() else torch.device("cpu")
        self.comm_device = self.device  # gloo reduces CPU tensors, nccl CUDA tensors
        self.run_dir = RunDir(self.out, self.dist, self.all_sum)
        try:
            self.run_dir.lock(create=False)
            found = self.run_dir.inspect(cfg)
            self.finished, self._stored, self._state = found.finished, found.stored, found.state
            if self.finished is None:
                self._build(data)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Release the run directory and leave the process group (run() does this when it returns).

        DDP's wrapper is dropped first, while the process group is alive: its Reducer holds the group, and freed
        later (when the caller lets the Trainer go) the Reducer's destructor would destroy the gloo group with the
        GIL held, joining a gloo thread that waits for the GIL to free a collective's tensor: a hang at exit, seen
        under torchrun on 2 CPU ranks (pytorch/pytorch#56297). self.model is then the unwrapped model."""
        self.run_dir.close()
        if getattr(self, "model", None) is not None and self.model is not getattr(self, "raw", None):
            self.model = self.raw
            gc.collect()   # the wrapper's reference cycles, so the Reducer goes now, not at a later collection
        self.dist.close()

    def _build(self, data: TokenData | None) -> None:
        cfg, world = self.cfg, self.dist.world_size
        if self.device.type == "cpu":
            torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // self.dist.local_world_size))
        self.dtype = compute_dtype(cfg.dtype, self.device)
        global_micro = cfg.batch_size // cfg.grad_accum
        if global_micro % world:
            raise ValueError(f"TrainConfig: batch_size / grad_accum = {global_micro} sequences per micro-batch "
                             f"must be divisible by the number of ranks ({world})")
        # data, model (same init on every rank; DDP also broadcasts rank 0's weights), optimizer
        self.data = data if data is not None else prepare_tokens(cfg.source, cfg.tokenizer, cfg.vocab_size,
                                                                 cfg.val_fraction)
        self.model_cfg = cfg.model_config(self.data.vocab_size)
        random.seed(cfg.seed)
        np.random.seed(cfg.seed)
        torch.manual_seed(cfg.seed)
        self.raw = TaperedLM(self.model_cfg).to(self.device)
        self.model = parallel.wrap_model(self.raw, cfg.parallel, self.dist, self.dtype,  # FSDP: raw is sharded
                                         checkpointing=cfg.activation_checkpointing, compile=cfg.compile)
        self.optimizer = make_optimizer(self.model, cfg)
        self.sharded = cfg.parallel == "fsdp"  # train states through DCP (interp.training.sharded)
        self._host: TaperedLM | None = None  # FSDP: rank 0's CPU copy of the full weights, refilled per save
        self.generator = torch.Generator().manual_seed(cfg.seed + 1)  # the data stream; CPU like the memmaps
        self.train_flops = training_flops_per_token(self.model_cfg, cfg.n_ctx)
        cpu_kernels.check()  # INTERP_CPU_KERNELS=portable must be in effect before a step is trained
        self.run_config = {"train": cfg.to_dict(), "model": self.model_cfg.to_dict(), "widths": self.model_cfg.d_mlp,
                           "label": cfg.width.label, "data": self.data.meta, "params": param_counts(self.model_cfg),
                           "flops_per_token": flops_per_token(self.model_cfg, cfg.n_ctx), "provenance": provenance()}
        # where the loop starts: step 0, or the saved state of an interrupted run
        self.resuming = self._state is not None
        self.resumed_from: str | None = None  # the sharded state folder a resume loaded
        self.start_step, self.start_tokens, self.start_elapsed = 0, 0, 0.0
        self.start_train_loss = float("nan")  # the last logged train loss, until this session logs one
        if self.resuming:
            self._restore(self._state)
            self._state = None

    def _restore(self, state: dict) -> None:
        """Weights, optimizer (train_state.pt, or the sharded state it names), data stream and global RNGs;
        refuse changed data."""
        stored = self._stored
        changed = [k for k in ("source_hash", "tokenizer_hash", "n_tokens")
                   if stored.get("data", {}).get(k) != self.data.meta.get(k)]
        if changed:
            raise ValueError(f"{self.out / CONFIG_FILE}: field data.{changed[0]} differs from the data this resume "
                             "would train on (the corpus or tokenizer changed); resume with the original "
                             "data, or start a new run in another --out")
        was, now = _kernel_mode(stored), _kernel_mode({"provenance": provenance()})
        if was != now:
            raise InputError(f"field provenance.hardware.cpu_kernels: this run was trained with {was} CPU kernels and "
                             f"this resume would continue with {now} ones: mixed kernels would make it neither. Resume "
                             f"with the same {cpu_kernels.MODE_VAR} ({was}: "
                             f"{'set it to portable' if was == 'portable' else 'unset it'}), or start a new run",
                             path=self.out / CONFIG_FILE)
        if self.sharded:
            sharded.load(self.out, state, self.model, self.optimizer, self.dist)
        else:  # tensors and optimizer groups checked against this run's model first: one line, not a traceback
            checkpoints.check_train_state(state, self.out / TRAIN_STATE_FILE, self.raw, self.optimizer)
            self.raw.load_state_dict(state["model"])
            self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["data_generator"])
        set_rng_state(state["rng"])
        self.start_step, self.start_tokens, self.start_elapsed = state["step"], state["tokens"], state["elapsed_s"]
        self.start_train_loss = (state["train_loss"] if "train_loss" in state
                                 else self.run_dir.logged_train_loss(self.start_step))
        self.resumed_from = state.get(sharded.STATE_KEY)
        self.run_config = {**stored, "resumed": [*stored.get("resumed", []),
                                                 {"step": self.start_step, "provenance": provenance()}]}

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, stop_at: int | None = None) -> dict:
        """Train to cfg.steps (or stop after step `stop_at`, saving a resumable state) and return the result."""
        try:
            if self.finished is not None:
                return self.finished
            with StopFlag() as flag:
                return self._loop(flag, stop_at)
        finally:
            self.close()

    def _loop(self, flag: StopFlag, stop_at: int | None) -> dict:
        cfg = self.cfg
        self._open_run_dir()
        step, tokens, elapsed_before = self.start_step, self.start_tokens, self.start_elapsed
        # rank 0's progress: a tqdm bar on a terminal, else (nohup, Slurm) a line every tenth of the run or 30 s
        bar = progress(cfg.steps, f"train {cfg.out_dir}", "steps", done=step,
                       enabled=cfg.progress and self.dist.primary)
        tokens_per_step = cfg.batch_size * cfg.n_ctx
        t_start = time.perf_counter()
        interval_start, interval_tokens, session_tokens = t_start, 0, 0
        evaluated = None
        status, reason, metrics, train_loss = "done", None, {}, self.start_train_loss
        if step >= cfg.steps:  # resumed after the final save, before result.json (a kill): evaluate again
            metrics, evaluated = self.evaluate(), step
        branch_points = cooldown.branch_points(cfg)  # wsd: shorter lengths branched off the stable phase
        while step < cfg.steps:
            if step in branch_points:
                trained = self._run_branches(branch_points[step], step, tokens, flag)
                if trained is None:  # a signal inside a branch: save at the branch point and stop
                    self._save(step, tokens, elapsed_before + time.perf_counter() - t_start, train_loss)
                    status, reason = "interrupted", flag.signal
                    break
                session_tokens += trained
                interval_start, interval_tokens = time.perf_counter(), 0
            batch = self.data.sample_batch("train", cfg.batch_size, cfg.n_ctx, self.generator)  # [B, n_ctx+1]
            loss, grad_norm = self.train_step(batch, step)
            step, tokens = step + 1, tokens + tokens_per_step
            interval_tokens += tokens_per_step
            session_tokens += tokens_per_step
            busy = False
            if step % cfg.log_interval == 0 or step == cfg.steps:
                train_loss = self.all_sum([loss.item()])[0] / self.dist.world_size
                seconds = time.perf_counter() - interval_start
                tps = interval_tokens / max(seconds, 1e-9)
                record = {"kind": "train", "step": step, "tokens": tokens, "loss": train_loss,
                          "lr": lr_at(step - 1, cfg), "grad_norm": float(grad_norm), "tokens_per_s": tps,
                          "flops_per_s": tps * self.train_flops,
                          "elapsed_s": elapsed_before + time.perf_counter() - t_start}
                if cfg.peak_flops:
                    record["mfu"] = record["flops_per_s"] / (cfg.peak_flops * self.dist.world_size)
                self.run_dir.log(record)
                interval_start, interval_tokens = time.perf_counter(), 0
            if step % cfg.eval_interval == 0 or step == cfg.steps:
                metrics, evaluated, busy = self.evaluate(), step, True
                self.run_dir.log({"kind": "eval", "step": step, "tokens": tokens, **metrics})
            stop = step < cfg.steps and (self.all_sum([float(flag.signal is not None)])[0] > 0 or step == stop_at)
            if step % cfg.ckpt_interval == 0 or step == cfg.steps or stop:
                self._save(step, tokens, elapsed_before + time.perf_counter() - t_start, train_loss)
                busy = True
            if busy:
                interval_start, interval_tokens = time.perf_counter(), 0
            bar.update(step, f"loss {train_loss:.3f}" if math.isfinite(train_loss) else "loss -",
                       f"{session_tokens / max(time.perf_counter() - t_start, 1e-9):,.0f} tok/s")
            if stop:
                status, reason = "interrupted", flag.signal or f"stop_at={stop_at}"
                break
        bar.close()
        session_s = time.perf_counter() - t_start
        elapsed = elapsed_before + session_s
        # a session that trained no step (resumed after the final save) reports the whole run's throughput
        tokens_per_s = session_tokens / max(session_s, 1e-9) if session_tokens else tokens / max(elapsed, 1e-9)
        return self._finish(status, reason, step, tokens, train_loss, metrics if evaluated == step else {},
                            elapsed, tokens_per_s)

    def train_step(self, batch: Int[Tensor, "batch n_ctx_plus_1"], step: int,
                   lr: float | None = None) -> tuple[Tensor, Tensor]:
        """One optimizer step on the global batch at step index `step` (which sets the lr, unless a cooldown
        branch passes its own); returns (mean loss over this rank's rows, grad norm), unsynced. The loop calls it
        once per step, so a subclass may wrap it (benchmarks/bench_train.py pairs every call with a bare-loop
        step)."""
        cfg = self.cfg
        micro_batches = [self._shard(m) for m in batch.split(cfg.batch_size // cfg.grad_accum)]
        lr = lr_at(step, cfg) if lr is None else lr
        return train_step(self.model, self.optimizer, micro_batches, lr, cfg.grad_clip, self.dtype)

    def _run_branches(self, lengths: list[int], step: int, tokens: int, flag: StopFlag) -> int | None:
        """Train the cooldown branches starting at `step` that have no result yet (interp.training.cooldown);
        the tokens they trained, or None when a signal abandoned one."""
        trained = 0
        for length in lengths:
            if cooldown.branch_done(self, length):
                continue
            result = cooldown.run_branch(self, length, step, tokens, flag)
            if result is None:
                return None
            trained += result["tokens"] - tokens
            self.run_dir.log({"kind": "cooldown", "step": step, **{k: v for k, v in result.items() if k != "step"},
                       "length": length})
        return trained

    @torch.no_grad()
    def evaluate(self) -> dict:
        """Mean validation loss and perplexity over the fixed first eval_batches windows of the val split
        (compiled blocks run eagerly here: evaluation never triggers a compilation)."""
        self.raw.eval()
        total, count = 0.0, 0.0
        micro = self.cfg.batch_size // self.cfg.grad_accum
        with parallel.eager():
            for batch in self.data.eval_batches(micro, self.cfg.n_ctx, self.cfg.eval_batches):
                rows = batch.shape[0] - batch.shape[0] % self.dist.world_size  # equal shards (last may be short)
                if rows:
                    shard = self._shard(batch[:rows])
                    total += lm_loss_sum(self.raw, shard, self.dtype).item()
                    count += shard[:, 1:].numel()
        self.raw.train()
        total, count = self.all_sum([total, count])
        val_loss = total / max(count, 1.0)
        return {"val_loss": val_loss, "val_ppl": math.exp(min(val_loss, 700.0))}

    def _finish(self, status: str, reason: str | None, step: int, tokens: int, train_loss: float,
                metrics: dict, elapsed: float, tokens_per_s: float) -> dict:
        world = self.dist.world_size
        result = {"status": status, "step": step, "tokens": tokens, "train_loss": train_loss,
                  "val_loss": metrics.get("val_loss"), "val_ppl": metrics.get("val_ppl"),
                  "params": param_counts(self.model_cfg)["total"], "label": self.cfg.width.label,
                  "widths": self.model_cfg.d_mlp, "elapsed_s": elapsed, "tokens_per_s": tokens_per_s,
                  "flops_per_s": tokens_per_s * self.train_flops, "world_size": world,
                  "device": self.device.type, "dtype": str(self.dtype).removeprefix("torch.")}
        result.update(parallel.describe(self.model, self.optimizer, checkpointing=self.cfg.activation_checkpointing,
                                        compile=self.cfg.compile))
        if self.cfg.peak_flops:
            result["mfu"] = result["flops_per_s"] / (self.cfg.peak_flops * world)
        if self.cfg.cooldowns:
            result["cooldowns"] = cooldown.collect(self.out, self.cfg)
        if reason:
            result["reason"] = reason
        if world > 1 and not parallel.is_sharded(self.model):  # proof that the DDP ranks hold the same weights
            hashes = [None] * world
            tdist.all_gather_object(hashes, param_hash(self.raw))
            result["rank_param_sha256"] = hashes
        self.run_dir.write_result(result)  # rank 0; a finished run's names its weights by their sha256
        return result

    # -- run directory (interp.training.run_dir) ------------------------------------------------------
    def _open_run_dir(self) -> None:
        """Lock a new directory; then a resumed run sweeps the temporaries of killed writes, keeps its log up to
        the restored step and repairs that step's checkpoint; a fresh one starts config.json and the log."""
        self.run_dir.lock(create=True)
        if not self.resuming:
            self.run_dir.start(self.run_config)
            return
        repair = self.cfg.keep_step_checkpoints
        weights = self.full_weights() if repair else None  # under FSDP a collective: before rank 0 goes on alone
        self.run_dir.reopen(self.start_step, self.resumed_from, weights,
                            {**self._stored, "step": self.start_step, "tokens": self.start_tokens})

    def _save(self, step: int, tokens: int, elapsed: float, train_loss: float) -> None:
        """FSDP: every rank's shards first (a new folder no train_state.pt names yet). Then, on rank 0, the run's
        checkpoint, train_state.pt (what a resume reads: the commit point), the step checkpoint (RunDir.save); a
        kill after the state is repaired on resume (RunDir.reopen, and _loop's final evaluation)."""
        state = {"step": step, "tokens": tokens, "elapsed_s": elapsed, "train_loss": float(train_loss),
                 "rng": rng_state(), "data_generator": self.generator.get_state()}
        if self.sharded:
            state[sharded.STATE_KEY] = sharded.save(self.out, step, self.model, self.optimizer, self.dist)
        weights = self.full_weights()
        if not self.dist.primary:
            return
        if not self.sharded:
            state.update(model=self.raw.state_dict(), optimizer=self.optimizer.state_dict())
        self.run_dir.save(weights, self.run_config, state, step, tokens, self.cfg.keep_step_checkpoints)

    def full_weights(self) -> TaperedLM | None:
        """The full weights as a plain module on rank 0 (None elsewhere): self.raw, or under FSDP the shards
        gathered into a CPU copy (a collective: every rank calls it)."""
        self._host = parallel.host_copy(self.model, self.raw, self._host, self.dist)
        return self._host

    # -- distributed helpers -----------------------------------------------------------------------
    def _shard(self, batch: Tensor) -> Tensor:
        """This rank's rows of a global batch (equal contiguous slices)."""
        n = batch.shape[0] // self.dist.world_size
        return batch[self.dist.rank * n:(self.dist.rank + 1) * n]

    def all_sum(self, values: list[float]) -> list[float]:
        """`values` summed over the ranks (a collective: every rank calls it; the identity in one process)."""
        if self.dist.world_size == 1:
            return values
        t = torch.tensor(values, dtype=torch.float64, device=self.comm_device)
        return self.dist.all_reduce_sum(t).tolist()


def train(cfg: TrainConfig, stop_at: int | None = None) -> dict:
    """Shorthand for Trainer(cfg).run(stop_at)."""
    return Trainer(cfg).run(stop_at)


__all__ = [
    "StopFlag",
    "Trainer",
    "bf16_is_native",
    "check_model",
    "compute_dtype",
    "lm_loss_sum",
    "make_optimizer",
    "param_hash",
    "rng_state",
    "set_rng_state",
    "train",
    "train_step",
]
