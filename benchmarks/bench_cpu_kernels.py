"""CPU kernels: which ops give different fp32 bits on which CPU kind, and what INTERP_CPU_KERNELS=portable costs.

Why: the same fp32 run differs by ~1.4% in perplexity between this project's Intel and AMD machines. This
benchmark fingerprints (sha256 of the output bytes) each op a training step uses (Linear, its input gradient,
batched matmul, softmax, SDPA, layer/RMS norm, GELU, SiLU, exp, a sum, cross-entropy) and a short `tiny`-preset
fp32 training run (its final weights), once with the native kernels and once with portable ones
(interp._util.cpu_kernels), each in a fresh process, 1 thread. This machine's fingerprints are stored in
benchmarks/cpu_fingerprints.json under its CPU kind; the table says, per op and mode, whether the other CPU
kinds recorded there computed the same bits. Speed: tokens/s of the same training run in both modes, the two
modes alternating (ABBA) in fresh processes.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import (
    BENCH_DIR,
    Spread,
    begin,
    emit_result,
    finish,
    interleave_orders,
    paired_ratios,
    parse_args,
    run_worker,
    set_threads,
)
from interp._util import cpu_kernels
from interp._util.io import write_text_atomic

NAME, TITLE = "bench_cpu_kernels", "CPU kernels: fp32 bits per CPU kind, native vs portable (bench_cpu_kernels)"
FINGERPRINTS = BENCH_DIR / "cpu_fingerprints.json"
SIZES = {"real": {"preset": "tiny", "steps": 20, "reps": 2, "timeout": 1800},
         "quick": {"preset": "micro", "steps": 2, "reps": 1, "timeout": 600}}
MODES = (cpu_kernels.NATIVE, cpu_kernels.PORTABLE)


def _digest(tensor) -> str:
    return hashlib.sha256(tensor.detach().contiguous().numpy().tobytes()).hexdigest()[:16]


def op_fingerprints() -> dict[str, str]:
    """sha256 prefixes of fp32 ops at the tiny preset's shapes (tokens x d_model 256, d_ff 1024, 4 heads)."""
    import torch
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2048, 256, generator=g), torch.randn(1024, 256, generator=g), torch.randn(1024, generator=g)
    q = torch.randn(8, 4, 256, 64, generator=g)
    x_grad = x.clone().requires_grad_()
    F.linear(x_grad, w, b).pow(2).mean().backward()
    ops = {"linear": lambda: F.linear(x, w, b), "linear input grad": lambda: x_grad.grad,
           "batched matmul": lambda: q @ q.transpose(-1, -2), "softmax": lambda: torch.softmax(x, -1),
           "sdpa (causal)": lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True),
           "layer_norm": lambda: F.layer_norm(x, (256,)), "rms_norm": lambda: F.rms_norm(x, (256,)),
           "gelu": lambda: F.gelu(x), "silu": lambda: F.silu(x), "exp": lambda: x.exp(), "sum": lambda: x.sum(0),
           "cross_entropy": lambda: F.cross_entropy(x[:, :200], torch.arange(2048) % 200)}
    return {name: _digest(op()) for name, op in ops.items()}


def train_config(preset: str, steps: int, out_dir: Path):
    from interp.training import TrainConfig

    return TrainConfig.from_preset(preset, steps=steps, seed=0, dtype="fp32", threads=1, warmup_steps=max(1, steps // 5),
                                   eval_interval=10**6, eval_batches=2, ckpt_interval=10**6,
                                   log_interval=max(1, steps // 2), progress=False, out_dir=str(out_dir))


def worker(args) -> dict:
    """One fresh process in the mode its environment set: kernel settings, op fingerprints, one training run."""
    from interp.training import train

    settings = cpu_kernels.check()
    ops = op_fingerprints()
    with tempfile.TemporaryDirectory(prefix="bench-cpu-kernels-") as tmp:
        start = time.perf_counter()
        result = train(train_config(args.preset, args.steps, Path(tmp) / "run"))
        wall = time.perf_counter() - start
    return {"settings": settings, "ops": ops,
            "train": {"weights_sha256": result["weights_sha256"][:16], "val_loss": result["val_loss"],
                      "tokens_per_s": result["tokens_per_s"], "wall_s": wall}}


def mode_env(mode: str) -> dict[str, str]:
    """This process's environment for a child in `mode`: the portable variables removed for native (a parent
    run under INTERP_CPU_KERNELS=portable has them set), INTERP_CPU_KERNELS set for portable."""
    env = {k: v for k, v in os.environ.items() if k != cpu_kernels.MODE_VAR and k not in cpu_kernels.PORTABLE_ENV}
    return env | ({cpu_kernels.MODE_VAR: cpu_kernels.PORTABLE} if mode == cpu_kernels.PORTABLE else {})


def cpu_kind() -> str:
    """The key this machine's fingerprints are stored under: its hardware label plus its widest vector ISA."""
    from interp._util.provenance import cpu_info, hardware_label

    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").is_file() else []
    isa = "AMX" if "amx_tile" in flags else "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "other"
    return f"{hardware_label('cpu', cpu_info())} {isa}"


def load_fingerprints(path: Path = FINGERPRINTS) -> dict:
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise SystemExit(f"{path}: not valid JSON ({err}); restore it with `git checkout {path.name}`") from err


def comparison_rows(mine: dict[str, dict], kind: str, stored: dict) -> list[dict[str, str]]:
    """One row per op (and the training run): this machine's fingerprint per mode and, per other stored CPU
    kind, whether it computed the same bits ("same" / "differs")."""
    others = {k: v for k, v in stored.items() if k != kind}
    names = list(mine[cpu_kernels.NATIVE]["ops"]) + ["training run (final weights)"]
    rows = []
    for name in names:
        row = {"op": name}
        for mode in MODES:
            digest = _entry(mine[mode], name)
            row[f"{mode} (this CPU)"] = digest
            for other, record in others.items():
                theirs = _entry(record.get(mode, {}), name) if mode in record else None
                row[f"{mode} = {other}?"] = "" if theirs is None else ("same" if theirs == digest else "differs")
        rows.append(row)
    return rows


def _entry(record: dict, name: str) -> str | None:
    if name.startswith("training run"):
        return (record.get("train") or {}).get("weights_sha256")
    return (record.get("ops") or {}).get(name)


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str | dict:
    def extra(p):
        p.add_argument("--worker", action="store_true", help="internal: measure in this process")
        p.add_argument("--preset", help="internal (worker)")
        p.add_argument("--steps", type=int, help="internal (worker)")

    args = parse_args(NAME, __doc__.splitlines()[0], argv, extra)
    if args.worker:
        set_threads(args.threads)  # before the op fingerprints: a reduction's split depends on the thread count
        result = worker(args)
        emit_result(result)
        return result
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    from interp.data import prepare_tokens

    base = train_config(size["preset"], size["steps"], Path("unused"))
    prepare_tokens(base.source, base.tokenizer, base.vocab_size, base.val_fraction)  # cached once, before the workers
    runs: dict[str, list[dict]] = {mode: [] for mode in MODES}
    for order in interleave_orders(MODES, size["reps"]):
        for mode in order:
            print(f"[{NAME}] {mode} worker", file=sys.stderr, flush=True)
            result = run_worker(Path(__file__), ["--worker", "--preset", size["preset"], "--steps", str(size["steps"]),
                                                 "--threads", "1"], timeout=size["timeout"], env=mode_env(mode))
            if "error" in result:
                raise RuntimeError(f"{mode} worker failed: {result['error']}")
            runs[mode].append(result)
    for mode, results in runs.items():  # the same mode must give the same bits every time on one machine
        if len({json.dumps([r["ops"], r["train"]["weights_sha256"]]) for r in results}) != 1:
            raise RuntimeError(f"{mode}: two runs on this machine gave different bits; fingerprints are meaningless")
    mine = {mode: {"settings": results[0]["settings"], "ops": results[0]["ops"],
                   "train": {k: results[0]["train"][k] for k in ("weights_sha256", "val_loss")}}
            for mode, results in runs.items()}
    kind = cpu_kind()
    stored = load_fingerprints()
    if args.write and not args.quick:
        stored[kind] = {**mine, "preset": size["preset"], "steps": size["steps"],
                        "measured": time.strftime("%Y-%m-%d")}
        write_text_atomic(FINGERPRINTS, json.dumps(stored, indent=1, sort_keys=True) + "\n")
    report.note(f"This CPU kind: **{kind}**. Kernels per mode: "
                + "; ".join(f"{mode}: ATen {m['settings']['aten']}, MKL branch {m['settings']['mkl_cbwr']}, oneDNN "
                            f"max ISA {m['settings']['onednn_max_isa']}" for mode, m in mine.items())
                + f". Training run: preset `{size['preset']}`, fp32, {size['steps']} steps, seed 0, 1 thread; "
                  f"fingerprints are the first 16 hex digits of sha256 (ops: of the output; the run: of its final "
                  f"model.safetensors). Other CPU kinds: {', '.join(k for k in stored if k != kind) or 'none recorded yet'} "
                  f"({FINGERPRINTS.name}).")
    report.section("(a) fp32 bits per op: this CPU, and whether the other recorded CPU kinds agree")
    report.table(comparison_rows(mine, kind, stored))
    differ = [name for name in mine[cpu_kernels.NATIVE]["ops"]
              if mine[cpu_kernels.NATIVE]["ops"][name] != mine[cpu_kernels.PORTABLE]["ops"][name]]
    report.note(f"On this CPU, portable kernels change the bits of: {', '.join(differ) or 'nothing'}. Validation "
                f"loss of the run: native {mine['native']['train']['val_loss']:.6f}, portable "
                f"{mine['portable']['train']['val_loss']:.6f}.")
    report.section("(b) Training speed, native vs portable (same run, fresh processes, ABBA)")
    speed = {mode: [r["train"]["tokens_per_s"] for r in results] for mode, results in runs.items()}
    report.table([{"mode": mode, "in-run tokens/s": Spread.of(v).fmt(",.0f"),
                   "wall s per run (incl. start-up)": Spread.of([r["train"]["wall_s"] for r in runs[mode]]).fmt(".1f")}
                  for mode, v in speed.items()])
    ratio = Spread.of(paired_ratios(speed[cpu_kernels.PORTABLE], speed[cpu_kernels.NATIVE]))
    report.note(f"Portable / native tokens/s (paired by repetition): {ratio.fmt('.3f')}.")
    report.check("portable kernels in effect in the portable worker", mine["portable"]["settings"]["mode"],
                  "portable", mine["portable"]["settings"]["mode"] == cpu_kernels.PORTABLE)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
