"""CPU kernels: which ops give different fp32 bits on which CPU kind, and what INTERP_CPU_KERNELS=portable costs.

Why: the same fp32 run differs by ~1.4% in perplexity between this project's Intel and AMD machines. This
benchmark fingerprints (sha256 of the output bytes) each op a training step uses (Linear, its input gradient,
batched matmul, softmax, SDPA, layer/RMS norm, GELU, SiLU, exp, a sum, cross-entropy) and a short `tiny`-preset
fp32 training run (its final weights), once with the native kernels and once with portable ones
(interp._util.cpu_kernels), each in a fresh process, 1 thread. This machine's fingerprints are stored in
benchmarks/cpu_fingerprints.json under its CPU kind; the table says, per op and mode, whether the other CPU
kinds recorded there computed the same bits. The training run is traced (TracingTrainer: initial weights, first
batch, first logits, each parameter's first gradient, weights after step 1, every step's loss bits), so two
kinds' records say at which stage and step their runs part. Speed: tokens/s of the same training run in both
modes, the two modes alternating (ABBA) in fresh processes.
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


def _digest(*tensors) -> str:
    h = hashlib.sha256()
    for tensor in tensors:
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def op_fingerprints() -> dict[str, str]:
    """sha256 prefixes of fp32 ops at the tiny preset's shapes (tokens x d_model 256, d_ff 1024, 4 heads): the
    forward ops a training step uses, their backward passes (input gradient for a fixed upstream gradient), the
    model's init and RoPE tables, gradient clipping and two AdamW steps. The names of the first twelve are
    those of the first recorded CPU kind; the others were added when the training run differed between kinds
    with every one of those twelve agreeing (2026-12-04), to find the op that made it differ."""
    import torch
    import torch.nn.functional as F

    from interp.model.mixers.attention import Rotary

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
    digests = {name: _digest(op()) for name, op in ops.items()}
    g_x, g_q = torch.randn(2048, 256, generator=g), torch.randn(8, 4, 256, 64, generator=g)
    ids = torch.randint(0, 1024, (2048,), generator=g)

    def input_grad(fn, inp: torch.Tensor, upstream: torch.Tensor) -> torch.Tensor:
        leaf = inp.clone().requires_grad_()
        fn(leaf).backward(upstream)
        return leaf.grad

    def embedding_grad() -> torch.Tensor:
        table = w.clone().requires_grad_()
        F.embedding(ids, table).backward(g_x)
        return table.grad

    def init_weights() -> torch.Tensor:
        torch.manual_seed(0)
        return torch.nn.init.normal_(torch.empty(1024, 256), std=0.02)

    def clipped() -> list[torch.Tensor]:
        params = [torch.nn.Parameter(t.clone()) for t in (x, w, b)]
        for p, grad in zip(params, (g_x, w.flip(0), b.flip(0)), strict=True):
            p.grad = grad.clone()
        norm = torch.nn.utils.clip_grad_norm_(params, 1.0)
        return [norm, *(p.grad for p in params)]

    def adamw() -> torch.Tensor:
        param = torch.nn.Parameter(w.clone())
        optimizer = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.1, foreach=False)
        for grad in (x[:1024], g_x[:1024]):
            param.grad = grad.clone()
            optimizer.step()
        return param

    def linear_shapes() -> list[torch.Tensor]:  # the tiny run's projections: qkv, MLP widths, unembedding
        return [F.linear(x, torch.randn(n, 256, generator=torch.Generator().manual_seed(n)))
                for n in (768, 512, 608, 864, 1184, 1440, 1536, 8192)]

    more = {"linear, the run's output widths": linear_shapes,
            "linear weight grad (g^T x, 2048 tokens)": lambda: [g_x.t() @ x, g_x[:, :200].t() @ x],
            "sdpa backward (causal)": lambda: [input_grad(lambda t: F.scaled_dot_product_attention(t, t, t,
                                                                                                  is_causal=True),
                                                          q, g_q)],
            "softmax backward": lambda: [input_grad(lambda t: torch.softmax(t, -1), x, g_x)],
            "rms_norm backward": lambda: [input_grad(lambda t: F.rms_norm(t, (256,), eps=1e-6), x, g_x)],
            "silu backward": lambda: [input_grad(F.silu, x, g_x)],
            "cross_entropy backward": lambda: [input_grad(lambda t: F.cross_entropy(t, torch.arange(2048) % 256),
                                                          x, torch.tensor(1.0))],
            "embedding backward": lambda: [embedding_grad()],
            "sqrt": lambda: [x.abs().sqrt()], "log": lambda: [x.abs().log()],
            "normal_ init (std 0.02)": lambda: [init_weights()],
            "rope tables (float64 pow, cos, sin)": lambda: [(r := Rotary(64, 256, 10000.0)).cos, r.sin],
            "clip_grad_norm_": clipped, "adamw, 2 steps (for-loop)": lambda: [adamw()]}
    return digests | {name: _digest(*op()) for name, op in more.items()}


class TracingTrainer:
    """Wraps a Trainer to record, without changing a bit of the run, where its numbers first differ between
    CPU kinds: digests of the initial weights, the first batch, the first forward's logits, every parameter's
    gradient before the first optimizer step (after clipping) and the weights after it, and the loss and grad
    norm of every step as exact float hex."""

    def __init__(self, cfg):
        from interp.training import Trainer

        class Traced(Trainer):
            def train_step(inner, batch, step, lr=None):  # noqa: N805 (the Trainer's self)
                if step == 0:
                    self._first_step(inner, batch)
                loss, grad_norm = super().train_step(batch, step, lr)
                self.trace["loss"].append(float(loss).hex())
                self.trace["grad_norm"].append(float(grad_norm).hex())
                return loss, grad_norm

        self.trace: dict = {"loss": [], "grad_norm": []}
        self.trainer = Traced(cfg)

    def _first_step(self, trainer, batch) -> None:
        model, optimizer = trainer.raw, trainer.optimizer
        names = {id(p): name for name, p in model.named_parameters()}
        self.trace["init weights"] = _digest(*(p for _, p in sorted(model.state_dict().items())))
        self.trace["first batch"] = _digest(batch)
        handles = []

        def logits_hook(module, args, output):
            self.trace["first logits"] = _digest(output)
            handles[0].remove()

        def grads_hook(opt, args, kwargs):
            grads = {names[id(p)]: "no grad" if p.grad is None else _digest(p.grad)
                     for group in opt.param_groups for p in group["params"]}
            self.trace["first grads"] = dict(sorted(grads.items()))
            handles[1].remove()

        def weights_hook(opt, args, kwargs):
            self.trace["weights after step 1"] = _digest(*(p for _, p in sorted(model.state_dict().items())))
            handles[2].remove()

        handles.extend([model.register_forward_hook(logits_hook), optimizer.register_step_pre_hook(grads_hook),
                        optimizer.register_step_post_hook(weights_hook)])

    def run(self) -> dict:
        return self.trainer.run()


def train_config(preset: str, steps: int, out_dir: Path):
    from interp.training import TrainConfig

    return TrainConfig.from_preset(preset, steps=steps, seed=0, dtype="fp32", threads=1, warmup_steps=max(1, steps // 5),
                                   eval_interval=10**6, eval_batches=2, ckpt_interval=10**6,
                                   log_interval=max(1, steps // 2), progress=False, out_dir=str(out_dir))


def worker(args) -> dict:
    """One fresh process in the mode its environment set: kernel settings, op fingerprints, one training run."""
    settings = cpu_kernels.check()
    ops = op_fingerprints()
    with tempfile.TemporaryDirectory(prefix="bench-cpu-kernels-") as tmp:
        start = time.perf_counter()
        traced = TracingTrainer(train_config(args.preset, args.steps, Path(tmp) / "run"))
        result = traced.run()
        wall = time.perf_counter() - start
    return {"settings": settings, "ops": ops,
            "train": {"weights_sha256": result["weights_sha256"][:16], "val_loss": result["val_loss"],
                      "tokens_per_s": result["tokens_per_s"], "wall_s": wall, "trace": traced.trace}}


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
    names = list(mine[cpu_kernels.NATIVE]["ops"]) + [f"{TRAINING}{stage}" for stage in TRACE_STAGES] + [FINAL]
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


TRAINING, FINAL = "training run: ", "training run: final weights"
TRACE_STAGES = ("init weights", "first batch", "first logits", "first grads", "weights after step 1")


def _entry(record: dict, name: str) -> str | None:
    """The digest of an op or a training stage in one mode's record; None where that record lacks it (a
    record made before the stage was traced)."""
    train = record.get("train") or {}
    if name == FINAL:
        return train.get("weights_sha256")
    if name.startswith(TRAINING):
        value = (train.get("trace") or {}).get(name.removeprefix(TRAINING))
        return _digest_of(value) if isinstance(value, dict) else value
    return (record.get("ops") or {}).get(name)


def _digest_of(per_parameter: dict[str, str]) -> str:
    """One digest for a {parameter: digest} mapping (the first gradients), so it fits the table's cell."""
    return hashlib.sha256(json.dumps(per_parameter, sort_keys=True).encode()).hexdigest()[:16]


def divergence(mine: dict, theirs: dict) -> str:
    """Where two traced training runs (one mode's records on two CPU kinds) first part: the first stage whose
    digest differs, the parameters whose first gradients differ, and the first step whose loss or grad norm
    bits differ; '' when either record has no trace."""
    a, b = (r.get("train", {}).get("trace") for r in (mine, theirs))
    if not a or not b:
        return ""
    first_stage = next((stage for stage in TRACE_STAGES if a.get(stage) != b.get(stage)), None)
    grads_a, grads_b = a.get("first grads", {}), b.get("first grads", {})
    grads = sorted(k for k in grads_a.keys() | grads_b.keys() if grads_a.get(k) != grads_b.get(k))
    step = next((i for i, pair in enumerate(zip(a["loss"], b["loss"], strict=False)) if pair[0] != pair[1]), None)
    norm = next((i for i, pair in enumerate(zip(a["grad_norm"], b["grad_norm"], strict=False))
                 if pair[0] != pair[1]), None)
    if first_stage is None and step is None and norm is None:
        return "every traced stage and every step's loss and grad norm agree"
    shown = ", ".join(grads[:6]) + (f" and {len(grads) - 6} more" if len(grads) > 6 else "")
    return (f"first differing stage: {first_stage or 'none'}; first gradients differ in {len(grads)} of "
            f"{len(grads_a)} parameters{f' ({shown})' if grads else ''}; first step whose loss differs: "
            f"{'none' if step is None else step + 1}, whose grad norm differs: {'none' if norm is None else norm + 1}")


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
        if len({json.dumps([r["ops"], r["train"]["weights_sha256"], r["train"]["trace"]]) for r in results}) != 1:
            raise RuntimeError(f"{mode}: two runs on this machine gave different bits; fingerprints are meaningless")
    mine = {mode: {"settings": results[0]["settings"], "ops": results[0]["ops"],
                   "train": {k: results[0]["train"][k] for k in ("weights_sha256", "val_loss", "trace")}}
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
    for other, record in stored.items():
        if other != kind:
            report.note(f"Training runs vs {other}: " + "; ".join(
                f"{mode}: {divergence(mine[mode], record[mode]) or 'not traced there (run this benchmark there again)'}"
                for mode in MODES if mode in record) + ".")
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
