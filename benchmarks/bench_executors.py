"""The executors of interp.jobs: `interp batch --jobs 2` vs `--jobs 1`, the merge of 1,000 parts, Slurm's per-task
overhead.

(A) --jobs 1: the batch in one process with all the cores' threads; (B) --jobs 2: two spawned tasks with one
thread each, each taking every other checkpoint (into fresh tables, ABBA order); both as a user runs them (`python
-m interp.cli batch`, a fresh process each) and through interp.probes.batch.run_batch in this process. Then one
checkpoint probed here with 1 thread and with all: the thread scaling that bounds what two tasks can gain. Checkpoints: our TaperedLM at a small shape, different seeds, a word-level tokenizer (the
zoo of tests/jobs). Then the merge of 1,000 parts of one checkpoint's rows (interp.probes.batch.merge_parts), and,
where a real single-node Slurm can run (tests/slurm.py: root, Debian's slurm-wlm), the time from submitting a
one-task array to its first row (its journal) against the same target probed in this process; and the same for a
training run (`interp experiment groups` of `micro`, one run: one array task) against that run trained in this
process through the same Job (interp.jobs.training). `--slurm-only`: only that training row (with --quick: a shorter
run; the test-mode run).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make `benchmarks` and `interp` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import Spread, begin, finish, interleave, paired_ratios, parse_args

REPO = Path(__file__).resolve().parent.parent
NAME, TITLE = "bench_executors", "Executors: local --jobs 2 vs 1, merging 1,000 parts, Slurm overhead (bench_executors)"
SIZES = {"real": {"checkpoints": 8, "tokens": 131072, "reps": 2, "parts": 1000, "slurm": True},
         "quick": {"checkpoints": 2, "tokens": 128, "reps": 1, "parts": 50, "slurm": False}}
SHAPE = {"d_model": 128, "n_heads": 4, "d_mlp": [512, 384, 256, 128], "n_ctx": 128}


def make_zoo(root: Path, n: int) -> tuple[Path, Path]:
    """n checkpoints of SHAPE (seeds 0..n-1) with a word-level tokenizer, and a text: tests/jobs/zoo.py's, larger."""
    import random

    from interp._util.io import write_text_atomic
    from interp.model import ModelConfig, TaperedLM
    from tests.factories import WORDS, tiny_checkpoint, word_tokenizer_json

    rng = random.Random(0)
    text = root / "text.txt"
    write_text_atomic(text, " ".join(rng.choice(WORDS) for _ in range(300_000)))
    tok = word_tokenizer_json(root / "tok" / "tokenizer.json", WORDS)
    import torch

    for i in range(n):
        torch.manual_seed(i)
        model = TaperedLM(ModelConfig(vocab_size=64, n_layers=len(SHAPE["d_mlp"]), **SHAPE)).eval()
        tiny_checkpoint(root / "zoo" / f"ck{i}", model, tokenizer=tok)
    return root / "zoo", text


def main(argv: Sequence[str] | None = None, command: str | None = None) -> str:
    from interp.jobs.executors import ExecutorConfig
    from interp.probes.batch import BatchConfig, merge_parts, run_batch

    args = parse_args(NAME, __doc__.splitlines()[0], argv, _arguments)
    size, report = begin(args, SIZES, NAME, TITLE, argv, command)
    if args.slurm_only:
        if args.write:   # the section holds every row: writing the Slurm rows alone would drop the others
            raise SystemExit("--slurm-only does not --write: run the whole benchmark to rewrite its section")
        work = Path(tempfile.mkdtemp(prefix="interp-bench-executors-", dir="/tmp"))
        try:
            _slurm(report, work, None, None, None, training_steps=8 if args.quick else 200)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return finish(report, args.write)
    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="interp-bench-executors-", dir="/tmp"))
    counter = iter(range(10**6))
    try:
        folder, text = make_zoo(work, size["checkpoints"])

        def config(jobs: int, executor: str = "local", paths: list[str] | None = None, **ex) -> BatchConfig:
            return BatchConfig.build(paths=paths or [str(folder)], out=str(work / f"t{next(counter)}.parquet"),
                                     text=str(text), tokens=size["tokens"], seq_len=128, batch_size=8,
                                     progress=False, threads=args.threads if jobs == 1 else 0,
                                     execution=ExecutorConfig(executor=executor, jobs=jobs, **ex))

        def batch(jobs: int) -> None:
            result = run_batch(config(jobs))
            if not result.ok or len(result.analysed) != size["checkpoints"]:
                raise RuntimeError(f"a benchmark batch failed: {result.failed} {result.jobs}")

        def command(jobs: int) -> None:
            """`interp batch` as a user types it: a fresh process that imports what it needs, then its tasks."""
            flags = ["--threads", str(args.threads)] if jobs == 1 else ["--jobs", str(jobs)]
            subprocess.run([sys.executable, "-m", "interp.cli", "batch", str(folder), "--text", str(text),
                            "--tokens", str(size["tokens"]), "--seq-len", "128", "--batch-size", "8",
                            "--no-progress", "--out", str(work / f"t{next(counter)}.parquet"), *flags],
                           check=True, capture_output=True, cwd=REPO)

        cli = interleave({"--jobs 1": lambda: command(1), "--jobs 2": lambda: command(2)}, reps=size["reps"],
                         warmup=0)
        times = interleave({"--jobs 1": lambda: batch(1), "--jobs 2": lambda: batch(2)}, reps=size["reps"],
                           warmup=0)
        report.note(f"Checkpoints: {size['checkpoints']} TaperedLMs (d_model {SHAPE['d_model']}, d_ff "
                    f"{SHAPE['d_mlp']}, vocab 64), probed on {size['tokens']:,} tokens each (fp32 weights and metric "
                    "math, seq_len 128, batch 8, "
                    f"every default metric); {args.threads} threads for --jobs 1, 1 thread per task for --jobs 2; "
                    f"{cores} logical CPUs; {size['reps']} repetitions in ABBA order, fresh tables. Cells: median "
                    "[IQR].")
        report.section("One batch: --jobs 1 vs --jobs 2 (local executor)")
        rows = []
        for where, measured in (("`interp batch` (a fresh command)", cli), ("run_batch in this process", times)):
            rows += [{"how": where, "variant": name, "wall s": Spread.of(ts).fmt(".1f"),
                      "checkpoints/min": Spread.of([60 * size["checkpoints"] / t for t in ts]).fmt(".1f")}
                     for name, ts in measured.items()]
        report.table(rows)
        ratio = Spread.of(paired_ratios(cli["--jobs 1"], cli["--jobs 2"]))
        in_process = Spread.of(paired_ratios(times["--jobs 1"], times["--jobs 2"]))
        report.note(f"Speed-up --jobs 2 / --jobs 1, paired by repetition, wall time incl. start-up and the merge: "
                    f"{ratio.fmt('.2f')} for the command (each variant a fresh process: --jobs 1 imports torch, "
                    f"transformer-lens and the rest once in its one process, --jobs 2 in each of its two tasks, at "
                    f"once); {in_process.fmt('.2f')} through run_batch in a process that has imported them already "
                    "(a notebook), where only the tasks pay them.")
        # the ceiling without start-up: one target probed in this process with 1 thread and with all of them
        def one(threads: int) -> None:
            run_batch(BatchConfig.build(paths=[str(folder / "ck0")], out=str(work / f"t{next(counter)}.parquet"),
                                        text=str(text), tokens=size["tokens"], seq_len=128, batch_size=8,
                                        progress=False, threads=threads))

        single = interleave({"1 thread": lambda: one(1), f"{args.threads} threads": lambda: one(args.threads)},
                            reps=size["reps"], warmup=0)
        scaling = Spread.of(paired_ratios(single["1 thread"], single[f"{args.threads} threads"]))
        ceiling = min(cores, 2) / scaling.median
        report.table([{"one checkpoint in this process": name, "wall s": Spread.of(ts).fmt(".2f")}
                      for name, ts in single.items()])
        report.note(f"{args.threads} threads run one probe {scaling.fmt('.2f')}x as fast as 1 thread, so two "
                    f"one-thread tasks can beat one {args.threads}-thread process by at most {min(cores, 2)} / "
                    f"{scaling.median:.2f} = {ceiling:.2f}x, before any start-up (each task is a fresh python "
                    "that imports torch and loads its models).")
        report.check("interp batch --jobs 2 on 2 cores", ratio.fmt(".2f"), ">= 1.8", ratio.median >= 1.8 or cores < 2)
        report.check("run_batch --jobs 2 on 2 cores (imports paid)", in_process.fmt(".2f"), ">= 1.8",
                     in_process.median >= 1.8 or cores < 2)

        # ---------------------------------------------------------------- merging many parts
        from interp.jobs.parts import parts_dir, write_part

        one = work / "one.parquet"
        run_batch(BatchConfig.build(paths=[str(folder / "ck0")], out=str(one), text=str(text), tokens=128,
                                    seq_len=128, batch_size=8, progress=False))
        import pandas as pd

        rows = pd.read_parquet(one)
        many = work / "many.parquet"
        parts = parts_dir(many)
        parts.mkdir()
        for i in range(size["parts"]):
            write_part(rows.assign(key=f"{i:016x}-x", path=f"/zoo/ck{i}"), parts / f"{i:016x}-x.parquet")
        merges = []
        for _ in range(3):
            t0 = time.perf_counter()
            merged = merge_parts(many)
            merges.append(time.perf_counter() - t0)
        report.section(f"Merging {size['parts']:,} parts")
        report.table([{"parts": size["parts"], "rows": len(merged), "rows per part": len(rows),
                       "merge s": Spread.of(merges).fmt(".2f")}])
        report.check(f"merge of {size['parts']:,} parts", f"{Spread.of(merges).median:.2f} s", "< 5 s",
                     Spread.of(merges).median < 5)

        # ---------------------------------------------------------------- Slurm: submission to first row
        if size["slurm"]:
            _slurm(report, work, folder, text, config)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return finish(report, args.write)


def _arguments(parser) -> None:
    parser.add_argument("--slurm-only", action="store_true", help="only the Slurm training row (a measurement, never --write)")


def _slurm(report, work: Path, folder: Path | None, text: Path | None, config, training_steps: int = 200) -> None:
    from interp.jobs.parts import read_journal
    from interp.probes.batch import run_batch
    from tests.slurm import SlurmUnavailable, running_cluster

    try:
        with running_cluster() as cluster:
            if folder is not None:
                _slurm_batch(report, cluster, folder, config, read_journal, run_batch)
            _slurm_training(report, cluster, work, training_steps)
    except SlurmUnavailable as err:
        report.note(f"Slurm could not run here ({err}): no overhead measured.")


def _slurm_batch(report, cluster, folder: Path, config, read_journal, run_batch) -> None:
    target = str(folder / "ck0")
    report.section("Slurm: one array task, submission to its first row")
    local = []
    for _ in range(2):
        t0 = time.perf_counter()
        run_batch(config(1, paths=[target]))
        local.append(time.perf_counter() - t0)
    overhead, total = [], []
    for _ in range(2):
        cfg = config(1, "slurm", paths=[target], partition=cluster.partition, time_min=10)
        t0, wall0 = time.perf_counter(), time.time()
        run_batch(cfg)
        total.append(time.perf_counter() - t0)
        first = min(r["time"] for r in read_journal(cfg.out).values() if r.get("state") == "done")
        overhead.append(first - wall0 - Spread.of(local).median)
    report.table([{"in this process (s)": Spread.of(local).fmt(".1f"),
                   "slurm: submission to merged table (s)": Spread.of(total).fmt(".1f"),
                   "slurm per-task overhead (s)": Spread.of(overhead).fmt(".1f")}])
    report.note(f"A single-node Slurm 22.05 (Debian's slurm-wlm, tests/slurm.py; started in "
                f"{cluster.start_seconds:.0f} s): the overhead is the time from submission to the task's "
                "first finished row minus the same probe in this process: sbatch, scheduling, a fresh "
                "python importing torch, and submitit's pickles.")


def _slurm_training(report, cluster, work: Path, steps: int) -> None:
    """One training run (groups, micro, `steps` steps) as one Slurm array task against the same run trained in this
    process through the same Job: the overhead is the time from submission to the run's journal record of `done`,
    minus the run in this process (sbatch, scheduling, a fresh python importing torch, submitit's pickles, loading
    the token files from the cache the submitting process filled)."""
    from interp.jobs.executors import ExecutorConfig
    from interp.jobs.parts import read_journal
    from interp.jobs.training import jobs_out, train_experiment
    from interp.training.experiments import Experiment, variant
    from interp.widths import WidthSpec
    from tests.factories import write_corpus

    corpus = write_corpus(work / "corpus", n_docs=24, sentences=40, sentence_len=8)
    overrides = {"source": str(corpus), "val_fraction": 0.25, "n_layers": 3, "warmup_steps": 1, "eval_batches": 1,
                 "threads": 1, "progress": False, "steps": steps}
    counter = iter(range(10**6))

    def experiment() -> Experiment:
        return Experiment("bench", "micro", [variant(WidthSpec())], [0], root=work / f"r{next(counter)}",
                          overrides=overrides)

    report.section(f"Slurm: one training run as one array task ({steps} steps of micro)")
    local, total, overhead = [], [], []
    for _ in range(2):
        t0 = time.perf_counter()
        assert train_experiment(experiment(), ExecutorConfig(), log=None).exit_code == 0
        local.append(time.perf_counter() - t0)
    for _ in range(2):
        exp = experiment()
        ex = ExecutorConfig(executor="slurm", partition=cluster.partition, time_min=10)
        t0, wall0 = time.perf_counter(), time.time()
        assert train_experiment(exp, ex, log=None).exit_code == 0
        total.append(time.perf_counter() - t0)
        ended = max(r["time"] for r in read_journal(jobs_out(exp)).values() if r.get("state") == "done")
        overhead.append(ended - wall0 - Spread.of(local).median)
    report.table([{"steps": steps, "in this process (s)": Spread.of(local).fmt(".1f"),
                   "slurm: submission to report (s)": Spread.of(total).fmt(".1f"),
                   "slurm per-task overhead (s)": Spread.of(overhead).fmt(".1f")}])
    report.note("The run trained in this process and as a one-task Slurm array through the same Job "
                "(interp.jobs.training.train_experiment, --executor local vs slurm); the overhead is the time from "
                "submission to the task's journal record of the finished run, minus the run here. It is paid once per "
                "run, so against a 440m run of ~18 h it is nothing; it bounds how short a run is worth a task.")


if __name__ == "__main__":
    main()
