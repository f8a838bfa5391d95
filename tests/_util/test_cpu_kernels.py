"""INTERP_CPU_KERNELS (interp._util.cpu_kernels): what it sets, what results record, what it refuses.

The settings are read once by torch's libraries, so every check of what runs uses a fresh process."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from interp._util import cpu_kernels
from interp._util.errors import InputError
from interp._util.paths import REPO_ROOT
from tests.badinput import Case, cases_of, check_case

MICRO = ["train", "--preset", "micro", "--steps", "2", "--out", "runs/x"]
Case("kernels-bad-mode", item="new", argv=MICRO, env={"INTERP_CPU_KERNELS": "fast"}, subprocess=True,
     message=r"interp train: environment variable INTERP_CPU_KERNELS='fast': choose one of native, portable")
Case("kernels-portable-not-in-effect", item="new", argv=MICRO, subprocess=True,
     env={"INTERP_CPU_KERNELS": "portable", "ATEN_CPU_CAPABILITY": "default"},
     message=r"interp train: INTERP_CPU_KERNELS=portable, but the CPU kernels in effect are not: aten is DEFAULT")
Case("kernels-portable-bf16", item="new", argv=[*MICRO, "--dtype", "bf16"], subprocess=True,
     env={"INTERP_CPU_KERNELS": "portable"},
     message=r"interp train: dtype 'bf16' on the CPU under INTERP_CPU_KERNELS=portable: .* Use --dtype fp32")


@pytest.mark.parametrize("case", cases_of("kernels-"), ids=lambda c: c.id)
def test_case(case, tmp_path):
    check_case(case, tmp_path)


def _python(code: str, **env: str) -> dict:
    """Run `code` in a fresh interpreter with env added (the kernel variables removed first); its last stdout
    line as JSON."""
    base = {k: v for k, v in os.environ.items() if k not in cpu_kernels.PORTABLE_ENV and k != cpu_kernels.MODE_VAR}
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env={**base, **env}, capture_output=True,
                          text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


RECORD = ("import json, interp, torch\n"
          "from interp._util.provenance import hardware, hardware_label\n"
          "torch.ones(4).softmax(0)\n"
          "print(json.dumps({'kernels': hardware()['cpu_kernels'], 'label': hardware_label('cpu')}))")
needs_mkl = pytest.mark.skipif(_python("import json, torch; from interp._util.cpu_kernels import mkl_branch; "
                                       "print(json.dumps(mkl_branch()))") is None,
                               reason="this torch build exports no MKL (mkl_cbwr_get): its branch cannot be read")


def test_requested_mode_and_its_errors(monkeypatch):
    monkeypatch.delenv(cpu_kernels.MODE_VAR, raising=False)
    assert cpu_kernels.requested() == "native" and not cpu_kernels.is_portable()
    monkeypatch.setenv(cpu_kernels.MODE_VAR, " Portable ")
    assert cpu_kernels.requested() == "portable" and cpu_kernels.is_portable()
    monkeypatch.setenv(cpu_kernels.MODE_VAR, "avx2")
    with pytest.raises(InputError, match="INTERP_CPU_KERNELS='avx2': choose one of native, portable"):
        cpu_kernels.requested()
    assert not cpu_kernels.is_portable()


def test_request_sets_only_unset_variables(monkeypatch):
    for key in cpu_kernels.PORTABLE_ENV:  # setenv first: monkeypatch then restores the variable (or its absence);
        monkeypatch.setenv(key, "")       # a bare delenv of an unset one records nothing, and what
        monkeypatch.delenv(key)           # request_from_env() sets would leak into every later test's children
    monkeypatch.setenv("MKL_CBWR", "AVX2")
    monkeypatch.setenv(cpu_kernels.MODE_VAR, "native")
    cpu_kernels.request_from_env()
    assert "ATEN_CPU_CAPABILITY" not in os.environ                     # native: nothing set
    monkeypatch.setenv(cpu_kernels.MODE_VAR, "portable")
    cpu_kernels.request_from_env()
    assert os.environ["ATEN_CPU_CAPABILITY"] == "avx2" and os.environ["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert os.environ["MKL_CBWR"] == "AVX2"                             # the user's own value is left alone
    monkeypatch.setenv(cpu_kernels.MODE_VAR, "bogus")
    cpu_kernels.request_from_env()                                      # importing interp never fails on it


def test_bf16_is_never_native_under_portable(monkeypatch):
    import torch

    from interp.training.step import bf16_is_native, compute_dtype

    monkeypatch.setenv(cpu_kernels.MODE_VAR, "portable")
    assert not bf16_is_native(torch.device("cpu"))
    assert compute_dtype("auto", torch.device("cpu")) == torch.float32
    with pytest.raises(InputError, match="cannot be portable"):
        compute_dtype("bf16", torch.device("cpu"))


@needs_mkl
def test_portable_is_what_runs_and_what_results_record():
    native = _python(RECORD)
    portable = _python(RECORD, INTERP_CPU_KERNELS="portable")
    assert portable["kernels"] == {"mode": "portable", **cpu_kernels.PORTABLE_SETTINGS}
    assert portable["label"].endswith(", portable kernels)")
    assert native["kernels"]["mode"] == "native" and native["kernels"]["mkl_cbwr"] != "COMPATIBLE"
    assert "portable" not in native["label"]


@needs_mkl
def test_portable_requested_after_torch_started_is_refused():
    code = ("import os, torch; torch.ones(4).softmax(0); os.environ['INTERP_CPU_KERNELS'] = 'portable'\n"
            "import json, interp\nfrom interp._util import cpu_kernels\n"
            "from interp._util.provenance import hardware, hardware_label\n"
            "out = {'recorded': hardware()['cpu_kernels'], 'label': hardware_label('cpu')}\n"
            "try:\n    cpu_kernels.check()\nexcept ValueError as err:\n    out['error'] = str(err)\n"
            "print(json.dumps(out))")
    got = _python(code)
    assert "INTERP_CPU_KERNELS=portable, but the CPU kernels in effect are not" in got["error"]   # where work starts
    assert "aten is" in got["error"] and "import interp before torch" in got["error"]
    assert got["recorded"]["mode"] == "native" and "portable" not in got["label"]   # recording: what ran


@needs_mkl
def test_a_run_trained_portable_says_so_in_its_tables(tmp_path):
    """End to end: `interp train` under the variable; the run's config and the runs table's hardware cell."""
    env = {**{k: v for k, v in os.environ.items() if k not in cpu_kernels.PORTABLE_ENV},
           cpu_kernels.MODE_VAR: "portable", "INTERP_CACHE_DIR": str(tmp_path / "cache")}
    proc = subprocess.run([sys.executable, "-m", "interp.cli", "train", "--preset", "micro", "--steps", "2",
                           "--out", str(tmp_path / "run")], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=1800)
    assert proc.returncode == 0, proc.stderr
    from interp.training.results import trained_on

    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["provenance"]["hardware"]["cpu_kernels"]["mode"] == "portable"
    assert trained_on(tmp_path / "run").endswith(", portable kernels)")
    assert json.loads((tmp_path / "run" / "result.json").read_text())["dtype"] == "float32"


def test_benchmark_comparison_rows():
    from benchmarks.bench_cpu_kernels import comparison_rows

    mine = {mode: {"ops": {"linear": f"{mode}-l", "softmax": "s"}, "train": {"weights_sha256": f"{mode}-w"}}
            for mode in ("native", "portable")}
    stored = {"other CPU": {"native": {"ops": {"linear": "x", "softmax": "s"}, "train": {"weights_sha256": "y"}},
                            "portable": {"ops": {"linear": "portable-l", "softmax": "s"},
                                         "train": {"weights_sha256": "portable-w"}}},
              "this CPU": {}}
    rows = {r["op"]: r for r in comparison_rows(mine, "this CPU", stored)}
    assert rows["linear"]["native = other CPU?"] == "differs" and rows["linear"]["portable = other CPU?"] == "same"
    assert rows["softmax"]["native = other CPU?"] == "same"
    assert rows["training run: final weights"]["portable = other CPU?"] == "same"
    assert rows["training run: final weights"]["native (this CPU)"] == "native-w"


def test_cpu_kernels_trace_changes_no_bit_and_records_every_stage(tmp_path):
    """The traced run (bench_cpu_kernels.TracingTrainer) ends with the same weights as an untraced one, and its
    trace holds every stage, the first gradients per parameter and one loss per step."""
    from benchmarks import bench_cpu_kernels as b
    from interp.training import train

    traced = b.TracingTrainer(b.train_config("micro", 3, tmp_path / "traced"))
    result = traced.run()
    plain = train(b.train_config("micro", 3, tmp_path / "plain"))
    assert result["weights_sha256"] == plain["weights_sha256"]
    trace = traced.trace
    assert set(b.TRACE_STAGES) <= trace.keys() and len(trace["loss"]) == len(trace["grad_norm"]) == 3
    assert float.fromhex(trace["loss"][-1]) == pytest.approx(plain["train_loss"], rel=1e-6)
    assert sorted(trace["first grads"]) == sorted(n for n, _ in traced.trainer.raw.named_parameters())
    assert "no grad" not in trace["first grads"].values()
    assert trace["init weights"] != trace["weights after step 1"]


def test_cpu_kernels_divergence_names_the_first_differing_stage_step_and_parameters():
    from benchmarks import bench_cpu_kernels as b

    def record(logits="L", grads=None, losses=("a", "b", "c")):
        trace = {"init weights": "I", "first batch": "B", "first logits": logits,
                 "first grads": grads or {"w1": "g1", "w2": "g2"}, "weights after step 1": "W",
                 "loss": list(losses), "grad_norm": ["n"] * len(losses)}
        return {"ops": {"linear": "x"}, "train": {"trace": trace, "weights_sha256": "F"}}

    assert b.divergence(record(), record()) == "every traced stage and every step's loss and grad norm agree"
    text = b.divergence(record(), record(logits="X", grads={"w1": "g1", "w2": "other"}, losses=("a", "z", "c")))
    assert "first differing stage: first logits" in text and "differ in 1 of 2 parameters (w2)" in text
    assert "first step whose loss differs: 2" in text and "whose grad norm differs: none" in text
    assert b.divergence(record(), {"train": {"weights_sha256": "F"}}) == ""  # a record made before tracing
    row = {r["op"]: r for r in b.comparison_rows({"native": record(), "portable": record(logits="P")}, "here",
                                                 {"there": {"native": record(logits="X")}})}
    assert row["training run: first logits"]["native = there?"] == "differs"
    assert row["training run: first batch"]["native = there?"] == "same"
    assert row["training run: first logits"]["portable = there?"] == ""  # the other kind has no portable record


def test_the_portable_label_needs_portable_kernels_and_no_16_bit_forward():
    from interp._util.provenance import hardware_label

    hw = {"cpu": "X", "cores": 2, "cpu_kernels": {"mode": "portable", **cpu_kernels.PORTABLE_SETTINGS}}
    assert hardware_label("cpu", hw).endswith(", portable kernels)")
    assert hardware_label("cpu", hw, dtype="torch.float32").endswith(", portable kernels)")
    for dtype in ("torch.bfloat16", "bf16", "float16"):
        assert "portable" not in hardware_label("cpu", hw, dtype=dtype), dtype
    assert "portable" not in hardware_label("cpu", {**hw, "cpu_kernels": {"mode": "native"}})
    assert "portable" not in hardware_label("cpu", {"cpu": "X", "cores": 2})   # recorded before the field


@needs_mkl
def test_a_resume_with_other_kernels_is_refused(tmp_path):
    """Half native, half portable would be neither: the resume fails before it trains or writes anything."""
    from interp.training import TrainConfig, train

    out = tmp_path / "run"
    env = {k: v for k, v in os.environ.items() if k not in cpu_kernels.PORTABLE_ENV}
    train(TrainConfig.from_preset("micro", steps=4, out_dir=str(out), ckpt_interval=2, progress=False), stop_at=2)
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"}  # the lock: a pid
    proc = subprocess.run([sys.executable, "-m", "interp.cli", "train", "--preset", "micro", "--steps", "4",
                           "--ckpt-interval", "2", "--out", str(out), "--resume"], cwd=REPO_ROOT,
                          env={**env, cpu_kernels.MODE_VAR: "portable"}, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 2, proc.stderr
    assert "trained with native CPU kernels and this resume would continue with portable" in proc.stderr
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name != ".lock"}
    assert sorted(p.name for p in set(after) ^ set(before) | {p for p in before if after.get(p) != before[p]}) == []


def test_values_must_be_one_row_per_sequence():
    import torch

    from interp.probes import NoveltyAccumulator

    acc = NoveltyAccumulator(1, metrics=("rho_mlp",))
    acc.begin_batch(torch.ones(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"values must be \[batch, pos\]"):
        acc.add_values(0, "rho_mlp", torch.zeros(6))
