"""Training throughput: tapered vs uniform, Trainer vs a bare loop, matmul peak and MFU, bf16 vs fp32.

  (a) tapered (cosine 1.5->0.5) vs uniform at the same budget, `tiny` preset shape: blocks of steps
      alternate between the two models on the same batches; the issue wants tokens/s within 0.95-1.05.
  (b) interp.training.Trainer vs a bare loop (model, AdamW, clip, the same batch sampling; no logging,
      eval or checkpoints) on the same config. Method: ONE Trainer.run in which every Trainer step is
      paired with a bare-loop step (a Trainer subclass wraps the public Trainer.train_step and runs the
      bare step before or after it, alternating), so both share the load second by second. The Trainer's time per log interval is
      its own logged interval (log.jsonl: tokens / tokens_per_s, so logging and loop overhead count)
      minus the bare steps inside it; eval and checkpoint run only after the last log record; the
      first interval (warm-up) is dropped. Requirement: Trainer / bare >= 0.95.
  (c) bf16 autocast vs fp32: two models from the same init trained side by side on the same batches
      with the same schedule; tokens/s and validation loss after the same steps.
  (d) matmul peak of this machine (square n x n matmuls, fp32 and bf16) and the MFU of the training
      runs of (b) and (c): training_flops_per_token * tokens/s / peak.
  (e) the other CPU throughput knobs (issue #14), each a side-by-side ratio on the same batches: threads 1 vs
      2, torch.compile of the blocks vs eager (after its warm-up, which is timed: how many steps it takes to
      pay for itself), AdamW for-loop vs foreach vs fused (whole steps, and the optimizer step alone), and
      the cost of sampling a batch from the token memmaps against a step. Beside each: the default it
      supports (a default that would change results is never switched silently).

The bare loop's step IS the Trainer's: interp.training.train_step (autocast forward only, loss in fp32,
grad clip, AdamW from interp.training.make_optimizer, lr from interp.training.lr_at), so (b) measures
only what the Trainer adds around it.
`--quick` uses the `micro` preset shape and synthetic tokens (no corpus or tokenizer needed).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from benchmarks.common import Report, Spread, begin, finish, interleave, paired_ratios, parse_args
from interp._util.dtypes import torch_dtype
from interp._util.paths import LOG_FILE
from interp.data import TokenData, prepare_tokens
from interp.model import TaperedLM, param_counts, training_flops_per_token
from interp.training import (
    TORCH_DTYPE_NAMES,
    TrainConfig,
    Trainer,
    compute_dtype,
    lm_loss_sum,
    lr_at,
    make_optimizer,
    train_step,
)
from interp.training.parallel import eager, prepare_blocks

NAME = "bench_train"
TITLE = "Training throughput (bench_train)"
KNOBS_NAME, KNOBS_TITLE = "bench_train_knobs", "CPU training throughput knobs (bench_train --parts e)"

# Sizes: real (tiny preset, ~6 min on 2 quiet cores) and quick (micro preset, seconds).
SIZES = {
    "real": dict(preset="tiny", taper_blocks=20, taper_block_steps=1, trainer_steps=40, trainer_log=5,
                 matmul_n=(1024, 2048), matmul_reps=5, dtype_steps=120, dtype_block=2, eval_batches=8,
                 knob_blocks=10, knob_block_steps=1, optim_reps=10, sample_reps=200, compile=True),
    "quick": dict(preset="micro", taper_blocks=3, taper_block_steps=1, trainer_steps=6, trainer_log=2,
                  matmul_n=(128, 256), matmul_reps=2, dtype_steps=6, dtype_block=2, eval_batches=2,
                  knob_blocks=2, knob_block_steps=1, optim_reps=2, sample_reps=5, compile=False),
}


# ------------------------------------------------------------------------------------- the pieces

def synthetic_data(vocab_size: int, n_tokens: int = 50_000, seed: int = 0) -> TokenData:
    """Random tokens: throughput does not depend on the text, and --quick must not need a corpus."""
    rng = np.random.default_rng(seed)
    train = rng.integers(0, vocab_size, n_tokens).astype(np.uint16)
    val = rng.integers(0, vocab_size, n_tokens // 10).astype(np.uint16)
    return TokenData(train=train, val=val, meta={"source": "synthetic", "vocab_size": vocab_size},
                     vocab_size=vocab_size)


def base_config(preset: str, threads: int) -> TrainConfig:
    return TrainConfig.from_preset(preset, threads=threads, progress=False, dtype="fp32")


class BareTrainer:
    """The minimal loop's state: one model and its AdamW, stepped by interp.training.train_step (the Trainer's
    own step) in the precision of cfg.dtype ("fp32" | "bf16" | "auto", as TrainConfig.dtype), with the blocks
    prepared as cfg says (activation_checkpointing, compile: interp.training.parallel.prepare_blocks) and the
    AdamW implementation `adamw` (interp.training.step.ADAMW_IMPLS; default: make_optimizer's choice)."""

    def __init__(self, cfg: TrainConfig, vocab_size: int, device: str | torch.device = "cpu",
                 adamw: str | None = None):
        torch.manual_seed(cfg.seed)  # same init as the Trainer (it seeds before building the model)
        self.cfg = cfg
        self.device = torch.device(device)
        self.dtype = compute_dtype(cfg.dtype, self.device)
        self.model = TaperedLM(cfg.model_config(vocab_size)).to(self.device)
        prepare_blocks(self.model, checkpointing=cfg.activation_checkpointing, compile=cfg.compile)
        self.optimizer = make_optimizer(self.model, cfg, impl=adamw)

    def step(self, batch: torch.Tensor, step: int) -> float:
        """One optimizer step on [batch, n_ctx + 1] tokens; returns the loss (forces the step to finish)."""
        loss, _ = train_step(self.model, self.optimizer, [batch], lr_at(step, self.cfg), self.cfg.grad_clip,
                             self.dtype)
        return loss.item()

    @torch.no_grad()
    def val_loss(self, data: TokenData, n_batches: int, dtype: torch.dtype | None = None) -> float:
        """Mean next-token loss over the fixed first validation windows (as Trainer.evaluate), in this
        runner's precision or `dtype`."""
        self.model.eval()
        total, count = 0.0, 0
        try:
            with eager():
                for batch in data.eval_batches(self.cfg.batch_size, self.cfg.n_ctx, n_batches):
                    total += lm_loss_sum(self.model, batch, dtype or self.dtype).item()
                    count += batch[:, 1:].numel()
        finally:
            self.model.train()
        return total / count


def tokens_per_step(cfg: TrainConfig) -> int:
    return cfg.batch_size * cfg.n_ctx


# -------------------------------------------------------------------------------- (a) tapered/uniform

def bench_taper(report: Report, base: TrainConfig, data: TokenData, size: dict) -> dict:
    report.section("(a) Tapered vs uniform: training tokens/s at the same parameter budget")
    configs = {"uniform": base.with_overrides(schedule="uniform", start=1.0, end=1.0),
               "cosine 1.5->0.5": base.with_overrides(schedule="cosine", start=1.5, end=0.5)}
    runners = {label: BareTrainer(cfg, data.vocab_size) for label, cfg in configs.items()}
    gen = torch.Generator().manual_seed(base.seed + 1)
    k = size["taper_block_steps"]
    reps = size["taper_blocks"]
    # one list of batches per repetition, shared by both models (warm-up round uses its own)
    batches = [[data.sample_batch("train", base.batch_size, base.n_ctx, gen) for _ in range(k)]
               for _ in range(reps + 1)]
    state = {label: 0 for label in runners}  # next block index per model

    def block(label: str):
        def run() -> None:
            runner, i = runners[label], state[label]
            for j, batch in enumerate(batches[i]):
                runner.step(batch, i * k + j)
            state[label] = i + 1
        return run

    times = interleave({label: block(label) for label in runners}, reps=reps, warmup=1)
    tps = {label: [k * tokens_per_step(base) / t for t in ts] for label, ts in times.items()}
    ratio = Spread.of(paired_ratios(tps["cosine 1.5->0.5"], tps["uniform"]))
    rows = []
    for label, cfg in configs.items():
        mcfg = cfg.model_config(data.vocab_size)
        rows.append({"model": label, "d_mlp per layer": " ".join(map(str, mcfg.d_mlp)),
                     "params": param_counts(mcfg)["total"],
                     "train FLOP/token": training_flops_per_token(mcfg, cfg.n_ctx),
                     "tokens/s": Spread.of(tps[label]).fmt(",.0f")})
    report.table(rows)
    report.note(f"{reps} interleaved blocks of {k} step(s) per model after 1 warm-up block, batch "
                f"{base.batch_size} x {base.n_ctx}, fp32. Ratio tapered/uniform per block pair: "
                f"**{ratio.fmt()}** (min {ratio.lo:.3f}, max {ratio.hi:.3f}).")
    report.check("tapered / uniform tokens/s", ratio.fmt(), "0.95 - 1.05", 0.95 <= ratio.median <= 1.05)
    return {"ratio": ratio.median}


# ------------------------------------------------------------------------------ (b) Trainer vs bare

class _PairedTrainer(Trainer):
    """A Trainer whose every step is paired with one bare-loop step, so both run under the same load.

    Which of the two goes first alternates with the step. The bare step's seconds (batch sampling
    included, as the Trainer's loop samples before each step) are recorded per step; `bench_trainer`
    subtracts them from the Trainer's own logged intervals. Wraps the public Trainer.train_step, which
    the loop calls once per step.
    """

    def __init__(self, cfg: TrainConfig, data: TokenData, bare: BareTrainer):
        super().__init__(cfg, data=data)
        self.bare, self.bare_seconds = bare, {}
        self.bare_generator = torch.Generator().manual_seed(cfg.seed + 1)  # the Trainer's data stream

    def _bare_step(self, step: int) -> None:
        start = time.perf_counter()
        batch = self.data.sample_batch("train", self.cfg.batch_size, self.cfg.n_ctx, self.bare_generator)
        self.bare.step(batch, step)
        self.bare_seconds[step] = time.perf_counter() - start

    def train_step(self, batch: torch.Tensor, step: int, lr: float | None = None):
        if step % 2 == 0:
            self._bare_step(step)
        out = super().train_step(batch, step, lr)
        if step % 2 == 1:
            self._bare_step(step)
        return out


def bench_trainer(report: Report, base: TrainConfig, data: TokenData, size: dict) -> dict:
    report.section("(b) interp.training.Trainer vs a bare training loop")
    steps, log = size["trainer_steps"], size["trainer_log"]
    cfg = base.with_overrides(steps=steps, log_interval=log, eval_interval=10 * steps, ckpt_interval=10 * steps,
                              eval_batches=1, warmup_steps=min(base.warmup_steps, steps // 4))
    with tempfile.TemporaryDirectory(prefix="bench_train_") as tmp:
        trainer = _PairedTrainer(cfg.with_overrides(out_dir=tmp), data, BareTrainer(cfg, data.vocab_size))
        trainer.run()
        records = [json.loads(line) for line in (Path(tmp) / LOG_FILE).read_text().splitlines()]
    if len(trainer.bare_seconds) != steps:
        raise RuntimeError(f"bench_train: {len(trainer.bare_seconds)} bare steps ran for {steps} Trainer steps; "
                           "Trainer.train_step is no longer called once per step: update _PairedTrainer")
    interval_tokens = log * tokens_per_step(cfg)
    tps: dict[str, list[float]] = {"bare": [], "trainer": []}
    for record in [r for r in records if r["kind"] == "train"][1:]:  # the first interval is warm-up
        bare = sum(trainer.bare_seconds[i] for i in range(record["step"] - log, record["step"]))
        tps["bare"].append(interval_tokens / bare)
        tps["trainer"].append(interval_tokens / (interval_tokens / record["tokens_per_s"] - bare))
    if not tps["bare"]:
        raise RuntimeError("bench_train: no log interval after the first; raise trainer_steps")
    ratio = Spread.of(paired_ratios(tps["trainer"], tps["bare"]))
    report.table([{"loop": name, "tokens/s (steady state)": Spread.of(v).fmt(",.0f"), "intervals": len(v)}
                  for name, v in tps.items()])
    report.note(f"One Trainer.run of {steps} steps (log_interval {log}; eval and checkpoint only after the last "
                "log record) with a bare-loop step paired with every Trainer step (alternating which runs first): "
                "same init, seed, batch sampling, lr schedule, grad clip and AdamW, no logging/eval/checkpoint. "
                "Trainer seconds per log interval = its logged interval (tokens / tokens_per_s, so logging and "
                "loop overhead count) minus the bare steps run inside that interval; the first interval is "
                f"warm-up and dropped. Ratio Trainer/bare per interval: **{ratio.fmt()}**.")
    report.check("Trainer / bare-loop tokens/s", ratio.fmt(), ">= 0.95", ratio.median >= 0.95)
    return {"bare_tps": Spread.of(tps["bare"]).median, "trainer_tps": Spread.of(tps["trainer"]).median}


# ---------------------------------------------------------------------------------- (c) peak, MFU

def matmul_peak(sizes: Sequence[int], reps: int) -> dict[tuple[str, int], Spread]:
    """GFLOP/s (2 n^3 per matmul) of square matmuls, all (dtype, n) variants interleaved."""
    variants, ops = {}, {}
    for dtype_name in TORCH_DTYPE_NAMES:
        dtype = torch_dtype(dtype_name)
        for n in sizes:
            a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
            out = torch.empty(n, n, dtype=dtype)
            ops[(dtype_name, n)] = 2 * n**3
            variants[(dtype_name, n)] = lambda a=a, b=b, out=out: torch.mm(a, b, out=out)
    times = interleave(variants, reps=reps, warmup=1)
    return {key: Spread.of([ops[key] / t / 1e9 for t in ts]) for key, ts in times.items()}


def bench_peak(report: Report, size: dict, measured: dict[str, float], flops_per_token: int) -> dict[str, float]:
    report.section("(d) Matmul peak and MFU")
    peaks = matmul_peak(size["matmul_n"], size["matmul_reps"])
    report.table([{"dtype": d, "n": n, "GFLOP/s": s.fmt(",.0f")} for (d, n), s in peaks.items()])
    best = {d: max(s.median for (dd, _), s in peaks.items() if dd == d) for d in ("fp32", "bf16")}
    rows = []
    for label, tps in measured.items():
        dtype = "bf16" if "bf16" in label else "fp32"
        rows.append({"training run": label, "tokens/s": tps, "GFLOP/s achieved": flops_per_token * tps / 1e9,
                     "peak used": f"{dtype} {best[dtype]:,.0f} GFLOP/s",
                     "MFU": f"{flops_per_token * tps / (best[dtype] * 1e9):.1%}"})
    if rows:  # MFU needs tokens/s from parts b and c
        report.table(rows)
    report.note(f"Peak = best median over n of {size['matmul_reps']} interleaved torch.mm calls: fp32 "
                f"{best['fp32']:,.0f} GFLOP/s, bf16 {best['bf16']:,.0f} GFLOP/s. MFU uses "
                f"interp.model.training_flops_per_token = {flops_per_token:,} FLOP/token (3 x forward matmul "
                "FLOPs incl. causal attention scores) and the tokens/s of (b) and (c).")
    return best


# ------------------------------------------------------------------------------------ (d) bf16

def bench_bf16(report: Report, base: TrainConfig, data: TokenData, size: dict) -> dict:
    report.section("(c) bf16 autocast vs fp32 on the CPU")
    steps, k = size["dtype_steps"], size["dtype_block"]
    cfg = base.with_overrides(steps=steps, warmup_steps=min(base.warmup_steps, steps // 4))
    runners = {name: BareTrainer(cfg.with_overrides(dtype=name), data.vocab_size) for name in ("fp32", "bf16")}
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    n_blocks = steps // k
    batches = [[data.sample_batch("train", cfg.batch_size, cfg.n_ctx, gen) for _ in range(k)] for _ in range(n_blocks)]
    state = {name: 0 for name in runners}
    losses: dict[str, list[float]] = {name: [] for name in runners}

    def block(name: str):
        def run() -> None:
            i = state[name]
            for j, batch in enumerate(batches[i]):
                losses[name].append(runners[name].step(batch, i * k + j))
            state[name] = i + 1
        return run

    # the first block trains too (timed, then dropped from the statistics as warm-up)
    times = interleave({name: block(name) for name in runners}, reps=n_blocks, warmup=0)
    tps = {name: [k * tokens_per_step(cfg) / t for t in ts[1:] or ts] for name, ts in times.items()}
    speedup = Spread.of(paired_ratios(tps["bf16"], tps["fp32"]))
    val = {name: r.val_loss(data, size["eval_batches"]) for name, r in runners.items()}
    val_fp32_eval = runners["bf16"].val_loss(data, size["eval_batches"], dtype=torch.float32)
    rel = (val["bf16"] - val["fp32"]) / val["fp32"]
    report.table([{"dtype": name, "tokens/s": Spread.of(tps[name]).fmt(",.0f"),
                   "final train loss (mean of last block)": float(np.mean(losses[name][-k:])),
                   f"val loss after {steps} steps": val[name]} for name in runners])
    report.note(f"Both models start from the same init (seed {cfg.seed}) and see the same {steps} batches of "
                f"{cfg.batch_size} x {cfg.n_ctx} with the same lr schedule; blocks of {k} steps alternate "
                f"(the first block is excluded from tokens/s). bf16 = torch.autocast(cpu, bfloat16) around the "
                f"forward, loss in fp32, fp32 master weights (as TrainConfig.dtype='bf16'). Validation over "
                f"{size['eval_batches']} fixed batches, each model in its own dtype; the bf16-trained weights "
                f"evaluated in fp32 give {val_fp32_eval:.4f}. bf16/fp32 tokens/s: **{speedup.fmt(',.2f')}**; "
                f"val loss difference {rel:+.2%}. (No seed-to-seed spread was measured: a difference below "
                "~1% is within what a different seed moves at this size.)")
    report.check("bf16 faster than fp32", f"x{speedup.median:.2f}", "> 1 (informs the default dtype)",
                 speedup.median > 1)
    report.check("bf16 val loss matches fp32", f"{rel:+.2%}", "within 2%", abs(rel) <= 0.02)
    return {"fp32_tps": Spread.of(tps["fp32"]).median, "bf16_tps": Spread.of(tps["bf16"]).median}


# --------------------------------------------------------------------------------- (e) CPU knobs

def knob_blocks(size: dict) -> tuple[int, int]:
    """(steps per block, timed blocks) of part (e)."""
    return size["knob_block_steps"], size["knob_blocks"]


def paired_blocks(runners: dict[str, BareTrainer], cfg: TrainConfig, data: TokenData, k: int, reps: int,
                  before=None) -> dict[str, list[float]]:
    """Tokens/s per block of k steps for each runner, reps blocks: interleaved (ABBA), the same batches for
    every runner, one untimed warm-up block first; `before(name)` runs ahead of each of name's blocks."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    batches = [[data.sample_batch("train", cfg.batch_size, cfg.n_ctx, gen) for _ in range(k)] for _ in range(reps + 1)]
    state = {name: 0 for name in runners}

    def block(name: str):
        def run() -> None:
            if before:
                before(name)
            i = state[name]
            for j, batch in enumerate(batches[i]):
                runners[name].step(batch, i * k + j)
            state[name] = i + 1
        return run

    times = interleave({name: block(name) for name in runners}, reps=reps, warmup=1)
    return {name: [k * tokens_per_step(cfg) / t for t in ts] for name, ts in times.items()}


def bench_knobs(report: Report, base: TrainConfig, data: TokenData, size: dict, threads: int,
                bf16_ratio: float | None) -> dict:
    report.section("(e) CPU throughput knobs, side by side")
    rows, ratios = [], {}

    def row(knob: str, tps: dict[str, list[float]], num: str, den: str, default: str) -> float:
        ratio = Spread.of(paired_ratios(tps[num], tps[den]))
        rows.append({"knob": knob, "variant / baseline": f"{num} / {den}",
                     "tokens/s": " vs ".join(Spread.of(tps[n]).fmt(",.0f") for n in (num, den)),
                     "ratio": ratio.fmt(), "default, and why": default})
        ratios[f"{knob}: {num} / {den}"] = ratio.median
        return ratio.median

    # threads: one model per thread count, torch.set_num_threads before each block
    label = {n: f"{n} thread{'s' * (n > 1)}" for n in sorted({1, max(2, threads), threads})}
    runners = {name: BareTrainer(base, data.vocab_size) for name in label.values()}
    tps = paired_blocks(runners, base, data, *knob_blocks(size), before=lambda name: torch.set_num_threads(int(name.split()[0])))
    torch.set_num_threads(threads)
    row("threads", tps, label[max(label)], label[1], "TrainConfig.threads=0 = all cores / local ranks (unchanged)")
    step_s = tokens_per_step(base) / Spread.of(tps[label[threads]]).median  # a step at --threads
    dtype_default = ("dtype='auto' = bf16 where native (unchanged: it changes results, so each preset fixes it "
                     "and every run records it)")
    if bf16_ratio is not None:
        rows.append({"knob": "dtype", "variant / baseline": "bf16 autocast / fp32", "tokens/s": "part (c)",
                     "ratio": f"{bf16_ratio:.3f}", "default, and why": dtype_default})
    else:  # part (c) did not run: a short side-by-side of its own
        runners = {name: BareTrainer(base.with_overrides(dtype=name), data.vocab_size) for name in ("bf16", "fp32")}
        row("dtype", paired_blocks(runners, base, data, *knob_blocks(size)), "bf16", "fp32", dtype_default)
    # torch.compile of the blocks: the first step compiles (timed on its own), then the steady state
    warm = {}
    if size["compile"]:
        runners = {"compiled": BareTrainer(base.with_overrides(compile=True), data.vocab_size),
                   "eager": BareTrainer(base, data.vocab_size)}
        first = data.sample_batch("train", base.batch_size, base.n_ctx, torch.Generator().manual_seed(base.seed))
        with tempfile.TemporaryDirectory(prefix="bench_train_inductor_") as cache:  # a cold compile, every time
            previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
            try:
                for name, runner in runners.items():
                    start = time.perf_counter()
                    runner.step(first, 0)
                    warm[name] = time.perf_counter() - start
                tps = paired_blocks(runners, base, data, *knob_blocks(size))
            finally:
                if previous is None:
                    os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
                else:
                    os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous
        ratio = Spread.of(paired_ratios(tps["compiled"], tps["eager"])).median
        eager_s = tokens_per_step(base) / Spread.of(tps["eager"]).median
        saved, extra = eager_s * (1 - 1 / ratio), warm["compiled"] - warm["eager"]
        pays = (f"pays for its {extra:.0f} s warm-up after ~{extra / saved:,.0f} steps" if saved > 0 else
                f"never pays for its {extra:.0f} s warm-up")
        shapes = len(set(base.width.widths(base.n_layers, base.d_ff)))
        row("torch.compile (blocks)", tps, "compiled", "eager",
            f"compile=False (unchanged: compiled kernels round differently, so it would move results); {pays}; "
            f"{shapes} block shape(s) here: a tapered model compiles one graph per distinct width")
    # AdamW implementations: whole steps, then the optimizer step alone on the same gradients
    runners = {impl: BareTrainer(base, data.vocab_size, adamw=impl) for impl in ("fused", "foreach", "for-loop")}
    tps = paired_blocks(runners, base, data, *knob_blocks(size))
    row("AdamW", tps, "fused", "for-loop", "fused_adamw=False (unchanged: fused rounds differently, ~1e-7)")
    row("AdamW", tps, "foreach", "for-loop", "for-loop on CPU, torch's own choice (foreach is bit-identical; "
        "make_optimizer uses it for FSDP's DTensors)")
    for runner in runners.values():
        for p in runner.model.parameters():
            p.grad = torch.full_like(p, 1e-3)
    steps = {impl: runner.optimizer.step for impl, runner in runners.items()}
    optim_ms = {k: Spread.of([1e3 * t for t in ts]) for k, ts in interleave(steps, reps=size["optim_reps"]).items()}
    # data loading: sampling one global batch from the memmaps, against a whole step
    gen = torch.Generator().manual_seed(base.seed + 1)
    stamps = [time.perf_counter()]
    for _ in range(size["sample_reps"]):
        data.sample_batch("train", base.batch_size, base.n_ctx, gen)
        stamps.append(time.perf_counter())
    sample_s = Spread.of([b - a for a, b in itertools.pairwise(stamps)]).median
    rows.append({"knob": "data loading", "variant / baseline": "sample_batch / step", "tokens/s": "",
                 "ratio": f"{sample_s / step_s:.1e}", "default, and why": "in-process memmap sampling (unchanged: "
                 "a loader process could hide at most this share of a step)"})
    report.table(rows)
    compiled = (f"its first step (a cold compile: empty inductor cache) took {warm['compiled']:.1f} s vs "
                f"{warm['eager']:.2f} s eager" if warm else
                "not run at --quick sizes (its warm-up alone takes ~30 s)")
    optim = ", ".join(f"{k} {v.fmt('.1f')}" for k, v in optim_ms.items())
    report.note(f"The variants of a knob share init, batches and lr schedule; {size['knob_blocks']} interleaved "
                f"blocks of {size['knob_block_steps']} step(s) each after one untimed warm-up block; fp32, batch "
                f"{base.batch_size} x {base.n_ctx}, {threads} threads unless the knob is threads. torch.compile = "
                "interp.training.parallel.prepare_blocks (each block's forward; embedding, final norm, unembedding "
                f"and loss eager): {compiled}. The AdamW step alone (ms, same gradients): {optim}. Sampling a "
                f"{base.batch_size} x {base.n_ctx + 1} batch from the memmaps takes {1e3 * sample_s:.3f} ms, against "
                f"a {step_s:.2f} s step.")
    return ratios


# -------------------------------------------------------------------------------------------- main

PARTS = ("a", "b", "c", "d", "e")


def _parts(p) -> None:
    p.add_argument("--parts", default=",".join(PARTS),
                   help="comma-separated subset of a (taper), b (Trainer), c (bf16), d (peak, MFU), e (CPU knobs: "
                        "threads, compile, AdamW, data loading); default all")


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    args = parse_args(NAME, __doc__.splitlines()[0], argv, _parts)
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if not parts or set(parts) - set(PARTS):
        raise SystemExit(f"benchmarks/{NAME}.py: --parts {args.parts!r}: choose from {','.join(PARTS)}")
    # part e alone has its own RESULTS.md section, so rerunning it keeps the committed a-d numbers
    alone = parts == ["e"]
    size, report = begin(args, SIZES, KNOBS_NAME if alone else NAME, KNOBS_TITLE if alone else TITLE, argv, command,
                         script=NAME)
    base = base_config(size["preset"], args.threads)
    data = synthetic_data(base.vocab_size) if args.quick else prepare_tokens(base.source, base.tokenizer,
                                                                               base.vocab_size, base.val_fraction)
    report.note(f"Shape: preset `{size['preset']}` (d_model {base.d_model}, {base.n_layers} layers, {base.n_heads} "
                f"heads, d_ff {base.d_ff}, n_ctx {base.n_ctx}, batch {base.batch_size}, vocab {data.vocab_size}); "
                f"data: {data.meta.get('source', '?')} tokens." + ("" if parts == list(PARTS) else
                                                                   f" Parts run: {', '.join(parts)}."))
    measured: dict[str, float] = {}
    if "a" in parts:
        bench_taper(report, base, data, size)
    if "b" in parts:
        trainer = bench_trainer(report, base, data, size)
        measured.update({"bare loop, fp32 (b)": trainer["bare_tps"], "Trainer, fp32 (b)": trainer["trainer_tps"]})
    if "c" in parts:
        dtypes = bench_bf16(report, base, data, size)
        measured.update({"fp32 (c)": dtypes["fp32_tps"], "bf16 autocast (c)": dtypes["bf16_tps"]})
    if "d" in parts:
        flops = training_flops_per_token(base.model_config(data.vocab_size), base.n_ctx)
        bench_peak(report, size, measured, flops)
    if "e" in parts:
        bf16 = measured["bf16 autocast (c)"] / measured["fp32 (c)"] if "c" in parts else None
        bench_knobs(report, base, data, size, args.threads, bf16)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
