"""Benchmark scripts (run as files, e.g. `python benchmarks/bench_train.py`); results in RESULTS.md."""
