"""Issue #33, signals and --set: `interp figures --recompute` stopped by SIGTERM while its runs train stops there,
writes no table from the interrupted runs and exits 143 with one line (item 7); `interp figures --set` with a value
the analysis refuses is one line and exit 2 before any work (item 21); a kill -9 of a parent training runs in
child processes leaves no child training (item 9)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.badinput import REPO, Case, cases_of, check_case

Case("signals-figures-set-unknown-arch", item="33.21",
     argv=["figures", "--recompute", "--only", "gain_vs_tokens", "--set", 'archs=["gpt3"]', "--out", "fig"],
     message=r"interp figures: gain_vs_tokens: --set archs=\[\"gpt3\"\]: .*'gpt3'.*(is not a block style|unknown "
             r"block styles).*\['llama', 'gpt2'\]")
Case("signals-figures-set-zero-seeds", item="33.21",
     argv=["figures", "--recompute", "--only", "group_ablation", "--set", "seeds=0", "--out", "fig"],
     message=r"interp figures: group_ablation: --set seeds=0: .*needs at least one variant and one seed")


@pytest.mark.parametrize("case", cases_of("signals-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


def _env(tmp: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(REPO), "INTERP_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1"}


def _wait_for(path_glob, tmp: Path, proc: subprocess.Popen, what: str) -> None:
    deadline = time.time() + 1200   # a hang, not a slow machine
    while time.time() < deadline and proc.poll() is None and not list(tmp.glob(path_glob)):
        time.sleep(0.1)
    assert proc.poll() is None, f"{what}: the command ended before it was signalled: {proc.communicate()}"


@pytest.mark.integration
def test_sigterm_during_figures_recompute_writes_no_table_and_exits_143(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "interp.cli", "figures", "--recompute", "--only", "train_comparison",
         "--set", f'out_root="{tmp_path / "runs"}"', "--set", "steps=400", "--out", str(tmp_path / "fig")],
        cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for("runs/*/log.jsonl", tmp_path, proc, "train_comparison")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=1800)
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1].startswith("interp figures: interrupted by SIGTERM"), err[-2000:]
    assert "Traceback" not in err
    assert not (tmp_path / "fig" / "train_comparison.csv").exists()   # the interrupted runs make no table


@pytest.mark.integration
def test_kill_9_of_the_parent_leaves_no_training_child(tmp_path):
    """A parent running two trainings in child processes (train_in_processes) is killed with SIGKILL: its
    children stop too (PR_SET_PDEATHSIG) instead of training on with nobody to record them."""
    script = tmp_path / "parent.py"
    script.write_text(
        "import sys\n"
        "from interp.training import TrainConfig\n"
        "from interp.jobs.runs import train_in_processes\n"
        "if __name__ == '__main__':\n"
        f"    cfgs = [TrainConfig.from_preset('micro', source='wiki', steps=100000, threads=1, progress=False,\n"
        f"            out_dir=r'{tmp_path}/runs/r' + str(i)) for i in range(2)]\n"
        "    train_in_processes(cfgs, 2)\n")
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=_env(tmp_path),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _wait_for("runs/r*/log.jsonl", tmp_path, proc, "the parent")
    children = [int(p) for p in subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True,
                                                  text=True).stdout.split()]
    assert children, "no child process found"
    proc.kill()
    proc.wait()
    deadline = time.time() + 600
    while time.time() < deadline and any(_alive(pid) for pid in children):
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in children), "a training child outlived its killed parent"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_run_locked_by_a_live_process_is_running_elsewhere_not_failed(tmp_path):
    """Item 9/30: the run's lock held by another live process (an orphan of a killed runner, a second command):
    the runner reports it as running elsewhere, writes no error.txt into it, and says what each status means."""
    run = tmp_path / "R" / "sweep-micro" / "uniform" / "seed0"
    run.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom interp._util.io import exclusive_lock\n"
         f"with exclusive_lock(r'{run / '.lock'}', 'run'):\n    print('held', flush=True)\n    time.sleep(600)\n"],
        env=_env(tmp_path), stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = subprocess.run([sys.executable, "-m", "interp.cli", "experiment", "sweep", "--preset", "micro",
                               "--seeds", "1", "--steps", "1", "--only", "uniform", "--root", "R", "--out", "fig"],
                              cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=1800)
    finally:
        holder.kill()
    text = proc.stdout + proc.stderr
    assert proc.returncode == 1, text[-3000:]
    assert "running elsewhere uniform seed0: another live process holds" in text, text[-3000:]
    assert "FAILED" not in text and not (run / "error.txt").exists()
