"""Plumbing shared by the benchmark scripts: interleaved timing, robust summaries, memory, reports.

Why each piece exists:
- These machines are shared and noisy, so a comparison is never "run A, then run B": `interleave`
  alternates the variants repetition by repetition (ABBA order, so a slow drift in load hurts both
  alike), and `Spread` reports the median with quartiles and extremes, never a mean.
- A number without its load is unreadable: `Report` puts the load average before and after, the
  torch version and thread count, the CPU and the git commit above every table, and flags a run
  whose 1-minute load reached CONTENTION_LOAD.
- Peak memory of torch code is invisible to tracemalloc (tensor storage bypasses Python's
  allocator), so `rss()` reads VmRSS / VmHWM from /proc/self/status, and `reset_peak_rss()` writes 5
  to /proc/self/clear_refs (Linux >= 4.0) so a peak measured after a model load excludes the load.
- RESULTS.md is rewritten section by section (`update_results`), so one benchmark can be rerun
  without touching the others' numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interp._util.io import file_lock, write_text_atomic

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
RESULTS_FILE = BENCH_DIR / "RESULTS.md"
CONTENTION_LOAD = 3.0          # 1-minute load average from which numbers are marked "under contention"
DEFAULT_THREADS = 2            # the CPU machines this project targets have 2 cores
RESULT_PREFIX = "BENCH_RESULT "  # a worker subprocess prints its JSON result on one line after this
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

for _key, _value in OFFLINE_ENV.items():  # nothing a benchmark does may wait on a hub
    os.environ.setdefault(_key, _value)

RESULTS_HEADER = """# Benchmark results

Each section below is written by one script in `benchmarks/` (`python benchmarks/run_all.py --write`
rewrites all of them, about 25 minutes on 2 quiet cores; `python benchmarks/bench_X.py --write` only
its own; without `--write` they only print). Every section records the command, the date, the load
average before and after, the torch version and the thread count.
Ratios come from variants run side by side in one process (interleaved repetitions, ABBA order);
each cell shows the median and, in brackets, the interquartile range over repetitions.
Numbers taken while the 1-minute load average was >= {load} are marked "under contention".
""".format(load=CONTENTION_LOAD)


# ----------------------------------------------------------------------------------- statistics

@dataclass(frozen=True)
class Spread:
    """Median, quartiles (inclusive method) and extremes of repeated measurements."""

    median: float
    q25: float
    q75: float
    lo: float
    hi: float
    n: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        values = [float(v) for v in values]
        if not values:
            raise ValueError("Spread.of: no values; run at least one repetition")
        if len(values) == 1:
            v = values[0]
            return cls(v, v, v, v, v, 1)
        q25, median, q75 = statistics.quantiles(values, n=4, method="inclusive")
        return cls(median, q25, q75, min(values), max(values), len(values))

    def fmt(self, spec: str = ".3f") -> str:
        """'1.012 [0.998, 1.020]': median [interquartile range] (a comma, so negative bounds read clearly)."""
        return f"{self.median:{spec}} [{self.q25:{spec}}, {self.q75:{spec}}]"


def paired_ratios(numerator: Sequence[float], denominator: Sequence[float]) -> list[float]:
    """Ratio of each repetition's pair (same position in both lists = measured back to back)."""
    if len(numerator) != len(denominator):
        raise ValueError(f"paired_ratios: {len(numerator)} vs {len(denominator)} values; pairs must match")
    return [a / b for a, b in zip(numerator, denominator, strict=True)]


def interleave(variants: Mapping[str, Callable[[], Any]], reps: int, warmup: int = 1) -> dict[str, list[float]]:
    """Wall seconds of each variant per repetition, the variants run alternately in ABBA order.

    Repetition r rotates the order by r and reverses it every other round, so with two variants the
    sequence is AB BA BA AB: neither always runs first (warm caches) nor always after the other.
    `warmup` untimed rounds come first (allocator, lazy init, first-call dispatch).
    """
    if reps < 1 or warmup < 0:
        raise ValueError(f"interleave: need reps >= 1 and warmup >= 0, got reps={reps}, warmup={warmup}")
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for order in interleave_orders(names, reps):
        for name in order:
            start = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - start)
    return times


def interleave_batches(variants: Mapping[str, Callable[[Any], Any]], batches: Sequence[Any]) -> dict[str, list[float]]:
    """Wall seconds of each variant on each batch: every batch runs every variant back to back, in the ABBA order
    of interleave_orders (one untimed warm-up call each first, on a slice of the first batch). Call under no_grad."""
    for run in variants.values():
        run(batches[0][:1, :16])
    times: dict[str, list[float]] = {name: [] for name in variants}
    for batch, order in zip(batches, interleave_orders(list(variants), len(batches)), strict=True):
        for name in order:
            start = time.perf_counter()
            variants[name](batch)
            times[name].append(time.perf_counter() - start)
    return times


def interleave_orders(names: Sequence[str], reps: int) -> list[list[str]]:
    """The per-repetition orders `interleave` uses (exposed so callers that time inside a variant agree)."""
    names = list(names)
    orders = []
    for r in range(reps):
        k = r % len(names)
        order = names[k:] + names[:k]
        orders.append(order[::-1] if (r // len(names)) % 2 else order)
    return orders


# ------------------------------------------------------------------------------------------ memory

def rss() -> dict[str, int]:
    """Resident set size now and its peak ('high water mark') in bytes, from /proc/self/status.

    Where /proc is missing (macOS), both fall back to ru_maxrss, which only knows the peak. The current RSS is
    read from /proc/self/smaps_rollup where there is one: since Linux 6.2 the status file's VmRSS is a per-CPU
    counter read approximately, and was seen not to move after a 64 MiB allocation in a busy multi-threaded process.
    """
    try:
        fields = {}
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(("VmRSS:", "VmHWM:")):
                    key, value = line.split(":", 1)
                    fields[key] = int(value.split()[0]) * 1024
        try:
            with open("/proc/self/smaps_rollup") as f:
                fields["VmRSS"] = next(int(line.split()[1]) * 1024 for line in f if line.startswith("Rss:"))
        except (OSError, StopIteration):
            pass
        return {"rss": fields["VmRSS"], "peak": max(fields["VmHWM"], fields["VmRSS"])}
    except (OSError, KeyError):
        scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
        return {"rss": peak, "peak": peak}


def reset_peak_rss() -> bool:
    """Set VmHWM back to the current RSS (Linux clear_refs '5'); False where the kernel does not allow it."""
    try:
        with open("/proc/self/clear_refs", "w") as f:  # not-safe-open: a kernel control file, never a link
            f.write("5")
        return True
    except OSError:
        return False


def mem_available() -> int | None:
    """MemAvailable of the machine in bytes (None when unknown)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


MIB = 2**20
GIB = 2**30


# ----------------------------------------------------------------------------------- subprocesses

def run_worker(script: Path, args: Sequence[str], timeout: float, env: Mapping[str, str] | None = None) -> dict:
    """Run `python script *args` in a fresh process and return the JSON it printed after RESULT_PREFIX.

    Failures come back as {"error": "..."} (a killed worker usually means out of memory), so one
    failing measurement becomes one row saying so instead of ending the benchmark. env: the child's
    environment (default this process's); the offline variables are always added.
    """
    cmd = [sys.executable, str(script), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT,
                              env={**(os.environ if env is None else env), **OFFLINE_ENV})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    if proc.returncode < 0:
        why = f"killed by signal {-proc.returncode}" + (" (out of memory?)" if proc.returncode == -9 else "")
    else:
        why = f"exit status {proc.returncode}"
    tail = (proc.stderr.strip().splitlines() or ["no stderr"])[-1]
    return {"error": f"{why}: {tail[:300]}"}


def emit_result(result: dict) -> None:
    """What a worker subprocess prints last: one line that run_worker parses."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# ----------------------------------------------------------------------------------------- reports

def cell(value: Any) -> str:
    """Table cell: ints with thousands separators, floats to 3 significant digits (no exponent below 1e6)."""
    if isinstance(value, bool) or value is None:
        return "" if value is None else str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """A GitHub-markdown table; columns default to the keys of the first row, in order."""
    if not rows:
        return "(no rows)"
    columns = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cell(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def git_short() -> str:
    from interp._util.provenance import git_commit

    commit = git_commit()
    return commit if commit == "unknown" else commit[:12] + ("+dirty" if commit.endswith("+dirty") else "")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


class Report:
    """One benchmark's markdown section: how and where it ran, then its tables, notes and checks."""

    def __init__(self, name: str, title: str, command: str, quick: bool):
        self.name, self.title, self.command, self.quick = name, title, command, quick
        self.started = datetime.now(UTC)
        self.start = time.perf_counter()
        self.load_before = os.getloadavg()
        self.parts: list[str] = []
        self.checks: list[dict[str, str]] = []
        print(f"[{name}] start, load average {self._load(self.load_before)}", file=sys.stderr, flush=True)

    @staticmethod
    def _load(load: Sequence[float]) -> str:
        return "/".join(f"{x:.2f}" for x in load)

    def section(self, heading: str) -> None:
        self.parts.append(f"### {heading}")
        print(f"[{self.name}] {heading}", file=sys.stderr, flush=True)

    def table(self, rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None = None) -> None:
        self.parts.append(markdown_table(rows, columns))

    def note(self, text: str) -> None:
        self.parts.append(text)

    def check(self, name: str, measured: str, requirement: str, ok: bool | None) -> None:
        """A requirement from the issue; ok=None when it could not be measured."""
        status = "n/a" if ok is None else ("PASS" if ok else "FAIL")
        if self.quick and ok is not None:
            status += " (quick sizes: not meaningful)"
        self.checks.append({"check": name, "measured": measured, "requirement": requirement, "status": status})

    def render(self) -> str:
        import torch

        load_after = os.getloadavg()
        peak_load = max(self.load_before[0], load_after[0])
        wall = time.perf_counter() - self.start
        head = [f"## {self.title}", "",
                f"- command: `{self.command}`" + ("  (**--quick: toy sizes, numbers not meaningful**)"
                                                  if self.quick else ""),
                f"- date: {self.started:%Y-%m-%d %H:%M} UTC; wall time {wall:.0f} s",
                f"- load average (1/5/15 min): before {self._load(self.load_before)}, after {self._load(load_after)}"
                f" on {os.cpu_count()} logical CPUs",
                f"- torch {torch.__version__}, {torch.get_num_threads()} threads; python "
                f"{platform.python_version()}; CPU {cpu_name()}; git {git_short()}"]
        if torch.cuda.is_available():
            head.append(f"- GPU {torch.cuda.get_device_name()} (CUDA {torch.version.cuda}); on a GPU the CPU "
                        "load does not bound the numbers")
        if peak_load >= CONTENTION_LOAD:
            head.append(f"- **under contention (load {peak_load:.1f})**: other processes shared the CPUs; "
                        "ratios from interleaved runs stay usable, absolute rates are low")
        body = head + [""] + [p + "\n" for p in self.parts]
        if self.checks:
            body += ["### Requirements", markdown_table(self.checks), ""]
        return "\n".join(body).rstrip() + "\n"


# ---------------------------------------------------------------------------------- command line

def parse_args(name: str, description: str, argv: Sequence[str] | None,
               add_arguments: Callable[[argparse.ArgumentParser], None] | None = None) -> argparse.Namespace:
    """Flags every benchmark has (--quick, --threads, --write) plus the script's own."""
    parser = argparse.ArgumentParser(prog=f"benchmarks/{name}.py", description=description)
    parser.add_argument("--quick", action="store_true", help="toy sizes that finish in seconds (smoke test)")
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS, help="torch CPU threads (default 2)")
    parser.add_argument("--write", action="store_true", help=f"also rewrite this section of {RESULTS_FILE.name}")
    if add_arguments:
        add_arguments(parser)
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    return args


def command_line(name: str, argv: Sequence[str] | None) -> str:
    argv = list(sys.argv[1:] if argv is None else argv)
    return " ".join([f"python benchmarks/{name}.py", *argv]).strip()


def set_threads(n: int) -> int:
    import torch

    torch.set_num_threads(n)
    return torch.get_num_threads()


def begin(args: argparse.Namespace, sizes: Mapping[str, Mapping[str, Any]], name: str, title: str,
          argv: Sequence[str] | None, command: str | None = None,
          script: str | None = None) -> tuple[dict[str, Any], Report]:
    """What every benchmark's main() does once its flags are parsed: set torch's threads, take the size
    table of --quick or the real run (a copy: the script may adjust it) and open the Report, headed by
    `command` (run_all's) or the command line that reruns the script (`script`, default `name`)."""
    set_threads(args.threads)
    size = dict(sizes["quick" if args.quick else "real"])
    return size, Report(name, title, command or command_line(script or name, argv), args.quick)


def finish(report: Report, write: bool) -> str:
    """Print the section and, with --write, store it in RESULTS.md (never for --quick numbers)."""
    text = report.render()
    print(text, flush=True)
    if write:
        if report.quick:
            print(f"[{report.name}] --quick numbers are not written to {RESULTS_FILE.name}", file=sys.stderr)
        else:
            update_results({report.name: text})
    return text


def update_results(sections: Mapping[str, str], path: Path = RESULTS_FILE) -> Path:
    """Replace (or append) each named section between its <!-- name:begin/end --> markers; atomic write.

    An advisory lock (Unix) keeps two benchmarks finishing at once from losing each other's section.
    """
    from interp._util.paths import cache_dir

    with file_lock(cache_dir("locks") / f"{path.name}.lock"):  # outside the tree: nothing to ignore
        return _update_results(sections, path)


def _update_results(sections: Mapping[str, str], path: Path) -> Path:
    text = path.read_text() if path.is_file() else RESULTS_HEADER
    for name, body in sections.items():
        begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
        block = f"{begin}\n{body.strip()}\n{end}"
        pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.DOTALL)
        if pattern.search(text):
            text = pattern.sub(lambda _: block, text, count=1)
        else:
            text = text.rstrip() + "\n\n" + block + "\n"
    write_text_atomic(path, text)
    return path
