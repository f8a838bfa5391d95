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
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from benchmarks.common import GIB, Report, finish, parse_args, set_threads

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
    p.add_argument("--steps", type=int, default=10, help="timed steps per variant (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first (compilation; default 3)")
    p.add_argument("--variants", default=",".join(VARIANTS), help=f"subset of {','.join(VARIANTS)}")
    p.add_argument("--activation-checkpointing", action="store_true", help="recompute each block in backward")
    p.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak, if not in the table")


def peak_tflops(name: str, given: float | None) -> float | None:
    if given:
        return given
    return next((v for k, v in sorted(PEAK_TFLOPS.items(), key=lambda kv: -len(kv[0])) if k in name), None)


def matmul_tflops(n: int = 8192, reps: int = 10) -> float:
    """The best bf16 matmul rate this GPU reaches (2 n^3 FLOP per call), TFLOP/s."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    best = 0.0
    for _ in range(reps):
        torch.cuda.synchronize()
        start = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e12)
    return best


def measure(variant: str, cfg, dist, size: dict) -> dict:
    """Tokens/s per GPU and peak memory of one variant, through wrap_model / make_optimizer / train_step."""
    from interp.model import TaperedLM
    from interp.training import lr_at, make_optimizer, train_step
    from interp.training.parallel import wrap_model

    parallel, compiled = variant.split("+")[0], variant.endswith("+compile")
    torch.manual_seed(cfg.seed)
    raw = TaperedLM(cfg.model_config(cfg.vocab_size)).to("cuda")
    model = wrap_model(raw, parallel, dist, torch.bfloat16, checkpointing=size["checkpointing"], compile=compiled,
                       even_one_rank=True)
    optimizer = make_optimizer(model, cfg.with_overrides(fused_adamw=True))
    gen = torch.Generator(device="cuda").manual_seed(cfg.seed + dist.rank)
    batch = torch.randint(0, cfg.vocab_size, (size["micro_batch"], cfg.n_ctx + 1), device="cuda", generator=gen)
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for step in range(size["warmup"]):
        train_step(model, optimizer, [batch], lr_at(step, cfg), cfg.grad_clip, torch.bfloat16)
    torch.cuda.synchronize()
    warmup_s = time.perf_counter() - start
    dist.barrier()
    start = time.perf_counter()
    for step in range(size["steps"]):
        loss, _ = train_step(model, optimizer, [batch], lr_at(step, cfg), cfg.grad_clip, torch.bfloat16)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    result = {"tokens_per_s": size["steps"] * batch.shape[0] * cfg.n_ctx / seconds, "warmup_s": warmup_s,
              "peak_gib": torch.cuda.max_memory_allocated() / GIB, "loss": float(loss), "adamw": optimizer.impl}
    del model, raw, optimizer, batch
    gc.collect()
    torch.cuda.empty_cache()
    return result


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    args = parse_args(NAME, __doc__.splitlines()[0], argv, _arguments)
    if not torch.cuda.is_available():
        print(f"[{NAME}] skipped: no CUDA device (this benchmark measures GPUs; nothing written)", flush=True)
        return ""
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    if not variants or set(variants) - set(VARIANTS):
        raise SystemExit(f"benchmarks/{NAME}.py: --variants {args.variants!r}: choose from {','.join(VARIANTS)}")
    from interp._util.dist import Distributed
    from interp.model import param_counts, training_flops_per_token
    from interp.training import TrainConfig

    set_threads(args.threads)
    os.environ.setdefault("WORLD_SIZE", "1")  # a 1-rank group when run without torchrun: FSDP needs one
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    import torch.distributed as tdist

    tdist.init_process_group("nccl")
    dist = Distributed.from_env()
    try:
        report = Report(NAME, TITLE, command or " ".join(["python benchmarks/bench_gpu_scale.py",
                                                           *(argv if argv is not None else sys.argv[1:])]), False)
        cfg = TrainConfig.from_preset(args.preset, **({"n_ctx": args.n_ctx} if args.n_ctx else {}))
        size = {"micro_batch": args.micro_batch, "steps": args.steps, "warmup": args.warmup,
                "checkpointing": args.activation_checkpointing}
        name = torch.cuda.get_device_name()
        peak = peak_tflops(name, args.peak_tflops)
        matmul = matmul_tflops()
        flops = training_flops_per_token(cfg.model_config(cfg.vocab_size), cfg.n_ctx)
        rows = []
        for variant in variants:
            r = measure(variant, cfg, dist, size)
            achieved = flops * r["tokens_per_s"] / 1e12
            rows.append({"variant": variant, "tokens/s per GPU": r["tokens_per_s"], "TFLOP/s": achieved,
                         "MFU (vs dense peak)": f"{achieved / peak:.1%}" if peak else "n/a (give --peak-tflops)",
                         "vs best matmul": f"{achieved / matmul:.1%}", "warm-up s": r["warmup_s"],
                         "peak memory GiB": r["peak_gib"], "AdamW": r["adamw"]})
        report.section(f"Tokens/s and MFU, preset `{args.preset}`, {dist.world_size} GPU(s)")
        report.table(rows)
        mcfg = cfg.model_config(cfg.vocab_size)
        report.note(f"Shape: {cfg.n_layers} layers x d_model {cfg.d_model}, {cfg.n_heads} heads, d_ff {cfg.d_ff} "
                    f"({param_counts(mcfg)['total']:,} params), n_ctx {cfg.n_ctx}, vocab {cfg.vocab_size}; "
                    f"{args.micro_batch} sequences per GPU per step, bf16, {args.warmup} warm-up + {args.steps} "
                    f"timed steps per variant; activation checkpointing {'on' if size['checkpointing'] else 'off'}. "
                    f"{flops:,} training FLOP/token. Peak: {peak or 'unknown'} TFLOP/s dense bf16 for {name!r}; "
                    f"best measured bf16 matmul {matmul:,.0f} TFLOP/s. On one GPU 'ddp' is the plain module "
                    "(nothing to all-reduce with) and 'fsdp' still shards over a 1-rank group.")
        best = max((r["TFLOP/s"] for r in rows), default=0.0)
        report.check("best MFU on this GPU", f"{best / peak:.1%}" if peak else "n/a", ">= 40% (issue #15)",
                     best / peak >= 0.40 if peak else None)
        return finish(report, args.write and dist.primary) if dist.primary else ""
    finally:
        dist.barrier()
        tdist.destroy_process_group()


if __name__ == "__main__":
    main()
