#!/usr/bin/env bash
# Everything issue #15 (and the --device options) still needs a GPU for, as ONE device call:
#
#     scripts/gpu_wheels.sh                         # here, first: the pure-Python wheels into .whl/
#     run(command="bash scripts/gpu_check.sh", carry=[".whl"], timeout_s=500)   # the device tool
#
# 1. installs .whl/ into /tmp/site (that machine has its own torch and no package index);
# 2. the 440m benchmark, uniform, four variants (ddp, fsdp, each with and without compile): tokens/s, MFU;
# 3. the same shape with the cosine 1.5 -> 0.5 taper beside uniform (ddp, fsdp; no compile: 24 widths recompile);
# 4. the CUDA tests that skip on CPU: probes, pretrained ablation, interp eval (gpu_matches_cpu).
# Every step has its own time limit and prints as it goes, so a call stopped at its limit still returns what
# it measured; everything lands in $OUT (logs, benchmarks/RESULTS.md): copy the two bench_gpu_scale sections of
# $OUT/RESULTS.md into benchmarks/RESULTS.md here. Budget: 270 + 140 + 60 s of limits, plus the install (~8 min at most).
# On a machine without CUDA each benchmark says so and exits 0, and the tests skip (how this script is tested).
set -uo pipefail
PY=${PY:-python3}
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
if [[ "${SKIP_INSTALL:-0}" != 1 ]]; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || { echo "gpu_check: installing .whl/ failed: run scripts/gpu_wheels.sh here and carry .whl"; exit 2; }
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
(nvidia-smi -L || echo "gpu_check: no nvidia-smi") 2>&1 | tee "$OUT/gpu.txt"
step() {  # step NAME LIMIT_S COMMAND...: run with a limit, log to $OUT/NAME.log, report the status, go on
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s): $*"
    timeout "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
    echo "== $name: exit ${PIPESTATUS[0]}"
}
step bench_uniform 270 "$PY" benchmarks/bench_gpu_scale.py --write
step bench_widths 140 "$PY" benchmarks/bench_gpu_scale.py --widths uniform,cosine:1.5:0.5 --variants ddp,fsdp --write
step cuda_tests 60 "$PY" -m pytest -q -p no:cacheprovider -k gpu_matches_cpu \
    tests/test_probes.py tests/test_ablations.py tests/test_evals_cli.py
cp benchmarks/RESULTS.md "$OUT/RESULTS.md"
echo "gpu_check: done; logs and RESULTS.md in $OUT"
