"""GPU training throughput at a paper shape: tokens/s and MFU against the GPU's bf16 dense peak, DDP vs FSDP2,
torch.compile on/off (issue #15 part 2; target: MFU >= 40% on one GPU). Without CUDA it prints one line and
exits 0 (nothing is written).

    python benchmarks/bench_gpu_scale.py --write              # one GPU: a 1-rank nccl group, so FSDP really
                                                              # shards (all-gather / reduce-scatter run)
    torchrun --nproc_per_node=8 benchmarks/bench_gpu_scale.py  # every GPU of a node (tokens/s per GPU)
    python benchmarks/bench_gpu_scale.py --preset 760m --micro-batch 4 --activation-checkpointing

Every variant runs the Trainer's own code path: interp.training.parallel.wrap_model (DDP or fully_shard per
block + root with bf16 params / fp32 reduce; compile = torch.compile of each block's forward), make_optimizer
(fused AdamW) and train_step (bf16 autocast, loss in fp32, grad clip), on random tokens (throughput does not
depend on the text). Variants run one after another (a GPU is not shared with other jobs the way the CPUs
are): build, `--warmup` steps (compilation happens there), then `--steps` timed steps between
torch.cuda.synchronize calls. MFU = interp.model.training_flops_per_token (3 x forward matmul FLOPs incl.
causal attention scores) x tokens/s / peak, with the peak from PEAK_TFLOPS by GPU name (vendor dense bf16,
no sparsity) or --peak-tflops; the best bf16 matmul this GPU reaches (8192^3) is measured and shown beside it.

`--device cpu` runs the same code path on the CPU under a 1-rank gloo group (bf16 autocast, peak RSS for
memory, MFU against the best bf16 matmul the CPU reaches; its own RESULTS.md section, bench_gpu_scale_cpu), and
`--quick` shrinks the preset's shape as the training dry runs do (interp.training.presets.dry_run):

    python benchmarks/bench_gpu_scale.py --device cpu --quick  # seconds: the path a GPU run takes, checked here
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.common import GIB, Report, cpu_name, finish, parse_args, reset_peak_rss, rss, set_threads

NAME = "bench_gpu_scale"
TITLE = "GPU training throughput and MFU at the 440m shape (bench_gpu_scale)"
VARIANTS = ("ddp", "ddp+compile", "fsdp", "fsdp+compile")
# Dense bf16 tensor-core peaks from the vendors' data sheets, TFLOP/s (the "with sparsity" figures halved).
PEAK_TFLOPS = {"H200": 989.0, "H100 SXM": 989.0, "H100 80GB HBM3": 989.0, "H100 NVL": 835.0, "H100 PCIe": 756.0,
               "A100": 312.0, "L40S": 362.0, "L4": 121.0, "A10G": 70.0, "B200": 2250.0, "GH200": 989.0}


def _arguments(p) -> None:
    p.add_argument("--preset", default="440m", help="the TrainConfig preset whose shape is measured (default 440m)")
    p.add_argument("--micro-batch", type=int, default=8, help="sequences per rank per step (default 8)")
    p.add_argument("--n-ctx", type=int, default=None, help="sequence length (default: the preset's, 4096)")
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant (default 10; --quick: 2)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation; default 3; --quick: 1)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"subset of {','.join(VARIANTS)}")
    p.add_argument("--activation-checkpointing", action="store_true", help="recompute each block in backward")
    p.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, if not in the table")
    p.add_argument("--widths", default="uniform",
                   help="MLP width profiles, comma-separated: uniform or SCHEDULE:START:END (e.g. "
                        "uniform,cosine:1.5:0.5: the taper at the same parameters and FLOPs; default uniform)")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="cuda (default; skipped without one) or cpu: the same path under a 1-rank gloo group")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="after each variant's timed steps, profile one more step and print its N costliest "
                        "kernels by device time (torch.profiler; default 0: none). Where the time goes, when MFU "
                        "is short of the target")


class Stopped(Exception):
    """SIGTERM arrived (`timeout`'s limit, a scheduler's preemption): the rows measured so far are reported."""


STOP_SIGNALS: list[str] = []  # what stopped the run: code it interrupts (dynamo compiling) may wrap Stopped


def _stop(signum: int, frame) -> None:
    STOP_SIGNALS.append(signal.Signals(signum).name)
    raise Stopped(STOP_SIGNALS[-1])


def peak_tflops(name: str, given: float | None) -> float | None:
    if given:
        return given
    return next((v for k, v in sorted(PEAK_TFLOPS.items(), key=lambda kv: -len(kv[0])) if k in name), None)


def sync(device: str) -> None:
    """Wait for the device's queued work (a CPU runs eagerly: nothing to wait for)."""
    if device == "cuda":
        torch.cuda.synchronize()


def reset_peak_memory(device: str) -> None:
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    else:
        reset_peak_rss()


def peak_memory_gib(device: str) -> float:
    """Peak memory since reset_peak_memory: the GPU's allocated tensors, or on a CPU the process's peak RSS
    (tensors plus everything else the process holds)."""
    return (torch.cuda.max_memory_allocated() if device == "cuda" else rss()["peak"]) / GIB


def matmul_tflops(device: str = "cuda", n: int = 8192, reps: int = 10) -> float:
    """The best bf16 matmul rate this device reaches (2 n^3 FLOP per call), TFLOP/s."""
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    best = 0.0
    for _ in range(reps):
        sync(device)
        start = time.perf_counter()
        a @ b
        sync(device)
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e12)
    return best


def measure(variant: str, cfg, dist, size: dict, device: str = "cuda") -> dict:
    """Tokens/s per rank and peak memory of one variant, through wrap_model / make_optimizer / train_step."""
    from interp.model import TaperedLM
    from interp.training import lr_at, make_optimizer, train_step
    from interp.training.parallel import wrap_model

    parallel, compiled = variant.split("+")[0], variant.endswith("+compile")
    torch.manual_seed(cfg.seed)
    raw = TaperedLM(cfg.model_config(cfg.vocab_size)).to(device)
    model = wrap_model(raw, parallel, dist, torch.bfloat16, checkpointing=size["checkpointing"], compile=compiled,
                       even_one_rank=True)
    optimizer = make_optimizer(model, cfg.with_overrides(fused_adamw=True))
    gen = torch.Generator(device=device).manual_seed(cfg.seed + dist.rank)
    batch = torch.randint(0, cfg.vocab_size, (size["micro_batch"], cfg.n_ctx + 1), device=device, generator=gen)
    reset_peak_memory(device)
    start = time.perf_counter()
    for step in range(size["warmup"]):
        train_step(model, optimizer, [batch], lr_at(step, cfg), cfg.grad_clip, torch.bfloat16)
    sync(device)
    warmup_s = time.perf_counter() - start
    dist.barrier()
    start = time.perf_counter()
    for step in range(size["steps"]):
        loss, _ = train_step(model, optimizer, [batch], lr_at(step, cfg), cfg.grad_clip, torch.bfloat16)
    sync(device)
    seconds = time.perf_counter() - start
    if size.get("profile"):
        print(profile_step(lambda: train_step(model, optimizer, [batch], lr_at(0, cfg), cfg.grad_clip,
                                              torch.bfloat16), device, size["profile"]), flush=True)
    result = {"tokens_per_s": size["steps"] * batch.shape[0] * cfg.n_ctx / seconds, "warmup_s": warmup_s,
              "peak_gib": peak_memory_gib(device), "loss": float(loss), "adamw": optimizer.impl,
              "wrapped": type(model).__name__}
    del model, raw, optimizer, batch
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
    return result


def profile_step(step, device: str, top: int) -> str:
    """One call of `step` under torch.profiler: its `top` costliest ops by self device time (CPU time on a
    CPU), as profiler's own table (its "Self CUDA %" column: each op's share of the step)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    sync(device)
    with profile(activities=activities) as prof:
        step()
        sync(device)
    sort = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=top, max_name_column_width=60)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def width_overrides(text: str) -> list[dict]:
    """--widths as TrainConfig width overrides: "uniform" or "SCHEDULE:START:END" per comma-separated item."""
    specs = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        parts = item.split(":")
        try:
            specs.append({"schedule": "uniform"} if parts == ["uniform"] else
                         {"schedule": parts[0], "start": float(parts[1]), "end": float(parts[2])})
        except (IndexError, ValueError):
            raise SystemExit(f"benchmarks/{NAME}.py: --widths item {item!r}: write uniform or SCHEDULE:START:END, "
                             "e.g. cosine:1.5:0.5") from None
    if not specs:
        raise SystemExit(f"benchmarks/{NAME}.py: --widths {text!r} names no profile")
    return specs


def train_config(args, widths: dict):
    """The preset's TrainConfig with `widths`: its own shape, or with --quick the dry-run shape (depth, width,
    context shrunk)."""
    from interp.training import TrainConfig
    from interp.training.presets import dry_run

    overrides = {k: v for k, v in dry_run(args.preset).items() if k not in ("batch_size", "grad_accum", "steps")} \
        if args.quick else {}
    if args.n_ctx:
        overrides["n_ctx"] = args.n_ctx
    return TrainConfig.from_preset(args.preset, **overrides, **widths)


def section(on_gpu: bool, widths: str, preset: str = "440m") -> tuple[str, str]:
    """The RESULTS.md section (key, title) of a run: one per device kind, and a run of more than the uniform
    profile (the taper beside it) its own, so the four-variant uniform table and the taper comparison (cheaper
    variants: a 24-width taper compiles 24 graphs) both stay; another preset than 440m, its own too."""
    key, title = (NAME, TITLE) if on_gpu else (f"{NAME}_cpu", f"{TITLE}: the same path on the CPU")
    if preset != "440m":
        key, title = f"{key}_{preset.replace('.', '_')}", title.replace("the 440m shape", f"the {preset} shape")
    if widths.replace(" ", "") != "uniform":
        key, title = f"{key}_widths", f"{title}, width profiles side by side"
    return key, title


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    args = parse_args(NAME, __doc__.splitlines()[0], argv, _arguments)
    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        print(f"[{NAME}] skipped: no CUDA device (this benchmark measures GPUs; nothing written; "
              "--device cpu runs the same path on the CPU)", flush=True)
        return ""
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        raise SystemExit(f"benchmarks/{NAME}.py: --variants {args.variants!r}: choose from {','.join(VARIANTS)}")
    from interp._util.dist import Distributed, join_process_group
    from interp.model import param_counts, training_flops_per_token

    set_threads(args.threads)
    os.environ.setdefault("WORLD_SIZE", "1")  # a 1-rank group when run without torchrun: FSDP needs one
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(free_port()))
    import threading

    import torch.distributed as tdist

    join_process_group(int(os.environ["LOCAL_RANK"]), cuda=device == "cuda")

    STOP_SIGNALS.clear()
    main_thread = threading.current_thread() is threading.main_thread()  # where Python runs signal handlers
    previous = signal.signal(signal.SIGTERM, _stop) if main_thread else None
    dist = Distributed.from_env()
    on_gpu = device == "cuda"
    unit = "GPU" if on_gpu else "rank"
    try:
        name, title = section(on_gpu, args.widths, args.preset)
        report = Report(name, title, command or " ".join(["python benchmarks/bench_gpu_scale.py",
                                                           *(argv if argv is not None else sys.argv[1:])]),
                        args.quick)
        configs = [train_config(args, w) for w in width_overrides(args.widths)]
        cfg = configs[0]
        size = {"micro_batch": 2 if args.quick else args.micro_batch, "steps": 2 if args.quick else args.steps,
                "warmup": 1 if args.quick else args.warmup, "checkpointing": args.activation_checkpointing,
                "profile": args.profile}
        hardware = torch.cuda.get_device_name() if on_gpu else cpu_name()
        peak = peak_tflops(hardware, args.peak_tflops) if on_gpu else args.peak_tflops
        matmul = matmul_tflops(device, n=256 if args.quick else (8192 if on_gpu else 2048),
                               reps=3 if args.quick else 10)
        flops = training_flops_per_token(cfg.model_config(cfg.vocab_size), cfg.n_ctx)
        rows, stopped = [], None
        try:
            for wcfg in configs:
                widths = wcfg.model_config(wcfg.vocab_size).d_mlp
                assert training_flops_per_token(wcfg.model_config(wcfg.vocab_size), wcfg.n_ctx) == flops, widths
                for variant in variants:
                    r = measure(variant, wcfg, dist, size, device)
                    if STOP_SIGNALS:  # arrived during this variant, and the code it interrupted swallowed it
                        raise Stopped(STOP_SIGNALS[0])  # (dynamo does, while compiling): not a clean row
                    achieved = flops * r["tokens_per_s"] / 1e12
                    rows.append({"widths": wcfg.width.label, "variant": variant,
                                 f"tokens/s per {unit}": r["tokens_per_s"], "TFLOP/s": achieved,
                                 "MFU (vs dense peak)": f"{achieved / peak:.1%}" if peak else
                                 "n/a (give --peak-tflops)",
                                 "vs best matmul": f"{achieved / matmul:.1%}", "warm-up s": r["warmup_s"],
                                 ("peak memory GiB" if on_gpu else "peak RSS GiB"): r["peak_gib"],
                                 "AdamW": r["adamw"], "module": r["wrapped"], "last loss": r["loss"]})
                    print(f"[{name}] {wcfg.width.label} {variant}: {r['tokens_per_s']:,.0f} tokens/s per {unit}, "
                          f"{achieved:.4g} TFLOP/s, warm-up {r['warmup_s']:.1f} s", flush=True)
        except Exception:  # a limit ended the run: keep what was measured, say what was not
            if not STOP_SIGNALS:
                raise
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
            stopped = (f"stopped by {STOP_SIGNALS[0]} after {len(rows)} of {len(configs) * len(variants)} "
                       "variant runs; the rows missing here were not measured")
            print(f"[{name}] {stopped}", flush=True)
            if not rows:
                return ""
        shape = "dry-run shape (--quick)" if args.quick else "shape"
        report.section(f"Tokens/s and MFU, preset `{args.preset}` {shape}, {dist.world_size} {unit}(s) on {device}"
                       + (" (partial)" if stopped else ""))
        if stopped:
            report.note(f"**Partial: {stopped}.**")
        report.table(rows)
        if len(configs) > 1:  # each profile against the first, variant by variant
            tps = f"tokens/s per {unit}"
            base = {r["variant"]: r[tps] for r in rows if r["widths"] == configs[0].width.label}
            report.table([{"widths": r["widths"], "variant": r["variant"],
                           f"tokens/s / {configs[0].width.label}'s": r[tps] / base[r["variant"]]}
                          for r in rows if r["widths"] != configs[0].width.label and r["variant"] in base])
        mcfg = cfg.model_config(cfg.vocab_size)
        report.note(f"Shape: {cfg.n_layers} layers x d_model {cfg.d_model}, {cfg.n_heads} heads, mean d_ff {cfg.d_ff} "
                    f"({param_counts(mcfg)['total']:,} params), n_ctx {cfg.n_ctx}, vocab {cfg.vocab_size}; "
                    f"{size['micro_batch']} sequences per {unit} per step, bf16 autocast, {size['warmup']} warm-up + "
                    f"{size['steps']} timed steps per variant; activation checkpointing "
                    f"{'on' if size['checkpointing'] else 'off'}. {flops:,} training FLOP/token. Peak: "
                    f"{peak or 'unknown'} TFLOP/s dense bf16 for {hardware!r}; best measured bf16 matmul "
                    f"{matmul:,.{1 if on_gpu else 3}f} TFLOP/s. Over a 1-rank group both wrappers are real: 'ddp' is "
                    "DistributedDataParallel (its all-reduce has no peer) and 'fsdp' fully_shard (all-gather and "
                    "reduce-scatter over one rank), so their cost over the plain module shows. Width profiles: "
                    + "; ".join(f"{c.width.label} {c.model_config(c.vocab_size).d_mlp}" for c in configs)
                    + " (same parameters and training FLOP/token). Variants run one after another, each once, "
                    "so a ratio between rows is one measurement: steady on a GPU of its own, noisy on a shared CPU.")
        best = max((r["TFLOP/s"] for r in rows), default=0.0)
        report.check("best MFU on this GPU" if on_gpu else "best MFU on this CPU",
                     f"{best / peak:.1%}" if peak else "n/a", ">= 40% (issue #15, one GPU)",
                     best / peak >= 0.40 if (peak and on_gpu) else None)
        return finish(report, args.write and dist.primary) if dist.primary else ""
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
        dist.barrier()
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
