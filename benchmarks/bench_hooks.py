"""HookPoint overhead: TaperedLM with its HookPoints vs the same weights with the HookPoints bypassed.

The bypassed copy has every HookPoint submodule replaced by a plain identity *function* attribute, so
it pays no nn.Module call at all; both compute bit-identical logits (checked before timing). Measured
side by side in one process (interleaved blocks, ABBA order, same batch):
  - forward + backward step time (training), the issue's requirement: overhead < 3% of the step;
  - forward-only time under no_grad (what a probe pays);
  - the cost of one unhooked HookPoint call vs a function call, times the number of HookPoints, as an
    independent prediction of the per-forward overhead.
`--quick` uses the `micro` preset shape.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
from torch import nn
from transformer_lens.hook_points import HookPoint

from benchmarks.bench_train import base_config
from benchmarks.common import Spread, begin, finish, interleave, paired_ratios, parse_args
from interp.model import TaperedLM

NAME = "bench_hooks"
TITLE = "HookPoint overhead (bench_hooks)"
SIZES = {
    "real": dict(preset="tiny", vocab_size=8192, reps=10, block=1, calls=20_000, call_reps=7),
    "quick": dict(preset="micro", vocab_size=384, reps=3, block=1, calls=2_000, call_reps=3),
}


def _identity(x):
    return x


def strip_hookpoints(model: nn.Module) -> int:
    """Replace every HookPoint submodule by the identity function in place; returns how many were replaced.

    The attribute keeps its name (blocks[l].hook_resid_pre), so forward code runs unchanged; the model
    is no longer hookable (hook_dict still lists the removed HookPoints, which never fire).
    """
    n = 0
    for module in list(model.modules()):
        for name, child in list(module._modules.items()):
            if isinstance(child, HookPoint):
                del module._modules[name]
                object.__setattr__(module, name, _identity)
                n += 1
    return n


def count_hookpoints(model: nn.Module) -> int:
    return sum(isinstance(m, HookPoint) for m in model.modules())


def per_call_seconds(calls: int, reps: int) -> dict[str, Spread]:
    """Seconds per call of an unhooked HookPoint and of the identity function on one small tensor."""
    x = torch.zeros(4)
    hook = HookPoint()

    def loop(fn):
        def run() -> None:
            for _ in range(calls):
                fn(x)
        return run

    times = interleave({"HookPoint": loop(hook), "function": loop(_identity)}, reps=reps, warmup=1)
    return {name: Spread.of([t / calls for t in ts]) for name, ts in times.items()}


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    args = parse_args(NAME, __doc__.splitlines()[0], argv)
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    cfg = base_config(size["preset"], args.threads).with_overrides(schedule="cosine", start=1.5, end=0.5)
    torch.manual_seed(0)
    hooked = TaperedLM(cfg.model_config(size["vocab_size"]))
    bare = copy.deepcopy(hooked)
    n_hooks = strip_hookpoints(bare)
    tokens = torch.randint(0, size["vocab_size"], (cfg.batch_size, cfg.n_ctx),
                           generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        if not torch.equal(hooked(tokens), bare(tokens)):
            raise RuntimeError("bench_hooks: the stripped model's logits differ from the hooked model's")
    if count_hookpoints(bare) != 0 or count_hookpoints(hooked) != n_hooks:
        raise RuntimeError("bench_hooks: strip_hookpoints left HookPoints behind")
    k, reps = size["block"], size["reps"]

    def train_block(model: TaperedLM):
        def run() -> None:
            for _ in range(k):
                model.zero_grad(set_to_none=True)
                model(tokens, return_type="loss").backward()
        return run

    def forward_block(model: TaperedLM):
        @torch.no_grad()
        def run() -> None:
            for _ in range(k):
                model(tokens)
        return run

    widths = hooked.cfg.d_mlp
    report.note(f"TaperedLM, preset `{size['preset']}` shape with cosine 1.5->0.5 widths {widths}, "
                f"vocab {size['vocab_size']}, batch {cfg.batch_size} x {cfg.n_ctx}, fp32; {n_hooks} HookPoints "
                f"per forward. {reps} interleaved blocks of {k} call(s) per variant after 1 warm-up block.")
    rows, diffs, ratios, step_ms = [], {}, {}, {}
    for label, make in (("forward + backward", train_block), ("forward (no_grad)", forward_block)):
        times = interleave({"hooked": make(hooked), "bypassed": make(bare)}, reps=reps, warmup=1)
        ratios[label] = Spread.of(paired_ratios(times["hooked"], times["bypassed"]))
        diffs[label] = Spread.of([(a - b) / k * 1e3 for a, b in zip(times["hooked"], times["bypassed"], strict=True)])
        r = ratios[label]
        step_ms[label] = Spread.of([t / k * 1e3 for t in times["bypassed"]]).median
        rows.append({"pass": label,
                     "with HookPoints (ms)": Spread.of([t / k * 1e3 for t in times["hooked"]]).fmt(",.1f"),
                     "bypassed (ms)": Spread.of([t / k * 1e3 for t in times["bypassed"]]).fmt(",.1f"),
                     "difference (ms)": diffs[label].fmt(",.2f"),
                     "overhead": f"{r.median - 1:+.2%} [{r.q25 - 1:+.2%}, {r.q75 - 1:+.2%}]"})
    report.section("Step time with and without HookPoints")
    report.table(rows)
    calls = per_call_seconds(size["calls"], size["call_reps"])
    per_call = calls["HookPoint"].median - calls["function"].median
    predicted_ms = per_call * n_hooks * 1e3
    report.section("Per-call cost (independent prediction)")
    report.table([{"callable": name, "us per call": f"{s.median * 1e6:.2f} [{s.q25 * 1e6:.2f}, {s.q75 * 1e6:.2f}]"}
                  for name, s in calls.items()])
    report.note(f"An unhooked HookPoint call costs {per_call * 1e6:.2f} us more than a function call; x {n_hooks} "
                f"HookPoints = **{predicted_ms:.3f} ms per forward** predicted (backward makes no HookPoint calls), "
                f"vs {diffs['forward (no_grad)'].median:.3f} ms measured as the forward difference above "
                "(the measured difference is mostly noise when it is this small).")
    overhead = ratios["forward + backward"].median - 1
    report.check("HookPoint overhead, forward + backward", f"{overhead:+.2%}", "< 3% of step time", overhead < 0.03)
    share = predicted_ms / step_ms["forward + backward"]
    report.check("predicted HookPoint cost, share of a forward+backward step", f"{share:.3%}", "< 3%", share < 0.03)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
