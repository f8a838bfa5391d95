"""Run every benchmark (or --only some), print their sections, and with --write store them in RESULTS.md.

    python benchmarks/run_all.py                 # real sizes, print only
    python benchmarks/run_all.py --write         # real sizes, rewrite the sections of RESULTS.md
    python benchmarks/run_all.py --quick         # toy sizes: checks the scripts run (never written)
    python benchmarks/run_all.py --only hooks,train --write

Each benchmark's section is written as soon as it finishes, so an interrupted run keeps what it
measured. The real sizes take about 25 minutes on 2 quiet cores (the total is printed at the end).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import DEFAULT_THREADS, RESULTS_FILE, update_results

BENCHMARKS = ("hooks", "train", "probes", "evals", "tokenize", "jobs", "executors", "cpu_kernels", "hub")  # the default set, cheapest first: a broken setup fails fast
# bench_tokenize runs its memory part at 32 / 128 MB here; `python benchmarks/bench_tokenize.py --full` at 0.25 / 1.5 GB
OPTIONAL = ("mixers", "gpu_scale")  # only with --only: bench_mixers (every token mixer) takes ~10 min more on its
# own; bench_gpu_scale needs CUDA (without it, it prints one line and writes nothing)


def main(argv: Sequence[str] | None = None) -> dict[str, str]:
    parser = argparse.ArgumentParser(prog="benchmarks/run_all.py", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes (seconds each); nothing is written")
    parser.add_argument("--write", action="store_true", help=f"rewrite each benchmark's section of {RESULTS_FILE.name}")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="torch CPU threads (default 2)")
    parser.add_argument("--only", default=",".join(BENCHMARKS),
                        help=f"comma-separated subset of {','.join(BENCHMARKS + OPTIONAL)} (default: "
                             f"{','.join(BENCHMARKS)})")
    args = parser.parse_args(list(argv) if argv is not None else None)
    chosen = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(chosen) - set(BENCHMARKS + OPTIONAL))
    if unknown:
        parser.error(f"--only: unknown benchmark(s) {unknown}; choose from {','.join(BENCHMARKS + OPTIONAL)}")
    command = " ".join(["python benchmarks/run_all.py", *(argv if argv is not None else sys.argv[1:])])
    sections: dict[str, str] = {}
    start = time.perf_counter()
    for name in chosen:
        module = importlib.import_module(f"benchmarks.bench_{name}")
        bench_argv = ["--threads", str(args.threads)] + (["--quick"] if args.quick else [])
        t0 = time.perf_counter()
        sections[module.NAME] = module.main(bench_argv, command=command)
        print(f"[run_all] bench_{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
        if args.write and not args.quick and sections[module.NAME]:  # "": skipped (bench_gpu_scale without CUDA)
            update_results({module.NAME: sections[module.NAME]})
    total = time.perf_counter() - start
    print(f"[run_all] {len(chosen)} benchmark(s) in {total:.0f} s ({total / 60:.1f} min)"
          + (f"; sections written to {RESULTS_FILE}" if args.write and not args.quick else ""), flush=True)
    return sections


if __name__ == "__main__":
    main()
