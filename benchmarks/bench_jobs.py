"""Training runs at once vs one after another on a small CPU (run_experiment jobs=2 vs jobs=1).

Two `tiny`-preset fp32 runs (uniform and cosine 1.5->0.5, the pair make figures' train_comparison trains),
trained (A) one after another, each with all the cores' threads, and (B) both at once, one process each with
cores / 2 threads: interp.jobs.runs.train_in_processes with jobs=1 and jobs=2, so both pay the same
child start-up. A and B alternate (ABBA) in one process, each repetition from scratch into fresh folders.
Reported: wall time for the pair and the tokens/s it gives, the ratio B/A per repetition, and the in-run
tokens/s each run logs (its training steps only: no start-up, final eval or save).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Spread, begin, finish, interleave, paired_ratios, parse_args

NAME, TITLE = "bench_jobs", "Training runs at once vs one after another (bench_jobs)"
SIZES = {"real": {"preset": "tiny", "steps": 30, "reps": 3},
         "quick": {"preset": "micro", "steps": 3, "reps": 1}}
VARIANTS = (("uniform", 1.0, 1.0), ("cosine", 1.5, 0.5))


def configs(preset: str, steps: int, root: Path, threads: int) -> list:
    from interp.widths import WidthSpec
    from interp.training import TrainConfig

    return [TrainConfig.from_preset(preset, steps=steps, seed=0, width=WidthSpec(schedule=s, start=a, end=b),
                                    dtype="fp32", threads=threads, warmup_steps=steps // 5, eval_interval=10**6,
                                    eval_batches=1, ckpt_interval=10**6, log_interval=max(1, steps // 4),
                                    progress=False,
                                    out_dir=str(root / f"{s}-{a}-{b}"))
            for s, a, b in VARIANTS]


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    from interp.data import prepare_tokens
    from interp.jobs.runs import train_in_processes

    args = parse_args(NAME, __doc__.splitlines()[0], argv)
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="interp-bench-jobs-", dir="/tmp"))
    in_run: dict[str, list[float]] = {"one after another": [], "at once": []}
    try:
        first = configs(size["preset"], size["steps"], work, 0)[0]
        data = prepare_tokens(first.source, first.tokenizer, first.vocab_size, first.val_fraction)  # cached once
        counter = iter(range(10**6))

        def pair(name: str, jobs: int) -> None:
            root = work / f"{next(counter)}"
            runs = configs(size["preset"], size["steps"], root, max(1, args.threads // jobs))
            outcomes = train_in_processes(runs, jobs, data)
            if any(o is None or o.result is None or o.result.get("status") != "done" for o in outcomes):
                raise RuntimeError(f"a benchmark run failed: {[o and o.error for o in outcomes]}")
            in_run[name] += [o.result["tokens_per_s"] for o in outcomes]
            shutil.rmtree(root)

        times = interleave({"one after another": lambda: pair("one after another", 1),
                            "at once": lambda: pair("at once", 2)}, reps=size["reps"], warmup=0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    tokens = 2 * size["steps"] * first.batch_size * first.n_ctx
    report.note(f"Shape: preset `{size['preset']}` (d_model {first.d_model}, {first.n_layers} layers, d_ff "
                f"{first.d_ff}, batch {first.batch_size} x {first.n_ctx}), fp32, {size['steps']} steps per run, "
                f"2 runs per pair ({tokens:,} tokens), {size['reps']} repetitions in ABBA order, no warm-up round; "
                f"{args.threads} threads in all: A gives each run {args.threads}, B {max(1, args.threads // 2)} "
                f"each; {cores} logical CPUs. Cells: median [IQR].")
    report.section("Two runs: one after another (jobs=1) vs at once (jobs=2)")
    report.table([{"variant": name, "wall s per pair": Spread.of(ts).fmt(".1f"),
                   "tokens/s (pair, wall)": Spread.of([tokens / t for t in ts]).fmt(",.0f"),
                   "in-run tokens/s per run": Spread.of(in_run[name]).fmt(",.0f")} for name, ts in times.items()])
    ratio = Spread.of(paired_ratios(times["one after another"], times["at once"]))
    report.note(f"Throughput at once / one after another (paired by repetition, wall time incl. start-up, final "
                f"eval and save): {ratio.fmt('.3f')}.")
    steady = 2 * Spread.of(in_run["at once"]).median / Spread.of(in_run["one after another"]).median
    report.note(f"Steady state (training steps only, from the in-run medians): {steady:.3f}x; the rest of the "
                "wall-time gain is lost to the start-up, final eval and save each run pays whichever way it runs.")
    report.check("at once faster than one after another", ratio.fmt(".3f"), "> 1 (else keep jobs=1)",
                 ratio.median > 1)
    return finish(report, args.write)


if __name__ == "__main__":
    main()
