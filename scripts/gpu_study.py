"""The GPU study of issue #35 (analyses/gpu_study.py defines its runs): plan, prepare, run until a time limit.

    python scripts/gpu_study.py --prepare           # here, once: the token files the device call carries
    python scripts/gpu_study.py --dry-run           # the plan: runs, tokens, seconds, what fits in --budget-s
    bash scripts/gpu_study.sh                       # on the device (docs/gpu-study.md): calls this with --budget-s
    python scripts/gpu_study.py --smoke --figures-dir D --root R --data D2 --out O   # the whole path on a CPU

Stages, in priority order (--stages): groups (tiny-gpu: uniform + wider-early/-middle/-late, 5 seeds), schedules
(the same experiment's cosine/linear cells, paired with the same uniform runs), trainer-check (the 440m preset
through `interp train` under torchrun: FSDP2 + compile, bf16; killed after a save, resumed, compared with an
uninterrupted run; bench_gpu_scale's fsdp+compile beside it), wide (wide-gpu, ~42M, uniform vs cosine 1.5->0.5).
Runs go through interp.training's experiment runner (run_experiment: finished or recorded runs are skipped) one
seed at a time, `jobs` runs at once (train_in_processes), jobs measured first by a short calibration (1, 2, 4 runs
at once, aggregate tokens/s). A seed is started only when its estimate fits in the time left; at the deadline the
runs in flight get SIGTERM (lost: runs/ does not come back). After every seed the records (config.json,
result.json, log.jsonl per run) are written under figures/records/<experiment>/ and packed into
OUT/records.tar.gz, so a call cut off by its limit returns every run it finished.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from analyses import gpu_study as study  # noqa: E402
from analyses.group_ablation import RECORDS_DIR  # noqa: E402
from interp._util.io import atomic_write, write_json_atomic, write_text_atomic  # noqa: E402

STAGES = ("groups", "schedules", "trainer-check", "wide")
DATA_DIR = ".cache/gpu_study"          # gitignored (.cache/): carried to the device
ENGLISH = "english-bpe8192"            # DATA_DIR/ENGLISH/: train.bin/.json, val.bin/.json, data.json
CHECK_TOKENS = "check-440m"            # DATA_DIR/CHECK_TOKENS/: an `interp data tokenize` folder, vocab 32768
# Assumed aggregate tokens/s per shape, for a --dry-run before any measurement (override with --tokens-per-s;
# on the device the calibration replaces the tiny one). 440m: bench_gpu_scale's fsdp+compile on the H200.
ASSUMED = {"tiny": 1.0e6, "wide": 3.0e5, "440m": 1.4e5}
RUN_OVERHEAD_S = 12.0                  # per wave: process spawn, CUDA init, final evaluation and save (assumed)
CHECK_FIXED_S = 150.0                  # trainer-check: 3 starts + compiles + saves + the benchmark (assumed)


# ------------------------------------------------------------------------------------------------ data

def prepare(data_dir: Path, source: str = "english", vocab: int = 8192, check: bool = True) -> dict:
    """Tokenize `source` with its own BPE (as `interp train --source english` does: prepare_tokens, cached) and
    copy the token files + their metadata to data_dir/ENGLISH/; with check, also the 440m check's token folder."""
    from interp.data import prepare_tokens

    data = prepare_tokens(source, "bpe", vocab, 0.05)
    meta = {k: v for k, v in data.meta.items() if k != "path"}
    folder = Path(data.meta["path"])
    files = {f"{s}{suffix}": (lambda p, src=folder / f"{s}{suffix}": shutil.copyfile(src, p))
             for s in ("train", "val") for suffix in (".bin", ".json")}
    files["data.json"] = lambda p: p.write_text(json.dumps(meta, indent=2) + "\n")
    atomic_write(data_dir / ENGLISH, files)
    size = sum((data_dir / ENGLISH / n).stat().st_size for n in files)
    print(f"[gpu_study] {data_dir / ENGLISH}: {meta['n_tokens']} tokens, {size / 2**20:.1f} MiB")
    if check:
        prepare_check_tokens(data_dir / CHECK_TOKENS)
    return meta


def prepare_check_tokens(out: Path) -> None:
    """The 440m check's data: the wiki corpus under a 32,768-entry BPE (the preset's vocabulary, so its tokens/s
    compares with bench_gpu_scale's), as an `interp data tokenize` folder (what `interp train --source DIR` reads)."""
    from interp.data import get_tokenizer, load_documents

    tok = get_tokenizer("bpe", vocab_size=32768, source="wiki")
    docs = load_documents("wiki")
    stage = out.parent / f".{out.name}-input"
    lines = "".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in docs)
    atomic_write(stage, {"wiki.jsonl": lambda p: p.write_text(lines)})
    subprocess.run([sys.executable, "-m", "interp.cli", "data", "tokenize", str(stage / "wiki.jsonl"), "--id-field",
                    "id", "--tokenizer", str(tok.path), "--out", str(out), "--workers", "1"], check=True, cwd=REPO)
    shutil.rmtree(stage)


def load_data(data_dir: Path):
    """The TokenData of data_dir/ENGLISH (checked against its metadata: sizes, hashes, ids < vocab)."""
    from interp.data import TokenData
    from interp.data.tokens import load_tokens

    folder = data_dir / ENGLISH
    meta = json.loads((folder / "data.json").read_text())
    arrays = {}
    for split in ("train", "val"):
        expected = {k: meta[k] for k in ("source_hash", "tokenizer_hash", "vocab_size", "val_fraction")}
        arrays[split], _ = load_tokens(folder / f"{split}.bin", {**expected, "split": split},
                                       tokenizer_name=meta["tokenizer"])
    return TokenData(arrays["train"], arrays["val"], {**meta, "path": str(folder)}, meta["vocab_size"])


# ------------------------------------------------------------------------------------------------ plan

@dataclasses.dataclass
class Stage:
    name: str
    runs: int                # still to train (neither done nor recorded)
    total: int
    tokens_per_run: int
    seconds: float           # estimated for the runs still to train
    what: str = ""


def stage_plan(cfg: study.Config, figures_dir: Path, rates: dict[str, float], jobs: dict[str, int],
               stages: tuple[str, ...], check_steps: int) -> list[Stage]:
    """Each stage's runs still to train (a run an earlier stage trains counts there: the shared uniform runs) and
    their estimated seconds: per seed, ceil(runs / jobs) waves of `jobs` runs sharing the aggregate rate."""
    from interp.training.results import finished_dir

    exps = study.experiments(cfg, figures_dir)
    plan, planned = [], set()
    for name in stages:
        if name == "trainer-check":
            done = (figures_dir / RECORDS_DIR / study.CHECK_DIR / "check.json").is_file()
            tokens = check_steps * 8 * 4096
            plan.append(Stage(name, 0 if done else 1, 1, tokens,
                              0.0 if done else 2 * tokens / rates["440m"] + CHECK_FIXED_S,
                              f"440m preset, {check_steps} steps x 8 x 4096, FSDP2 + compile, bf16; killed and resumed"))
            continue
        exp, shape = exps[name], ("wide" if name == "wide" else "tiny")
        configs = exp.configs()
        todo = [(s, c) for v, s, c in configs if c.out_dir not in planned and finished_dir(exp, v, s, c) is None]
        planned |= {c.out_dir for _, c in todo}
        c0 = configs[0][2]
        tokens = c0.steps * c0.batch_size * c0.n_ctx
        k = jobs[shape]
        per_wave = k * tokens / rates[shape] + RUN_OVERHEAD_S       # k runs at once share the aggregate rate
        waves = sum(math.ceil(sum(1 for s, _ in todo if s == seed) / k) for seed in exp.seeds)
        what = (f"{exp.name}: {', '.join(v.name for v in exp.variants)}; seeds {exp.seeds[0]}-{exp.seeds[-1]}; "
                f"{c0.steps} steps x {c0.batch_size} x {c0.n_ctx}, {c0.dtype}; {c0.notes or 'epochs: run --prepare'}")
        plan.append(Stage(name, len(todo), len(configs), tokens, waves * per_wave, what))
    return plan


def print_plan(plan: list[Stage], budget_s: float, rates: dict, jobs: dict, where: str) -> str:
    lines = [f"[gpu_study] plan ({where}; aggregate tokens/s: " + ", ".join(f"{k} {v:,.0f}" for k, v in rates.items())
             + f"; runs at once: {jobs}), budget {budget_s:.0f} s, in priority order:"]
    left = budget_s
    for st in plan:
        fits = st.runs == 0 or st.seconds <= left
        state = ("done" if st.runs == 0 else "fits" if fits else
                 f"does not fit whole: {max(left, 0):.0f} s left; the seeds that fit are trained, a rerun goes on")
        lines.append(f"  {st.name:<14} {st.runs:>3} of {st.total:>3} runs to train, {st.tokens_per_run:>12,} tokens "
                     f"per run, ~{st.seconds:7.0f} s  [{state}]")
        lines.append(f"      {st.what}")
        left -= st.seconds if fits else 0
    text = "\n".join(lines)
    print(text, flush=True)
    return text


# ------------------------------------------------------------------------------------------- device run

class Deadline:
    """SIGTERM to this process at `at` (monotonic): run_experiment then stops its runs (they save and return
    'interrupted') and raises Interrupted; what finished before is recorded."""

    def __init__(self, budget_s: float):
        self.at = time.monotonic() + budget_s
        self.timer = threading.Timer(budget_s, lambda: os.kill(os.getpid(), signal.SIGTERM))
        self.timer.daemon = True
        self.timer.start()

    def left(self) -> float:
        return self.at - time.monotonic()


def record_logs(exp) -> None:
    """save_records (config.json, result.json) plus each finished run's log.jsonl in its record."""
    from interp.training.results import is_done, save_records

    save_records(exp)
    for v, seed, cfg in exp.configs():
        run, record = exp.run_dir(v, seed), exp.record_dir(v, seed)
        log = run / "log.jsonl"
        if is_done(run, cfg) and log.is_file() and record is not None and record.is_dir():
            text = log.read_text()
            if not (record / "log.jsonl").is_file() or (record / "log.jsonl").read_text() != text:
                write_text_atomic(record / "log.jsonl", text)


def pack(figures_dir: Path, out: Path, names: list[str]) -> None:
    """figures_dir/records/<names> -> out/records.tar.gz (paths relative to the repository: untar at its root)."""
    records = figures_dir / RECORDS_DIR
    present = [records / n for n in names if (records / n).exists()]

    def write(path: Path) -> None:
        with tarfile.open(path, "w:gz") as tar:
            for p in present:
                tar.add(p, arcname=str(p.relative_to(figures_dir.parent)))

    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out, {"records.tar.gz": write})


def calibrate(cfg: study.Config, figures_dir: Path, data, levels: tuple[int, ...], steps: int, root: Path) -> dict:
    """Aggregate tokens/s of k uniform tiny runs trained at once, for each k in levels (scratch runs under root)."""
    from interp.jobs.runs import train_in_processes

    exp = study.experiments(cfg, figures_dir)["groups"]
    base = exp.configs()[0][2]
    out = {}
    for k in levels:
        configs = [dataclasses.replace(base, steps=steps, warmup_steps=min(base.warmup_steps, steps),
                                       eval_interval=steps, ckpt_interval=steps, eval_batches=1, seed=i, resume=False,
                                       out_dir=str(root / f"calibration-k{k}-{time.time_ns()}" / f"seed{i}"))
                   for i in range(k)]
        t0 = time.perf_counter()
        outcomes = train_in_processes(configs, k, data)
        wall = time.perf_counter() - t0
        rates = [o.result.get("tokens_per_s") for o in outcomes if o is not None and o.result]
        if len(rates) < k:
            raise RuntimeError(f"calibration with {k} runs at once failed: {[o and o.error for o in outcomes]}")
        tokens = k * steps * base.batch_size * base.n_ctx
        out[k] = {"steady_tokens_per_s": sum(rates), "wall_s": wall, "wall_tokens_per_s": tokens / wall}
        print(f"[gpu_study] calibration: {k} at once: {sum(rates):,.0f} tokens/s together in steady state, "
              f"{tokens / wall:,.0f} over the {wall:.1f} s wall", flush=True)
    return out


def train_stage(name: str, exp, data, jobs: int, rate: float, deadline: Deadline, figures_dir: Path, out: Path,
                pack_names: list[str], log: list) -> str:
    """Train the stage's unfinished runs one seed at a time while the estimate fits; returns how it ended."""
    from interp.jobs.training import run_experiment
    from interp.training.results import finished_dir

    for seed in exp.seeds:
        sub = dataclasses.replace(exp, seeds=[seed])
        todo = [c for v, s, c in sub.configs() if finished_dir(sub, v, s, c) is None]
        if not todo:
            continue
        tokens = todo[0].steps * todo[0].batch_size * todo[0].n_ctx
        estimate = math.ceil(len(todo) / jobs) * (jobs * tokens / rate + RUN_OVERHEAD_S)
        if estimate > deadline.left():
            return f"stopped before seed {seed}: ~{estimate:.0f} s needed, {deadline.left():.0f} s left"
        t0 = time.perf_counter()
        report = run_experiment(sub, data=data, jobs=min(jobs, len(todo)))
        record_logs(sub)
        pack(figures_dir, out, pack_names)
        log.append({"stage": name, "seed": seed, "runs": len(todo), "jobs": jobs, "wall_s": time.perf_counter() - t0,
                    "statuses": report.table()["status"].tolist()})
    return "done"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit")
    p.add_argument("--prepare", action="store_true", help="tokenize the data into --data (on the CPU machine)")
    p.add_argument("--smoke", action="store_true", help="micro shapes and steps: the whole path on a CPU")
    p.add_argument("--budget-s", type=float, default=540.0, help="stop starting runs past this (seconds)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"subset of {','.join(STAGES)}, in priority order")
    p.add_argument("--jobs", default="auto", help="runs at once: auto (calibrated) or a number")
    p.add_argument("--levels", default="1,2,4", help="runs at once tried by the calibration")
    p.add_argument("--calibration-steps", type=int, default=150)
    p.add_argument("--tokens-per-s", default="", help="assumed aggregate rates for --dry-run, e.g. tiny=1.2e6,"
                   "wide=3e5,440m=1.4e5 (the device measures tiny)")
    p.add_argument("--scale", type=float, default=10.0, help="tokens per run / the CPU study's")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--wide-seeds", type=int, default=3)
    p.add_argument("--check-steps", type=int, default=200, help="steps of the 440m trainer check")
    p.add_argument("--data", default=DATA_DIR)
    p.add_argument("--figures-dir", default=str(REPO / "figures"))
    p.add_argument("--root", default="repo:runs")
    p.add_argument("--out", default=os.environ.get("OUT", "/tmp/gpu_study_out"))
    a = p.parse_args(argv)
    data_dir, figures_dir, out = Path(a.data), Path(a.figures_dir), Path(a.out)
    if a.prepare:
        prepare(data_dir, **({"source": "wiki", "vocab": 384, "check": False} if a.smoke else {}))
        return 0
    stages = tuple(s for s in a.stages.split(",") if s)
    if set(stages) - set(STAGES):
        p.error(f"--stages: unknown {sorted(set(stages) - set(STAGES))}; choose from {STAGES}")
    if a.smoke:
        stages = tuple(s for s in stages if s != "trainer-check")   # planned only: never on a CPU
    meta_path = data_dir / ENGLISH / "data.json"
    train_tokens = json.loads(meta_path.read_text())["n_tokens"]["train"] if meta_path.is_file() else None
    cfg = study.Config(scale=a.scale, seeds=a.seeds, wide_seeds=a.wide_seeds, root=a.root, smoke=a.smoke,
                       train_tokens=train_tokens)
    rates = {**ASSUMED, **{k: float(v) for k, v in (kv.split("=") for kv in a.tokens_per_s.split(",") if kv)}}
    fixed = None if a.jobs == "auto" else int(a.jobs)
    jobs = {"tiny": fixed or 4, "wide": fixed or 2}
    if a.dry_run:
        if train_tokens is None:
            print(f"[gpu_study] {meta_path} not found: run --prepare first (epochs unknown until then)")
        print_plan(stage_plan(cfg, figures_dir, rates, jobs, stages, a.check_steps), a.budget_s, rates, jobs,
                   "assumed rates" if not a.tokens_per_s else "given rates")
        return 0
    return run(a, cfg, stages, data_dir, figures_dir, out, rates, jobs, fixed)


def run(a, cfg, stages, data_dir, figures_dir, out, rates, jobs, fixed) -> int:
    from interp._util.children import Interrupted
    from interp._util.provenance import hardware, hardware_label
    from interp.training.results import finished_dir

    deadline = Deadline(a.budget_s)
    signal.signal(signal.SIGTERM, _raise_interrupted)   # the deadline outside run_experiment (which has its own)
    started = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    data = load_data(data_dir)
    exps = study.experiments(cfg, figures_dir)
    names = [exps["tiny"].name, exps["wide"].name, study.CHECK_DIR, study.CALLS_DIR]
    device = "cuda" if _cuda() else "cpu"
    call = {"started": started, "device": device, "hardware": hardware_label(device, hardware()),
            "budget_s": a.budget_s, "stages": list(stages), "log": [], "ended": {}}
    call_file = figures_dir / RECORDS_DIR / study.CALLS_DIR / f"{started}.json"
    root = Path(exps["tiny"].root)

    def save_call() -> None:
        write_json_atomic(call_file, call)
        pack(figures_dir, out, names)

    try:
        tiny_todo = any(finished_dir(e, v, s, c) is None for k in ("groups", "schedules") if k in stages
                        for e in [exps[k]] for v, s, c in e.configs())
        if fixed is None and tiny_todo:
            levels = tuple(int(x) for x in a.levels.split(","))
            steps = 2 if cfg.smoke else a.calibration_steps
            call["calibration"] = cal = calibrate(cfg, figures_dir, data, levels, steps, root / "gpu-calibration")
            best = max(cal, key=lambda k: cal[k]["steady_tokens_per_s"])
            jobs = {"tiny": best, "wide": max(1, best // 2)}
            rates["tiny"] = cal[best]["steady_tokens_per_s"]
            rates["wide"] = rates["wide"] if not cfg.smoke else rates["tiny"]
        call["jobs"], call["rates"] = jobs, rates
        plan = stage_plan(cfg, figures_dir, rates, jobs, stages, a.check_steps)
        call["plan"] = print_plan(plan, deadline.left(), rates, jobs, f"measured on {call['hardware']}")
        save_call()
        for name in stages:
            shape = "wide" if name == "wide" else "tiny"
            if name == "trainer-check":
                call["ended"][name] = check_stage(a, data_dir, figures_dir, deadline, rates)
            else:
                call["ended"][name] = train_stage(name, exps[name], data, jobs[shape], rates[shape], deadline,
                                                  figures_dir, out, names, call["log"])
            save_call()
    except Interrupted:
        call["ended"]["deadline"] = f"stopped at the budget ({a.budget_s:.0f} s): the runs in flight are lost"
    finally:
        deadline.timer.cancel()
        for key in ("groups", "schedules", "wide"):
            if key in exps:
                record_logs(exps[key])
        save_call()
    print(f"[gpu_study] done: {call['ended']}; records packed into {out / 'records.tar.gz'}", flush=True)
    return 0


def _raise_interrupted(signum, frame):
    from interp._util.children import Interrupted

    raise Interrupted(signum)


# ------------------------------------------------------------------------------------ the trainer check

def _run(cmd: list[str], timeout: float, log: Path, kill_when=None) -> int:
    """Run `cmd` in its own process group, its output into `log` (and ours); kill the whole group at the timeout,
    on any exception, or with SIGKILL as soon as kill_when() is true. Returns the exit status (-9: killed)."""
    print(f"[gpu_study] $ {' '.join(cmd)}", flush=True)
    lines: list[str] = []
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    reader = threading.Thread(target=lambda: [lines.append(x) or print(x, end="", flush=True) for x in proc.stdout],
                              daemon=True)
    reader.start()
    end = time.monotonic() + timeout
    try:
        while proc.poll() is None:
            if time.monotonic() > end or (kill_when is not None and kill_when()):
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        reader.join(timeout=5)
        write_text_atomic(log, "".join(lines))
    return proc.returncode


def _train_losses(run: Path) -> dict[int, float]:
    """step -> train loss from log.jsonl, the last entry of each step (a resumed run logs some steps twice)."""
    out = {}
    for line in (run / "log.jsonl").read_text().splitlines() if (run / "log.jsonl").is_file() else []:
        row = json.loads(line)
        if row.get("kind") == "train":
            out[int(row["step"])] = float(row["loss"])
    return out


def compare_runs(full: Path, resumed: Path, kill_step: int) -> dict:
    """The resumed run against the uninterrupted one: the largest |train loss difference| before the save both
    passed unbroken (the GPU's own run-to-run spread) and after it, the final val losses and weights."""
    a, b = _train_losses(full), _train_losses(resumed)
    common = sorted(set(a) & set(b))
    before = [abs(a[s] - b[s]) for s in common if s <= kill_step]
    after = [abs(a[s] - b[s]) for s in common if s > kill_step]
    ra, rb = (json.loads((r / "result.json").read_text()) if (r / "result.json").is_file() else {}
              for r in (full, resumed))
    return {"steps_compared": len(common), "max_abs_loss_diff_before_save": max(before, default=None),
            "max_abs_loss_diff_after_resume": max(after, default=None),
            "val_loss_full": ra.get("val_loss"), "val_loss_resumed": rb.get("val_loss"),
            "weights_equal": bool(ra.get("weights_sha256")) and ra.get("weights_sha256") == rb.get("weights_sha256"),
            "status_full": ra.get("status"), "status_resumed": rb.get("status")}


def _median_rate(run: Path, skip: int = 20) -> float | None:
    """Median tokens/s of the log's train lines after the first `skip` steps (compilation left out)."""
    rates = sorted(json.loads(x)["tokens_per_s"] for x in (run / "log.jsonl").read_text().splitlines()
                   if '"train"' in x and json.loads(x)["step"] > skip) if (run / "log.jsonl").is_file() else []
    return rates[len(rates) // 2] if rates else None


def check_stage(a, data_dir: Path, figures_dir: Path, deadline: Deadline, rates: dict) -> str:
    """The 440m preset through `interp train` (torchrun, 1 GPU, FSDP2 + compile, bf16, fused AdamW, 8 x 4096 per
    step): an uninterrupted run of --check-steps, a second run SIGKILLed 10 steps after its mid-way save and
    resumed, their losses compared; bench_gpu_scale's fsdp+compile beside it on the same machine."""
    record = figures_dir / RECORDS_DIR / study.CHECK_DIR
    if (record / "check.json").is_file():
        return "done already (recorded)"
    n, half = a.check_steps, a.check_steps // 2
    estimate = 2 * n * 8 * 4096 / rates["440m"] + CHECK_FIXED_S
    if estimate > deadline.left():
        return f"not started: ~{estimate:.0f} s needed, {deadline.left():.0f} s left"
    work = Path(study.resolve_root(a.root)) / "gpu-check"
    if work.exists():
        shutil.rmtree(work)   # a fresh machine has none; a rerun here starts the check over
    work.mkdir(parents=True)
    bench = [sys.executable, "benchmarks/bench_gpu_scale.py", "--variants", "fsdp+compile"]
    train = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1", "-m", "interp.cli",
             "train", "--preset", "440m", "--parallel", "fsdp", "--compile", "--fused-adamw", "--grad-accum", "1",
             "--batch-size", "8", "--steps", str(n), "--eval-interval", str(n), "--eval-batches", "4",
             "--ckpt-interval", str(half), "--log-interval", "5", "--no-progress",
             "--source", str((data_dir / CHECK_TOKENS).resolve())]
    full, part = work / "full", work / "resumed"

    def past_save() -> bool:
        steps = _train_losses(part)
        return (part / "train_state.pt").is_file() and bool(steps) and max(steps) >= half + 10

    res = {"bench_rc": _run(bench, min(200, deadline.left()), work / "bench.log")}
    m = re.search(r"fsdp\+compile: ([\d,]+) tokens/s", (work / "bench.log").read_text())
    res["bench_tokens_per_s"] = float(m.group(1).replace(",", "")) if m else None
    res["full_rc"] = _run(train + ["--out", str(full)], deadline.left(), work / "full.log")
    res["killed_rc"] = _run(train + ["--out", str(part)], deadline.left(), work / "killed.log", kill_when=past_save)
    res["resume_rc"] = _run(train + ["--out", str(part), "--resume"], deadline.left(), work / "resume.log")
    res.update(compare_runs(full, part, half + 10))
    res["trainer_tokens_per_s"] = _median_rate(full)
    if res["trainer_tokens_per_s"] and res["bench_tokens_per_s"]:
        res["trainer_over_bench"] = res["trainer_tokens_per_s"] / res["bench_tokens_per_s"]
    res.update(steps=n, save_step=half, killed_after_step=half + 10, command=" ".join(train))
    ok = res["status_full"] == res["status_resumed"] == "done"
    # only a finished check counts as done (check.json); an attempt that failed is kept beside it and retried
    files = {("check.json" if ok else f"attempt-{int(time.time())}.json"):
             lambda p: p.write_text(json.dumps(res, indent=2) + "\n")}
    for tag, run in (("full", full), ("resumed", part)):
        for f in ("config.json", "result.json", "log.jsonl"):
            if (run / f).is_file():
                files[f"{tag}.{f}"] = lambda p, src=run / f: shutil.copyfile(src, p)
    for f in ("bench.log", "full.log", "killed.log", "resume.log"):
        files[f] = lambda p, src=work / f: shutil.copyfile(src, p)
    atomic_write(record, files)
    return (f"done: resume {'bit-identical' if res['weights_equal'] else 'not bit-identical'}, max |dloss| "
            f"{res['max_abs_loss_diff_before_save']} before / {res['max_abs_loss_diff_after_resume']} after; "
            f"Trainer/bench tokens/s {res.get('trainer_over_bench')}")


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


if __name__ == "__main__":
    sys.exit(main())
