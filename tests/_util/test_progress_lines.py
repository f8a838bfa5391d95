"""Progress where a bar cannot be seen (issue 36): with stderr not a terminal (nohup, Slurm, a pipe), `interp train`
and `interp probe` print plain lines with an ETA (interp._util.progress), `interp train` ends with one summary line,
and --no-progress keeps them quiet. The commands run as subprocesses with stderr piped, as under nohup."""

from __future__ import annotations

import io
import random
import subprocess
import sys
from pathlib import Path

from interp._util.paths import REPO_ROOT
from interp._util.progress import ProgressLines, format_duration, progress
from tests.factories import save_pretrained_dir, tiny_hf, word_tokenizer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def lines_of(total: int, steps: list[tuple[int, float]], **kw) -> list[str]:
    """The lines a ProgressLines prints for updates (done, seconds since the start)."""
    stream, clock = io.StringIO(), Clock()
    report = ProgressLines(total, "job", "steps", stream=stream, clock=clock, **kw)
    for done, at in steps:
        clock.now = at
        report.update(done, "loss 1.000")
    return stream.getvalue().splitlines()


def test_a_line_per_tenth_of_the_work_with_the_eta():
    lines = lines_of(100, [(i, i * 0.5) for i in range(1, 101)])
    assert [line.split(" | ")[0] for line in lines] == [f"[job] {n}/100 steps ({n}%)" for n in range(10, 101, 10)]
    assert lines[0] == "[job] 10/100 steps (10%) | loss 1.000 | elapsed 5s | ETA 45s"
    assert lines[-1].endswith("| elapsed 50s | ETA 0s")


def test_a_line_every_30_seconds_between_tenths():
    lines = lines_of(1000, [(1, 10.0), (2, 31.0), (3, 40.0), (4, 62.0)])
    assert [line.split(" | ")[0] for line in lines] == ["[job] 2/1000 steps (0%)", "[job] 4/1000 steps (0%)"]
    assert lines[0].endswith("ETA 4h17m")  # 998 steps left at 15.5 s each


def test_a_resumed_loop_counts_its_eta_from_this_session():
    stream, clock = io.StringIO(), Clock()
    report = ProgressLines(100, "job", done=50, stream=stream, clock=clock)
    clock.now = 20.0
    report.update(60)
    assert stream.getvalue().strip().endswith("| elapsed 20s | ETA 1m20s")  # 10 done in 20 s, 40 left


def test_durations_and_the_kinds_of_progress():
    assert [format_duration(s) for s in (0, 59.4, 185, 7620, float("inf"))] == ["0s", "59s", "3m05s", "2h07m", "?"]
    assert isinstance(progress(10, "job", stream=io.StringIO()), ProgressLines)  # not a terminal: lines
    silent = progress(10, "job", enabled=False, stream=io.StringIO())
    silent.update(10)
    assert not isinstance(silent, ProgressLines)


# ------------------------------------------------------------------------------------------ the commands

def command(*argv: str, env: dict | None = None, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """`interp ARGV` in a fresh interpreter, stdout and stderr piped (not terminals)."""
    return subprocess.run([sys.executable, "-m", "interp.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)


def train_args(env, out: Path, *extra: str) -> list[str]:
    return ["train", "--preset", "micro", "--source", str(env[0]), "--val-fraction", "0.25", "--threads", "1",
            "--steps", "6", "--out", str(out), *extra]


def test_train_prints_progress_lines_and_a_summary(env, tmp_path):
    proc = command(*train_args(env, tmp_path / "run"), env=env[1])
    assert proc.returncode == 0, proc.stderr
    progress_lines = [line for line in proc.stderr.splitlines() if line.startswith(f"[train {tmp_path / 'run'}]")]
    assert progress_lines and all(" steps (" in line and "tok/s" in line and "| ETA " in line
                                  for line in progress_lines)
    assert progress_lines[-1].startswith(f"[train {tmp_path / 'run'}] 6/6 steps (100%) | loss ")
    summary = proc.stdout.strip().splitlines()[-1]
    assert summary.startswith("[train] done: 6/6 steps, val_loss ") and "(ppl " in summary
    assert summary.endswith(f"-> {tmp_path / 'run'}")
    again = command(*train_args(env, tmp_path / "run"), env=env[1])  # finished: nothing trained, still summed up
    assert again.returncode == 0 and "ETA" not in again.stderr
    assert again.stdout.strip().startswith("[train] done already, nothing trained: 6/6 steps, val_loss ")


def test_train_no_progress_is_quiet_but_still_sums_up(env, tmp_path):
    proc = command(*train_args(env, tmp_path / "run", "--no-progress"), env=env[1])
    assert proc.returncode == 0, proc.stderr
    assert "ETA" not in proc.stderr
    assert proc.stdout.strip().startswith("[train] done: 6/6 steps")


def hf_model_and_text(tmp_path: Path) -> tuple[Path, Path]:
    model = tiny_hf("LlamaForCausalLM", vocab_size=64, d_model=32, d_mlp=64, n_layers=2)
    folder = save_pretrained_dir(tmp_path / "hf", model, word_tokenizer(64, bos_token="[UNK]", eos_token="[UNK]"))
    rng = random.Random(0)
    text = tmp_path / "text.txt"
    text.write_text(" ".join(f"w{rng.randrange(1, 64)}" for _ in range(2000)))
    return folder, text


def test_probe_prints_progress_lines_unless_told_not_to(tmp_path):
    folder, text = hf_model_and_text(tmp_path)
    args = ["probe", "--model", str(folder), "--text", str(text), "--tokens", "256", "--seq-len", "32",
            "--batch-size", "1", "--metrics", "rho_mlp,rho_block", "--threads", "1", "--out", str(tmp_path / "p.csv")]
    proc = command(*args)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("[probe ")]
    assert lines and all(" batches (" in line and "positions/s" in line and "| ETA " in line for line in lines)
    assert " 8/8 batches (100%)" in lines[-1]  # 256 positions in sequences of 32, one per batch
    quiet = command(*args, "--no-progress")
    assert quiet.returncode == 0, quiet.stderr
    assert "ETA" not in quiet.stderr and "[probe] wrote" in quiet.stdout
