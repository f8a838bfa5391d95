"""Benchmarks: the shared plumbing (unit tests) and each script at --quick sizes (smoke tests).

The smoke tests check that a script runs end to end and prints a complete section; the numbers at
toy sizes mean nothing and are not asserted.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from benchmarks import common
from benchmarks.common import Spread
from interp._util.paths import REPO_ROOT

# ------------------------------------------------------------------------------------ statistics

def test_spread_matches_numpy_percentiles():
    values = [3.0, 1.0, 4.0, 1.5, 9.0, 2.6, 5.0]
    s = Spread.of(values)
    q25, q50, q75 = np.percentile(values, [25, 50, 75])  # linear interpolation = "inclusive" quantiles
    assert (s.median, s.q25, s.q75) == pytest.approx((q50, q25, q75))
    assert (s.lo, s.hi, s.n) == (1.0, 9.0, 7)
    assert Spread.of([2.5]) == Spread(2.5, 2.5, 2.5, 2.5, 2.5, 1)
    assert s.fmt(".1f") == f"{q50:.1f} [{q25:.1f}, {q75:.1f}]"
    with pytest.raises(ValueError, match="no values"):
        Spread.of([])


def test_paired_ratios_pairs_by_position():
    assert common.paired_ratios([2.0, 3.0], [1.0, 4.0]) == [2.0, 0.75]
    with pytest.raises(ValueError, match="pairs must match"):
        common.paired_ratios([1.0], [1.0, 2.0])


def test_interleave_orders_are_abba():
    assert common.interleave_orders(["A", "B"], 4) == [["A", "B"], ["B", "A"], ["B", "A"], ["A", "B"]]
    orders = common.interleave_orders(["A", "B", "C"], 6)
    assert all(sorted(o) == ["A", "B", "C"] for o in orders)
    assert sorted(o[0] for o in orders) == ["A", "A", "B", "B", "C", "C"]  # each variant leads equally often


def test_interleave_runs_variants_in_that_order():
    calls: list[str] = []
    variants = {name: (lambda name=name: calls.append(name)) for name in ("A", "B")}
    times = common.interleave(variants, reps=4, warmup=1)
    assert calls == ["A", "B"] + [n for order in common.interleave_orders(["A", "B"], 4) for n in order]
    assert {k: len(v) for k, v in times.items()} == {"A": 4, "B": 4}
    assert all(t >= 0 for v in times.values() for t in v)
    with pytest.raises(ValueError, match="reps >= 1"):
        common.interleave(variants, reps=0)


# --------------------------------------------------------------------------------------- reports

def test_markdown_table_and_cells():
    table = common.markdown_table([{"a": 1234, "b": 0.012345, "c": "x|y"}, {"a": 5, "b": 1234.5}])
    assert table.splitlines() == ["| a | b | c |", "|---|---|---|", "| 1,234 | 0.0123 | x\\|y |",
                                  "| 5 | 1,234 |  |"]
    assert common.cell(float("nan")) == "n/a" and common.cell(None) == "" and common.cell(True) == "True"


def test_update_results_replaces_only_its_section(tmp_path):
    path = tmp_path / "RESULTS.md"
    common.update_results({"bench_a": "## A\nold a", "bench_b": "## B\nold b"}, path)
    first = path.read_text()
    assert first.startswith("# Benchmark results") and first.index("old a") < first.index("old b")
    common.update_results({"bench_a": "## A\nnew a $1 \\1"}, path)  # regex-special text stays literal
    text = path.read_text()
    assert "old a" not in text and "new a $1 \\1" in text and "old b" in text
    assert text.count("<!-- bench_a:begin -->") == 1 and text.index("new a") < text.index("old b")
    common.update_results({"bench_c": "## C"}, path)
    assert path.read_text().rstrip().endswith("<!-- bench_c:end -->")


def test_report_renders_header_tables_and_checks():
    report = common.Report("bench_x", "X (bench_x)", "python benchmarks/bench_x.py", quick=True)
    report.section("part one")
    report.table([{"k": 1}])
    report.check("speed", "1.01", ">= 0.95", True)
    report.check("memory", "failed", "<= 1.10", None)
    text = report.render()
    for piece in ("## X (bench_x)", "`python benchmarks/bench_x.py`", "load average", f"torch {torch.__version__}",
                  "threads", "### part one", "| k |", "### Requirements", "PASS (quick sizes", "| n/a |"):
        assert piece in text, piece


# ---------------------------------------------------------------------------------------- memory

_RSS_CHECK = """
import numpy as np
from benchmarks import common
before = common.rss()
block = np.ones(64 * 2**20, dtype=np.uint8)  # 64 MiB, touched
during = common.rss()
assert during["rss"] - before["rss"] >= 60 * 2**20, (before, during)
assert during["peak"] >= during["rss"]
del block
if common.reset_peak_rss():
    after = common.rss()
    assert after["peak"] < during["peak"] - 60 * 2**20, (during, after)  # the high-water mark forgot the block
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux-only")
def test_rss_peak_tracks_an_allocation_and_resets():
    """In a fresh process: in a pytest worker that has run other files, a 64 MiB block can come from memory the
    process already holds (RSS did not move once under make test), which says nothing about rss()."""
    proc = subprocess.run([sys.executable, "-c", _RSS_CHECK], cwd=REPO_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_tensor_bytes_counts_shared_storage_once():
    from benchmarks.bench_probes import tensor_bytes

    a = torch.zeros(10, 4)             # 160 bytes
    b = torch.zeros(3, dtype=torch.float64)  # 24 bytes
    cache = {"x": a, "view": a[2:], "nested": [b, (a.T,)], "skip": "text"}
    assert tensor_bytes(cache) == 160 + 24


# ------------------------------------------------------------------------------------ subprocesses

def test_bench_jobs_quick():
    from benchmarks import bench_jobs

    text = bench_jobs.main(["--quick", "--threads", "2"])
    _assert_complete(text, "one after another (jobs=1) vs at once (jobs=2)", "in-run tokens/s")


@pytest.mark.slow
def test_bench_hub_quick():
    """bench_hub's three measurements run (toy sizes: a tiny Llama in bf16 and under a disk device map, a 2-revision
    series served by the loopback hub) and its table says which requirement each checks."""
    from benchmarks import bench_hub

    text = bench_hub.main(["--quick", "--threads", "1"])
    for piece in ("--model-dtype bfloat16", "--device-map", "fresh table, cached snapshots", "probe share"):
        assert piece in text


def test_bench_cpu_kernels_quick():
    """Both modes in fresh processes; the portable one must report portable kernels (its Requirements row)."""
    from benchmarks import bench_cpu_kernels

    text = bench_cpu_kernels.main(["--quick", "--threads", "2"])
    _assert_complete(text, "fp32 bits per op", "Portable / native tokens/s")
    assert "| portable kernels in effect in the portable worker | portable | portable | PASS" in text


@pytest.mark.integration
def test_run_worker_parses_result_and_reports_failures(tmp_path):
    ok = tmp_path / "ok.py"
    ok.write_text(f"print('noise')\nprint({common.RESULT_PREFIX!r} + '{{\"x\": 1}}')\n")
    assert common.run_worker(ok, [], timeout=1800) == {"x": 1}
    bad = tmp_path / "bad.py"
    bad.write_text(textwrap.dedent("""
        import sys
        print("partial output")
        sys.exit("worker broke: no model")
    """))
    assert common.run_worker(bad, [], timeout=1800) == {"error": "exit status 1: worker broke: no model"}
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(30)\n")
    assert common.run_worker(slow, [], timeout=1) == {"error": "timed out after 1 s"}


# ------------------------------------------------------------------------------ benchmark pieces

def test_strip_hookpoints_keeps_outputs_and_removes_every_hookpoint():
    from benchmarks.bench_hooks import count_hookpoints, strip_hookpoints
    from tests.factories import TWO_LAYERS, tiny_lm

    model = tiny_lm(vocab_size=50, **TWO_LAYERS)
    n = count_hookpoints(model)
    assert n == len(model.hook_dict) > 0
    tokens = torch.randint(0, 50, (2, 8))
    expected = model(tokens)
    fired = []
    model.blocks[0].hook_resid_pre.add_hook(lambda x, hook: fired.append(1))
    model(tokens)
    assert fired == [1]
    assert strip_hookpoints(model) == n and count_hookpoints(model) == 0
    assert torch.equal(model(tokens), expected)
    assert fired == [1]  # the removed HookPoint (and its hook) is no longer called


def test_bare_trainer_step_matches_trainer_loss_definition():
    """The bare loop's loss = mean next-token cross-entropy, computed independently from the logits."""
    from benchmarks.bench_train import BareTrainer, base_config, synthetic_data

    cfg = base_config("micro", threads=1)
    data = synthetic_data(cfg.vocab_size, n_tokens=2_000)
    runner = BareTrainer(cfg, data.vocab_size)
    batch = data.sample_batch("train", 2, cfg.n_ctx, torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = runner.model(batch[:, :-1])
        logp = torch.log_softmax(logits.double(), -1)
        expected = -logp.gather(-1, batch[:, 1:, None]).mean().item()
    before = [p.detach().clone() for p in runner.model.parameters()]
    assert runner.step(batch, 0) == pytest.approx(expected, rel=1e-5)
    assert any(not torch.equal(a, p) for a, p in zip(before, runner.model.parameters()))  # it trained


# --------------------------------------------------------------------------------- smoke: --quick

def _assert_complete(text: str, *pieces: str) -> None:
    for piece in ("load average", "threads", "--quick", "### Requirements", *pieces):
        assert piece in text, piece


def test_bench_hooks_quick():
    from benchmarks import bench_hooks

    text = bench_hooks.main(["--quick", "--threads", "1"])
    _assert_complete(text, "HookPoint overhead", "forward + backward", "us per call")


def test_bench_train_quick(tmp_path):
    from benchmarks import bench_train

    text = bench_train.main(["--quick", "--threads", "1"])
    _assert_complete(text, "(a) Tapered vs uniform", "(b) interp.training.Trainer", "(c) bf16", "(d) Matmul peak", "MFU")


@pytest.mark.integration
def test_bench_probes_quick():
    from benchmarks import bench_probes

    text = bench_probes.main(["--quick", "--threads", "1"])
    _assert_complete(text, "(a) Streaming probe", "(b) Probe vs TransformerLens")
    for method in bench_probes.METHODS:
        assert f"| {method} | 64 |" in text, method
    assert "failed" not in text


def test_run_all_quick_only_hooks(capsys):
    from benchmarks import run_all

    sections = run_all.main(["--quick", "--only", "hooks"])
    assert list(sections) == ["bench_hooks"]
    assert "benchmark(s) in" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_all.main(["--only", "nope"])
