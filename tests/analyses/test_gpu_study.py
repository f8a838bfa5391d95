"""scripts/gpu_study.py and analyses/gpu_study.py (issue #35) on the CPU: the plan, the whole path at micro scale
(prepare -> calibrate -> train in priority order -> records -> resume from the records -> tables), and the
trainer check's comparison. The study itself and the 440m check run only on a GPU (docs/gpu-study.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pandas as pd
import pytest

from analyses import gpu_study as study
from interp._util.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "gpu_study.py"
# calibration with one spawned run (train_in_processes), then the runs in this process: a few seconds of training
SMOKE = ["--smoke", "--seeds", "2", "--wide-seeds", "2", "--levels", "1"]


def _script(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=False)


def _stage_lines(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.startswith("  ") and "runs to train" in line}


def test_cpu_tokens_per_run_comes_from_the_cpu_records():
    assert study.cpu_tokens_per_run(REPO_ROOT / "figures") == 512_000


def test_dry_run_plans_in_priority_order_with_given_rates(tmp_path):
    proc = _script("--dry-run", "--figures-dir", str(tmp_path / "figures"), "--data", str(tmp_path / "none"),
                   "--budget-s", "300", "--tokens-per-s", "tiny=2e6,wide=5e5,440m=1.4e5")
    assert proc.returncode == 0, proc.stderr
    lines = _stage_lines(proc.stdout)
    assert list(lines) == ["groups", "schedules", "trainer-check", "wide"]
    # 10x the CPU study's 512,000 tokens: 2,500 steps of 8 x 256
    assert "20 of  20 runs" in lines["groups"] and "5,120,000 tokens" in lines["groups"]
    # the schedule cells pair with the uniform runs the groups stage trains: 4 x 5 more, not 5 x 5
    assert "20 of  25 runs" in lines["schedules"]
    # per stage: 5 waves of 4 runs at 2e6 tokens/s together + 12 s each = 111 s; two stages leave 78 s of 300
    assert "~    111 s  [fits]" in lines["groups"] and "~    111 s  [fits]" in lines["schedules"]
    assert "does not fit whole: 78 s left" in lines["trainer-check"]
    assert "does not fit whole: 78 s left" in lines["wide"]   # 3 waves x (2 x 5.12M / 5e5 + 12) = 97 s
    assert "2500 steps x 8 x 256, bf16" in proc.stdout


def test_smoke_trains_records_resumes_and_tabulates(tmp_path):
    figures, data, out = tmp_path / "figures", tmp_path / "data", tmp_path / "out"
    prep = _script("--prepare", "--smoke", "--data", str(data))
    assert prep.returncode == 0, prep.stderr
    common = [*SMOKE, "--figures-dir", str(figures), "--data", str(data), "--out", str(out)]
    first = _script(*common, "--root", str(tmp_path / "runs1"))
    assert first.returncode == 0, first.stdout + first.stderr
    records = figures / "records"
    tiny = sorted(p.parent.name for p in (records / "tiny-gpu-smoke").glob("*/seed1"))
    assert tiny == sorted(["uniform", "wider-early", "wider-middle", "wider-late", "cosine-1.5-0.5",
                           "linear-1.5-0.5", "cosine-1.75-0.25", "linear-1.75-0.25"])
    for run in [*(records / "tiny-gpu-smoke").glob("*/seed*"), *(records / "wide-gpu-smoke").glob("*/seed*")]:
        result = json.loads((run / "result.json").read_text())
        config = json.loads((run / "config.json").read_text())
        assert result["status"] == "done" and result["tokens"] == 3 * 8 * 32
        assert "epochs of the" in config["train"]["notes"]          # the epoch count, in every record
        assert (run / "log.jsonl").read_text().count('"kind": "train"') >= 3
    assert len(list((records / "wide-gpu-smoke").glob("*/seed*"))) == 4
    calls = list((records / "gpu-study-calls").glob("*.json"))
    call = json.loads(calls[0].read_text())
    assert set(call["calibration"]) == {"1"} and call["jobs"]["tiny"] == 1
    assert call["calibration"]["1"]["steady_tokens_per_s"] > 0
    assert call["ended"]["groups"] == call["ended"]["schedules"] == call["ended"]["wide"] == "done"
    assert sum(e["runs"] for e in call["log"]) == 16 + 4     # uniform trained once, shared by both tiny stages
    with tarfile.open(out / "records.tar.gz") as tar:
        packed = tar.getnames()
    assert any(n.endswith("tiny-gpu-smoke/uniform/seed0/log.jsonl") for n in packed)

    # a fresh machine (another --root, no runs/) with the records: nothing is trained again
    second = _script(*common, "--root", str(tmp_path / "runs2"))
    assert second.returncode == 0, second.stdout + second.stderr
    latest = max((records / "gpu-study-calls").glob("*.json"), key=lambda p: p.stat().st_mtime)
    assert json.loads(latest.read_text())["log"] == [] and not (tmp_path / "runs2" / "tiny-gpu-smoke").exists()

    cfg = study.Config(smoke=True, seeds=2, wide_seeds=2, root=str(tmp_path / "runs2"))
    summary = study.compute(cfg, figures)
    assert list(summary["experiment"].unique()) == ["tiny-gpu-smoke", "wide-gpu-smoke"]
    assert len(summary) == 10 and (summary["n_pairs"] == 2).all()
    uniform = summary[summary["variant"] == "uniform"]
    assert (uniform["rel_val_ppl_pct_mean"] == 0).all()
    runs = pd.read_csv(figures / study.RUNS_TABLE)
    assert len(runs) == 20 and (runs["status"] == "done").all() and runs["epochs"].gt(0).all()
    contrasts = pd.read_csv(figures / study.CONTRASTS_TABLE)
    assert list(contrasts["ratio"]) == ["1.5->0.5", "1.75->0.25"] and (contrasts["n_pairs"] == 2).all()
    assert [p.name for p in study.render(figures)] == [study.FIGURE]


def test_analysis_without_gpu_records_says_so(tmp_path, capsys):
    summary = study.compute(study.Config(root=str(tmp_path / "runs")), tmp_path)
    assert summary.empty
    assert "no finished GPU runs" in capsys.readouterr().out
    assert pd.read_csv(tmp_path / study.RUNS_TABLE).empty
    assert (tmp_path / study.FIGURE).exists() is False
    assert [p.name for p in study.render(tmp_path)] == [study.FIGURE]


def _log(run: Path, losses: dict[int, float], sha: str) -> None:
    run.mkdir(parents=True)
    (run / "log.jsonl").write_text("".join(json.dumps({"kind": "train", "step": s, "loss": v, "tokens_per_s": 100.0 * s})
                                           + "\n" for s, v in losses.items()))
    (run / "result.json").write_text(json.dumps({"status": "done", "val_loss": 1.0, "weights_sha256": sha}))


@pytest.mark.parametrize("after, equal", [(0.0, True), (0.25, False)])
def test_trainer_check_comparison(tmp_path, after, equal):
    sys.path.insert(0, str(REPO_ROOT / "scripts"))
    import gpu_study as runner

    full = {s: 5.0 - 0.01 * s for s in range(5, 45, 5)}
    resumed = {s: v + (0.001 if s <= 20 else after) for s, v in full.items()}
    _log(tmp_path / "full", full, "a")
    _log(tmp_path / "resumed", resumed, "a" if equal else "b")
    res = runner.compare_runs(tmp_path / "full", tmp_path / "resumed", kill_step=20)
    assert res["steps_compared"] == 8
    assert res["max_abs_loss_diff_before_save"] == pytest.approx(0.001)
    assert res["max_abs_loss_diff_after_resume"] == pytest.approx(after)
    assert res["weights_equal"] is equal
    assert runner._median_rate(tmp_path / "full", skip=20) == 3500.0
