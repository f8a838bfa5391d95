"""Training tokens/s per token mixer: tapered (cosine 1.5->0.5) vs uniform at the same parameter budget.

For each mixer of analyses.architectures.MIXERS (Transformer++ attention, Gated Attention,
Hope-attention, Titans MAG) two models of the `tiny` preset shape, uniform and cosine 1.5->0.5, train
side by side: blocks of optimizer steps alternate between them in ABBA order (common.interleave) on
the same batches, so load drift hits both alike and the tapered/uniform ratio per block pair is the
number to read. Taper only moves MLP width between layers (equal parameters and matmul FLOPs), so the
ratio should be ~1 for every mixer; the mixers' absolute rates differ by ~10x (docs/mixers.md, "Cost").

The training step is bench_train's BareTrainer (Trainer's forward/backward, grad clip, AdamW, lr
schedule; no logging, eval or checkpoints). Tokens are random ids (throughput does not depend on the
text), so no corpus or tokenizer is needed. Mixers are measured one after another (two models in
memory at a time): compare absolute rates across mixers only within one load level.
`--quick` uses the `micro` preset shape (seconds). On a loaded machine pass `--threads 1`: the memory
mixers' many small ops slow down sharply with two contended threads.
`--device cuda --dtype bf16` measures on a GPU (its own RESULTS.md section, bench_mixers_cuda); each
step ends in `loss.item()`, which waits for the GPU, so wall time per block is GPU time.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse

import torch

from analyses.architectures import ARCHITECTURE_NAMES, BASELINE, MIXERS, TAPERED
from benchmarks.bench_train import BareTrainer, paired_blocks, synthetic_data
from benchmarks.common import Report, Spread, begin, finish, paired_ratios, parse_args
from interp.data import TokenData
from interp.model import param_counts
from interp.training import TORCH_DTYPE_NAMES, TrainConfig

NAME = "bench_mixers"
TITLE = "Training throughput per token mixer, tapered vs uniform (bench_mixers)"

# real: the tiny shape, 8 blocks of 2 steps (blocks of 1 step were too noisy for the memory mixers:
# Hope-attention read 0.94 [0.89, 1.05] with 4 x 1); ~6 min on 2 quiet cores, Titans most of it.
# quick: micro shape, seconds.
SIZES = {
    "real": dict(preset="tiny", blocks=8, block_steps=2),
    "quick": dict(preset="micro", blocks=2, block_steps=1),
}
LABELS = {"uniform": BASELINE, TAPERED.label: TAPERED}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--mixers", default=",".join(MIXERS), help=f"comma-separated mixers (default {','.join(MIXERS)})")
    p.add_argument("--n-ctx", type=int, help="sequence length (default: the preset's; 256 for tiny)")
    p.add_argument("--blocks", type=int,
                   help="timed blocks per model after one warm-up block (default: 8 real, 2 quick)")
    p.add_argument("--block-steps", type=int, help="optimizer steps per block (default: 2 real, 1 quick)")
    p.add_argument("--preset", help="model shape (default: tiny; micro with --quick)")
    p.add_argument("--batch-size", type=int, help="sequences per step (default: the preset's)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--dtype", choices=tuple(TORCH_DTYPE_NAMES), default="fp32", help="fp32 (default) or bf16 autocast")


def mixer_configs(base: TrainConfig, mixer: str) -> dict[str, TrainConfig]:
    """{label: TrainConfig} of the uniform and tapered model of one mixer."""
    return {label: base.with_overrides(mixer=mixer, width=spec) for label, spec in LABELS.items()}


def bench_mixer(report: Report, base: TrainConfig, data: TokenData, mixer: str, blocks: int, k: int,
                device: str = "cpu") -> dict:
    """Interleaved tokens/s of one mixer's two models on the same batches; one table row."""
    configs = mixer_configs(base, mixer)
    runners = {label: BareTrainer(cfg, data.vocab_size, device=device) for label, cfg in configs.items()}
    tps = paired_blocks(runners, base, data, k, blocks)   # interleaved, the same batches for both models
    uniform, tapered = (Spread.of(tps[label]) for label in LABELS)
    ratio = Spread.of(paired_ratios(tps[TAPERED.label], tps["uniform"]))
    numel = {label: sum(p.numel() for p in r.model.parameters()) for label, r in runners.items()}
    analytic = {label: param_counts(cfg.model_config(data.vocab_size))["total"] for label, cfg in configs.items()}
    equal = len(set(numel.values())) == 1 and numel == analytic
    report.check(f"{mixer}: tapered / uniform tokens/s", ratio.fmt(), "0.95 - 1.05", 0.95 <= ratio.median <= 1.05)
    return {"mixer": mixer, "architecture": ARCHITECTURE_NAMES.get(mixer, mixer), "params": numel["uniform"],
            "uniform tok/s": uniform.fmt(",.0f"), "tapered tok/s": tapered.fmt(",.0f"),
            "ratio tapered/uniform": ratio.fmt(), "params equal?": "yes" if equal else f"NO {numel}"}


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    args = parse_args(NAME, __doc__.splitlines()[0], argv, add_arguments)
    size = SIZES["quick" if args.quick else "real"]
    mixers = [m.strip() for m in args.mixers.split(",") if m.strip()]
    blocks = args.blocks or size["blocks"]
    block_steps = args.block_steps or size["block_steps"]
    if min(blocks, block_steps, args.n_ctx or 1, args.batch_size or 1) < 1:
        raise SystemExit(f"benchmarks/{NAME}.py: --blocks, --block-steps, --n-ctx and --batch-size must be >= 1")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"benchmarks/{NAME}.py: --device {args.device}, but torch sees no CUDA device")
    on_gpu = args.device != "cpu"
    name, title = (f"{NAME}_cuda", f"{TITLE}, on a GPU") if on_gpu else (NAME, TITLE)
    if args.preset:  # a non-default shape gets its own RESULTS.md section
        name, title = f"{name}_{args.preset}", f"{title}, preset {args.preset}"
    size, report = begin(args, SIZES, name, title, argv, command, script=NAME)
    preset = args.preset or size["preset"]
    shape = {k: v for k, v in (("n_ctx", args.n_ctx), ("batch_size", args.batch_size)) if v}
    base = TrainConfig.from_preset(preset, threads=args.threads, progress=False, dtype=args.dtype, grad_accum=1,
                                   **shape)
    data = synthetic_data(base.vocab_size, n_tokens=max(50_000, 4 * base.batch_size * (base.n_ctx + 1)))
    report.section("Tokens/s per mixer, uniform vs cosine 1.5->0.5, same batches")
    rows = []
    for mixer in mixers:
        print(f"[{name}] {mixer} ...", file=sys.stderr, flush=True)
        rows.append(bench_mixer(report, base, data, mixer, blocks, block_steps, args.device))
    report.table(rows)
    report.note(f"Shape: preset `{preset}` (d_model {base.d_model}, {base.n_layers} layers, "
                f"{base.n_heads} heads, "
                f"mean d_ff {base.d_ff}), batch {base.batch_size} x n_ctx {base.n_ctx}, vocab {data.vocab_size} "
                f"(random tokens), {args.dtype} on {args.device}, default mixer_options. Per mixer: {blocks} "
                f"interleaved blocks of {block_steps} step(s) per model after 1 warm-up block; cells are median "
                "[IQR] over blocks; the ratio is per block pair. 'params equal?': numel of both models equal each "
                "other and interp.model.param_counts.")
    return finish(report, args.write)


if __name__ == "__main__":
    main()
